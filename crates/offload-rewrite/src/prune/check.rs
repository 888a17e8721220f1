//! The check a pruned output passes before it is written: read back from
//! its own bytes, it has the same fat binaries at the same offsets, every
//! wrapper leads where it led, each rewritten unit holds exactly the kept
//! entries with their original bytes, the freed bytes are zero, and every
//! byte outside the rewritten units is the input's. A recompressed unit was
//! decompressed again and compared with the kept entries when it was made
//! (`rebuild.rs`), so here its bytes are compared with those checked bytes
//! rather than decompressing the whole input a second time.

use super::{Contents, PruneError, Pruned, UnitChange, read_contents};
use offload_format::bundle::binary;
use offload_format::plan::{Piece, Plan};
use offload_inspect::layout::{FatBinary, FileMap, UnitKind};

pub(super) fn fail(msg: String) -> PruneError {
    PruneError::Verify(msg)
}

/// An entry's ID and payload.
pub(crate) type Pair<'b> = (&'b [u8], &'b [u8]);

/// Entries as (id, payload) pairs.
pub(crate) fn pairs<'b>(contents: &'b Contents) -> Result<Vec<Pair<'b>>, PruneError> {
    let list = match contents {
        Contents::Bundle(list) => list.clone(),
        Contents::Compressed { inner, .. } => {
            binary::read(inner).map_err(|e| PruneError::VerifyRead(e.into()))?.unwrap_or_default()
        }
    };
    Ok(list.into_iter().map(|e| (e.id, e.payload)).collect())
}

/// Checks `output` against `input`, its map and the plan that made it.
pub fn verify(output: &[u8], input: &[u8], input_map: &FileMap, pruned: &Pruned) -> Result<(), PruneError> {
    if output.len() != input.len() {
        return Err(fail(format!("it is {} bytes, the input {}", output.len(), input.len())));
    }
    let map = FileMap::read(output).map_err(|e| PruneError::VerifyRead(e.into()))?;
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
        if !all_zero(tail) {
            return Err(fail(format!("the freed bytes of the fat binary at {start:#x} are not zero")));
        }
        if let (UnitKind::Compressed { .. }, Some(rep)) = (unit.kind, &change.replacement) {
            // Checked when it was made (`rebuild::round_trip`): decompressed
            // again and compared with the kept entries while the input's
            // decompressed bundle was at hand. What is left to check is
            // that these bytes, and no others, were written.
            if !matches_plan(output.get(start..end).unwrap_or(&[]), rep) {
                return Err(fail(format!(
                    "the fat binary at {start:#x} is not the recompressed bundle that was checked"
                )));
            }
            continue;
        }
        same_entries(output, unit, input, change)?;
    }
    if output.get(at..) != input.get(at..) {
        return Err(fail(format!("bytes after {at:#x} changed")));
    }
    Ok(())
}

/// Whether every byte is zero: OR-ing 4 KiB blocks vectorizes, where a
/// byte-wise `any` with its early exit does not (the freed bytes of a large
/// library are most of it: 940 MB of librocsparse's 1.3 GB).
fn all_zero(bytes: &[u8]) -> bool {
    bytes.chunks(4096).all(|block| block.iter().fold(0u8, |acc, &b| acc | b) == 0)
}

/// Whether `bytes` are exactly what `plan` describes.
fn matches_plan(bytes: &[u8], plan: &Plan) -> bool {
    bytes.len() as u64 == plan.len() && plan_starts_with(plan, bytes)
}

/// Whether `plan` describes bytes that begin with `bytes` (a recompressed
/// unit without the zeros that fill its old extent in place: cut mode packs
/// only the unit).
pub(super) fn plan_starts_with(plan: &Plan, bytes: &[u8]) -> bool {
    let mut rest = bytes;
    for piece in &plan.pieces {
        if rest.is_empty() {
            return true;
        }
        let n = usize::try_from(piece.len()).unwrap_or(usize::MAX).min(rest.len());
        let (head, tail) = rest.split_at(n);
        let same = match piece {
            Piece::Bytes(b) => b.get(..n) == Some(head),
            Piece::Fill { byte, .. } => head.iter().all(|x| x == byte),
        };
        if !same {
            return false;
        }
        rest = tail;
    }
    rest.is_empty()
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
