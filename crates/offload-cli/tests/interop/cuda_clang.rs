//! `offload` against NVIDIA's `cuobjdump` on a corpus built with clang 19
//! (`fixtures/cuda/make-clang-corpus.sh`): old driver objects, `-fgpu-rdc`
//! objects, executables, a shared library and an archive of two translation
//! units, and the new driver (`--offload-new-driver`) with its link step.
//! The same comparisons as the nvcc corpus (`cuda_live.rs`): entries listed,
//! bytes of every extracted cubin and PTX file, grouping into units.
//!
//! What clang 19 cannot build here: new-driver links for sm_70 (nvlink 13.5
//! dropped it and no CUDA 12 nvlink is on PyPI) and old-driver `-fgpu-rdc`
//! executables without nvcc (clang 19 has no device link step for them;
//! the corpus device-links with `nvcc -dlink`). Without clang 19, the CUDA
//! root or cuobjdump the tests are ignored; `OFFLOAD_REQUIRE_CUDA=1` fails.

use crate::common;
use crate::cuda_support;
use crate::inspect_support;

use cuda_support::{
    assert_extraction_matches, assert_listing_matches, assert_tools, assert_units, assert_verifies, corpus_files,
    cuda_bin, cuobjdump_entries, list,
};
use inspect_support::{offload, s};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn clang_cuda_root() -> PathBuf {
    std::env::var_os("OFFLOAD_CLANG_CUDA_ROOT")
        .map_or_else(|| PathBuf::from("/opt/cuda-wheels/clang-cuda-root"), PathBuf::from)
}

/// The corpus folder, built once per test run.
fn corpus() -> &'static Path {
    static CORPUS: OnceLock<tempfile::TempDir> = OnceLock::new();
    CORPUS
        .get_or_init(|| {
            let clang = common::llvm_bin_dir(19).join("clang++");
            let root = clang_cuda_root();
            let tools = [clang, root.join("bin/fatbinary"), root.join("bin/ptxas"), cuda_bin().join("cuobjdump")];
            assert_tools("clang 19 CUDA tests", &tools);
            let dir = tempfile::tempdir().unwrap();
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/make-clang-corpus.sh");
            let out = common::run(
                Command::new("bash")
                    .arg(script)
                    .arg(dir.path())
                    .env("OFFLOAD_CLANG_CUDA_ROOT", &root)
                    .env("OFFLOAD_CLANG_CXX", &tools[0])
                    .env("OFFLOAD_CUDA_BIN", cuda_bin()),
            );
            assert!(out.status.success(), "clang corpus build failed: {}", String::from_utf8_lossy(&out.stderr));
            dir
        })
        .path()
}

