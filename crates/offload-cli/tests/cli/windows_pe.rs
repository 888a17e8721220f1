//! CUDA fat binaries in Windows files (issue 29): PE images (DLL, EXE),
//! whose section names are cut to eight bytes (`.nv_fatb`, `.nvFatBi`), and
//! COFF objects, which spell long names through the string table.
//!
//! The hermetic tests build small PE and COFF files here around the fat
//! binaries of `fixtures/cuda/`. The real-file tests read NVIDIA's cuRAND
//! 10.3.10.19 from PyPI (`win_amd64` and `manylinux_2_27` wheels, fetched
//! and pinned by `scripts/fetch-real-corpus.sh`): the DLL must give the
//! same entries as the Linux library of the same version. Without the
//! corpus they are skipped loudly; `OFFLOAD_REQUIRE_REAL_CORPUS=1` makes a
//! missing corpus a failure.

use crate::common;
use crate::inspect_support::{json, list_json, n, offload, s};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const IMAGE_BASE: u64 = 0x1_8000_0000;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(common::fixtures().join("cuda").join(name)).unwrap()
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

/// One section of a PE image: name (at most 8 bytes), contents.
struct Section<'a> {
    name: &'a str,
    data: Vec<u8>,
}

/// The RVA of each section: the first at 0x1000, each next one on the
/// page after the previous one's end.
fn rvas(sizes: &[usize]) -> Vec<u32> {
    let mut next = 0x1000u32;
    let mut out = Vec::new();
    for &size in sizes {
        out.push(next);
        next += (size as u32).div_ceil(0x1000).max(1) * 0x1000;
    }
    out.push(next);
    out
}

/// A minimal PE32+ DLL (x86-64) holding `sections`, page-aligned in memory
/// and 0x200-aligned in the file, and (when `relocated` is not empty) a
/// `.reloc` section with one DIR64 base relocation per listed (section
/// index, offset in it).
fn pe_dll(sections: &[Section], relocated: &[(usize, u32)]) -> Vec<u8> {
    let mut all: Vec<(String, Vec<u8>)> = sections.iter().map(|s| (s.name.to_string(), s.data.clone())).collect();
    let rvas = rvas(&all.iter().map(|(_, d)| d.len()).collect::<Vec<_>>());
    let relocated: Vec<u32> = relocated.iter().map(|&(i, off)| rvas[i] + off).collect();
    if !relocated.is_empty() {
        // One block per page, entries of 16 bits (type 10 = DIR64), each
        // block padded to 4 bytes.
        let mut pages: BTreeMap<u32, Vec<u16>> = BTreeMap::new();
        for &rva in &relocated {
            pages.entry(rva & !0xfff).or_default().push((10 << 12) | (rva & 0xfff) as u16);
        }
        let mut reloc = Vec::new();
        for (page, mut entries) in pages {
            if entries.len() % 2 == 1 {
                entries.push(0);
            }
            reloc.extend_from_slice(&page.to_le_bytes());
            reloc.extend_from_slice(&(8 + 2 * entries.len() as u32).to_le_bytes());
            for e in entries {
                reloc.extend_from_slice(&e.to_le_bytes());
            }
        }
        all.push((".reloc".into(), reloc));
    }
    let headers = 0x400usize;
    let mut file = vec![0u8; headers];
    file[0..2].copy_from_slice(b"MZ");
    put(&mut file, 0x3c, &0x40u32.to_le_bytes());
    put(&mut file, 0x40, b"PE\0\0");
    let coff = 0x44;
    put(&mut file, coff, &0x8664u16.to_le_bytes());
    put(&mut file, coff + 2, &(all.len() as u16).to_le_bytes());
    put(&mut file, coff + 16, &240u16.to_le_bytes());
    put(&mut file, coff + 18, &0x2022u16.to_le_bytes()); // executable image, large address aware, DLL
    let opt = coff + 20;
    put(&mut file, opt, &0x20bu16.to_le_bytes());
    put(&mut file, opt + 24, &IMAGE_BASE.to_le_bytes());
    put(&mut file, opt + 32, &0x1000u32.to_le_bytes());
    put(&mut file, opt + 36, &0x200u32.to_le_bytes());
    put(&mut file, opt + 40, &6u16.to_le_bytes());
    put(&mut file, opt + 48, &6u16.to_le_bytes());
    let rvas = self::rvas(&all.iter().map(|(_, d)| d.len()).collect::<Vec<_>>());
    put(&mut file, opt + 56, &rvas[all.len()].to_le_bytes());
    put(&mut file, opt + 60, &(headers as u32).to_le_bytes());
    put(&mut file, opt + 68, &2u16.to_le_bytes());
    put(&mut file, opt + 70, &0x160u16.to_le_bytes());
    put(&mut file, opt + 108, &16u32.to_le_bytes());
    let table = opt + 240;
    for (i, (name, data)) in all.iter().enumerate() {
        let at = file.len().div_ceil(0x200) * 0x200;
        file.resize(at, 0);
        file.extend_from_slice(data);
        file.resize(file.len().div_ceil(0x200) * 0x200, 0);
        let h = table + 40 * i;
        put(&mut file, h, name.as_bytes());
        put(&mut file, h + 8, &(data.len() as u32).to_le_bytes());
        put(&mut file, h + 12, &rvas[i].to_le_bytes());
        let raw = (file.len() - at) as u32;
        put(&mut file, h + 16, &raw.to_le_bytes());
        put(&mut file, h + 20, &(at as u32).to_le_bytes());
        put(&mut file, h + 36, &0x4000_0040u32.to_le_bytes()); // initialized data, readable
        if name == ".reloc" {
            put(&mut file, opt + 112 + 5 * 8, &rvas[i].to_le_bytes());
            put(&mut file, opt + 112 + 5 * 8 + 4, &(data.len() as u32).to_le_bytes());
        }
    }
    file
}

