//! Scanner tests on files built in memory (the CLI tests use files built by
//! clang and LLVM's tools).

use super::*;
use offload_format::bundle::compressed::{CompressOptions, compress};
use offload_format::offload_binary::{Image, ImageKind, OffloadKind};
use std::num::NonZeroU64;

fn bundle(entries: &[(&str, &[u8])], align: u64) -> Vec<u8> {
    let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(id, p)| (id.as_bytes(), *p)).collect();
    offload_format::bundle::binary::write(&e, NonZeroU64::new(align).unwrap()).to_vec()
}

fn hip_bundle() -> Vec<u8> {
    bundle(
        &[
            ("host-x86_64-unknown-linux--", b""),
            ("hipv4-amdgcn-amd-amdhsa--gfx906", b"GFX906 CODE"),
            ("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", b"GFX90A XNACK CODE"),
        ],
        4096,
    )
}

/// Every record with an offset has exactly its bytes there.
fn check_offsets(data: &[u8], inv: &Inventory) {
    for o in &inv.objects {
        let bytes = inv.bytes(o).unwrap();
        assert_eq!(bytes.len() as u64, o.size, "{}", o.id);
        if let Some(off) = o.offset {
            assert_eq!(&data[off as usize..(off + o.size) as usize], &bytes[..], "{}", o.id);
        }
    }
}

#[test]
fn raw_bundle() {
    let data = hip_bundle();
    let inv = scan(&data, "b.hipfb", &Options::default());
    assert!(inv.diagnostics.is_empty(), "{:?}", inv.diagnostics);
    assert_eq!(inv.objects.len(), 3);
    let o = &inv.objects[2];
    assert_eq!(o.location.to_string(), "file");
    assert_eq!((o.offload_kind.as_str(), o.triple.as_str()), ("hipv4", "amdgcn-amd-amdhsa"));
    assert_eq!(o.target_id, "gfx90a:xnack+");
    assert_eq!(inv.objects[0].offload_kind, "host");
    assert_eq!(inv.objects[0].target_id, "");
    assert_eq!(inv.objects[1].offset, Some(4096));
    assert_eq!(inv.objects[2].offset, Some(8192));
    check_offsets(&data, &inv);
}

#[test]
fn compressed_bundles_back_to_back_with_padding() {
    let a = compress(&hip_bundle(), &CompressOptions::default()).unwrap().bytes;
    let b =
        compress(&bundle(&[("hip-amdgcn-amd-amdhsa--gfx1100", b"X")], 1), &CompressOptions::default()).unwrap().bytes;
    let mut data = a.clone();
    data.resize(4096, 0);
    data.extend_from_slice(&b);
    let inv = scan(&data, "f", &Options::default());
    assert!(inv.diagnostics.is_empty(), "{:?}", inv.diagnostics);
    assert_eq!(inv.objects.len(), 4);
    assert_eq!(inv.units.len(), 2);
    assert!(inv.objects.iter().all(|o| o.compressed && o.offset.is_none()));
    assert_eq!(inv.objects[3].location.to_string(), "file #1");
    assert_eq!(inv.objects[1].size, 11);
    assert_eq!(&inv.bytes(&inv.objects[2]).unwrap()[..], b"GFX90A XNACK CODE");
    check_offsets(&data, &inv);
    let deep = scan(&data, "f", &Options { deep: true, ..Default::default() });
    assert!(!deep.has_errors(), "{:?}", deep.diagnostics);
}

#[test]
fn offload_binaries_and_nested_bundles() {
    let inner = hip_bundle();
    let images = [
        Image {
            image_kind: ImageKind::Fatbinary,
            offload_kind: OffloadKind::Hip,
            strings: vec![(b"triple", b"amdgcn-amd-amdhsa"), (b"arch", b"gfx90a:xnack+")],
            image: &inner,
            ..Default::default()
        },
        Image {
            image_kind: ImageKind::Object,
            offload_kind: OffloadKind::OpenMp,
            strings: vec![(b"triple", b"x86_64-unknown-linux-gnu"), (b"arch", b"")],
            image: b"host image",
            ..Default::default()
        },
    ];
    let mut data = Vec::new();
    for image in &images {
        data.extend(offload_format::offload_binary::write(image).unwrap());
    }
    let inv = scan(&data, "pkg", &Options::default());
    assert!(inv.diagnostics.is_empty(), "{:?}", inv.diagnostics);
    let ids: Vec<_> = inv.objects.iter().map(|o| (o.location.to_string(), o.id.clone())).collect();
    assert_eq!(ids.len(), 5, "{ids:?}");
    assert_eq!(ids[0], ("file #0".into(), "amdgcn-amd-amdhsa-gfx90a:xnack+".into()));
    assert!(inv.objects[0].container);
    assert_eq!(ids[2], ("file #0 image 0".into(), "hipv4-amdgcn-amd-amdhsa--gfx906".into()));
    assert_eq!(ids[4], ("file #1".into(), "x86_64-unknown-linux-gnu-".into()));
    assert_eq!(inv.objects[4].offload_kind, "openmp");
    // The OffloadBinaries share a unit; the nested bundle has its own.
    assert_eq!(inv.objects[0].unit, inv.objects[4].unit);
    assert_ne!(inv.objects[0].unit, inv.objects[2].unit);
    check_offsets(&data, &inv);
}

