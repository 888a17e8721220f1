//! Comparing `offload` with NVIDIA's `cuobjdump` file by file, shared by the
//! nvcc corpus (`cuda_live.rs`) and the clang 19 corpus (`cuda_clang.rs`):
//! the entries listed, the bytes of every extracted cubin and PTX file, and
//! the grouping into units.
#![allow(dead_code)]

use crate::common;
use crate::inspect_support::{json, n, offload, s};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where nvcc 13.5 and cuobjdump are (`scripts/install-cuda-tools.sh`).
pub fn cuda_bin() -> PathBuf {
    std::env::var_os("OFFLOAD_CUDA_BIN")
        .map_or_else(|| PathBuf::from("/opt/cuda-wheels/nvidia/cu13/bin"), PathBuf::from)
}

/// Asserts that the CUDA tools a test needs are there. The tests carry
/// `#[cfg_attr(not(has_cuda), ignore = ...)]` (build.rs probes the tools and
/// fails the build without them under `OFFLOAD_REQUIRE_CUDA=1`), so a missing
/// tool here fails the test instead of passing it.
pub fn assert_tools(what: &str, tools: &[PathBuf]) {
    let missing: Vec<String> = tools.iter().filter(|t| !t.is_file()).map(|t| t.display().to_string()).collect();
    assert!(missing.is_empty(), "the {what} need {}; run scripts/install-cuda-tools.sh", missing.join(", "));
}

/// The files a corpus script wrote, sources left out, sorted.
pub fn corpus_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none_or(|e| e != "cu"))
        .collect();
    files.sort();
    files
}

/// One entry of `cuobjdump -all`: kind (`elf`, `ptx`, `nvvm`), arch as
/// printed, whether it says `compressed` (children of a concatenated
/// entry: the parent's).
#[derive(Debug, PartialEq)]
pub struct Dumped {
    pub kind: String,
    pub arch: String,
    pub compressed: bool,
}

pub fn cuobjdump_entries(file: &Path) -> Vec<Dumped> {
    let out = common::run(Command::new(cuda_bin().join("cuobjdump")).arg("-all").arg(file));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut entries: Vec<Dumped> = Vec::new();
    let mut parent_compressed = false;
    let mut in_concat = false;
    for line in text.lines() {
        let child = line.starts_with('\t');
        let line = line.trim();
        if let Some(kind) = line.strip_prefix("Fatbin ").and_then(|l| l.strip_suffix(" code:")) {
            if kind == "concatenated entry" {
                in_concat = true;
                parent_compressed = false;
                continue;
            }
            if !child {
                in_concat = false;
            }
            let compressed = child && in_concat && parent_compressed;
            entries.push(Dumped { kind: kind.to_string(), arch: String::new(), compressed });
        } else if let Some(arch) = line.strip_prefix("arch = ") {
            if let Some(e) = entries.last_mut() {
                e.arch = arch.to_string();
            }
        } else if line == "compressed" {
            if in_concat && entries.last().is_none_or(|_| !child) {
                parent_compressed = true;
            } else if let Some(e) = entries.last_mut() {
                e.compressed = true;
            }
        }
    }
    entries
}

/// (kind, arch, bytes) of every cubin and PTX cuobjdump extracts from
/// `file`, in its order.
pub fn cuobjdump_dumped(file: &Path) -> Vec<(String, String, Vec<u8>)> {
    let entries = cuobjdump_entries(file);
    let dir = tempfile::tempdir().unwrap();
    let (elf, ptx) = cuobjdump_extract(file, dir.path());
    let (mut elf, mut ptx) = (elf.into_iter(), ptx.into_iter());
    let mut out = Vec::new();
    for e in entries {
        let bytes = match e.kind.as_str() {
            "elf" => elf.next(),
            "ptx" => ptx.next(),
            _ => continue,
        };
        out.push((e.kind, e.arch, bytes.unwrap_or_else(|| panic!("{}: cuobjdump extracted too few", file.display()))));
    }
    out
}

