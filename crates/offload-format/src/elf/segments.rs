//! The program header table of a linked ELF64 little-endian file, read
//! and written whole: what the file map asks (does a PT_LOAD map this
//! section?), what prune's cut splits, shifts and checks, and what replace
//! extends with a new segment. One reader for all three.

pub use super::{PT_DYNAMIC, PT_LOAD, PT_PHDR};

/// Bytes of one ELF64 program header.
pub const PHDR_SIZE: u64 = 56;

/// One program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_type`.
    pub kind: u32,
    /// `p_flags`.
    pub flags: u32,
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_paddr`.
    pub paddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_memsz`.
    pub memsz: u64,
    /// `p_align`.
    pub align: u64,
}

use crate::bytes::{ReadError, array as le, require};

/// Why the program header table cannot be read. The messages are the ones
/// the rewriters have always printed; truncation carries the failed read
/// as its source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentsError {
    /// The ELF header fields locating the table are cut off.
    #[error("truncated ELF header")]
    Header(#[source] ReadError),
    /// `e_phnum` is `PN_XNUM`: the real count is elsewhere.
    #[error("the program header count is extended (PN_XNUM)")]
    Extended,
    /// `e_phentsize` is not the ELF64 entry size (the value found).
    #[error("e_phentsize is {0}, not {PHDR_SIZE}")]
    EntrySize(u16),
    /// `e_phoff` does not fit in an address of this machine.
    #[error("e_phoff is past the end of the file")]
    Offset,
    /// The table runs past the end of the file.
    #[error("the program header table ({count} entries at {phoff:#x}) runs past the end")]
    Table {
        /// `e_phnum`.
        count: u16,
        /// `e_phoff`.
        phoff: u64,
        /// The failed read.
        #[source]
        source: ReadError,
    },
}

/// `e_phoff`, `e_phnum` and the table, or why not.
pub fn read(data: &[u8]) -> Result<(u64, Vec<Segment>), SegmentsError> {
    let header = |at: u64, len: u64, what| require(data, at, len, what).map_err(SegmentsError::Header);
    let phoff = le::<8>(header(32, 8, "e_phoff")?, 0).map_or(0, u64::from_le_bytes);
    let entsize = le::<2>(header(54, 2, "e_phentsize")?, 0).map_or(0, u16::from_le_bytes);
    let count = le::<2>(header(56, 2, "e_phnum")?, 0).map_or(0, u16::from_le_bytes);
    if count == 0xffff {
        return Err(SegmentsError::Extended);
    }
    if count > 0 && u64::from(entsize) != PHDR_SIZE {
        return Err(SegmentsError::EntrySize(entsize));
    }
    usize::try_from(phoff).map_err(|_| SegmentsError::Offset)?;
    let table = require(data, phoff, u64::from(count) * PHDR_SIZE, "program header table")
        .map_err(|source| SegmentsError::Table { count, phoff, source })?;
    let segments = table
        .chunks_exact(PHDR_SIZE as usize)
        .map(|e| {
            let u32_at = |at| le::<4>(e, at).map_or(0, u32::from_le_bytes);
            let u64_at = |at| le::<8>(e, at).map_or(0, u64::from_le_bytes);
            Segment {
                kind: u32_at(0),
                flags: u32_at(4),
                offset: u64_at(8),
                vaddr: u64_at(16),
                paddr: u64_at(24),
                filesz: u64_at(32),
                memsz: u64_at(40),
                align: u64_at(48),
            }
        })
        .collect();
    Ok((phoff, segments))
}

/// The table as bytes.
pub fn write(segments: &[Segment]) -> Vec<u8> {
    let mut out = Vec::with_capacity(segments.len() * PHDR_SIZE as usize);
    for s in segments {
        out.extend_from_slice(&s.kind.to_le_bytes());
        out.extend_from_slice(&s.flags.to_le_bytes());
        for v in [s.offset, s.vaddr, s.paddr, s.filesz, s.memsz, s.align] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// The file offset a PT_LOAD maps address `addr` from (with `len` bytes
/// after it inside the same segment's file bytes).
pub fn file_offset(segments: &[Segment], addr: u64, len: u64) -> Option<u64> {
    segments.iter().filter(|s| s.kind == PT_LOAD).find_map(|s| {
        let rel = addr.checked_sub(s.vaddr)?;
        (rel.checked_add(len)? <= s.filesz).then(|| s.offset.checked_add(rel)).flatten()
    })
}

/// What is wrong with the PT_LOADs of a table: not sorted by address, not
/// congruent (`p_offset ≡ p_vaddr` modulo `p_align`), overlapping in
/// memory or in the file, more file bytes than memory, past `file_len`.
pub fn check_loads(segments: &[Segment], file_len: u64) -> Result<(), String> {
    let loads: Vec<&Segment> = segments.iter().filter(|s| s.kind == PT_LOAD).collect();
    for (i, s) in loads.iter().enumerate() {
        if s.align > 1 && (!s.align.is_power_of_two() || s.offset % s.align != s.vaddr % s.align) {
            return Err(format!("PT_LOAD {i} is not congruent (offset {:#x}, address {:#x})", s.offset, s.vaddr));
        }
        if s.filesz > s.memsz || s.offset.checked_add(s.filesz).is_none_or(|e| e > file_len) {
            return Err(format!("PT_LOAD {i} has {} file bytes at {:#x} (file: {file_len})", s.filesz, s.offset));
        }
    }
    for (i, pair) in loads.windows(2).enumerate() {
        let (a, b) = (pair[0], pair[1]);
        if a.vaddr.saturating_add(a.memsz) > b.vaddr {
            return Err(format!("PT_LOAD {i} and {} are not sorted or overlap in memory", i + 1));
        }
        if a.filesz > 0 && b.filesz > 0 && a.offset.saturating_add(a.filesz) > b.offset {
            return Err(format!("PT_LOAD {i} and {} overlap in the file", i + 1));
        }
    }
    Ok(())
}

/// Whether some PT_LOAD maps `[addr, addr + size)` from the file bytes
/// `[offset, offset + size)`.
pub fn maps(data: &[u8], addr: u64, offset: u64, size: u64) -> bool {
    read(data).is_ok_and(|(_, segments)| {
        segments.iter().filter(|s| s.kind == PT_LOAD).any(|s| {
            addr.checked_sub(s.vaddr).is_some_and(|rel| {
                rel.checked_add(size).is_some_and(|end| end <= s.filesz) && s.offset.checked_add(rel) == Some(offset)
            })
        })
    })
}
