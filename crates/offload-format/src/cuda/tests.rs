//! Unit tests on hand-built fat binaries; real ones from nvcc are checked
//! in `crates/offload-cli/tests/cuda_*.rs`.

use super::*;

/// An entry header with a 64-byte header (no extension) and `payload`.
fn entry(kind: u16, arch: u32, flag_bits: u64, payload: &[u8], compressed: u32, uncompressed: u64) -> Vec<u8> {
    let mut e = Vec::new();
    e.extend_from_slice(&kind.to_le_bytes());
    e.extend_from_slice(&0x0101u16.to_le_bytes());
    e.extend_from_slice(&64u32.to_le_bytes());
    let padded = payload.len().div_ceil(8) * 8;
    e.extend_from_slice(&(padded as u64).to_le_bytes());
    e.extend_from_slice(&compressed.to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes());
    e.extend_from_slice(&[8, 0, 1, 0]);
    e.extend_from_slice(&arch.to_le_bytes());
    e.extend_from_slice(&[0; 8]);
    e.extend_from_slice(&flag_bits.to_le_bytes());
    e.extend_from_slice(&0u64.to_le_bytes());
    e.extend_from_slice(&uncompressed.to_le_bytes());
    e.extend_from_slice(payload);
    e.resize(64 + padded, 0);
    e
}

fn fatbin(entries: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = entries.concat();
    let mut f = Vec::new();
    f.extend_from_slice(&FATBIN_MAGIC_BYTES);
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&16u16.to_le_bytes());
    f.extend_from_slice(&(body.len() as u64).to_le_bytes());
    f.extend_from_slice(&body);
    f
}

#[test]
fn walks_entries_and_cuts_ptx_at_its_nul() {
    let ptx = b".version 9.5\n.target sm_90a\n\0";
    let data = fatbin(&[entry(1, 90, 0x11 | flags::ARCH_A, ptx, 0, 0)]);
    let all: Vec<_> = fat_binaries(&data).collect::<Result<_, _>>().unwrap();
    assert_eq!(all.len(), 1);
    let entries: Vec<_> = all[0].1.entries().collect::<Result<_, _>>().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].header.kind(), EntryKind::Ptx);
    assert_eq!(entries[0].header.arch().to_string(), "sm_90a");
    assert_eq!(entries[0].stored.len(), 32);
    assert_eq!(&*code_object_bytes(&entries[0]).unwrap(), &ptx[..ptx.len() - 1]);
}

#[test]
fn back_to_back_fat_binaries_with_padding() {
    let one = fatbin(&[entry(1, 80, 0x11, b"a\0", 0, 0)]);
    let mut data = one.clone();
    data.extend_from_slice(&[0; 8]);
    data.extend_from_slice(&one);
    let offsets: Vec<usize> = fat_binaries(&data).map(|r| r.unwrap().0).collect();
    assert_eq!(offsets, vec![0, one.len() + 8]);
}

#[test]
fn decodes_lz4_and_zstd_entries() {
    let text = b".version 8.5\n.target sm_80\n// padding padding padding padding padding\n\0".to_vec();
    let lz4 = lz4_literals(&text);
    let zst = zstd::bulk::compress(&text, 3).unwrap();
    for (bits, stream) in [(flags::LZ4, lz4), (flags::ZSTD, zst)] {
        let data = fatbin(&[entry(1, 80, 0x11 | bits, &stream, stream.len() as u32, text.len() as u64)]);
        let (_, fb) = fat_binaries(&data).next().unwrap().unwrap();
        let e = fb.entries().next().unwrap().unwrap();
        assert_eq!(&*code_object_bytes(&e).unwrap(), &text[..text.len() - 1], "flags {bits:#x}");
        // A lying uncompressed size is an error, not a resize.
        let data = fatbin(&[entry(1, 80, 0x11 | bits, &stream, stream.len() as u32, text.len() as u64 + 1)]);
        let (_, fb) = fat_binaries(&data).next().unwrap().unwrap();
        let e = fb.entries().next().unwrap().unwrap();
        assert!(code_object_bytes(&e).is_err(), "flags {bits:#x}");
    }
}

