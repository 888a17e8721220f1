//! `prune --mode cut` for relocatable objects (`ET_REL`): HIP `.hip_fatbin`
//! and CUDA `.nv_fatbin` / `__nv_relfatbin`. nvprune's outputs on objects
//! are really smaller; these are too.
//!
//! An object has no addresses and no program headers: the linker lays its
//! sections out again. So a fat binary section can shrink in place:
//!
//! * its pruned fat binaries are packed from the section start, each at the
//!   alignment the input kept (the largest power of two up to 4096 dividing
//!   every fat binary's old offset in the section), and `sh_size` becomes
//!   the end of the last one;
//! * every later section moves down by the bytes removed, rounded down to
//!   the largest `sh_addralign` among them (and 8, the section header
//!   table's), so each keeps its alignment; `e_shoff` follows;
//! * every reference into the section is moved with the fat binary it
//!   leads to: the `st_value` of `.symtab` symbols defined in it, and the
//!   addend of each RELA relocation through such a symbol (the section
//!   symbol's, usually: `R_X86_64_64 .hip_fatbin + offset`).
//!
//! What the rewrite does not understand is refused: a 32-bit or big-endian
//! file, program headers, a reference to anything but a fat binary's start,
//! REL relocations (implicit addends) through the section, relocations
//! applied to it (other than `R_*_NONE`), compact relocations, extended
//! section indices, and any section sharing its bytes.

use super::cut::{Patch, copy_patched};
use super::{PruneError, UnitChange};
// Symbols and RELA entries come in exact chunks: their fields' reads
// cannot fail, and the `unwrap_or(0)`s below are never taken.
use offload_format::bytes::{u16_le, u64_le};
use offload_format::elf::ET_REL;
use offload_format::elf::{ElfFile, SHN_XINDEX, SHT_CREL, SHT_DYNSYM, SHT_NOBITS, SHT_REL, SHT_RELA, SHT_SYMTAB};
use offload_format::plan::Plan;

/// Bytes of an ELF64 symbol and RELA entry.
const SYM_SIZE: u64 = 24;
const RELA_SIZE: u64 = 24;
const REL_SIZE: u64 = 16;
/// Bytes of an ELF64 section header.
const SHDR_SIZE: u64 = 64;

/// Names of the sections whose fat binaries are cut.
pub const FAT_SECTIONS: [&[u8]; 3] = [b".hip_fatbin", b".nv_fatbin", b"__nv_relfatbin"];

/// One fat binary section that shrinks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionCut {
    /// Its section index.
    pub index: usize,
    /// Its file offset in the object (unchanged).
    pub offset: u64,
    /// Its size in the input.
    pub old_size: u64,
    /// Its size in the output.
    pub new_size: u64,
    /// Bytes removed from the file after it (a multiple of the largest
    /// alignment of what follows).
    pub removed: u64,
    /// For each of its fat binaries: (index into the unit list, old offset
    /// in the section, new offset in the section).
    pub moves: Vec<(usize, u64, u64)>,
}

/// The layout of a cut object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectCut {
    /// The shrinking sections, by file offset.
    pub sections: Vec<SectionCut>,
    /// Field edits at object offsets outside the shrinking sections,
    /// sorted, apart.
    pub patches: Vec<Patch>,
    /// Bytes of the input object.
    pub input_len: u64,
}

fn refuse(why: impl Into<String>) -> PruneError {
    PruneError::CutRefused(why.into())
}

/// A symbol of `.symtab`, the fields a cut reads.
#[derive(Clone, Copy)]
struct Symbol {
    /// File offset of the entry.
    at: u64,
    shndx: u16,
    value: u64,
    size: u64,
}

fn symbols(file: &ElfFile, table: usize) -> Result<Vec<Symbol>, PruneError> {
    let data = file.section_data(table).map_err(|e| PruneError::CutRead(e.into()))?;
    let base = file.sections[table].offset;
    Ok(data
        .chunks_exact(SYM_SIZE as usize)
        .enumerate()
        .map(|(i, s)| Symbol {
            at: base + i as u64 * SYM_SIZE,
            shndx: u16_le(s, 6).unwrap_or(0),
            value: u64_le(s, 8).unwrap_or(0),
            size: u64_le(s, 16).unwrap_or(0),
        })
        .collect())
}

