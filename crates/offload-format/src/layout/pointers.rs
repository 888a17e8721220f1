//! Where the pointer word of each wrapper record gets its run-time value
//! (prune-spec §1.2): a RELA relocation (`R_X86_64_RELATIVE`: the addend;
//! `R_X86_64_64`: a symbol's value plus the addend), a RELR bit (the word
//! in place), or nothing (an absolute address, non-PIE executables).
//! Relocatable objects carry `R_X86_64_64` against a symbol of
//! `.hip_fatbin` in `.rela.hipFatBinSegment`.

use super::LayoutError;
use crate::elf::{ElfFile, SHF_ALLOC, SHT_RELA};
use std::collections::HashMap;

pub const SHT_RELR: u32 = 19;
const R_X86_64_64: u32 = 1;
pub(super) const R_X86_64_RELATIVE: u32 = 8;

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
    for word in data.chunks_exact(8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let entry = u64::from_le_bytes(w);
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
            let word = |i: usize| {
                let mut w = [0u8; 8];
                w.copy_from_slice(&rel[i * 8..i * 8 + 8]);
                u64::from_le_bytes(w)
            };
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
    let sym = data.get(at..at + 24).ok_or_else(|| format!("symbol {index} is past the end of its table"))?;
    let name_off = u32::from_le_bytes([sym[0], sym[1], sym[2], sym[3]]);
    let shndx = u16::from_le_bytes([sym[6], sym[7]]);
    let mut v = [0u8; 8];
    v.copy_from_slice(&sym[8..16]);
    let link = file.sections.get(table).map_or(0, |s| s.link as usize);
    let name = file
        .string_table(link)
        .ok()
        .and_then(|t| crate::elf::c_string(t, name_off))
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    Ok((name, u64::from_le_bytes(v), shndx))
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
