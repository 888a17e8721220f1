//! Property tests for every writer: what is written reads back as what was
//! given (arbitrary entry sets, sizes and options), and writing the same
//! input twice gives the same bytes (no timestamps, no hash-seed order).

use offload_format::bundle::compressed::{self, CompressOptions, Method};
use offload_format::bundle::object::{self as object_bundle, Format};
use offload_format::bundle::{FileType, binary, text};
use offload_format::bundler::{self, Request, UnbundleOptions};
use offload_format::offload_binary::{self, Image, ImageKind, OffloadBinary, OffloadKind};
use offload_format::wrapper::{bitcode, module, text as ll};
use proptest::prelude::*;
use std::num::NonZeroU64;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// Entry IDs as they occur (printable, no newline), and odd ones.
fn id() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof!["[a-z0-9_:+-]{0,40}".prop_map(String::into_bytes), prop::collection::vec(any::<u8>(), 0..24),]
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

const TARGETS: [&str; 8] = [
    "host-x86_64-unknown-linux-gnu",
    "hip-amdgcn-amd-amdhsa--gfx906",
    "hip-amdgcn-amd-amdhsa--gfx908",
    "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
    "hipv4-amdgcn-amd-amdhsa--gfx1030",
    "openmp-nvptx64-nvidia-cuda--sm_70",
    "openmp-x86_64-pc-linux-gnu",
    "openmp-amdgcn-amd-amdhsa--gfx1100",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Binary bundles: entries come back in order, at aligned offsets,
    /// duplicates and empty IDs included.
    #[test]
    fn binary_bundles_round_trip(
        entries in prop::collection::vec((id(), bytes(300)), 0..12),
        align in 1u64..5000,
    ) {
        let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(i, p)| (i.as_slice(), p.as_slice())).collect();
        let align = NonZeroU64::new(align).unwrap();
        let out = binary::write(&e, align).to_vec();
        prop_assert_eq!(&out, &binary::write(&e, align).to_vec());
        let back = binary::read(&out).unwrap().unwrap();
        prop_assert_eq!(back.len(), e.len());
        for (b, (i, p)) in back.iter().zip(&e) {
            prop_assert_eq!(b.id, *i);
            prop_assert_eq!(b.payload, *p);
            prop_assert_eq!(b.offset % align.get(), 0);
        }
    }

    /// Text bundles in every comment style: exact round trip for payloads
    /// that do not contain an END marker of their own.
    #[test]
    fn text_bundles_round_trip(
        entries in prop::collection::vec(("[a-z0-9:+-]{0,30}", bytes(200)), 0..8),
        style in 0usize..3,
        marker_inside in any::<bool>(),
    ) {
        let comment = ["//", "#", ";"][style];
        let end = format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____END__ ");
        let start = format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____START__ x\n");
        let mut entries = entries;
        if marker_inside && let Some((_, p)) = entries.first_mut() {
            // A START marker inside a payload is data.
            p.extend_from_slice(start.as_bytes());
        }
        prop_assume!(entries.iter().all(|(_, p)| !contains(p, end.as_bytes())));
        let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(i, p)| (i.as_bytes(), p.as_slice())).collect();
        let markers = text::Markers::new(comment);
        let out = text::write(&markers, &e).to_vec();
        prop_assert_eq!(&out, &text::write(&markers, &e).to_vec());
        let mut r = text::TextReader::new(&out, comment);
        for (i, p) in &e {
            prop_assert_eq!(r.next_id(), Some(*i));
            prop_assert_eq!(r.payload().unwrap(), *p);
        }
        prop_assert_eq!(r.next_id(), None);
    }

    /// CCOB: every method and version gives the data back with its size
    /// and hash; the same options give the same bytes.
    #[test]
    fn compressed_bundles_round_trip(
        data in prop_oneof![bytes(5000), (any::<u8>(), 0usize..20000).prop_map(|(b, n)| vec![b; n])],
        zlib in any::<bool>(),
        level in 1i32..10,
        v3 in any::<bool>(),
    ) {
        let method = if zlib { Method::Zlib } else { Method::Zstd };
        let opts = CompressOptions { method, level, version: if v3 { 3 } else { 2 }, threads: 0 };
        let c = compressed::compress(&data, &opts).unwrap();
        prop_assert_eq!(&c, &compressed::compress(&data, &opts).unwrap());
        let blob = compressed::read_blob(&c.bytes).unwrap();
        prop_assert_eq!(blob.header.uncompressed_size, data.len() as u64);
        prop_assert_eq!(blob.header.method, method);
        prop_assert_eq!(compressed::decompress(&blob).unwrap(), data.clone());
        let whole = bundler::decompress_input(&c.bytes).unwrap().into_verified().unwrap();
        prop_assert_eq!(whole.as_ref(), &data[..]);
    }

    /// The bundler: any set of distinct targets, bundled in any format,
    /// lists every target and unbundles to the inputs (and `-compress`d
    /// too); bundling twice gives the same bytes.
    #[test]
    fn bundler_round_trips_arbitrary_entry_sets(
        devices in prop::collection::btree_set(1usize..TARGETS.len(), 0..TARGETS.len()),
        payloads in prop::collection::vec(bytes(400), TARGETS.len()),
        type_name in prop::sample::select(vec!["bc", "gch", "ast", "o", "i", "hipi", "d", "s", "ll"]),
        align in 1u32..64,
        compress in any::<bool>(),
    ) {
        // Exactly one host, first (LLVM's rule unless every target is HIP).
        let picks: Vec<usize> = std::iter::once(0).chain(devices).collect();
        let targets: Vec<String> = picks.iter().map(|&i| TARGETS[i].to_string()).collect();
        let inputs: Vec<&[u8]> = picks.iter().map(|&i| payloads[i].as_slice()).collect();
        let file_type = bundler::file_type(type_name).unwrap();
        if let FileType::Text { comment } = file_type {
            let end = format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____END__ ");
            prop_assume!(inputs.iter().all(|p| !contains(p, end.as_bytes())));
        }
        // A host input that is an object would make a fat object; these
        // payloads are random bytes, so -type=o writes the binary format.
        prop_assume!(object_bundle::detect(inputs[0]).map_or(true, |f| f.is_none()));
        let req = |unbundle: bool| Request {
            file_type: type_name.into(),
            targets: targets.clone(),
            input_count: if unbundle { 1 } else { targets.len() },
            output_count: if unbundle { targets.len() } else { 1 },
            unbundle,
            ..Request::default()
        };
        let bt = bundler::validate(&req(false)).unwrap().unwrap();
        let plan = bundler::bundle(file_type, &bt, &inputs, align).unwrap();
        let mut out = plan.to_vec();
        prop_assert_eq!(&out, &bundler::bundle(file_type, &bt, &inputs, align).unwrap().to_vec());
        if compress {
            out = bundler::compress(&out, &CompressOptions::default()).unwrap().bytes;
        }
        let data = bundler::decompress_input(&out).unwrap().into_verified().unwrap();
        let mut listed: Vec<String> =
            bundler::list(file_type, &data).unwrap().iter().map(|i| String::from_utf8_lossy(i).into_owned()).collect();
        listed.sort();
        let mut expected: Vec<String> = bt.standardized.clone();
        expected.sort();
        prop_assert_eq!(listed, expected);
        let ut = bundler::validate(&req(true)).unwrap().unwrap();
        let plans = bundler::unbundle(file_type, &ut, &data, UnbundleOptions::default()).unwrap();
        for (p, input) in plans.iter().zip(&inputs) {
            prop_assert_eq!(&p.to_vec(), input);
        }
    }

    /// OffloadBinary packages of several images: every image, kind, flag
    /// and record comes back in order; writing is deterministic.
    #[test]
    fn packages_round_trip(
        images in prop::collection::vec(
            (any::<u16>(), any::<u16>(), any::<u32>(),
             prop::collection::vec(("[a-z]{1,8}", "[ -~]{0,20}"), 0..6), bytes(300)),
            0..6,
        ),
    ) {
        let images: Vec<Image> = images
            .iter()
            .map(|(ik, ok, flags, strings, image)| Image {
                image_kind: ImageKind::from_u16(*ik),
                offload_kind: OffloadKind::from_u16(*ok),
                flags: *flags,
                strings: strings.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect(),
                image,
            })
            .collect();
        let out = offload_binary::write_plan(&images).unwrap().to_vec();
        prop_assert_eq!(&out, &offload_binary::write_plan(&images).unwrap().to_vec());
        let back = OffloadBinary::parse_all(&out).unwrap();
        prop_assert_eq!(back.len(), images.len());
        for (b, i) in back.iter().zip(&images) {
            prop_assert_eq!(b.image(), i.image);
            prop_assert_eq!(b.image_kind(), i.image_kind);
            prop_assert_eq!(b.offload_kind(), i.offload_kind);
            prop_assert_eq!(b.flags(), i.flags);
            prop_assert_eq!(b.strings(), &i.strings[..]);
        }
    }

    /// Both GNU archive writers (the packager's `--archive` and the device
    /// archives of `-type=a`): members come back by name and content,
    /// names with any characters included; writing is deterministic.
    /// Member data starts with `#`, which begins no object format: the
    /// device writer reads members that look like objects for its symbol
    /// table and, as llvm-ar does, refuses a broken one (random bytes
    /// `f0 01 ...` are a PowerPC COFF header to it).
    #[test]
    fn archives_round_trip(
        members in prop::collection::vec(
            ("[^/\u{0}\n]{1,24}", bytes(200).prop_map(|d| [&b"#"[..], &d].concat())),
            0..8,
        ),
    ) {
        let refs: Vec<(&str, &[u8])> = members.iter().map(|(n, d)| (n.as_str(), d.as_slice())).collect();
        let packager = offload_binary::archive::write_gnu_archive(&refs).unwrap();
        prop_assert_eq!(&packager, &offload_binary::archive::write_gnu_archive(&refs).unwrap());
        let device = offload_format::bundle::archive::write_gnu_archive(members.clone()).unwrap();
        prop_assert_eq!(&device, &offload_format::bundle::archive::write_gnu_archive(members.clone()).unwrap());
        for ar in [&packager, &device] {
            let file = object::read::archive::ArchiveFile::parse(&ar[..]).unwrap();
            let got: Vec<(Vec<u8>, Vec<u8>)> = file
                .members()
                .map(|m| {
                    let m = m.unwrap();
                    (m.name().to_vec(), m.data(&ar[..]).unwrap().to_vec())
                })
                .collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> =
                members.iter().map(|(n, d)| (n.as_bytes().to_vec(), d.clone())).collect();
            prop_assert_eq!(got, want);
        }
    }

    /// Fat objects: adding bundle sections to a real host object is
    /// deterministic and reads back (ELF and COFF).
    #[test]
    fn fat_objects_are_deterministic(
        payloads in prop::collection::vec(bytes(300), 1..4),
        coff in any::<bool>(),
    ) {
        let host: &[u8] = if coff {
            include_bytes!("../../offload-cli/tests/fixtures/objects/host-coff.o")
        } else {
            include_bytes!("../../offload-cli/tests/fixtures/objects/host-x86_64.o")
        };
        let format = if coff { Format::Coff } else { Format::Elf };
        let ids: Vec<Vec<u8>> = (0..=payloads.len())
            .map(|i| if i == 0 { TARGETS[0].as_bytes().to_vec() } else { TARGETS[i].as_bytes().to_vec() })
            .collect();
        let mut entries: Vec<(&[u8], &[u8])> = vec![(ids[0].as_slice(), host)];
        entries.extend(payloads.iter().enumerate().map(|(i, p)| (ids[i + 1].as_slice(), p.as_slice())));
        let out = object_bundle::bundle(host, format, &entries, 0).unwrap().to_vec();
        prop_assert_eq!(&out, &object_bundle::bundle(host, format, &entries, 0).unwrap().to_vec());
        let found = object_bundle::bundles(&out, format).unwrap();
        prop_assert_eq!(found.len(), entries.len());
        for (f, (i, p)) in found.iter().zip(&entries).skip(1) {
            prop_assert_eq!(f.id, *i);
            prop_assert_eq!(f.contents, *p);
        }
    }

    /// The wrapper module: bitcode and text are deterministic, and every
    /// image is in the bitcode as decoded by the independent llvm-bitcode
    /// reader.
    #[test]
    fn wrapper_modules_are_deterministic_and_decode(
        images in prop::collection::vec(bytes(200), 0..5),
        triple in prop::sample::select(vec!["x86_64-pc-linux-gnu", "nvptx64-nvidia-cuda", "aarch64-unknown-linux-gnu"]),
        with_archs in any::<bool>(),
    ) {
        let archs: Vec<&str> = if with_archs { images.iter().map(|_| "gfx906:xnack+").collect() } else { Vec::new() };
        let input = module::WrapperInput { triple, images: images.iter().map(Vec::as_slice).collect(), offload_archs: archs };
        let m = module::build(&input).unwrap();
        let bc = bitcode::to_vec(&m).unwrap();
        prop_assert_eq!(&bc, &bitcode::to_vec(&module::build(&input).unwrap()).unwrap());
        prop_assert_eq!(ll::to_text(&m, module::SOURCE_FILENAME), ll::to_text(&m, module::SOURCE_FILENAME));
        let decoded = llvm_bitcode::Bitcode::new(&bc).unwrap();
        let mut blobs = Vec::new();
        collect_blobs(&decoded.elements, &mut blobs);
        for img in images.iter().filter(|i| i.iter().any(|&b| b != 0)) {
            let found = blobs.iter().any(|b| b == img || (img.last() == Some(&0) && b[..] == img[..img.len() - 1]));
            prop_assert!(found, "image of {} bytes not in the bitcode", img.len());
        }
    }
}

fn collect_blobs(elements: &[llvm_bitcode::bitcode::BitcodeElement], out: &mut Vec<Vec<u8>>) {
    use llvm_bitcode::bitcode::{BitcodeElement, Payload};
    for e in elements {
        match e {
            BitcodeElement::Block(b) => collect_blobs(&b.elements, out),
            BitcodeElement::Record(r) => {
                if let Some(Payload::Blob(b)) = r.clone().take_payload() {
                    out.push(b);
                }
            }
        }
    }
}
