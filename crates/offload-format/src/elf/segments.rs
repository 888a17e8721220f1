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

use crate::bytes::array as le;

/// `e_phoff`, `e_phnum` and the table, or why not.
pub fn read(data: &[u8]) -> Result<(u64, Vec<Segment>), String> {
    let phoff = le::<8>(data, 32).map(u64::from_le_bytes).ok_or("truncated ELF header")?;
    let entsize = le::<2>(data, 54).map(u16::from_le_bytes).ok_or("truncated ELF header")?;
    let count = le::<2>(data, 56).map(u16::from_le_bytes).ok_or("truncated ELF header")?;
    if count == 0xffff {
        return Err("the program header count is extended (PN_XNUM)".into());
    }
    if count > 0 && u64::from(entsize) != PHDR_SIZE {
        return Err(format!("e_phentsize is {entsize}, not {PHDR_SIZE}"));
    }
    let start = usize::try_from(phoff).map_err(|_| "e_phoff is past the end of the file")?;
    let table = start
        .checked_add(usize::from(count) * PHDR_SIZE as usize)
        .and_then(|end| data.get(start..end))
        .ok_or_else(|| format!("the program header table ({count} entries at {phoff:#x}) runs past the end"))?;
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
