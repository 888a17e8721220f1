//! Pruning kpack archives to the GPUs kept (`docs/formats/kpack.md`,
//! "Prune"). A TOC target can be loaded by a GPU when it is one of the
//! targets the loader tries for one of the GPU's ISA names (its own, and
//! CLR's generic one): [`loadable_by`]. An archive none of whose targets a
//! kept GPU can load is removed; a mixed archive loses the entries (and
//! `gfx_arches` items) no kept GPU can load, its other frames carried over
//! unchanged. A kept GPU never looks at what is removed, so its resolution
//! is unchanged.

use super::KpackError;
use offload_format::kpack::resolve::{clr_arch_list, compatible_targets};
use offload_format::kpack::write::{self, NewEntry};
use offload_format::kpack::{Archive, Scheme};
use std::borrow::Cow;

/// Whether a GPU (a target ID such as `gfx942:sramecc+:xnack-`) can be
/// served code filed under `target`.
///
/// ```
/// use offload_rewrite::kpack::loadable_by;
/// assert!(loadable_by("gfx11-generic", "gfx1101"));
/// assert!(loadable_by("gfx90a", "gfx90a:xnack+"));
/// assert!(!loadable_by("gfx90a:xnack+", "gfx90a"));
/// assert!(!loadable_by("gfx1100", "gfx942"));
/// ```
pub fn loadable_by(target: &str, gpu: &str) -> bool {
    clr_arch_list(gpu).iter().any(|arch| compatible_targets(arch).iter().any(|t| t == target))
}

/// What to do with one archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PruneAction {
    /// Every target stays.
    Keep,
    /// No kept GPU can load anything in it.
    Remove,
    /// The archive with only the loadable entries.
    Rewrite(Vec<u8>),
}

/// Prunes one archive (its bytes) to the GPUs `keep`.
pub fn prune_archive(data: &[u8], keep: &[String]) -> Result<PruneAction, KpackError> {
    let bad = |error| KpackError::Archive { path: String::new(), error };
    let archive = Archive::parse(data).map_err(bad)?;
    let wanted = |t: &str| keep.iter().any(|g| loadable_by(t, g));
    let arches: Vec<&str> = archive.gfx_arches.iter().copied().filter(|t| wanted(t)).collect();
    if arches.is_empty() {
        return Ok(PruneAction::Remove);
    }
    let all_entries_kept = archive.entries().all(|(_, e)| wanted(e.target) && arches.contains(&e.target));
    if arches.len() == archive.gfx_arches.len() && all_entries_kept {
        return Ok(PruneAction::Keep);
    }
    let mut entries = Vec::new();
    for (key, e) in archive.entries() {
        if !arches.contains(&e.target) {
            continue;
        }
        let stored = archive.stored(e.ordinal).map_err(bad)?;
        let frame = match archive.scheme {
            Scheme::ZstdPerKernel => Cow::Borrowed(stored),
            Scheme::None => Cow::Owned(write::compress(stored, write::DEFAULT_LEVEL)?),
        };
        entries.push(NewEntry {
            key: key.to_string(),
            target: e.target.to_string(),
            original_size: e.original_size,
            frame,
            source_id: e.source_id.map(str::to_string),
        });
    }
    let group = archive.group_name.unwrap_or("");
    Ok(PruneAction::Rewrite(write::archive(group, &arches, &entries)?))
}

/// The action for each archive of a tree (path, bytes), in order.
pub fn plan_prune(archives: &[(String, &[u8])], keep: &[String]) -> Result<Vec<(String, PruneAction)>, KpackError> {
    archives
        .iter()
        .map(|(path, data)| {
            prune_archive(data, keep).map(|a| (path.clone(), a)).map_err(|e| match e {
                KpackError::Archive { error, .. } => KpackError::Archive { path: path.clone(), error },
                other => other,
            })
        })
        .collect()
}
