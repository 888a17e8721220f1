//! `offload select`, `extract` and `verify` on bundles
//! written by the library (no LLVM needed); the command-line errors are
//! cases in `cli/cases/`.

use crate::common;
use crate::inspect_support;

use inspect_support::*;
use offload_format::bundle::compressed::{CompressOptions, compress};
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};

const H: &str = "hipv4-amdgcn-amd-amdhsa--";

fn bundle(entries: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(id, p)| (id.as_bytes(), p.as_slice())).collect();
    offload_format::bundle::binary::write(&e, NonZeroU64::new(4096).unwrap()).to_vec()
}

/// The ELF e_flags LLVM 19 writes (see elf_flags.rs): mach | xnack | sramecc.
fn gpu_bundle() -> Vec<u8> {
    bundle(&[
        ("host-x86_64-unknown-linux-gnu-", Vec::new()),
        (&format!("{H}gfx90a:xnack+"), elf(0x3f | 0x300 | 0x400, "90a+")),
        (&format!("{H}gfx90a:xnack-"), elf(0x3f | 0x200 | 0x400, "90a-")),
        (&format!("{H}gfx906:sramecc+"), elf(0x2f | 0x100 | 0xc00, "906s+")),
        (&format!("{H}gfx803"), elf(0x2a, "803")),
        ("openmp-amdgcn-amd-amdhsa--gfx90a:xnack+", elf(0x3f | 0x300 | 0x400, "omp")),
        (&format!("{H}gfx1100"), elf(0x41, "1100")),
    ])
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

/// The selected IDs and each other record's reason code.
fn select(file: &Path, gpu: &str, extra: &[&str]) -> (i32, Vec<String>, Vec<(String, String)>, String) {
    let mut args = vec!["select", "--json", "--gpu", gpu];
    args.extend(extra);
    args.push(file.to_str().unwrap());
    let out = offload(&args);
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
fn selection_follows_the_target_id_rules() {
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "gpus.hipfb", &gpu_bundle());
    let reason = |others: &[(String, String)], id: &str| others.iter().find(|(i, _)| i == id).unwrap().1.clone();

    let (rc, chosen, others, _) = select(&f, "gfx90a:sramecc+:xnack+", &[]);
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx90a:xnack+")]));
    assert_eq!(reason(&others, &format!("{H}gfx90a:xnack-")), "xnack-mismatch");
    assert_eq!(reason(&others, &format!("{H}gfx906:sramecc+")), "other-processor");
    assert_eq!(reason(&others, "openmp-amdgcn-amd-amdhsa--gfx90a:xnack+"), "other-kind");
    assert_eq!(reason(&others, "host-x86_64-unknown-linux-gnu-"), "host");

    let (rc, chosen, _, _) = select(&f, "amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack-", &[]);
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx90a:xnack-")]));

    // The GPU's xnack mode not given (and HSA_XNACK unset): code fixing
    // xnack matches neither setting, as comgr answers for such an ISA name,
    // and the note says how to name the mode (docs/reference/selection-rules.md).
    let (rc, chosen, others, err) = select(&f, "gfx90a", &[]);
    assert_eq!((rc, chosen), (1, vec![]));
    assert_eq!(reason(&others, &format!("{H}gfx90a:xnack+")), "xnack-mismatch");
    assert!(
        err.contains("--gpu gfx90a leaves xnack unset and its mode cannot be told (HSA_XNACK is not set)"),
        "{err}"
    );

    let (rc, chosen, _, _) = select(&f, "gfx906:sramecc+:xnack-", &[]);
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx906:sramecc+")]));
    let (rc, _, others, _) = select(&f, "gfx906:sramecc-", &[]);
    assert_eq!((rc, reason(&others, &format!("{H}gfx906:sramecc+"))), (1, "sramecc-mismatch".into()));

    // Alternative names of the GPU.
    for alias in ["fiji", "polaris10", "gfx803"] {
        let (rc, chosen, _, _) = select(&f, alias, &[]);
        assert_eq!((rc, chosen), (0, vec![format!("{H}gfx803")]), "{alias}");
    }

    let (rc, chosen, _, _) = select(&f, "gfx90a:xnack+", &["--kind", "openmp"]);
    assert_eq!((rc, chosen), (0, vec!["openmp-amdgcn-amd-amdhsa--gfx90a:xnack+".to_string()]));

    let (rc, chosen, others, _) = select(&f, "gfx1030", &[]);
    assert_eq!((rc, chosen.len()), (1, 0));
    assert!(others.iter().filter(|(i, _)| i.starts_with(H)).all(|(_, r)| r == "other-processor"));

    // The selected object's offset points at its bytes.
    let out = offload(&["select", "--json", "--gpu", "gfx1100", f.to_str().unwrap()]);
    let r = json(&out).into_iter().find(|r| r["selected"] == true).unwrap();
    let data = std::fs::read(&f).unwrap();
    let off = n(&r, "offset") as usize;
    assert!(data[off..off + n(&r, "size") as usize].ends_with(b"1100"));

    // Human output names the reasons.
    let out = offload(&["select", "--gpu", "gfx90a:xnack-", f.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("xnack mismatch: the code object needs xnack+, the GPU has xnack-"), "{text}");
    assert!(text.lines().nth(1).unwrap().contains("selected"), "{text}");
}

#[test]
fn exact_feature_match_is_preferred_over_any() {
    let d = tempfile::tempdir().unwrap();
    // LLVM 19 refuses to bundle these together; LLVM 14 and others do not.
    let f = write(
        d.path(),
        "mixed.hipfb",
        &bundle(&[
            (&format!("{H}gfx90a"), elf(0x3f | 0x100 | 0x400, "any")),
            (&format!("{H}gfx90a:xnack+"), elf(0x33f | 0x400, "+")),
        ]),
    );
    let (rc, chosen, others, _) = select(&f, "gfx90a:xnack+", &[]);
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx90a:xnack+")]));
    assert_eq!(others, [(format!("{H}gfx90a"), "not-chosen".to_string())]);
    let (rc, chosen, _, _) = select(&f, "gfx90a:xnack-", &[]);
    assert_eq!((rc, chosen), (0, vec![format!("{H}gfx90a")]));
    // verify warns about the pair.
    let out = offload(&["verify", f.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("conflict"));
}

#[test]
fn every_fat_binary_needs_a_code_object() {
    let d = tempfile::tempdir().unwrap();
    let mut data = bundle(&[(&format!("{H}gfx906"), elf(0x2f | 0x500, "a"))]);
    data.resize(data.len().next_multiple_of(4096), 0);
    data.extend(
        compress(&bundle(&[(&format!("{H}gfx90a"), elf(0x53f, "b"))]), &CompressOptions::default()).unwrap().bytes,
    );
    let f = write(d.path(), "two", &data);
    let (rc, chosen, _, err) = select(&f, "gfx906", &[]);
    assert_eq!((rc, chosen.len()), (1, 1));
    assert!(err.contains("fat binary at file #1"), "{err}");
    let (rc, chosen, _, _) = select(&f, "gfx90a", &[]);
    assert_eq!((rc, chosen.len()), (1, 1));
    let (rc, _, _, err) = select(&f, "sm_80", &["--kind", "openmp"]);
    assert_eq!(rc, 1);
    assert!(err.contains("no openmp code objects found"), "{err}");
}

#[test]
fn extract_by_id_target_id_gpu_and_index() {
    let d = tempfile::tempdir().unwrap();
    let data = gpu_bundle();
    let f = write(d.path(), "gpus.hipfb", &data);
    let records = list_json(&f);
    let payload = |id: &str| {
        let r = records.iter().find(|r| s(r, "id") == id).unwrap();
        let off = n(r, "offset") as usize;
        data[off..off + n(r, "size") as usize].to_vec()
    };
    let out_file = d.path().join("one.co");
    for filter in [
        vec!["--id", "hipv4-amdgcn-amd-amdhsa--gfx906:sramecc+"],
        vec!["--target-id", "gfx906:sramecc+"],
        vec!["--gpu", "gfx906:sramecc+:xnack+"],
        vec!["--index", "3"],
    ] {
        let _ = std::fs::remove_file(&out_file);
        let mut args = vec!["extract"];
        args.extend(&filter);
        args.extend(["-o", out_file.to_str().unwrap(), f.to_str().unwrap()]);
        let out = offload(&args);
        assert!(out.status.success(), "{filter:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read(&out_file).unwrap(), payload(&format!("{H}gfx906:sramecc+")), "{filter:?}");
    }
    // Alternative names in --target-id.
    let out = offload(&["extract", "--target-id", "fiji", "-o", out_file.to_str().unwrap(), f.to_str().unwrap()]);
    assert!(out.status.success());
    assert_eq!(std::fs::read(&out_file).unwrap(), payload(&format!("{H}gfx803")));
    // Everything into a directory.
    let dir = d.path().join("all");
    std::fs::create_dir(&dir).unwrap();
    let out = offload(&["extract", "--all", "--json", "--output-dir", dir.to_str().unwrap(), f.to_str().unwrap()]);
    assert!(out.status.success());
    let written = json(&out);
    assert_eq!(written.len(), 7);
    for w in &written {
        assert_eq!(std::fs::read(s(w, "path")).unwrap(), payload(s(w, "id")));
    }
    assert!(s(&written[1], "path").ends_with("gpus.hipfb-1-hipv4-amdgcn-amd-amdhsa--gfx90a_xnack+.co"));
    // Several matches for one output, or none: exit 1, nothing written.
    let none = d.path().join("none");
    let out = offload(&["extract", "--target-id", "gfx90a:xnack+", "-o", none.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!none.exists());
    let out = offload(&["extract", "--id", "nope", "-o", none.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!none.exists());
}

#[test]
fn verify_reports_damage_with_offsets() {
    let d = tempfile::tempdir().unwrap();
    let good = gpu_bundle();
    let f = write(d.path(), "good", &good);
    let out = offload(&["verify", f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));

    // A lying payload offset in the third record.
    let records = 32 + 24 + "host-x86_64-unknown-linux-gnu-".len() + 24 + format!("{H}gfx90a:xnack+").len();
    let mut bad = good.clone();
    bad[records..records + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let f = write(d.path(), "lying", &bad);
    let out = offload(&["verify", "--json", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let diags = json(&out);
    assert_eq!(n(&diags[0], "offset"), records as u64);
    assert!(s(&diags[0], "message").contains("outside"), "{diags:?}");
    // list still shows the entries before the damage, and fails.
    let out = offload(&["list", "--json", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out).len(), 2);

    // An entry whose code object is for another GPU.
    let f = write(d.path(), "mislabeled", &bundle(&[(&format!("{H}gfx90a"), elf(0x2f | 0x500, "906"))]));
    let out = offload(&["verify", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(":0x1000: error: file: entry 'hipv4-amdgcn-amd-amdhsa--gfx90a' names gfx90a but holds a code object for gfx906"), "{text}");

    // A damaged compressed bundle: the offset is the compressed bundle's.
    let mut ccob = compress(&good, &CompressOptions::default()).unwrap().bytes;
    let k = ccob.len() - 10;
    ccob[k] ^= 0xff;
    let mut data = bundle(&[(&format!("{H}gfx906"), elf(0x52f, "x"))]);
    data.resize(8192, 0);
    data.extend(&ccob);
    let f = write(d.path(), "ccob", &data);
    let out = offload(&["verify", "--json", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let diags = json(&out);
    assert!(diags.iter().any(|d| d["offset"] == 8192 && s(d, "severity") == "error"), "{diags:?}");

    // Nothing to verify, unreadable file.
    let f = write(d.path(), "plain.txt", b"hello");
    assert_eq!(offload(&["verify", f.to_str().unwrap()]).status.code(), Some(1));
    // A file that cannot be read is an I/O error (docs/reference/offload.md).
    assert_eq!(offload(&["verify", "/nonexistent/x"]).status.code(), Some(2));
}

#[test]
fn damaged_files_never_crash_any_command() {
    let d = tempfile::tempdir().unwrap();
    let mut base = gpu_bundle();
    base.truncate(0x3000);
    base.extend(compress(&gpu_bundle(), &CompressOptions::default()).unwrap().bytes);
    let mut seed = 0x9e3779b97f4a7c15u64;
    for round in 0..40 {
        let mut data = base.clone();
        for _ in 0..1 + round % 5 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let i = (seed as usize) % 0x400.min(data.len());
            let i = if round % 2 == 0 { i } else { data.len() - 1 - (seed as usize >> 20) % 4096 };
            data[i] ^= (seed >> 32) as u8 | 1;
        }
        let f = write(d.path(), "fuzz", &data);
        for cmd in [
            vec!["list"],
            vec!["verify"],
            vec!["select", "--gpu", "gfx90a:xnack+"],
            vec!["extract", "--all", "--output-dir", d.path().to_str().unwrap()],
        ] {
            let mut args = cmd.clone();
            args.push(f.to_str().unwrap());
            let out = offload(&args);
            let code = out.status.code();
            assert!(
                matches!(code, Some(0 | 1)),
                "{cmd:?} round {round}: {code:?} {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// `gfx90a` against a library holding `gfx90a:xnack+` and `gfx90a:xnack-`
/// (fixtures/inspect/libtwo.so): `extract --gpu` takes the xnack mode a
/// process gets (the driver's default, off, or `HSA_XNACK`) as `select`
/// and `check` do, `--target-id` names code and takes both settings as
/// `prune --keep` does; each says what it took.
#[test]
fn extract_gpu_and_target_id_without_features() {
    let lib = common::fixtures().join("inspect/libtwo.so");
    let d = tempfile::tempdir().unwrap();
    let run = |args: &[&str], env: Option<&str>| {
        let out_dir = d.path().join(format!("out{}", args.len() + env.map_or(0, str::len)));
        let _ = std::fs::remove_dir_all(&out_dir);
        std::fs::create_dir(&out_dir).unwrap();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_offload"));
        command.arg("extract").args(args).args([
            "--json",
            "--output-dir",
            out_dir.to_str().unwrap(),
            lib.to_str().unwrap(),
        ]);
        command.env_remove("HSA_XNACK");
        if let Some(v) = env {
            command.env("HSA_XNACK", v);
        }
        let out = common::run(&mut command);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let ids: Vec<String> = json(&out).iter().map(|r| s(r, "id").to_string()).collect();
        (ids, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (ids, err) = run(&["--gpu", "gfx90a"], Some("0"));
    assert_eq!(ids, [format!("{H}gfx90a:xnack-")]);
    assert!(err.contains("note: --gpu gfx90a leaves xnack unset: taking xnack- (HSA_XNACK=0 is set)"), "{err}");
    let (ids, err) = run(&["--gpu", "gfx90a"], Some("1"));
    assert_eq!(ids, [format!("{H}gfx90a:xnack+")]);
    assert!(err.contains("taking xnack+ (HSA_XNACK=1 is set)"), "{err}");
    let (ids, err) = run(&["--target-id", "gfx90a"], Some("1"));
    assert_eq!(ids, [format!("{H}gfx90a:xnack+"), format!("{H}gfx90a:xnack-")]);
    assert!(
        err.contains("note: --target-id gfx90a leaves xnack unset: takes gfx90a:xnack+ and gfx90a:xnack-"),
        "{err}"
    );
    let (ids, err) = run(&["--target-id", "gfx90a:xnack-"], None);
    assert_eq!(ids, [format!("{H}gfx90a:xnack-")]);
    assert!(!err.contains("note"), "{err}");
    // Nothing for the processor's other settings: the note says what there is.
    let scale = common::fixtures().join("inspect/libscale.so");
    let out = offload(&[
        "extract",
        "--target-id",
        "gfx90a:xnack-",
        "--output-dir",
        d.path().to_str().unwrap(),
        scale.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "--target-id gfx90a:xnack-: fixtures/inspect/libscale.so holds gfx90a code for gfx90a:xnack+ only"
        ) || err.contains("holds gfx90a code for gfx90a:xnack+ only"),
        "{err}"
    );
}
