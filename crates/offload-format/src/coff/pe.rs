//! PE images (Windows DLLs and executables): headers, the section table,
//! the import and delay-load import tables, base relocations, the
//! registration records of fat binaries, and the image checksum.
//!
//! The layout is the one Microsoft's "PE Format" specification describes
//! (docs/formats/pe.md gives the fields this reader uses and why). Every
//! offset, RVA and size read from the file is checked before use; tables
//! are walked with bounds taken from the file's length, never from a
//! count field alone, so a hostile image yields an error or a short list,
//! never a panic or a huge allocation.

use crate::bytes::{slice, u16_le, u32_le, u64_le};

/// Why a file is not a PE image this reader accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeError {
    /// The file is not a PE image (no `MZ` header or no `PE\0\0`).
    #[error("not a PE image: {0}")]
    NotPe(&'static str),
    /// A structure lies outside the file or holds impossible values.
    #[error("malformed PE image at offset {offset:#x}: {what}")]
    Malformed {
        /// File offset of the bad structure.
        offset: u64,
        /// What is wrong.
        what: String,
    },
}

fn bad(offset: usize, what: impl Into<String>) -> PeError {
    PeError::Malformed { offset: offset as u64, what: what.into() }
}

/// `IMAGE_FILE_DLL` in the file header's characteristics.
pub const FILE_DLL: u16 = 0x2000;
/// Data directory index of the import table.
pub const DIR_IMPORT: usize = 1;
/// Data directory index of the certificate (Authenticode) table, whose
/// "RVA" is a file offset.
pub const DIR_SECURITY: usize = 4;
/// Data directory index of the base relocation table.
pub const DIR_BASERELOC: usize = 5;
/// Data directory index of the debug directory.
pub const DIR_DEBUG: usize = 6;
/// Data directory index of the delay-load import table.
pub const DIR_DELAY_IMPORT: usize = 13;
/// `IMAGE_REL_BASED_DIR64`: a 64-bit address to adjust.
pub const REL_BASED_DIR64: u8 = 10;
/// `IMAGE_REL_BASED_HIGHLOW`: a 32-bit address to adjust.
pub const REL_BASED_HIGHLOW: u8 = 3;

/// Most sections a PE image may have (the file header's count is 16
/// bits; the loader accepts at most 96).
const MAX_SECTIONS: usize = 96;
/// Most import descriptors read from one table.
const MAX_IMPORTS: usize = 4096;

/// One row of the section table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeSection {
    /// The 8-byte name field (NUL padded; images cut names to 8 bytes).
    pub name: [u8; 8],
    /// Bytes of the section in memory.
    pub virtual_size: u32,
    /// RVA of the section.
    pub virtual_address: u32,
    /// Bytes of raw data in the file (a multiple of the file alignment).
    pub raw_size: u32,
    /// File offset of the raw data (0: none).
    pub raw_offset: u32,
    /// `IMAGE_SCN_*` flags.
    pub characteristics: u32,
    /// File offset of this 40-byte header.
    pub header_offset: usize,
}

impl PeSection {
    /// The name without its NUL padding.
    pub fn name(&self) -> &[u8] {
        let end = self.name.iter().position(|&b| b == 0).unwrap_or(8);
        &self.name[..end]
    }

    /// The file bytes that back the section in memory: the raw data, cut
    /// to the virtual size when that is smaller and non-zero (the rest of
    /// the raw data is file-alignment padding).
    pub fn file_len(&self) -> u32 {
        if self.virtual_size != 0 { self.raw_size.min(self.virtual_size) } else { self.raw_size }
    }
}

/// A data directory entry: an RVA (a file offset for
/// [`DIR_SECURITY`]) and a size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Directory {
    /// RVA (or file offset) of the table.
    pub rva: u32,
    /// Its size in bytes.
    pub size: u32,
}

