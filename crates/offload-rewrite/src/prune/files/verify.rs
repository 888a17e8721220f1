//! The check an output of [`super::plan_file`] passes before it is
//! written, from its own bytes: each rewritten unit, read back where the
//! plan put it, holds exactly the kept entries with the input's bytes
//! (CUDA entries as stored, bundle entries by ID and payload, fat object
//! sections by name and contents); freed bytes are zero; every byte
//! outside the rewritten units is the input's.

use super::Input;
use crate::prune::check::{Pair, pairs};
use crate::prune::{PruneError, Pruned, UnitChange, read_contents};
use offload_format::bundle::{binary, object as fat_object};
use offload_format::cuda::FatBinary;
use offload_inspect::layout::{self, UnitKind};

fn fail(msg: String) -> PruneError {
    PruneError::Verify(msg)
}

/// The raw bytes (header and payload) of a CUDA fat binary's entries.
fn cuda_entries(data: &[u8]) -> Result<Vec<&[u8]>, PruneError> {
    let fatbin = FatBinary::parse(data, 0).map_err(|e| PruneError::VerifyRead(e.into()))?;
    if fatbin.data.len() != data.len() {
        return Err(fail(format!("a fat binary is {} bytes, {} planned", fatbin.data.len(), data.len())));
    }
    fatbin
        .entries()
        .map(|e| e.map(|e| &fatbin.data[e.offset..e.payload_offset() + e.stored.len()]))
        .collect::<Result<_, _>>()
        .map_err(|e| PruneError::VerifyRead(e.into()))
}

/// A fat object's bundle sections as (entry ID, contents).
fn sections(data: &[u8]) -> Result<Vec<Pair<'_>>, PruneError> {
    let list = fat_object::bundles(data, super::object_format(data)).map_err(|e| PruneError::VerifyRead(e.into()))?;
    Ok(list.into_iter().map(|s| (s.id, s.contents)).collect())
}

fn kept<T: Copy>(old: &[T], change: &UnitChange) -> Vec<T> {
    old.iter().zip(&change.entries).filter(|(_, f)| f.kept).map(|(p, _)| *p).collect()
}

/// Checks one rewritten unit, which starts at `at` in `output`.
pub(crate) fn check_unit(output: &[u8], at: usize, input: &[u8], change: &UnitChange) -> Result<(), PruneError> {
    let start = change.unit.offset as usize;
    let new_len = change.new_used as usize;
    let new = output.get(at..at + new_len).ok_or_else(|| fail(format!("the unit at {at:#x} lies past the end")))?;
    let old = input.get(start..start + change.unit.used as usize).unwrap_or(&[]);
    let same = match change.unit.kind {
        UnitKind::Cuda => cuda_entries(new)? == kept(&cuda_entries(old)?, change),
        UnitKind::Bundle | UnitKind::Compressed { .. } => {
            let moved = layout::FatBinary { offset: at as u64, used: change.new_used, ..change.unit };
            let kind = layout::fatbin::walk(new, at as u64)?.first().map(|u| u.kind);
            let moved = layout::FatBinary { kind: kind.unwrap_or(moved.kind), ..moved };
            let (n, o) = (read_contents(output, &moved)?, read_contents(input, &change.unit)?);
            pairs(&n)? == kept(&pairs(&o)?, change)
        }
        UnitKind::Object => sections(new)? == kept(&sections(old)?, change),
    };
    if !same {
        return Err(fail(format!("the unit at {at:#x} does not hold exactly the kept entries")));
    }
    Ok(())
}

/// Checks `output` against `input` and the plan that made it.
pub fn verify_file(output: &[u8], input: &[u8], kind: &Input, pruned: &Pruned) -> Result<(), PruneError> {
    if let Input::Hip(map) = kind {
        return crate::prune::verify(output, input, map, pruned);
    }
    if let Input::Pe(pe) = kind {
        return crate::prune::pe::verify_zero(output, input, pe, pruned);
    }
    if let Input::Coff(coff) = kind {
        return crate::prune::coff::verify_zero(output, input, coff, pruned);
    }
    if let Input::Archive { coff, .. } = kind {
        return crate::prune::coff::verify_checksummed(output, input, coff, pruned);
    }
    if kind.in_place() {
        return verify_in_place(output, input, pruned);
    }
    verify_rewritten(output, input, kind, pruned)
}

/// The check of an in-place output: the input's length, every byte
/// outside the rewritten units the input's, each unit holding exactly its
/// kept entries followed by zeros.
pub(crate) fn verify_in_place(output: &[u8], input: &[u8], pruned: &Pruned) -> Result<(), PruneError> {
    if output.len() != input.len() {
        return Err(fail(format!("it is {} bytes, the input {}", output.len(), input.len())));
    }
    verify_rewritten(output, input, &Input::Cuda, pruned)
}

/// Walks the units of `pruned` through `output` (each rewritten unit as
/// long as its replacement), comparing everything between them.
fn verify_rewritten(output: &[u8], input: &[u8], kind: &Input, pruned: &Pruned) -> Result<(), PruneError> {
    let (mut from, mut to) = (0usize, 0usize);
    for change in &pruned.units {
        let Some(rep) = &change.replacement else { continue };
        let start = change.unit.offset as usize;
        let between = start.checked_sub(from).ok_or_else(|| fail("units overlap".into()))?;
        if output.get(to..to + between) != input.get(from..start) {
            return Err(fail(format!("bytes between {from:#x} and {start:#x} changed")));
        }
        to += between;
        check_unit(output, to, input, change)?;
        let written = rep.len() as usize;
        let tail = output.get(to + change.new_used as usize..to + written).unwrap_or(&[]);
        if tail.iter().any(|&b| b != 0) {
            return Err(fail(format!("the freed bytes of the unit at {start:#x} are not zero")));
        }
        to += written;
        from = start + change.unit.extent as usize;
    }
    if output.get(to..) != input.get(from..) {
        return Err(fail(format!("bytes after {from:#x} changed")));
    }
    // A rewritten bundle must still read as one.
    if matches!(kind, Input::Bundle) && !output.is_empty() && !binary::has_magic(output) {
        layout::fatbin::walk(output, 0)?;
    }
    Ok(())
}
