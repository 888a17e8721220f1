//! `offload prune` on CUDA files built with nvcc 13.5, checked with NVIDIA's
//! `cuobjdump` and `nvlink` (through nvcc): objects, relocatable-device-code
//! objects, a shared library, an executable, a static archive and a
//! standalone `.fatbin`, each pruned to `sm_80` cubins and `compute_90`
//! PTX. cuobjdump must list exactly the kept entries, with the bytes it
//! extracts from the input; pruned objects must still link. NVIDIA's own
//! `nvprune` is not on PyPI, so there is no comparison with it here.
//! The tools come from `scripts/install-cuda-tools.sh`; without them the
//! tests are ignored, unless `OFFLOAD_REQUIRE_CUDA=1` (CI).

use crate::common;
use crate::cuda_support;

use cuda_support::{assert_tools, cuda_bin};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

const MULTI: &str = "-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
                     -gencode arch=compute_90,code=[sm_90,compute_90]";

/// The corpus, built once per run.
fn corpus() -> &'static Path {
    static CORPUS: OnceLock<tempfile::TempDir> = OnceLock::new();
    CORPUS
        .get_or_init(|| {
            let bin = cuda_bin();
            assert_tools("CUDA prune tests", &[bin.join("nvcc"), bin.join("cuobjdump")]);
            let dir = tempfile::tempdir().unwrap();
            let script = format!(
                r#"set -euo pipefail
nvcc="{bin}/nvcc"
cat > kern.cu <<'CU'
__global__ void scale(float *x, float a, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}}
void launch_scale(float *x, float a, int n) {{ scale<<<(n + 255) / 256, 256>>>(x, a, n); }}
CU
cat > main.cu <<'CU'
void launch_scale(float *, float, int);
__global__ void fill(float *x, int n) {{ if (threadIdx.x < n) x[threadIdx.x] = 1.0f; }}
int main() {{ fill<<<1, 32>>>(nullptr, 0); launch_scale(nullptr, 2.0f, 0); return 0; }}
CU
"$nvcc" -c kern.cu {MULTI} -o obj.o
"$nvcc" -c kern.cu -rdc=true {MULTI} -o rdc.o
"$nvcc" -c main.cu {MULTI} -o main.o
"$nvcc" -c main.cu -rdc=true {MULTI} -o main_rdc.o
"$nvcc" -c kern.cu {MULTI} -Xcompiler -fPIC -o pic.o
"$nvcc" -shared pic.o {MULTI} -o libk.so
"$nvcc" main.o obj.o {MULTI} -o exe
"$nvcc" -fatbin kern.cu {MULTI} -o k.fatbin
ar rcs libk.a obj.o rdc.o
"#,
                bin = bin.display()
            );
            let out = common::run(Command::new("bash").arg("-c").arg(script).current_dir(dir.path()));
            assert!(out.status.success(), "corpus build failed: {}", String::from_utf8_lossy(&out.stderr));
            dir
        })
        .path()
}