/// A parsed PE image.
#[derive(Clone, Debug)]
pub struct PeImage<'a> {
    /// The whole file.
    pub data: &'a [u8],
    /// `IMAGE_FILE_MACHINE_*` (0x8664: x86-64).
    pub machine: u16,
    /// File header characteristics ([`FILE_DLL`]).
    pub characteristics: u16,
    /// PE32+ (64-bit) rather than PE32.
    pub is_64: bool,
    /// File offset of the optional header.
    pub optional_offset: usize,
    /// The preferred load address.
    pub image_base: u64,
    /// Alignment of sections in memory.
    pub section_alignment: u32,
    /// Alignment of raw data in the file.
    pub file_alignment: u32,
    /// `SizeOfImage`.
    pub size_of_image: u32,
    /// `SizeOfHeaders`.
    pub size_of_headers: u32,
    /// The stored checksum (0: not set).
    pub checksum: u32,
    /// File offset of the checksum field.
    pub checksum_offset: usize,
    /// File offset of the first data directory entry.
    pub directories_offset: usize,
    /// The data directories (at most 16).
    pub directories: Vec<Directory>,
    /// `PointerToSymbolTable` of the file header (0 in linked images).
    pub symbol_table: u32,
    /// The section table.
    pub sections: Vec<PeSection>,
}

/// Whether `data` starts like a PE image (an `MZ` header whose
/// `e_lfanew` leads to `PE\0\0`).
pub fn is_pe(data: &[u8]) -> bool {
    data.starts_with(b"MZ")
        && u32_le(data, 0x3c).and_then(|at| slice(data, at, 4usize)).is_some_and(|sig| sig == b"PE\0\0")
}

impl<'a> PeImage<'a> {
    /// Reads the headers and the section table of a PE image.
    pub fn parse(data: &'a [u8]) -> Result<Self, PeError> {
        if !data.starts_with(b"MZ") {
            return Err(PeError::NotPe("no MZ header"));
        }
        let pe = u32_le(data, 0x3c).ok_or(PeError::NotPe("truncated MZ header"))? as usize;
        if slice(data, pe, 4usize) != Some(b"PE\0\0") {
            return Err(PeError::NotPe("no PE signature"));
        }
        let fh = pe + 4;
        let field16 = |at: usize, what: &str| u16_le(data, at).ok_or_else(|| bad(at, format!("truncated {what}")));
        let field32 = |at: usize, what: &str| u32_le(data, at).ok_or_else(|| bad(at, format!("truncated {what}")));
        let machine = field16(fh, "file header")?;
        let count = field16(fh + 2, "file header")? as usize;
        let symbol_table = field32(fh + 8, "file header")?;
        let optional_size = field16(fh + 16, "file header")? as usize;
        let characteristics = field16(fh + 18, "file header")?;
        let oh = fh + 20;
        let is_64 = match field16(oh, "optional header")? {
            0x10b => false,
            0x20b => true,
            magic => return Err(bad(oh, format!("unknown optional header magic {magic:#x}"))),
        };
        // Offsets of the fields that differ between PE32 and PE32+.
        let (base_at, dirs_count_at, min_size) = if is_64 { (24, 108, 112) } else { (28, 92, 96) };
        if optional_size < min_size || slice(data, oh, optional_size).is_none() {
            return Err(bad(oh, format!("optional header of {optional_size} bytes")));
        }
        let image_base =
            if is_64 { u64_le(data, oh + base_at) } else { u32_le(data, oh + base_at).map(u64::from) }.unwrap_or(0);
        let section_alignment = field32(oh + 32, "optional header")?;
        let file_alignment = field32(oh + 36, "optional header")?;
        let size_of_image = field32(oh + 56, "optional header")?;
        let size_of_headers = field32(oh + 60, "optional header")?;
        let checksum = field32(oh + 64, "optional header")?;
        let declared = field32(oh + dirs_count_at, "optional header")? as usize;
        let directories_offset = oh + min_size;
        let fit = (optional_size - min_size) / 8;
        let directories: Vec<Directory> = (0..declared.min(16).min(fit))
            .map(|i| {
                let at = directories_offset + 8 * i;
                Directory { rva: u32_le(data, at).unwrap_or(0), size: u32_le(data, at + 4).unwrap_or(0) }
            })
            .collect();
        if count > MAX_SECTIONS {
            return Err(bad(fh + 2, format!("{count} sections (at most {MAX_SECTIONS})")));
        }
        let table = oh + optional_size;
        if slice(data, table, count * 40).is_none() {
            return Err(bad(table, format!("the section table of {count} entries lies past the end")));
        }
        let mut sections = Vec::with_capacity(count);
        for i in 0..count {
            let at = table + 40 * i;
            let mut name = [0u8; 8];
            name.copy_from_slice(&data[at..at + 8]);
            let s = PeSection {
                name,
                virtual_size: u32_le(data, at + 8).unwrap_or(0),
                virtual_address: u32_le(data, at + 12).unwrap_or(0),
                raw_size: u32_le(data, at + 16).unwrap_or(0),
                raw_offset: u32_le(data, at + 20).unwrap_or(0),
                characteristics: u32_le(data, at + 36).unwrap_or(0),
                header_offset: at,
            };
            if s.raw_size != 0 && slice(data, s.raw_offset, s.raw_size).is_none() {
                let name = String::from_utf8_lossy(s.name());
                return Err(bad(at, format!("section {name}'s raw data lies past the end of the file")));
            }
            sections.push(s);
        }
        Ok(PeImage {
            data,
            machine,
            characteristics,
            is_64,
            optional_offset: oh,
            image_base,
            section_alignment,
            file_alignment,
            size_of_image,
            size_of_headers,
            checksum,
            checksum_offset: oh + 64,
            directories_offset,
            directories,
            symbol_table,
            sections,
        })
    }

