//! `offload replace` on CUDA files built with nvcc 13.5, checked with
//! NVIDIA's `cuobjdump` and `nvcc`: the sm_80 cubin of an object, a shared
//! library, an executable and a standalone `.fatbin` replaced by one
//! recompiled from changed source (same kernel, other body), and the
//! compute_90 PTX of the `.fatbin` by recompiled PTX. cuobjdump must list
//! the same entries, extract the new bytes for the replaced one and the
//! old bytes for every other; the replaced object must still link. A cubin
//! for another SM, one without the kernel, and PTX in place of a cubin are
//! refused with exit 1, leaving the output alone. A larger cubin moves an
//! object's `.nv_fatbin` to the end of the file, and the object still links;
//! in a shared library and an executable `.nv_fatbin` moves to a new
//! segment, and the programs, run against the stub runtime
//! `cuda_support/cudart_stub.c`, register the new cubin (also after
//! `llvm-strip-19`; `llvm-readelf-19` has no warnings). In a static archive the
//! member is named (`--member`) when several hold the entry. The tools come from
//! `scripts/install-cuda-tools.sh`; without them the tests are ignored,
//! unless `OFFLOAD_REQUIRE_CUDA=1` (CI), where the build fails.

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
            assert_tools("CUDA replace tests", &[bin.join("nvcc"), bin.join("cuobjdump")]);
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
cat > kern2.cu <<'CU'
__global__ void scale(float *x, float a, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] * a + 1.0f;
}}
CU
cat > kern3.cu <<'CU'
__global__ void scale(float *x, float a, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{ float v = x[i]; for (int k = 0; k < n; ++k) v = v * a + __sinf(v + k); x[i] = v; }}
}}
CU
cat > other.cu <<'CU'
__global__ void shift(float *x, float a, int n) {{ if (threadIdx.x < n) x[threadIdx.x] += a; }}
CU
cat > main.cu <<'CU'
void launch_scale(float *, float, int);
int main() {{ launch_scale(nullptr, 2.0f, 0); return 0; }}
CU
"$nvcc" -c kern.cu {MULTI} -o obj.o
"$nvcc" -c main.cu {MULTI} -o main.o
"$nvcc" -c kern.cu {MULTI} -Xcompiler -fPIC -o pic.o
"$nvcc" -shared pic.o {MULTI} -o libk.so
"$nvcc" main.o obj.o {MULTI} -o exe
"$nvcc" -fatbin kern.cu {MULTI} -o k.fatbin
ar rcs libk.a main.o obj.o
"$nvcc" -cubin kern2.cu -arch=sm_80 -o new80.cubin
"$nvcc" -cubin kern2.cu -arch=sm_75 -o new75.cubin
"$nvcc" -cubin kern3.cu -arch=sm_80 -o big80.cubin
"$nvcc" -cubin other.cu -arch=sm_80 -o other80.cubin
"$nvcc" -ptx kern2.cu -arch=compute_90 -o new90.ptx
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

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Replaces `entry` of `input` (in fat binary `unit`) by `with` into `out`.
fn replace(input: &Path, entry: &str, unit: Option<&str>, with: &Path, out: &Path) -> Output {
    let mut args = vec!["replace", "--entry", entry, "--with", p(with), p(input), "-o", p(out)];
    if let Some(u) = unit {
        args.extend(["--unit", u]);
    }
    offload(&args)
}