/// A 64-bit registration record (`.nvFatBinSegment`, version 1).
fn record(address: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&0x4662_43B1u32.to_le_bytes());
    r.extend_from_slice(&1u32.to_le_bytes());
    r.extend_from_slice(&address.to_le_bytes());
    r.extend_from_slice(&0u64.to_le_bytes());
    r
}

/// Two fat binaries (uncompressed, then LZ4) back to back in `.nv_fatb`,
/// and records in `.nvFatBi` for the ones listed in `registered`.
fn cuda_dll(registered: &[usize], with_base_relocations: bool) -> (Vec<u8>, usize) {
    let first = fixture("kern_nocompress.fatbin");
    let second = fixture("kern_lz4.fatbin");
    let starts = [0u64, first.len() as u64];
    let fatb = [first.clone(), second].concat();
    let records: Vec<u8> = registered.iter().flat_map(|&i| record(IMAGE_BASE + 0x1000 + starts[i])).collect();
    let fields: Vec<(usize, u32)> = (0..registered.len() as u32).map(|i| (1, 24 * i + 8)).collect();
    let relocated = if with_base_relocations { fields } else { Vec::new() };
    let file =
        pe_dll(&[Section { name: ".nv_fatb", data: fatb }, Section { name: ".nvFatBi", data: records }], &relocated);
    (file, first.len())
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn ids(records: &[Value]) -> Vec<String> {
    records.iter().filter(|r| r["container"] != true).map(|r| s(r, "id").to_string()).collect()
}

fn verify(path: &Path) -> (bool, String) {
    let out = offload(&["verify", path.to_str().unwrap()]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn pe_dll_lists_fat_binaries_of_nv_fatb() {
    let tmp = tempfile::tempdir().unwrap();
    let (dll, first_len) = cuda_dll(&[0, 1], true);
    let path = write(tmp.path(), "kern.dll", &dll);
    let records = list_json(&path);
    let expected = ["cuda-elf-sm_75", "cuda-elf-sm_80", "cuda-elf-sm_90", "cuda-ptx-sm_90"];
    assert_eq!(ids(&records), [expected, expected].concat(), "{records:#?}");
    // Two fat binaries, two units; the section is named as the file has it.
    assert_eq!(records.iter().map(|r| n(r, "unit")).collect::<std::collections::BTreeSet<_>>().len(), 2);
    assert!(s(&records[0], "location").contains(".nv_fatb"), "{}", records[0]["location"]);
    // Uncompressed entries point into the file: the cubin at its offset is
    // the fixture's (the first fat binary's first entry starts at 80).
    let offset = n(&records[0], "offset") as usize;
    assert_eq!(offset, 0x400 + 80);
    assert_eq!(&dll[offset..offset + 4], b"\x7fELF");
    assert!(first_len > 80);
    let (ok, text) = verify(&path);
    assert!(ok && text.contains("8 code objects in 2 fat binaries, 0 errors, 0 warnings"), "verify: {text}");
    // Selection reads it like an ELF library.
    let out = offload(&["select", "--gpu", "sm_86", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("cuda-elf-sm_80"), "{text}");
}

#[test]
fn pe_records_mark_unregistered_fat_binaries_and_need_base_relocations() {
    let tmp = tempfile::tempdir().unwrap();
    // Only the first fat binary is registered: the second is dead weight.
    let (dll, _) = cuda_dll(&[0], true);
    let path = write(tmp.path(), "one.dll", &dll);
    let (_, text) = verify(&path);
    assert!(text.contains("registered by no"), "verify: {text}");
    // Records without base relocations: the address is wrong once Windows
    // moves the DLL.
    let (dll, _) = cuda_dll(&[0, 1], false);
    let path = write(tmp.path(), "fixed.dll", &dll);
    let (_, text) = verify(&path);
    // A DLL without any base relocation table is never moved: no warning.
    assert!(!text.contains("base relocation"), "verify: {text}");
    let (mut dll, first) = cuda_dll(&[0, 1], true);
    // Point the second record into the middle of a fat binary.
    let records_at = dll.windows(4).position(|w| w == 0x4662_43B1u32.to_le_bytes()).unwrap();
    put(&mut dll, records_at + 24 + 8, &(IMAGE_BASE + 0x1000 + first as u64 + 8).to_le_bytes());
    let path = write(tmp.path(), "bad.dll", &dll);
    let (ok, text) = verify(&path);
    assert!(!ok && text.contains("points at no fat binary"), "verify: {text}");
}

#[test]
fn pe_record_without_base_relocation_is_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let first = fixture("kern_nocompress.fatbin");
    let records = [record(IMAGE_BASE + 0x1000), record(IMAGE_BASE + 0x1000)].concat();
    // A base relocation for the first record's field only.
    let dll =
        pe_dll(&[Section { name: ".nv_fatb", data: first }, Section { name: ".nvFatBi", data: records }], &[(1, 8)]);
    let path = write(tmp.path(), "half.dll", &dll);
    let (_, text) = verify(&path);
    assert!(text.contains("record at 0x18: no base relocation"), "verify: {text}");
    assert!(!text.contains("record at 0x0: no base relocation"), "verify: {text}");
}

/// A COFF object (x86-64): `.nv_fatbin` through the string table, and
/// `.nvFatBinSegment` with one record whose ADDR64 relocation names a
/// symbol of `.nv_fatbin` and keeps its addend in the field.
fn coff_object(addend: u64) -> Vec<u8> {
    let fatbin = fixture("kern_lz4.fatbin");
    let rec = record(addend);
    let strings = b"\0\0\0\0.nv_fatbin\0.nvFatBinSegment\0".to_vec();
    let mut strings = strings;
    let len = strings.len() as u32;
    strings[..4].copy_from_slice(&len.to_le_bytes());
    let header = 20;
    let table = header;
    let data0 = table + 2 * 40;
    let data1 = data0 + fatbin.len();
    let relocs = data1 + rec.len();
    let symtab = relocs + 10;
    let mut f = vec![0u8; symtab];
    put(&mut f, 0, &0x8664u16.to_le_bytes());
    put(&mut f, 2, &2u16.to_le_bytes());
    put(&mut f, 8, &(symtab as u32).to_le_bytes());
    put(&mut f, 12, &1u32.to_le_bytes());
    for (i, (name, at, size, nrel)) in
        [("/4", data0, fatbin.len(), 0u16), ("/15", data1, rec.len(), 1)].into_iter().enumerate()
    {
        let h = table + 40 * i;
        put(&mut f, h, name.as_bytes());
        put(&mut f, h + 16, &(size as u32).to_le_bytes());
        put(&mut f, h + 20, &(at as u32).to_le_bytes());
        if nrel > 0 {
            put(&mut f, h + 24, &(relocs as u32).to_le_bytes());
            put(&mut f, h + 32, &nrel.to_le_bytes());
        }
        put(&mut f, h + 36, &0x4040_0040u32.to_le_bytes()); // initialized data, 8-aligned, readable
    }
    put(&mut f, data0, &fatbin);
    put(&mut f, data1, &rec);
    // Relocation: at offset 8 of the record, symbol 0, IMAGE_REL_AMD64_ADDR64.
    put(&mut f, relocs, &8u32.to_le_bytes());
    put(&mut f, relocs + 8, &1u16.to_le_bytes());
    // Symbol 0: a static symbol at the start of section 1.
    let mut sym = [0u8; 18];
    sym[..4].copy_from_slice(b"fatb");
    sym[12..14].copy_from_slice(&1i16.to_le_bytes());
    sym[16] = 3;
    f.extend_from_slice(&sym);
    f.extend_from_slice(&strings);
    f
}

#[test]
fn coff_object_long_section_names_and_relocated_records() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write(tmp.path(), "kern.obj", &coff_object(0));
    let records = list_json(&path);
    assert_eq!(ids(&records), ["cuda-elf-sm_75", "cuda-elf-sm_80", "cuda-elf-sm_90", "cuda-ptx-sm_90"]);
    assert!(s(&records[0], "location").contains(".nv_fatbin"), "{}", records[0]["location"]);
    let (ok, text) = verify(&path);
    assert!(ok && !text.contains("registration record"), "verify: {text}");
    // The addend (in the field, as COFF keeps it) must be honoured: 8
    // bytes into the fat binary is no fat binary's start.
    let path = write(tmp.path(), "bad.obj", &coff_object(8));
    let (ok, text) = verify(&path);
    assert!(!ok && text.contains("points at no fat binary"), "verify: {text}");
}

// ---------------------------------------------------------------------------
// Real files: cuRAND 10.3.10.19 for Windows and for Linux.

const WIN_ARTIFACT: &str = "curand-win";
const LINUX_ARTIFACT: &str = "curand-linux";

struct Curand {
    dll: PathBuf,
    win_wheel: PathBuf,
    linux_wheel: PathBuf,
}

fn required() -> bool {
    std::env::var("OFFLOAD_REQUIRE_REAL_CORPUS").is_ok_and(|v| v == "1")
}

fn curand() -> Option<Curand> {
    let dir = match std::env::var_os("OFFLOAD_CORPUS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/offload-binutils/corpus"),
    };
    let package = |artifact: &str| {
        std::fs::read_dir(dir.join("packages").join(artifact)).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).next()
    };
    let dll = dir.join("files").join(WIN_ARTIFACT).join("curand64_10.dll");
    match (dll.is_file(), package(WIN_ARTIFACT), package(LINUX_ARTIFACT)) {
        (true, Some(win_wheel), Some(linux_wheel)) => Some(Curand { dll, win_wheel, linux_wheel }),
        _ => {
            let why = format!("no cuRAND wheels in {}; run scripts/fetch-real-corpus.sh", dir.display());
            assert!(!required(), "OFFLOAD_REQUIRE_REAL_CORPUS=1 but {why}");
            eprintln!(
                "\n*** SKIPPING real-corpus test: {why} (set OFFLOAD_REQUIRE_REAL_CORPUS=1 to fail instead) ***\n"
            );
            None
        }
    }
}