impl SectionCut {
    /// The new section offset of a reference to `old` (a section offset),
    /// or `None` when it leads to no fat binary's start. The section start
    /// stays the section start.
    pub fn moved(&self, old: u64) -> Option<u64> {
        if old == 0 {
            return Some(0);
        }
        self.moves.iter().find(|m| m.1 == old).map(|m| m.2)
    }
}

/// Plans the cut of the object `data`, whose fat binaries `units` lists
/// (zero-mode plans, their offsets `base` + an offset in `data`: `base` is
/// the member's offset in an archive, else 0).
pub fn plan_object_cut(data: &[u8], base: u64, units: &[UnitChange]) -> Result<ObjectCut, PruneError> {
    let file = ElfFile::parse(data).map_err(|e| PruneError::CutRead(e.into()))?;
    if file.header.e_type != ET_REL {
        return Err(refuse("not a relocatable object"));
    }
    if !file.codec.is64 || file.codec.big {
        return Err(refuse("only 64-bit little-endian objects are cut"));
    }
    if file.header.phnum != 0 {
        return Err(refuse("the object has program headers"));
    }
    let len = data.len() as u64;
    let shoff = u64_le(data, 40).unwrap_or(0);
    // Every section is read back by the check: one that cannot be read is
    // damage the cut would carry over.
    for i in 1..file.sections.len() {
        file.section_data(i).map_err(|e| PruneError::CutRead(e.into()))?;
    }

    // Group the units by the fat binary section holding them.
    let mut sections: Vec<SectionCut> = Vec::new();
    for (k, change) in units.iter().enumerate() {
        let at = change.unit.offset.checked_sub(base).ok_or_else(|| refuse("a fat binary lies before the object"))?;
        let found = (1..file.sections.len()).find(|&i| {
            let sh = file.sections[i];
            sh.sh_type != SHT_NOBITS && at >= sh.offset && at - sh.offset < sh.size
        });
        let Some(i) = found.filter(|&i| file.section_name(i).is_ok_and(|n| FAT_SECTIONS.contains(&n))) else {
            return Err(refuse(format!("the fat binary at {at:#x} lies in no fat binary section")));
        };
        let sh = file.sections[i];
        let rel = at - sh.offset;
        if rel.checked_add(change.new_used).is_none_or(|e| e > sh.size) || change.unit.used > sh.size - rel {
            return Err(refuse(format!("the fat binary at {at:#x} runs past its section")));
        }
        match sections.iter_mut().find(|s| s.index == i) {
            Some(s) => s.moves.push((k, rel, 0)),
            None => sections.push(SectionCut {
                index: i,
                offset: sh.offset,
                old_size: sh.size,
                new_size: 0,
                removed: 0,
                moves: vec![(k, rel, 0)],
            }),
        }
    }
    sections.sort_by_key(|s| s.offset);

    for s in &mut sections {
        s.moves.sort_by_key(|m| m.1);
        let mut align = 4096u64;
        while align > 1 && s.moves.iter().any(|m| !m.1.is_multiple_of(align)) {
            align /= 2;
        }
        let mut at = 0u64;
        for m in &mut s.moves {
            at = at.next_multiple_of(align);
            m.2 = at;
            at += units[m.0].new_used;
        }
        if at > s.old_size {
            return Err(refuse(format!("section {} would grow", file.display_name(s.index))));
        }
        s.new_size = at;
        let end = s.offset + s.old_size;
        // Everything after the section moves by a multiple of the largest
        // alignment among what follows.
        let mut follow = if shoff >= end { 8u64 } else { 1 };
        for (i, sh) in file.sections.iter().enumerate().skip(1) {
            let inside = sh.offset > s.offset && sh.offset < end;
            let overlaps = sh.sh_type != SHT_NOBITS && sh.size > 0 && sh.offset < end && s.offset < sh.offset + sh.size;
            if i != s.index && (inside || overlaps) {
                return Err(refuse(format!(
                    "section {} shares bytes with {}",
                    file.display_name(i),
                    file.display_name(s.index)
                )));
            }
            if sh.offset >= end {
                let a = sh.align.max(1);
                if !a.is_power_of_two() || a > 1 << 30 {
                    return Err(refuse(format!("section {} has alignment {a}", file.display_name(i))));
                }
                follow = follow.max(a);
            }
        }
        if shoff > s.offset && shoff < end {
            return Err(refuse("the section header table lies inside a fat binary section"));
        }
        s.removed = (s.old_size - s.new_size) / follow * follow;
    }

    let removed_before = |off: u64| -> u64 {
        sections.iter().filter(|s| s.offset + s.old_size <= off && s.old_size > 0).map(|s| s.removed).sum()
    };
    let mut patches = Vec::new();
    let new_shoff = shoff - removed_before(shoff);
    if new_shoff != shoff {
        patches.push(Patch { offset: 40, bytes: new_shoff.to_le_bytes().to_vec() });
    }
    for (i, sh) in file.sections.iter().enumerate().skip(1) {
        let entry = shoff + i as u64 * SHDR_SIZE;
        if let Some(s) = sections.iter().find(|s| s.index == i) {
            patches.push(Patch { offset: entry + 32, bytes: s.new_size.to_le_bytes().to_vec() });
        }
        let moved = sh.offset - removed_before(sh.offset);
        if moved != sh.offset {
            patches.push(Patch { offset: entry + 24, bytes: moved.to_le_bytes().to_vec() });
        }
    }
    reference_patches(&file, &sections, units, &mut patches)?;
    patches.sort_by_key(|p| p.offset);
    for pair in patches.windows(2) {
        if pair[0].offset + pair[0].bytes.len() as u64 > pair[1].offset {
            return Err(refuse(format!("two edits of the byte at {:#x}", pair[1].offset)));
        }
    }
    for p in &patches {
        let end = p.offset + p.bytes.len() as u64;
        if end > len || sections.iter().any(|s| p.offset < s.offset + s.old_size && s.offset < end) {
            return Err(refuse(format!("an edit at {:#x} falls inside a fat binary section", p.offset)));
        }
    }
    Ok(ObjectCut { sections, patches, input_len: len })
}

