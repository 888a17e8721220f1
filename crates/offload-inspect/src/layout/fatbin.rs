//! Walking `.hip_fatbin`: fat binaries (binary bundles and compressed
//! bundles) placed back to back, each 4096-aligned by the compiler, with
//! zero padding of any length between them. The walk follows each unit's
//! own size fields and never searches for a magic (a code object may hold
//! one; llvm/llvm-project#206745).

use super::LayoutError;
use offload_format::bundle::{binary, compressed};

/// What kind of fat binary a unit is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitKind {
    /// `__CLANG_OFFLOAD_BUNDLE__`.
    Bundle,
    /// `CCOB`, with its header version (1, 2 or 3).
    Compressed {
        /// The header version.
        version: u16,
    },
    /// An NVIDIA CUDA fat binary (`0xBA55ED50`), pruned by `prune`'s CUDA
    /// side; never found in `.hip_fatbin`.
    Cuda,
    /// A whole fat object (`clang-offload-bundler -type=o`): one
    /// `__CLANG_OFFLOAD_BUNDLE__` section per entry.
    Object,
}

/// One fat binary inside `.hip_fatbin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FatBinary {
    /// Offset of its first byte in the file.
    pub offset: u64,
    /// Offset of its first byte in `.hip_fatbin`.
    pub section_offset: u64,
    /// Bytes it occupies: for a bundle, up to the end of its header or of
    /// its last payload, whichever is later (what the HIP runtime takes as
    /// the bundle's size); for a compressed bundle, its total size.
    pub used: u64,
    /// Bytes up to the next unit or the end of the section: `used` plus the
    /// padding after it. A rewrite must fit in here.
    pub extent: u64,
    /// Bundle or compressed bundle.
    pub kind: UnitKind,
}

/// Index of the first non-zero byte of `data`, or `data.len()`. Padding
/// may be gigabytes long (a pruned library is mostly zeros), so whole
/// 4 KiB blocks are compared with a zero block (a `memcmp`, fast even in
/// unoptimised builds), then the last block byte by byte.
pub fn skip_zeros(data: &[u8]) -> usize {
    const ZEROS: [u8; 4096] = [0; 4096];
    let mut at = 0;
    for block in data.chunks_exact(ZEROS.len()) {
        if block != ZEROS {
            break;
        }
        at += ZEROS.len();
    }
    let rest = data.get(at..).unwrap_or(&[]);
    at + rest.iter().position(|&b| b != 0).unwrap_or(rest.len())
}

/// Bytes a binary bundle occupies at the start of `rest`.
fn bundle_len(rest: &[u8], at: u64) -> Result<u64, LayoutError> {
    let bad = |reason: String| LayoutError::BadFatBinary { offset: at, reason };
    match binary::read_table(rest, rest.len() as u64)
        .map_err(|source| LayoutError::BundleHeader { offset: at, source })?
    {
        binary::Table::Complete(entries) => {
            let header = 32 + entries.iter().map(|e| 24 + e.id.len() as u64).sum::<u64>();
            // read_table checked every offset + size against `rest`.
            Ok(entries.iter().map(|e| e.offset + e.size).fold(header, u64::max))
        }
        binary::Table::NotABundle | binary::Table::Incomplete => Err(bad("truncated bundle header".into())),
    }
}

/// Bytes a compressed bundle occupies at the start of `rest`. Version 1
/// records no size: a zstd frame knows its own length; a zlib stream is
/// taken to run to the end of the section.
fn compressed_len(rest: &[u8], at: u64) -> Result<(u64, u16), LayoutError> {
    let bad = |reason: String| LayoutError::BadFatBinary { offset: at, reason };
    let blob = compressed::read_blob(rest).map_err(|source| LayoutError::CompressedHeader { offset: at, source })?;
    let version = blob.header.version;
    if blob.header.total_size.is_some() {
        return Ok((blob.len as u64, version));
    }
    match blob.header.method {
        compressed::Method::Zstd => {
            let frame = zstd::zstd_safe::find_frame_compressed_size(blob.data)
                .map_err(|code| bad(format!("the zstd frame of a version 1 compressed bundle is damaged ({code})")))?;
            Ok(((blob.header.header_len + frame) as u64, version))
        }
        compressed::Method::Zlib => Ok((rest.len() as u64, version)),
    }
}

