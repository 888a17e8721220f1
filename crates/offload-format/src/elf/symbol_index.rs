//! An ELF file opened the way a general object reader opens it before it
//! lists symbols, and the names such a reader puts into an archive's
//! symbol index (`docs/formats/elf.md`, "Archive symbol index"). The
//! archive writers of the bundler and the packager use these to decide
//! which members are objects and which names they define.
//!
//! Opening reads the header and the section table as such a reader does
//! (more liberal than [`ElfFile::parse`] about the section name table,
//! which it never needs) and checks the identification (byte order and
//! version), that a file with sections names a section name table, the
//! program header table, both symbol tables (`SHT_SYMTAB`, `SHT_DYNSYM`:
//! whole entries in the file, `sh_link` 0 or an `SHT_STRTAB` section) and
//! that each relocation section of the static table applies to a section
//! that exists and is not itself a relocation section. Symbol names are
//! read only for the symbols listed, so an unreadable name of a local or
//! undefined symbol does not make the file unreadable. The result was
//! compared with the `object` crate's ELF reader (which the project used
//! before) on real archive members and on copies with damaged headers:
//! the same files are refused and the same names listed.

use super::{
    ElfError, ElfFile, SHN_LORESERVE, SHN_UNDEF, SHN_XINDEX, SHT_CREL, SHT_DYNSYM, SHT_NOBITS, SHT_REL, SHT_RELA,
    SHT_STRTAB, SHT_SYMTAB, SHT_SYMTAB_SHNDX, STB_LOCAL, SectionHeader, c_string,
};
use crate::bytes::ReadError;

fn invalid(offset: u64, what: &'static str, why: impl Into<String>) -> ElfError {
    ElfError::Read(ReadError::invalid(offset, what, why))
}

/// Symbol type: the name of a source file.
pub const STT_FILE: u8 = 4;
/// Symbol type: a section.
pub const STT_SECTION: u8 = 3;
/// `e_phnum` value meaning the count is in section 0's `sh_info`.
const PN_XNUM: u16 = 0xffff;

/// A symbol table section: its entries (checked to lie in the file) and
/// the string table its names are in.
struct Table<'a> {
    entries: &'a [u8],
    /// The linked string table's bytes (not checked to end in NUL: a name
    /// is looked up only when it is used); `None` when the table runs past
    /// the end of the file, which makes every name lookup fail.
    strings: Option<&'a [u8]>,
}

/// Parses `data` as ELF and checks the tables a general object reader
/// reads when it opens the file (module docs). The result's `shstrndx` is
/// not checked to be a string table: do not ask it for section names.
pub fn open(data: &[u8]) -> Result<ElfFile<'_>, ElfError> {
    let (codec, header) = super::parse_header(data)?;
    if let Some(&version) = data.get(6).filter(|&&v| v != 1) {
        return Err(invalid(6, "EI_VERSION", format!("{version}, not 1")));
    }
    let mut elf = ElfFile { data, codec, header, sections: Vec::new(), shstrndx: 0 };
    program_headers(&elf)?;
    section_table(&mut elf)?;
    let symtab = table(&elf, SHT_SYMTAB)?;
    table(&elf, SHT_DYNSYM)?;
    let symtab_index = symtab.map_or(0, |(index, _)| index);
    for (index, sh) in elf.sections.iter().enumerate() {
        if !matches!(sh.sh_type, SHT_REL | SHT_RELA | SHT_CREL) || sh.link as usize != symtab_index || sh.info == 0 {
            continue;
        }
        let at = header_field(&elf, index, 44, 28);
        let target = elf.sections.get(sh.info as usize).ok_or_else(|| {
            invalid(at, "sh_info of a relocation section", format!("section {} does not exist", sh.info))
        })?;
        if matches!(target.sh_type, SHT_REL | SHT_RELA | SHT_CREL) {
            return Err(invalid(at, "sh_info of a relocation section", "names another relocation section"));
        }
    }
    Ok(elf)
}

/// Offsets of the header fields locating the section table, for this
/// class: `e_shoff`, `e_shentsize`, `e_shnum`, `e_shstrndx`.
fn table_fields(elf: &ElfFile<'_>) -> (usize, usize, usize, usize) {
    let w = elf.codec.word_size();
    (24 + 2 * w, 24 + 3 * w + 10, 24 + 3 * w + 12, 24 + 3 * w + 14)
}