/// Symbol values and relocation addends that lead into a shrinking
/// section, moved with their fat binaries.
fn reference_patches(
    file: &ElfFile,
    sections: &[SectionCut],
    units: &[UnitChange],
    patches: &mut Vec<Patch>,
) -> Result<(), PruneError> {
    let cut_of = |shndx: u16| sections.iter().find(|s| s.index == usize::from(shndx));
    let is_cut = |index: u64| sections.iter().any(|s| s.index as u64 == index);
    for (t, sh) in file.sections.iter().enumerate() {
        match sh.sh_type {
            SHT_CREL => return Err(refuse("compact relocations (SHT_CREL) cannot be patched")),
            SHT_DYNSYM => return Err(refuse("a relocatable object with a dynamic symbol table")),
            SHT_SYMTAB => {}
            _ => continue,
        }
        let syms = symbols(file, t)?;
        let mut new_values = vec![None; syms.len()];
        for (j, sym) in syms.iter().enumerate() {
            if sym.shndx == SHN_XINDEX {
                return Err(refuse("extended section indices (SHN_XINDEX) are not handled"));
            }
            let Some(s) = cut_of(sym.shndx) else { continue };
            let Some(new) = s.moved(sym.value) else {
                return Err(refuse(format!(
                    "symbol {j} ({:#x}) points inside {}, at no fat binary's start",
                    sym.value,
                    file.display_name(s.index)
                )));
            };
            new_values[j] = Some(new);
            if new != sym.value {
                patches.push(Patch { offset: sym.at + 8, bytes: new.to_le_bytes().to_vec() });
            }
            // A sized symbol (nvcc's fatbinData is not; a `.size`d one may
            // be) shrinks with its fat binary, and never outgrows the section.
            let unit = s.moves.iter().find(|m| m.1 == sym.value).map(|m| &units[m.0]);
            let new_size = match unit {
                Some(u) if sym.size == u.unit.used => u.new_used,
                _ => sym.size,
            };
            if new_size != 0 && new.checked_add(new_size).is_none_or(|end| end > s.new_size) {
                return Err(refuse(format!("symbol {j} would run past the end of {}", file.display_name(s.index))));
            }
            if new_size != sym.size {
                patches.push(Patch { offset: sym.at + 16, bytes: new_size.to_le_bytes().to_vec() });
            }
        }
        for (r, rsh) in file.sections.iter().enumerate() {
            let rela = rsh.sh_type == SHT_RELA;
            if !(rela || rsh.sh_type == SHT_REL) || rsh.link as usize != t {
                continue;
            }
            let entries = file.section_data(r).map_err(|e| PruneError::CutRead(e.into()))?;
            let size = if rela { RELA_SIZE } else { REL_SIZE };
            let applied_to_cut = is_cut(u64::from(rsh.info));
            for (e, raw) in entries.chunks_exact(size as usize).enumerate() {
                let info = u64_le(raw, 8).unwrap_or(0);
                let (sym, r_type) = ((info >> 32) as usize, info as u32);
                if applied_to_cut && r_type != 0 {
                    return Err(refuse(format!(
                        "relocation section {} applies relocations inside a fat binary section",
                        file.display_name(r)
                    )));
                }
                let Some(symbol) = syms.get(sym) else {
                    return Err(refuse(format!("relocation {e} of {} names no symbol", file.display_name(r))));
                };
                let Some(s) = cut_of(symbol.shndx) else { continue };
                if !rela {
                    return Err(refuse(format!(
                        "REL relocations (implicit addends) in {} lead into {}",
                        file.display_name(r),
                        file.display_name(s.index)
                    )));
                }
                let addend = u64_le(raw, 16).unwrap_or(0);
                let target = symbol.value.wrapping_add(addend);
                let Some(new_target) = s.moved(target) else {
                    return Err(refuse(format!(
                        "relocation {e} of {} leads to {target:#x} in {}, at no fat binary's start",
                        file.display_name(r),
                        file.display_name(s.index)
                    )));
                };
                let new_value = new_values[sym].unwrap_or(symbol.value);
                let new_addend = new_target.wrapping_sub(new_value);
                if new_addend != addend {
                    let at = rsh.offset + e as u64 * size + 16;
                    patches.push(Patch { offset: at, bytes: new_addend.to_le_bytes().to_vec() });
                }
            }
        }
    }
    Ok(())
}

