//! A read-only view of a COFF relocatable object (`.obj`) giving the file
//! offsets an in-place rewrite needs: where each section's raw data,
//! relocations and line numbers lie, where each symbol record lies, and
//! the relocations themselves (docs/formats/pe.md §6). It is read by the
//! same parser as [`super::rewrite`], so both accept the same files.

use super::{CoffError, HEADER, Model, SECTION, SYMBOL};
use crate::bytes::{u16_le, u32_le};

/// One section of a COFF object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectSection {
    /// Its 1-based section number (what symbols refer to).
    pub number: usize,
    /// Its full name (long names resolved through the string table).
    pub name: Vec<u8>,
    /// File offset of its 40-byte header.
    pub header_offset: usize,
    /// `PointerToRawData` (0: no raw data in the file).
    pub raw_offset: u32,
    /// `SizeOfRawData`.
    pub raw_size: u32,
    /// `PointerToRelocations`.
    pub relocations_offset: u32,
    /// `PointerToLinenumbers` (deprecated, 0 in what compilers write).
    pub line_numbers_offset: u32,
    /// `NumberOfLinenumbers`.
    pub line_numbers: u16,
    /// `Characteristics`.
    pub characteristics: u32,
    /// Its relocations: (offset in the section, raw symbol index, type).
    pub relocations: Vec<(u32, u32, u16)>,
}

impl ObjectSection {
    /// The file range of its raw data, when it has any in the file.
    pub fn raw_range(&self) -> Option<(u64, u64)> {
        (self.raw_offset != 0 && self.raw_size != 0).then_some((u64::from(self.raw_offset), u64::from(self.raw_size)))
    }
}

/// One symbol record (auxiliary records are not listed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectSymbol {
    /// Its raw index in the symbol table (what relocations refer to).
    pub index: u32,
    /// File offset of its 18-byte record.
    pub offset: usize,
    /// Its name.
    pub name: Vec<u8>,
    /// Its section number: 1-based, or 0 (undefined), -1 (absolute),
    /// -2 (debug).
    pub section: i32,
    /// Its value (for a symbol defined in a section: its offset there).
    pub value: u32,
    /// Its storage class.
    pub class: u8,
    /// How many auxiliary records follow it.
    pub aux: u8,
}

/// A COFF object as laid out in its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectView {
    /// The file header's machine field.
    pub machine: u16,
    /// `PointerToSymbolTable` (0: none).
    pub symbol_table: u32,
    /// Bytes of the symbol table and the string table after it.
    pub symbol_table_len: u64,
    /// The sections in table order.
    pub sections: Vec<ObjectSection>,
    /// The symbols in table order.
    pub symbols: Vec<ObjectSymbol>,
}

/// Whether `data` starts like a COFF object of a machine clang or MSVC
/// write (x86-64, i386, ARM64) with no optional header: not a PE image,
/// not a big object, not an import library member.
pub fn is_object(data: &[u8]) -> bool {
    matches!(u16_le(data, 0), Some(0x8664 | 0x014c | 0xaa64)) && u16_le(data, 16) == Some(0) && data.len() >= HEADER
}

impl ObjectView {
    /// Reads the object's headers and tables; every range is checked
    /// against the file.
    pub fn read(data: &[u8]) -> Result<ObjectView, CoffError> {
        let model = Model::read(data)?;
        let machine = u16_le(data, 0).unwrap_or(0);
        let symbol_table = u32_le(data, 8).unwrap_or(0);
        let nsym = u64::from(u32_le(data, 12).unwrap_or(0));
        let symbol_table_len = if symbol_table == 0 && nsym == 0 {
            0
        } else {
            let end = u64::from(symbol_table) + nsym * SYMBOL as u64;
            let strings = u64::from(u32_le(data, end as usize).unwrap_or(4).max(4));
            (end + strings).min(data.len() as u64).saturating_sub(u64::from(symbol_table))
        };
        let sections = model
            .sections
            .iter()
            .map(|s| ObjectSection {
                number: s.id,
                name: s.name.to_vec(),
                header_offset: HEADER + (s.id - 1) * SECTION,
                raw_offset: u32_le(&s.header, 20).unwrap_or(0),
                raw_size: u32_le(&s.header, 16).unwrap_or(0),
                relocations_offset: u32_le(&s.header, 24).unwrap_or(0),
                line_numbers_offset: u32_le(&s.header, 28).unwrap_or(0),
                line_numbers: u16_le(&s.header, 34).unwrap_or(0),
                characteristics: u32_le(&s.header, 36).unwrap_or(0),
                relocations: s.relocs.iter().map(|&(va, sym, ty)| (va, sym as u32, ty)).collect(),
            })
            .collect();
        let symbols = model
            .symbols
            .iter()
            .map(|s| ObjectSymbol {
                index: s.id as u32,
                offset: symbol_table as usize + s.id * SYMBOL,
                name: s.name.to_vec(),
                section: s.section,
                value: u32_le(&s.record, 8).unwrap_or(0),
                class: s.record[16],
                aux: s.record[17],
            })
            .collect();
        Ok(ObjectView { machine, symbol_table, symbol_table_len, sections, symbols })
    }

