//! OffloadBinary against LLVM 22.1.8's own output (the fixtures of
//! `tests/fixtures/llvm22`, made by the `make.sh` there), and the version 2
//! and 3 layouts (LLVM 23 and main) written and read back.

use super::read::{self, Error};
use super::{
    FLAG_METADATA, Image, ImageArgs, ImageKind, OffloadBinary, OffloadKind, RecordOrder, container, write_plan,
    write_plan_for, write_v2, write_v3,
};
use crate::llvm_release::LlvmRelease;
use crate::offload_binary::write::Compression;
use offload_testkit::damage::damaged_copies;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/llvm22/", $name))
    };
}

/// The packages `make.sh` writes: name, bytes, what llvm-objdump-22 prints,
/// and the `--image` arguments that made them.
fn packages() -> Vec<(&'static str, &'static [u8], &'static str, Vec<&'static str>)> {
    const HIP: &str = "file=hip-gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip";
    const OMP: &str = "file=omp-sm70.o,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp";
    const CUDA: &str = "file=cuda-sm80.s,triple=nvptx64-nvidia-cuda,arch=sm_80,kind=cuda";
    const SYCL: &str = "file=sycl.spv,triple=spirv64-unknown-unknown,arch=,kind=sycl";
    const HIP_X: &str = "file=hip-gfx90a.o,triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack+,kind=hip,feature=+xnack";
    let text = |b: &'static [u8]| std::str::from_utf8(b).unwrap();
    vec![
        ("pkg-hip.out", fixture!("pkg-hip.out"), text(fixture!("pkg-hip.out.objdump.txt")), vec![HIP]),
        ("pkg-openmp.out", fixture!("pkg-openmp.out"), text(fixture!("pkg-openmp.out.objdump.txt")), vec![OMP]),
        ("pkg-cuda.out", fixture!("pkg-cuda.out"), text(fixture!("pkg-cuda.out.objdump.txt")), vec![CUDA]),
        ("pkg-sycl.out", fixture!("pkg-sycl.out"), text(fixture!("pkg-sycl.out.objdump.txt")), vec![SYCL]),
        (
            "pkg-all.out",
            fixture!("pkg-all.out"),
            text(fixture!("pkg-all.out.objdump.txt")),
            vec![HIP_X, OMP, CUDA, SYCL],
        ),
    ]
}

fn input(name: &str) -> &'static [u8] {
    match name {
        "hip-gfx90a.o" => fixture!("hip-gfx90a.o"),
        "omp-sm70.o" => fixture!("omp-sm70.o"),
        "cuda-sm80.s" => fixture!("cuda-sm80.s"),
        "sycl.spv" => fixture!("sycl.spv"),
        other => panic!("no input {other}"),
    }
}

/// `llvm-objdump --offloading`'s blocks for these binaries.
fn objdump<'a>(bins: impl IntoIterator<Item = &'a OffloadBinary<'a>>) -> String {
    let mut out = String::new();
    for (i, b) in bins.into_iter().enumerate() {
        out += &format!(
            "\nOFFLOADING IMAGE [{i}]:\nkind            {}\narch            {}\ntriple          {}\nproducer        {}\n",
            b.image_kind().objdump_label(),
            b.arch(),
            b.triple(),
            b.offload_kind().name()
        );
    }
    out
}

#[test]
fn packages_read_as_llvm_objdump_22_prints_them() {
    for (name, bytes, want, _) in packages() {
        let bins = OffloadBinary::parse_all(bytes).unwrap();
        assert_eq!(objdump(&bins), want, "{name}");
    }
    // The stored numbers are LLVM 22's: HIP 4, SYCL 8.
    let all = OffloadBinary::parse_all(fixture!("pkg-all.out")).unwrap();
    let raw: Vec<u16> = all.iter().map(|b| b.entry().offload_kind).collect();
    assert_eq!(raw, [4, 1, 2, 8]);
    assert_eq!(all[0].string("feature"), "+xnack");
}

#[test]
fn clang_22_hip_object_reads_as_objdump_prints_it() {
    let data = fixture!("hip-rdc.o");
    let scan = container::scan(data, "hip-rdc.o");
    assert!(scan.error.is_none(), "{:?}", scan.error);
    assert_eq!(scan.packages.len(), 1);
    let bins = OffloadBinary::parse_all(&scan.packages[0].data).unwrap();
    let want = std::str::from_utf8(fixture!("hip-rdc.o.objdump.txt")).unwrap();
    // objdump prints the file-format line first.
    let blocks = want.strip_prefix("\nhip-rdc.o:\tfile format elf64-x86-64\n").unwrap();
    assert_eq!(objdump(&bins), blocks);
    assert_eq!((bins[0].entry().offload_kind, bins[0].image_kind()), (4, ImageKind::Bitcode));
    assert!(crate::bitcode::is_bitcode(bins[0].image()));
}

