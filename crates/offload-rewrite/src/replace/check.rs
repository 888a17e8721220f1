//! The check a replaced output passes before it is written, read back from
//! its own bytes: the same fat binaries (the moved ones at their planned
//! offsets), every wrapper leading to the same fat binary as before, the
//! replaced entry holding exactly the new object and every other entry
//! and fat binary byte-identical. In place, nothing outside the rewritten
//! extent changes and its tail is zero. With a new segment: every other
//! allocated section keeps its address, offset and bytes (except the
//! symbol and relocation tables and wrapper records, whose pointers move),
//! the old `.hip_fatbin` bytes are zero, and the segments are sorted,
//! congruent, inside the file and led by PT_PHDR.

use super::{InputKind, Placement, ReplaceError, Replaced, units_of};
use crate::prune::{Contents, read_contents};
use offload_format::bundle::binary;
use offload_format::elf::{ElfFile, SHF_ALLOC, SHT_DYNSYM, SHT_RELA, SHT_SYMTAB};
use offload_inspect::layout::{FatBinary, FatbinSection, FileMap};

fn fail(msg: String) -> ReplaceError {
    ReplaceError::Verify(msg)
}

/// An entry's ID and payload, owned.
type Pair = (Vec<u8>, Vec<u8>);

/// A unit's entries as (id, payload) pairs.
fn pairs(data: &[u8], unit: &FatBinary) -> Result<Vec<Pair>, ReplaceError> {
    let own = |list: Vec<binary::BinaryEntry>| list.iter().map(|e| (e.id.to_vec(), e.payload.to_vec())).collect();
    Ok(match read_contents(data, unit)? {
        Contents::Bundle(list) => own(list),
        Contents::Compressed { inner, .. } => {
            own(binary::read(&inner).map_err(|e| ReplaceError::VerifyRead(e.into()))?.unwrap_or_default())
        }
    })
}

fn bytes_at(data: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    data.get(usize::try_from(offset).ok()?..usize::try_from(offset.checked_add(len)?).ok()?)
}

/// Checks `output` against `input`, the plan that made it and the new
/// code object.
pub fn verify(output: &[u8], input: &[u8], replaced: &Replaced, object: &[u8]) -> Result<(), ReplaceError> {
    if replaced.member.is_some() {
        return super::archive::verify(output, input, replaced, object);
    }
    if replaced.input == InputKind::OpenMp {
        return super::openmp::verify(output, input, replaced, object);
    }
    if replaced.unit.kind == offload_inspect::layout::UnitKind::Cuda {
        return super::cuda::verify(output, input, replaced, object);
    }
    let (_, old_map, old_units) = units_of(input)?;
    let (_, new_map, new_units) = units_of(output).map_err(|e| fail(format!("it cannot be read back: {e}")))?;
    if new_units.len() != old_units.len() {
        return Err(fail(format!("{} fat binaries, the input has {}", new_units.len(), old_units.len())));
    }
    let r = replaced.unit_index;
    for (j, (new, old)) in new_units.iter().zip(&old_units).enumerate() {
        if Some(&new.offset) != replaced.new_unit_offsets.get(j) {
            return Err(fail(format!("fat binary {j} is at {:#x}, not where it was planned", new.offset)));
        }
        if j == r {
            continue;
        }
        if new.used != old.used || bytes_at(output, new.offset, new.used) != bytes_at(input, old.offset, old.used) {
            return Err(fail(format!("fat binary {j} changed")));
        }
    }
    let (new, old) = (new_units[r], old_units[r]);
    if new.used != replaced.new_unit_size {
        return Err(fail(format!("the rebuilt fat binary is {} bytes, {} planned", new.used, replaced.new_unit_size)));
    }
    let (after, before) = (pairs(output, &new)?, pairs(input, &old)?);
    let e = replaced.entry_index;
    let same = after.len() == before.len()
        && after
            .iter()
            .zip(&before)
            .enumerate()
            .all(|(i, (a, b))| a.0 == b.0 && if i == e { a.1 == object } else { a.1 == b.1 });
    if !same {
        return Err(fail("the rebuilt fat binary does not hold the old entries with the new object in place".into()));
    }
    if new.kind == offload_inspect::layout::UnitKind::Bundle
        && 32 + after.iter().map(|(id, _)| 24 + id.len()).sum::<usize>() > 4096
    {
        return Err(fail("the bundle header exceeds the 4096 bytes the runtime reads".into()));
    }
    if let (Some(a), Some(b)) = (&new_map, &old_map) {
        let targets = |m: &offload_inspect::layout::FileMap| m.wrappers.iter().map(|w| w.target).collect::<Vec<_>>();
        if targets(a) != targets(b) {
            return Err(fail("a wrapper record leads to another fat binary".into()));
        }
    }
    match replaced.placement {
        Placement::Rewritten => Ok(()),
        Placement::InPlace => {
            let (start, end) = (old.offset as usize, (old.offset + old.extent) as usize);
            if output.len() != input.len()
                || output.get(..start) != input.get(..start)
                || output.get(end..) != input.get(end..)
            {
                return Err(fail("bytes outside the rewritten fat binary changed".into()));
            }
            let tail = output.get(start + new.used as usize..end).unwrap_or(&[]);
            if tail.iter().any(|&b| b != 0) {
                return Err(fail("the rest of the old extent is not zero".into()));
            }
            Ok(())
        }
        Placement::NewSegment { .. } if replaced.input == InputKind::Linked => {
            let Some(old_map) = &old_map else { return Err(fail("no file map".into())) };
            moved_section_sound(output, input, old_map)
        }
        Placement::NewSegment { .. } => Err(fail("a new segment in a file without segments".into())),
        Placement::MovedSection { .. } => Err(fail("a moved section in a HIP file".into())),
    }
}

