//! Unit tests over archives and markers built here (a small msgpack writer
//! and the archive layout of `docs/formats/kpack.md`); the tests over AMD's
//! own files are in `tests/kpack.rs`.

use super::archive::{Archive, ArchiveError, Scheme};
use super::host::{self, Marker, MarkerError, WrapperKind, WrapperRecord};
use super::resolve::{
    ArchiveSource, Env, LoadError, Request, Resolver, SearchOrder, Step, clr_arch_list, compatible_targets, normalize,
};
use super::verify::{Problem, VerifyOptions, verify};
use crate::msgpack;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A msgpack value to write.
#[derive(Clone)]
pub(crate) enum W {
    U(u64),
    S(String),
    A(Vec<W>),
    M(Vec<(W, W)>),
    Nil,
}

pub(crate) fn s(v: &str) -> W {
    W::S(v.to_string())
}

pub(crate) fn enc(w: &W, out: &mut Vec<u8>) {
    match w {
        W::Nil => out.push(0xc0),
        W::U(v) if *v < 128 => out.push(*v as u8),
        W::U(v) => {
            out.push(0xcf);
            out.extend_from_slice(&v.to_be_bytes());
        }
        W::S(v) => {
            out.push(0xdb);
            out.extend_from_slice(&(v.len() as u32).to_be_bytes());
            out.extend_from_slice(v.as_bytes());
        }
        W::A(items) => {
            out.push(0xdd);
            out.extend_from_slice(&(items.len() as u32).to_be_bytes());
            items.iter().for_each(|i| enc(i, out));
        }
        W::M(pairs) => {
            out.push(0xdf);
            out.extend_from_slice(&(pairs.len() as u32).to_be_bytes());
            for (k, v) in pairs {
                enc(k, out);
                enc(v, out);
            }
        }
    }
}

/// One code object to store: key, target, bytes.
type Obj<'a> = (&'a str, &'a str, &'a [u8]);

/// An archive as AMD's writer lays it out, with `extra` TOC pairs.
pub(crate) fn build(arches: &[&str], objs: &[Obj<'_>], zstd: bool, extra: Vec<(W, W)>) -> Vec<u8> {
    let mut out = b"KPAK\x01\0\0\0".to_vec();
    out.resize(64, 0);
    let mut toc: BTreeMap<&str, Vec<(W, W)>> = BTreeMap::new();
    let mut blobs = Vec::new();
    if zstd {
        out.extend_from_slice(&(objs.len() as u32).to_le_bytes());
    }
    for (ordinal, (key, target, bytes)) in objs.iter().enumerate() {
        let entry = W::M(vec![
            (s("type"), s("hsaco")),
            (s("ordinal"), W::U(ordinal as u64)),
            (s("original_size"), W::U(bytes.len() as u64)),
        ]);
        toc.entry(key).or_default().push((s(target), entry));
        if zstd {
            let frame = zstd::bulk::compress(bytes, 3).unwrap();
            out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
            out.extend_from_slice(&frame);
        } else {
            blobs.push(W::M(vec![(s("offset"), W::U(out.len() as u64)), (s("size"), W::U(bytes.len() as u64))]));
            out.extend_from_slice(bytes);
        }
    }
    let toc_offset = out.len() as u64;
    out[8..16].copy_from_slice(&toc_offset.to_le_bytes());
    let mut pairs = vec![
        (s("format_version"), W::U(1)),
        (s("group_name"), s("demo")),
        (s("gfx_arches"), W::A(arches.iter().map(|a| s(a)).collect())),
        (s("toc"), W::M(toc.into_iter().map(|(k, v)| (s(k), W::M(v))).collect())),
    ];
    if zstd {
        pairs.push((s("compression_scheme"), s("zstd-per-kernel")));
        pairs.push((s("zstd_offset"), W::U(64)));
        pairs.push((s("zstd_size"), W::U(toc_offset - 64)));
    } else {
        pairs.push((s("compression_scheme"), s("none")));
        pairs.push((s("blobs"), W::A(blobs)));
    }
    pairs.extend(extra);
    enc(&W::M(pairs), &mut out);
    out
}

fn code(n: u8) -> Vec<u8> {
    // Poorly compressible, so that frames take hundreds of bytes.
    let mut v = b"\x7fELF".to_vec();
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(n);
    for _ in 0..3000 + usize::from(n) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push((x % 16) as u8);
    }
    v
}

fn strict() -> VerifyOptions {
    VerifyOptions { decompress: true, limit: 1 << 20 }
}

