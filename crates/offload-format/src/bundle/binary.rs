//! The binary bundle format (`__CLANG_OFFLOAD_BUNDLE__`), used for bc, gch,
//! ast, and for o/a inputs that are not object files.
//!
//! ```text
//! 0    24 bytes  "__CLANG_OFFLOAD_BUNDLE__"
//! 24   u64       number of entries N
//! 32   N times:  u64 payload offset, u64 payload size, u64 ID length, ID bytes
//! ...  payloads, each at its offset (absolute), gaps filled with zeros
//! ```
//! All integers are little-endian.

use super::BundleError;
use crate::bytes::u64_le;
use crate::plan::Plan;
use std::num::NonZeroU64;

/// The magic that starts a binary bundle.
pub const MAGIC: &[u8; 24] = b"__CLANG_OFFLOAD_BUNDLE__";

/// Bytes of the fixed part of one entry record (offset, size, ID length).
const ENTRY_FIXED: u64 = 24;

/// One entry of a binary bundle, borrowing from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinaryEntry<'a> {
    /// The bundle entry ID as stored.
    pub id: &'a [u8],
    /// Absolute offset of the payload in the input.
    pub offset: u64,
    /// The payload, a slice of the input.
    pub payload: &'a [u8],
}

/// Whether `data` starts with the binary bundle magic.
pub fn has_magic(data: &[u8]) -> bool {
    data.starts_with(MAGIC)
}

/// One record of the entry table: an ID and where its payload lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableEntry<'a> {
    /// The bundle entry ID as stored.
    pub id: &'a [u8],
    /// Absolute offset of the payload.
    pub offset: u64,
    /// Payload size in bytes.
    pub size: u64,
}

/// The result of reading the entry table from the start of a bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Table<'a> {
    /// The data does not start with the magic: no bundles.
    NotABundle,
    /// More of the input is needed to finish the table (only when reading
    /// a prefix of a longer input).
    Incomplete,
    /// Every record, in file order.
    Complete(Vec<TableEntry<'a>>),
}

/// Reads the entry table from `prefix`, the first bytes of an input that is
/// `total_len` bytes long (the whole input, or the part of a stream seen so
/// far). Payload ranges are checked against `total_len`.
///
/// Unlike LLVM, which stops reading silently at the first damaged record
/// (and then may crash), a damaged table is an error that says where.
pub fn read_table(prefix: &[u8], total_len: u64) -> Result<Table<'_>, BundleError> {
    let have = prefix.len() as u64;
    if have < MAGIC.len() as u64 {
        return Ok(if have < total_len { Table::Incomplete } else { Table::NotABundle });
    }
    if !has_magic(prefix) {
        return Ok(Table::NotABundle);
    }
    let len = total_len;
    // A field past the end of the prefix: wait for more, or report truncation.
    let missing = |what: &'static str, offset: u64, end: u64| {
        if end <= len && have < len { Ok(Table::Incomplete) } else { Err(BundleError::Truncated { what, offset, len }) }
    };
    let Some(count) = u64_le(prefix, 24) else { return missing("entry count", 24, 32) };
    // Every record takes at least 24 bytes, which bounds a lying count.
    let plausible = (len.saturating_sub(32) / ENTRY_FIXED).min(count);
    let mut entries = Vec::with_capacity(usize::try_from(plausible.min(1 << 16)).unwrap_or(0));
    let mut pos = 32u64;
    for index in 0..count {
        let record = pos;
        let (Some(offset), Some(size), Some(id_len)) =
            (u64_le(prefix, pos), u64_le(prefix, pos + 8), u64_le(prefix, pos + 16))
        else {
            return missing("entry record", record, record + ENTRY_FIXED);
        };
        pos += ENTRY_FIXED;
        let Some(id_end) = pos.checked_add(id_len).filter(|&end| end <= len) else {
            return Err(BundleError::Truncated { what: "entry ID", offset: pos, len });
        };
        let Some(id) = prefix.get(pos as usize..id_end as usize) else {
            return missing("entry ID", pos, id_end);
        };
        pos = id_end;
        if offset == 0 || offset.checked_add(size).is_none_or(|end| end > len) {
            return Err(BundleError::PayloadOutOfRange {
                index,
                id: String::from_utf8_lossy(id).into_owned(),
                offset,
                size,
                len,
            });
        }
        entries.push(TableEntry { id, offset, size });
    }
    Ok(Table::Complete(entries))
}