#[test]
fn text_bundles() {
    let m = offload_format::bundle::text::Markers::new("//");
    let data = offload_format::bundle::text::write(
        &m,
        &[(b"host-x86_64-unknown-linux-gnu".as_slice(), b"int x;\n".as_slice())],
    )
    .to_vec();
    let inv = scan(&data, "t.i", &Options::default());
    assert_eq!(inv.objects.len(), 1);
    assert_eq!(inv.objects[0].format, Format::TextBundle);
    check_offsets(&data, &inv);
}

/// A GNU archive of the given members.
fn archive(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut a = b"!<arch>\n".to_vec();
    for (name, data) in members {
        a.extend(format!("{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", format!("{name}/"), 0, 0, 0, 644, data.len()).bytes());
        a.extend_from_slice(data);
        if a.len() % 2 == 1 {
            a.push(b'\n');
        }
    }
    a
}

#[test]
fn archive_members_of_every_kind() {
    let m = offload_format::bundle::text::Markers::new("//");
    let text =
        offload_format::bundle::text::write(&m, &[(b"hip-amdgcn-amd-amdhsa--gfx906".as_slice(), b"x".as_slice())])
            .to_vec();
    let ccob = compress(&hip_bundle(), &CompressOptions::default()).unwrap().bytes;
    let inner = archive(&[("raw.hipfb", &hip_bundle())]);
    let data = archive(&[("t.ii", &text), ("c.hipfb", &ccob), ("plain.txt", b"nothing"), ("inner.a", &inner)]);
    let inv = scan(&data, "lib.a", &Options::default());
    assert!(inv.diagnostics.is_empty(), "{:?}", inv.diagnostics);
    let locs: Vec<String> = inv.objects.iter().map(|o| o.location.to_string()).collect();
    assert_eq!(locs.len(), 1 + 3 + 3, "{locs:?}");
    assert_eq!(locs[0], "member lib.a(t.ii)");
    assert_eq!(inv.objects[0].format, Format::TextBundle);
    assert_eq!(locs[1], "member lib.a(c.hipfb)");
    assert_eq!(locs[6], "member lib.a(inner.a) member inner.a(raw.hipfb)");
    check_offsets(&data, &inv);
}

#[test]
fn damaged_inputs_are_diagnosed_with_offsets() {
    // Trailing garbage after a bundle.
    let mut data = hip_bundle();
    data.extend_from_slice(b"junk");
    let end = hip_bundle().len() as u64;
    let inv = scan(&data, "f", &Options::default());
    assert_eq!(inv.objects.len(), 3);
    assert_eq!(inv.diagnostics.len(), 1);
    assert_eq!(inv.diagnostics[0].offset, Some(end));
    // A lying payload offset in the second record.
    let mut data = hip_bundle();
    let second = 32 + 24 + 27;
    data[second..second + 8].copy_from_slice(&(1u64 << 50).to_le_bytes());
    let inv = scan(&data, "f", &Options::default());
    assert_eq!(inv.objects.len(), 1);
    assert_eq!(inv.diagnostics[0].offset, Some(second as u64));
    // A compressed bundle whose data is damaged: listing still works,
    // verify finds it.
    let mut data = compress(&hip_bundle(), &CompressOptions::default()).unwrap().bytes;
    let n = data.len();
    data[n - 3] ^= 0x55;
    let deep = scan(&data, "f", &Options { deep: true, ..Default::default() });
    assert!(deep.has_errors());
    assert!(deep.diagnostics.iter().all(|d| d.offset == Some(0)), "{:?}", deep.diagnostics);
}

