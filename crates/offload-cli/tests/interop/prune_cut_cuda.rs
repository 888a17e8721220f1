//! `offload prune --mode cut` on linked CUDA programs built by nvcc 13.5:
//! a shared library (GNU ld, RELA) and an executable with two translation
//! units, both cut to the sm_80 cubins. Checked with NVIDIA's `cuobjdump`
//! (exactly the kept entries, byte for byte the input's),
//! `llvm-readelf-19 -lS --dyn-relocations` (no warnings), and by running
//! the programs against `cuda_support/cudart_stub.c`, a stand-in for
//! libcudart that follows each registered wrapper's pointer, checks the fat
//! binary header there and prints its entries (no GPU needed): the trace
//! must be the input's minus the dropped entries, also after `llvm-strip-19`.
//! Ignored without the CUDA tools unless `OFFLOAD_REQUIRE_CUDA=1`, and
//! without LLVM 19 unless `OFFLOAD_REQUIRE_LLVM=1`.

use crate::common;
use crate::cuda_support;

use cuda_support::{assert_tools, cuda_bin, cuobjdump_extract, cuobjdump_names};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const ARCHS: &str = "-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
                     -gencode arch=compute_90,code=[sm_90,compute_90]";

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Builds the stub runtime, `libheavy.so`, `main_so` (linked against it)
/// and `exe` (both TUs) in `dir`.
fn build(dir: &Path) {
    let stub = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/cuda_support/cudart_stub.c");
    let script = format!(
        r#"set -euo pipefail
nvcc="{bin}/nvcc"
cat > heavy.cu <<'CU'
__global__ void heavy(float *p, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float a = p[i];
#pragma unroll
    for (int k = 0; k < 120; ++k) {{ a = a * 1.0001f + __sinf(a + k); }}
    if (i < n) p[i] = a;
}}
void launch_heavy(float *p, int n) {{ heavy<<<1, 32>>>(p, n); }}
CU
cat > main.cu <<'CU'
#include <cstdio>
#include <stdexcept>
void launch_heavy(float *, int);
__global__ void fill(float *x, int n) {{ if (threadIdx.x < n) x[threadIdx.x] = 1.0f; }}
int main() {{
  fill<<<1, 32>>>(nullptr, 0);
  launch_heavy(nullptr, 0);
  try {{ throw std::runtime_error("caught"); }} catch (const std::exception &e) {{ std::printf("%s\n", e.what()); }}
  return 0;
}}
CU
gcc -shared -fPIC -O1 -o libcudart.so "{stub}"
"$nvcc" -Xcompiler -fPIC -shared -cudart none heavy.cu {ARCHS} -o libheavy.so
"$nvcc" -cudart none main.cu {ARCHS} -L. -lheavy -lcudart -Xlinker -rpath='$ORIGIN' -o main_so
"$nvcc" -cudart none main.cu heavy.cu {ARCHS} -L. -lcudart -Xlinker -rpath='$ORIGIN' -o exe
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
    assert!(out.status.success(), "{}: {text}\n{}", program.display(), String::from_utf8_lossy(&out.stderr));
    assert!(text.ends_with("launch\nlaunch\ncaught\n"), "{}: {text}", program.display());
    text
}

