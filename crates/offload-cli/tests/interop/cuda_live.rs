//! `offload` against NVIDIA's own `cuobjdump` on a corpus built with nvcc
//! 13.5 (`fixtures/cuda/make-corpus.sh`): the entries listed (kind, arch,
//! compression, order), the bytes of every extracted cubin and PTX file,
//! and the grouping into units. The tools come from PyPI wheels
//! (`scripts/install-cuda-tools.sh`); without them the tests are ignored,
//! unless `OFFLOAD_REQUIRE_CUDA=1` (CI), where the build fails.

use crate::common;
use crate::cuda_support;
use crate::inspect_support;

use cuda_support::{
    assert_extraction_matches, assert_listing_matches, assert_tools, assert_units, assert_verifies, corpus_files,
    cuda_bin,
};
use inspect_support::{json, n, offload, s};
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// The corpus folder, built once per test run.
fn corpus() -> &'static Path {
    static CORPUS: OnceLock<tempfile::TempDir> = OnceLock::new();
    CORPUS
        .get_or_init(|| {
            let bin = cuda_bin();
            assert_tools("CUDA live tests", &[bin.join("nvcc"), bin.join("cuobjdump")]);
            let dir = tempfile::tempdir().unwrap();
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/make-corpus.sh");
            let out = common::run(Command::new("bash").arg(script).arg(dir.path()).env("OFFLOAD_CUDA_BIN", &bin));
            assert!(out.status.success(), "corpus build failed: {}", String::from_utf8_lossy(&out.stderr));
            dir
        })
        .path()
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn listing_matches_cuobjdump() {
    let dir = corpus();
    let mut compared = 0;
    for file in corpus_files(dir) {
        if file.extension().is_some_and(|e| e == "cubin") {
            continue; // cuobjdump -all prints nothing for a raw cubin
        }
        compared += assert_listing_matches(&file);
    }
    assert!(compared > 100, "only {compared} entries compared");
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn extracted_bytes_match_cuobjdump() {
    let dir = corpus();
    let mut compared = 0;
    for file in corpus_files(dir) {
        compared += assert_extraction_matches(&file);
    }
    assert!(compared > 100, "only {compared} files compared");
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn units_are_fat_binaries() {
    let dir = corpus();
    // (file, locations of the units in order): nvcc 13 links one
    // device-linked fat binary plus every object's own.
    for (file, units) in [
        ("obj_multi.o", vec!["section .nv_fatbin"]),
        ("two_fatbins.fatbin", vec!["file #0", "file #1"]),
        ("exe_multi", vec!["section .nv_fatbin #0", "section .nv_fatbin #1", "section .nv_fatbin #2"]),
        ("libtwo.so", vec!["section .nv_fatbin #0", "section .nv_fatbin #1", "section .nv_fatbin #2"]),
        ("exe_rdc", vec!["section .nv_fatbin", "section __nv_relfatbin #0", "section __nv_relfatbin #1"]),
        (
            "libplain.a",
            vec!["member libplain.a(obj_multi.o) section .nv_fatbin", "member libplain.a(two.o) section .nv_fatbin"],
        ),
    ] {
        assert_units(&dir.join(file), &units);
    }
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn verify_passes_on_every_corpus_file() {
    let dir = corpus();
    for file in corpus_files(dir) {
        assert_verifies(&file);
    }
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn fat_binaries_no_record_registers_are_not_loaded() {
    let dir = corpus();
    // libtwo.so: three fat binaries, three records. Point the first record
    // at the second fat binary: the first is then registered by nobody.
    let mut data = std::fs::read(dir.join("libtwo.so")).unwrap();
    let first = data.windows(4).position(|w| w == [0xb1, 0x43, 0x62, 0x46]).unwrap();
    let records: Vec<usize> =
        (first..data.len()).step_by(24).take_while(|&at| data[at..].starts_with(&[0xb1, 0x43, 0x62, 0x46])).collect();
    assert_eq!(records.len(), 3);
    let addresses: Vec<u64> =
        records.iter().map(|&r| u64::from_le_bytes(data[r + 8..r + 16].try_into().unwrap())).collect();
    let lowest = *addresses.iter().min().unwrap();
    let second = *addresses.iter().filter(|&&a| a != lowest).min().unwrap();
    let which = addresses.iter().position(|&a| a == lowest).unwrap();
    data[records[which] + 8..records[which] + 16].copy_from_slice(&second.to_le_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("libtwo.so");
    std::fs::write(&p, &data).unwrap();
    let out = offload(&["select", "--json", "--gpu", "sm_86", p.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for r in json(&out) {
        let first_unit = n(&r, "unit") == 0;
        assert_eq!(r["reason_code"].as_str() == Some("unregistered"), first_unit, "{r}");
    }
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn select_matches_the_spec_examples() {
    let dir = corpus();
    let chosen = |file: &str, gpu: &str| -> (i32, Vec<(u64, String)>) {
        let out = offload(&["select", "--json", "--gpu", gpu, dir.join(file).to_str().unwrap()]);
        let picked = json(&out)
            .iter()
            .filter(|r| r["selected"].as_bool() == Some(true))
            .map(|r| (n(r, "unit"), s(r, "id").to_string()))
            .collect();
        (out.status.code().unwrap(), picked)
    };
    // docs/formats/cuda-fatbin.md §9: obj_multi.o on sm_86 loads the sm_80 cubin.
    assert_eq!(chosen("obj_multi.o", "sm_86"), (0, vec![(0, "cuda-elf-sm_80".to_string())]));
    // libtwo.so's two.cu unit (sm_75 and sm_86 cubins, compute_86 PTX):
    // the sm_86 cubin on 8.6, the PTX on 9.0 (the other units have sm_90).
    let (rc, picked) = chosen("libtwo.so", "sm_86");
    assert_eq!(rc, 0);
    assert!(picked.contains(&(2, "cuda-elf-sm_86".to_string())), "{picked:?}");
    let (rc, picked) = chosen("libtwo.so", "sm_90");
    assert_eq!(rc, 0);
    assert!(picked.contains(&(2, "cuda-ptx-sm_86".to_string())), "{picked:?}");
    assert_eq!(picked.len(), 3);
    // obj_suffix.o: nothing on 8.6 (exit 1), the sm_90a cubin on 9.0.
    assert_eq!(chosen("obj_suffix.o", "sm_86").0, 1);
    assert_eq!(chosen("obj_suffix.o", "sm_90"), (0, vec![(0, "cuda-elf-sm_90a".to_string())]));
    // compute_80 PTX only: JIT-compiled on 8.0 and 12.0.
    for gpu in ["sm_80", "sm_120"] {
        assert_eq!(chosen("ptx_only.fatbin", gpu), (0, vec![(0, "cuda-ptx-sm_80".to_string())]), "{gpu}");
    }
}