/// Reads the entries of a whole binary bundle, in file order, with their
/// payloads. Returns `Ok(None)` when `data` does not start with the magic
/// (not a bundle: LLVM treats such input as having no bundles).
///
/// ```
/// use offload_format::bundle::binary;
/// use std::num::NonZeroU64;
///
/// let entries: [(&[u8], &[u8]); 2] =
///     [(b"host-x86_64-unknown-linux-gnu-", b""), (b"hip-amdgcn-amd-amdhsa--gfx906", b"code")];
/// let bundle = binary::write(&entries, NonZeroU64::new(4096).unwrap()).to_vec();
/// let read = binary::read(&bundle)?.expect("starts with the magic");
/// assert_eq!(read[1].id, b"hip-amdgcn-amd-amdhsa--gfx906");
/// assert_eq!((read[1].offset, read[1].payload), (4096, &b"code"[..]));
/// assert!(binary::read(b"not a bundle")?.is_none());
/// assert!(binary::read(&bundle[..40]).is_err());
/// # Ok::<(), offload_format::bundle::BundleError>(())
/// ```
pub fn read(data: &[u8]) -> Result<Option<Vec<BinaryEntry<'_>>>, BundleError> {
    match read_table(data, data.len() as u64)? {
        Table::NotABundle => Ok(None),
        // The whole input was given, so the table cannot be incomplete.
        Table::Incomplete => Err(BundleError::Truncated { what: "entry table", offset: 0, len: data.len() as u64 }),
        Table::Complete(table) => Ok(Some(
            table
                .into_iter()
                .map(|e| BinaryEntry {
                    id: e.id,
                    offset: e.offset,
                    payload: &data[e.offset as usize..(e.offset + e.size) as usize],
                })
                .collect(),
        )),
    }
}

fn align_to(value: u64, align: NonZeroU64) -> u64 {
    value.div_ceil(align.get()).saturating_mul(align.get())
}