/// The trace with the entry lines of dropped targets and the fat binary
/// sizes (which shrink) left out.
fn kept_lines(trace: &str) -> Vec<&str> {
    trace
        .lines()
        .filter(|l| !l.starts_with("register: fatbin") && !l.contains("sm_75") && !l.contains("sm_90"))
        .collect()
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda)),
    ignore = "needs LLVM 19 and NVIDIA's CUDA tools: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn cut_cuda_programs_register_only_the_kept_cubins() {
    let bin = cuda_bin();
    assert_tools("CUDA cut tests", &[bin.join("nvcc"), bin.join("cuobjdump")]);
    let (readelf, strip) = (common::llvm_tool(19, "llvm-readelf"), common::llvm_tool(19, "llvm-strip"));
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let cut_dir = dir.path().join("cut");
    std::fs::create_dir_all(&cut_dir).unwrap();
    std::fs::copy(dir.path().join("libcudart.so"), cut_dir.join("libcudart.so")).unwrap();
    std::fs::copy(dir.path().join("main_so"), cut_dir.join("main_so")).unwrap();
    for (name, program) in [("libheavy.so", "main_so"), ("exe", "exe")] {
        let input = dir.path().join(name);
        let output = cut_dir.join(name);
        let before = trace(&dir.path().join(program));
        let o = common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args([
            "prune",
            "--mode",
            "cut",
            "--json",
            "--keep",
            "sm_80",
            p(&input),
            "-o",
            p(&output),
        ]));
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{name}: {stderr}");
        assert!(stderr.contains("do not run GNU strip"), "{name}: {stderr}");
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["mode"], "cut", "{name}");
        // Smaller by about the dropped bytes, in whole pages.
        let (old_len, new_len) = (std::fs::metadata(&input).unwrap().len(), std::fs::metadata(&output).unwrap().len());
        assert_eq!(report["output_size"].as_u64(), Some(new_len), "{name}");
        let freed: u64 = report["units"].as_array().unwrap().iter().map(|u| u["freed_bytes"].as_u64().unwrap()).sum();
        let removed = old_len - new_len;
        assert!(removed % 4096 == 0 && removed <= freed && freed - removed < 3 * 4096, "{name}: {removed} of {freed}");
        eprintln!("{name}: cut {old_len} -> {new_len} bytes ({freed} freed)");
        // No warnings from llvm-readelf.
        let re = common::run(Command::new(&readelf).args(["-lS", "--dyn-relocations", p(&output)]));
        assert!(re.status.success() && re.stderr.is_empty(), "{name}: {}", String::from_utf8_lossy(&re.stderr));
        // cuobjdump: exactly the sm_80 cubins, the input's bytes.
        let (x_in, x_out) = (dir.path().join(format!("x-in-{name}")), dir.path().join(format!("x-out-{name}")));
        std::fs::create_dir_all(&x_in).unwrap();
        std::fs::create_dir_all(&x_out).unwrap();
        let (elf_in, _) = cuobjdump_extract(&input, &x_in);
        let (elf_out, ptx_out) = cuobjdump_extract(&output, &x_out);
        let (names, _) = cuobjdump_names(&input);
        assert_eq!(names.len(), elf_in.len(), "{name}");
        let sm80: Vec<Vec<u8>> =
            elf_in.into_iter().zip(&names).filter(|(_, n)| n.ends_with(".sm_80.cubin")).map(|(c, _)| c).collect();
        assert_eq!(cuobjdump_names(&output).0.iter().filter(|n| n.ends_with(".sm_80.cubin")).count(), sm80.len());
        assert!(!sm80.is_empty() && ptx_out.is_empty(), "{name}");
        assert_eq!(elf_out, sm80, "{name}: cuobjdump extracts other bytes");
        // The program registers the same code minus the dropped entries.
        let after = trace(&cut_dir.join(program));
        assert_eq!(kept_lines(&after), kept_lines(&before), "{name}:\n{before}\n---\n{after}");
        // Exactly the dropped entries are gone (main_so's own fat binary
        // is not pruned: only the library is).
        let dropped: usize =
            report["units"].as_array().unwrap().iter().map(|u| u["dropped"].as_array().unwrap().len()).sum();
        let entries = |t: &str| t.lines().filter(|l| l.starts_with("register: entry")).count();
        assert_eq!(entries(&after), entries(&before) - dropped, "{name}: {after}");
        assert!(dropped >= 3, "{name}");
        // llvm-strip keeps the cut file working.
        let stripped = cut_dir.join(format!("stripped-{name}"));
        let s = common::run(Command::new(&strip).arg(p(&output)).arg("-o").arg(&stripped));
        assert!(s.status.success(), "{name}: {}", String::from_utf8_lossy(&s.stderr));
        if name == "exe" {
            assert_eq!(trace(&stripped), after, "{name}: the llvm-stripped cut output runs differently");
        } else {
            std::fs::rename(&stripped, &output).unwrap();
            assert_eq!(trace(&cut_dir.join(program)), after, "{name}: the llvm-stripped library runs differently");
        }
    }
}
