//! CUDA fat binaries without NVIDIA's tools: golden files made by nvcc 13.5
//! and clang 19 (`fixtures/cuda/COMMANDS.md`), with what `cuobjdump` 13.5 extracted
//! from them recorded in `expected.tsv` (MD5 of each cubin and PTX file).

use crate::common;
use crate::inspect_support;

use inspect_support::{json, n, offload, s};
use offload_format::bundle::compressed::truncated_md5;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda")
}

fn path(file: &str) -> String {
    dir().join(file).to_str().unwrap().to_string()
}

struct Row {
    index: usize,
    location: String,
    id: String,
    image_kind: String,
    target_id: String,
    size: u64,
    offset: Option<u64>,
    compressed: bool,
    unit: u64,
    md5: String,
}

fn expected() -> BTreeMap<String, Vec<Row>> {
    let text = std::fs::read_to_string(dir().join("expected.tsv")).unwrap();
    let mut files: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 11, "{line}");
        files.entry(f[0].to_string()).or_default().push(Row {
            index: f[1].parse().unwrap(),
            location: f[2].into(),
            id: f[3].into(),
            image_kind: f[4].into(),
            target_id: f[5].into(),
            size: f[6].parse().unwrap(),
            offset: f[7].parse().ok(),
            compressed: f[8] == "yes",
            unit: f[9].parse().unwrap(),
            md5: f[10].into(),
        });
    }
    files
}

