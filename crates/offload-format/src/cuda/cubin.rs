//! The few facts about a cubin (an ELF64 with `e_machine` EM_CUDA) that the
//! fat binary reader needs: where it ends and which SM it is for (docs/formats/cuda-fatbin.md §4,
//! "The cubin itself").

use super::EM_CUDA;
use crate::bytes::{u16_le, u32_le, u64_le};

/// What a cubin's ELF header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cubin {
    /// `e_type`: 1 relocatable (rdc), 2 executable.
    pub elf_type: u16,
    /// `EI_OSABI` (the CUDA ABI number).
    pub osabi: u8,
    /// `EI_ABIVERSION`.
    pub abi_version: u8,
    /// `e_flags`: the SM number and ABI bits.
    pub elf_flags: u32,
}

impl Cubin {
    /// Reads the ELF header of a little-endian ELF64 cubin.
    pub fn parse(data: &[u8]) -> Option<Cubin> {
        if !is_cubin(data) {
            return None;
        }
        Some(Cubin {
            elf_type: u16_le(data, 16)?,
            osabi: *data.get(7)?,
            abi_version: *data.get(8)?,
            elf_flags: u32_le(data, 48)?,
        })
    }

    /// The SM number in `e_flags`: bits 8–15 in the ABI of CUDA 13
    /// (`EI_OSABI` 0x41), bits 0–7 in the older one (0x33).
    pub fn sm(&self) -> u32 {
        if self.osabi == 0x41 { (self.elf_flags >> 8) & 0xff } else { self.elf_flags & 0xff }
    }
}

/// Whether `data` starts like a 64-bit little-endian cubin.
pub fn is_cubin(data: &[u8]) -> bool {
    data.starts_with(b"\x7fELF\x02\x01") && u16_le(data, 18) == Some(EM_CUDA)
}

/// The ELF's own extent: the furthest end of its section header table,
/// program header table, file-backed sections and segments. This is the
/// size `cuobjdump -xelf` writes (the stored payload has up to 7 bytes of
/// padding after it). Reads only headers. `None` when the tables are
/// damaged or reach past `data`.
pub fn cubin_extent(data: &[u8]) -> Option<u64> {
    if !data.starts_with(b"\x7fELF\x02\x01") {
        return None;
    }
    let len = data.len() as u64;
    let phoff = u64_le(data, 32)?;
    let shoff = u64_le(data, 40)?;
    let phentsize = u64::from(u16_le(data, 54)?);
    let phnum = u64::from(u16_le(data, 56)?);
    let shentsize = u64::from(u16_le(data, 58)?);
    let mut shnum = u64::from(u16_le(data, 60)?);
    // Entry sizes below the ELF64 minimum would let a huge count pass the
    // bounds check below (and the loops run that long).
    if (phoff != 0 && phentsize < 56) || (shoff != 0 && shentsize < 64) {
        return None;
    }
    let mut end = 64u64;
    if shoff != 0 {
        if shnum == 0 {
            // More than 0xff00 sections: the count is in section 0's size.
            shnum = u64_le(data, usize::try_from(shoff.checked_add(32)?).ok()?)?;
        }
        let table = shnum.checked_mul(shentsize).and_then(|n| n.checked_add(shoff)).filter(|&e| e <= len)?;
        end = end.max(table);
        for i in 0..shnum {
            let at = usize::try_from(shoff + i * shentsize).ok()?;
            use crate::elf::SHT_NOBITS;
            if u32_le(data, at + 4)? == SHT_NOBITS {
                continue;
            }
            let section_end = u64_le(data, at + 24)?.checked_add(u64_le(data, at + 32)?)?;
            end = end.max(section_end);
        }
    }
    if phoff != 0 {
        let table = phnum.checked_mul(phentsize).and_then(|n| n.checked_add(phoff)).filter(|&e| e <= len)?;
        end = end.max(table);
        for i in 0..phnum {
            let at = usize::try_from(phoff + i * phentsize).ok()?;
            let segment = crate::elf::segments::entry(crate::elf::Codec { is64: true, big: false }, data, at)?;
            let segment_end = segment.offset.checked_add(segment.filesz)?;
            end = end.max(segment_end);
        }
    }
    (end <= len).then_some(end)
}
