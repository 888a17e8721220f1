//! ELF object files: a small checked reader and an in-process replacement
//! for the two `llvm-objcopy` runs LLVM's bundler makes on host objects.
//!
//! * [`ElfFile`] reads the header, the section table and section names of
//!   ELF32/ELF64 files of either byte order, checking every offset.
//! * [`rewrite()`] adds and removes sections and lays the result out exactly
//!   as llvm-objcopy 19 does (see the `rewrite` module for the rules), so
//!   that our fat objects and extracted host objects are byte-identical to
//!   LLVM's.

mod codec;
mod model;
pub mod relocations;
pub mod rewrite;
pub mod segments;
mod strtab;
pub mod symbol_index;
pub mod symbols;

pub use codec::Codec;
pub use rewrite::{NewSection, rewrite};

use std::borrow::Cow;

/// The section type of a section holding program data.
pub const SHT_PROGBITS: u32 = 1;
/// Section type: the static symbol table.
pub const SHT_SYMTAB: u32 = 2;
/// Section type: a string table.
pub const SHT_STRTAB: u32 = 3;
/// Section type: relocations with addends.
pub const SHT_RELA: u32 = 4;
/// Section type: the SysV symbol hash table.
pub const SHT_HASH: u32 = 5;
/// Section type: dynamic linking information.
pub const SHT_DYNAMIC: u32 = 6;
/// Section type: occupies no file bytes (`.bss`).
pub const SHT_NOBITS: u32 = 8;
/// Section type: relocations without addends.
pub const SHT_REL: u32 = 9;
/// Section type: the dynamic symbol table.
pub const SHT_DYNSYM: u32 = 11;
/// Section type: a section group (COMDAT).
pub const SHT_GROUP: u32 = 17;
/// Section type: extended section indices of a symbol table.
pub const SHT_SYMTAB_SHNDX: u32 = 18;
/// Section type: the GNU symbol hash table.
pub const SHT_GNU_HASH: u32 = 0x6fff_fff6;
/// LLVM's compact relocations (not supported by the rewriter).
pub const SHT_CREL: u32 = 0x4000_0014;
/// Section type: notes (`Elf_Nhdr` records).
pub const SHT_NOTE: u32 = 7;

/// Section flag: member of a section group.
pub const SHF_GROUP: u64 = 0x200;
/// Section flag: occupies memory at run time.
pub const SHF_ALLOC: u64 = 0x2;
/// Section flag: contents compressed (`Elf_Chdr` first).
pub const SHF_COMPRESSED: u64 = 0x800;
/// Section flag: left out by the linker.
pub const SHF_EXCLUDE: u64 = 0x8000_0000;

/// Section index: undefined symbol.
pub const SHN_UNDEF: u16 = 0;
/// Section index: start of the reserved range.
pub const SHN_LORESERVE: u32 = 0xff00;
/// Section index: absolute symbol.
pub const SHN_ABS: u16 = 0xfff1;
/// Section index: common symbol.
pub const SHN_COMMON: u16 = 0xfff2;
/// Section index: the real index is in `SHT_SYMTAB_SHNDX`.
pub const SHN_XINDEX: u16 = 0xffff;

/// Machine: MIPS.
pub const EM_MIPS: u16 = 8;
/// Machine: Qualcomm Hexagon.
pub const EM_HEXAGON: u16 = 164;
/// Machine: AMD GPU.
pub const EM_AMDGPU: u16 = 224;
/// Machine: x86-64.
pub const EM_X86_64: u16 = 62;
/// Machine: NVIDIA CUDA (cubins).
pub const EM_CUDA: u16 = 190;
/// `EI_OSABI` of AMDGPU code objects for the HSA runtime.
pub const ELFOSABI_AMDGPU_HSA: u8 = 64;
/// `e_flags` bit of pre-CUDA-13 cubins (`EI_OSABI` 0x33): 64-bit addresses.
pub const EF_CUDA_64BIT_ADDRESS: u32 = 0x400;

/// File type: relocatable object.
pub const ET_REL: u16 = 1;
/// File type: executable.
pub const ET_EXEC: u16 = 2;
/// File type: shared object (or PIE).
pub const ET_DYN: u16 = 3;

/// Section type: RELR relative relocations.
pub const SHT_RELR: u32 = 19;
/// Section flag: executable code.
pub const SHF_EXECINSTR: u64 = 0x4;

/// Segment type: loadable.
pub const PT_LOAD: u32 = 1;
/// Segment type: the dynamic table.
pub const PT_DYNAMIC: u32 = 2;
/// Segment type: the interpreter's path.
pub const PT_INTERP: u32 = 3;
/// Segment type: the program header table itself.
pub const PT_PHDR: u32 = 6;
/// Segment flag: readable.
pub const PF_R: u32 = 4;