/// (kind, architecture) -> count, code objects only.
fn census(records: &[Value]) -> BTreeMap<(String, String), usize> {
    let mut out = BTreeMap::new();
    for r in records.iter().filter(|r| r["container"] != true) {
        *out.entry((s(r, "image_kind").to_string(), s(r, "target_id").to_string())).or_insert(0) += 1;
    }
    out
}

#[test]
#[cfg_attr(not(has_curand_wheels), ignore = "needs the cuRAND wheels: run scripts/fetch-real-corpus.sh")]
fn curand_dll_and_wheel_list_like_the_linux_library() {
    let Some(c) = curand() else { return };
    let linux = list_json(&c.linux_wheel);
    let dll = list_json(&c.dll);
    let wheel = list_json(&c.win_wheel);
    let expected = census(&linux);
    assert_eq!(expected.values().sum::<usize>(), 153, "{expected:?}");
    assert_eq!(census(&dll), expected);
    assert_eq!(census(&wheel), expected);
    let ptx = expected.iter().filter(|((k, _), _)| k == "ptx").map(|(_, c)| c).sum::<usize>();
    assert_eq!(ptx, 10);
}

#[test]
#[cfg_attr(not(has_curand_wheels), ignore = "needs the cuRAND wheels: run scripts/fetch-real-corpus.sh")]
fn curand_dll_selects_extracts_and_verifies_like_the_linux_library() {
    let Some(c) = curand() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // (unit, id) selected, and (unit, reason code) of the rejected ones.
    let select = |p: &Path| {
        let out = offload(&["select", "--gpu", "sm_89", "--json", p.to_str().unwrap()]);
        assert!(out.status.success(), "select: {}", String::from_utf8_lossy(&out.stderr));
        let records = json(&out);
        assert_eq!(records.len(), 153);
        let picked: Vec<(u64, String)> =
            records.iter().filter(|r| r["selected"] == true).map(|r| (n(r, "unit"), s(r, "id").to_string())).collect();
        let unregistered: Vec<u64> =
            records.iter().filter(|r| r["reason_code"] == "unregistered").map(|r| n(r, "unit")).collect();
        (picked, unregistered)
    };
    let (linux, linux_dead) = select(&c.linux_wheel);
    let (dll, dll_dead) = select(&c.dll);
    let (wheel, _) = select(&c.win_wheel);
    // One sm_89 cubin per fat binary. The Linux library registers 10 of its
    // 11 fat binaries (the first, device-linked one, has no record), the
    // DLL all 11 (a version-2 record points at the first).
    let all: Vec<(u64, String)> = (0..11).map(|u| (u, "cuda-elf-sm_89".to_string())).collect();
    assert_eq!(dll, all);
    assert_eq!(wheel, all);
    assert_eq!(linux, all[1..]);
    assert!(dll_dead.is_empty());
    assert!(!linux_dead.is_empty() && linux_dead.iter().all(|&u| u == 0), "{linux_dead:?}");
    // extract --all: the same files (index and ID in each name).
    // Outputs are named after the file, or for a wheel after its member
    // (`curand64_10.dll`, `libcurand.so.10`), never after the wheel.
    let extract = |p: &Path, name: &str, member: &str| {
        let out_dir = tmp.path().join(name);
        let prefix = format!("{member}-");
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = offload(&["extract", "--all", "--output-dir", out_dir.to_str().unwrap(), p.to_str().unwrap()]);
        assert!(out.status.success(), "extract: {}", String::from_utf8_lossy(&out.stderr));
        let mut names: Vec<String> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                assert!(e.metadata().unwrap().len() > 0);
                let name = e.file_name().into_string().unwrap();
                // "curand64_10.dll-3-cuda-elf-sm_50.cubin" -> "3-cuda-elf-sm_50.cubin"
                name.strip_prefix(&prefix).unwrap_or_else(|| panic!("{name}")).to_string()
            })
            .collect();
        names.sort();
        names
    };
    let from_dll = extract(&c.dll, "dll", c.dll.file_name().unwrap().to_str().unwrap());
    assert_eq!(from_dll.len(), 153);
    assert_eq!(extract(&c.linux_wheel, "linux", "libcurand.so.10"), from_dll);
    assert_eq!(extract(&c.win_wheel, "wheel", "curand64_10.dll"), from_dll);
    let (ok, text) = verify(&c.dll);
    assert!(ok && text.contains("153 code objects in 11 fat binaries, 0 errors, 0 warnings"), "verify: {text}");
    let (ok, text) = verify(&c.win_wheel);
    assert!(ok && text.contains("0 errors"), "verify on the wheel: {text}");
}

