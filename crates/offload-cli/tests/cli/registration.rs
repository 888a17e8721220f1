//! `offload verify` takes a host binary's registration records as the list
//! of units a runtime loads (docs/guide/checking.md, "Registration records"):
//! a fat binary no record points at is a warning, a record pointing at no
//! fat binary an error. Made by patching the clang-built prune fixtures
//! (without LLVM) and by adding a fat binary with LLVM 19's llvm-objcopy
//! (ignored without it unless OFFLOAD_REQUIRE_LLVM=1).

use crate::common;
use crate::inspect_support;

use inspect_support::offload;
use offload_inspect::layout::FileMap;
use std::path::{Path, PathBuf};

fn prune_fixture(name: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/prune").join(name);
    std::fs::read(p).unwrap()
}

fn verify(path: &Path) -> (i32, String) {
    let out = offload(&["verify", path.to_str().unwrap()]);
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn hip_records_decide_which_fat_binaries_load() {
    let tmp = tempfile::tempdir().unwrap();
    let data = prune_fixture("lld_relr.so");
    let map = FileMap::read(&data).unwrap();
    let (two, pointer_at) = (map.units[1].offset, map.wrappers[1].offset as usize + 8);
    let write = |name: &str, pointer: u64| -> PathBuf {
        let mut patched = data.clone();
        patched[pointer_at..pointer_at + 8].copy_from_slice(&pointer.to_le_bytes());
        let p = tmp.path().join(name);
        std::fs::write(&p, patched).unwrap();
        p
    };
    let (code, text) = verify(&write("intact.so", map.wrappers[1].pointer));
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("0 errors, 0 warnings"), "{text}");
    // Both records register the first fat binary: the second is dead weight.
    let (code, text) = verify(&write("dead.so", map.wrappers[0].pointer));
    assert_eq!(code, 0, "{text}");
    let want = format!(
        "dead.so:{two:#x}: warning: section .hip_fatbin #1: fat binary at section offset {:#x} is registered by no .hipFatBinSegment record",
        map.units[1].section_offset
    );
    assert!(text.contains(&want), "{text}");
    assert!(text.contains("0 errors, 1 warning"), "{text}");
    // The second record points 8 bytes into its fat binary.
    let (code, text) = verify(&write("dangling.so", map.wrappers[1].pointer + 8));
    assert_eq!(code, 1, "{text}");
    let want = format!(
        "dangling.so:{:#x}: error: section .hipFatBinSegment: registration record 1 points into .hip_fatbin at section offset {:#x}, which is not the start of a fat binary",
        map.wrappers[1].offset,
        map.units[1].section_offset + 8
    );
    assert!(text.contains(&want), "{text}");
    assert!(text.contains("FAILED") && text.contains("1 error, 1 warning"), "{text}");
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn a_cuda_fat_binary_no_record_registers_is_a_warning() {
    let objcopy = common::llvm_tool(19, "llvm-objcopy");
    let tmp = tempfile::tempdir().unwrap();
    let cuda = common::fixtures().join("cuda");
    let out = tmp.path().join("extra.so");
    // libsmall.so with a second fat binary in a section of its own, which
    // no .nvFatBinSegment record points at.
    let run = common::run(
        std::process::Command::new(objcopy)
            .arg(format!("--add-section=__nv_fatbin={}", cuda.join("kern_nocompress.fatbin").display()))
            .arg("--set-section-flags=__nv_fatbin=alloc,readonly")
            .arg(cuda.join("libsmall.so"))
            .arg(&out),
    );
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let (code, text) = verify(&out);
    assert_eq!(code, 0, "{text}");
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("registered by no .nvFatBinSegment")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains(": warning: section __nv_fatbin: CUDA fat binary"), "{text}");
    let (code, text) = verify(&cuda.join("libsmall.so"));
    assert!(code == 0 && !text.contains("registered by no"), "{text}");
}