/// Symbol binding: local.
pub const STB_LOCAL: u8 = 0;
/// Symbol type: data object.
pub const STT_OBJECT: u8 = 1;
/// Symbol type: thread-local data.
pub const STT_TLS: u8 = 6;

/// x86-64 relocation: a 64-bit absolute address (S + A).
pub const R_X86_64_64: u32 = 1;
/// x86-64 relocation: base address plus addend (B + A).
pub const R_X86_64_RELATIVE: u32 = 8;

/// Dynamic tag: end of the table.
pub const DT_NULL: u64 = 0;
/// Dynamic tag: a needed library.
pub const DT_NEEDED: u64 = 1;
/// Dynamic tag: the object's own name.
pub const DT_SONAME: u64 = 14;
/// Dynamic tag: library search path (before LD_LIBRARY_PATH).
pub const DT_RPATH: u64 = 15;
/// Dynamic tag: library search path (after LD_LIBRARY_PATH).
pub const DT_RUNPATH: u64 = 29;
/// Dynamic tag: flags (`DF_1_*`).
pub const DT_FLAGS_1: u64 = 0x6fff_fffb;

/// Why an ELF file cannot be read or rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ElfError {
    /// A valid ELF file this rewriter cannot handle (why).
    #[error("cannot rewrite this ELF file: {0}")]
    Unsupported(String),
    /// A removal that would break a reference (llvm-objcopy refuses these too).
    #[error("{0}")]
    Refused(String),
    /// A field or table that cannot be read: what, at which file offset,
    /// and how.
    #[error("malformed ELF file: {0}")]
    Read(#[source] crate::bytes::ReadError),
}

/// A field at `offset` whose value the format does not allow.
pub(crate) fn invalid(offset: u64, what: &'static str, why: impl Into<String>) -> ElfError {
    ElfError::Read(crate::bytes::ReadError::invalid(offset, what, why))
}

/// A field of `need` bytes at `offset` that `data` does not hold.
pub(crate) fn truncated(data: &[u8], offset: u64, need: u64, what: &'static str) -> ElfError {
    ElfError::Read(crate::bytes::ReadError::truncated(data, offset, need, what))
}

/// Whether `data` starts with the ELF magic.
pub fn is_elf(data: &[u8]) -> bool {
    data.starts_with(b"\x7fELF")
}

/// Whether `data` starts with an ELF identification of a known class: the
/// magic, `EI_CLASS` 1 or 2, and the 16 identification bytes present. The
/// scan sends such files to [`ElfFile`], other object files elsewhere.
pub fn has_ident(data: &[u8]) -> bool {
    data.len() >= 16 && is_elf(data) && matches!(data[4], 1 | 2)
}

/// The fields of the ELF header that llvm-objcopy carries over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// `EI_OSABI`.
    pub osabi: u8,
    /// `EI_ABIVERSION`.
    pub abi_version: u8,
    /// `e_type`: 1 relocatable, 2 executable, 3 shared object.
    pub e_type: u16,
    /// `e_machine` (`EM_*`).
    pub machine: u16,
    /// `e_version`.
    pub version: u32,
    /// `e_entry`: the entry point address.
    pub entry: u64,
    /// `e_flags`: machine-specific bits.
    pub flags: u32,
    /// `e_phnum`: number of program headers.
    pub phnum: u16,
}

/// One section header, fields widened to 64 bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SectionHeader {
    /// `sh_name`: offset of the name in the section name string table.
    pub name: u32,
    /// `sh_type` (`SHT_*`).
    pub sh_type: u32,
    /// `sh_flags` (`SHF_*`).
    pub flags: u64,
    /// `sh_addr`: address at run time (0 when not allocated).
    pub addr: u64,
    /// `sh_offset`: file offset of the contents.
    pub offset: u64,
    /// `sh_size` in bytes.
    pub size: u64,
    /// `sh_link`: an associated section's index.
    pub link: u32,
    /// `sh_info`: type-specific.
    pub info: u32,
    /// `sh_addralign` in bytes.
    pub align: u64,
    /// `sh_entsize`: size of one entry for tables, else 0.
    pub entsize: u64,
}

impl SectionHeader {
    /// Whether `other` is this header moved or resized: every field but
    /// `sh_offset` and `sh_size` equal (what a rewriter that shifts or
    /// shrinks sections may change, and nothing else).
    pub fn same_but_placement(&self, other: &SectionHeader) -> bool {
        SectionHeader { offset: other.offset, size: other.size, ..*self } == *other
    }
}