/// Lays out a binary bundle: the header, then each payload at the next
/// multiple of `align` (the first one too), zero-filled gaps, no trailing
/// padding. Entries are written in the given order.
pub fn write<'a>(entries: &[(&[u8], &'a [u8])], align: NonZeroU64) -> Plan<'a> {
    let header_len = 32 + entries.iter().map(|(id, _)| ENTRY_FIXED + id.len() as u64).sum::<u64>();
    let mut header = Vec::with_capacity(header_len as usize);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let mut cur = header_len;
    let mut offsets = Vec::with_capacity(entries.len());
    for (id, payload) in entries {
        let off = align_to(cur, align);
        offsets.push(off);
        cur = off + payload.len() as u64;
        header.extend_from_slice(&off.to_le_bytes());
        header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        header.extend_from_slice(&(id.len() as u64).to_le_bytes());
        header.extend_from_slice(id);
    }
    let mut plan = Plan::new();
    plan.own(header);
    let mut cur = header_len;
    for ((_, payload), off) in entries.iter().zip(offsets) {
        plan.zeros(off - cur);
        plan.borrow(payload);
        cur = off + payload.len() as u64;
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u64) -> NonZeroU64 {
        NonZeroU64::new(n).unwrap()
    }

    /// docs/formats/bundle.md §3.1: the 212-byte bundle LLVM 19 writes for three entries.
    #[test]
    fn layout_matches_the_spec_example() {
        let entries: [(&[u8], &[u8]); 3] = [
            (b"host-x86_64-unknown-linux-gnu-", b"HOSTDATA"),
            (b"hip-amdgcn-amd-amdhsa--gfx906", b"DEV1"),
            (b"hip-amdgcn-amd-amdhsa--gfx908", b"DEVICE22"),
        ];
        let bytes = write(&entries, nz(1)).to_vec();
        assert_eq!(bytes.len(), 0xd4);
        assert_eq!(&bytes[0xc0..0xc8], b"HOSTDATA");
        assert_eq!(&bytes[0xc8..0xcc], b"DEV1");
        assert_eq!(u64_le(&bytes, 0x20), Some(0xc0));
        let back = read(&bytes).unwrap().unwrap();
        assert_eq!(back.len(), 3);
        for (e, (id, payload)) in back.iter().zip(entries) {
            assert_eq!(e.id, id);
            assert_eq!(e.payload, payload);
        }
    }

    #[test]
    fn alignment_pads_with_zeros() {
        let entries: [(&[u8], &[u8]); 2] =
            [(b"hip-amdgcn-amd-amdhsa--gfx906", b"A"), (b"hip-amdgcn-amd-amdhsa--gfx908", b"B")];
        let bytes = write(&entries, nz(16)).to_vec();
        // Header ends at 0x8a; payloads go to 0x90 and 0xa0.
        assert_eq!(u64_le(&bytes, 32), Some(0x90));
        assert_eq!(bytes[0x90], b'A');
        assert_eq!(bytes[0xa0], b'B');
        assert!(bytes[0x8a..0x90].iter().all(|&b| b == 0));
        assert_eq!(bytes.len(), 0xa1);
    }

    #[test]
    fn a_table_is_read_from_any_prefix_that_holds_it() {
        let entries: [(&[u8], &[u8]); 2] = [(b"host-x86_64-unknown-linux-gnu-", b"HOSTDATA"), (b"hip-x", b"DEV")];
        let bytes = write(&entries, nz(8)).to_vec();
        let total = bytes.len() as u64;
        let header_end = 32 + 24 * 2 + 30 + 5;
        for cut in 0..=bytes.len() {
            match read_table(&bytes[..cut], total).unwrap() {
                Table::Incomplete => assert!(cut < header_end, "incomplete at {cut}"),
                Table::Complete(t) => {
                    assert!(cut >= header_end);
                    assert_eq!(t[1], TableEntry { id: b"hip-x", offset: 128, size: 3 });
                }
                Table::NotABundle => panic!("not a bundle at {cut}"),
            }
        }
        assert_eq!(read_table(b"__CLANG", 100).unwrap(), Table::Incomplete);
        assert_eq!(read_table(b"__CLANX__________________", 100).unwrap(), Table::NotABundle);
    }

    #[test]
    fn non_bundles_have_no_entries() {
        assert_eq!(read(b"hello").unwrap(), None);
        assert_eq!(read(b"").unwrap(), None);
    }

    #[test]
    fn every_truncation_is_an_error_or_a_shorter_valid_bundle() {
        let entries: [(&[u8], &[u8]); 2] = [(b"host-x86_64-unknown-linux-gnu-", b"HOST"), (b"openmp-x-y-z-", b"")];
        let bytes = write(&entries, nz(8)).to_vec();
        for cut in 0..bytes.len() {
            match read(&bytes[..cut]) {
                Ok(None) => assert!(cut < 24),
                Ok(Some(_)) => panic!("truncation at {cut} read as valid"),
                Err(_) => assert!(cut >= 24),
            }
        }
    }

    #[test]
    fn lying_count_and_offsets_are_errors() {
        let mut bytes = write(&[(b"a".as_slice(), b"xyz".as_slice())], nz(1)).to_vec();
        bytes[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(matches!(read(&bytes), Err(BundleError::Truncated { .. })));
        let mut bytes = write(&[(b"a".as_slice(), b"xyz".as_slice())], nz(1)).to_vec();
        bytes[32..40].copy_from_slice(&(1u64 << 63).to_le_bytes());
        assert!(matches!(read(&bytes), Err(BundleError::PayloadOutOfRange { .. })));
        let mut bytes = write(&[(b"a".as_slice(), b"xyz".as_slice())], nz(1)).to_vec();
        bytes[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(read(&bytes), Err(BundleError::PayloadOutOfRange { .. })));
        let mut bytes = write(&[(b"a".as_slice(), b"xyz".as_slice())], nz(1)).to_vec();
        bytes[48..56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(read(&bytes), Err(BundleError::Truncated { .. })));
    }
}