#[test]
fn listing_and_bytes_match_what_cuobjdump_extracted() {
    let files = expected();
    assert_eq!(files.len(), 11);
    let mut checked = 0;
    for (file, rows) in &files {
        let out = offload(&["list", "--json", &path(file)]);
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        let records = json(&out);
        assert_eq!(records.len(), rows.len(), "{file}");
        for (r, e) in records.iter().zip(rows) {
            assert_eq!(s(r, "location"), e.location, "{file}: {r}");
            assert_eq!(s(r, "id"), e.id, "{file}: {r}");
            assert_eq!(s(r, "format"), if file.ends_with(".cubin") { "cubin" } else { "cuda-fatbin" });
            assert_eq!(s(r, "image_kind"), e.image_kind, "{file}: {r}");
            assert_eq!(s(r, "target_id"), e.target_id, "{file}: {r}");
            assert_eq!(s(r, "offload_kind"), "cuda");
            assert_eq!(s(r, "triple"), "nvptx64-nvidia-cuda");
            assert_eq!(n(r, "size"), e.size, "{file}: {r}");
            assert_eq!(r["offset"].as_u64(), e.offset, "{file}: {r}");
            assert_eq!(r["compressed"].as_bool(), Some(e.compressed), "{file}: {r}");
            assert_eq!(n(r, "unit"), e.unit, "{file}: {r}");
        }
        // Every entry cuobjdump extracts, by index, in one run.
        let tmp = tempfile::tempdir().unwrap();
        let mut args = vec!["extract".to_string(), "--json".into(), "--output-dir".into()];
        args.push(tmp.path().to_str().unwrap().into());
        for e in rows.iter().filter(|e| e.md5 != "-") {
            args.extend(["--index".to_string(), e.index.to_string()]);
        }
        args.push(path(file));
        let out = offload(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "{file}: {}", String::from_utf8_lossy(&out.stderr));
        let data = std::fs::read(dir().join(file)).unwrap();
        let written = json(&out);
        let wanted: Vec<&Row> = rows.iter().filter(|e| e.md5 != "-").collect();
        assert_eq!(written.len(), wanted.len(), "{file}");
        for (w, e) in written.iter().zip(wanted) {
            let ext = if e.image_kind == "elf" { ".cubin" } else { ".ptx" };
            assert!(s(w, "path").ends_with(ext), "{file}: {w}");
            let bytes = std::fs::read(s(w, "path")).unwrap();
            assert_eq!(format!("{:016x}", truncated_md5(&bytes)), e.md5, "{file}: {w}");
            if let Some(off) = e.offset {
                let stored = &data[off as usize..(off + e.size) as usize];
                assert!(stored == bytes, "{file}: the bytes at the listed offset differ: {w}");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 32);
}

#[test]
fn clang_built_objects_select_like_nvcc_ones() {
    let select = |file: &str, gpu: &str| {
        let out = offload(&["select", "--json", "--gpu", gpu, &path(file)]);
        let verdicts: Vec<(bool, String)> = json(&out)
            .iter()
            .map(|r| (r["selected"].as_bool() == Some(true), r["reason_code"].as_str().unwrap_or("").to_string()))
            .collect();
        (out.status.code(), verdicts)
    };
    // clang -fgpu-rdc: relocatable device code, never loaded as such.
    let relocatable = (false, "relocatable".to_string());
    assert_eq!(select("clang_rdc_sm70.o", "sm_70"), (Some(1), vec![relocatable.clone(), relocatable]));
    // The new driver's sm_90 cubin: loaded on 9.0, not on 8.6.
    assert_eq!(select("clang_nd_sm90.o", "sm_90"), (Some(0), vec![(true, String::new())]));
    assert_eq!(select("clang_nd_sm90.o", "sm_86").0, Some(1));
}

#[test]
fn obfuscated_nvvm_is_listed_but_not_extracted() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("lto.nvvm");
    let out = offload(&["extract", "--index", "0", "-o", dest.to_str().unwrap(), &path("obj_lto.o")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("obfuscated"), "{err}");
    assert!(!dest.exists(), "a failed extraction leaves no file");
}

#[test]
fn verify_accepts_every_fixture() {
    for file in expected().keys() {
        let out = offload(&["verify", &path(file)]);
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{file}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn verify_finds_a_patched_arch_and_a_damaged_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let data = std::fs::read(dir().join("kern_nocompress.fatbin")).unwrap();
    // The first entry's arch field (fat header 16 + 0x1c): sm_75 becomes
    // sm_76, which the cubin inside contradicts.
    let mut patched = data.clone();
    patched[16 + 0x1c] = 76;
    let p = tmp.path().join("arch.fatbin");
    std::fs::write(&p, &patched).unwrap();
    let out = offload(&["verify", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("the header says sm_76 but the cubin is for sm_75"), "{text}");

    // A byte of the first zstd stream flipped.
    let mut damaged = std::fs::read(dir().join("kern_zstd_all.fatbin")).unwrap();
    damaged[16 + 64 + 20] ^= 0xff;
    let p = tmp.path().join("zstd.fatbin");
    std::fs::write(&p, &damaged).unwrap();
    let out = offload(&["verify", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
}

/// `select --gpu G FILE` (the CUDA rules by default for NVIDIA GPUs): exit
/// status, chosen IDs, and each other entry's (ID, reason code).
fn select(file: &str, gpu: &str) -> (i32, Vec<String>, Vec<(String, String)>) {
    let out = offload(&["select", "--json", "--gpu", gpu, &path(file)]);
    let (mut chosen, mut others) = (Vec::new(), Vec::new());
    for r in json(&out) {
        if r["selected"].as_bool() == Some(true) {
            chosen.push(s(&r, "id").to_string());
        } else {
            others.push((s(&r, "id").to_string(), s(&r, "reason_code").to_string()));
        }
    }
    (out.status.code().unwrap(), chosen, others)
}

#[test]
fn select_follows_the_cuda_driver_rules() {
    // a/f targets: nothing runs on 8.6 (exit 1); sm_90a on 9.0.
    let (rc, chosen, others) = select("suffix.fatbin", "sm_86");
    assert_eq!((rc, chosen.len()), (1, 0));
    assert_eq!(others[0], ("cuda-elf-sm_90a".into(), "arch-specific".into()));
    assert_eq!(select("suffix.fatbin", "9.0").1, ["cuda-elf-sm_90a"]);
    // sm_100f serves 10.3; the compute_120 PTX is JIT-compiled on 12.1,
    // where the sm_120 cubin wins instead.
    assert_eq!(select("suffix.fatbin", "compute_103").1, ["cuda-elf-sm_100f"]);
    let (rc, chosen, others) = select("suffix.fatbin", "sm_121");
    assert_eq!((rc, chosen), (0, vec!["cuda-elf-sm_120".to_string()]));
    assert!(others.contains(&("cuda-ptx-sm_120".into(), "ptx-not-needed".into())), "{others:?}");
    // The nearest compatible cubin of a concatenated entry: sm_86 on 8.9.
    let (rc, chosen, others) = select("concat.fatbin", "sm_89");
    assert_eq!((rc, chosen), (0, vec!["cuda-elf-sm_86".to_string()]));
    assert!(others.contains(&("cuda-elf-sm_80".into(), "not-chosen".into())), "{others:?}");
    // PTX for a GPU newer than every cubin.
    assert_eq!(select("libsmall.so", "sm_120").1, ["cuda-ptx-sm_90"]);
    assert_eq!(select("libsmall.so", "sm_86").0, 1);
    // Relocatable code and LTO IR are never loaded.
    let (rc, chosen, others) = select("obj_lto.o", "sm_90");
    assert_eq!((rc, chosen.len()), (1, 0));
    let codes: Vec<&str> = others.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(codes, ["lto-ir", "relocatable", "relocatable"]);
}

/// Offsets of the `.nvFatBinSegment` records (magic `b1 43 62 46`, 24-byte
/// stride) in a file.
fn wrapper_records(data: &[u8]) -> Vec<usize> {
    let first = data.windows(4).position(|w| w == [0xb1, 0x43, 0x62, 0x46]).expect("a registration record");
    (first..data.len()).step_by(24).take_while(|&at| data[at..].starts_with(&[0xb1, 0x43, 0x62, 0x46])).collect()
}

/// In a relocatable object the record's address field is 0 and an
/// `R_X86_64_64` relocation (`.rela.nvFatBinSegment`) names the fat
/// binary: the scan follows it through the ELF reader's relocations. An
/// addend moved past the fat binary's start makes the record point at
/// nothing.
#[test]
fn a_relocatable_records_relocation_is_followed() {
    let data = std::fs::read(dir().join("obj_sm80.o")).unwrap();
    let out = offload(&["verify", dir().join("obj_sm80.o").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("points at no fat binary"), "{text}");
    // The one entry: r_offset 8 (the record's address field), symbol 0x11
    // (.nv_fatbin's section symbol), R_X86_64_64, addend 0.
    let mut entry = 8u64.to_le_bytes().to_vec();
    entry.extend_from_slice(&0x11_0000_0001u64.to_le_bytes());
    entry.extend_from_slice(&0u64.to_le_bytes());
    let at = data.windows(24).position(|w| w == entry).expect("the .rela.nvFatBinSegment entry");
    let mut patched = data.clone();
    patched[at + 16..at + 24].copy_from_slice(&8u64.to_le_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("obj_sm80.o");
    std::fs::write(&p, &patched).unwrap();
    let out = offload(&["verify", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("CUDA registration record at 0x0 points at no fat binary"), "{text}");
}

#[test]
fn a_registration_record_pointing_at_no_fat_binary_is_an_error() {
    let data = std::fs::read(dir().join("libsmall.so")).unwrap();
    let records = wrapper_records(&data);
    assert_eq!(records.len(), 1);
    let tmp = tempfile::tempdir().unwrap();
    let mut patched = data.clone();
    let address = u64::from_le_bytes(patched[records[0] + 8..records[0] + 16].try_into().unwrap());
    patched[records[0] + 8..records[0] + 16].copy_from_slice(&(address + 8).to_le_bytes());
    let p = tmp.path().join("libsmall.so");
    std::fs::write(&p, &patched).unwrap();
    let out = offload(&["verify", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("CUDA registration record at 0x0 points at no fat binary"), "{text}");
}

#[test]
fn a_fat_binary_inside_an_offload_binary_is_opened() {
    // clang's new driver links CUDA device code into a fat binary and can
    // carry it as an OffloadBinary image of kind cuda.
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg.out");
    let image = format!("--image=file={},triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda", path("kern_lz4.fatbin"));
    let out = common::run(std::process::Command::new(env!("CARGO_BIN_EXE_clang-offload-packager")).args([
        "-o",
        pkg.to_str().unwrap(),
        &image,
    ]));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records = json(&offload(&["list", "--json", pkg.to_str().unwrap()]));
    let kinds: Vec<(&str, &str, &str)> =
        records.iter().map(|r| (s(r, "format"), s(r, "location"), s(r, "target_id"))).collect();
    assert_eq!(
        kinds,
        [
            ("offload-binary", "file", "sm_80"),
            ("cuda-fatbin", "file image 0", "sm_75"),
            ("cuda-fatbin", "file image 0", "sm_80"),
            ("cuda-fatbin", "file image 0", "sm_90"),
            ("cuda-fatbin", "file image 0", "sm_90"),
        ]
    );
    assert_eq!(s(&records[0], "image_kind"), "fatbin");
    let (rc, chosen, _) = {
        let out = offload(&["select", "--json", "--gpu", "sm_86", pkg.to_str().unwrap()]);
        let chosen: Vec<String> = json(&out)
            .iter()
            .filter(|r| r["selected"].as_bool() == Some(true))
            .map(|r| s(r, "id").to_string())
            .collect();
        (out.status.code().unwrap(), chosen, ())
    };
    assert_eq!((rc, chosen), (0, vec!["cuda-elf-sm_80".to_string()]));
}