/// Section 0's header, read at `e_shoff` whatever `e_shentsize` says (it
/// holds the extended counts); `None` when there is no section table.
fn section_zero(elf: &ElfFile<'_>) -> Result<Option<SectionHeader>, ElfError> {
    let c = &elf.codec;
    let shoff = c.word(elf.data, table_fields(elf).0).unwrap_or(0);
    if shoff == 0 {
        return Ok(None);
    }
    let read = || c.read_shdr(elf.data, usize::try_from(shoff).ok()?);
    read()
        .map(Some)
        .ok_or_else(|| ElfError::Read(ReadError::truncated(elf.data, shoff, c.shdr_size() as u64, "section header 0")))
}

/// Reads the section table into `elf`: none when `e_shoff` is 0 or the
/// count (`e_shnum`, or section 0's `sh_size` when that is 0) is 0;
/// otherwise entries of this class's size wholly in the file, and
/// `e_shstrndx` (or section 0's `sh_link` for `SHN_XINDEX`) a section.
fn section_table(elf: &mut ElfFile<'_>) -> Result<(), ElfError> {
    let c = elf.codec;
    let data = elf.data;
    let (at_shoff, at_entsize, at_shnum, at_shstrndx) = table_fields(elf);
    let shoff = c.word(data, at_shoff).unwrap_or(0);
    if shoff == 0 {
        return Ok(());
    }
    let mut count = u64::from(c.u16(data, at_shnum).unwrap_or(0));
    if count == 0 {
        count = section_zero(elf)?.map_or(0, |s| s.size);
        if count == 0 {
            return Ok(());
        }
    }
    let entsize = c.u16(data, at_entsize).unwrap_or(0);
    if usize::from(entsize) != c.shdr_size() {
        let why = format!("{entsize}, not {} for this ELF class", c.shdr_size());
        return Err(invalid(at_entsize as u64, "e_shentsize", why));
    }
    let len = count.saturating_mul(c.shdr_size() as u64);
    crate::bytes::require(data, shoff, len, "section header table").map_err(ElfError::Read)?;
    // Bounded by the file size checked just above.
    let mut sections = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let at = (shoff as usize).saturating_add(i.saturating_mul(c.shdr_size()));
        let sh = c.read_shdr(data, at).ok_or_else(|| {
            ElfError::Read(ReadError::truncated(data, at as u64, c.shdr_size() as u64, "section header"))
        })?;
        sections.push(sh);
    }
    let shstrndx = match c.u16(data, at_shstrndx).unwrap_or(0) {
        0 => {
            return Err(invalid(at_shstrndx as u64, "e_shstrndx", "0 (no section name table) in a file with sections"));
        }
        SHN_XINDEX => sections.first().map_or(0, |s| s.link) as usize,
        n if u32::from(n) >= SHN_LORESERVE => {
            return Err(invalid(at_shstrndx as u64, "e_shstrndx", format!("{n:#x} is a reserved index")));
        }
        n => usize::from(n),
    };
    let names = sections
        .get(shstrndx)
        .ok_or_else(|| invalid(at_shstrndx as u64, "e_shstrndx", format!("section {shstrndx} does not exist")))?;
    if names.sh_type != SHT_NOBITS && names.offset.checked_add(names.size).is_none() {
        return Err(invalid(at_shstrndx as u64, "section name table", "its offset and size overflow"));
    }
    elf.sections = sections;
    elf.shstrndx = shstrndx;
    Ok(())
}

/// The names a general object reader lists for an archive's symbol index:
/// the entries of the static symbol table after the null one that are
/// global or weak (not `STB_LOCAL`), defined (not `SHN_UNDEF`) and neither
/// `STT_FILE` nor `STT_SECTION`, in table order. A listed symbol whose name
/// cannot be read is an error. `elf` should come from [`open`].
pub fn names<'a>(elf: &ElfFile<'a>) -> Result<Vec<&'a [u8]>, ElfError> {
    let Some((index, table)) = table(elf, SHT_SYMTAB)? else { return Ok(Vec::new()) };
    let c = &elf.codec;
    let size = c.sym_size();
    let base = elf.sections.get(index).map_or(0, |s| s.offset);
    let mut out = Vec::new();
    for i in 1..table.entries.len() / size {
        let at = i * size;
        let file_offset = base.saturating_add(at as u64);
        let bad = || ElfError::Read(ReadError::truncated(elf.data, file_offset, size as u64, "symbol table entry"));
        let name = c.u32(table.entries, at).ok_or_else(bad)?;
        let (info, shndx) = if c.is64 {
            (*table.entries.get(at + 4).ok_or_else(bad)?, c.u16(table.entries, at + 6).ok_or_else(bad)?)
        } else {
            (*table.entries.get(at + 12).ok_or_else(bad)?, c.u16(table.entries, at + 14).ok_or_else(bad)?)
        };
        if info >> 4 == STB_LOCAL || shndx == SHN_UNDEF || matches!(info & 0xf, STT_FILE | STT_SECTION) {
            continue;
        }
        let name = table.strings.and_then(|t| c_string(t, name)).ok_or_else(|| {
            invalid(file_offset, "st_name", format!("{name:#x} is not a NUL-terminated string of the string table"))
        })?;
        out.push(name);
    }
    Ok(out)
}