/// The files cuobjdump can read: all but the new driver's `-fgpu-rdc`
/// objects, which hold OffloadBinaries, no fat binary.
fn fatbin_files(dir: &Path) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = corpus_files(dir)
        .into_iter()
        .filter(|p| !p.file_name().unwrap().to_str().unwrap().starts_with("nd_rdc_"))
        .collect();
    assert_eq!(files.len(), 11, "{files:?}");
    files
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda, has_clang_cuda)),
    ignore = "needs LLVM 19, NVIDIA's CUDA tools and clang 19's CUDA root: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn listing_matches_cuobjdump() {
    let dir = corpus();
    let compared: usize = fatbin_files(dir).iter().map(|f| assert_listing_matches(f)).sum();
    assert_eq!(compared, 72, "entries compared");
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda, has_clang_cuda)),
    ignore = "needs LLVM 19, NVIDIA's CUDA tools and clang 19's CUDA root: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn extracted_bytes_match_cuobjdump() {
    let dir = corpus();
    let compared: usize = fatbin_files(dir).iter().map(|f| assert_extraction_matches(f)).sum();
    assert_eq!(compared, 72, "cubin and PTX files compared");
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda, has_clang_cuda)),
    ignore = "needs LLVM 19, NVIDIA's CUDA tools and clang 19's CUDA root: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn units_are_fat_binaries() {
    let dir = corpus();
    // clang's host link concatenates each object's fat binary; the new
    // driver's link step makes one; nvcc -dlink adds one to rdc objects'.
    for (file, units) in [
        ("obj.o", vec!["section .nv_fatbin"]),
        ("rdc_kern.o", vec!["section __nv_relfatbin"]),
        ("exe", vec!["section .nv_fatbin #0", "section .nv_fatbin #1"]),
        ("libtwo.so", vec!["section .nv_fatbin #0", "section .nv_fatbin #1"]),
        ("libold.a", vec!["member libold.a(obj.o) section .nv_fatbin", "member libold.a(main.o) section .nv_fatbin"]),
        ("rdc_exe", vec!["section __nv_relfatbin #0", "section __nv_relfatbin #1", "section .nv_fatbin"]),
        ("nd_obj.o", vec!["section .nv_fatbin"]),
        ("nd_exe", vec!["section .nv_fatbin"]),
        ("libnd.so", vec!["section .nv_fatbin"]),
    ] {
        assert_units(&dir.join(file), &units);
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda, has_clang_cuda)),
    ignore = "needs LLVM 19, NVIDIA's CUDA tools and clang 19's CUDA root: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn sm_70_comes_from_the_old_driver_only() {
    let dir = corpus();
    let arches = |file: &str| -> Vec<String> {
        list(&dir.join(file)).iter().map(|r| format!("{}-{}", s(r, "image_kind"), s(r, "target_id"))).collect()
    };
    // Old driver: a cubin and a PTX file per --cuda-gpu-arch, sm_70 included.
    assert_eq!(arches("obj.o"), ["elf-sm_70", "ptx-sm_70", "elf-sm_80", "ptx-sm_80", "elf-sm_90", "ptx-sm_90"]);
    // New driver: cubins only; the link step orders them as nvlink did.
    assert_eq!(arches("nd_obj.o"), ["elf-sm_80", "elf-sm_90"]);
    assert_eq!(arches("nd_exe"), ["elf-sm_90", "elf-sm_80"]);
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda, has_clang_cuda)),
    ignore = "needs LLVM 19, NVIDIA's CUDA tools and clang 19's CUDA root: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn select_sees_every_clang_registration() {
    let dir = corpus();
    // clang registers each fat binary through a record in .nvFatBinSegment
    // (old driver: __cuda_fatbin_wrapper; new driver's link step:
    // .fatbin_wrapper); nvcc -dlink adds its own for rdc_exe. None may read
    // as unregistered, and each loadable one yields its sm_90 cubin on 9.0.
    for (file, loadable_units) in [("exe", 2), ("libtwo.so", 2), ("rdc_exe", 1), ("nd_exe", 1), ("libnd.so", 1)] {
        let out = offload(&["select", "--json", "--gpu", "sm_90", dir.join(file).to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(0), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        let records = inspect_support::json(&out);
        assert!(records.iter().all(|r| r["reason_code"].as_str() != Some("unregistered")), "{file}");
        let picked: Vec<&str> =
            records.iter().filter(|r| r["selected"].as_bool() == Some(true)).map(|r| s(r, "id")).collect();
        assert_eq!(picked, vec!["cuda-elf-sm_90"; loadable_units], "{file}");
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda, has_clang_cuda)),
    ignore = "needs LLVM 19, NVIDIA's CUDA tools and clang 19's CUDA root: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn new_driver_rdc_objects_hold_offload_binaries_cuobjdump_cannot_see() {
    let dir = corpus();
    for name in ["nd_rdc_kern.o", "nd_rdc_main.o"] {
        let file = dir.join(name);
        assert!(cuobjdump_entries(&file).is_empty(), "{name}: cuobjdump now sees a fat binary");
        let records = list(&file);
        let ids: Vec<(&str, &str, &str)> =
            records.iter().map(|r| (s(r, "format"), s(r, "offload_kind"), s(r, "target_id"))).collect();
        assert_eq!(ids, [("offload-binary", "cuda", "sm_80"), ("offload-binary", "cuda", "sm_90")], "{name}");
        // Each image is a relocatable cubin (ET_REL, EM_CUDA = 190).
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..records.len() {
            let dest = tmp.path().join(format!("{i}.cubin"));
            let out =
                offload(&["extract", "--index", &i.to_string(), "-o", dest.to_str().unwrap(), file.to_str().unwrap()]);
            assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
            let bytes = std::fs::read(&dest).unwrap();
            assert!(bytes.starts_with(b"\x7fELF"), "{name} #{i}");
            assert_eq!(u16::from_le_bytes([bytes[16], bytes[17]]), 1, "{name} #{i}: e_type");
            assert_eq!(u16::from_le_bytes([bytes[18], bytes[19]]), 190, "{name} #{i}: e_machine");
        }
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_cuda, has_clang_cuda)),
    ignore = "needs LLVM 19, NVIDIA's CUDA tools and clang 19's CUDA root: run scripts/install-reference-llvm.sh and scripts/install-cuda-tools.sh"
)]
fn verify_passes_on_every_corpus_file() {
    let dir = corpus();
    for file in corpus_files(dir) {
        assert_verifies(&file);
    }
}