#[test]
fn locations_display() {
    let loc = Location(vec![
        Step::Member { archive: "libx.a".into(), member: "foo.o".into() },
        Step::Section(".hip_fatbin".into()),
        Step::Index(1),
    ]);
    assert_eq!(loc.to_string(), "member libx.a(foo.o) section .hip_fatbin #1");
    assert_eq!(Location(vec![Step::Index(0), Step::Image(2)]).to_string(), "file #0 image 2");
    assert_eq!(Location::default().to_string(), "file");
}

use proptest::prelude::*;

proptest! {
    #[test]
    fn damaged_bundles_never_panic(flips in prop::collection::vec((0usize..200, any::<u8>()), 1..6), deep in any::<bool>()) {
        let good = compress(&hip_bundle(), &CompressOptions::default()).unwrap().bytes;
        let mut raw = hip_bundle();
        raw.truncate(300);
        for base in [good, raw] {
            let mut data = base.clone();
            for &(at, v) in &flips {
                let i = at % data.len();
                data[i] ^= v;
            }
            let inv = scan(&data, "x", &Options { deep, ..Default::default() });
            for o in &inv.objects {
                if let Some(off) = o.offset {
                    prop_assert!(off + o.size <= data.len() as u64);
                }
                let _ = inv.bytes(o);
            }
        }
    }
}

/// `verify` on a bundle of 60,000 entries: the duplicate-ID check searched
/// every earlier entry for each (quadratic; the hostile corpus's 200,000
/// entries took minutes). Duplicates are still each reported once.
#[test]
fn deep_checks_of_many_entries_find_every_duplicate() {
    let ids: Vec<String> = (0..60_000).map(|i| format!("hip-amdgcn-amd-amdhsa--gfx{}", i % 59_990)).collect();
    let entries: Vec<(&str, &[u8])> = ids.iter().map(|id| (id.as_str(), &b""[..])).collect();
    let data = bundle(&entries, 1);
    let inv = scan(&data, "many", &Options { deep: true, ..Options::default() });
    let duplicates = inv.diagnostics.iter().filter(|d| d.message.contains("appears more than once")).count();
    assert_eq!(duplicates, 10);
}

/// A version 2 OffloadBinary whose `n` entries all have `image` as their
/// image (no strings).
fn shared_image_binary(image: &[u8], n: u64) -> Vec<u8> {
    let image_at = (32 + 40 * n).next_multiple_of(8);
    let size = (image_at + image.len() as u64).next_multiple_of(8);
    let mut d = vec![0u8; size as usize];
    d[..4].copy_from_slice(&offload_format::offload_binary::MAGIC);
    d[4] = 2;
    d[8..16].copy_from_slice(&size.to_le_bytes());
    d[16..24].copy_from_slice(&32u64.to_le_bytes());
    d[24..32].copy_from_slice(&n.to_le_bytes());
    for i in 0..n as usize {
        let e = 32 + 40 * i;
        d[e..e + 2].copy_from_slice(&1u16.to_le_bytes());
        d[e + 2..e + 4].copy_from_slice(&3u16.to_le_bytes());
        d[e + 24..e + 32].copy_from_slice(&image_at.to_le_bytes());
        d[e + 32..e + 40].copy_from_slice(&(image.len() as u64).to_le_bytes());
    }
    d[image_at as usize..image_at as usize + image.len()].copy_from_slice(image);
    d
}

/// Packages nested eight deep, each level's ten images all pointing at the
/// next level: opening every reference listed 10^8 objects from 3 KiB
/// (found by the hostile corpus's nesting case). Shared bytes are opened
/// once; the others are noted.
#[test]
fn shared_nested_payloads_are_opened_once() {
    let mut data = b"\x7fELF".to_vec();
    data.resize(64, 0);
    for _ in 0..8 {
        data = shared_image_binary(&data, 10);
    }
    assert!(data.len() < 4096);
    for deep in [false, true] {
        let inv = scan(&data, "nest", &Options { deep, ..Options::default() });
        assert_eq!(inv.objects.len(), 80, "deep {deep}");
        // The first image of every level is followed to the bottom.
        let deepest = inv.objects.iter().map(|o| o.location.0.len()).max();
        assert_eq!(deepest, Some(7));
        let shared = inv.diagnostics.iter().filter(|d| d.message.contains("same bytes")).count();
        assert_eq!(shared, 63);
    }
}
