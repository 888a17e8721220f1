//! `offload` on files clang 19 built (checked in under
//! `fixtures/inspect/`, see its COMMANDS.md): every code object LLVM 19's
//! tools extract is listed, with the bytes at its offset (or what `extract`
//! writes) hashing as LLVM's extraction does. Runs without LLVM installed.

use crate::common;
use crate::inspect_support;

use inspect_support::*;
use offload_format::bundle::compressed::truncated_md5;
use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    common::fixtures().join("inspect")
}

/// Runs `offload` in the fixtures directory.
fn offload_here(args: &[&str]) -> std::process::Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args).current_dir(dir()))
}

struct Expected {
    file: String,
    location: String,
    id: String,
    size: u64,
    md5: String,
}

fn expected() -> Vec<Expected> {
    std::fs::read_to_string(dir().join("expected.tsv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Expected {
                file: f[0].into(),
                location: f[1].into(),
                id: f[2].into(),
                size: f[3].parse().unwrap(),
                md5: f[4].into(),
            }
        })
        .collect()
}

#[test]
fn every_code_object_matches_llvms_extraction() {
    let expected = expected();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for file in ["libscale.so", "libtwo.so", "newdrv.o", "libfat.a"] {
        let out = offload_here(&["list", "--json", file]);
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        let records = json(&out);
        let want: Vec<&Expected> = expected.iter().filter(|e| e.file == file).collect();
        assert_eq!(records.len(), want.len(), "{file}");
        let data = std::fs::read(dir().join(file)).unwrap();
        for (i, r) in records.iter().enumerate() {
            let e = want
                .iter()
                .find(|e| e.location == s(r, "location") && e.id == s(r, "id"))
                .unwrap_or_else(|| panic!("{file}: unexpected record {r}"));
            assert_eq!(n(r, "size"), e.size, "{r}");
            let bytes = match r["offset"].as_u64() {
                Some(off) => data[off as usize..(off + e.size) as usize].to_vec(),
                None => {
                    let dest = tmp.path().join(format!("{file}.{i}"));
                    let out = offload_here(&["extract", "--index", &i.to_string(), "-o", dest.to_str().unwrap(), file]);
                    assert!(out.status.success());
                    std::fs::read(dest).unwrap()
                }
            };
            assert_eq!(format!("{:016x}", truncated_md5(&bytes)), e.md5, "{file}: {r}");
            checked += 1;
        }
    }
    assert_eq!(checked, expected.len());
}

#[test]
fn list_schema_is_stable() {
    let out = offload_here(&["list", "--json", "libscale.so"]);
    // The URI names the file by its absolute path, which depends on the
    // checkout: the golden file says @DIR@ for the fixtures folder.
    let golden = std::fs::read_to_string(dir().join("libscale.so.list.json")).unwrap();
    let here = offload_inspect::uri::encode_path(dir().to_str().unwrap().as_bytes());
    let printed = String::from_utf8(out.stdout).unwrap().replace(&format!("file://{here}/"), "file://@DIR@/");
    assert_eq!(printed, golden);
    let text = String::from_utf8(offload_here(&["list", "libscale.so"]).stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(lines[0].starts_with("FILE"), "{text}");
    assert!(lines[3].contains("gfx90a:xnack+") && lines[3].contains("0x5000") && lines[3].ends_with("no"), "{text}");
}

#[test]
fn selection_in_real_libraries() {
    let chosen = |file: &str, gpu: &str| {
        let out = offload_here(&["select", "--json", "--gpu", gpu, file]);
        let records = json(&out);
        let ids: Vec<String> =
            records.iter().filter(|r| r["selected"] == true).map(|r| s(r, "id").to_string()).collect();
        (out.status.code().unwrap(), ids, records)
    };
    let (rc, ids, records) = chosen("libscale.so", "gfx90a:sramecc+:xnack+");
    assert_eq!((rc, ids), (0, vec!["hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+".to_string()]));
    assert_eq!(n(&records[0], "offset"), 0x5000);
    let (rc, _, records) = chosen("libscale.so", "gfx90a:sramecc+:xnack-");
    assert_eq!(rc, 1);
    let r = records.iter().find(|r| s(r, "id").ends_with("gfx90a:xnack+")).unwrap();
    assert_eq!(s(r, "reason_code"), "xnack-mismatch");
    let r = records.iter().find(|r| s(r, "id").ends_with("gfx906")).unwrap();
    assert_eq!(s(r, "reason_code"), "other-processor");
    // libtwo.so: each translation unit is a fat binary of its own.
    let (rc, ids, _) = chosen("libtwo.so", "gfx906");
    assert_eq!((rc, ids.len()), (1, 1), "the second unit has no gfx906 code");
    let (rc, ids, _) = chosen("libtwo.so", "gfx90a:xnack-");
    assert_eq!((rc, ids), (1, vec!["hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-".to_string()]));
    let out = offload_here(&["select", "--gpu", "gfx90a:xnack-", "libtwo.so"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("fat binary at section .hip_fatbin #0"));
    // The new driver's images, and the archive's members.
    let (rc, ids, _) = chosen("newdrv.o", "gfx1100");
    assert_eq!((rc, ids), (0, vec!["amdgcn-amd-amdhsa-gfx1100".to_string()]));
    let (rc, ids, _) = chosen("libfat.a", "gfx906:sramecc-:xnack-");
    assert_eq!((rc, ids.len()), (0, 2));
}

#[test]
fn fixtures_verify_clean() {
    for file in ["libscale.so", "libtwo.so", "newdrv.o", "libfat.a"] {
        let out = offload_here(&["verify", file]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{file}: {text}");
        assert!(text.contains(": OK: "), "{text}");
    }
}
