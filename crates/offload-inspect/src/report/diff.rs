//! Code objects added, removed and changed between two versions.
//!
//! A code object is known by a [`Key`]: the file it is in (relative to the
//! input root, or its path in a package), the number of its fat binary in
//! that file (the order of units, not their offsets, so code that moved
//! still matches), its entry ID, and how many objects with the same ID came
//! before it in that fat binary. Objects with the same key are compared by
//! an xxh3 hash of their decoded bytes.

use super::size::stored_sizes;
use crate::decode::visit_objects;
use crate::{BytesError, Inventory, Step};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// What identifies a code object across versions.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Key {
    /// The file the object is in, relative to the input root; for a
    /// package member, `FILE:MEMBER` (or the member path alone when the
    /// file name is empty).
    pub file: String,
    /// The number of the object's fat binary in that file, counted in file
    /// order.
    pub unit: usize,
    /// The object's entry ID within its fat binary.
    pub id: String,
    /// Objects with the same file, unit and ID before this one.
    pub repeat: usize,
}

/// One code object as the diff sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What identifies the object across versions.
    pub key: Key,
    /// Canonical target ID, `-` if none; `host` for host entries.
    pub target: String,
    /// The offload kind (`hip`, `openmp`, `cuda`, `host`, ...).
    pub kind: String,
    /// Uncompressed size in bytes.
    pub size: u64,
    /// Bytes the object takes in the file (see [`super::size`]).
    pub stored: u64,
    /// xxh3-64 of the decoded bytes.
    pub hash: u64,
}

/// The entries of one scanned item. `file` names the item (its path
/// relative to the input root); a package member's path is appended.
/// Decodes the objects (in parallel, bounded memory) to hash them; fails
/// with the first object whose bytes cannot be produced, and its ID.
pub fn entries(inv: &Inventory<'_>, file: &str) -> Result<Vec<Entry>, (String, BytesError)> {
    let wanted: Vec<usize> =
        (0..inv.objects.len()).filter(|&i| inv.objects.get(i).is_some_and(|o| !o.container)).collect();
    let hashes = Mutex::new(HashMap::new());
    visit_objects(inv, &wanted, 0, |i, bytes| {
        let h = xxhash_rust::xxh3::xxh3_64(bytes?);
        if let Ok(mut m) = hashes.lock() {
            m.insert(i, h);
        }
        Ok(())
    })
    .map_err(|(position, e)| {
        let id = wanted.get(position).and_then(|&i| inv.objects.get(i)).map(|o| o.id.clone()).unwrap_or_default();
        (id, e)
    })?;
    let hashes = hashes.into_inner().unwrap_or_default();
    let stored = stored_sizes(inv);
    let mut seen: HashMap<(String, usize, String), usize> = HashMap::new();
    let mut out = Vec::with_capacity(wanted.len());
    for &i in &wanted {
        let Some(o) = inv.objects.get(i) else { continue };
        let member = o.location.0.iter().find_map(|s| match s {
            Step::PackageMember(p) => Some(p.as_str()),
            _ => None,
        });
        let name = match (file.is_empty(), member) {
            (_, None) => file.to_string(),
            (true, Some(m)) => m.to_string(),
            (false, Some(m)) => format!("{file}:{m}"),
        };
        let n = seen.entry((name.clone(), o.unit, o.id.clone())).or_default();
        let key = Key { file: name, unit: o.unit, id: o.id.clone(), repeat: *n };
        *n += 1;
        let target = if o.offload_kind == "host" {
            "host".to_string()
        } else if o.target_id.is_empty() {
            "-".to_string()
        } else {
            o.target_id.clone()
        };
        out.push(Entry {
            key,
            target,
            kind: o.offload_kind.clone(),
            size: o.size,
            stored: stored.get(i).copied().unwrap_or(0),
            hash: hashes.get(&i).copied().unwrap_or(0),
        });
    }
    Ok(out)
}

/// What happened to one code object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Status {
    /// Only in B.
    Added,
    /// Only in A.
    Removed,
    /// In both, with different bytes (hash or size differ).
    Changed,
    /// In both, with the same hash and size.
    Unchanged,
}

impl Status {
    /// The lowercase name, as in the JSON output: `added`, `removed`,
    /// `changed` or `unchanged`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Added => "added",
            Status::Removed => "removed",
            Status::Changed => "changed",
            Status::Unchanged => "unchanged",
        }
    }
}

