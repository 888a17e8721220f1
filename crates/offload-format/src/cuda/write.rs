//! Writing a fat binary back with a subset of its entries (what `prune`
//! needs) or with one entry's code object swapped (what `replace` needs):
//! the reader's view of the input decides what each entry is, and the
//! writer only copies. Kept entries go out exactly as stored (header,
//! extension, payload with its padding, compressed or not): nothing is
//! re-encoded, so a kept cubin or PTX is byte-identical to the input's.
//! The fat binary header is the input's with its fat-size field (offset 8)
//! set to the bytes of the kept entries.

use super::{CudaError, Entry, EntryKind, FatBinary, flags};
use crate::plan::Plan;

/// The flag bits that say a payload is compressed (docs/formats/cuda-fatbin.md §4, "Flags").
const COMPRESSION_FLAGS: u64 = flags::LZ4 | flags::ZSTD | flags::COMPRESSED_UNKNOWN;

/// The fat binary `fatbin` with only the entries `keep` marks, in file
/// order (an entry past the end of `keep` is kept). Entry bytes are
/// borrowed from the input; only the header is new.
///
/// ```
/// use offload_format::cuda::{FatBinary, write::with_entries};
///
/// // Two entries of 64 header bytes and 8 payload bytes each.
/// let mut entries = Vec::new();
/// for arch in [75u32, 80] {
///     let mut e = vec![0u8; 72];
///     e[0..2].copy_from_slice(&2u16.to_le_bytes()); // cubin
///     e[4..8].copy_from_slice(&64u32.to_le_bytes());
///     e[8..16].copy_from_slice(&8u64.to_le_bytes());
///     e[0x1c..0x20].copy_from_slice(&arch.to_le_bytes());
///     entries.extend_from_slice(&e);
/// }
/// let mut data = 0xBA55_ED50u32.to_le_bytes().to_vec();
/// data.extend_from_slice(&[1, 0, 16, 0]);
/// data.extend_from_slice(&(entries.len() as u64).to_le_bytes());
/// data.extend_from_slice(&entries);
/// let fatbin = FatBinary::parse(&data, 0)?;
/// let pruned = with_entries(&fatbin, &[false, true])?.to_vec();
/// let again = FatBinary::parse(&pruned, 0)?;
/// let archs: Vec<u32> = again.entries().map(|e| e.map(|e| e.header.arch)).collect::<Result<_, _>>()?;
/// assert_eq!(archs, [80]);
/// assert_eq!(pruned.len(), 16 + 72);
/// # Ok::<(), offload_format::cuda::CudaError>(())
/// ```
pub fn with_entries<'a>(fatbin: &FatBinary<'a>, keep: &[bool]) -> Result<Plan<'a>, CudaError> {
    let mut body = Plan::new();
    let mut size = 0u64;
    for (i, entry) in fatbin.entries().enumerate() {
        let entry = entry?;
        if !keep.get(i).copied().unwrap_or(true) {
            continue;
        }
        // The entry walk took both slices from `fatbin.data`, header first.
        let end = entry.payload_offset() + entry.stored.len();
        let bytes = fatbin.data.get(entry.offset..end).unwrap_or(&[]);
        size += bytes.len() as u64;
        body.borrow(bytes);
    }
    Ok(with_body(fatbin, body, size))
}

/// The bytes of an entry holding `code` (a cubin, or PTX text without its
/// NUL) in place of `old`'s code object: `old`'s header and extension
/// (identifier, options) with the payload size set to the new padded size,
/// and `version` (major, minor) as the code version when given. The code
/// is stored uncompressed: the compression flags and sizes are cleared.
/// PTX gets its NUL back; the payload is zero-padded to a multiple of 8,
/// as every producer writes it (docs/formats/cuda-fatbin.md §4, "Payload").
pub fn replacement_entry(old: &Entry, code: &[u8], version: Option<(u16, u16)>) -> Vec<u8> {
    let mut payload = code.to_vec();
    if old.header.kind() == EntryKind::Ptx {
        payload.push(0);
    }
    entry_with(old, payload, None, version)
}

