//! The check a pruned output passes before it is written: read back from
//! its own bytes, it has the same fat binaries at the same offsets, every
//! wrapper leads where it led, each rewritten unit holds exactly the kept
//! entries with their original bytes (compressed ones decompress and match
//! their hash), the freed bytes are zero, and every byte outside the
//! rewritten units is the input's.

use super::{Contents, PruneError, Pruned, UnitChange, read_contents};
use crate::bundle::binary;
use crate::layout::{FatBinary, FileMap};

pub(super) fn fail(msg: String) -> PruneError {
    PruneError::Verify(msg)
}

/// An entry's ID and payload.
type Pair<'b> = (&'b [u8], &'b [u8]);

/// Entries as (id, payload) pairs.
fn pairs<'b>(contents: &'b Contents) -> Result<Vec<Pair<'b>>, PruneError> {
    let list = match contents {
        Contents::Bundle(list) => list.clone(),
        Contents::Compressed { inner, .. } => binary::read(inner).map_err(|e| fail(e.to_string()))?.unwrap_or_default(),
    };
    Ok(list.into_iter().map(|e| (e.id, e.payload)).collect())
}

/// Checks `output` against `input`, its map and the plan that made it.
pub fn verify(output: &[u8], input: &[u8], input_map: &FileMap, pruned: &Pruned) -> Result<(), PruneError> {
    if output.len() != input.len() {
        return Err(fail(format!("it is {} bytes, the input {}", output.len(), input.len())));
    }
    let map = FileMap::read(output).map_err(|e| fail(e.to_string()))?;
    if map.units.len() != input_map.units.len() {
        return Err(fail(format!("{} fat binaries, the input has {}", map.units.len(), input_map.units.len())));
    }
    for (a, b) in map.units.iter().zip(&input_map.units) {
        if a.offset != b.offset || a.extent != b.extent {
            return Err(fail(format!("the fat binary at {:#x} moved or changed its extent", b.offset)));
        }
    }
    if map.wrappers.len() != input_map.wrappers.len()
        || map.wrappers.iter().zip(&input_map.wrappers).any(|(a, b)| a.pointer != b.pointer || a.target != b.target)
    {
        return Err(fail("a wrapper record leads somewhere else".into()));
    }
    let mut at = 0usize;
    for (change, unit) in pruned.units.iter().zip(&map.units) {
        let start = change.unit.offset as usize;
        let end = start + change.unit.extent as usize;
        if change.replacement.is_none() {
            continue;
        }
        if output.get(at..start) != input.get(at..start) {
            return Err(fail(format!("bytes between {at:#x} and {start:#x} changed")));
        }
        at = end;
        if unit.used != change.new_used {
            return Err(fail(format!(
                "the fat binary at {start:#x} is {} bytes, {} planned",
                unit.used, change.new_used
            )));
        }
        let tail = output.get(start + unit.used as usize..end).unwrap_or(&[]);
        if tail.iter().any(|&b| b != 0) {
            return Err(fail(format!("the freed bytes of the fat binary at {start:#x} are not zero")));
        }
        same_entries(output, unit, input, change)?;
    }
    if output.get(at..) != input.get(at..) {
        return Err(fail(format!("bytes after {at:#x} changed")));
    }
    Ok(())
}

fn header_len(entries: &[Pair]) -> u64 {
    32 + entries.iter().map(|(id, _)| 24 + id.len() as u64).sum::<u64>()
}

/// A rewritten fat binary of the output (`unit`, as the output's map sees
/// it) holds exactly the kept entries of `change`, with a header the
/// runtime's 4096-byte window covers.
pub(super) fn same_entries(
    output: &[u8],
    unit: &FatBinary,
    input: &[u8],
    change: &UnitChange,
) -> Result<(), PruneError> {
    let start = unit.offset;
    let new = read_contents(output, unit)?;
    let old = read_contents(input, &change.unit)?;
    let (new, old) = (pairs(&new)?, pairs(&old)?);
    let kept: Vec<_> = old.iter().zip(&change.entries).filter(|(_, f)| f.kept).map(|(p, _)| *p).collect();
    if new != kept {
        return Err(fail(format!("the fat binary at {start:#x} does not hold exactly the kept entries")));
    }
    if header_len(&new) > 4096 {
        return Err(fail(format!("the bundle header at {start:#x} exceeds the 4096 bytes the runtime reads")));
    }
    Ok(())
}