    /// Whether the image is a DLL.
    pub fn is_dll(&self) -> bool {
        self.characteristics & FILE_DLL != 0
    }

    /// The section named `name` (first of that name).
    pub fn section(&self, name: &[u8]) -> Option<&PeSection> {
        self.sections.iter().find(|s| s.name() == name)
    }

    /// The file bytes of a section ([`PeSection::file_len`] long).
    pub fn section_data(&self, s: &PeSection) -> &'a [u8] {
        slice(self.data, s.raw_offset, s.file_len()).unwrap_or(&[])
    }

    /// The data directory `index`, when present and non-empty.
    pub fn directory(&self, index: usize) -> Option<Directory> {
        self.directories.get(index).copied().filter(|d| d.rva != 0 && d.size != 0)
    }

    /// The file offset of `rva`, when file bytes back it (in a section's
    /// raw data, or in the headers).
    pub fn rva_to_offset(&self, rva: u32) -> Option<usize> {
        if rva < self.size_of_headers && (rva as usize) < self.data.len() {
            return Some(rva as usize);
        }
        self.sections.iter().find_map(|s| {
            let rel = rva.checked_sub(s.virtual_address)?;
            (rel < s.file_len()).then(|| s.raw_offset as usize + rel as usize)
        })
    }

    /// The section holding `rva` in memory.
    pub fn section_at_rva(&self, rva: u32) -> Option<&PeSection> {
        self.sections
            .iter()
            .find(|s| rva.checked_sub(s.virtual_address).is_some_and(|rel| rel < s.virtual_size.max(s.raw_size)))
    }

    /// `len` file bytes at `rva`, all inside one section (or the headers).
    pub fn bytes_at_rva(&self, rva: u32, len: usize) -> Option<&'a [u8]> {
        let at = self.rva_to_offset(rva)?;
        let end_rva = rva.checked_add(u32::try_from(len.checked_sub(1)?).ok()?)?;
        let end = self.rva_to_offset(end_rva)?;
        (end.checked_sub(at)? == len - 1).then(|| slice(self.data, at, len)).flatten()
    }

    /// The NUL-terminated string at `rva` (at most 1024 bytes).
    pub fn string_at_rva(&self, rva: u32) -> Option<&'a [u8]> {
        let at = self.rva_to_offset(rva)?;
        let rest = self.data.get(at..)?;
        let rest = &rest[..rest.len().min(1024)];
        Some(&rest[..memchr::memchr(0, rest)?])
    }

    /// The DLLs the image imports, in table order: the import table, then
    /// the delay-load import table. A name that appears twice is listed
    /// once. Stops with an error at the first descriptor that does not
    /// read (outside the file, or a name that is not there).
    pub fn imports(&self) -> Result<Vec<Import>, PeError> {
        let mut out: Vec<Import> = Vec::new();
        // Import descriptors are 20 bytes, the name RVA at +12; delay-load
        // descriptors 32 bytes, the name RVA at +4.
        for (dir, size, name_at, delay) in [(DIR_IMPORT, 20, 12, false), (DIR_DELAY_IMPORT, 32, 4, true)] {
            let Some(d) = self.directory(dir) else { continue };
            let start = self
                .rva_to_offset(d.rva)
                .ok_or_else(|| bad(self.directories_offset + 8 * dir, "the import table's RVA is not in the file"))?;
            for i in 0..MAX_IMPORTS {
                let at = start + size * i;
                let Some(desc) = slice(self.data, at, size) else {
                    return Err(bad(at, "an import descriptor lies past the end of the file"));
                };
                if desc.iter().all(|&b| b == 0) {
                    break;
                }
                let name_rva = u32_le(desc, name_at).unwrap_or(0);
                let Some(name) = self.string_at_rva(name_rva).filter(|n| !n.is_empty()) else {
                    return Err(bad(at, format!("import descriptor {i} names no DLL (name RVA {name_rva:#x})")));
                };
                let name = String::from_utf8_lossy(name).into_owned();
                if !out.iter().any(|o| o.dll.eq_ignore_ascii_case(&name)) {
                    out.push(Import { dll: name, delay });
                }
                if i + 1 == MAX_IMPORTS {
                    return Err(bad(at, format!("more than {MAX_IMPORTS} import descriptors")));
                }
            }
        }
        Ok(out)
    }

    /// The base relocations: (RVA, type) of every entry except the
    /// padding ones (`IMAGE_REL_BASED_ABSOLUTE`). A block whose size is
    /// not a multiple of 2, smaller than its 8-byte header or past the end
    /// of the table is an error.
    pub fn base_relocations(&self) -> Result<Vec<(u32, u8)>, PeError> {
        let Some(d) = self.directory(DIR_BASERELOC) else { return Ok(Vec::new()) };
        let start = self.rva_to_offset(d.rva).ok_or_else(|| {
            bad(self.directories_offset + 8 * DIR_BASERELOC, "the base relocation table's RVA is not in the file")
        })?;
        let table = slice(self.data, start, d.size)
            .ok_or_else(|| bad(start, "the base relocation table lies past the end of the file"))?;
        let mut out = Vec::new();
        let mut at = 0usize;
        while at + 8 <= table.len() {
            let page = u32_le(table, at).unwrap_or(0);
            let block = u32_le(table, at + 4).unwrap_or(0) as usize;
            if block < 8 || !block.is_multiple_of(2) || at + block > table.len() {
                return Err(bad(start + at, format!("base relocation block of {block} bytes")));
            }
            for e in (at + 8..at + block).step_by(2) {
                let v = u16_le(table, e).unwrap_or(0);
                let kind = (v >> 12) as u8;
                if kind != 0 {
                    out.push((page.wrapping_add(u32::from(v & 0xfff)), kind));
                }
            }
            at += block;
        }
        Ok(out)
    }

    /// The registration records of fat binaries in section `name`
    /// (`.hipFatB` for HIP, `.nvFatBi` for CUDA): 24-byte records (magic,
    /// version, address of the fat binary, unused) whose magic is
    /// `magic`. Each address is resolved to an RVA through the image base,
    /// and `relocated` says whether a base relocation adjusts it (what the
    /// loader does when the image does not load at its preferred base).
    pub fn records(&self, name: &[u8], magic: u32) -> Result<Vec<Record>, PeError> {
        let Some(s) = self.section(name) else { return Ok(Vec::new()) };
        let width = if self.is_64 { 8 } else { 4 };
        let size = 8 + 2 * width;
        let relocs = self.base_relocations()?;
        let data = self.section_data(s);
        let mut out = Vec::new();
        for (i, rec) in data.chunks_exact(size).enumerate() {
            if u32_le(rec, 0) != Some(magic) {
                continue;
            }
            let address = if self.is_64 { u64_le(rec, 8) } else { u32_le(rec, 8).map(u64::from) }.unwrap_or(0);
            let field_rva = s.virtual_address.wrapping_add((i * size + 8) as u32);
            let relocated = relocs.iter().any(|&(rva, kind)| {
                rva == field_rva && kind == if self.is_64 { REL_BASED_DIR64 } else { REL_BASED_HIGHLOW }
            });
            let target = address.checked_sub(self.image_base).and_then(|r| u32::try_from(r).ok());
            out.push(Record { offset: s.raw_offset as usize + i * size, address, target, relocated });
        }
        Ok(out)
    }
}

