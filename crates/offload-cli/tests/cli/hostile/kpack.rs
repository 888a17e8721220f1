//! kpack inputs of the hostile corpus (docs/formats/kpack.md): AMD's
//! archives and split host binaries as bases for the usual damages, and
//! crafted lies: TOCs that are not maps or point into the blob, frames that
//! overlap or run past the blob, ordinals past the frames, decompression
//! bombs (a small declared size over a frame that inflates to 1 GiB, and a
//! declared size of 2^40), nesting past the msgpack depth limit, and host
//! binaries whose search paths lead outside the tree, to devices and to
//! `/proc` files.

use super::{Mode, zstd_bomb};
use offload_format::kpack::write::{self, NewEntry};
use offload_format::msgpack::encode;
use std::borrow::Cow;
use std::path::PathBuf;

fn fixture(rel: &str) -> Vec<u8> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-format/tests/fixtures/kpack");
    std::fs::read(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The bases: an archive and a split library, both AMD's.
pub(super) fn bases() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("kpack archive (AMD)", fixture("installed/stage/.kpack/kpdemo_lib_gfx90a%3Axnack+.kpack")),
        ("kpack-split library (AMD)", fixture("installed/stage/lib/libkp_plain.so")),
        ("kpack-split library, two archives (AMD)", fixture("installed/stage/lib/libkp_multi.so")),
    ]
}

/// AMD's archives of the split libraries, for `offload join --archives
/// arch` in `work`.
pub(super) fn place_archive(work: &std::path::Path) {
    static ARCHIVES: std::sync::OnceLock<Vec<(std::ffi::OsString, Vec<u8>)>> = std::sync::OnceLock::new();
    let archives = ARCHIVES.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../offload-format/tests/fixtures/kpack/installed/stage/.kpack");
        let mut v: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), std::fs::read(e.path()).unwrap())
            })
            .collect();
        v.sort();
        v
    });
    let to = work.join("arch");
    std::fs::create_dir_all(&to).unwrap();
    for (name, bytes) in archives {
        std::fs::write(to.join(name), bytes).unwrap();
    }
}

/// An archive with raw TOC pairs after the fixed header.
fn archive_with(blob: &[u8], toc: &[u8]) -> Vec<u8> {
    let mut out = b"KPAK\x01\0\0\0".to_vec();
    out.resize(64, 0);
    out.extend_from_slice(blob);
    let toc_offset = out.len() as u64;
    out[8..16].copy_from_slice(&toc_offset.to_le_bytes());
    out.extend_from_slice(toc);
    out
}

/// Extra TOC pairs: a key and the writer of its value.
type Extra<'a> = (&'a str, &'a dyn Fn(&mut Vec<u8>));