/// A raw LZ4 block holding `data` as one literal run (the encoder is not
/// linked; the decoder is what is tested).
fn lz4_literals(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    if data.len() < 15 {
        out.push((data.len() as u8) << 4);
    } else {
        out.push(0xf0);
        let mut rest = data.len() - 15;
        while rest >= 255 {
            out.push(255);
            rest -= 255;
        }
        out.push(rest as u8);
    }
    out.extend_from_slice(data);
    out
}

#[test]
fn lz4_matches_overlap_and_long_literal_runs_extend() {
    // "abc", then a 9-byte match at distance 3, then a literal "x".
    let block = [0x35, b'a', b'b', b'c', 3, 0, 0x10, b'x'];
    assert_eq!(decompress(Codec::Lz4, &block, 13).unwrap(), b"abcabcabcabcx");
    let long = vec![b'q'; 6001];
    assert_eq!(decompress(Codec::Lz4, &lz4_literals(&long), 6001).unwrap(), long);
    // An offset reaching before the output is an error.
    assert!(decompress(Codec::Lz4, &[0x10, b'a', 9, 0, 0x10, b'x'], 6).is_err());
}

#[test]
fn lz4_bomb_claims_are_refused_before_allocating() {
    let err = decompress(Codec::Lz4, &[0x10, b'a'], u64::MAX).unwrap_err();
    assert!(matches!(err, CudaError::Decompress { .. }), "{err}");
}

#[test]
fn damaged_headers_are_typed_errors() {
    let good = fatbin(&[entry(2, 80, 0x11, &[0; 16], 0, 0)]);
    // Fat size past the end.
    let mut bad = good.clone();
    bad[8] = 0xff;
    assert!(matches!(fat_binaries(&bad).next(), Some(Err(CudaError::FatSizeBeyondEnd { .. }))));
    // Entry payload size past the fat binary.
    let mut bad = good.clone();
    bad[16 + 8] = 0xff;
    let (_, fb) = fat_binaries(&bad).next().unwrap().unwrap();
    assert!(matches!(fb.entries().next(), Some(Err(CudaError::PayloadBeyondEnd { at: 16, .. }))));
    // Entry header size below 64.
    let mut bad = good.clone();
    bad[16 + 4] = 8;
    let (_, fb) = fat_binaries(&bad).next().unwrap().unwrap();
    assert!(matches!(fb.entries().next(), Some(Err(CudaError::BadEntryHeaderSize { .. }))));
    // A header size past the end with no entries (found by fuzzing).
    let mut bad = fatbin(&[]);
    bad[6..8].copy_from_slice(&0x4000u16.to_le_bytes());
    assert!(matches!(fat_binaries(&bad).next(), Some(Err(CudaError::ShortHeader { needed: 0x4000, .. }))));
    // Garbage after a fat binary.
    let mut bad = good;
    bad.extend_from_slice(b"garbage!");
    let results: Vec<_> = fat_binaries(&bad).collect();
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(CudaError::BadMagic { .. })));
}

#[test]
fn every_truncation_of_a_fat_binary_is_handled() {
    let data = fatbin(&[entry(1, 80, 0x11, b"x\0", 0, 0), entry(2, 90, 0x11, &[7; 40], 0, 0)]);
    for n in 0..=data.len() {
        let mut entries = 0;
        for (_, fb) in fat_binaries(&data[..n]).flatten() {
            for e in fb.entries().flatten() {
                entries += 1;
                let _ = code_object_bytes(&e);
            }
        }
        // Only the whole fat binary has entries: a cut one is refused.
        assert_eq!(entries, if n == data.len() { 2 } else { 0 }, "cut at {n}");
    }
}

#[test]
fn arch_names_parse_and_print() {
    for (text, number, suffix) in [
        ("sm_90a", 90, Suffix::A),
        ("compute_100f", 100, Suffix::F),
        ("8.6", 86, Suffix::None),
        ("121", 121, Suffix::None),
    ] {
        assert_eq!(Arch::parse(text), Some(Arch { number, suffix }), "{text}");
    }
    assert_eq!(Arch::parse("sm_"), None);
    assert_eq!(Arch::parse("gfx90a"), None);
    assert_eq!(Arch::from_header(100, flags::ARCH_A | flags::ARCH_F).to_string(), "sm_100a");
}
