//! `replace` for NVIDIA CUDA fat binaries: one cubin or PTX entry of a fat
//! binary in `.nv_fatbin` / `__nv_relfatbin` (objects, executables, shared
//! libraries) or of a standalone `.fatbin` file.
//!
//! The entry is named as `prune` names CUDA targets (`sm_80` a cubin,
//! `compute_80` PTX) or by its `offload list` ID (`cuda-elf-sm_80`); the
//! fat binaries are numbered in file order (`--unit N`). The fat binary is
//! rewritten by `cuda::write`: every other entry copied as stored, the new
//! one uncompressed with its header's sizes updated (in a linked file,
//! where it would not fit uncompressed, compressed again with the entry's
//! codec), the fat size updated.
//! In a section it is written at its own offset when it fits up to the
//! next fat binary (the rest zeroed), so the `.nvFatBinSegment` records and
//! relocations, which point at fat binary starts, stay valid; a standalone
//! `.fatbin` is rewritten back to back. In a relocatable object a fat
//! binary that grows past its place moves with its section to the end of
//! the file ([`cuda_grow`]); in a linked file `.nv_fatbin` moves to a new
//! PT_LOAD and the `.nvFatBinSegment` pointers follow, exactly as HIP's
//! `.hip_fatbin` does ([`segment`]).

use super::{InputKind, Placement, ReplaceError, Replaced, pick_entry};
use super::{cuda_grow, cuda_object, segment};
use crate::prune::{PruneError, Rules, UnitChange, cuda as prune_cuda};
use offload_format::cuda::{self, EntryKind, FATBIN_MAGIC_BYTES, write};
use offload_format::elf::{ET_REL, ElfFile};
use offload_format::plan::Plan;
use offload_inspect::layout::{FatBinary, FileMap};

/// The ID `offload list` gives the entries `wanted` names (`sm_80` →
/// `cuda-elf-sm_80`, `compute_80` → `cuda-ptx-sm_80`, `lto_80` →
/// `cuda-nvvm-sm_80`; a triple before `--` is allowed), or `None`.
fn wanted_id(wanted: &str) -> Option<String> {
    if wanted.starts_with("cuda-") {
        return Some(wanted.to_string());
    }
    let target = wanted.rsplit_once("--").map_or(wanted, |(_, t)| t);
    let canonical = prune_cuda::parse_target(target)?.ok()?;
    let (kind, number) = canonical.split_once('_')?;
    let kind = match kind {
        "sm" => "elf",
        "compute" => "ptx",
        _ => "nvvm",
    };
    Some(format!("cuda-{kind}-sm_{number}"))
}

/// Whether `replace` takes `data` as CUDA: a `.fatbin` file, or an ELF
/// file with CUDA fat binary sections and either no `.hip_fatbin` or a
/// CUDA entry asked for.
pub(super) fn applies(data: &[u8], wanted: &str) -> bool {
    if data.starts_with(&FATBIN_MAGIC_BYTES) {
        return true;
    }
    let Ok(file) = ElfFile::parse(data) else { return false };
    if !prune_cuda::has_sections(&file) {
        return false;
    }
    let hip = (1..file.sections.len()).any(|i| file.section_name(i).ok() == Some(b".hip_fatbin".as_slice()));
    !hip || wanted_id(wanted).is_some()
}

/// What the input is, its fat binaries and each one's entry IDs.
type Units = (InputKind, Vec<FatBinary>, Vec<Vec<String>>);

/// The fat binaries of `data`, what the input is, and each unit's entry
/// IDs. In an ELF file a unit's extent runs to the next fat binary of its
/// section or the section's end (the bytes between are zeros).
fn units_of(data: &[u8]) -> Result<Units, ReplaceError> {
    let keep_all = Rules::default();
    let (input, changes, sections) = if data.starts_with(&FATBIN_MAGIC_BYTES) {
        (InputKind::FatbinFile, prune_cuda::plan_region(data, 0, &keep_all, false)?, Vec::new())
    } else {
        let file =
            ElfFile::parse(data).map_err(|e| PruneError::Layout(offload_inspect::layout::LayoutError::Elf(e)))?;
        let input = if file.header.e_type == ET_REL { InputKind::Relocatable } else { InputKind::Linked };
        let sections: Vec<(u64, u64)> = (1..file.sections.len())
            .filter(|&i| file.section_name(i).is_ok_and(|n| prune_cuda::SECTIONS.contains(&n)))
            .map(|i| (file.sections[i].offset, file.sections[i].offset.saturating_add(file.sections[i].size)))
            .collect();
        (input, prune_cuda::plan_elf(&file, &keep_all)?, sections)
    };
    let mut units: Vec<FatBinary> = changes.iter().map(|c: &UnitChange| c.unit).collect();
    let starts: Vec<u64> = units.iter().map(|u| u.offset).collect();
    for u in &mut units {
        let section_end = sections.iter().find(|&&(start, end)| start <= u.offset && u.offset < end).map(|s| s.1);
        let next = starts.iter().copied().filter(|&s| s > u.offset).min();
        if let Some(end) = section_end {
            u.extent = next.filter(|&n| n < end).unwrap_or(end).saturating_sub(u.offset).max(u.used);
        }
    }
    let ids = changes.into_iter().map(|c| c.entries.into_iter().map(|e| e.id).collect()).collect();
    Ok((input, units, ids))
}