/// A parsed ELF file: header and section table, borrowing the input.
#[derive(Debug)]
pub struct ElfFile<'a> {
    /// The whole file.
    pub data: &'a [u8],
    /// Its class and byte order.
    pub codec: Codec,
    /// The ELF header fields kept.
    pub header: Header,
    /// Every section header, the null one (index 0) included.
    pub sections: Vec<SectionHeader>,
    /// Index of the section name string table (0: none).
    pub shstrndx: usize,
}

impl<'a> ElfFile<'a> {
    /// Parses the ELF header and the section header table.
    pub fn parse(data: &'a [u8]) -> Result<ElfFile<'a>, ElfError> {
        let (codec, header) = parse_header(data)?;
        let c = &codec;
        let w = c.word_size();
        let shoff = c.word(data, 24 + 2 * w).ok_or_else(|| truncated(data, 24 + 2 * w as u64, w as u64, "e_shoff"))?;
        let at = 24 + 3 * w + 4 + 2 + 2 + 2;
        let shentsize = c.u16(data, at).unwrap_or(0);
        let mut shnum = u64::from(c.u16(data, at + 2).unwrap_or(0));
        let mut shstrndx = u32::from(c.u16(data, at + 4).unwrap_or(0));
        let mut file = ElfFile { data, codec, header, sections: Vec::new(), shstrndx: 0 };
        if shoff == 0 {
            if shnum != 0 {
                return Err(invalid(
                    at as u64 + 2,
                    "e_shnum",
                    format!("e_shnum is {shnum} but there is no section header table"),
                ));
            }
            return Ok(file);
        }
        if usize::from(shentsize) != c.shdr_size() {
            return Err(invalid(
                at as u64,
                "e_shentsize",
                format!("e_shentsize is {shentsize}, expected {} for this ELF class", c.shdr_size()),
            ));
        }
        let first = file.read_header(shoff, 0)?;
        if shnum == 0 {
            shnum = first.size;
        }
        if shstrndx == u32::from(SHN_XINDEX) {
            shstrndx = first.link;
        }
        let table_end = shnum.checked_mul(c.shdr_size() as u64).and_then(|n| n.checked_add(shoff));
        if table_end.is_none_or(|end| end > data.len() as u64) {
            let need = shnum.saturating_mul(c.shdr_size() as u64);
            return Err(truncated(data, shoff, need, "section header table"));
        }
        // Bounded by the file size checked just above.
        let count = shnum as usize;
        let mut sections = Vec::with_capacity(count);
        sections.push(first);
        for i in 1..count {
            sections.push(file.read_header(shoff, i)?);
        }
        file.sections = sections;
        if shstrndx as usize >= count {
            return Err(invalid(
                at as u64 + 4,
                "e_shstrndx",
                format!("e_shstrndx {shstrndx} is not a section index (there are {count} sections)"),
            ));
        }
        file.shstrndx = shstrndx as usize;
        if file.shstrndx != 0 {
            file.string_table(file.shstrndx)?;
        }
        Ok(file)
    }

    fn read_header(&self, shoff: u64, index: usize) -> Result<SectionHeader, ElfError> {
        let c = &self.codec;
        let base =
            usize::try_from(shoff).ok().and_then(|o| o.checked_add(index.checked_mul(c.shdr_size())?)).ok_or_else(
                || invalid(shoff, "section header table", format!("section header {index} overflows the offset")),
            )?;
        c.read_shdr(self.data, base)
            .ok_or_else(|| truncated(self.data, base as u64, c.shdr_size() as u64, "section header"))
    }

    /// The file offset of section header `index` (for messages; saturated
    /// where the table's offset is not in the header).
    pub fn section_header_offset(&self, index: usize) -> u64 {
        let c = &self.codec;
        let shoff = c.word(self.data, 24 + 2 * c.word_size()).unwrap_or(0);
        shoff.saturating_add((index as u64).saturating_mul(c.shdr_size() as u64))
    }

    /// Whether the file is 64-bit (ELFCLASS64).
    pub fn is64(&self) -> bool {
        self.codec.is64
    }

    /// The file contents of section `index` (empty for SHT_NOBITS).
    pub fn section_data(&self, index: usize) -> Result<&'a [u8], ElfError> {
        let sh = self.section(index)?;
        if sh.sh_type == SHT_NOBITS {
            return Ok(&[]);
        }
        let end = sh.offset.checked_add(sh.size);
        match end {
            Some(end) if end <= self.data.len() as u64 => Ok(&self.data[sh.offset as usize..end as usize]),
            _ => Err(truncated(self.data, sh.offset, sh.size, "section contents")),
        }
    }