/// [`replacement_entry`], but compressed with `old`'s own codec when it
/// is zstd (level 19; the crate has no LZ4 compressor): the stream holds
/// the code (PTX with its NUL, as the spec's §4 says for compressed PTX),
/// the compressed and decoded sizes are set and the flags kept. `None`
/// for another codec.
pub fn recompressed_entry(old: &Entry, code: &[u8], version: Option<(u16, u16)>) -> Option<Vec<u8>> {
    let mut plain = code.to_vec();
    if old.header.kind() == EntryKind::Ptx {
        plain.push(0);
    }
    let stream = match old.header.codec()? {
        super::Codec::Zstd => zstd::bulk::compress(&plain, 19).ok()?,
        _ => return None,
    };
    let compressed = u32::try_from(stream.len()).ok()?;
    Some(entry_with(old, stream, Some((compressed, plain.len() as u64)), version))
}

/// `old`'s header with `payload` (padded to 8) after it; `compressed`:
/// the (stream size, decoded size) of a compressed payload, else the
/// compression flags are cleared.
fn entry_with(
    old: &Entry,
    mut payload: Vec<u8>,
    compressed: Option<(u32, u64)>,
    version: Option<(u16, u16)>,
) -> Vec<u8> {
    payload.resize(payload.len().div_ceil(8) * 8, 0);
    let mut entry = old.raw_header.to_vec();
    let mut put = |at: usize, bytes: &[u8]| {
        if let Some(field) = entry.get_mut(at..at + bytes.len()) {
            field.copy_from_slice(bytes);
        }
    };
    put(0x08, &(payload.len() as u64).to_le_bytes());
    let (stream, decoded, flags) = match compressed {
        Some((stream, decoded)) => (stream, decoded, old.header.flags),
        None => (0, 0, old.header.flags & !COMPRESSION_FLAGS),
    };
    put(0x10, &stream.to_le_bytes());
    put(0x28, &flags.to_le_bytes());
    put(0x38, &decoded.to_le_bytes());
    if let Some((major, minor)) = version {
        put(0x18, &minor.to_le_bytes());
        put(0x1a, &major.to_le_bytes());
    }
    entry.extend_from_slice(&payload);
    entry
}

/// The fat binary `fatbin` with entry `index` (in file order) replaced by
/// `entry` (header and payload, as [`replacement_entry`] makes it); every
/// other entry is borrowed from the input as stored. The header is the
/// input's with its fat-size field set to the new total.
pub fn with_replaced<'a>(fatbin: &FatBinary<'a>, index: usize, entry: Vec<u8>) -> Result<Plan<'a>, CudaError> {
    let mut body = Plan::new();
    let mut size = 0u64;
    let mut entry = Some(entry);
    for (i, old) in fatbin.entries().enumerate() {
        let old = old?;
        if i == index {
            let new = entry.take().unwrap_or_default();
            size += new.len() as u64;
            body.own(new);
            continue;
        }
        let end = old.payload_offset() + old.stored.len();
        let bytes = fatbin.data.get(old.offset..end).unwrap_or(&[]);
        size += bytes.len() as u64;
        body.borrow(bytes);
    }
    Ok(with_body(fatbin, body, size))
}

/// `fatbin`'s header with its fat-size field set to `size`, then `body`.
fn with_body<'a>(fatbin: &FatBinary<'a>, body: Plan<'a>, size: u64) -> Plan<'a> {
    let header_len = usize::from(fatbin.header_size);
    let mut header = fatbin.data.get(..header_len).unwrap_or(&[]).to_vec();
    if let Some(field) = header.get_mut(8..16) {
        field.copy_from_slice(&size.to_le_bytes());
    }
    let mut out = Plan::new();
    out.own(header);
    out.pieces.extend(body.pieces);
    out
}
