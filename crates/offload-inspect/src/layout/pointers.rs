//! Where the pointer word of each wrapper record gets its run-time value
//! (docs/formats/host-references.md §1.2): a RELA relocation (`R_X86_64_RELATIVE`: the addend;
//! `R_X86_64_64`: a symbol's value plus the addend), a RELR bit (the word
//! in place), or nothing (an absolute address, non-PIE executables).
//! Relocatable objects carry `R_X86_64_64` against a symbol of
//! `.hip_fatbin` in `.rela.hipFatBinSegment`.

use super::LayoutError;
use offload_format::bytes::{slice, u16_le, u32_le, u64_le};
use offload_format::elf::R_X86_64_64;
use offload_format::elf::{ElfFile, SHF_ALLOC, SHT_RELA};
use std::collections::HashMap;

pub use offload_format::elf::R_X86_64_RELATIVE;
pub use offload_format::elf::SHT_RELR;

/// How a pointer word is given its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// `R_X86_64_RELATIVE` with this addend (the load bias is added).
    Relative {
        /// The relocation's addend: the pointer's value before the bias.
        addend: u64,
    },
    /// `R_X86_64_64` against a symbol (`-fgpu-rdc` aliases, objects).
    Symbolic {
        /// The symbol's name.
        symbol: String,
        /// The symbol's value.
        value: u64,
        /// The relocation's addend.
        addend: u64,
        /// The symbol's section index.
        section: u16,
    },
    /// A RELR entry: the word in place plus the load bias.
    Relr,
    /// No relocation: the word is the address.
    Absolute,
}

/// A relocation that applies to one word, as found.
#[derive(Clone, Debug)]
pub(super) enum Found {
    /// `entry`: the file offset of the RELA record, for rewriters that
    /// change its addend.
    Rela {
        r_type: u32,
        symbol_table: usize,
        symbol: u32,
        addend: u64,
        entry: u64,
    },
    Relr,
}

fn relr_words(file: &ElfFile, index: usize, wanted: &dyn Fn(u64) -> bool, out: &mut HashMap<u64, Vec<Found>>) {
    let Ok(data) = file.section_data(index) else { return };
    let mut base = 0u64;
    for entry in data.chunks_exact(8).filter_map(|w| u64_le(w, 0)) {
        if entry & 1 == 0 {
            if wanted(entry) {
                out.entry(entry).or_default().push(Found::Relr);
            }
            base = entry.wrapping_add(8);
        } else {
            for bit in 1..64 {
                let addr = base.wrapping_add((bit - 1) * 8);
                if (entry >> bit) & 1 == 1 && wanted(addr) {
                    out.entry(addr).or_default().push(Found::Relr);
                }
            }
            base = base.wrapping_add(63 * 8);
        }
    }
}

/// Collects the relocations that apply to addresses `wanted` accepts.
/// In linked files: every allocated RELA and RELR section. In relocatable
/// files: the RELA sections that apply to section `target_section`.
pub(super) fn relocations(
    file: &ElfFile,
    relocatable: bool,
    target_section: usize,
    wanted: &dyn Fn(u64) -> bool,
) -> Result<HashMap<u64, Vec<Found>>, LayoutError> {
    let mut out: HashMap<u64, Vec<Found>> = HashMap::new();
    for (index, sh) in file.sections.iter().enumerate() {
        let applies = if relocatable { sh.info as usize == target_section } else { sh.flags & SHF_ALLOC != 0 };
        if !applies {
            continue;
        }
        if sh.sh_type == SHT_RELR && !relocatable {
            relr_words(file, index, wanted, &mut out);
            continue;
        }
        if sh.sh_type != SHT_RELA {
            continue;
        }
        let data = file.section_data(index).map_err(LayoutError::Elf)?;
        for (n, rel) in data.chunks_exact(24).enumerate() {
            // Each entry is 24 bytes: the three words are inside it.
            let word = |i: usize| u64_le(rel, i * 8).unwrap_or(0);
            let (offset, info, addend) = (word(0), word(1), word(2));
            if wanted(offset) {
                out.entry(offset).or_default().push(Found::Rela {
                    r_type: info as u32,
                    symbol_table: sh.link as usize,
                    symbol: (info >> 32) as u32,
                    addend,
                    entry: sh.offset.wrapping_add(n as u64 * 24),
                });
            }
        }
    }
    Ok(out)
}