impl ObjectCut {
    /// Bytes removed from the object.
    pub fn removed(&self) -> u64 {
        self.sections.iter().map(|s| s.removed).sum()
    }

    /// Bytes of the output.
    pub fn output_len(&self) -> u64 {
        self.input_len - self.removed()
    }

    /// Where an object offset outside the shrinking sections lands.
    pub fn output_offset(&self, input: u64) -> u64 {
        input - self.sections.iter().filter(|s| s.offset + s.old_size <= input).map(|s| s.removed).sum::<u64>()
    }

    /// The new offset of unit `k` in the output object.
    pub fn unit_offset(&self, k: usize) -> Option<u64> {
        self.sections.iter().find_map(|s| s.moves.iter().find(|m| m.0 == k).map(|m| s.offset + m.2))
    }

    /// The output object: the input with each shrinking section's fat
    /// binaries packed and the bytes after it moved down. `data` is the
    /// object, `base` and `units` as given to [`plan_object_cut`].
    pub fn output_plan<'a>(&self, data: &'a [u8], base: u64, units: &[UnitChange<'a>]) -> Plan<'a> {
        let mut plan = Plan::new();
        let mut at = 0u64;
        for s in &self.sections {
            copy_patched(&mut plan, data, &self.patches, at, s.offset);
            let mut written = 0u64;
            for &(k, _, new) in &s.moves {
                let change = &units[k];
                plan.zeros(new - written);
                match &change.replacement {
                    Some(rep) => super::cut::append_prefix(&mut plan, rep, change.new_used),
                    None => {
                        let start = (change.unit.offset - base) as usize;
                        plan.borrow(data.get(start..start + change.unit.used as usize).unwrap_or(&[]));
                    }
                }
                written = new + change.new_used;
            }
            plan.zeros(s.old_size - s.removed - written);
            at = s.offset + s.old_size;
        }
        copy_patched(&mut plan, data, &self.patches, at, data.len() as u64);
        plan
    }
}

pub use super::check_object::verify_object_cut;
