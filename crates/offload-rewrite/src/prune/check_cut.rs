//! The check a cut output passes before it is written (docs/formats/host-references.md §6,
//! "Verification without a GPU", 1 and 2), read back from its own bytes:
//! its map finds every fat binary at its planned offset and every wrapper
//! leading to it; each rewritten fat binary holds exactly the kept entries
//! and each other one is the input's; the PT_LOADs are sorted, congruent
//! and apart; every other program header covers the same addresses; every
//! section keeps its name, type, flags, address and size (`.hip_fatbin`
//! its new size), every allocated one is mapped from its new offset, and
//! its bytes are the input's except for the planned pointer fields.

use super::check::{fail, plan_starts_with, same_entries};
use super::cut::CutPlan;
use super::{PruneError, Pruned};
use offload_format::elf::segments::{self, PT_LOAD, PT_PHDR, Segment};
use offload_format::elf::{ElfFile, SHF_ALLOC, SHT_NOBITS};
use offload_inspect::layout::{FatbinSection, FileMap, Target, UnitKind};

/// Checks a cut `output` against `input`, its map, the prune and the cut.
pub fn verify_cut(
    output: &[u8],
    input: &[u8],
    input_map: &FileMap,
    pruned: &Pruned,
    cut: &CutPlan,
) -> Result<(), PruneError> {
    let expected = cut.output_len(input.len() as u64);
    if output.len() as u64 != expected {
        return Err(fail(format!("it is {} bytes, {expected} planned", output.len())));
    }
    let map = match input_map.section {
        FatbinSection::Hip => FileMap::read(output),
        FatbinSection::Cuda => FileMap::read_cuda(output),
    };
    let map = map.map_err(|e| PruneError::VerifyRead(e.into()))?;
    check_units(output, input, input_map, &map, pruned, cut)?;
    verify_layout(output, input, cut)
}

/// The checks every cut output passes, whatever its section: its size,
/// program headers and section headers (the units are the caller's).
pub(crate) fn verify_layout(output: &[u8], input: &[u8], cut: &CutPlan) -> Result<(), PruneError> {
    let expected = cut.output_len(input.len() as u64);
    if output.len() as u64 != expected {
        return Err(fail(format!("it is {} bytes, {expected} planned", output.len())));
    }
    let (_, old_segments) = segments::read(input).map_err(|e| PruneError::VerifyRead(e.into()))?;
    let (phoff, new_segments) = segments::read(output).map_err(|e| PruneError::VerifyRead(e.into()))?;
    check_segments(&old_segments, &new_segments, phoff, output.len() as u64)?;
    check_sections(output, input, &new_segments, cut)
}

fn check_units(
    output: &[u8],
    input: &[u8],
    input_map: &FileMap,
    map: &FileMap,
    pruned: &Pruned,
    cut: &CutPlan,
) -> Result<(), PruneError> {
    if map.fatbin_addr != input_map.fatbin_addr || map.fatbin_size != cut.fatbin_size {
        let name = cut.section_name;
        return Err(fail(format!("{name} is {} bytes at {:#x}", map.fatbin_size, map.fatbin_addr)));
    }
    if map.units.len() != pruned.units.len() {
        return Err(fail(format!("{} fat binaries, the input has {}", map.units.len(), pruned.units.len())));
    }
    for ((unit, change), &offset) in map.units.iter().zip(&pruned.units).zip(&cut.unit_offsets) {
        if unit.offset != offset || unit.used != change.new_used {
            return Err(fail(format!("the fat binary planned at {offset:#x} is not there")));
        }
        if let (UnitKind::Compressed { .. }, Some(rep)) = (unit.kind, &change.replacement) {
            // Checked when it was made (`rebuild::round_trip`); what is left
            // is that exactly these bytes were written, as in zero mode.
            let written = super::unit_bytes(output, unit)?;
            if written.len() as u64 != change.new_used || !plan_starts_with(rep, written) {
                return Err(fail(format!(
                    "the fat binary at {offset:#x} is not the recompressed bundle that was checked"
                )));
            }
        } else if change.changed() && unit.kind == UnitKind::Cuda {
            crate::prune::files::check_unit(output, offset as usize, input, change)?;
        } else if change.changed() {
            same_entries(output, unit, input, change)?;
        } else {
            let (a, b) = (super::unit_bytes(output, unit)?, super::unit_bytes(input, &change.unit)?);
            if a != b {
                return Err(fail(format!("the unchanged fat binary now at {offset:#x} differs from the input's")));
            }
        }
    }
    if map.wrappers.len() != input_map.wrappers.len() {
        return Err(fail("the number of wrapper records changed".into()));
    }
    for (i, (new, old)) in map.wrappers.iter().zip(&input_map.wrappers).enumerate() {
        let Target::Unit(u) = old.target else { return Err(fail(format!("wrapper {i} was dangling"))) };
        let planned = cut.unit_offsets.get(u).map(|o| o - cut.fatbin_offset + cut.fatbin_addr);
        if new.target != old.target || Some(new.pointer) != planned {
            return Err(fail(format!("wrapper record {i} leads to {:#x}, not to its fat binary", new.pointer)));
        }
    }
    Ok(())
}

