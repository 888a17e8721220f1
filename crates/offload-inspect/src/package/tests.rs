//! Walks packages built here with the containers' own writers.

use super::*;
use std::io::Write;

/// What a walk reported, flattened for comparison.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Member { at: String, bytes: Vec<u8>, offset: Option<u64> },
    Problem(String),
}

fn walk_all(data: &[u8], limits: &Limits) -> (Vec<Seen>, Result<(), PackageError>) {
    let mut seen = Vec::new();
    let result = walk(data, limits, &mut |e| match e {
        Event::Member(m) => seen.push(Seen::Member {
            at: Location(m.steps.to_vec()).to_string(),
            bytes: m.bytes.to_vec(),
            offset: m.offset,
        }),
        Event::Problem(p) => seen.push(Seen::Problem(p.to_string())),
        Event::Progress { .. } => {}
    });
    (seen, result)
}

fn code(tag: u8) -> Vec<u8> {
    let mut v = b"\x7fELF\x02\x01\x01".to_vec();
    v.extend(std::iter::repeat_n(tag, 3000));
    v
}

fn zip_of(members: &[(&str, &[u8], bool)]) -> Vec<u8> {
    let mut w = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data, deflate) in members {
        let method = if *deflate { ::zip::CompressionMethod::Deflated } else { ::zip::CompressionMethod::Stored };
        let opts = ::zip::write::SimpleFileOptions::default().compression_method(method);
        w.start_file(*name, opts).unwrap();
        w.write_all(data).unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn tar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = ::tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut h = ::tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

fn compress(kind: Kind, data: &[u8]) -> Vec<u8> {
    match kind {
        Kind::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Kind::Xz => {
            let mut e = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::default()).unwrap();
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Kind::Zstd => zstd::encode_all(data, 3).unwrap(),
        Kind::Bzip2 => {
            let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        _ => unreachable!(),
    }
}

/// An `ar` archive as dpkg writes it (names without the GNU `/`).
fn ar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = b"!<arch>\n".to_vec();
    for (name, data) in members {
        out.extend(format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", 0, 0, 0, 100644, data.len()).as_bytes());
        out.extend(*data);
        if data.len() % 2 == 1 {
            out.push(b'\n');
        }
    }
    out
}

fn member(at: &str, bytes: &[u8], offset: Option<u64>) -> Seen {
    Seen::Member { at: at.into(), bytes: bytes.to_vec(), offset }
}

#[test]
fn zip_members_stored_have_offsets_and_deflated_ones_do_not() {
    let (a, b) = (code(1), code(2));
    let wheel = zip_of(&[("torch/lib/a.so", &a, false), ("README", b"text", true), ("torch/lib/b.so", &b, true)]);
    let (seen, result) = walk_all(&wheel, &Limits::default());
    result.unwrap();
    let at = memchr::memmem::find(&wheel, &a).unwrap() as u64;
    assert_eq!(seen, [member("member torch/lib/a.so", &a, Some(at)), member("member torch/lib/b.so", &b, None)]);
}

#[test]
fn tarballs_of_every_compression_give_the_same_members() {
    let (a, b) = (code(3), code(4));
    let tar = tar_of(&[("./usr/lib/a.so", &a), ("./usr/share/doc", b"text"), ("./usr/lib/b.so", &b)]);
    let (seen, result) = walk_all(&tar, &Limits::default());
    result.unwrap();
    let off = |x: &[u8]| Some(memchr::memmem::find(&tar, x).unwrap() as u64);
    assert_eq!(seen, [member("member usr/lib/a.so", &a, off(&a)), member("member usr/lib/b.so", &b, off(&b))]);
    for kind in [Kind::Gzip, Kind::Xz, Kind::Zstd, Kind::Bzip2] {
        let (seen, result) = walk_all(&compress(kind, &tar), &Limits::default());
        result.unwrap();
        assert_eq!(
            seen,
            [member("member usr/lib/a.so", &a, None), member("member usr/lib/b.so", &b, None)],
            "{kind:?}"
        );
    }
}

#[test]
fn debs_condas_and_nesting_are_opened() {
    let a = code(5);
    let data_tar = compress(Kind::Xz, &tar_of(&[("./opt/rocm/lib/a.so", &a)]));
    let deb = ar_of(&[
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", &compress(Kind::Xz, &tar_of(&[("./control", b"x")]))),
        ("data.tar.xz", &data_tar),
    ]);
    let (seen, result) = walk_all(&deb, &Limits::default());
    result.unwrap();
    assert_eq!(seen, [member("member data.tar.xz member opt/rocm/lib/a.so", &a, None)]);

    let pkg = compress(Kind::Zstd, &tar_of(&[("lib/a.so", &a)]));
    let conda = zip_of(&[
        ("metadata.json", b"{}", false),
        ("pkg-x-1.0-0.tar.zst", &pkg, false),
        ("info-x-1.0-0.tar.zst", &compress(Kind::Zstd, &tar_of(&[("info/index.json", b"{}")])), false),
    ]);
    let (seen, result) = walk_all(&conda, &Limits::default());
    result.unwrap();
    assert_eq!(seen, [member("member pkg-x-1.0-0.tar.zst member lib/a.so", &a, None)]);

    // A wheel stored in a plain tarball stored in a zip: offsets add up.
    let wheel = zip_of(&[("x/a.so", &a, false)]);
    let outer = zip_of(&[("dist.tar", &tar_of(&[("x-1.whl", &wheel)]), false)]);
    let (seen, result) = walk_all(&outer, &Limits::default());
    result.unwrap();
    let at = memchr::memmem::find(&outer, &a).unwrap() as u64;
    assert_eq!(seen, [member("member dist.tar member x-1.whl member x/a.so", &a, Some(at))]);

    let (seen, _) = walk_all(&outer, &Limits { max_depth: 1, ..Limits::default() });
    assert_eq!(
        seen,
        [Seen::Problem("member dist.tar member x-1.whl: packages nested more than 1 deep; not opened".into())]
    );
}

#[test]
fn large_members_are_spooled_or_skipped_by_the_limits() {
    let big = code(6);
    let tgz = compress(Kind::Gzip, &tar_of(&[("big.so", &big), ("small.so", &code(7))]));
    let (seen, result) = walk_all(&tgz, &Limits { in_memory: 100, ..Limits::default() });
    result.unwrap();
    assert_eq!(seen.first(), Some(&member("member big.so", &big, None)), "spooled and read back");
    let (seen, result) = walk_all(&tgz, &Limits { in_memory: 100, max_member: 1000, ..Limits::default() });
    result.unwrap();
    assert_eq!(seen.len(), 2);
    assert!(
        matches!(&seen[0], Seen::Problem(p) if p.starts_with("member big.so: 3007 bytes uncompressed, over the limit of 1000")),
        "{seen:?}"
    );
    // A package expanding more than allowed stops reading members, and
    // says so once.
    let tight = Limits { max_expansion: 1, min_budget: 0, ..Limits::default() };
    let (seen, result) = walk_all(&tgz, &tight);
    result.unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen.iter().all(|s| matches!(s, Seen::Problem(p) if p.contains("expands more than 1 times"))), "{seen:?}");
}

/// Bytes decompressed only to be skipped (a member without code in a
/// compressed tarball) are charged to the budget: a bomb of zeros before
/// the code stops the walk with a warning naming the member, in every
/// stream format (before, the zeros were skipped for free and the code
/// after them was read).
#[test]
fn skipped_members_are_charged_to_the_budget() {
    let zeros = vec![0u8; 2 << 20];
    let tarball = tar_of(&[("zeros.bin", &zeros), ("lib/a.so", &code(3))]);
    for kind in [Kind::Gzip, Kind::Xz, Kind::Zstd, Kind::Bzip2] {
        let packed = compress(kind, &tarball);
        let (seen, result) = walk_all(&packed, &Limits::default());
        result.unwrap();
        assert!(matches!(&seen[..], [Seen::Member { at, .. }] if at == "member lib/a.so"), "{kind:?}: {seen:?}");
        let limits = Limits { min_budget: 1 << 20, max_expansion: 10, ..Limits::default() };
        let (seen, result) = walk_all(&packed, &limits);
        result.unwrap();
        assert_eq!(seen.len(), 1, "{kind:?}: {seen:?}");
        assert!(
            matches!(&seen[0], Seen::Problem(p) if p.starts_with("member zeros.bin: the package expands more than 10 times")),
            "{kind:?}: {seen:?}"
        );
    }
}

#[test]
fn damage_is_reported_with_the_member_and_never_panics() {
    let a = code(8);
    let wheel = zip_of(&[("torch/lib/a.so", &a, true), ("torch/lib/b.so", &code(9), false)]);
    // Flip bytes inside the deflate stream of the first member.
    let mut bad = wheel.clone();
    let start = 30 + "torch/lib/a.so".len() + 10;
    for b in &mut bad[start..start + 8] {
        *b ^= 0x55;
    }
    let (seen, result) = walk_all(&bad, &Limits::default());
    result.unwrap();
    assert!(
        matches!(&seen[0], Seen::Problem(p) if p.starts_with("member torch/lib/a.so: deflate stream corrupt")),
        "{seen:?}"
    );
    assert!(
        matches!(&seen[1], Seen::Member { at, .. } if at == "member torch/lib/b.so"),
        "the next member is read: {seen:?}"
    );

    let err = walk(&wheel[..wheel.len() - 10], &Limits::default(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().starts_with("damaged zip archive"), "{err}");

    let txz = compress(Kind::Xz, &tar_of(&[("a.so", &a)]));
    let cut = &txz[..txz.len() / 2];
    let (seen, result) = walk_all(cut, &Limits::default());
    assert!(
        result.is_err() || seen.iter().any(|s| matches!(s, Seen::Problem(p) if p.contains("xz stream corrupt"))),
        "{seen:?} {result:?}"
    );

    // Every truncation and a byte flip at every position of small packages:
    // no panic, and whatever is visited lies inside the input or is owned.
    for pkg in [wheel, txz, tar_of(&[("a.so", &a[..100])])] {
        for n in (0..pkg.len()).step_by(7) {
            let _ = walk(&pkg[..n], &Limits::default(), &mut |_| {});
            let mut flipped = pkg.clone();
            flipped[n] ^= 0xff;
            let _ = walk(&flipped, &Limits::default(), &mut |_| {});
        }
    }
}

#[test]
fn rebase_prefixes_locations_and_shifts_offsets() {
    let bundle = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/hip-gfx906-gfx90a.bc")).unwrap();
    let steps = [Step::PackageMember("x/y.bc".into())];
    let mut inv = crate::scan(&bundle, "y.bc", &crate::Options::default());
    let before: Vec<Option<u64>> = inv.objects.iter().map(|o| o.offset).collect();
    rebase(&mut inv, &steps, Some(1000));
    assert_eq!(inv.objects[0].location.to_string(), "member x/y.bc");
    let after: Vec<Option<u64>> = inv.objects.iter().map(|o| o.offset).collect();
    assert_eq!(after, before.iter().map(|o| o.map(|x| x + 1000)).collect::<Vec<_>>());
    rebase(&mut inv, &[Step::PackageMember("p.tar.gz".into())], None);
    assert_eq!(inv.objects[0].location.to_string(), "member p.tar.gz member x/y.bc");
    assert!(inv.objects.iter().all(|o| o.offset.is_none()));
}

/// `copies` central directory entries for the one member of `zip` (names
/// `<name>` with the last character replaced by 0, 1, ...), all pointing
/// at its one local header and data.
fn zip_with_aliases(zip: &[u8], copies: usize) -> Vec<u8> {
    let eocd = zip.len() - 22;
    let cd_size = u32::from_le_bytes(zip[eocd + 12..eocd + 16].try_into().unwrap()) as usize;
    let cd_at = u32::from_le_bytes(zip[eocd + 16..eocd + 20].try_into().unwrap()) as usize;
    let entry = &zip[cd_at..cd_at + cd_size];
    let name_len = u16::from_le_bytes(entry[28..30].try_into().unwrap()) as usize;
    let mut out = zip[..cd_at].to_vec();
    for n in 0..copies {
        let mut e = entry.to_vec();
        e[46 + name_len - 1] = b'0' + n as u8;
        out.extend_from_slice(&e);
    }
    let mut end = zip[eocd..].to_vec();
    end[8..10].copy_from_slice(&(copies as u16).to_le_bytes());
    end[10..12].copy_from_slice(&(copies as u16).to_le_bytes());
    end[12..16].copy_from_slice(&((cd_size * copies) as u32).to_le_bytes());
    out.extend_from_slice(&end);
    out
}

/// Central directory entries that share one member's bytes are read once:
/// the first, in directory order; the others are errors naming it (before,
/// each was decoded again).
#[test]
fn overlapping_zip_members_are_read_once() {
    for deflate in [true, false] {
        let zip = zip_with_aliases(&zip_of(&[("lib/a.so", &code(5), deflate)]), 3);
        let (seen, result) = walk_all(&zip, &Limits::default());
        result.unwrap();
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(matches!(&seen[0], Seen::Member { at, .. } if at == "member lib/a.s0"), "{seen:?}");
        for (s, n) in seen[1..].iter().zip(1..) {
            let want = format!("member lib/a.s{n}: damaged zip archive: member data overlaps that of lib/a.s0");
            assert!(matches!(s, Seen::Problem(p) if p.starts_with(&want)), "{seen:?}");
        }
    }
}