/// The first section of type `sh_type` (`SHT_SYMTAB` or `SHT_DYNSYM`) with
/// its index, checked: whole entries in the file, `sh_link` 0 or an
/// `SHT_STRTAB` section, and an extended index table (`SHT_SYMTAB_SHNDX`)
/// linked to it in the file. `None` when there is no such section.
fn table<'a>(elf: &ElfFile<'a>, sh_type: u32) -> Result<Option<(usize, Table<'a>)>, ElfError> {
    let Some(index) = elf.sections.iter().position(|s| s.sh_type == sh_type) else { return Ok(None) };
    let entries = data(elf, index)?;
    let whole = |section: usize, len: usize, size: usize, what| {
        if len.is_multiple_of(size) {
            Ok(())
        } else {
            let why = format!("{len} bytes, not a whole number of {size}-byte entries");
            Err(invalid(header_field(elf, section, 32, 20), what, why))
        }
    };
    whole(index, entries.len(), elf.codec.sym_size(), "sh_size of a symbol table")?;
    let link = elf.sections.get(index).map_or(0, |s| s.link as usize);
    let at = header_field(elf, index, 40, 24);
    // `sh_link` 0: no string table, so every name lookup fails.
    let strings = if link == 0 {
        None
    } else {
        let strings_header = elf
            .sections
            .get(link)
            .ok_or_else(|| invalid(at, "sh_link of a symbol table", format!("section {link} does not exist")))?;
        if strings_header.sh_type != SHT_STRTAB {
            return Err(invalid(at, "sh_link of a symbol table", format!("section {link} is not SHT_STRTAB")));
        }
        if strings_header.offset.checked_add(strings_header.size).is_none() {
            let why = format!("section {link}'s offset and size overflow");
            return Err(invalid(at, "sh_link of a symbol table", why));
        }
        elf.section_data(link).ok()
    };
    for (i, s) in elf.sections.iter().enumerate() {
        if s.sh_type == SHT_SYMTAB_SHNDX && s.link as usize == index {
            whole(i, data(elf, i)?.len(), 4, "sh_size of an extended index table")?;
        }
    }
    Ok(Some((index, Table { entries, strings })))
}

/// The contents of section `index` as a general reader takes them: none
/// for `SHT_NOBITS` and for an empty section wherever it claims to lie.
fn data<'a>(elf: &ElfFile<'a>, index: usize) -> Result<&'a [u8], ElfError> {
    match elf.sections.get(index) {
        Some(sh) if sh.size == 0 => Ok(&[]),
        _ => elf.section_data(index),
    }
}

/// The file offset of a field of section header `index`: `at64` bytes
/// into an ELF64 header, `at32` into an ELF32 one (for messages).
fn header_field(elf: &ElfFile<'_>, index: usize, at64: u64, at32: u64) -> u64 {
    let c = &elf.codec;
    let shoff = c.word(elf.data, 24 + 2 * c.word_size()).unwrap_or(0);
    let field = if c.is64 { at64 } else { at32 };
    shoff.saturating_add((index as u64).saturating_mul(c.shdr_size() as u64)).saturating_add(field)
}

