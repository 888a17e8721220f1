//! `offload replace` on the clang-built HIP fixtures of the library crate
//! (`offload-testkit/fixtures/prune`): in place and new-segment
//! outputs that `list`/`verify` read, JSON reports, refusals with exit 1
//! that leave existing files alone, and usage errors with exit 2.
//! `replace_live.rs` builds and runs programs.

use crate::prune_support;

use prune_support::{fixture, offload, p, stderr};
use serde_json::Value;
use std::path::Path;

/// Extracts code object `index` (as `offload list` counts) of `file`.
fn extract(file: &Path, index: &str, to: &Path) -> Vec<u8> {
    let o = offload(&["extract", "--index", index, p(file), "-o", p(to)]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::read(to).unwrap()
}

/// The list rows of `file` as (location, target ID, size).
fn rows(file: &Path) -> Vec<(String, String, u64)> {
    let o = offload(&["list", "--json", p(file)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    rows.iter()
        .map(|r| {
            let loc = r["location"].as_str().unwrap_or_default().to_string();
            (loc, r["target_id"].as_str().unwrap_or_default().to_string(), r["size"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn replaces_in_place_and_in_a_new_segment_and_the_result_lists_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("lld_relr.so");
    let before = std::fs::read(&input).unwrap();
    // Index 2 is unit 0's gfx90a:xnack+ object (host, gfx906, gfx90a:xnack+, ...).
    let old = extract(&input, "2", &dir.path().join("old.co"));
    for (extra, placement) in [(24usize, "in-place"), (50_000, "new-segment")] {
        let mut new = old.clone();
        new.extend(std::iter::repeat_n(0x5a, extra));
        let with = dir.path().join(format!("new{extra}.co"));
        std::fs::write(&with, &new).unwrap();
        let out = dir.path().join(format!("out{extra}.so"));
        let o = offload(&[
            "replace",
            "--json",
            "--entry",
            "gfx90a:xnack+",
            "--unit",
            "0",
            "--with",
            p(&with),
            p(&input),
            "-o",
            p(&out),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(std::fs::read(&input).unwrap(), before, "the input is never modified");
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["placement"], placement);
        assert_eq!(report["entry"], "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+");
        assert_eq!(report["new_object_size"], new.len() as u64);
        assert_eq!(report["output_size"], std::fs::metadata(&out).unwrap().len());
        assert!(report["symbols"].as_array().unwrap().iter().any(|s| s == "_Z7add_onePi.kd"), "{report}");
        // list sees the new object where the old one was, all else the same.
        let (a, b) = (rows(&input), rows(&out));
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let size = if i == 2 { new.len() as u64 } else { x.2 };
            assert_eq!((&x.0, &x.1, size), (&y.0, &y.1, y.2), "row {i}");
        }
        assert_eq!(extract(&out, "2", &dir.path().join("back.co")), new);
        // `select` for a gfx90a:xnack+ GPU loads the new object from unit 0.
        let sel = offload(&["select", "--json", "--gpu", "gfx90a:xnack+", p(&out)]);
        assert!(sel.status.success(), "{}", stderr(&sel));
        let chosen: Vec<Value> = serde_json::from_slice(&sel.stdout).unwrap();
        let unit0 = chosen.iter().find(|r| r["selected"] == true && r["unit"] == 0).unwrap();
        assert_eq!(unit0["size"], new.len() as u64, "{unit0}");
        let verify = offload(&["verify", p(&out)]);
        assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o111, 0o111, "stays executable");
        if placement == "new-segment" {
            assert!(stderr(&o).contains("GNU strip"), "{}", stderr(&o));
        }
    }
}

#[test]
fn dry_run_writes_nothing_and_text_says_what_would_happen() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("gnu_rela.so");
    let with = dir.path().join("co");
    extract(&input, "6", &with);
    let out = dir.path().join("never");
    let o =
        offload(&["replace", "--dry-run", "--entry", "gfx90a:xnack+", "--unit", "1", "--with", p(&with), p(&input)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("would replace entry hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+ of fat binary 1"), "{text}");
    assert!(text.contains("written in place"), "{text}");
    assert!(!out.exists());
}

#[test]
fn refusals_exit_1_and_leave_existing_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("gnu_rela.so");
    let gfx906 = dir.path().join("gfx906.co");
    extract(&input, "1", &gfx906);
    let other_unit = dir.path().join("unit1.co");
    extract(&input, "6", &other_unit);
    let out = dir.path().join("out.so");
    std::fs::write(&out, b"precious").unwrap();
    let cases: [(&[&str], &str); 5] = [
        (&["--entry", "gfx90a:xnack+", "--unit", "0", "--with", p(&gfx906)], "built for gfx906"),
        (&["--entry", "gfx90a:xnack+", "--unit", "0", "--with", p(&other_unit)], "_Z7add_onePi.kd"),
        (&["--entry", "gfx906", "--with", p(&gfx906)], "--unit"),
        (&["--entry", "gfx1100", "--with", p(&gfx906)], "no entry is 'gfx1100'"),
        (&["--entry", "gfx906", "--unit", "9", "--with", p(&gfx906)], "unit 9 does not exist"),
    ];
    for (args, message) in cases {
        let mut all = vec!["replace"];
        all.extend_from_slice(args);
        all.extend([p(&input), "-o", p(&out)]);
        let o = offload(&all);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(message), "{all:?}: {}", stderr(&o));
        assert_eq!(std::fs::read(&out).unwrap(), b"precious", "{all:?}");
    }
    let missing = offload(&["replace", "--entry", "gfx906", "--with", "/nonexistent", p(&input), "-o", p(&out)]);
    assert_eq!(missing.status.code(), Some(1));
    for usage in [
        vec!["replace", "--entry", "gfx906", p(&input), "-o", "x"],
        vec!["replace", "--with", p(&gfx906), p(&input), "-o", "x"],
        vec!["replace", "--entry", "gfx906", "--with", p(&gfx906), p(&input)],
        vec!["replace", "--entry", "gfx906", "--unit", "first", "--with", p(&gfx906), p(&input), "-o", "x"],
    ] {
        assert_eq!(offload(&usage).status.code(), Some(2), "{usage:?}");
    }
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
}

#[test]
fn replaces_inside_a_raw_bundle_and_over_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("rdc_ccob_lld.so");
    let bytes = std::fs::read(&input).unwrap();
    // The compressed bundle of the -fgpu-rdc library, as a file of its own.
    let unit = offload_inspect::layout::FileMap::read(&bytes).unwrap().units[0];
    let raw = dir.path().join("bundle.ccob");
    std::fs::write(&raw, &bytes[unit.offset as usize..(unit.offset + unit.used) as usize]).unwrap();
    let with = dir.path().join("co");
    let mut new = extract(&raw, "1", &with);
    new.extend_from_slice(&[1; 4000]);
    std::fs::write(&with, &new).unwrap();
    let o = offload(&["replace", "--entry", "gfx906", "--with", p(&with), p(&raw), "-o", p(&raw)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("bundle file is rebuilt"));
    let listed = rows_of_raw(&raw);
    assert!(listed.iter().any(|(t, s)| t == "gfx906" && *s == new.len() as u64), "{listed:?}");
}

fn rows_of_raw(file: &Path) -> Vec<(String, u64)> {
    rows(file).into_iter().map(|(_, t, s)| (t, s)).collect()
}