/// `offload size --json`: (target, kind) -> (objects, bytes) of each input.
fn size_census(p: &Path) -> BTreeMap<(String, String), (u64, u64)> {
    let out = offload(&["size", "--json", p.to_str().unwrap()]);
    assert!(out.status.success(), "size: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{v}");
    files[0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| ((s(t, "target").to_string(), s(t, "kind").to_string()), (n(t, "objects"), n(t, "bytes"))))
        .collect()
}

#[test]
#[cfg_attr(not(has_curand_wheels), ignore = "needs the cuRAND wheels: run scripts/fetch-real-corpus.sh")]
fn curand_dll_and_wheel_size_like_the_linux_library() {
    let Some(c) = curand() else { return };
    let linux = size_census(&c.linux_wheel);
    let dll = size_census(&c.dll);
    assert_eq!(size_census(&c.win_wheel), dll, "the wheel holds the DLL");
    // The same targets, kinds and numbers of code objects; the bytes of
    // each target within 1 % (the two libraries are separate builds).
    let counts =
        |m: &BTreeMap<(String, String), (u64, u64)>| m.iter().map(|(k, v)| (k.clone(), v.0)).collect::<Vec<_>>();
    assert_eq!(counts(&dll), counts(&linux));
    assert_eq!(dll.len(), 13, "sm_50 to sm_121: {dll:?}");
    assert_eq!(dll.values().map(|v| v.0).sum::<u64>(), 153);
    assert_eq!(dll[&("sm_121".to_string(), "cuda".to_string())].0, 21, "11 cubins and 10 PTX");
    for (k, (_, bytes)) in &dll {
        let l = linux[k].1;
        assert!(bytes.abs_diff(l) * 100 <= l, "{k:?}: {bytes} bytes in the DLL, {l} in the Linux library");
    }
}