#[test]
fn zstd_archive_reads_back() {
    let (a, b) = (code(1), code(2));
    let data = build(&["gfx90a"], &[("lib/a.so#0", "gfx90a", &a), ("lib/a.so#1", "gfx90a", &b)], true, vec![]);
    let archive = Archive::parse(&data).unwrap();
    assert_eq!(archive.scheme, Scheme::ZstdPerKernel);
    assert_eq!(archive.gfx_arches, ["gfx90a"]);
    assert_eq!(archive.group_name, Some("demo"));
    assert_eq!(archive.spans.len(), 2);
    assert_eq!(archive.spans[0].offset, 72);
    let entry = archive.find("lib/a.so#1", "gfx90a").unwrap();
    assert_eq!(archive.decompress(entry, 1 << 20).unwrap(), b);
    assert!(archive.find("lib/a.so#1", "gfx90a:xnack+").is_none());
    assert!(archive.find("lib/a.so", "gfx90a").is_none());
    assert_eq!(verify(&archive, &strict()), []);
    // The limit is checked before anything is decoded.
    assert_eq!(archive.decompress(entry, 100), Err(ArchiveError::TooLarge { declared: b.len() as u64, limit: 100 }));
}

#[test]
fn none_archive_reads_back_and_overlaps_are_found() {
    let (a, b) = (code(3), code(4));
    let data = build(&["gfx1100"], &[("x#0", "gfx1100", &a), ("y#0", "gfx1100", &b)], false, vec![]);
    let archive = Archive::parse(&data).unwrap();
    assert_eq!(archive.scheme, Scheme::None);
    assert_eq!(archive.decompress(archive.find("y#0", "gfx1100").unwrap(), 1 << 20).unwrap(), b);
    assert_eq!(verify(&archive, &strict()), []);
    // Point blob 1 into the middle of blob 0.
    let mut bad = archive.clone();
    bad.spans[1].offset = bad.spans[0].offset + 10;
    let problems = verify(&bad, &VerifyOptions { decompress: false, limit: 0 });
    assert!(problems.contains(&Problem::Overlap(0, 1)), "{problems:?}");
    // And over the header and the TOC.
    bad.spans[0].offset = 8;
    bad.spans[1].offset = bad.toc_offset - 5;
    let problems = verify(&bad, &VerifyOptions { decompress: false, limit: 0 });
    assert!(problems.contains(&Problem::OverlapsHeader { ordinal: Some(0) }), "{problems:?}");
    assert!(problems.contains(&Problem::OverlapsToc { ordinal: Some(1) }), "{problems:?}");
}

#[test]
fn header_errors() {
    let good = build(&["gfx90a"], &[("k#0", "gfx90a", &code(1))], true, vec![]);
    assert_eq!(Archive::parse(&good[..10]).unwrap_err(), ArchiveError::Truncated(10));
    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(Archive::parse(&bad).unwrap_err(), ArchiveError::Magic);
    let mut bad = good.clone();
    bad[4] = 2;
    assert_eq!(Archive::parse(&bad).unwrap_err(), ArchiveError::Version(2));
    for toc in [0u64, 15, good.len() as u64, u64::MAX] {
        let mut bad = good.clone();
        bad[8..16].copy_from_slice(&toc.to_le_bytes());
        assert!(matches!(Archive::parse(&bad), Err(ArchiveError::TocOffset { .. })), "{toc}");
    }
}

#[test]
fn every_truncation_and_byte_flip_is_an_error_or_a_value_never_a_panic() {
    let data = build(&["gfx90a"], &[("k#0", "gfx90a", &code(1)), ("k#1", "gfx90a", &code(2))], true, vec![]);
    let archive = Archive::parse(&data).unwrap();
    let toc = archive.toc_offset as usize;
    for cut in 0..data.len() {
        // Cutting the TOC (which runs to the end) must fail.
        let result = Archive::parse(&data[..cut]);
        assert!(result.is_err(), "cut at {cut}");
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for round in 0..3000 {
        let mut bad = data.clone();
        for _ in 0..1 + round % 4 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state as usize) % bad.len();
            bad[at] ^= (state >> 32) as u8 | 1;
        }
        // No panic, whatever the damage; zstd without a checksum may decode
        // damaged literals to other bytes of the right size, so success is
        // allowed.
        if let Ok(a) = Archive::parse(&bad) {
            let _ = verify(&a, &strict());
        }
    }
    let _ = toc;
}

