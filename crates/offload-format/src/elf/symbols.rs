//! Reading the symbols of a `SHT_SYMTAB` section, bounds-checked: what the
//! kernel readers (`docs/formats/kernels.md`) need to find a kernel's
//! descriptor (AMDGPU `*.kd`) or the symbol an `.nv.info` record names.

use super::ElfError;
use super::{ElfFile, SHT_SYMTAB, c_string, invalid, truncated};

/// `STT_FUNC`.
pub const STT_FUNC: u8 = 2;

/// One symbol table entry, fields widened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// The name (empty when it has none).
    pub name: &'a [u8],
    /// `st_info`: binding in the high nibble, type in the low one.
    pub info: u8,
    /// `st_shndx`.
    pub shndx: u16,
    /// `st_value`.
    pub value: u64,
    /// `st_size`.
    pub size: u64,
}

impl Symbol<'_> {
    /// The type (`STT_*`).
    pub fn kind(&self) -> u8 {
        self.info & 0xf
    }
}

/// The entries of the first `SHT_SYMTAB` section, index 0 (the null
/// symbol) included, so that a position is the symbol's index. Empty when
/// the file has no symbol table. The count is bounded by the section's
/// size, itself checked against the file.
pub fn symtab<'a>(elf: &ElfFile<'a>) -> Result<Vec<Symbol<'a>>, ElfError> {
    let Some(index) = elf.sections.iter().position(|s| s.sh_type == SHT_SYMTAB) else {
        return Ok(Vec::new());
    };
    let data = elf.section_data(index)?;
    let link = elf.sections.get(index).map_or(0, |s| s.link as usize);
    let names = elf.string_table(link)?;
    let c = &elf.codec;
    let size = c.sym_size();
    let count = data.len() / size;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = i * size;
        let entry = elf.sections.get(index).map_or(0, |s| s.offset).saturating_add(at as u64);
        let bad = || truncated(elf.data, entry, size as u64, "symbol table entry");
        let name_off = c.u32(data, at).ok_or_else(bad)?;
        let (info, shndx, value, sym_size) = if c.is64 {
            (
                *data.get(at + 4).ok_or_else(bad)?,
                c.u16(data, at + 6).ok_or_else(bad)?,
                c.u64(data, at + 8).ok_or_else(bad)?,
                c.u64(data, at + 16).ok_or_else(bad)?,
            )
        } else {
            (
                *data.get(at + 12).ok_or_else(bad)?,
                c.u16(data, at + 14).ok_or_else(bad)?,
                u64::from(c.u32(data, at + 4).ok_or_else(bad)?),
                u64::from(c.u32(data, at + 8).ok_or_else(bad)?),
            )
        };
        let name = c_string(names, name_off).ok_or_else(|| {
            let why = format!("symbol {i} has a name offset {name_off:#x} past its string table");
            invalid(entry, "symbol name", why)
        })?;
        out.push(Symbol { name, info, shndx, value, size: sym_size });
    }
    Ok(out)
}

/// The `len` bytes a defined symbol's value points at in its section:
/// `st_value` is an address in executables and shared objects and an offset
/// into the section in relocatable files (where `sh_addr` is 0), so the
/// file offset is `sh_offset + st_value - sh_addr` in both. `None` when the
/// section is not in the file or the bytes run past it.
pub fn symbol_bytes<'a>(elf: &ElfFile<'a>, sym: &Symbol<'_>, len: u64) -> Option<&'a [u8]> {
    let sh = elf.sections.get(usize::from(sym.shndx)).filter(|_| sym.shndx != 0)?;
    let data = elf.section_data(usize::from(sym.shndx)).ok()?;
    let start = sym.value.checked_sub(sh.addr)?;
    let end = start.checked_add(len)?;
    data.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
}
