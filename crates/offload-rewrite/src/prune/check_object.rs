//! The check a cut object passes before it is written, read back from its
//! own bytes: it parses; every section keeps its name, type, flags,
//! address, link, info, alignment and entry size, its size (a fat binary
//! section: its planned size) and sits at its planned offset; each fat
//! binary section holds exactly the planned fat binaries at their planned
//! offsets, zeros between them, each with exactly its kept entries (the
//! input's bytes); every other section's bytes are the input's except the
//! planned symbol and addend fields; and every relocation and symbol that
//! led to a fat binary leads to the same fat binary.

use super::cut_object::{FAT_SECTIONS, ObjectCut};
use super::files::check_unit;
use super::{PruneError, UnitChange};
use offload_format::elf::{ElfFile, SHT_NOBITS, SHT_RELA, SHT_SYMTAB};
use offload_inspect::layout::fatbin;

fn fail(msg: String) -> PruneError {
    PruneError::Verify(msg)
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    offload_format::bytes::u64_le(data, at).unwrap_or(0)
}

/// The fat binary starts (section offsets) of a fat binary section, as
/// its own format's reader finds them.
fn unit_starts(file: &ElfFile, index: usize) -> Result<Vec<u64>, PruneError> {
    let data = file.section_data(index).map_err(|e| PruneError::VerifyRead(e.into()))?;
    if file.section_name(index).ok() == Some(b".hip_fatbin".as_slice()) {
        let units = fatbin::walk(data, 0).map_err(|e| PruneError::VerifyRead(e.into()))?;
        return Ok(units.iter().map(|u| u.section_offset).collect());
    }
    offload_format::cuda::fat_binaries(data)
        .map(|f| f.map(|(at, _)| at as u64).map_err(|e| PruneError::VerifyRead(e.into())))
        .collect()
}

/// The (section index, value) of every `.symtab` symbol, and for every
/// RELA entry (symbol index, addend), in file order.
type References = (Vec<(u16, u64)>, Vec<(usize, u64)>);

fn references(file: &ElfFile) -> Result<References, PruneError> {
    let mut syms = Vec::new();
    let mut relocs = Vec::new();
    for (i, sh) in file.sections.iter().enumerate().skip(1) {
        let data = file.section_data(i).map_err(|e| PruneError::VerifyRead(e.into()))?;
        if sh.sh_type == SHT_SYMTAB {
            let shndx = |s: &[u8]| offload_format::bytes::u16_le(s, 6).unwrap_or(0);
            syms.extend(data.chunks_exact(24).map(|s| (shndx(s), u64_at(s, 8))));
        } else if sh.sh_type == SHT_RELA {
            relocs.extend(data.chunks_exact(24).map(|r| ((u64_at(r, 8) >> 32) as usize, u64_at(r, 16))));
        }
    }
    Ok((syms, relocs))
}