/// A DLL an image imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    /// Its name as written in the image (`KERNEL32.dll`).
    pub dll: String,
    /// Loaded on first use (delay-load import table) rather than at start.
    pub delay: bool,
}

/// A fat binary registration record of a PE image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// File offset of the record.
    pub offset: usize,
    /// The address it holds (preferred-base virtual address).
    pub address: u64,
    /// That address as an RVA, when it is one.
    pub target: Option<u32>,
    /// Whether a base relocation covers the address field.
    pub relocated: bool,
}

/// The PE image checksum, computed as the loader's `CheckSumMappedFile`
/// does: 16-bit little-endian words summed with the carries folded back,
/// the checksum field itself counted as zero, plus the file length.
#[derive(Clone, Debug)]
pub struct Checksum {
    sum: u64,
    at: u64,
    odd: Option<u8>,
    field: u64,
}

impl Checksum {
    /// A checksum of a file whose checksum field is at `field`.
    pub fn new(field: usize) -> Self {
        Checksum { sum: 0, at: 0, odd: None, field: field as u64 }
    }

    fn word(&mut self, lo: u8, hi: u8, start: u64) {
        // The 4-byte checksum field is two words, both taken as zero.
        if start >= self.field && start < self.field + 4 {
            return;
        }
        // The checksum's 16-bit word of two bytes `update` has in hand.
        self.sum += u64::from(u16::from_le_bytes([lo, hi]));
        if self.sum > 0xffff_ffff {
            self.sum = (self.sum & 0xffff) + (self.sum >> 16);
        }
    }

