//! Bytes per target and offload kind.
//!
//! Only leaf code objects count: an entry whose payload holds further code
//! objects (`container`) is left out, its contents are counted instead, so
//! no byte is counted twice. "Stored" bytes are what the objects take in
//! the file: their own size when stored as is; for objects inside a
//! compressed bundle (or a compressed CUDA entry), the compressed bundle's
//! size shared out in proportion to the objects' uncompressed sizes
//! (rounded down), since a compressed stream cannot be split per object.

use crate::keep::EntryInfo;
use crate::keep::Rules;
use crate::keep::cuda::{ImageGroup, decide_images};
use crate::{Bytes, CodeObject, Format, Inventory, Payload};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Counts for a set of code objects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Number of code objects.
    pub objects: u64,
    /// Uncompressed bytes.
    pub bytes: u64,
    /// Bytes taken in the file (see the module documentation).
    pub stored: u64,
}

impl Counts {
    /// Adds `other`'s counts to these (byte sums saturate).
    pub fn add(&mut self, other: Counts) {
        self.objects += other.objects;
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.stored = self.stored.saturating_add(other.stored);
    }
}

/// One row of a size report: the objects of one offload kind for one
/// target ID.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TargetSize {
    /// The canonical target ID (`gfx90a:xnack+`, `sm_80`); `-` if none.
    pub target: String,
    /// `hip`, `hipv4`, `openmp`, `cuda`, ...
    pub kind: String,
    /// The objects' counts, flattened into the row when serialized.
    #[serde(flatten)]
    pub counts: Counts,
}

/// Sizes of the code objects of one file (or of several together).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// By (target, kind), device code only.
    pub targets: BTreeMap<(String, String), Counts>,
    /// Host entries of bundles (the host object a bundle carries).
    pub host: Counts,
    /// Device code that `--keep` would drop (when rules are given).
    pub prunable: Counts,
}

impl Tally {
    /// Adds `other`'s sizes to this tally, row by row.
    pub fn merge(&mut self, other: &Tally) {
        for (key, counts) in &other.targets {
            self.targets.entry(key.clone()).or_default().add(*counts);
        }
        self.host.add(other.host);
        self.prunable.add(other.prunable);
    }

    /// All device code.
    pub fn device(&self) -> Counts {
        let mut total = Counts::default();
        for c in self.targets.values() {
            total.add(*c);
        }
        total
    }

    /// The rows, sorted by target then kind.
    /// One row per target and kind, targets in natural order (`gfx803`
    /// before `gfx1030`, `sm_50` before `sm_100`).
    pub fn rows(&self) -> Vec<TargetSize> {
        let mut rows: Vec<TargetSize> = self
            .targets
            .iter()
            .map(|((target, kind), counts)| TargetSize { target: target.clone(), kind: kind.clone(), counts: *counts })
            .collect();
        rows.sort_by(|a, b| target_cmp(&a.target, &b.target).then_with(|| a.kind.cmp(&b.kind)));
        rows
    }
}

/// The version of an AMDGPU processor name: `gfx90a` is 9.0.10 (the last
/// two characters are the minor version and stepping, in hexadecimal),
/// `gfx1030` 10.3.0; `None` for other names.
fn gfx_version(target: &str) -> Option<(u32, u32, u32)> {
    let processor = target.split(':').next()?.strip_prefix("gfx")?;
    if processor.len() < 3 || !processor.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (major, rest) = processor.split_at(processor.len() - 2);
    let (minor, stepping) = rest.split_at(1);
    Some((major.parse().ok()?, u32::from_str_radix(minor, 16).ok()?, u32::from_str_radix(stepping, 16).ok()?))
}

/// Orders targets as people read them: AMDGPU processors by version
/// (`gfx803` < `gfx906` < `gfx90a` < `gfx942` < `gfx1030`), features after
/// the processor; other names by [`natural_cmp`] (`sm_50` < `sm_100`).
pub fn target_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    // Processors with a version first, then other gfx names (`gfx9-generic`),
    // then the rest: a total order.
    let class = |t: &str| match gfx_version(t) {
        Some(v) => (0, v),
        None if t.starts_with("gfx") => (1, (0, 0, 0)),
        None => (2, (0, 0, 0)),
    };
    class(a).cmp(&class(b)).then_with(|| natural_cmp(a, b))
}