#[test]
fn hostile_tocs() {
    let obj = code(1);
    let objs: &[Obj] = &[("k#0", "gfx90a", &obj)];
    let good = build(&["gfx90a"], objs, true, vec![]);
    let toc_offset = Archive::parse(&good).unwrap().toc_offset as usize;
    let with_toc = |toc: &[u8]| {
        let mut d = good[..toc_offset].to_vec();
        d.extend_from_slice(toc);
        d
    };
    // Deeply nested arrays: an error at the nesting limit, not a stack overflow.
    let deep = with_toc(&vec![0x91; 1 << 20]);
    match Archive::parse(&deep) {
        Err(ArchiveError::TocMsgpack { error, .. }) => {
            assert_eq!(error.kind, msgpack::ErrorKind::TooDeep { limit: msgpack::MAX_DEPTH })
        }
        other => panic!("{other:?}"),
    }
    // A map that declares 2^32-1 pairs.
    assert!(matches!(Archive::parse(&with_toc(b"\xdf\xff\xff\xff\xff")), Err(ArchiveError::TocMsgpack { .. })));
    // Not a map; a map without toc; toc of the wrong shape.
    assert!(matches!(Archive::parse(&with_toc(b"\x90")), Err(ArchiveError::TocShape(_))));
    assert!(matches!(Archive::parse(&with_toc(b"\x80")), Err(ArchiveError::TocShape(_))));
    let mut t = Vec::new();
    enc(&W::M(vec![(s("toc"), W::A(vec![]))]), &mut t);
    assert!(matches!(Archive::parse(&with_toc(&t)), Err(ArchiveError::TocShape(_))));
    // An entry without ordinal, and one with an ordinal over 2^32.
    for entry in [
        vec![(s("type"), s("hsaco")), (s("original_size"), W::U(1))],
        vec![(s("type"), s("hsaco")), (s("ordinal"), W::U(1 << 40)), (s("original_size"), W::U(1))],
    ] {
        let mut t = Vec::new();
        let toc = W::M(vec![(s("k#0"), W::M(vec![(s("gfx90a"), W::M(entry))]))]);
        enc(&W::M(vec![(s("toc"), toc)]), &mut t);
        assert!(matches!(Archive::parse(&with_toc(&t)), Err(ArchiveError::TocShape(_))));
    }
}