    /// The section of a 1-based section number.
    pub fn section(&self, number: i32) -> Option<&ObjectSection> {
        usize::try_from(number).ok().filter(|&n| n > 0).and_then(|n| self.sections.get(n - 1))
    }

    /// The symbol of a raw index (not an auxiliary record).
    pub fn symbol(&self, index: u32) -> Option<&ObjectSymbol> {
        self.symbols.binary_search_by_key(&index, |s| s.index).ok().and_then(|k| self.symbols.get(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elf::NewSection;

    #[test]
    fn a_written_object_reads_back_with_its_offsets() {
        let mut host = vec![0u8; 20];
        host[..2].copy_from_slice(&0x8664u16.to_le_bytes());
        let data = super::super::rewrite(
            &host,
            &|_| false,
            vec![
                NewSection { name: b".hip_fatbin".to_vec(), data: b"ABCDEFGH" },
                NewSection { name: b".text".to_vec(), data: b"xy" },
            ],
        )
        .unwrap()
        .to_vec();
        assert!(is_object(&data));
        let view = ObjectView::read(&data).unwrap();
        assert_eq!(view.machine, 0x8664);
        let names: Vec<&[u8]> = view.sections.iter().map(|s| s.name.as_slice()).collect();
        assert_eq!(names, [&b".hip_fatbin"[..], b".text"]);
        let (off, len) = view.sections[0].raw_range().unwrap();
        assert_eq!(&data[off as usize..(off + len) as usize], b"ABCDEFGH");
        assert_eq!(view.sections[1].header_offset, 60);
        assert!(view.section(0).is_none() && view.section(2).is_some() && view.section(3).is_none());
    }
}

/// The checksum clang's COFF writer (LLVM 22 checked) stores in a section
/// definition's auxiliary record: CRC-32 with the reflected polynomial
/// 0xEDB88320, starting from 0 and not inverted at the end
/// (docs/formats/pe.md §6). Fed in pieces.
#[derive(Clone, Copy, Debug, Default)]
pub struct SectionChecksum {
    state: u32,
}

const fn crc_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
}

static CRC_TABLE: [u32; 256] = crc_table();

impl SectionChecksum {
    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        let mut c = self.state;
        for &b in bytes {
            c = CRC_TABLE[((c ^ u32::from(b)) & 0xff) as usize] ^ (c >> 8);
        }
        self.state = c;
    }

    /// Adds `n` zero bytes.
    pub fn zeros(&mut self, mut n: u64) {
        let block = [0u8; 4096];
        while n > 0 {
            let k = n.min(block.len() as u64);
            self.update(&block[..k as usize]);
            n -= k;
        }
    }

    /// The checksum of everything added.
    pub fn finish(self) -> u32 {
        self.state
    }

    /// The checksum of `bytes`.
    pub fn of(bytes: &[u8]) -> u32 {
        let mut c = SectionChecksum::default();
        c.update(bytes);
        c.finish()
    }
}

#[cfg(test)]
mod checksum_tests {
    use super::SectionChecksum;

    /// Values clang 22 wrote into the section definitions of an object
    /// (`.xdata` and `.CRT$XCU` of a HIP object for x86_64-pc-windows-msvc).
    #[test]
    fn matches_what_clang_writes() {
        assert_eq!(SectionChecksum::of(&[0; 8]), 0);
        assert_eq!(SectionChecksum::of(b""), 0);
        // "123456789" under this variant (init 0, no final inversion);
        // the same as Python's `~zlib.crc32(b"123456789", 0xffffffff)`.
        assert_eq!(SectionChecksum::of(b"123456789"), 0x2DFD_2D88);
        let mut split = SectionChecksum::default();
        split.update(b"1234");
        split.update(b"56789");
        assert_eq!(split.finish(), 0x2DFD_2D88);
        let mut z = SectionChecksum::default();
        z.update(b"ab");
        z.zeros(5000);
        let mut whole = b"ab".to_vec();
        whole.resize(5002, 0);
        assert_eq!(z.finish(), SectionChecksum::of(&whole));
    }
}