/// Compares names as people read them: runs of digits by their value, the
/// rest byte by byte (`gfx803` < `gfx1030`, `sm_50` < `sm_100`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let (si, sj) = (i, j);
            while i < a.len() && a[i].is_ascii_digit() {
                i += 1;
            }
            while j < b.len() && b[j].is_ascii_digit() {
                j += 1;
            }
            // Without leading zeros, a longer run is a larger number.
            let x = trim_zeros(&a[si..i]);
            let y = trim_zeros(&b[sj..j]);
            let o = x.len().cmp(&y.len()).then_with(|| x.cmp(y));
            if o != Ordering::Equal {
                return o;
            }
        } else {
            let o = a[i].cmp(&b[j]);
            if o != Ordering::Equal {
                return o;
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j)).then_with(|| a.cmp(b))
}

fn trim_zeros(digits: &[u8]) -> &[u8] {
    let start = digits.iter().position(|&d| d != b'0').unwrap_or(digits.len());
    digits.get(start..).unwrap_or_default()
}

fn blob_len(bytes: Bytes<'_>) -> u64 {
    match bytes {
        Bytes::Borrowed(b) => b.len() as u64,
        Bytes::Owned { len, .. } => len as u64,
    }
}

/// The compressed stream an object lies in: (identity, stored length).
fn stream_of(o: &CodeObject<'_>) -> Option<((u8, usize, usize), u64)> {
    let (tag, bytes) = match o.payload {
        Payload::Plain(_) => return None,
        Payload::Compressed { blob, .. } => (0, blob),
        Payload::Cuda { stream, .. } => (2, stream),
        Payload::Kpack { stored, .. } => (4, stored),
    };
    let id = match bytes {
        Bytes::Borrowed(b) => (tag, b.as_ptr() as usize, b.len()),
        Bytes::Owned { buffer, start, .. } => (tag + 1, buffer, start),
    };
    Some((id, blob_len(bytes)))
}

/// The bytes each object of `inv` takes in the file (0 for containers).
pub fn stored_sizes(inv: &Inventory<'_>) -> Vec<u64> {
    let mut shares: HashMap<(u8, usize, usize), (u64, u64)> = HashMap::new();
    for o in inv.objects.iter().filter(|o| !o.container) {
        if let Some((id, len)) = stream_of(o) {
            let entry = shares.entry(id).or_insert((len, 0));
            entry.1 = entry.1.saturating_add(o.size);
        }
    }
    inv.objects
        .iter()
        .map(|o| {
            if o.container {
                return 0;
            }
            match stream_of(o).and_then(|(id, _)| shares.get(&id)) {
                None => o.size,
                Some(&(_, 0)) => 0,
                Some(&(len, total)) => {
                    u64::try_from(u128::from(o.size) * u128::from(len) / u128::from(total)).unwrap_or(u64::MAX)
                }
            }
        })
        .collect()
}

fn is_host(o: &CodeObject<'_>) -> bool {
    o.offload_kind == "host"
}

/// Which objects `offload prune` with `rules` would drop: device entries
/// of bundles and compressed bundles, decided per fat binary by the same
/// [`Rules::decide`] prune runs, and CUDA fat binary entries by prune's
/// CUDA rule (a concatenated entry's cubins go only together).
pub fn dropped_by(inv: &Inventory<'_>, rules: &Rules) -> Vec<bool> {
    let prunable = |o: &CodeObject<'_>| !o.container && matches!(o.format, Format::Bundle | Format::CompressedBundle);
    let mut units: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, o) in inv.objects.iter().enumerate().filter(|(_, o)| prunable(o)) {
        units.entry(o.unit).or_default().push(i);
    }
    let lists: Vec<Vec<usize>> = units.into_values().collect();
    let infos: Vec<Vec<EntryInfo>> = lists
        .iter()
        .map(|l| {
            l.iter().filter_map(|&i| inv.objects.get(i)).map(|o| EntryInfo { id: o.id.clone(), size: o.size }).collect()
        })
        .collect();
    let mut dropped = vec![false; inv.objects.len()];
    for (list, keep) in lists.iter().zip(rules.decide(&infos)) {
        for (&i, kept) in list.iter().zip(keep) {
            if let Some(d) = dropped.get_mut(i) {
                *d = !kept;
            }
        }
    }
    let cuda = cuda_entries(inv);
    for (group, kept) in cuda.iter().zip(cuda_decisions(inv, &cuda, rules)) {
        for &i in group {
            if let Some(d) = dropped.get_mut(i) {
                *d = !kept;
            }
        }
    }
    dropped
}