/// Checks the cut object at `out_base` in `output` against the object at
/// `in_base` in `input`, its fat binaries `units` (offsets in `input`)
/// and the cut.
pub fn verify_object_cut(
    output: &[u8],
    out_base: u64,
    input: &[u8],
    in_base: u64,
    units: &[UnitChange],
    cut: &ObjectCut,
) -> Result<(), PruneError> {
    fn slice(d: &[u8], at: u64, len: u64) -> Option<&[u8]> {
        d.get(usize::try_from(at).ok()?..usize::try_from(at.checked_add(len)?).ok()?)
    }
    let (Some(new_bytes), Some(old_bytes)) =
        (slice(output, out_base, cut.output_len()), slice(input, in_base, cut.input_len))
    else {
        return Err(fail("the cut object is not where it was planned".into()));
    };
    let old = ElfFile::parse(old_bytes).map_err(|e| PruneError::VerifyRead(e.into()))?;
    let new = ElfFile::parse(new_bytes).map_err(|e| PruneError::VerifyRead(e.into()))?;
    if old.sections.len() != new.sections.len() {
        return Err(fail("the number of sections changed".into()));
    }
    for (i, (a, b)) in old.sections.iter().zip(&new.sections).enumerate().skip(1) {
        let name = old.display_name(i);
        let shrunk = cut.sections.iter().find(|s| s.index == i);
        let size = shrunk.map_or(a.size, |s| s.new_size);
        let same = a.same_but_placement(b)
            && b.size == size
            && b.offset == cut.output_offset(a.offset)
            && (a.align <= 1 || b.sh_type == SHT_NOBITS || b.offset % a.align == a.offset % a.align);
        if !same {
            return Err(fail(format!("the header of section {name} changed")));
        }
        if b.sh_type == SHT_NOBITS || b.size == 0 {
            continue;
        }
        let (Ok(inp), Ok(out)) = (old.section_data(i), new.section_data(i)) else {
            return Err(fail(format!("section {name} cannot be read")));
        };
        if let Some(s) = shrunk {
            let starts = unit_starts(&new, i)?;
            let planned: Vec<u64> = s.moves.iter().map(|m| m.2).collect();
            if starts != planned || !new.section_name(i).is_ok_and(|n| FAT_SECTIONS.contains(&n)) {
                return Err(fail(format!("section {name} holds fat binaries at {starts:x?}, {planned:x?} planned")));
            }
            let mut at = 0u64;
            for &(k, _, offset) in &s.moves {
                let change = &units[k];
                if out.get(at as usize..offset as usize).is_none_or(|gap| gap.iter().any(|&b| b != 0)) {
                    return Err(fail(format!("section {name}: non-zero bytes before {offset:#x}")));
                }
                let placed = out_base + s.offset + offset;
                if change.changed() {
                    check_unit(output, placed as usize, input, change)?;
                } else {
                    let was = slice(input, change.unit.offset, change.unit.used);
                    if slice(output, placed, change.unit.used) != was {
                        return Err(fail(format!("section {name}: the unchanged fat binary at {offset:#x} differs")));
                    }
                }
                at = offset + change.new_used;
            }
            continue;
        }
        let base = a.offset;
        let mut at = 0usize;
        for p in cut.patches.iter().filter(|p| p.offset >= base && p.offset < base + a.size) {
            let from = (p.offset - base) as usize;
            let to = from + p.bytes.len();
            if out.get(at..from) != inp.get(at..from) || out.get(from..to) != Some(p.bytes.as_slice()) {
                return Err(fail(format!("section {name} changed beyond its planned fields")));
            }
            at = to;
        }
        if out.get(at..) != inp.get(at..) {
            return Err(fail(format!("section {name} changed beyond its planned fields")));
        }
    }
    check_references(&old, &new, cut)
}

/// Every symbol and RELA relocation that led into a shrunk section leads
/// to the new place of the same fat binary; the others are unchanged.
fn check_references(old: &ElfFile, new: &ElfFile, cut: &ObjectCut) -> Result<(), PruneError> {
    let (old_syms, old_relocs) = references(old)?;
    let (new_syms, new_relocs) = references(new)?;
    if old_syms.len() != new_syms.len() || old_relocs.len() != new_relocs.len() {
        return Err(fail("the number of symbols or relocations changed".into()));
    }
    let cut_of = |shndx: u16| cut.sections.iter().find(|s| s.index == usize::from(shndx));
    for (j, (a, b)) in old_syms.iter().zip(&new_syms).enumerate() {
        let want = cut_of(a.0).map_or(Some(a.1), |s| s.moved(a.1));
        if a.0 != b.0 || want != Some(b.1) {
            return Err(fail(format!("symbol {j} does not lead where it led")));
        }
    }
    for (e, (a, b)) in old_relocs.iter().zip(&new_relocs).enumerate() {
        let sym = |syms: &[(u16, u64)]| syms.get(a.0).copied();
        let (Some(os), Some(ns)) = (sym(&old_syms), sym(&new_syms)) else { continue };
        let want = match cut_of(os.0) {
            Some(s) => s.moved(os.1.wrapping_add(a.1)),
            None => Some(os.1.wrapping_add(a.1)),
        };
        if a.0 != b.0 || want != Some(ns.1.wrapping_add(b.1)) {
            return Err(fail(format!("relocation {e} does not lead to the fat binary it led to")));
        }
    }
    Ok(())
}