/// One code object present in A, B or both.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// What happened to the object.
    pub status: Status,
    /// The file part of the object's [`Key`].
    pub file: String,
    /// The fat binary number part of the object's [`Key`].
    pub unit: usize,
    /// The entry ID part of the object's [`Key`].
    pub id: String,
    /// The canonical target ID (taken from B when the object is in B).
    pub target: String,
    /// The offload kind (taken from B when the object is in B).
    pub kind: String,
    /// Uncompressed size in bytes in A; `None` when not in A.
    pub size_a: Option<u64>,
    /// Uncompressed size in bytes in B; `None` when not in B.
    pub size_b: Option<u64>,
}

impl Change {
    /// `size_b - size_a`, a missing side counting 0.
    pub fn delta(&self) -> i128 {
        i128::from(self.size_b.unwrap_or(0)) - i128::from(self.size_a.unwrap_or(0))
    }
}

/// Counts of one group (a target, a file, or everything).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Objects only in B.
    pub added: u64,
    /// Objects only in A.
    pub removed: u64,
    /// Objects in both whose bytes differ.
    pub changed: u64,
    /// Objects in both with the same bytes.
    pub unchanged: u64,
    /// Uncompressed bytes in A.
    pub bytes_a: u64,
    /// Uncompressed bytes in B.
    pub bytes_b: u64,
    /// Stored bytes (see [`super::size`]) in A.
    pub stored_a: u64,
    /// Stored bytes (see [`super::size`]) in B.
    pub stored_b: u64,
}

impl Summary {
    fn count(&mut self, status: Status, a: Option<&Entry>, b: Option<&Entry>) {
        match status {
            Status::Added => self.added += 1,
            Status::Removed => self.removed += 1,
            Status::Changed => self.changed += 1,
            Status::Unchanged => self.unchanged += 1,
        }
        if let Some(a) = a {
            self.bytes_a = self.bytes_a.saturating_add(a.size);
            self.stored_a = self.stored_a.saturating_add(a.stored);
        }
        if let Some(b) = b {
            self.bytes_b = self.bytes_b.saturating_add(b.size);
            self.stored_b = self.stored_b.saturating_add(b.stored);
        }
    }

    /// True when nothing was added, removed or changed.
    pub fn identical(&self) -> bool {
        self.added == 0 && self.removed == 0 && self.changed == 0
    }
}

/// The whole comparison.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Every object, sorted by file, unit, ID.
    pub changes: Vec<Change>,
    /// Counts over every object.
    pub total: Summary,
    /// Counts per canonical target ID.
    pub by_target: BTreeMap<String, Summary>,
    /// Counts per file (the file part of the key).
    pub by_file: BTreeMap<String, Summary>,
}

/// Compares the entries of A with those of B.
pub fn diff(a: Vec<Entry>, b: Vec<Entry>) -> Diff {
    let mut sides: BTreeMap<Key, (Option<Entry>, Option<Entry>)> = BTreeMap::new();
    for e in a {
        let key = e.key.clone();
        sides.entry(key).or_default().0 = Some(e);
    }
    for e in b {
        let key = e.key.clone();
        sides.entry(key).or_default().1 = Some(e);
    }
    let mut d = Diff::default();
    for (key, (a, b)) in sides {
        let status = match (&a, &b) {
            (Some(x), Some(y)) if x.hash == y.hash && x.size == y.size => Status::Unchanged,
            (Some(_), Some(_)) => Status::Changed,
            (None, _) => Status::Added,
            (_, None) => Status::Removed,
        };
        let Some(any) = b.as_ref().or(a.as_ref()) else { continue };
        d.total.count(status, a.as_ref(), b.as_ref());
        d.by_target.entry(any.target.clone()).or_default().count(status, a.as_ref(), b.as_ref());
        d.by_file.entry(key.file.clone()).or_default().count(status, a.as_ref(), b.as_ref());
        d.changes.push(Change {
            status,
            target: any.target.clone(),
            kind: any.kind.clone(),
            size_a: a.as_ref().map(|e| e.size),
            size_b: b.as_ref().map(|e| e.size),
            file: key.file,
            unit: key.unit,
            id: key.id,
        });
    }
    d
}