    /// The contents of a string table section, checked as LLVM checks them:
    /// of type SHT_STRTAB, non-empty and ending in a NUL byte.
    pub fn string_table(&self, index: usize) -> Result<&'a [u8], ElfError> {
        let sh = self.section(index)?;
        let header = self.section_header_offset(index);
        if sh.sh_type != SHT_STRTAB {
            let why = format!("section {index} is used as a string table but is not SHT_STRTAB");
            return Err(invalid(header, "string table", why));
        }
        let data = self.section_data(index)?;
        match data.last() {
            None => Err(invalid(header, "string table", format!("string table section {index} is empty"))),
            Some(0) => Ok(data),
            Some(_) => Err(invalid(
                sh.offset.saturating_add(sh.size.saturating_sub(1)),
                "string table",
                format!("string table section {index} does not end in a NUL byte"),
            )),
        }
    }

    /// The name of section `index`.
    pub fn section_name(&self, index: usize) -> Result<&'a [u8], ElfError> {
        if self.shstrndx == 0 {
            let at = 24 + 3 * self.codec.word_size() as u64 + 4 + 2 + 2 + 2 + 4;
            return Err(invalid(at, "e_shstrndx", "the file has no section name table"));
        }
        let sh = self.section(index)?;
        let table = self.string_table(self.shstrndx)?;
        c_string(table, sh.name).ok_or_else(|| {
            invalid(
                self.section_header_offset(index),
                "section name",
                format!(
                    "section {index} has a name offset {:#x} past the end of the section name table ({} bytes)",
                    sh.name,
                    table.len()
                ),
            )
        })
    }

    /// Section header `index`, or an error naming the index.
    fn section(&self, index: usize) -> Result<&SectionHeader, ElfError> {
        self.sections
            .get(index)
            .ok_or_else(|| invalid(self.section_header_offset(index), "section header", format!("no section {index}")))
    }

    /// The section names, lossily converted, for messages.
    pub fn display_name(&self, index: usize) -> Cow<'a, str> {
        self.section_name(index).map(String::from_utf8_lossy).unwrap_or(Cow::Borrowed("<unnamed>"))
    }
}

/// The identification and the header fields kept, checked: the magic,
/// class and byte order known, the whole header in the file.
pub(crate) fn parse_header(data: &[u8]) -> Result<(Codec, Header), ElfError> {
    if !is_elf(data) {
        return Err(invalid(0, "ELF identification", "no ELF magic"));
    }
    let codec = Codec::from_ident(data)?;
    let eh = codec.ehdr_size();
    if data.len() < eh {
        return Err(truncated(data, 0, eh as u64, "ELF header"));
    }
    let c = &codec;
    let w = c.word_size();
    let header = Header {
        osabi: data.get(7).copied().unwrap_or(0),
        abi_version: data.get(8).copied().unwrap_or(0),
        e_type: c.u16(data, 16).unwrap_or(0),
        machine: c.u16(data, 18).unwrap_or(0),
        version: c.u32(data, 20).unwrap_or(0),
        entry: c.word(data, 24).ok_or_else(|| truncated(data, 24, w as u64, "e_entry"))?,
        flags: c.u32(data, 24 + 3 * w).unwrap_or(0),
        phnum: c.u16(data, 24 + 3 * w + 4 + 2 + 2).unwrap_or(0),
    };
    Ok((codec, header))
}

/// The NUL-terminated string at `offset` of a string table that ends in NUL.
pub fn c_string(table: &[u8], offset: u32) -> Option<&[u8]> {
    let rest = table.get(offset as usize..)?;
    let end = memchr::memchr(0, rest)?;
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_truncated_and_lying_headers() {
        assert!(ElfFile::parse(b"\x7fELF").is_err());
        assert!(ElfFile::parse(b"\x7fELF\x02\x01\x01").is_err());
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[6] = 1;
        // No section table at all is fine.
        assert!(ElfFile::parse(&h).unwrap().sections.is_empty());
        // A table far past the end is not.
        h[40] = 0xff;
        h[58] = 64;
        h[60] = 3;
        let e = ElfFile::parse(&h).unwrap_err();
        assert_eq!(e.to_string(), "malformed ELF file: section header at offset 0xff: 64 bytes needed, 0 available");
        let ElfError::Read(read) = &e else { panic!("{e:?}") };
        assert_eq!(read.what, "section header");
        assert_eq!(read.offset, 0xff);
    }
}