/// The fat binary `unit` of `data`.
fn fatbin_at<'a>(data: &'a [u8], unit: &FatBinary) -> Result<cuda::FatBinary<'a>, ReplaceError> {
    let fail = |reason: String| ReplaceError::Unit(PruneError::Unit { offset: unit.offset, reason });
    let bytes = usize::try_from(unit.offset)
        .ok()
        .zip(usize::try_from(unit.used).ok())
        .and_then(|(at, n)| data.get(at..at.checked_add(n)?))
        .ok_or_else(|| fail("lies past the end of the file".into()))?;
    cuda::FatBinary::parse(bytes, 0)
        .map_err(|e| ReplaceError::Unit(PruneError::UnitRead { offset: unit.offset, source: e.into() }))
}

/// Entry `index` of `fatbin`.
fn entry_at<'a>(fatbin: &cuda::FatBinary<'a>, index: usize, offset: u64) -> Result<cuda::Entry<'a>, ReplaceError> {
    let fail = |reason: String| ReplaceError::Unit(PruneError::Unit { offset, reason });
    match fatbin.entries().nth(index) {
        Some(Ok(e)) => Ok(e),
        Some(Err(e)) => Err(ReplaceError::Unit(PruneError::UnitRead { offset, source: e.into() })),
        None => Err(fail("its entries changed while reading".into())),
    }
}

/// A concatenated entry holds several cubins as one compressed stream;
/// asking for one of them gets this refusal rather than "no entry".
fn concatenated(ids: &[Vec<String>], wanted_id: &str) -> Option<ReplaceError> {
    let arch = wanted_id.strip_prefix("cuda-elf-")?;
    let holder = ids
        .iter()
        .flatten()
        .find(|id| id.strip_prefix("cuda-concat-").is_some_and(|list| list.split('+').any(|a| a == arch)))?;
    Some(ReplaceError::NotSupported(format!(
        "the {arch} cubin is part of the concatenated entry '{holder}' (nvcc --concat: several cubins compressed as one stream); replacing one of them is not supported"
    )))
}

/// The code object stored for `object` in an entry of `kind`, as
/// `cuobjdump` extracts it back: PTX text without its NUL (the entry stores
/// one after it), a cubin up to its ELF extent (the checks refused one
/// whose extent is unknown).
fn code_of(kind: EntryKind, object: &[u8]) -> &[u8] {
    match kind {
        EntryKind::Ptx => cuda::ptx_text(object),
        _ => cuda::cubin_extent(object).and_then(|n| object.get(..usize::try_from(n).ok()?)).unwrap_or(object),
    }
}