/// The name, value and section index of symbol `index` of table `table`.
fn symbol(file: &ElfFile, table: usize, index: u32) -> Result<(String, u64, u16), String> {
    let data = file.section_data(table).map_err(|e| e.to_string())?;
    let at = (index as usize).checked_mul(24).ok_or("symbol index overflows")?;
    let past = || format!("symbol {index} is past the end of its table");
    let sym = slice(data, at, 24usize).ok_or_else(past)?;
    // `sym` is 24 bytes: these reads cannot fail.
    let (name_off, shndx, value) =
        (u32_le(sym, 0).ok_or_else(past)?, u16_le(sym, 6).ok_or_else(past)?, u64_le(sym, 8).ok_or_else(past)?);
    let link = file.sections.get(table).map_or(0, |s| s.link as usize);
    let name = file
        .string_table(link)
        .ok()
        .and_then(|t| offload_format::elf::c_string(t, name_off))
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    Ok((name, value, shndx))
}

/// Turns what was found for one pointer word into its storage and value.
/// `in_place` is the word as stored in the file.
pub(super) fn resolve(
    file: &ElfFile,
    found: Option<&Vec<Found>>,
    in_place: u64,
    record: usize,
) -> Result<(Storage, u64), LayoutError> {
    let fail = |reason: String| LayoutError::Pointer { record, reason };
    let Some(found) = found else { return Ok((Storage::Absolute, in_place)) };
    let [one] = found.as_slice() else {
        return Err(fail(format!("{} relocations apply to its pointer", found.len())));
    };
    match one {
        Found::Relr => Ok((Storage::Relr, in_place)),
        Found::Rela { r_type: R_X86_64_RELATIVE, addend, .. } => Ok((Storage::Relative { addend: *addend }, *addend)),
        Found::Rela { r_type: R_X86_64_64, symbol_table, symbol: index, addend, .. } => {
            let (name, value, section) = symbol(file, *symbol_table, *index).map_err(fail)?;
            if section == 0 {
                return Err(fail(format!("its pointer names the undefined symbol '{name}'")));
            }
            let target = value.wrapping_add(*addend);
            Ok((Storage::Symbolic { symbol: name, value, addend: *addend, section }, target))
        }
        Found::Rela { r_type, .. } => Err(fail(format!("relocation type {r_type} is not supported for its pointer"))),
    }
}

/// One little-endian 8-byte word to write at a file offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WordEdit {
    /// File offset of the word.
    pub offset: u64,
    /// The value written there.
    pub value: u64,
}

/// The file offset of the one RELA entry found for a pointer word.
fn rela_entry(found: Option<&Vec<Found>>) -> Option<u64> {
    match found.map(Vec::as_slice) {
        Some([Found::Rela { entry, .. }]) => Some(*entry),
        _ => None,
    }
}

/// File offsets of the `st_value` words of every symbol named `name` with
/// value `value` in section `section`, in `.dynsym` and `.symtab` alike.
fn symbol_value_words(file: &ElfFile, name: &str, value: u64, section: u16) -> Vec<u64> {
    let mut words = Vec::new();
    for (index, sh) in file.sections.iter().enumerate() {
        if sh.sh_type != offload_format::elf::SHT_SYMTAB && sh.sh_type != offload_format::elf::SHT_DYNSYM {
            continue;
        }
        let Ok(data) = file.section_data(index) else { continue };
        for i in 0..data.len() / 24 {
            if let Ok((n, v, s)) = symbol(file, index, i as u32)
                && n == name
                && v == value
                && s == section
            {
                words.push(sh.offset + i as u64 * 24 + 8);
            }
        }
    }
    words
}