fn toc_with(objs: &[Obj<'_>], extra: Vec<(W, W)>) -> Result<Archive<'static>, ArchiveError> {
    // Later pairs of a map do not override earlier ones in this reader, so
    // overrides go into a TOC written without the defaults.
    let data: &'static [u8] = Box::leak(build(&["gfx90a"], objs, true, vec![]).into_boxed_slice());
    let archive = Archive::parse(data).unwrap();
    let mut out = data[..archive.toc_offset as usize].to_vec();
    let mut pairs = vec![
        (s("gfx_arches"), W::A(vec![s("gfx90a")])),
        (
            s("toc"),
            W::M(vec![(
                s("k#0"),
                W::M(vec![(
                    s("gfx90a"),
                    W::M(vec![
                        (s("type"), s("hsaco")),
                        (s("ordinal"), W::U(0)),
                        (s("original_size"), W::U(objs[0].2.len() as u64)),
                    ]),
                )]),
            )]),
        ),
        (s("compression_scheme"), s("zstd-per-kernel")),
    ];
    pairs.extend(extra);
    enc(&W::M(pairs), &mut out);
    let out: &'static [u8] = Box::leak(out.into_boxed_slice());
    Archive::parse(out)
}

#[test]
fn blob_out_of_bounds_and_huge_declarations() {
    let obj = code(1);
    let objs: &[Obj] = &[("k#0", "gfx90a", &obj)];
    let size = Archive::parse(&build(&["gfx90a"], objs, true, vec![])).unwrap().blob.unwrap().size;
    let blob = |offset: u64, size: u64| vec![(s("zstd_offset"), W::U(offset)), (s("zstd_size"), W::U(size))];
    assert!(toc_with(objs, blob(64, size)).is_ok());
    assert!(matches!(toc_with(objs, blob(64, 1 << 40)), Err(ArchiveError::Blob(_))));
    assert!(matches!(toc_with(objs, blob(64, size + 1_000_000)), Err(ArchiveError::OutOfFile { .. })));
    assert!(matches!(toc_with(objs, blob(u64::MAX, 2)), Err(ArchiveError::OutOfFile { .. })));
    assert!(matches!(toc_with(objs, blob(64, 3)), Err(ArchiveError::Blob(_))));
    // A blob that ends inside the first frame.
    assert!(matches!(toc_with(objs, blob(64, 20)), Err(ArchiveError::Blob(_))));
    assert!(matches!(toc_with(objs, vec![]), Err(ArchiveError::TocShape(_))));

    // A kernel count over 2^20, and a frame length past the blob.
    let mut data = build(&["gfx90a"], objs, true, vec![]);
    data[64..68].copy_from_slice(&(1u32 << 21).to_le_bytes());
    assert!(matches!(Archive::parse(&data), Err(ArchiveError::Blob(_))));
    data[64..68].copy_from_slice(&2u32.to_le_bytes());
    assert!(matches!(Archive::parse(&data), Err(ArchiveError::Blob(_))));
    data[64..68].copy_from_slice(&1u32.to_le_bytes());
    data[68..72].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(Archive::parse(&data), Err(ArchiveError::Blob(_))));
}

#[test]
fn declared_sizes_must_match() {
    let obj = code(5);
    // original_size one too small, one too big, and absurd.
    for declared in [obj.len() as u64 - 1, obj.len() as u64 + 1, 1 << 50] {
        let data = build(&["gfx90a"], &[("k#0", "gfx90a", &obj)], true, vec![]);
        let mut archive = Archive::parse(&data).unwrap();
        archive.binaries[0].entries[0].original_size = declared;
        let entry = archive.binaries[0].entries[0].clone();
        let got = archive.decompress(&entry, 1 << 20).unwrap_err();
        if declared > 1 << 20 {
            assert!(matches!(got, ArchiveError::TooLarge { .. }));
        } else {
            assert!(matches!(got, ArchiveError::SizeMismatch { .. }), "{got:?}");
        }
        let problems = verify(&archive, &strict());
        assert!(problems.iter().any(|p| matches!(p, Problem::ContentSize { .. })), "{problems:?}");
        assert!(problems.iter().any(|p| matches!(p, Problem::Decode { .. })), "{problems:?}");
    }
}

#[test]
fn zstd_checksum_is_checked_when_present() {
    let obj = code(6);
    let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    enc.set_pledged_src_size(Some(obj.len() as u64)).unwrap();
    enc.write_all(&obj).unwrap();
    let frame = enc.finish().unwrap();
    let mut data = build(&["gfx90a"], &[("k#0", "gfx90a", &obj)], true, vec![]);
    let old_toc_offset = Archive::parse(&data).unwrap().toc_offset;
    // Swap the frame for the checksummed one (same TOC, same sizes but the
    // frame's): rebuild by hand.
    let toc = data[old_toc_offset as usize..].to_vec();
    data.truncate(68);
    data.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    data.extend_from_slice(&frame);
    let toc_offset = data.len() as u64;
    data[8..16].copy_from_slice(&toc_offset.to_le_bytes());
    // zstd_size is written as a u64 in the TOC: patch it.
    let old = (old_toc_offset - 64).to_be_bytes();
    let new = (toc_offset - 64).to_be_bytes();
    let at = toc.windows(8).position(|w| w == old).unwrap();
    let mut toc = toc;
    toc[at..at + 8].copy_from_slice(&new);
    data.extend_from_slice(&toc);
    let archive = Archive::parse(&data).unwrap();
    assert!(archive.frame_header(0).unwrap().unwrap().checksum);
    assert_eq!(verify(&archive, &strict()), []);
    // Flip a bit of the checksum (the frame's last 4 bytes).
    let mut bad = data.clone();
    bad[archive.spans[0].end() as usize - 1] ^= 1;
    let archive = Archive::parse(&bad).unwrap();
    let entry = archive.binaries[0].entries[0].clone();
    assert!(matches!(archive.decompress(&entry, 1 << 20), Err(ArchiveError::Decompress { .. })));
}

#[test]
fn verify_finds_entry_problems() {
    let (a, b) = (code(1), code(2));
    let data = build(&["gfx90a"], &[("k#0", "gfx90a", &a), ("k#1", "gfx90a:xnack+", &b)], true, vec![]);
    let mut archive = Archive::parse(&data).unwrap();
    archive.binaries[0].entries[0].kind = "other";
    archive.binaries[0].entries[0].ordinal = 7;
    let problems = verify(&archive, &strict());
    let has = |want: &Problem| problems.contains(want);
    assert!(has(&Problem::Kind { key: "k#0".into(), target: "gfx90a".into(), kind: "other".into() }));
    assert!(has(&Problem::Ordinal { key: "k#0".into(), target: "gfx90a".into(), ordinal: 7 }));
    assert!(has(&Problem::TargetNotListed { key: "k#1".into(), target: "gfx90a:xnack+".into() }));
    assert!(has(&Problem::Unreferenced(0)));
    // Bytes after the TOC.
    let mut longer = data.clone();
    longer.extend_from_slice(b"junk");
    assert!(verify(&Archive::parse(&longer).unwrap(), &strict()).contains(&Problem::TrailingBytes(4)));
    // A frame whose length prefix covers a byte more than the frame.
    let archive = Archive::parse(&data).unwrap();
    let mut spans = archive.clone();
    spans.spans[0].size -= 1;
    let problems = verify(&spans, &VerifyOptions { decompress: false, limit: 0 });
    assert!(problems.iter().any(|p| matches!(p, Problem::FrameLength { ordinal: 0, .. })), "{problems:?}");
}

// ---- markers and wrapper records ----

pub(crate) fn marker_bytes(name: &str, paths: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    enc(
        &W::M(vec![(s("kpack_search_paths"), W::A(paths.iter().map(|p| s(p)).collect())), (s("kernel_name"), s(name))]),
        &mut out,
    );
    out
}

#[test]
fn markers() {
    let bytes = marker_bytes("lib/x.so", &["../.kpack/a_@GFXARCH@.kpack", "/abs/b.kpack"]);
    let m = Marker::parse(&bytes).unwrap();
    assert_eq!((m.kernel_name, m.search_paths.len(), m.len), ("lib/x.so", 2, bytes.len()));
    for cut in 0..bytes.len() {
        assert!(matches!(Marker::parse(&bytes[..cut]), Err(MarkerError::Msgpack(_))));
    }
    let encoded = |w: W| {
        let mut out = Vec::new();
        enc(&w, &mut out);
        out
    };
    let shaped = |w: W| Marker::parse(&encoded(w)).map(|m| (m.kernel_name.to_string(), m.search_paths.len()));
    assert_eq!(shaped(W::A(vec![])), Err(MarkerError::Shape("not a map")));
    assert_eq!(shaped(W::M(vec![(s("kernel_name"), s("x"))])), Err(MarkerError::Shape("no kpack_search_paths")));
    assert_eq!(
        shaped(W::M(vec![(s("kernel_name"), s("x")), (s("kpack_search_paths"), W::A(vec![]))])),
        Err(MarkerError::Shape("kpack_search_paths is empty"))
    );
    assert_eq!(
        shaped(W::M(vec![(s("kernel_name"), W::U(1)), (s("kpack_search_paths"), W::A(vec![s("p")]))])),
        Err(MarkerError::Shape("kernel_name is not a UTF-8 string"))
    );
    // Non-string paths are dropped, as the runtime does.
    let bytes = encoded(W::M(vec![(s("kernel_name"), s("x")), (s("kpack_search_paths"), W::A(vec![W::Nil, s("p")]))]));
    let m = Marker::parse(&bytes).unwrap();
    assert_eq!((m.search_paths, m.dropped_paths), (vec!["p"], 1));
    // Only the first 64 KiB are read.
    let long = "a".repeat(70_000);
    assert!(Marker::parse(&marker_bytes(&long, &["p"])).is_err());
}

#[test]
fn wrapper_records() {
    let mut rec = Vec::new();
    rec.extend_from_slice(&host::HIPK.to_le_bytes());
    rec.extend_from_slice(&1u32.to_le_bytes());
    rec.extend_from_slice(&0x1b000u64.to_le_bytes());
    rec.extend_from_slice(&0x7_0000_0003u64.to_le_bytes());
    let r = WrapperRecord::parse(&rec).unwrap();
    assert_eq!((r.kind(), r.version, r.binary, r.co_index()), (WrapperKind::Hipk, 1, 0x1b000, 3));
    assert!(WrapperRecord::parse(&rec[..23]).is_none());
    rec[..4].copy_from_slice(b"FPIH");
    assert_eq!(WrapperRecord::parse(&rec).unwrap().kind(), WrapperKind::Hipf);
    assert!(host::records(&rec[..20]).is_none());
    assert_eq!(host::records(&[rec.clone(), rec].concat()).unwrap().len(), 2);
    assert!(host::HostBinary::read(b"\x7fELF").is_err());
}

// ---- the resolver over a fake file system ----

#[derive(Default)]
struct Fake(BTreeMap<PathBuf, Vec<u8>>);

impl ArchiveSource for Fake {
    type Data = Vec<u8>;
    fn is_file(&self, path: &Path) -> bool {
        self.0.contains_key(path)
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        self.0.get(path).cloned().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    }
}

const LIB: &str = "/opt/x/lib/liba.so";
const PATTERN: &str = "../.kpack/p_@GFXARCH@.kpack";

fn fake(archives: &[(&str, Vec<u8>)]) -> Fake {
    Fake(
        archives
            .iter()
            .map(|(name, data)| (PathBuf::from(format!("/opt/x/.kpack/p_{name}.kpack")), data.clone()))
            .collect(),
    )
}

fn load(files: &Fake, env: &Env, order: SearchOrder, agent: &str) -> Result<(String, String), LoadError> {
    let marker_data = marker_bytes("lib/liba.so", &[PATTERN]);
    let marker = Marker::parse(&marker_data).unwrap();
    let arch_list = clr_arch_list(agent);
    let request = Request { binary_path: Path::new(LIB), marker: &marker, co_index: 0, arch_list: &arch_list };
    let resolver = Resolver { order, ..Resolver::new(files, env) };
    resolver.load(&request).result.map(|l| (l.archive.file_name().unwrap().to_string_lossy().into_owned(), l.target))
}

fn one(target: &str, key: &str) -> Vec<u8> {
    build(&[target], &[(key, target, &code(9))], true, vec![])
}

#[test]
fn the_two_loader_behaviours() {
    // gfx90a:xnack+ exists because of another library; ours is only in
    // the plain gfx90a archive.
    let files =
        fake(&[("gfx90a:xnack+", one("gfx90a:xnack+", "lib/other.so#0")), ("gfx90a", one("gfx90a", "lib/liba.so#0"))]);
    let env = Env::default();
    assert_eq!(
        load(&files, &env, SearchOrder::FallThrough, "gfx90a:xnack+"),
        Ok(("p_gfx90a.kpack".into(), "gfx90a".into()))
    );
    let err = load(&files, &env, SearchOrder::FirstCompatible, "gfx90a:xnack+").unwrap_err();
    assert_eq!((err.code(), err.name()), (5, "KPACK_ERROR_KERNEL_NOT_FOUND"));
    // A bare agent string never matches a feature archive.
    assert_eq!(load(&files, &env, SearchOrder::FallThrough, "gfx90a"), Ok(("p_gfx90a.kpack".into(), "gfx90a".into())));

    // gfx1100.kpack (other library) hides gfx11-generic in the old loader.
    let files = fake(&[
        ("gfx1100", one("gfx1100", "lib/other.so#0")),
        ("gfx11-generic", one("gfx11-generic", "lib/liba.so#0")),
    ]);
    assert_eq!(
        load(&files, &env, SearchOrder::FallThrough, "gfx1100"),
        Ok(("p_gfx11-generic.kpack".into(), "gfx11-generic".into()))
    );
    assert_eq!(load(&files, &env, SearchOrder::FirstCompatible, "gfx1100").unwrap_err().code(), 5);
    // gfx1101: no gfx1101 archive, the generic one serves.
    assert_eq!(
        load(&files, &env, SearchOrder::FirstCompatible, "gfx1101"),
        Ok(("p_gfx11-generic.kpack".into(), "gfx11-generic".into()))
    );
    // gfx1201: no path formed for it names a file.
    assert_eq!(load(&files, &env, SearchOrder::FallThrough, "gfx1201").unwrap_err().code(), 13);
}

#[test]
fn archive_and_arch_not_found() {
    let env = Env::default();
    // Nothing on disk.
    let err = load(&Fake::default(), &env, SearchOrder::FallThrough, "gfx942:sramecc+:xnack-").unwrap_err();
    match &err {
        LoadError::ArchiveNotFound { looked_for } => {
            assert_eq!(looked_for.len(), 8, "{looked_for:?}");
            assert_eq!(looked_for[0], Path::new("/opt/x/.kpack/p_gfx942:sramecc+:xnack-.kpack"));
            assert_eq!(looked_for[4], Path::new("/opt/x/.kpack/p_gfx9-4-generic:sramecc+:xnack-.kpack"));
        }
        other => panic!("{other:?}"),
    }
    // An archive opens (found by a path formed for the agent) but lists
    // another target: ARCH_NOT_FOUND.
    let mut files = fake(&[]);
    files.0.insert(PathBuf::from("/opt/x/.kpack/p_gfx90a.kpack"), one("gfx1100", "lib/liba.so#0"));
    assert_eq!(load(&files, &env, SearchOrder::FallThrough, "gfx90a").unwrap_err().code(), 14);
    // A damaged archive is skipped as if absent.
    let mut files = fake(&[("gfx90a", b"KPAK\x01\0\0\0garbage!".to_vec())]);
    assert_eq!(load(&files, &env, SearchOrder::FallThrough, "gfx90a").unwrap_err().code(), 13);
    files.0.insert(PathBuf::from("/opt/x/.kpack/p_gfx90a.kpack"), one("gfx90a", "lib/liba.so#0"));
    assert!(load(&files, &env, SearchOrder::FallThrough, "gfx90a").is_ok());
}

#[test]
fn environment() {
    let files = fake(&[("gfx90a", one("gfx90a", "lib/liba.so#0")), ("other", one("gfx90a", "lib/other.so#0"))]);
    for (value, disabled) in [("1", true), ("yes", true), ("0", false), ("", false), ("0x", false)] {
        let env = Env { disable: Some(value.into()), ..Env::default() };
        let got = load(&files, &env, SearchOrder::FallThrough, "gfx90a");
        assert_eq!(got.as_ref().err().map(LoadError::code), disabled.then_some(8), "{value:?}");
    }
    // ROCM_KPACK_PATH replaces the marker's paths: items are literal files,
    // relative ones against cwd, empty ones dropped, no expansion.
    let env = Env { kpack_path: Some("::.kpack/p_other.kpack".into()), cwd: "/opt/x".into(), ..Env::default() };
    assert_eq!(load(&files, &env, SearchOrder::FallThrough, "gfx90a").unwrap_err().code(), 5);
    let env = Env { kpack_path: Some("/opt/x/.kpack/p_@GFXARCH@.kpack".into()), ..Env::default() };
    assert_eq!(load(&files, &env, SearchOrder::FallThrough, "gfx90a").unwrap_err().code(), 13);
    // ROCM_KPACK_PATH_PREFIX goes first: in first-compatible order the
    // prefix archive decides.
    let env = Env { kpack_path_prefix: Some("/opt/x/.kpack/p_other.kpack".into()), ..Env::default() };
    assert_eq!(load(&files, &env, SearchOrder::FirstCompatible, "gfx90a").unwrap_err().code(), 5);
    assert!(load(&files, &env, SearchOrder::FallThrough, "gfx90a").is_ok());
    // Windows separator.
    let env = Env { kpack_path: Some("/nope;/opt/x/.kpack/p_gfx90a.kpack".into()), separator: ';', ..Env::default() };
    assert!(load(&files, &env, SearchOrder::FallThrough, "gfx90a").is_ok());
}

#[test]
fn traces_and_duplicates() {
    let files = fake(&[("gfx90a", one("gfx90a", "lib/liba.so#0"))]);
    let env = Env::default();
    let marker_data = marker_bytes("lib/liba.so", &[PATTERN, "../.kpack/p_gfx90a.kpack"]);
    let marker = Marker::parse(&marker_data).unwrap();
    let arch_list = clr_arch_list("gfx90a:xnack-");
    let request = Request { binary_path: Path::new(LIB), marker: &marker, co_index: 0, arch_list: &arch_list };
    let resolution = Resolver::new(&files, &env).load(&request);
    let loaded = resolution.result.unwrap();
    assert_eq!((loaded.key.as_str(), loaded.ordinal, loaded.bytes.len()), ("lib/liba.so#0", 0, code(9).len()));
    assert!(resolution.trace.contains(&Step::NotAFile("/opt/x/.kpack/p_gfx90a:xnack-.kpack".into())));
    assert!(resolution.trace.contains(&Step::Duplicate("/opt/x/.kpack/p_gfx90a.kpack".into())));
}

#[test]
fn names_and_paths() {
    assert_eq!(compatible_targets("gfx1100"), ["gfx1100"]);
    assert_eq!(compatible_targets("gfx90a:xnack+"), ["gfx90a:xnack+", "gfx90a"]);
    assert_eq!(compatible_targets(&format!("g{}", ":f".repeat(20))).len(), 1);
    assert_eq!(clr_arch_list("gfx1030"), ["amdgcn-amd-amdhsa--gfx1030", "amdgcn-amd-amdhsa--gfx10-3-generic"]);
    assert_eq!(clr_arch_list("gfx908:sramecc+"), ["amdgcn-amd-amdhsa--gfx908:sramecc+"]);
    // Processors our table maps to a generic target but CLR's does not.
    assert_eq!(clr_arch_list("gfx940").len(), 1);
    assert_eq!(
        clr_arch_list("amdgcn-amd-amdhsa--gfx906:xnack-:sramecc+"),
        ["amdgcn-amd-amdhsa--gfx906:xnack-:sramecc+", "amdgcn-amd-amdhsa--gfx9-generic:sramecc+:xnack-"]
    );
    assert_eq!(normalize(Path::new("/a/b/../../../c/./d")), Path::new("/c/d"));
    assert_eq!(normalize(Path::new("a/../../b")), Path::new("../b"));
}

mod writer {
    use super::super::archive::Archive;
    use super::super::verify::{VerifyOptions, verify};
    use super::super::write::{self, NewEntry, WriteError};
    use crate::msgpack;
    use std::borrow::Cow;

    fn entry(key: &str, target: &str, code: &[u8]) -> NewEntry<'static> {
        NewEntry {
            key: key.into(),
            target: target.into(),
            original_size: code.len() as u64,
            frame: Cow::Owned(write::compress(code, write::DEFAULT_LEVEL).unwrap()),
            source_id: Some(format!("hipv4-amdgcn-amd-amdhsa--{target}")),
        }
    }

    #[test]
    fn written_archives_read_back_and_verify_clean() {
        let long_key = format!("{}#0", "k".repeat(300));
        let codes: Vec<Vec<u8>> = (0..40u32).map(|i| (0..(i * 97)).map(|b| (b * 31 + i) as u8).collect()).collect();
        let mut entries = Vec::new();
        for (i, c) in codes.iter().enumerate() {
            let key = if i == 0 { long_key.clone() } else { format!("lib/x{}.so#{}", i / 2, i % 2) };
            entries.push(entry(&key, if i % 3 == 0 { "gfx90a:xnack+" } else { "gfx90a" }, c));
        }
        let bytes = write::archive("demo_lib", &["gfx90a", "gfx90a:xnack+"], &entries).unwrap();
        let a = Archive::parse(&bytes).unwrap();
        assert_eq!(a.gfx_arches, ["gfx90a", "gfx90a:xnack+"]);
        assert_eq!(a.group_name, Some("demo_lib"));
        assert_eq!(a.spans.len(), 40);
        assert_eq!(a.toc_offset + a.toc_len, bytes.len() as u64);
        for (i, e) in entries.iter().enumerate() {
            let found = a.find(&e.key, &e.target).unwrap();
            assert_eq!(found.ordinal as usize, i);
            assert_eq!(found.source_id, e.source_id.as_deref());
            assert_eq!(a.decompress(found, 1 << 20).unwrap(), codes[i]);
            assert!(a.frame_header(found.ordinal).unwrap().unwrap().checksum);
        }
        assert_eq!(verify(&a, &VerifyOptions::default()), vec![]);
    }

    #[test]
    fn the_writer_refuses_duplicates_and_foreign_targets() {
        let e = entry("a#0", "gfx1100", b"abc");
        assert!(matches!(
            write::archive("g", &["gfx1100"], &[e.clone(), e.clone()]),
            Err(WriteError::Duplicate { .. })
        ));
        assert!(matches!(write::archive("g", &["gfx11-generic"], &[e]), Err(WriteError::Target { .. })));
        // An empty archive is still a valid one.
        let empty = write::archive("g", &["gfx1100"], &[]).unwrap();
        assert_eq!(Archive::parse(&empty).unwrap().spans.len(), 0);
    }

    #[test]
    fn msgpack_encodings_are_the_smallest_and_read_back() {
        for n in [0u64, 1, 127, 128, 255, 256, 65535, 65536, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            msgpack::encode::uint(&mut out, n);
            let expect = match n {
                0..=127 => 1,
                128..=255 => 2,
                256..=65535 => 3,
                65536..=0xffff_ffff => 5,
                _ => 9,
            };
            assert_eq!(out.len(), expect, "{n}");
            assert_eq!(msgpack::read(&out).unwrap().0.as_u64(), Some(n));
        }
        for n in [0usize, 31, 32, 255, 256, 70000] {
            let s = "x".repeat(n);
            let mut out = Vec::new();
            msgpack::encode::str(&mut out, &s);
            assert_eq!(msgpack::read(&out).unwrap().0.as_str(), Some(s.as_str()));
        }
        for n in [0usize, 15, 16, 70000] {
            let mut out = Vec::new();
            msgpack::encode::array(&mut out, n);
            (0..n).for_each(|_| out.push(0xc0));
            assert_eq!(msgpack::read(&out).unwrap().0.as_array().map(|a| a.len()), Some(n));
        }
    }
}