/// cuobjdump sees the same entries in `out` as in `input`, all with the
/// same bytes except one, a (`kind`, sm_`arch`) entry, which holds `new`.
fn assert_only_replaced(input: &Path, out: &Path, kind: &str, arch: &str, new: &[u8]) {
    let (before, after) = (cuda_support::cuobjdump_dumped(input), cuda_support::cuobjdump_dumped(out));
    let name = input.display();
    assert_eq!(before.len(), after.len(), "{name}: cuobjdump lists as many entries");
    let changed: Vec<usize> = (0..before.len()).filter(|&i| before[i] != after[i]).collect();
    assert_eq!(changed.len(), 1, "{name}: exactly one entry changed");
    let (k, a, bytes) = &after[changed[0]];
    assert_eq!((k.as_str(), a.as_str()), (kind, arch), "{name}: the replaced entry");
    assert!(bytes.as_slice() == new, "{name}: cuobjdump extracts the new code object");
    assert_eq!((&before[changed[0]].0, &before[changed[0]].1), (k, a));
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn cuobjdump_extracts_the_new_cubin_and_every_other_entry_unchanged() {
    let dir = corpus();
    let out_dir = tempfile::tempdir().unwrap();
    let new = std::fs::read(dir.join("new80.cubin")).unwrap();
    // In the library and the executable the fat binary of kern.cu comes
    // after the device-linked one (and main.cu's): units 1 and 2.
    for (name, unit) in [("obj.o", None), ("libk.so", Some("1")), ("exe", Some("2")), ("k.fatbin", None)] {
        let (input, out) = (dir.join(name), out_dir.path().join(name));
        let o = replace(&input, "sm_80", unit, &dir.join("new80.cubin"), &out);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let said = String::from_utf8_lossy(&o.stdout);
        assert!(said.contains("replaced entry cuda-elf-sm_80"), "{name}: {said}");
        assert_only_replaced(&input, &out, "elf", "sm_80", &new);
        let (a, b) = (std::fs::metadata(&input).unwrap().len(), std::fs::metadata(&out).unwrap().len());
        if !name.ends_with(".fatbin") {
            assert_eq!(a, b, "{name}: written in place");
        }
        let v = offload(&["verify", p(&out)]);
        assert!(v.status.success(), "{name}: offload verify: {}", String::from_utf8_lossy(&v.stdout));
    }
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn ptx_is_replaced_by_recompiled_ptx() {
    let dir = corpus();
    let out_dir = tempfile::tempdir().unwrap();
    let (input, out) = (dir.join("k.fatbin"), out_dir.path().join("k.fatbin"));
    let o = replace(&input, "compute_90", None, &dir.join("new90.ptx"), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let new = std::fs::read(dir.join("new90.ptx")).unwrap();
    assert_only_replaced(&input, &out, "ptx", "sm_90", &new);
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn the_replaced_object_still_links_and_the_executable_holds_the_new_cubin() {
    let dir = corpus();
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("obj.o");
    let o = replace(&dir.join("obj.o"), "sm_80", None, &dir.join("new80.cubin"), &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let main = dir.join("main.o");
    let args = [p(&main), p(&out), "-gencode", "arch=compute_80,code=sm_80", "-o", "exe"];
    let o = common::run(Command::new(cuda_bin().join("nvcc")).args(args).current_dir(work.path()));
    assert!(o.status.success(), "nvcc: {}", stderr(&o));
    let new = std::fs::read(dir.join("new80.cubin")).unwrap();
    let linked = cuda_support::cuobjdump_dumped(&work.path().join("exe"));
    assert!(linked.iter().any(|(k, a, b)| k == "elf" && a == "sm_80" && *b == new), "the executable holds it");
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn wrong_sm_missing_kernels_and_non_cubins_are_refused_and_nothing_is_written() {
    let dir = corpus();
    let out_dir = tempfile::tempdir().unwrap();
    let out: PathBuf = out_dir.path().join("obj.o");
    std::fs::write(&out, b"keep me").unwrap();
    for (with, says) in [
        ("new75.cubin", "built for sm_75"),
        ("other80.cubin", "_Z5scalePffi"),
        ("new90.ptx", "not an ELF cubin"),
        ("kern.cu", "not an ELF cubin"),
    ] {
        let o = replace(&dir.join("obj.o"), "sm_80", None, &dir.join(with), &out);
        assert_eq!(o.status.code(), Some(1), "{with}: {}", stderr(&o));
        assert!(stderr(&o).contains("error:") && stderr(&o).contains(says), "{with}: {}", stderr(&o));
        assert_eq!(std::fs::read(&out).unwrap(), b"keep me", "{with}: the existing output is untouched");
    }
    // An entry the file does not have: the message lists what it has.
    let o = replace(&dir.join("obj.o"), "sm_86", None, &dir.join("new80.cubin"), &out);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cuda-elf-sm_75"), "{}", stderr(&o));
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn in_an_archive_the_member_is_named_and_the_archive_still_links() {
    let dir = corpus();
    let work = tempfile::tempdir().unwrap();
    let (input, out) = (dir.join("libk.a"), work.path().join("libk.a"));
    let with = dir.join("new80.cubin");
    // Both members hold an sm_80 cubin (main.cu's has no kernel).
    let o = offload(&["replace", "--entry", "sm_80", "--with", p(&with), p(&input), "-o", p(&out)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("main.o, obj.o") && stderr(&o).contains("--member"), "{}", stderr(&o));
    assert!(!out.exists());
    let args = ["replace", "--entry", "sm_80", "--member", "obj.o", "--with", p(&with), p(&input), "-o", p(&out)];
    let o = offload(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("in member obj.o"));
    let new = std::fs::read(&with).unwrap();
    assert_only_replaced(&input, &out, "elf", "sm_80", &new);
    assert_eq!(std::fs::metadata(&input).unwrap().len(), std::fs::metadata(&out).unwrap().len());
    let main = dir.join("main.o");
    let args = [p(&main), p(&out), "-gencode", "arch=compute_80,code=sm_80", "-o", "exe"];
    let o = common::run(Command::new(cuda_bin().join("nvcc")).args(args).current_dir(work.path()));
    assert!(o.status.success(), "nvcc: {}", stderr(&o));
    let linked = cuda_support::cuobjdump_dumped(&work.path().join("exe"));
    assert!(linked.iter().any(|(k, a, b)| k == "elf" && a == "sm_80" && *b == new), "the executable holds it");
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn a_larger_cubin_moves_the_objects_section_and_the_object_still_links() {
    let dir = corpus();
    let work = tempfile::tempdir().unwrap();
    let (input, out, with) = (dir.join("obj.o"), work.path().join("obj.o"), dir.join("big80.cubin"));
    let o = replace(&input, "sm_80", None, &with, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("section moved to the end"), "{}", stderr(&o));
    let new = std::fs::read(&with).unwrap();
    assert_only_replaced(&input, &out, "elf", "sm_80", &new);
    assert!(std::fs::metadata(&out).unwrap().len() > std::fs::metadata(&input).unwrap().len());
    let main = dir.join("main.o");
    let args = [p(&main), p(&out), "-gencode", "arch=compute_80,code=sm_80", "-o", "exe"];
    let o = common::run(Command::new(cuda_bin().join("nvcc")).args(args).current_dir(work.path()));
    assert!(o.status.success(), "nvcc: {}", stderr(&o));
    let linked = cuda_support::cuobjdump_dumped(&work.path().join("exe"));
    assert!(linked.iter().any(|(k, a, b)| k == "elf" && a == "sm_80" && *b == new), "the executable holds it");
}

/// Builds, in `dir`, programs that run without a GPU: the stub runtime
/// `libcudart.so` (`cuda_support/cudart_stub.c`), `libk.so` (kern.cu) and
/// `main_so` linked against it, `exe` (main.cu and kern.cu), and
/// `big80.cubin`, a larger sm_80 build of the same kernel.
fn build_runnable(dir: &Path) {
    let stub = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/cuda_support/cudart_stub.c");
    let script = format!(
        r#"set -euo pipefail
nvcc="{bin}/nvcc"
cat > kern.cu <<'CU'
__global__ void scale(float *x, float a, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}}
void launch_scale(float *x, float a, int n) {{ scale<<<1, 32>>>(x, a, n); }}
CU
cat > kern3.cu <<'CU'
__global__ void scale(float *x, float a, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {{ float v = x[i]; for (int k = 0; k < n; ++k) v = v * a + __sinf(v + k); x[i] = v; }}
}}
CU
cat > main.cu <<'CU'
#include <cstdio>
#include <stdexcept>
void launch_scale(float *, float, int);
int main() {{
  launch_scale(nullptr, 2.0f, 0);
  try {{ throw std::runtime_error("caught"); }} catch (const std::exception &e) {{ std::printf("%s\n", e.what()); }}
  return 0;
}}
CU
gcc -shared -fPIC -O1 -o libcudart.so "{stub}"
"$nvcc" -Xcompiler -fPIC -shared -cudart none kern.cu {MULTI} -o libk.so
"$nvcc" -cudart none main.cu {MULTI} -L. -lk -lcudart -Xlinker -rpath='$ORIGIN' -o main_so
"$nvcc" -cudart none main.cu kern.cu {MULTI} -L. -lcudart -Xlinker -rpath='$ORIGIN' -o exe
"$nvcc" -cubin kern3.cu -arch=sm_80 -o big80.cubin
"#,
        bin = cuda_bin().display(),
        stub = stub.display()
    );
    let out = common::run(Command::new("bash").arg("-c").arg(script).current_dir(dir));
    assert!(out.status.success(), "build failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// Runs `program` (the stub runtime beside it); its trace.
fn trace(program: &Path) -> String {
    let out = common::run(&mut Command::new(program));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}: {text}\n{}", program.display(), stderr(&out));
    assert!(text.ends_with("launch\ncaught\n"), "{}: {text}", program.display());
    text
}

/// The trace lines that differ between `before` and `after` (which have as
/// many lines), as (before, after) pairs.
fn changed_lines<'a>(before: &'a str, after: &'a str) -> Vec<(&'a str, &'a str)> {
    assert_eq!(before.lines().count(), after.lines().count(), "{before}\n---\n{after}");
    before.lines().zip(after.lines()).filter(|(a, b)| a != b).collect()
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda)),
    ignore = "needs LLVM 19 and NVIDIA's CUDA tools: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn a_larger_cubin_moves_nv_fatbin_of_linked_files_to_a_new_segment_and_they_still_register_it() {
    let bin = cuda_bin();
    assert_tools("CUDA replace tests", &[bin.join("nvcc"), bin.join("cuobjdump")]);
    let (readelf, strip) = (common::llvm_tool(19, "llvm-readelf"), common::llvm_tool(19, "llvm-strip"));
    let dir = tempfile::tempdir().unwrap();
    build_runnable(dir.path());
    let new_dir = dir.path().join("new");
    std::fs::create_dir_all(&new_dir).unwrap();
    for file in ["libcudart.so", "main_so"] {
        std::fs::copy(dir.path().join(file), new_dir.join(file)).unwrap();
    }
    let with = dir.path().join("big80.cubin");
    let new = std::fs::read(&with).unwrap();
    // Without libcudart_static there is no device-linked fat binary: kern.cu's
    // is the library's only one and follows main.cu's in the executable.
    for (name, unit, program) in [("libk.so", "0", "main_so"), ("exe", "1", "exe")] {
        let (input, output) = (dir.path().join(name), new_dir.join(name));
        let before = trace(&dir.path().join(program));
        let args =
            ["replace", "--json", "--entry", "sm_80", "--unit", unit, "--with", p(&with), p(&input), "-o", p(&output)];
        let o = offload(&args);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["placement"], "new-segment", "{name}: {report}");
        assert!(stderr(&o).contains("not GNU strip"), "{name}: {}", stderr(&o));
        let (old_len, new_len) = (std::fs::metadata(&input).unwrap().len(), std::fs::metadata(&output).unwrap().len());
        assert_eq!(report["output_size"].as_u64(), Some(new_len), "{name}");
        assert!(new_len > old_len, "{name}: the file grows by the new segment");
        eprintln!("{name}: {old_len} -> {new_len} bytes, .nv_fatbin at {}", report["fatbin_offset"]);
        // cuobjdump: the new cubin in that entry, every other entry as it was.
        assert_only_replaced(&input, &output, "elf", "sm_80", &new);
        let re = common::run(Command::new(&readelf).args(["-lS", "--dyn-relocations", p(&output)]));
        assert!(re.status.success() && re.stderr.is_empty(), "{name}: {}", stderr(&re));
        let v = offload(&["verify", p(&output)]);
        assert!(v.status.success(), "{name}: offload verify: {}", String::from_utf8_lossy(&v.stdout));
        // The runtime follows the moved pointer to the rebuilt fat binary:
        // only its size and its sm_80 entry's size change in the trace.
        let after = trace(&new_dir.join(program));
        let changed = changed_lines(&before, &after);
        assert_eq!(changed.len(), 2, "{name}:\n{before}\n---\n{after}");
        assert!(changed[0].1.starts_with("register: fatbin"), "{name}: {changed:?}");
        let size = |line: &str| -> u64 {
            let rest = line.strip_prefix("register: entry elf sm_80 ").unwrap_or_else(|| panic!("{name}: {line}"));
            rest.strip_suffix(" bytes").unwrap().parse().unwrap()
        };
        let (old_size, new_size) = (size(changed[1].0), size(changed[1].1));
        assert!(new_size >= new.len() as u64 && new_size > old_size, "{name}: {changed:?}, cubin {}", new.len());
        // llvm-strip keeps the output working.
        let stripped = new_dir.join(format!("stripped-{name}"));
        let s = common::run(Command::new(&strip).arg(p(&output)).arg("-o").arg(&stripped));
        assert!(s.status.success(), "{name}: {}", stderr(&s));
        if name == "exe" {
            assert_eq!(trace(&stripped), after, "{name}: the llvm-stripped output runs differently");
        } else {
            std::fs::rename(&stripped, &output).unwrap();
            assert_eq!(trace(&new_dir.join(program)), after, "{name}: the llvm-stripped library runs differently");
        }
    }
}