/// Plans replacing the CUDA entry `wanted` of `data` by `object`.
pub(super) fn plan<'a>(
    data: &'a [u8],
    object: &'a [u8],
    wanted: &str,
    unit: Option<usize>,
) -> Result<Replaced<'a>, ReplaceError> {
    let (input, units, ids) = units_of(data)?;
    let id_wanted = wanted_id(wanted);
    let matches = |id: &str| id == wanted || id_wanted.as_deref() == Some(id);
    let picked = pick_entry(&units, &ids, wanted, unit, matches);
    // Not an `if let` guard in the match: those are newer than the MSRV.
    if let Err(ReplaceError::NoEntry { .. }) = picked
        && let Some(e) = id_wanted.as_deref().and_then(|w| concatenated(&ids, w))
    {
        return Err(e);
    }
    let (unit_index, entry_index, entry_id) = picked?;
    let fat = units[unit_index];
    let fatbin = fatbin_at(data, &fat)?;
    let entry = entry_at(&fatbin, entry_index, fat.offset)?;
    let old = cuda::code_object_bytes(&entry)
        .map_err(|e| ReplaceError::Unit(PruneError::UnitRead { offset: fat.offset, source: e.into() }))?;
    let checked = cuda_object::check(&entry_id, &entry, &old, object)?;
    let code = code_of(entry.header.kind(), object);
    let rebuild = |new_entry: Vec<u8>| {
        write::with_replaced(&fatbin, entry_index, new_entry)
            .map_err(|e| ReplaceError::Unit(PruneError::Unit { offset: fat.offset, reason: e.to_string() }))
    };
    let mut rebuilt = rebuild(write::replacement_entry(&entry, code, checked.version))?;
    let mut stored_uncompressed = entry.header.codec().is_some();
    // Stored uncompressed, a compressed entry's new code rarely fits a
    // linked file's fat binary: compressed again with the entry's own
    // codec it usually does, and in place beats a new segment.
    if stored_uncompressed
        && rebuilt.len() > fat.extent
        && input == InputKind::Linked
        && let Some(compressed) = write::recompressed_entry(&entry, code, checked.version)
    {
        let again = rebuild(compressed)?;
        if again.len() <= fat.extent {
            (rebuilt, stored_uncompressed) = (again, false);
        }
    }
    let needed = rebuilt.len();
    let mut replaced = Replaced {
        input,
        unit_index,
        unit: fat,
        entry_index,
        entry_id,
        old_size: old.len() as u64,
        new_size: code.len() as u64,
        new_unit_size: needed,
        new_version: None,
        stored_uncompressed,
        object: checked.check,
        placement: Placement::InPlace,
        member: None,
        new_unit_offsets: units.iter().map(|u| u.offset).collect(),
        zeroed: Vec::new(),
        output: Plan::new(),
    };
    let (start, end) = (fat.offset as usize, (fat.offset + fat.used) as usize);
    if input == InputKind::FatbinFile {
        // Back to back: every later fat binary moves by the size change.
        let mut out = Plan::borrowed(data.get(..start).unwrap_or(&[]));
        out.pieces.extend(rebuilt.pieces);
        out.borrow(data.get(end..).unwrap_or(&[]));
        for (j, offset) in replaced.new_unit_offsets.iter_mut().enumerate().skip(unit_index + 1) {
            *offset = units[j].offset - fat.used + needed;
        }
        replaced.output = out;
        replaced.placement = Placement::Rewritten;
        return Ok(replaced);
    }
    if needed > fat.extent && input == InputKind::Relocatable {
        let grown = cuda_grow::move_section(data, &units, &fat, rebuilt)?;
        replaced.new_unit_offsets[unit_index] = grown.new.0 + (fat.offset - grown.old.0);
        replaced.placement = Placement::MovedSection { offset: grown.new.0 };
        replaced.zeroed = vec![grown.old, (data.len() as u64, grown.new.0 - data.len() as u64)];
        replaced.output = grown.output;
        return Ok(replaced);
    }
    if needed > fat.extent {
        let moved = move_to_segment(data, &fat, needed, rebuilt)?;
        for (offset, new_offset) in moved.unit_offsets {
            if let Some(u) = units.iter().position(|u| u.offset == offset) {
                replaced.new_unit_offsets[u] = new_offset;
            }
        }
        replaced.placement = moved.placement;
        replaced.zeroed = moved.zeroed;
        replaced.output = moved.output;
        return Ok(replaced);
    }
    let mut out = Plan::borrowed(data.get(..start).unwrap_or(&[]));
    out.pieces.extend(rebuilt.pieces);
    out.zeros(fat.extent - needed);
    out.borrow(data.get(start + fat.extent as usize..).unwrap_or(&[]));
    replaced.output = out;
    replaced.zeroed = vec![(fat.offset + needed, fat.extent - needed)];
    Ok(replaced)
}

/// A linked file's `.nv_fatbin` moved to a new segment: the output, each
/// moved unit's (old, new) file offset, the placement and zeroed ranges.
struct MovedUnits<'a> {
    output: Plan<'a>,
    unit_offsets: Vec<(u64, u64)>,
    placement: Placement,
    zeroed: Vec<(u64, u64)>,
}

/// Moves the `.nv_fatbin` holding `fat` to a new PT_LOAD with `rebuilt`
/// in its place, through the mover HIP uses ([`segment::move_fatbin`]);
/// the wrapper records of `.nvFatBinSegment` follow it. A fat binary of
/// `__nv_relfatbin` (relocatable device code, linked by nvlink at run
/// time) is refused: nothing known points at it by a wrapper record.
fn move_to_segment<'a>(
    data: &'a [u8],
    fat: &FatBinary,
    needed: u64,
    rebuilt: Plan<'a>,
) -> Result<MovedUnits<'a>, ReplaceError> {
    let refuse = |why: String| ReplaceError::DoesNotFit { needed, extent: fat.extent, why };
    let map = FileMap::read_cuda(data).map_err(|e| refuse(format!("its section cannot move: {e}")))?;
    let Some(r) = map.units.iter().position(|u| u.offset == fat.offset) else {
        return Err(refuse("only a fat binary of .nv_fatbin can move to a new segment".into()));
    };
    if let Some(record) = map.dangling().first() {
        let w = &map.wrappers[*record];
        return Err(ReplaceError::Dangling { record: *record, offset: w.offset, pointer: w.pointer });
    }
    let moved = segment::move_fatbin(data, &map, r, rebuilt)?;
    let unit_offsets = map.units.iter().map(|u| u.offset).zip(moved.unit_offsets).collect();
    Ok(MovedUnits { output: moved.output, unit_offsets, placement: moved.placement, zeroed: moved.zeroed })
}