/// The images llvm-offload-binary-22 was given, as our packager builds them.
fn images_for(args: &[ImageArgs], release: LlvmRelease) -> Vec<Image<'_>> {
    args.iter()
        .flat_map(|a| {
            let records: Vec<(&[u8], &[u8])> =
                a.string_records(RecordOrder::Llvm19).into_iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
            a.files()
                .into_iter()
                .map(move |f| Image {
                    image_kind: ImageKind::infer(f, input(f)),
                    offload_kind: a.offload_kind_in(release),
                    flags: 0,
                    strings: records.clone(),
                    image: input(f),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn llvm_22_writer_reproduces_llvm_offload_binary_22() {
    for (name, bytes, _, specs) in packages() {
        let args: Vec<ImageArgs> = specs.iter().map(|s| ImageArgs::parse(s)).collect();
        let images = images_for(&args, LlvmRelease::Llvm22);
        let ours = write_plan_for(LlvmRelease::Llvm22, &images).unwrap().to_vec();
        assert_eq!(ours, bytes, "{name}");
        // LLVM 19's numbering differs exactly in the offload-kind fields of
        // HIP (3) and SYCL (which LLVM 19 cannot name: 0).
        let images19 = images_for(&args, LlvmRelease::Llvm19);
        let ours19 = write_plan_for(LlvmRelease::Llvm19, &images19).unwrap().to_vec();
        assert_eq!(ours19, write_plan(&images19).unwrap().to_vec());
        let bins = OffloadBinary::parse_all(bytes).unwrap();
        let mut expect = bytes.to_vec();
        for b in &bins {
            let at = (b.offset() + b.header().entry_offset + 2) as usize;
            expect[at] = match b.entry().offload_kind {
                4 => 3,
                8 => 0,
                k => k as u8,
            };
        }
        assert_eq!(ours19, expect, "{name}");
    }
    assert!(matches!(write_plan_for(LlvmRelease::Llvm14, &[]), Err(super::WriteError::NoOffloadBinary(_))));
}

#[test]
fn llvm_22_bundler_compresses_to_ccob_version_3() {
    use crate::bundle::compressed::{CompressOptions, compress, decompress, read_blob};
    let ccob = fixture!("bundle-v3.ccob");
    let plain = fixture!("bundle-plain.bin");
    let blob = read_blob(ccob).unwrap();
    assert_eq!(blob.header.version, 3);
    assert_eq!(decompress(&blob).unwrap(), plain);
    // The release's default version and LLVM's defaults otherwise give
    // the same bytes.
    let version = LlvmRelease::Llvm22.facts().ccob_default_version.unwrap();
    let ours = compress(plain, &CompressOptions { version, ..CompressOptions::default() }).unwrap();
    assert_eq!(ours.bytes, ccob);
    let v19 = LlvmRelease::Llvm19.facts().ccob_default_version.unwrap();
    let ours19 = compress(plain, &CompressOptions { version: v19, ..CompressOptions::default() }).unwrap();
    assert_eq!((ours19.version, &ours19.bytes[32..]), (2, &ccob[40..]));
}

#[test]
fn damaged_and_truncated_fixtures_fail_cleanly() {
    let mut inputs: Vec<Vec<u8>> = packages().into_iter().map(|p| p.1.to_vec()).collect();
    inputs.push(fixture!("hip-rdc.o").to_vec());
    inputs.push(sample_v3(Some(Compression::Zstd(3))));
    inputs.push(sample_v3(Some(Compression::Zlib(6))));
    inputs.push(write_v2(&sample_images()).unwrap());
    for (i, data) in inputs.iter().enumerate() {
        for len in 0..data.len() {
            let _ = read_everything(&data[..len]);
        }
        for (_, d) in damaged_copies(data, 0x2222_0000 + i as u64, 400) {
            let _ = read_everything(&d);
        }
    }
}

/// Reads `data` every way the crate offers; returns how many images came out.
fn read_everything(data: &[u8]) -> usize {
    let mut n = 0;
    for b in read::Binaries::new(data).flatten() {
        assert!(b.image().len() <= data.len());
        n += 1;
    }
    if let Ok(inflated) = read::inflate_all(data, 1 << 20)
        && let Ok(bins) = OffloadBinary::parse_all(&inflated)
    {
        for b in &bins {
            assert!(b.data().len() <= inflated.len());
            let _ = (b.offload_kind().name(), b.is_metadata_only());
        }
    }
    let scan = container::scan(data, "x");
    for p in &scan.packages {
        n += OffloadBinary::parse_all(&p.data).map_or(0, |b| b.len());
    }
    n
}

fn sample_images() -> Vec<Image<'static>> {
    vec![
        Image {
            image_kind: ImageKind::Object,
            offload_kind: OffloadKind::Hip,
            strings: vec![(b"triple", b"amdgcn-amd-amdhsa"), (b"arch", b"gfx90a")],
            image: b"first image, 29 bytes long...",
            ..Default::default()
        },
        Image {
            image_kind: ImageKind::SpirV,
            offload_kind: OffloadKind::Sycl,
            strings: vec![(b"triple", b"spirv64-unknown-unknown"), (b"meta", b"a\0b"), (b"arch", b"")],
            image: b"spirv",
            ..Default::default()
        },
        Image {
            offload_kind: OffloadKind::OpenMp,
            flags: FLAG_METADATA,
            strings: vec![(b"triple", b"x86_64-unknown-linux-gnu"), (b"note", b"metadata only")],
            image: b"",
            ..Default::default()
        },
        Image {
            image_kind: ImageKind::Ptx,
            offload_kind: OffloadKind::Cuda,
            strings: vec![(b"triple", b"nvptx64-nvidia-cuda"), (b"arch", b"sm_80")],
            image: b"ptx",
            ..Default::default()
        },
    ]
}

fn sample_v3(c: Option<Compression>) -> Vec<u8> {
    write_v3(&sample_images(), c).unwrap()
}

fn assert_reads_back(bins: &[OffloadBinary<'_>], version: u32) {
    let images = sample_images();
    assert_eq!(bins.len(), images.len());
    for (i, (b, img)) in bins.iter().zip(&images).enumerate() {
        assert_eq!((b.version(), b.entry_index()), (version, i as u64));
        assert_eq!(b.image(), img.image);
        assert_eq!(b.image_kind(), img.image_kind);
        assert_eq!(b.offload_kind(), img.offload_kind);
        assert_eq!(b.strings(), &img.strings[..]);
        assert_eq!(b.is_metadata_only(), img.flags & FLAG_METADATA != 0);
    }
    // Bit numbering: HIP 4, SYCL 8, OpenMP 1, CUDA 2.
    let raw: Vec<u16> = bins.iter().map(|b| b.entry().offload_kind).collect();
    assert_eq!(raw, [4, 8, 1, 2]);
}

#[test]
fn version_2_layout_round_trips() {
    let bytes = write_v2(&sample_images()).unwrap();
    assert_eq!(&bytes[4..8], &2u32.to_le_bytes());
    assert_eq!(bytes.len() % 8, 0);
    // header 32, 4 entries (160), 9 records (216): the string table at 408.
    assert_eq!(u64::from_le_bytes(bytes[24..32].try_into().unwrap()), 4);
    let bins = OffloadBinary::parse_all(&bytes).unwrap();
    assert_eq!(bins[0].entry().string_offset, 32 + 160);
    assert_eq!(bins[1].entry().string_offset, 32 + 160 + 2 * 24);
    // Images back to back after the aligned table.
    assert_eq!(bins[1].entry().image_offset, bins[0].entry().image_offset + 29);
    assert_eq!(bins[0].entry().image_offset % 8, 0);
    assert_reads_back(&bins, 2);
    // Two binaries back to back read as eight entries.
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes);
    assert_eq!(OffloadBinary::parse_all(&two).unwrap().len(), 8);
    // A NUL in a key is refused; in a value it is kept.
    let bad = Image { strings: vec![(b"k\0", b"v")], ..Default::default() };
    assert!(write_v2(&[bad]).is_err());
    assert!(write_v2(&[]).is_err());
}

#[test]
fn version_3_layouts_round_trip() {
    let plain = sample_v3(None);
    assert_eq!(&plain[4..8], &3u32.to_le_bytes());
    assert_eq!(u64::from_le_bytes(plain[16..24].try_into().unwrap()), 40);
    assert_eq!(&plain[32..40], &[0; 8]);
    let bins = OffloadBinary::parse_all(&plain).unwrap();
    assert_eq!(bins[0].header().inflated_size, 0);
    assert_reads_back(&bins, 3);
    // Nothing to inflate: borrowed as is.
    assert!(matches!(read::inflate_all(&plain, 0).unwrap(), std::borrow::Cow::Borrowed(_)));
    for c in [Compression::Zstd(3), Compression::Zstd(19), Compression::Zlib(1), Compression::Zlib(9)] {
        let packed = sample_v3(Some(c));
        assert_eq!(packed.len() % 8, 0);
        let size = u64::from_le_bytes(packed[8..16].try_into().unwrap());
        let inflated_size = u64::from_le_bytes(packed[32..40].try_into().unwrap());
        assert_eq!(inflated_size, plain.len() as u64);
        assert_eq!(packed.len() as u64, size.next_multiple_of(8));
        assert_eq!(packed[40..44] == [0x28, 0xB5, 0x2F, 0xFD], matches!(c, Compression::Zstd(_)), "{c:?}");
        assert!(matches!(OffloadBinary::parse_all(&packed), Err(Error::Compressed { offset: 0, .. })));
        let inflated = read::inflate(&packed, 0, 1 << 20).unwrap();
        assert_eq!(inflated, plain, "{c:?}");
        // Mixed with version 1 and 2 binaries, before and after.
        let v1 = write_plan_for(LlvmRelease::Llvm22, &sample_images()[..1]).unwrap().to_vec();
        let v2 = write_v2(&sample_images()).unwrap();
        let mixed = [v1.clone(), packed.clone(), v2.clone(), packed.clone()].concat();
        let all = read::inflate_all(&mixed, 1 << 20).unwrap();
        assert_eq!(&*all, &[v1.clone(), plain.clone(), v2.clone(), plain.clone()].concat()[..]);
        let bins = OffloadBinary::parse_all(&all).unwrap();
        assert_eq!(bins.len(), 1 + 4 + 4 + 4);
        assert_reads_back(&bins[5..9], 2);
        assert_reads_back(&bins[9..], 3);
        // The limit counts every binary inflated in one call.
        let e = read::inflate_all(&mixed, plain.len() as u64 + 8).unwrap_err();
        let second = (v1.len() + packed.len() + v2.len()) as u64;
        assert_eq!(
            e,
            Error::InflateLimit {
                offset: second,
                inflated_size: 2 * plain.len() as u64,
                limit: plain.len() as u64 + 8
            }
        );
    }
}

fn put(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn lying_compressed_headers_are_refused() {
    let packed = sample_v3(Some(Compression::Zstd(3)));
    let plain_len = sample_v3(None).len() as u64;
    let inflate = |d: &[u8]| read::inflate(d, 0, 1 << 20);
    // Declared larger or smaller than the data inflates to.
    for claim in [plain_len - 8, plain_len - 1, plain_len + 1, plain_len + 4096] {
        let mut d = packed.clone();
        put(&mut d, 32, claim);
        assert!(matches!(inflate(&d), Err(Error::Inflate { .. })), "claim {claim}");
    }
    // A claim above the limit is refused before anything is decompressed.
    let mut d = packed.clone();
    put(&mut d, 32, u64::MAX);
    assert!(matches!(inflate(&d), Err(Error::InflateLimit { inflated_size: u64::MAX, .. })));
    // A claim too small to hold an entry, entries elsewhere than after
    // the header, a size past the data.
    for (at, v) in [(32, 47u64), (16, 32), (16, 48), (8, packed.len() as u64 + 1), (8, 39)] {
        let mut d = packed.clone();
        put(&mut d, at, v);
        assert!(matches!(inflate(&d), Err(Error::Truncated { .. })), "field {at} = {v}: {:?}", inflate(&d));
        assert!(OffloadBinary::parse_all(&d).is_err());
    }
    // A body that is neither zstd nor zlib.
    let mut d = packed.clone();
    d[40..44].copy_from_slice(b"junk");
    assert!(matches!(inflate(&d), Err(Error::Inflate { .. })));
    // An uncompressed binary is not inflated.
    assert!(matches!(inflate(&sample_v3(None)), Err(Error::Inflate { .. })));
    // Every truncation is an error, never a panic.
    for len in 0..packed.len() {
        assert!(read::inflate_all(&packed[..len], 1 << 20).is_err() || len == 0, "{len}");
    }
}

/// A few hundred bytes of zstd that inflate to 1 GiB of zeros: refused by
/// the limit without the memory being taken, and by the size check when
/// the header lies about it.
#[test]
fn a_compression_bomb_stays_bounded() {
    let huge = 1u64 << 30;
    let zeros = vec![0u8; 1 << 20];
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    for _ in 0..huge >> 20 {
        std::io::Write::write_all(&mut enc, &zeros).unwrap();
    }
    let frame = enc.finish().unwrap();
    assert!(frame.len() < 200_000);
    let mut d = vec![0u8; 40];
    d[..4].copy_from_slice(&super::MAGIC);
    d[4] = 3;
    put(&mut d, 8, 40 + frame.len() as u64);
    put(&mut d, 16, 40);
    put(&mut d, 24, 1);
    put(&mut d, 32, 40 + huge);
    d.extend_from_slice(&frame);
    d.resize(d.len().next_multiple_of(8), 0);
    assert!(matches!(read::inflate(&d, 0, 64 << 20), Err(Error::InflateLimit { .. })));
    // Claiming a small size: decompression stops one byte past it.
    put(&mut d, 32, 40 + 4096);
    let e = read::inflate(&d, 0, 64 << 20).unwrap_err();
    assert!(matches!(e, Error::Inflate { ref reason, .. } if reason.contains("4097")), "{e:?}");
}