/// The CUDA fat binary entries of `inv`, each as the indices of the leaf
/// objects it stands for: one object, or the cubins of a concatenated
/// entry (listed after its record, one `image N` step deeper), which
/// prune keeps or drops whole.
fn cuda_entries(inv: &Inventory<'_>) -> Vec<Vec<usize>> {
    let is_cuda = |o: &CodeObject<'_>| o.format == Format::CudaFatbin && o.cuda.is_some();
    let mut entries: Vec<(usize, &[crate::Step], Vec<usize>)> = Vec::new();
    for (i, o) in inv.objects.iter().enumerate().filter(|(_, o)| is_cuda(o)) {
        let steps = &o.location.0[..];
        if o.container {
            entries.push((o.unit, steps, Vec::new()));
            continue;
        }
        let parent = steps.split_last().map(|(_, p)| p);
        match entries.last_mut() {
            Some((unit, record, members)) if *unit == o.unit && Some(*record) == parent => members.push(i),
            _ => entries.push((o.unit, steps, vec![i])),
        }
    }
    entries.into_iter().map(|(_, _, members)| members).filter(|m| !m.is_empty()).collect()
}

/// Whether prune keeps each of `entries` (from [`cuda_entries`]), decided
/// per fat binary by the rule prune applies to CUDA entries.
fn cuda_decisions(inv: &Inventory<'_>, entries: &[Vec<usize>], rules: &Rules) -> Vec<bool> {
    let mut by_unit: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (e, members) in entries.iter().enumerate() {
        if let Some(o) = members.first().and_then(|&i| inv.objects.get(i)) {
            by_unit.entry(o.unit).or_default().push(e);
        }
    }
    let mut kept = vec![true; entries.len()];
    for list in by_unit.values() {
        let groups: Vec<ImageGroup> = list
            .iter()
            .map(|&e| {
                entries[e]
                    .iter()
                    .filter_map(|&i| inv.objects.get(i)?.cuda.as_ref())
                    .map(|c| (c.kind, c.arch, c.flags))
                    .collect()
            })
            .collect();
        for (&e, keep) in list.iter().zip(decide_images(rules, &groups)) {
            kept[e] = keep;
        }
    }
    kept
}

/// The sizes of the code objects of one scanned item; with `rules`, also
/// what `prune` would drop.
pub fn tally(inv: &Inventory<'_>, rules: Option<&Rules>) -> Tally {
    let stored = stored_sizes(inv);
    let dropped = rules.map(|r| dropped_by(inv, r)).unwrap_or_default();
    let mut t = Tally::default();
    for (i, o) in inv.objects.iter().enumerate().filter(|(_, o)| !o.container) {
        let counts = Counts { objects: 1, bytes: o.size, stored: stored.get(i).copied().unwrap_or(0) };
        if is_host(o) {
            t.host.add(counts);
            continue;
        }
        let target = if o.target_id.is_empty() { "-".to_string() } else { o.target_id.clone() };
        t.targets.entry((target, o.offload_kind.clone())).or_default().add(counts);
        if dropped.get(i).copied().unwrap_or(false) {
            t.prunable.add(counts);
        }
    }
    t
}

#[cfg(test)]
mod natural_tests {
    use super::target_cmp;

    #[test]
    fn targets_sort_as_people_read_them() {
        let mut t = vec![
            "sm_100",
            "gfx1030",
            "sm_50",
            "gfx803",
            "gfx90a:xnack+",
            "gfx906",
            "host",
            "gfx90a:xnack-",
            "sm_89",
            "gfx942",
            "gfx9-generic",
        ];
        t.sort_by(|a, b| target_cmp(a, b));
        assert_eq!(
            t,
            [
                "gfx803",
                "gfx906",
                "gfx90a:xnack+",
                "gfx90a:xnack-",
                "gfx942",
                "gfx1030",
                "gfx9-generic",
                "host",
                "sm_50",
                "sm_89",
                "sm_100"
            ]
        );
    }
}