/// A TOC with one entry `k#0` → `gfx90a` at `ordinal` of `original_size`.
fn toc(scheme: &str, ordinal: u64, original_size: u64, extra: &[Extra<'_>]) -> Vec<u8> {
    let mut t = Vec::new();
    encode::map(&mut t, 4 + extra.len());
    encode::str(&mut t, "gfx_arches");
    encode::array(&mut t, 1);
    encode::str(&mut t, "gfx90a");
    encode::str(&mut t, "compression_scheme");
    encode::str(&mut t, scheme);
    encode::str(&mut t, "group_name");
    encode::str(&mut t, "g");
    encode::str(&mut t, "toc");
    encode::map(&mut t, 1);
    encode::str(&mut t, "k#0");
    encode::map(&mut t, 1);
    encode::str(&mut t, "gfx90a");
    encode::map(&mut t, 3);
    encode::str(&mut t, "type");
    encode::str(&mut t, "hsaco");
    encode::str(&mut t, "ordinal");
    encode::uint(&mut t, ordinal);
    encode::str(&mut t, "original_size");
    encode::uint(&mut t, original_size);
    for (k, v) in extra {
        encode::str(&mut t, k);
        v(&mut t);
    }
    t
}

fn zstd_blob(frames: &[&[u8]]) -> Vec<u8> {
    let mut b = (frames.len() as u32).to_le_bytes().to_vec();
    for f in frames {
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(f);
    }
    b
}

fn zstd_toc(blob_len: u64, ordinal: u64, original_size: u64) -> Vec<u8> {
    toc(
        "zstd-per-kernel",
        ordinal,
        original_size,
        &[("zstd_offset", &|t| encode::uint(t, 64)), ("zstd_size", &move |t| encode::uint(t, blob_len))],
    )
}

/// The crafted cases.
pub(super) fn crafted(v: &mut Vec<(&'static str, String, Vec<u8>, Vec<Mode>)>) {
    let code = b"\x7fELF code object".repeat(20);
    let frame = write::compress(&code, 3).unwrap();
    let good_blob = zstd_blob(&[&frame]);
    let n = code.len() as u64;
    let mut push = |what: &str, data: Vec<u8>| v.push(("kpack archive", what.to_string(), data, vec![]));

    let good = archive_with(&good_blob, &zstd_toc(good_blob.len() as u64, 0, n));
    push("valid (control)", good.clone());
    let mut d = good.clone();
    d[8..16].copy_from_slice(&64u64.to_le_bytes());
    push("TOC offset pointing into the blob", d);
    let mut d = good.clone();
    d[8..16].copy_from_slice(&(good.len() as u64).to_le_bytes());
    push("TOC offset at the end of the file", d);
    push("TOC not a map", archive_with(&good_blob, &[0x93, 1, 2, 3]));
    let mut deep = vec![0x91; 100_000];
    deep.push(0xc0);
    push("TOC nested 100,000 deep", archive_with(&good_blob, &deep));
    push("ordinal past the frames", archive_with(&good_blob, &zstd_toc(good_blob.len() as u64, 7, n)));
    push("blob longer than the file", archive_with(&good_blob, &zstd_toc(1 << 40, 0, n)));
    let mut lying = good_blob.clone();
    lying[4..8].copy_from_slice(&(frame.len() as u32 + 100).to_le_bytes());
    push("frame running past the blob", archive_with(&lying, &zstd_toc(lying.len() as u64, 0, n)));
    let mut many = good_blob.clone();
    many[..4].copy_from_slice(&((1u32 << 20) + 1).to_le_bytes());
    push("kernel count 2^20 + 1", archive_with(&many, &zstd_toc(many.len() as u64, 0, n)));
    let mut count = good_blob.clone();
    count[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    push("kernel count 2^32 - 1", archive_with(&count, &zstd_toc(count.len() as u64, 0, n)));
    // Overlapping raw code objects (scheme none).
    let raw = code.repeat(2);
    let blobs = |t: &mut Vec<u8>| {
        encode::array(t, 2);
        for (off, size) in [(64u64, 200u64), (100, 200)] {
            encode::map(t, 2);
            encode::str(t, "offset");
            encode::uint(t, off);
            encode::str(t, "size");
            encode::uint(t, size);
        }
    };
    push("overlapping raw code objects", archive_with(&raw, &toc("none", 1, 200, &[("blobs", &blobs)])));
    let far = |t: &mut Vec<u8>| {
        encode::array(t, 1);
        encode::map(t, 2);
        encode::str(t, "offset");
        encode::uint(t, u64::MAX - 10);
        encode::str(t, "size");
        encode::uint(t, 100);
    };
    push("raw code object at 2^64 - 10", archive_with(&raw, &toc("none", 0, 100, &[("blobs", &far)])));
    // Bombs: a frame inflating to 1 GiB, declared small and declared huge.
    let bomb = zstd_bomb(1 << 30);
    let bomb_blob = zstd_blob(&[&bomb]);
    push(
        "frame inflating to 1 GiB, declared 1 KiB",
        archive_with(&bomb_blob, &zstd_toc(bomb_blob.len() as u64, 0, 1024)),
    );
    push(
        "frame inflating to 1 GiB, declared 2^40",
        archive_with(&bomb_blob, &zstd_toc(bomb_blob.len() as u64, 0, 1 << 40)),
    );
    // Two frames whose lengths make them overlap the TOC.
    let entry = |t: &str| NewEntry {
        key: "k#0".into(),
        target: t.into(),
        original_size: n,
        frame: Cow::Borrowed(frame.as_slice()),
        source_id: None,
    };
    let two = write::archive("g", &["gfx90a", "gfx942"], &[entry("gfx90a"), entry("gfx942")]).unwrap();
    let mut d = two.clone();
    let second = 64 + 4 + 4 + frame.len();
    d[second..second + 4].copy_from_slice(&(frame.len() as u32 + 40).to_le_bytes());
    push("second frame running into the TOC", d);

    // `split --kpack` on damaged fat libraries: truncated, ELF and program
    // header fields set to lies, the bundle header and wrapper records hit.
    let fat = fixture("fat/libkp_plain.so");
    let fatbin = {
        let file = offload_format::elf::ElfFile::parse(&fat).unwrap();
        let i = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == b".hip_fatbin").unwrap();
        file.sections[i].offset as usize
    };
    let mut split_cases: Vec<(String, Vec<u8>)> = Vec::new();
    for cut in [64, 1000, fatbin + 40, fatbin + 5000, fat.len() - 4000, fat.len() - 100] {
        split_cases.push((format!("truncated to {cut} bytes"), fat[..cut].to_vec()));
    }
    for (what, at, len) in [
        ("e_phoff", 32usize, 8usize),
        ("e_shoff", 40, 8),
        ("e_phnum", 56, 2),
        ("e_shnum", 60, 2),
        ("first PT_LOAD p_filesz", 64 + 56 + 32, 8),
        ("bundle entry count", fatbin + 24, 8),
        ("first bundle entry offset", fatbin + 32, 8),
        ("first bundle entry size", fatbin + 40, 8),
    ] {
        for value in [0u64, u64::MAX, 1 << 40] {
            let mut d = fat.clone();
            d[at..at + len].copy_from_slice(&value.to_le_bytes()[..len]);
            split_cases.push((format!("{what} = {value:#x}"), d));
        }
    }
    for (what, data) in split_cases {
        v.push(("fat library for split --kpack", what, data, vec![Mode::SplitKpack]));
    }
    v.push(("fat library for split --kpack", "intact (control)".into(), fat.clone(), vec![Mode::SplitKpack]));

    // Split libraries whose markers lead nowhere good.
    for (what, paths) in [
        ("search path outside the tree", vec!["../../../../../../../../etc/passwd".to_string()]),
        ("search path at a device", vec!["/dev/zero".into(), "/dev/urandom".into()]),
        ("search path at /proc", vec!["/proc/self/mem".into(), "/proc/self/fd/0".into()]),
        ("search path at a folder", vec!["/".into(), ".".into(), "@GFXARCH@".into()]),
        ("1,000 search paths", (0..1_000).map(|i| format!("../x{i}/@GFXARCH@@GFXARCH@.kpack")).collect()),
    ] {
        let split = offload_rewrite::kpack::split_binary(&fat, "lib/libkp_plain.so", &paths).unwrap().unwrap();
        v.push(("kpack-split library", what.to_string(), split.host, vec![Mode::Join]));
    }
}