    /// Adds the next bytes of the file.
    pub fn update(&mut self, mut bytes: &[u8]) {
        if let (Some(lo), Some((&hi, rest))) = (self.odd, bytes.split_first()) {
            self.word(lo, hi, self.at - 1);
            self.odd = None;
            self.at += 1;
            bytes = rest;
        }
        let mut pairs = bytes.chunks_exact(2);
        for p in &mut pairs {
            self.word(p[0], p[1], self.at);
            self.at += 2;
        }
        if let [last] = pairs.remainder() {
            self.odd = Some(*last);
            self.at += 1;
        }
    }

    /// Adds `n` zero bytes.
    pub fn zeros(&mut self, n: u64) {
        // Zero words add nothing; only the position and a pending odd
        // byte matter.
        if n == 0 {
            return;
        }
        if let Some(lo) = self.odd.take() {
            self.word(lo, 0, self.at - 1);
            self.at += 1;
            self.zeros_even(n - 1);
        } else {
            self.zeros_even(n);
        }
    }

    fn zeros_even(&mut self, n: u64) {
        self.at += n & !1;
        if n % 2 == 1 {
            self.odd = Some(0);
            self.at += 1;
        }
    }

    /// The checksum of the bytes added so far, the file being that long.
    pub fn finish(mut self) -> u32 {
        if let Some(lo) = self.odd.take() {
            self.word(lo, 0, self.at - 1);
        }
        let mut sum = self.sum;
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        (sum as u32).wrapping_add(self.at as u32)
    }
}

/// The checksum of a whole PE file whose checksum field is at `field`.
pub fn checksum(data: &[u8], field: usize) -> u32 {
    let mut c = Checksum::new(field);
    c.update(data);
    c.finish()
}

#[cfg(test)]
#[path = "pe_tests.rs"]
mod tests;