/// `offload kernels --json`: (kind, target, kernel name without its
/// parameters) -> count. Parameters differ between the two builds where a
/// type does (`unsigned long` on Linux is `unsigned long long` on Windows).
/// (kind, target, kernel name) -> count.
type KernelCensus = BTreeMap<(String, String, String), usize>;

fn kernel_census(p: &Path) -> (KernelCensus, Vec<Value>) {
    let out = offload(&["kernels", "--json", p.to_str().unwrap()]);
    assert!(out.status.success(), "kernels: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["unreadable"].as_array().map(Vec::len), Some(0), "{}", v["unreadable"]);
    let rows = v["kernels"].as_array().unwrap().clone();
    let mut census = BTreeMap::new();
    for r in &rows {
        let name = s(r, "demangled").split('(').next().unwrap().to_string();
        *census.entry((s(r, "kind").to_string(), s(r, "target").to_string(), name)).or_insert(0) += 1;
    }
    (census, rows)
}

#[test]
#[cfg_attr(not(has_curand_wheels), ignore = "needs the cuRAND wheels: run scripts/fetch-real-corpus.sh")]
fn curand_dll_and_wheel_kernels_like_the_linux_library() {
    let Some(c) = curand() else { return };
    let (linux, _) = kernel_census(&c.linux_wheel);
    let (dll, dll_rows) = kernel_census(&c.dll);
    let (wheel, wheel_rows) = kernel_census(&c.win_wheel);
    assert_eq!(dll, linux);
    assert_eq!(dll_rows.len(), 4144, "296 kernels in each of the 14 (kind, target) pairs");
    let pairs: BTreeSet<(&str, &str)> = dll.keys().map(|(k, t, _)| (k.as_str(), t.as_str())).collect();
    assert_eq!(pairs.len(), 14, "{pairs:?}");
    assert!(pairs.contains(&("ptx", "sm_121")));
    // The wheel's rows are the DLL's, resources and all, but for where.
    let strip = |rows: &[Value]| -> Vec<Value> {
        rows.iter()
            .map(|r| {
                let mut r = r.clone();
                r.as_object_mut().unwrap().remove("file");
                r.as_object_mut().unwrap().remove("location");
                r
            })
            .collect()
    };
    assert_eq!(wheel, dll);
    assert!(strip(&wheel_rows) == strip(&dll_rows), "kernels differ between the DLL and the wheel");
}
