//! The inspector's processor table: code objects for GPUs newer than LLVM
//! 19 (ROCm 7: gfx950, gfx1153, gfx1250, gfx1251) are verified, selected
//! and listed, processors missing from the table are warnings, and the
//! drop-in bundler keeps LLVM 19's view. Bundles are written by the library
//! (our bundler, like LLVM 19's, does not know these processors).

use crate::common;
use crate::inspect_support;

use inspect_support::*;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

const H: &str = "hipv4-amdgcn-amd-amdhsa--";

fn bundle(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(id, p)| (id.as_bytes(), p.as_slice())).collect();
    offload_format::bundle::binary::write(&e, NonZeroU64::new(4096).unwrap()).to_vec()
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

// e_flags: EF_AMDGPU_MACH | xnack (bits 8-9) | sramecc (bits 10-11), with
// 1 = any, 2 = off, 3 = on.
const XNACK_ANY: u32 = 0x100;
const XNACK_OFF: u32 = 0x200;
const XNACK_ON: u32 = 0x300;
const SRAMECC_ANY: u32 = 0x400;
const SRAMECC_ON: u32 = 0xc00;

/// What ROCm 7 wheels hold: native objects for new GPUs and generic ones.
fn rocm7_bundle() -> Vec<u8> {
    bundle(&[
        ("host-x86_64-unknown-linux-gnu-".into(), Vec::new()),
        (format!("{H}gfx950:sramecc+:xnack+"), elf(0x4f | XNACK_ON | SRAMECC_ON, "950+")),
        (format!("{H}gfx950:sramecc+:xnack-"), elf(0x4f | XNACK_OFF | SRAMECC_ON, "950-")),
        (format!("{H}gfx1153"), elf(0x58, "1153")),
        // e_flags as a ROCm 7 llvm-mc writes them (0x549 for gfx1250;
        // generic targets carry their generic version in bits 24-31).
        (format!("{H}gfx1250"), elf(0x549, "1250")),
        (format!("{H}gfx1251:sramecc+"), elf(0x5a | XNACK_ANY | SRAMECC_ON, "1251")),
        (format!("{H}gfx12-5-generic"), elf(0x100_055b, "12-5")),
        (format!("{H}gfx9-4-generic"), elf(0x100_055f, "9-4")),
        (format!("{H}gfx11-generic"), elf(0x54, "11")),
    ])
}