/// The word edits that make the pointer of every wrapper record of `map`
/// (a map of `data`) hold `new[i]` at run time, for each of the four
/// storages: the RELA addend (and the word in place when the linker wrote
/// a copy there), the RELR or absolute word in place, or, for a symbolic
/// `R_X86_64_64`, the symbol's `st_value` in `.dynsym` and `.symtab` (in a
/// relocatable object: the relocation's addend). Wrappers whose pointer
/// does not change give no edit. Sorted by offset, one edit per word.
pub(super) fn edits(data: &[u8], map: &super::FileMap, new: &[u64]) -> Result<Vec<WordEdit>, LayoutError> {
    let fail = |record: usize, reason: &str| LayoutError::Pointer { record, reason: reason.to_string() };
    if new.len() != map.wrappers.len() {
        return Err(fail(0, "the number of new pointers differs from the number of wrapper records"));
    }
    let file = ElfFile::parse(data).map_err(LayoutError::Elf)?;
    let wrapper_section = map.section.wrapper_section().as_bytes();
    let Some(seg_index) = (1..file.sections.len()).find(|&i| file.section_name(i).ok() == Some(wrapper_section)) else {
        return Ok(Vec::new());
    };
    let words: std::collections::HashSet<u64> = map.wrappers.iter().map(|w| w.addr.wrapping_add(8)).collect();
    let relocs = relocations(&file, map.relocatable, seg_index, &|a| words.contains(&a))?;
    let mut out = Vec::new();
    for (record, (w, &target)) in map.wrappers.iter().zip(new).enumerate() {
        if target == w.pointer {
            continue;
        }
        let in_place = u64_le(data, w.offset + 8).ok_or_else(|| fail(record, "its pointer word is past the end"))?;
        let copy_in_place = WordEdit { offset: w.offset + 8, value: target };
        let found = relocs.get(&w.addr.wrapping_add(8));
        match &w.storage {
            Storage::Absolute | Storage::Relr => out.push(copy_in_place),
            Storage::Relative { .. } => {
                let at = rela_entry(found).ok_or_else(|| fail(record, "its RELA entry cannot be found again"))?;
                out.push(WordEdit { offset: at + 16, value: target });
                if in_place != 0 {
                    out.push(copy_in_place);
                }
            }
            Storage::Symbolic { symbol, value, addend, section } => {
                if map.relocatable {
                    let at = rela_entry(found).ok_or_else(|| fail(record, "its RELA entry cannot be found again"))?;
                    out.push(WordEdit { offset: at + 16, value: target.wrapping_sub(*value) });
                } else {
                    let at = symbol_value_words(&file, symbol, *value, *section);
                    if at.is_empty() {
                        return Err(fail(record, &format!("its symbol '{symbol}' cannot be found again")));
                    }
                    let value = target.wrapping_sub(*addend);
                    out.extend(at.into_iter().map(|offset| WordEdit { offset, value }));
                }
                if in_place != 0 {
                    out.push(copy_in_place);
                }
            }
        }
    }
    out.sort();
    out.dedup();
    if let Some(pair) = out.windows(2).find(|p| p[0].offset == p[1].offset) {
        let at = pair[0].offset;
        return Err(fail(0, &format!("two wrappers need different values in the word at {at:#x} (a shared symbol)")));
    }
    Ok(out)
}

/// One dynamic relocation of a linked file, for audits of what points
/// where (the cut refuses relocations it does not understand).
#[derive(Clone, Debug)]
pub enum Reloc {
    /// A RELR bit: the word at `place` gets the load bias added.
    Relr { place: u64 },
    /// A RELA (or REL, addend 0) entry, with its symbol's name, value and
    /// section index when it names one.
    Rela { place: u64, r_type: u32, addend: u64, symbol: Option<(String, u64, u16)> },
}

/// The relocation types the cut knows how to move: `R_X86_64_RELATIVE`
/// and `R_X86_64_64`.
pub const fn known_pointer_type(r_type: u32) -> bool {
    r_type == R_X86_64_RELATIVE || r_type == R_X86_64_64
}

/// Calls `f` for every relocation in the allocated REL, RELA and RELR
/// sections of a linked file.
pub fn for_each_relocation(file: &ElfFile, f: &mut dyn FnMut(Reloc)) -> Result<(), LayoutError> {
    for (index, sh) in file.sections.iter().enumerate() {
        if sh.flags & SHF_ALLOC == 0 {
            continue;
        }
        if sh.sh_type == SHT_RELR {
            let mut places = HashMap::new();
            relr_words(file, index, &|_| true, &mut places);
            places.into_keys().for_each(|place| f(Reloc::Relr { place }));
            continue;
        }
        let size = match sh.sh_type {
            SHT_RELA => 24,
            offload_format::elf::SHT_REL => 16,
            _ => continue,
        };
        let data = file.section_data(index).map_err(LayoutError::Elf)?;
        for rel in data.chunks_exact(size) {
            let word = |i: usize| u64_le(rel, i as u64 * 8).unwrap_or(0);
            let (place, info) = (word(0), word(1));
            let addend = if size == 24 { word(2) } else { 0 };
            let index = (info >> 32) as u32;
            let symbol = if index == 0 { None } else { symbol(file, sh.link as usize, index).ok() };
            f(Reloc::Rela { place, r_type: info as u32, addend, symbol });
        }
    }
    Ok(())
}