pub fn list(file: &Path) -> Vec<Value> {
    let out = offload(&["list", "--json", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    json(&out)
}

/// `offload` records in the order `cuobjdump -all` prints them. `offload`
/// keeps file order; cuobjdump puts the executable fat binaries
/// (`.nv_fatbin`) before the relocatable ones (`__nv_relfatbin`) wherever
/// they lie: clang's host link places `__nv_relfatbin` first
/// (`cuda_clang.rs`, `rdc_exe`), nvcc's places it last. A stable sort, so
/// file order holds within each kind; no corpus archive mixes both kinds
/// (cuobjdump would apply this per member).
pub fn in_cuobjdump_order(mut records: Vec<Value>) -> Vec<Value> {
    records.sort_by_key(|r| s(r, "location").contains("__nv_relfatbin"));
    records
}

/// Asserts that `offload list` reports what `cuobjdump -all` does (kind,
/// arch, compression, order); returns how many entries were compared.
pub fn assert_listing_matches(file: &Path) -> usize {
    let want = cuobjdump_entries(file);
    let ours: Vec<Dumped> = in_cuobjdump_order(list(file))
        .iter()
        .filter(|r| s(r, "image_kind") != "concat")
        .map(|r| Dumped {
            kind: s(r, "image_kind").to_string(),
            arch: s(r, "target_id").to_string(),
            compressed: r["compressed"].as_bool().unwrap(),
        })
        .collect();
    assert!(!want.is_empty(), "{}: cuobjdump found nothing", file.display());
    assert_eq!(ours, want, "{}", file.display());
    want.len()
}

/// `cuobjdump -all -xelf all -xptx all` in a fresh folder: the files it
/// wrote, in the order it reports them, per kind.
pub fn cuobjdump_extract(file: &Path, into: &Path) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let out = common::run(
        Command::new(cuda_bin().join("cuobjdump"))
            .current_dir(into)
            .args(["-all", "-xelf", "all", "-xptx", "all"])
            .arg(file),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (mut elf, mut ptx) = (Vec::new(), Vec::new());
    for line in text.lines() {
        let Some((head, rest)) = line.split_once(": ") else { continue };
        let name = rest.split(' ').next().unwrap();
        let bytes = || std::fs::read(into.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        if head.starts_with("Extracting ELF file") {
            elf.push(bytes());
        } else if head.starts_with("Extracting PTX file") {
            ptx.push(bytes());
        }
    }
    (elf, ptx)
}

/// `cuobjdump -all -lelf -lptx`: the listed file names, per kind, in the
/// order printed (`ELF file    1: kern.1.sm_80.cubin`).
pub fn cuobjdump_names(file: &Path) -> (Vec<String>, Vec<String>) {
    let out = common::run(Command::new(cuda_bin().join("cuobjdump")).args(["-all", "-lelf", "-lptx"]).arg(file));
    let (mut elf, mut ptx) = (Vec::new(), Vec::new());
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((head, name)) = line.split_once(": ") else { continue };
        if head.starts_with("ELF file") {
            elf.push(name.trim().to_string());
        } else if head.starts_with("PTX file") {
            ptx.push(name.trim().to_string());
        }
    }
    (elf, ptx)
}

/// Asserts that `cuobjdump -lelf -lptx` names as many cubins and PTX files
/// as `offload list` reports, each with the listed architecture (ELF names
/// drop an `f` suffix, docs/formats/cuda-fatbin.md §7, hence the trimmed match).
pub fn assert_names_match(file: &Path) {
    let (elf_names, ptx_names) = cuobjdump_names(file);
    let records = in_cuobjdump_order(list(file));
    for (kind, names) in [("elf", elf_names), ("ptx", ptx_names)] {
        let arches: Vec<&str> =
            records.iter().filter(|r| s(r, "image_kind") == kind).map(|r| s(r, "target_id")).collect();
        assert_eq!(arches.len(), names.len(), "{}: {kind} count, cuobjdump lists {names:?}", file.display());
        for (arch, name) in arches.iter().zip(&names) {
            // BASE.N.sm_XY.cubin / BASE.N.sm_XY.ptx
            let listed = name.rsplit('.').nth(1).unwrap_or_default();
            let same = listed.trim_end_matches(['a', 'f']) == arch.trim_end_matches(['a', 'f']);
            assert!(same, "{}: {name} listed for {arch}", file.display());
        }
    }
}

/// Asserts that `offload extract` writes, for every cubin and PTX entry, the
/// bytes cuobjdump extracts (after checking the names `-lelf`/`-lptx` list) (and, for stored entries, the bytes at the
/// listed offset); returns how many files were compared.
pub fn assert_extraction_matches(file: &Path) -> usize {
    if file.extension().is_none_or(|e| e != "cubin") {
        assert_names_match(file);
    }
    let theirs = tempfile::tempdir().unwrap();
    let (want_elf, want_ptx) = cuobjdump_extract(file, theirs.path());
    let ours = tempfile::tempdir().unwrap();
    // Every cubin and PTX entry by index (NVVM entries are obfuscated:
    // extracting them is refused, and cuobjdump does not either).
    let mut args = vec!["extract".to_string(), "--json".into(), "--output-dir".into()];
    args.push(ours.path().to_str().unwrap().into());
    for (i, r) in list(file).iter().enumerate() {
        if matches!(s(r, "image_kind"), "elf" | "ptx") {
            args.extend(["--index".to_string(), i.to_string()]);
        }
    }
    args.push(file.to_str().unwrap().into());
    let out = offload(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let data = std::fs::read(file).unwrap();
    let (mut elf, mut ptx) = (Vec::new(), Vec::new());
    for r in in_cuobjdump_order(json(&out)) {
        let bytes = std::fs::read(s(&r, "path")).unwrap();
        assert_eq!(bytes.len() as u64, n(&r, "size"), "{}: {r}", file.display());
        if let Some(off) = r["offset"].as_u64() {
            assert_eq!(&data[off as usize..off as usize + bytes.len()], &bytes[..], "{}: {r}", file.display());
        }
        match s(&r, "image_kind") {
            "elf" => elf.push(bytes),
            "ptx" => ptx.push(bytes),
            _ => {}
        }
    }
    assert_eq!(elf.len(), want_elf.len(), "{}: cubin count", file.display());
    assert_eq!(ptx.len(), want_ptx.len(), "{}: PTX count", file.display());
    for (i, (a, b)) in elf.iter().zip(&want_elf).enumerate() {
        assert!(a == b, "{}: cubin {} differs from cuobjdump's", file.display(), i + 1);
    }
    for (i, (a, b)) in ptx.iter().zip(&want_ptx).enumerate() {
        assert!(a == b, "{}: PTX {} differs from cuobjdump's", file.display(), i + 1);
    }
    elf.len() + ptx.len()
}

/// Asserts that the records of `file` form the units `locations` (one
/// location per unit, units numbered 0, 1, … in order).
pub fn assert_units(file: &Path, locations: &[&str]) {
    let records = list(file);
    let mut seen: Vec<(u64, String)> = Vec::new();
    for r in &records {
        let unit = n(r, "unit");
        let loc = s(r, "location").to_string();
        if seen.last().is_none_or(|(u, _)| *u != unit) {
            seen.push((unit, loc));
        } else {
            assert_eq!(seen.last().unwrap().1, loc, "{}: one unit, one location", file.display());
        }
    }
    let got: Vec<&str> = seen.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(got, locations, "{}", file.display());
    let numbers: Vec<u64> = seen.iter().map(|(u, _)| *u).collect();
    assert_eq!(numbers, (0..locations.len() as u64).collect::<Vec<_>>(), "{}", file.display());
}

/// Asserts that `offload verify` passes `file` without a word on stderr.
pub fn assert_verifies(file: &Path) {
    let out = offload(&["verify", file.to_str().unwrap()]);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}: {}{}",
        file.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