/// Checks that the program header table lies in the file with entries of
/// this class's size (`e_phnum` may be extended through section 0).
fn program_headers(elf: &ElfFile<'_>) -> Result<(), ElfError> {
    let c = &elf.codec;
    let w = c.word_size();
    let data = elf.data;
    let phoff = c.word(data, 24 + w).unwrap_or(0);
    if phoff == 0 {
        return Ok(());
    }
    let phentsize = c.u16(data, 24 + 3 * w + 4 + 2).unwrap_or(0);
    let count = match elf.header.phnum {
        PN_XNUM => u64::from(
            section_zero(elf)?
                .ok_or_else(|| invalid((24 + 3 * w + 8) as u64, "e_phnum", "PN_XNUM without a section 0"))?
                .info,
        ),
        n => u64::from(n),
    };
    if count == 0 {
        return Ok(());
    }
    let entry = if c.is64 { 56 } else { 32 };
    if phentsize != entry {
        let why = format!("{phentsize}, not {entry} for this ELF class");
        return Err(invalid((24 + 3 * w + 6) as u64, "e_phentsize", why));
    }
    let len = count.saturating_mul(u64::from(entry));
    crate::bytes::require(data, phoff, len, "program header table").map_err(ElfError::Read)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A little-endian ELF64 relocatable object with a symbol table of
    /// `symbols` (name, st_info, st_shndx), its string table and a section
    /// name table.
    fn object(symbols: &[(&str, u8, u16)]) -> Vec<u8> {
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 24];
        for (name, info, shndx) in symbols {
            let off = strtab.len() as u32;
            strtab.extend_from_slice(name.as_bytes());
            strtab.push(0);
            let mut e = vec![0u8; 24];
            e[..4].copy_from_slice(&off.to_le_bytes());
            e[4] = *info;
            e[6..8].copy_from_slice(&shndx.to_le_bytes());
            symtab.extend_from_slice(&e);
        }
        let shstrtab = b"\0.symtab\0.strtab\0.shstrtab\0".to_vec();
        let mut out = vec![0u8; 64];
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2;
        out[5] = 1;
        out[6] = 1;
        out[16] = 1; // ET_REL
        out[18] = 62;
        out[20] = 1;
        let place = |bytes: &[u8], out: &mut Vec<u8>| {
            let at = out.len() as u64;
            out.extend_from_slice(bytes);
            at
        };
        let sym_at = place(&symtab, &mut out);
        let str_at = place(&strtab, &mut out);
        let shs_at = place(&shstrtab, &mut out);
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let shoff = out.len() as u64;
        let header = |name: u32, ty: u32, off: u64, size: u64, link: u32, entsize: u64| {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&ty.to_le_bytes());
            h[24..32].copy_from_slice(&off.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[56..64].copy_from_slice(&entsize.to_le_bytes());
            h
        };
        out.extend_from_slice(&[0u8; 64]);
        out.extend_from_slice(&header(1, SHT_SYMTAB, sym_at, symtab.len() as u64, 2, 24));
        out.extend_from_slice(&header(9, SHT_STRTAB, str_at, strtab.len() as u64, 0, 0));
        out.extend_from_slice(&header(17, SHT_STRTAB, shs_at, shstrtab.len() as u64, 0, 0));
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out[58..60].copy_from_slice(&64u16.to_le_bytes());
        out[60..62].copy_from_slice(&4u16.to_le_bytes());
        out[62..64].copy_from_slice(&3u16.to_le_bytes());
        out
    }

    #[test]
    fn lists_defined_globals_and_weaks_only() {
        let data = object(&[
            ("file.c", STT_FILE, 0xfff1),
            ("local", 0x02, 1),
            ("section", 0x13, 1),
            ("undefined", 0x12, SHN_UNDEF),
            ("global", 0x12, 1),
            ("weak", 0x21, 1),
            ("absolute", 0x10, 0xfff1),
        ]);
        let elf = open(&data).unwrap();
        let listed: Vec<&[u8]> = names(&elf).unwrap();
        assert_eq!(listed, [&b"global"[..], b"weak", b"absolute"]);
    }

    #[test]
    fn refuses_broken_tables_and_bad_names_of_listed_symbols() {
        let data = object(&[("global", 0x12, 1)]);
        // The symbol table's sh_link pointing at the symbol table itself.
        let mut bad_link = data.clone();
        let shoff = u64::from_le_bytes(data[40..48].try_into().unwrap()) as usize;
        bad_link[shoff + 64 + 40] = 1;
        assert!(open(&bad_link).is_err());
        // No string table (sh_link 0): the file opens, a listed name
        // cannot be read.
        let mut no_strings = data.clone();
        no_strings[shoff + 64 + 40] = 0;
        assert!(names(&open(&no_strings).unwrap()).is_err());
        // A section name table that is not one: ElfFile::parse refuses
        // the file, opening it for its symbols does not.
        let mut names_table = data.clone();
        names_table[62] = 1;
        assert!(ElfFile::parse(&names_table).is_err());
        assert_eq!(names(&open(&names_table).unwrap()).unwrap(), [&b"global"[..]]);
        // A symbol table that is not a whole number of entries.
        let mut partial = data.clone();
        partial[shoff + 64 + 32] -= 1;
        assert!(open(&partial).is_err());
        // A version other than 1.
        let mut version = data.clone();
        version[6] = 2;
        assert!(open(&version).is_err());
        // A listed name past its string table is an error; the same offset
        // on a local symbol is not looked at.
        let mut name = data.clone();
        name[64 + 24] = 0xff;
        let elf = open(&name).unwrap();
        assert!(names(&elf).is_err());
        name[64 + 24 + 4] = 0x02;
        let elf = open(&name).unwrap();
        assert!(names(&elf).unwrap().is_empty());
        // A program header table past the end.
        let mut ph = data;
        ph[32] = 0x40;
        ph[54] = 56;
        ph[56] = 200;
        assert!(open(&ph).is_err());
    }
}