fn offload(args: &[&str]) -> Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Prunes `input` into `out`, asserting success.
fn prune(args: &[&str], input: &Path, out: &Path) {
    let mut all = vec!["prune"];
    all.extend_from_slice(args);
    all.extend([p(input), "-o", p(out)]);
    let o = offload(&all);
    assert!(o.status.success(), "{}: {}", input.display(), String::from_utf8_lossy(&o.stderr));
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn cuobjdump_sees_exactly_the_kept_entries_byte_identical() {
    let dir = corpus();
    let out_dir = tempfile::tempdir().unwrap();
    for name in ["obj.o", "rdc.o", "libk.so", "exe", "libk.a", "k.fatbin"] {
        let input = dir.join(name);
        let out = out_dir.path().join(name);
        prune(&["--mode", "zero", "--keep", "sm_80,compute_90"], &input, &out);
        let before = cuda_support::cuobjdump_dumped(&input);
        let after = cuda_support::cuobjdump_dumped(&out);
        let wanted: Vec<_> = before
            .iter()
            .filter(|(kind, arch, _)| (kind == "elf" && arch == "sm_80") || (kind == "ptx" && arch == "sm_90"))
            .cloned()
            .collect();
        assert!(wanted.len() < before.len(), "{name}: nothing to drop");
        assert!(!wanted.is_empty(), "{name}: nothing kept");
        assert_eq!(after, wanted, "{name}: cuobjdump after pruning");
        let (a, b) = (std::fs::metadata(&input).unwrap().len(), std::fs::metadata(&out).unwrap().len());
        if name.ends_with(".fatbin") {
            assert!(b < a, "{name}: a standalone fat binary is written smaller");
        } else {
            assert_eq!(a, b, "{name}: zero mode keeps the size");
        }
    }
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn keep_gpu_keeps_what_the_driver_loads() {
    let dir = corpus();
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("obj.o");
    // sm_86 has no cubin of its own: the driver loads the sm_80 one.
    prune(&["--keep-gpu", "sm_86"], &dir.join("obj.o"), &out);
    let kinds: Vec<(String, String)> =
        cuda_support::cuobjdump_dumped(&out).into_iter().map(|(k, a, _)| (k, a)).collect();
    assert_eq!(kinds, [("elf".to_string(), "sm_80".to_string())]);
    // Leaving a fat binary empty is refused, and nothing is written.
    let refused = out_dir.path().join("none.o");
    let o = offload(&["prune", "--keep", "sm_86", p(&dir.join("obj.o")), "-o", p(&refused)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--allow-empty"));
    assert!(!refused.exists());
}

fn nvcc(args: &[&str], dir: &Path) -> Output {
    common::run(Command::new(cuda_bin().join("nvcc")).args(args).current_dir(dir))
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn pruned_objects_still_link() {
    let dir = corpus();
    let work = tempfile::tempdir().unwrap();
    let w = |n: &str| -> PathBuf { work.path().join(n) };
    for name in ["obj.o", "main.o", "rdc.o", "main_rdc.o"] {
        prune(&["--keep", "sm_80,compute_90"], &dir.join(name), &w(name));
    }
    // Whole-program objects: the executable holds their pruned fat
    // binaries and a device-linked one for sm_80.
    let o =
        nvcc(&[p(&w("main.o")), p(&w("obj.o")), "-gencode", "arch=compute_80,code=sm_80", "-o", "exe"], work.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let entries = cuda_support::cuobjdump_dumped(&w("exe"));
    assert!(entries.iter().all(|(k, a, _)| (k == "elf" && a == "sm_80") || (k == "ptx" && a == "sm_90")));
    let cubin_of_obj = cuda_support::cuobjdump_dumped(&dir.join("obj.o"))
        .into_iter()
        .find(|(k, a, _)| k == "elf" && a == "sm_80")
        .unwrap();
    assert!(entries.contains(&cubin_of_obj), "the object's sm_80 cubin is in the executable unchanged");
    // Relocatable device code: nvlink links the pruned objects for sm_80,
    // and finds no sm_75 code in them any more.
    let (main_rdc, rdc_o) = (w("main_rdc.o"), w("rdc.o"));
    let rdc = [p(&main_rdc), p(&rdc_o)];
    let o = nvcc(&["-rdc=true", rdc[0], rdc[1], "-arch=sm_80", "-o", "exe_rdc"], work.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let linked = cuda_support::cuobjdump_dumped(&w("exe_rdc"));
    assert!(linked.iter().any(|(k, a, _)| k == "elf" && a == "sm_80"), "{:?}", linked.len());
    let o = nvcc(&["-rdc=true", rdc[0], rdc[1], "-arch=sm_75", "-o", "exe_75"], work.path());
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains("sm_75") && said.contains("not found"), "nvlink said: {said}");
    let o =
        nvcc(&["-rdc=true", p(&dir.join("main_rdc.o")), p(&dir.join("rdc.o")), "-arch=sm_75", "-o", "x"], work.path());
    assert!(!String::from_utf8_lossy(&o.stderr).contains("not found"), "the unpruned objects hold sm_75");
}