/// `stored_equals` agrees with decoding and comparing: equal bytes, a
/// difference in a later 64 KiB piece, shorter and longer content, and a
/// damaged frame (an error, as `decode_stored` gives).
#[test]
fn stored_equals_compares_while_decoding() {
    use super::archive::{Scheme, decode_stored, stored_equals};
    let original: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let frame = zstd::bulk::compress(&original, 3).unwrap();
    assert!(stored_equals(&frame, Scheme::ZstdPerKernel, 0, &original).unwrap());
    let mut other = original.clone();
    other[200_000] ^= 1;
    assert!(!stored_equals(&frame, Scheme::ZstdPerKernel, 0, &other).unwrap());
    assert!(!stored_equals(&frame, Scheme::ZstdPerKernel, 0, &original[..original.len() - 1]).unwrap());
    let mut longer = original.clone();
    longer.push(0);
    assert!(!stored_equals(&frame, Scheme::ZstdPerKernel, 0, &longer).unwrap());
    let mut damaged = frame.clone();
    let mid = damaged.len() / 2;
    damaged.truncate(mid);
    assert!(stored_equals(&damaged, Scheme::ZstdPerKernel, 0, &original).is_err());
    let n = original.len() as u64;
    assert!(decode_stored(&damaged, Scheme::ZstdPerKernel, 0, n, n).is_err());
    assert!(stored_equals(&original, Scheme::None, 0, &original).unwrap());
    assert!(!stored_equals(&original, Scheme::None, 0, &other).unwrap());
}
