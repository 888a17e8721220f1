//! `offload` against NVIDIA's own `cuobjdump` on a corpus built with nvcc
//! 13.5 (`fixtures/cuda/make-corpus.sh`): the entries listed (kind, arch,
//! compression, order), the bytes of every extracted cubin and PTX file,
//! and the grouping into units. The tools come from PyPI wheels
//! (`scripts/install-cuda-tools.sh`); without them the tests skip with a
//! message, unless `OFFLOAD_REQUIRE_CUDA=1` (CI), where they fail.

mod common;
mod inspect_support;

use inspect_support::{json, n, offload, s};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn cuda_bin() -> PathBuf {
    std::env::var_os("OFFLOAD_CUDA_BIN")
        .map_or_else(|| PathBuf::from("/opt/cuda-wheels/nvidia/cu13/bin"), PathBuf::from)
}

/// The corpus folder, built once per test run; `None` (skip) without nvcc.
fn corpus() -> Option<&'static Path> {
    static CORPUS: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    CORPUS
        .get_or_init(|| {
            let bin = cuda_bin();
            if !bin.join("nvcc").is_file() || !bin.join("cuobjdump").is_file() {
                assert!(
                    std::env::var("OFFLOAD_REQUIRE_CUDA").as_deref() != Ok("1"),
                    "OFFLOAD_REQUIRE_CUDA=1 but nvcc/cuobjdump are missing in {}; run scripts/install-cuda-tools.sh",
                    bin.display()
                );
                eprintln!(
                    "SKIPPING the CUDA live tests: nvcc/cuobjdump not in {} (run scripts/install-cuda-tools.sh, \
                     or set OFFLOAD_REQUIRE_CUDA=1 to fail instead)",
                    bin.display()
                );
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda/make-corpus.sh");
            let out = common::run(Command::new("bash").arg(script).arg(dir.path()).env("OFFLOAD_CUDA_BIN", &bin));
            assert!(out.status.success(), "corpus build failed: {}", String::from_utf8_lossy(&out.stderr));
            Some(dir)
        })
        .as_ref()
        .map(|d| d.path())
}

fn corpus_files(dir: &Path) -> Vec<PathBuf> {
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
struct Dumped {
    kind: String,
    arch: String,
    compressed: bool,
}

fn cuobjdump_entries(file: &Path) -> Vec<Dumped> {
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

fn list(file: &Path) -> Vec<Value> {
    let out = offload(&["list", "--json", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    json(&out)
}

#[test]
fn listing_matches_cuobjdump() {
    let Some(dir) = corpus() else { return };
    let mut compared = 0;
    for file in corpus_files(dir) {
        if file.extension().is_some_and(|e| e == "cubin") {
            continue; // cuobjdump -all prints nothing for a raw cubin
        }
        let want = cuobjdump_entries(&file);
        let ours: Vec<Dumped> = list(&file)
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
        compared += want.len();
    }
    assert!(compared > 100, "only {compared} entries compared");
}

/// `cuobjdump -all -xelf all -xptx all` in a fresh folder: the files it
/// wrote, in the order it reports them, per kind.
fn cuobjdump_extract(file: &Path, into: &Path) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
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

#[test]
fn extracted_bytes_match_cuobjdump() {
    let Some(dir) = corpus() else { return };
    let mut compared = 0;
    for file in corpus_files(dir) {
        let theirs = tempfile::tempdir().unwrap();
        let (want_elf, want_ptx) = cuobjdump_extract(&file, theirs.path());
        let ours = tempfile::tempdir().unwrap();
        // Every cubin and PTX entry by index (NVVM entries are obfuscated:
        // extracting them is refused, and cuobjdump does not either).
        let path = file.to_str().unwrap();
        let mut args = vec!["extract".to_string(), "--json".into(), "--output-dir".into()];
        args.push(ours.path().to_str().unwrap().into());
        for (i, r) in list(&file).iter().enumerate() {
            if matches!(s(r, "image_kind"), "elf" | "ptx") {
                args.extend(["--index".to_string(), i.to_string()]);
            }
        }
        args.push(path.into());
        let out = offload(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
        let data = std::fs::read(&file).unwrap();
        let (mut elf, mut ptx) = (Vec::new(), Vec::new());
        for r in json(&out) {
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
        compared += elf.len() + ptx.len();
    }
    assert!(compared > 100, "only {compared} files compared");
}

#[test]
fn units_are_fat_binaries() {
    let Some(dir) = corpus() else { return };
    // (file, number of units, locations of the units in order): nvcc 13
    // links one device-linked fat binary plus every object's own.
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
        let records = list(&dir.join(file));
        let mut seen: Vec<(u64, String)> = Vec::new();
        for r in &records {
            let unit = n(r, "unit");
            let loc = s(r, "location").to_string();
            if seen.last().is_none_or(|(u, _)| *u != unit) {
                seen.push((unit, loc));
            } else {
                assert_eq!(seen.last().unwrap().1, loc, "{file}: one unit, one location");
            }
        }
        let locations: Vec<&str> = seen.iter().map(|(_, l)| l.as_str()).collect();
        assert_eq!(locations, units, "{file}");
        let numbers: Vec<u64> = seen.iter().map(|(u, _)| *u).collect();
        assert_eq!(numbers, (0..units.len() as u64).collect::<Vec<_>>(), "{file}");
    }
}

#[test]
fn verify_passes_on_every_corpus_file() {
    let Some(dir) = corpus() else { return };
    for file in corpus_files(dir) {
        let out = offload(&["verify", file.to_str().unwrap()]);
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{}: {}{}",
            file.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn fat_binaries_no_record_registers_are_not_loaded() {
    let Some(dir) = corpus() else { return };
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
fn select_matches_the_spec_examples() {
    let Some(dir) = corpus() else { return };
    let chosen = |file: &str, gpu: &str| -> (i32, Vec<(u64, String)>) {
        let out = offload(&["select", "--json", "--gpu", gpu, dir.join(file).to_str().unwrap()]);
        let picked = json(&out)
            .iter()
            .filter(|r| r["selected"].as_bool() == Some(true))
            .map(|r| (n(r, "unit"), s(r, "id").to_string()))
            .collect();
        (out.status.code().unwrap(), picked)
    };
    // cuda-fatbin-spec.md §9: obj_multi.o on sm_86 loads the sm_80 cubin.
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
