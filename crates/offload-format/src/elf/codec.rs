//! Reading and writing ELF fields for one class (32/64-bit) and byte order.
//! Readers return `None` when a field would run past the input.

use super::{ElfError, SectionHeader, invalid, truncated};

/// The ELF class and byte order of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codec {
    /// ELFCLASS64 (else 32-bit).
    pub is64: bool,
    /// Big-endian (else little-endian).
    pub big: bool,
}

impl Codec {
    /// Reads EI_CLASS and EI_DATA.
    pub fn from_ident(data: &[u8]) -> Result<Codec, ElfError> {
        let is64 = match data.get(4) {
            Some(1) => false,
            Some(2) => true,
            Some(c) => return Err(invalid(4, "EI_CLASS", format!("unknown ELF class {c}"))),
            None => return Err(truncated(data, 4, 1, "ELF identification")),
        };
        let big = match data.get(5) {
            Some(1) => false,
            Some(2) => true,
            Some(d) => return Err(invalid(5, "EI_DATA", format!("unknown ELF data encoding {d}"))),
            None => return Err(truncated(data, 5, 1, "ELF identification")),
        };
        Ok(Codec { is64, big })
    }

    /// Bytes of an address or offset: 8 or 4.
    pub fn word_size(&self) -> usize {
        if self.is64 { 8 } else { 4 }
    }
    /// Bytes of the ELF header.
    pub fn ehdr_size(&self) -> usize {
        if self.is64 { 64 } else { 52 }
    }
    /// Bytes of one section header.
    pub fn shdr_size(&self) -> usize {
        if self.is64 { 64 } else { 40 }
    }
    /// Bytes of one symbol table entry.
    pub fn sym_size(&self) -> usize {
        if self.is64 { 24 } else { 16 }
    }
    /// Size of one SHT_REL (`rela == false`) or SHT_RELA entry.
    pub fn rel_size(&self, rela: bool) -> usize {
        self.word_size() * if rela { 3 } else { 2 }
    }

    /// The u16 at `at`; `None` past the end of `data`.
    pub fn u16(&self, data: &[u8], at: usize) -> Option<u16> {
        crate::bytes::u16_endian(data, at, self.big)
    }
    /// The u32 at `at`; `None` past the end of `data`.
    pub fn u32(&self, data: &[u8], at: usize) -> Option<u32> {
        crate::bytes::u32_endian(data, at, self.big)
    }
    /// The u64 at `at`; `None` past the end of `data`.
    pub fn u64(&self, data: &[u8], at: usize) -> Option<u64> {
        crate::bytes::u64_endian(data, at, self.big)
    }
    /// An address-sized field (Elf32_Addr/Off/Word or Elf64_Addr/Off/Xword).
    pub fn word(&self, data: &[u8], at: usize) -> Option<u64> {
        if self.is64 { self.u64(data, at) } else { self.u32(data, at).map(u64::from) }
    }

    /// Appends `v` in the file's byte order.
    pub fn put_u16(&self, out: &mut Vec<u8>, v: u16) {
        out.extend_from_slice(&if self.big { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    /// Appends `v` in the file's byte order.
    pub fn put_u32(&self, out: &mut Vec<u8>, v: u32) {
        out.extend_from_slice(&if self.big { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    /// Appends `v` in the file's byte order.
    pub fn put_u64(&self, out: &mut Vec<u8>, v: u64) {
        out.extend_from_slice(&if self.big { v.to_be_bytes() } else { v.to_le_bytes() });
    }
    /// Writes an address-sized field; 32-bit files keep the low 32 bits,
    /// which is where every value read from a 32-bit file came from.
    pub fn put_word(&self, out: &mut Vec<u8>, v: u64) {
        if self.is64 { self.put_u64(out, v) } else { self.put_u32(out, v as u32) }
    }

    /// Reads one section header at byte offset `at` (`None` when it does
    /// not lie inside `data`, also for offsets near `usize::MAX`).
    pub fn read_shdr(&self, data: &[u8], at: usize) -> Option<SectionHeader> {
        let w = self.word_size();
        if at.checked_add(self.shdr_size())? > data.len() {
            return None;
        }
        let mut p = at + 8;
        let mut word = || {
            let v = self.word(data, p);
            p += w;
            v
        };
        let (flags, addr, offset, size) = (word()?, word()?, word()?, word()?);
        let rest = at + 8 + 4 * w;
        Some(SectionHeader {
            name: self.u32(data, at)?,
            sh_type: self.u32(data, at + 4)?,
            flags,
            addr,
            offset,
            size,
            link: self.u32(data, rest)?,
            info: self.u32(data, rest + 4)?,
            align: self.word(data, rest + 8)?,
            entsize: self.word(data, rest + 8 + w)?,
        })
    }

    /// Appends `sh` as a section header of this class.
    pub fn put_shdr(&self, out: &mut Vec<u8>, sh: &SectionHeader) {
        self.put_u32(out, sh.name);
        self.put_u32(out, sh.sh_type);
        self.put_word(out, sh.flags);
        self.put_word(out, sh.addr);
        self.put_word(out, sh.offset);
        self.put_word(out, sh.size);
        self.put_u32(out, sh.link);
        self.put_u32(out, sh.info);
        self.put_word(out, sh.align);
        self.put_word(out, sh.entsize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_headers_round_trip_in_every_class_and_order() {
        let sh = SectionHeader {
            name: 7,
            sh_type: 1,
            flags: 0x8000_0000,
            addr: 0x1234,
            offset: 0x40,
            size: 9,
            link: 3,
            info: 4,
            align: 16,
            entsize: 24,
        };
        for is64 in [false, true] {
            for big in [false, true] {
                let c = Codec { is64, big };
                let mut out = vec![0xaa];
                c.put_shdr(&mut out, &sh);
                assert_eq!(out.len(), 1 + c.shdr_size());
                assert_eq!(c.read_shdr(&out, 1), Some(sh));
                assert_eq!(c.read_shdr(&out, 2), None);
                // Found by the hostile corpus: an offset near usize::MAX
                // overflowed instead of reading nothing.
                assert_eq!(c.read_shdr(&out, usize::MAX - 3), None);
            }
        }
    }
}
