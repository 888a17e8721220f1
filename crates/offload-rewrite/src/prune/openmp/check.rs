//! The check a pruned OpenMP output passes before it is written: every
//! byte is the input's except the planned edits; dropped images are zero;
//! read back from its own bytes, it holds exactly the kept images at their
//! offsets, and each descriptor registers exactly its kept images, in
//! order, with their host entry tables.

use super::{Edit, OpenMpPruneError, OpenMpPruned};
use offload_inspect::layout::openmp::OpenMpMap;

fn fail(msg: String) -> OpenMpPruneError {
    OpenMpPruneError::Verify(msg)
}

fn bytes_as_planned(output: &[u8], input: &[u8], pruned: &OpenMpPruned) -> Result<(), OpenMpPruneError> {
    if output.len() != input.len() {
        return Err(fail(format!("it is {} bytes, the input {}", output.len(), input.len())));
    }
    let mut at = 0usize;
    for (offset, edit) in &pruned.edits {
        let start = usize::try_from(*offset).map_err(|_| fail(format!("edit at {offset:#x} is past the end")))?;
        if output.get(at..start) != input.get(at..start) {
            return Err(fail(format!("bytes between {at:#x} and {start:#x} changed")));
        }
        let (ok, len) = match edit {
            Edit::Bytes(b) => (output.get(start..start + b.len()) == Some(b.as_slice()), b.len()),
            Edit::Zeros(n) => {
                let n = usize::try_from(*n).unwrap_or(usize::MAX);
                let end = start.checked_add(n).filter(|&e| e <= output.len());
                (end.is_some_and(|e| output[start..e].iter().all(|&b| b == 0)), n)
            }
        };
        if !ok {
            return Err(fail(format!("the edit at {start:#x} is not in the output")));
        }
        at = start.saturating_add(len);
    }
    if output.get(at..) != input.get(at..) {
        return Err(fail(format!("bytes after {at:#x} changed")));
    }
    Ok(())
}

/// Checks `output` against `input`, its map and the plan that made it.
pub fn verify(output: &[u8], input: &[u8], map: &OpenMpMap, pruned: &OpenMpPruned) -> Result<(), OpenMpPruneError> {
    bytes_as_planned(output, input, pruned)?;
    let out = OpenMpMap::read(output).map_err(|e| fail(format!("it cannot be read back: {e}")))?;
    let kept: Vec<u64> = pruned.images.iter().filter(|f| f.kept).map(|f| f.image.offset).collect();
    if out.images.iter().map(|i| i.offset).collect::<Vec<_>>() != kept {
        return Err(fail(format!("it holds {} images, {} planned", out.images.len(), kept.len())));
    }
    // Descriptors left with no image cannot be found again (nothing
    // leads to an image): their count is checked among the bytes.
    let live: Vec<_> = map.descriptors.iter().zip(&pruned.descriptors).filter(|(_, c)| c.new_count > 0).collect();
    if out.descriptors.len() != live.len() {
        return Err(fail(format!("{} descriptors, {} planned", out.descriptors.len(), live.len())));
    }
    for ((old, change), new) in live.into_iter().zip(&out.descriptors) {
        let expected: Vec<(u64, u64, u64)> = old
            .records
            .iter()
            .filter(|r| pruned.images.get(r.image).is_some_and(|f| f.kept))
            .map(|r| (map.images[r.image].offset, r.fields[2].value, r.fields[3].value))
            .collect();
        let got: Vec<(u64, u64, u64)> =
            new.records.iter().map(|r| (out.images[r.image].offset, r.fields[2].value, r.fields[3].value)).collect();
        if new.addr != old.addr || new.count != change.new_count || got != expected {
            return Err(fail(format!("the descriptor at {:#x} does not register exactly the kept images", old.addr)));
        }
    }
    Ok(())
}