/// The checks of a fat binary section moved to a new segment (HIP or
/// CUDA, as `old_map` says): its old bytes are zero, every other allocated
/// section keeps its place and bytes, the segments are sound.
pub(super) fn moved_section_sound(output: &[u8], input: &[u8], old_map: &FileMap) -> Result<(), ReplaceError> {
    let zeroed = bytes_at(output, old_map.fatbin_offset, old_map.fatbin_size);
    if zeroed.is_none_or(|z| z.iter().any(|&b| b != 0)) {
        return Err(fail(format!("the old {} bytes are not zero", old_map.section.name())));
    }
    sections_kept(output, input, old_map.section)?;
    super::segment::segments_sound(output).map_err(fail)
}

/// Every allocated section but the ones whose pointers move keeps its
/// place and bytes.
fn sections_kept(output: &[u8], input: &[u8], section: FatbinSection) -> Result<(), ReplaceError> {
    let (fat_name, wrapper_name) = (section.name().as_bytes(), section.wrapper_section().as_bytes());
    let a = ElfFile::parse(output).map_err(|e| ReplaceError::VerifyRead(e.into()))?;
    let b = ElfFile::parse(input).map_err(|e| ReplaceError::VerifyRead(e.into()))?;
    if a.sections.len() != b.sections.len() {
        return Err(fail("the number of sections changed".into()));
    }
    for (i, (x, y)) in a.sections.iter().zip(&b.sections).enumerate() {
        let name = b.section_name(i).unwrap_or(b"");
        let pointers =
            matches!(x.sh_type, SHT_RELA | SHT_DYNSYM | SHT_SYMTAB) || name == fat_name || name == wrapper_name;
        if y.flags & SHF_ALLOC == 0 || name == fat_name {
            continue;
        }
        if x.addr != y.addr || x.offset != y.offset || x.size != y.size {
            return Err(fail(format!("section {} moved", b.display_name(i))));
        }
        if !pointers && a.section_data(i).ok() != b.section_data(i).ok() {
            return Err(fail(format!("the bytes of section {} changed", b.display_name(i))));
        }
    }
    Ok(())
}