fn fail(msg: String) -> ReplaceError {
    ReplaceError::Verify(msg)
}

/// The whole stored bytes (header and payload) of every entry of a unit.
fn entry_bytes<'a>(fatbin: &cuda::FatBinary<'a>) -> Result<Vec<&'a [u8]>, ReplaceError> {
    fatbin
        .entries()
        .map(|e| {
            let e = e.map_err(|e| ReplaceError::VerifyRead(e.into()))?;
            fatbin.data.get(e.offset..e.payload_offset() + e.stored.len()).ok_or_else(|| fail("entry bounds".into()))
        })
        .collect()
}

/// [`super::verify`] for CUDA: the output read back has the same fat
/// binaries at the planned offsets, every other one byte-identical, the
/// replaced one with every other entry byte-identical and the new code
/// object in the entry's place (as `cuobjdump` would extract it); in place,
/// nothing outside the rewritten extent changed and its tail is zero.
pub(super) fn verify(output: &[u8], input: &[u8], replaced: &Replaced, object: &[u8]) -> Result<(), ReplaceError> {
    let (_, old_units, old_ids) = units_of(input)?;
    let (_, new_units, new_ids) = units_of(output).map_err(|e| fail(format!("it cannot be read back: {e}")))?;
    if new_units.len() != old_units.len() || new_ids.iter().map(Vec::len).ne(old_ids.iter().map(Vec::len)) {
        return Err(fail("its fat binaries or entries differ in number from the input's".into()));
    }
    let r = replaced.unit_index;
    for (j, (new, old)) in new_units.iter().zip(&old_units).enumerate() {
        if Some(&new.offset) != replaced.new_unit_offsets.get(j) {
            return Err(fail(format!("fat binary {j} is at {:#x}, not where it was planned", new.offset)));
        }
        if j != r && (new.used != old.used || fatbin_at(output, new)?.data != fatbin_at(input, old)?.data) {
            return Err(fail(format!("fat binary {j} changed")));
        }
    }
    let (new, old) = (new_units[r], old_units[r]);
    if new.used != replaced.new_unit_size {
        return Err(fail(format!("the rebuilt fat binary is {} bytes, {} planned", new.used, replaced.new_unit_size)));
    }
    let (after, before) = (fatbin_at(output, &new)?, fatbin_at(input, &old)?);
    let e = replaced.entry_index;
    let (a, b) = (entry_bytes(&after)?, entry_bytes(&before)?);
    if a.iter().zip(&b).enumerate().any(|(i, (x, y))| i != e && x != y) {
        return Err(fail("an entry other than the replaced one changed".into()));
    }
    let (new_entry, old_entry) = (entry_at(&after, e, new.offset)?, entry_at(&before, e, old.offset)?);
    let code = cuda::code_object_bytes(&new_entry).map_err(|e| ReplaceError::VerifyRead(e.into()))?;
    if *code != *code_of(new_entry.header.kind(), object) {
        return Err(fail("the replaced entry does not hold the new code object".into()));
    }
    if new_entry.header.kind != old_entry.header.kind || new_entry.header.arch() != old_entry.header.arch() {
        return Err(fail("the replaced entry's kind or architecture changed".into()));
    }
    if let Placement::NewSegment { .. } = replaced.placement {
        let (before, after) =
            (FileMap::read_cuda(input)?, FileMap::read_cuda(output).map_err(|e| ReplaceError::VerifyRead(e.into()))?);
        let targets = |m: &FileMap| m.wrappers.iter().map(|w| w.target).collect::<Vec<_>>();
        if targets(&before) != targets(&after) {
            return Err(fail("a wrapper record leads to another fat binary".into()));
        }
        super::check::moved_section_sound(output, input, &before)?;
    }
    if let Placement::MovedSection { offset } = replaced.placement {
        let new_range = (offset, (output.len() as u64).saturating_sub(offset));
        cuda_grow::verify_moved(output, input, &old, new_range).map_err(fail)?;
    }
    if replaced.placement == Placement::InPlace {
        let (start, end) = (old.offset as usize, (old.offset + old.extent) as usize);
        if output.len() != input.len()
            || output.get(..start) != input.get(..start)
            || output.get(end..) != input.get(end..)
        {
            return Err(fail("bytes outside the rewritten fat binary changed".into()));
        }
        if output.get(start + new.used as usize..end).is_none_or(|tail| tail.iter().any(|&b| b != 0)) {
            return Err(fail("the rest of the old extent is not zero".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cuda_tests.rs"]
mod tests;
