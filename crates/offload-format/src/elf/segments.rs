//! The program header table of a linked ELF64 little-endian file, read
//! and written whole: what the file map asks (does a PT_LOAD map this
//! section?), what prune's cut splits, shifts and checks, and what replace
//! extends with a new segment. One reader for all three; [`entry`] reads
//! one header of any class and byte order for the readers that walk a
//! table themselves (a cubin's extent, the OpenMP notes writer).

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

use super::Codec;
use crate::bytes::{ReadError, require, u16_le, u64_le};

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
    // `require` has checked each field's bytes, so the zeros are never used.
    let phoff = u64_le(header(32, 8, "e_phoff")?, 0).unwrap_or(0);
    let entsize = u16_le(header(54, 2, "e_phentsize")?, 0).unwrap_or(0);
    let count = u16_le(header(56, 2, "e_phnum")?, 0).unwrap_or(0);
    if count == 0xffff {
        return Err(SegmentsError::Extended);
    }
    if count > 0 && u64::from(entsize) != PHDR_SIZE {
        return Err(SegmentsError::EntrySize(entsize));
    }
    usize::try_from(phoff).map_err(|_| SegmentsError::Offset)?;
    let table = require(data, phoff, u64::from(count) * PHDR_SIZE, "program header table")
        .map_err(|source| SegmentsError::Table { count, phoff, source })?;
    // Each entry is PHDR_SIZE bytes, so `entry` reads every one.
    let segments = table.chunks_exact(PHDR_SIZE as usize).filter_map(|e| entry(ELF64_LE, e, 0)).collect();
    Ok((phoff, segments))
}

/// The class and byte order [`read`] and [`write`] handle.
const ELF64_LE: Codec = Codec { is64: true, big: false };

/// The program header at `at` in a file of `codec`'s class and byte order
/// (the field order differs between ELF32 and ELF64); `None` when it does
/// not lie wholly inside `data`.
pub fn entry(codec: Codec, data: &[u8], at: usize) -> Option<Segment> {
    let c = &codec;
    if codec.is64 {
        crate::bytes::slice(data, at, PHDR_SIZE)?;
        Some(Segment {
            kind: c.u32(data, at)?,
            flags: c.u32(data, at + 4)?,
            offset: c.u64(data, at + 8)?,
            vaddr: c.u64(data, at + 16)?,
            paddr: c.u64(data, at + 24)?,
            filesz: c.u64(data, at + 32)?,
            memsz: c.u64(data, at + 40)?,
            align: c.u64(data, at + 48)?,
        })
    } else {
        crate::bytes::slice(data, at, 32usize)?;
        let word = |off: usize| c.u32(data, at + off).map(u64::from);
        Some(Segment {
            kind: c.u32(data, at)?,
            offset: word(4)?,
            vaddr: word(8)?,
            paddr: word(12)?,
            filesz: word(16)?,
            memsz: word(20)?,
            flags: c.u32(data, at + 24)?,
            align: word(28)?,
        })
    }
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

/// Whether an ELF file of type `e_type` with these program headers is a
/// shared library that ld.so maps (`ET_DYN` without `PT_INTERP`), rather
/// than a program the kernel maps. The kernel's rules for a program are the
/// stricter: old kernels compute `AT_PHDR` as the first PT_LOAD's address
/// minus its offset plus `e_phoff`, while ld.so finds a library's table
/// through `PT_PHDR` or the PT_LOAD holding it
/// (docs/formats/host-references.md §4).
pub fn is_shared_library(e_type: u16, segments: &[Segment]) -> bool {
    e_type == super::ET_DYN && !segments.iter().any(|p| p.kind == super::PT_INTERP)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_read_in_either_class_and_byte_order() {
        let want =
            Segment { kind: 1, flags: 5, offset: 0x10, vaddr: 0x2010, paddr: 0x3010, filesz: 7, memsz: 9, align: 16 };
        let le64 = write(&[want]);
        assert_eq!(entry(ELF64_LE, &le64, 0), Some(want));
        assert_eq!(read_table(&le64), vec![want]);
        assert_eq!(entry(ELF64_LE, &le64[..55], 0), None);
        assert_eq!(entry(ELF64_LE, &le64, usize::MAX), None);
        let mut be64 = Vec::new();
        be64.extend_from_slice(&want.kind.to_be_bytes());
        be64.extend_from_slice(&want.flags.to_be_bytes());
        for v in [want.offset, want.vaddr, want.paddr, want.filesz, want.memsz, want.align] {
            be64.extend_from_slice(&v.to_be_bytes());
        }
        assert_eq!(entry(Codec { is64: true, big: true }, &be64, 0), Some(want));
        // ELF32: type, offset, vaddr, paddr, filesz, memsz, flags, align.
        for big in [false, true] {
            let fields = [1u32, 0x10, 0x2010, 0x3010, 7, 9, 5, 16];
            let mut e32 = vec![0xeeu8; 3];
            for f in fields {
                e32.extend_from_slice(&if big { f.to_be_bytes() } else { f.to_le_bytes() });
            }
            assert_eq!(entry(Codec { is64: false, big }, &e32, 3), Some(want));
            assert_eq!(entry(Codec { is64: false, big }, &e32[..34], 3), None);
        }
    }

    fn read_table(table: &[u8]) -> Vec<Segment> {
        // A minimal ELF64 header pointing at `table`, placed after it.
        let mut file = vec![0u8; 64];
        file[32..40].copy_from_slice(&64u64.to_le_bytes());
        file[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_le_bytes());
        file[56..58].copy_from_slice(&((table.len() as u64 / PHDR_SIZE) as u16).to_le_bytes());
        file.extend_from_slice(table);
        read(&file).unwrap().1
    }
}
