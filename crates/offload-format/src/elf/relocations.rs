//! Reading the static relocations that apply to one section, and the
//! section a relocation's symbol lies in: what the scan needs to follow a
//! CUDA registration record of a relocatable object to its fat binary
//! (`docs/formats/cuda-fatbin.md` §2). The entry layouts are the System V
//! ABI's (`Elf32_Rel`/`Elf32_Rela`/`Elf64_Rel`/`Elf64_Rela`).

use super::{ElfFile, SHN_LORESERVE, SHT_REL, SHT_RELA, SHT_SYMTAB};

/// One relocation entry, fields widened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Relocation {
    /// `r_offset`: where in the target section the field lies.
    pub offset: u64,
    /// The symbol index from `r_info` (0: no symbol).
    pub symbol: u32,
    /// `r_addend` for `SHT_RELA`; `None` for `SHT_REL`, whose addend is the
    /// field's own contents.
    pub addend: Option<i64>,
}

/// The relocations of every `SHT_REL` / `SHT_RELA` section that applies to
/// section `target` (its `sh_info`) through the static symbol table (its
/// `sh_link` is the first `SHT_SYMTAB`), in section order. Relocation
/// sections whose entries cannot be read are skipped, and so is a last
/// partial entry: the reader is liberal, callers check what they use.
pub fn for_section(elf: &ElfFile<'_>, target: usize) -> Vec<Relocation> {
    let symtab = elf.sections.iter().position(|s| s.sh_type == SHT_SYMTAB).unwrap_or(0);
    let c = &elf.codec;
    let mut out = Vec::new();
    for (index, sh) in elf.sections.iter().enumerate() {
        let rela = match sh.sh_type {
            SHT_REL => false,
            SHT_RELA => true,
            _ => continue,
        };
        if target == 0 || sh.info as usize != target || sh.link as usize != symtab {
            continue;
        }
        let Ok(data) = elf.section_data(index) else { continue };
        let size = c.rel_size(rela);
        let w = c.word_size();
        for at in (0..data.len() / size).map(|i| i * size) {
            let (Some(offset), Some(info)) = (c.word(data, at), c.word(data, at + w)) else { break };
            let symbol = if c.is64 { (info >> 32) as u32 } else { (info >> 8) as u32 };
            let addend = if rela {
                match c.word(data, at + 2 * w) {
                    // A 32-bit addend is signed too.
                    Some(a) if c.is64 => Some(a.cast_signed()),
                    Some(a) => Some(i64::from((a as u32).cast_signed())),
                    None => break,
                }
            } else {
                None
            };
            out.push(Relocation { offset, symbol, addend });
        }
    }
    out
}

/// The index of the section symbol `index` of the static symbol table is
/// defined in; `None` for undefined, absolute and common symbols, indices
/// in the reserved range, and symbols past the end of the table.
pub fn symbol_section(elf: &ElfFile<'_>, index: u32) -> Option<usize> {
    let table = elf.sections.iter().position(|s| s.sh_type == SHT_SYMTAB)?;
    let data = elf.section_data(table).ok()?;
    let c = &elf.codec;
    let at = (index as usize).checked_mul(c.sym_size())?;
    if at.checked_add(c.sym_size())? > data.len() {
        return None;
    }
    let shndx = c.u16(data, at + if c.is64 { 6 } else { 14 })?;
    (shndx != 0 && u32::from(shndx) < SHN_LORESERVE).then_some(usize::from(shndx))
}