fn check_segments(old: &[Segment], new: &[Segment], phoff: u64, file_len: u64) -> Result<(), PruneError> {
    segments::check_loads(new, file_len).map_err(fail)?;
    let table_len = new.len() as u64 * segments::PHDR_SIZE;
    let loads: Vec<Segment> = new.iter().filter(|s| s.kind == PT_LOAD).copied().collect();
    if !loads.iter().any(|l| phoff >= l.offset && phoff + table_len <= l.offset + l.filesz) {
        return Err(fail("the program header table is not inside a PT_LOAD".into()));
    }
    let others = |t: &[Segment]| -> Vec<Segment> {
        t.iter().filter(|s| s.kind != PT_LOAD && s.kind != PT_PHDR).copied().collect()
    };
    let (before, after) = (others(old), others(new));
    if before.len() != after.len() {
        return Err(fail("the program headers other than PT_LOAD changed in number".into()));
    }
    for (a, b) in before.iter().zip(&after) {
        let same = a.kind == b.kind && a.flags == b.flags && a.vaddr == b.vaddr && a.memsz == b.memsz;
        let mapped = b.filesz == 0
            || (a.filesz == b.filesz && segments::file_offset(&loads, b.vaddr, b.filesz) == Some(b.offset));
        if !same || !mapped {
            return Err(fail(format!("the program header of type {:#x} at {:#x} changed", a.kind, a.vaddr)));
        }
    }
    if let Some(p) = new.iter().find(|s| s.kind == PT_PHDR)
        && (p.offset != phoff
            || p.filesz != table_len
            || segments::file_offset(&loads, p.vaddr, table_len) != Some(phoff))
    {
        return Err(fail("PT_PHDR does not describe the program header table".into()));
    }
    Ok(())
}

/// Whether `out` is `inp` (which starts at input offset `base`) with the
/// planned patches applied, and nothing else changed.
fn same_but_patched(out: &[u8], inp: &[u8], base: u64, cut: &CutPlan) -> bool {
    let end = base + inp.len() as u64;
    let mut at = 0usize;
    // Patches are sorted and apart; one may cross the section's edges
    // (sections of a damaged file can overlap the tables patched).
    for p in cut.patches.iter().filter(|p| p.offset + p.bytes.len() as u64 > base && p.offset < end) {
        let skip = base.saturating_sub(p.offset) as usize;
        let from = p.offset.max(base) - base;
        let to = (p.offset + p.bytes.len() as u64).min(end) - base;
        let (from, to) = (from as usize, to as usize);
        let bytes = p.bytes.get(skip..skip + (to - from));
        if out.get(at..from) != inp.get(at..from) || out.get(from..to) != bytes {
            return false;
        }
        at = to;
    }
    out.get(at..) == inp.get(at..)
}

fn check_sections(output: &[u8], input: &[u8], loads: &[Segment], cut: &CutPlan) -> Result<(), PruneError> {
    let old = ElfFile::parse(input).map_err(|e| PruneError::VerifyRead(e.into()))?;
    let new = ElfFile::parse(output).map_err(|e| PruneError::VerifyRead(e.into()))?;
    if old.sections.len() != new.sections.len() {
        return Err(fail("the number of sections changed".into()));
    }
    for (i, (a, b)) in old.sections.iter().zip(&new.sections).enumerate().skip(1) {
        let name = old.display_name(i);
        let is_fat = a.offset == cut.fatbin_offset && old.section_name(i).ok() == Some(cut.section_name.as_bytes());
        let size_ok = if is_fat { b.size == cut.fatbin_size } else { b.size == a.size };
        let same = a.same_but_placement(b) && size_ok && b.offset == cut.output_offset(a.offset);
        if !same {
            return Err(fail(format!("the header of section {name} changed")));
        }
        if b.sh_type == SHT_NOBITS || b.size == 0 {
            continue;
        }
        if b.flags & SHF_ALLOC != 0 && segments::file_offset(loads, b.addr, b.size) != Some(b.offset) {
            return Err(fail(format!("section {name} is not mapped from its file offset")));
        }
        if is_fat {
            continue;
        }
        let (inp, out) = (old.section_data(i), new.section_data(i));
        let (Ok(inp), Ok(out)) = (inp, out) else { return Err(fail(format!("section {name} cannot be read"))) };
        if !same_but_patched(out, inp, a.offset, cut) {
            return Err(fail(format!("section {name} changed beyond its pointer fields")));
        }
    }
    Ok(())
}