/// Walks the contents of `.hip_fatbin`, which starts at file offset
/// `file_offset`. Any byte that is neither padding nor the start of a fat
/// binary is an error: a rewrite must understand every byte it touches.
pub fn walk(section: &[u8], file_offset: u64) -> Result<Vec<FatBinary>, LayoutError> {
    let mut units: Vec<FatBinary> = Vec::new();
    let mut pos = 0usize;
    loop {
        pos += skip_zeros(section.get(pos..).unwrap_or(&[]));
        let Some(rest) = section.get(pos..).filter(|r| !r.is_empty()) else { break };
        let at = file_offset + pos as u64;
        let (used, kind) = if binary::has_magic(rest) {
            (bundle_len(rest, at)?, UnitKind::Bundle)
        } else if rest.starts_with(compressed::MAGIC) {
            let (len, version) = compressed_len(rest, at)?;
            (len, UnitKind::Compressed { version })
        } else {
            let shown: String = rest.iter().take(8).map(|b| format!("{b:02x}")).collect();
            return Err(LayoutError::BadFatBinary {
                offset: at,
                reason: format!("bytes {shown}… are neither padding, a bundle nor a compressed bundle"),
            });
        };
        if let Some(last) = units.last_mut() {
            last.extent = pos as u64 - last.section_offset;
        }
        units.push(FatBinary { offset: at, section_offset: pos as u64, used, extent: rest.len() as u64, kind });
        // `used` is at least the magic's length and at most `rest.len()`.
        pos += used.max(1) as usize;
    }
    Ok(units)
}

/// Walks the contents of a linked file's `.nv_fatbin` (at file offset
/// `file_offset`): NVIDIA fat binaries back to back, zero padding between
/// them, each sized by its own header. Bytes that are neither are an error.
pub fn walk_cuda(section: &[u8], file_offset: u64) -> Result<Vec<FatBinary>, LayoutError> {
    let mut units: Vec<FatBinary> = Vec::new();
    for found in offload_format::cuda::fat_binaries(section) {
        let (pos, fatbin) = found.map_err(|source| LayoutError::CudaFatBinary { offset: file_offset, source })?;
        if let Some(last) = units.last_mut() {
            last.extent = pos as u64 - last.section_offset;
        }
        units.push(FatBinary {
            offset: file_offset + pos as u64,
            section_offset: pos as u64,
            used: fatbin.data.len() as u64,
            extent: (section.len() - pos) as u64,
            kind: UnitKind::Cuda,
        });
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    fn bundle(ids: &[(&[u8], &[u8])]) -> Vec<u8> {
        binary::write(ids, NonZeroU64::new(16).unwrap()).to_vec()
    }

    #[test]
    fn zero_runs_of_any_length_are_padding() {
        let b = bundle(&[(b"host-x86_64-unknown-linux-gnu-", b""), (b"hipv4-amdgcn-amd-amdhsa--gfx906", b"CODE")]);
        let mut section = b.clone();
        section.resize(4096, 0);
        section.extend_from_slice(&b);
        // Far more than any alignment: 3 MiB of zeros, then a third unit.
        section.resize(4096 + (3 << 20), 0);
        let c = compressed::compress(&b, &Default::default()).unwrap().bytes;
        section.extend_from_slice(&c);
        section.resize(section.len() + 100, 0);
        let units = walk(&section, 0x1000).unwrap();
        assert_eq!(units.len(), 3);
        assert_eq!(units[0].offset, 0x1000);
        assert_eq!(units[0].used, b.len() as u64);
        assert_eq!(units[0].extent, 4096);
        assert_eq!(units[1].extent, (3 << 20) as u64);
        assert_eq!(units[2].kind, UnitKind::Compressed { version: 2 });
        assert_eq!(units[2].used, c.len() as u64);
        assert_eq!(units[2].extent, c.len() as u64 + 100);
    }

    #[test]
    fn magic_inside_a_payload_is_not_a_unit() {
        let b = bundle(&[(b"hipv4-amdgcn-amd-amdhsa--gfx906", b"xx__CLANG_OFFLOAD_BUNDLE__CCOB")]);
        let units = walk(&b, 0).unwrap();
        assert_eq!(units.len(), 1);
    }

    #[test]
    fn garbage_and_damage_are_errors_that_say_where() {
        let mut s = vec![0u8; 64];
        s.extend_from_slice(b"garbage!");
        let e = walk(&s, 0x100).unwrap_err().to_string();
        assert!(e.contains("0x140"), "{e}");
        let b = bundle(&[(b"hipv4-amdgcn-amd-amdhsa--gfx906", b"CODE")]);
        for cut in 1..b.len() {
            assert!(walk(&b[..cut], 0).is_err(), "cut at {cut}");
        }
        let c = compressed::compress(&b, &Default::default()).unwrap().bytes;
        for cut in 1..c.len() {
            assert!(walk(&c[..cut], 0).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn skip_zeros_finds_the_first_set_byte_everywhere() {
        for len in [0usize, 1, 4095, 4096, 4097, 9000] {
            for at in 0..=len {
                let mut d = vec![0u8; len];
                if at < len {
                    d[at] = 1;
                }
                assert_eq!(skip_zeros(&d), at);
            }
        }
    }
}
