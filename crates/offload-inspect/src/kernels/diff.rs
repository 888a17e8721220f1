//! Kernel-level differences between two inputs: kernels added and removed,
//! and resource changes of the kernels both have (spills appearing,
//! registers, LDS or shared memory growing, occupancy falling). Kernels
//! are matched by kind, target and mangled name; when one input holds the
//! same kernel several times (several files of a package), the first row
//! of each is compared and the others are counted as the same kernel.

use super::row::KernelRow;
use serde::Serialize;
use std::collections::BTreeMap;

/// One resource that differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceChange {
    /// The resource's JSON name (`vgprs`, `vgpr_spills`, `lds`, `registers`,
    /// ..., or `occupancy` for the estimate's waves/warps).
    pub resource: &'static str,
    /// In the first input (absent: not stated there).
    pub old: Option<u64>,
    /// In the second input.
    pub new: Option<u64>,
}

/// A kernel both inputs have, whose resources differ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelChange {
    /// `amdgpu`, `cuda`, `ptx`.
    pub kind: &'static str,
    /// Its target.
    pub target: String,
    /// Mangled name.
    pub name: String,
    /// Demangled name.
    pub demangled: String,
    /// The differences, in [`super::row::Resources::values`] order.
    pub changes: Vec<ResourceChange>,
    /// Whether spills appeared or grew (VGPR or SGPR spills), or the CUDA
    /// local memory grew.
    pub spills_grew: bool,
}

/// A kernel only one input has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KernelPresence {
    /// `amdgpu`, `cuda`, `ptx`.
    pub kind: &'static str,
    /// Its target.
    pub target: String,
    /// Mangled name.
    pub name: String,
    /// Demangled name.
    pub demangled: String,
}

/// The kernel-level differences of two inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelDiff {
    /// In the second input only.
    pub added: Vec<KernelPresence>,
    /// In the first input only.
    pub removed: Vec<KernelPresence>,
    /// In both, with different resources.
    pub changed: Vec<KernelChange>,
    /// Kernels in both with equal resources.
    pub unchanged: usize,
}

impl KernelDiff {
    /// Whether there is no difference.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

type Key<'a> = (&'static str, &'a str, &'a str);

fn by_key(rows: &[KernelRow]) -> BTreeMap<Key<'_>, &KernelRow> {
    let mut map = BTreeMap::new();
    for r in rows {
        map.entry((r.kind.name(), r.target.as_str(), r.name.as_str())).or_insert(r);
    }
    map
}

fn presence(r: &KernelRow) -> KernelPresence {
    KernelPresence {
        kind: r.kind.name(),
        target: r.target.clone(),
        name: r.name.clone(),
        demangled: r.demangled.clone(),
    }
}

/// Compares the kernel rows of two inputs.
pub fn diff(old: &[KernelRow], new: &[KernelRow]) -> KernelDiff {
    let (a, b) = (by_key(old), by_key(new));
    let mut out = KernelDiff::default();
    for (key, r) in &a {
        if !b.contains_key(key) {
            out.removed.push(presence(r));
        }
    }
    for (key, r) in &b {
        let Some(o) = a.get(key) else {
            out.added.push(presence(r));
            continue;
        };
        let mut changes: Vec<ResourceChange> = o
            .resources
            .values()
            .into_iter()
            .zip(r.resources.values())
            .filter(|((_, x), (_, y))| x != y)
            .map(|((resource, old), (_, new))| ResourceChange { resource, old, new })
            .collect();
        let (ow, nw) =
            (o.occupancy.as_ref().map(|x| u64::from(x.waves)), r.occupancy.as_ref().map(|x| u64::from(x.waves)));
        if ow != nw {
            changes.push(ResourceChange { resource: "occupancy", old: ow, new: nw });
        }
        if changes.is_empty() {
            out.unchanged += 1;
            continue;
        }
        let spills_grew = changes.iter().any(|c| {
            matches!(c.resource, "vgpr_spills" | "sgpr_spills" | "local") && c.new.unwrap_or(0) > c.old.unwrap_or(0)
        });
        out.changed.push(KernelChange {
            kind: r.kind.name(),
            target: r.target.clone(),
            name: r.name.clone(),
            demangled: r.demangled.clone(),
            changes,
            spills_grew,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::row::{Occupancy, Resources, RowKind};

    fn row(name: &str, vgprs: u64, spills: u64, waves: u32) -> KernelRow {
        KernelRow {
            object: 0,
            location: "file".into(),
            kind: RowKind::Amdgpu,
            target: "gfx90a".into(),
            name: name.into(),
            demangled: name.into(),
            resources: Resources { vgprs: Some(vgprs), vgpr_spills: Some(spills), ..Resources::default() },
            occupancy: Some(Occupancy {
                unit: "simd",
                waves,
                max_waves: 8,
                blocks: None,
                workgroup_size: 256,
                limiter: "vgprs",
            }),
            mismatches: vec![],
        }
    }

    #[test]
    fn added_removed_changed() {
        let old = [row("a", 32, 0, 8), row("b", 128, 0, 4), row("gone", 1, 0, 8)];
        let new = [row("a", 32, 0, 8), row("b", 256, 3, 2), row("new", 1, 0, 8), row("a", 99, 0, 1)];
        let d = diff(&old, &new);
        assert_eq!(d.removed.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["gone"]);
        assert_eq!(d.added.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["new"]);
        assert_eq!(d.unchanged, 1, "the second `a` of the new input is not compared");
        assert_eq!(d.changed.len(), 1);
        let c = &d.changed[0];
        assert_eq!(c.name, "b");
        assert!(c.spills_grew);
        let got: Vec<_> = c.changes.iter().map(|c| (c.resource, c.old, c.new)).collect();
        assert_eq!(
            got,
            [("vgprs", Some(128), Some(256)), ("vgpr_spills", Some(0), Some(3)), ("occupancy", Some(4), Some(2))]
        );
        assert!(diff(&old, &old).is_empty());
    }
}