/// The chosen IDs, each other record's reason code, exit status, stderr.
fn select(file: &Path, gpu: &str) -> (i32, Vec<String>, Vec<(String, String)>, String) {
    let out = offload(&["select", "--json", "--gpu", gpu, file.to_str().unwrap()]);
    let records = json(&out);
    let chosen = records.iter().filter(|r| r["selected"] == true).map(|r| s(r, "id").to_string()).collect();
    let others = records
        .iter()
        .filter(|r| r["selected"] == false)
        .map(|r| (s(r, "id").to_string(), s(r, "reason_code").to_string()))
        .collect();
    (out.status.code().unwrap(), chosen, others, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn verify_is_clean_on_rocm7_processors() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "rocm7.hipfb", &rocm7_bundle());
    let out = offload(&["verify", f.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.trim_end().ends_with("OK: 9 code objects in 1 fat binary, 0 errors, 0 warnings"), "{stdout}");
    // The ELF headers are checked against the IDs: a gfx1250 object filed
    // under gfx1251 is an error, whatever the table's age.
    let wrong = bundle(&[(format!("{H}gfx1251"), elf(0x49 | XNACK_ANY | SRAMECC_ANY, "1250"))]);
    let f = write(d.path(), "wrong.hipfb", &wrong);
    let out = offload(&["verify", f.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("names gfx1251 but holds a code object for gfx1250"), "{stdout}");
    // A target-ID feature the header contradicts is an error.
    let lying = bundle(&[(format!("{H}gfx1251"), elf(0x5a | XNACK_ANY | SRAMECC_ON, "1251"))]);
    let f = write(d.path(), "lying.hipfb", &lying);
    let out = offload(&["verify", f.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("says sramecc any (not given), but its code object was built with sramecc on"), "{stdout}");
    assert!(!stdout.contains("xnack"), "{stdout}");
    // Features the current table refuses are still errors.
    let bad = bundle(&[(format!("{H}gfx1153:xnack+"), elf(0x58 | XNACK_ON, "x"))]);
    let f = write(d.path(), "bad.hipfb", &bad);
    let out = offload(&["verify", f.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("does not support feature 'xnack'"), "{stdout}");
}

#[test]
fn new_processors_select_their_objects_and_fall_back_to_generic_ones() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "rocm7.hipfb", &rocm7_bundle());
    let reason = |others: &[(String, String)], id: &str| others.iter().find(|(i, _)| i == id).unwrap().1.clone();

    let (rc, chosen, others, stderr) = select(&f, "gfx950:sramecc+:xnack-");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx950:sramecc+:xnack-")]), "{stderr}");
    assert_eq!(reason(&others, &format!("{H}gfx950:sramecc+:xnack+")), "xnack-mismatch");
    assert_eq!(reason(&others, &format!("{H}gfx9-4-generic")), "not-chosen");
    assert!(stderr.is_empty(), "{stderr}");

    // No native gfx1151 object: the gfx11 generic one loads.
    let (rc, chosen, _, _) = select(&f, "gfx1151");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx11-generic")]));
    let (rc, chosen, _, _) = select(&f, "gfx1153");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx1153")]));
    let (rc, chosen, _, _) = select(&f, "gfx942:sramecc+:xnack+");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx9-4-generic")]));
    // gfx1251 with SRAM ECC off: not the sramecc+ object, but the family's
    // generic one (which leaves sramecc out).
    let (rc, chosen, others, _) = select(&f, "gfx1251:sramecc-");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx12-5-generic")]));
    assert_eq!(reason(&others, &format!("{H}gfx1251:sramecc+")), "sramecc-mismatch");
    assert_eq!(reason(&others, &format!("{H}gfx1250")), "other-processor");
    let (rc, chosen, _, _) = select(&f, "gfx1250:sramecc+");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx1250")]));
}

#[test]
fn processors_missing_from_the_table_are_warnings() {
    let d = tempfile::tempdir().unwrap();
    let data = bundle(&[
        ("host-x86_64-unknown-linux-gnu-".into(), Vec::new()),
        (format!("{H}gfx9999:xnack+:sramecc-"), elf(0xfe, "future")),
        (format!("{H}gfx9999:xnack-"), elf(0xfe, "future-")),
        (format!("{H}gfx90a"), elf(0x3f | XNACK_ANY | SRAMECC_ANY, "90a")),
    ]);
    let f = write(d.path(), "future.hipfb", &data);

    let out = offload(&["verify", "--json", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let diags = json(&out);
    assert_eq!(diags.len(), 2, "{diags:?}");
    for d in &diags {
        assert_eq!(s(d, "severity"), "warning");
        assert!(s(d, "message").contains("processor 'gfx9999' is not in this tool's processor table"), "{d}");
    }

    // list shows the stored target IDs.
    let rows = list_json(&f);
    let targets: Vec<&str> = rows.iter().map(|r| s(r, "target_id")).collect();
    assert_eq!(targets, ["", "gfx9999:xnack+:sramecc-", "gfx9999:xnack-", "gfx90a"]);

    // select matches by exact name, features as given, and warns.
    let (rc, chosen, others, stderr) = select(&f, "gfx9999:xnack-");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx9999:xnack-")]));
    assert!(stderr.contains("warning: --gpu: processor 'gfx9999' is not in this tool's processor table"), "{stderr}");
    assert!(others.contains(&(format!("{H}gfx9999:xnack+:sramecc-"), "xnack-mismatch".into())));
    assert!(others.contains(&(format!("{H}gfx90a"), "other-processor".into())));
    let (rc, chosen, _, _) = select(&f, "gfx9999:sramecc-:xnack+");
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx9999:xnack+:sramecc-")]));
    let (rc, chosen, _, stderr) = select(&f, "gfx9998");
    assert_eq!((rc, chosen.len()), (1, 0));
    assert!(stderr.contains("not in this tool's processor table"), "{stderr}");

    // extract --gpu takes the same path.
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = offload(&[
        "extract",
        "--gpu",
        "gfx9999:xnack-",
        "--output-dir",
        out_dir.to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not in this tool's processor table"));
    assert_eq!(std::fs::read_dir(&out_dir).unwrap().count(), 1);

    // Names that are not processors at all stay command-line errors.
    let out = offload(&["select", "--gpu", "banana", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
}

/// The drop-in bundler keeps LLVM 19's table: gfx950 is no GPU to it, so
/// the ID it writes is LLVM 19's (the target ID read as part of the
/// triple). Checked against LLVM 19 itself where it is installed.
#[test]
fn the_bundler_keeps_llvm19s_view_of_gfx950() {
    let d = tempfile::tempdir().unwrap();
    let host = write(d.path(), "h.o", b"host");
    let dev = write(d.path(), "d.o", b"device");
    let targets = format!("-targets=host-x86_64-unknown-linux-gnu,{H}gfx950");
    let run = |bundler: &Path, out: &Path| {
        let input = |p: &Path| format!("-input={}", p.display());
        let o = common::run(std::process::Command::new(bundler).args([
            "-type=o".to_string(),
            targets.clone(),
            input(&host),
            input(&dev),
            format!("-output={}", out.display()),
        ]));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out).unwrap()
    };
    let ours = run(Path::new(env!("CARGO_BIN_EXE_clang-offload-bundler")), &d.path().join("ours.o"));
    let rows = list_json(&d.path().join("ours.o"));
    let ids: Vec<&str> = rows.iter().map(|r| s(r, "id")).collect();
    assert_eq!(ids, ["host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx950-"]);
    if let Some(llvm) = common::llvm_tool_if_found(19, "clang-offload-bundler") {
        assert_eq!(ours, run(&llvm, &d.path().join("llvm.o")), "LLVM 19 wrote other bytes");
    }
}
