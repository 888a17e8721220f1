//! Which code objects `prune` keeps: the host entry always; device entries
//! compatible with a `--keep` target (a feature either side leaves out
//! matches both settings, so `gfx90a` keeps `gfx90a:xnack+` and
//! `gfx90a:xnack-`, and `gfx90a:xnack+` keeps `gfx90a` and
//! `gfx90a:xnack+`), what `offload select` would load on a `--keep-gpu`
//! GPU, SPIR-V (it serves every GPU) unless dropped by name; everything
//! a `--drop` target covers goes (`--drop gfx90a` drops every gfx90a
//! entry, `--drop gfx90a:xnack-` only those built for xnack off).
//!
//! `prune` applies these rules; `offload size --keep` asks the same
//! question of listed code objects, so they live with the selection rules.

pub mod cuda;

use crate::id::{canonical_target_id, split_entry_id};
use crate::select::{Gpu, Runtime, select};
use crate::{Bytes, CodeObject, Format, Location, Payload};
use offload_format::target_id::parse_format;
use offload_format::triple::Triple;

/// A `--keep`/`--drop` target that does not parse (why).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad target: {0}")]
pub struct TargetError(pub String);

/// What to keep and drop, and how rebuilt compressed bundles are
/// compressed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Canonical target IDs (`gfx90a`, `gfx90a:xnack+`, `gfx9-generic`).
    pub keep: Vec<String>,
    /// Canonical target IDs whose entries go ([`parse_target`] forms).
    pub drop: Vec<String>,
    /// GPUs whose selected code object is kept (as `offload select`
    /// picks it for HIP).
    pub keep_gpu: Vec<Gpu>,
    /// Let a fat binary lose all its device code.
    pub allow_empty: bool,
    /// The zstd (or zlib) level of recompressed bundles; `None` is LLVM's
    /// default, zstd level 3 (zlib 6), with long-distance matching.
    pub compression_level: Option<i32>,
}

/// The canonical form of a `--keep`/`--drop` target; `amdgcnspirv` names
/// the SPIR-V entries.
pub fn parse_target(text: &str) -> Result<String, TargetError> {
    if text == "amdgcnspirv" {
        return Ok(text.to_string());
    }
    if let Some(cuda) = cuda::parse_target(text.rsplit_once("--").map_or(text, |(_, t)| t)) {
        return cuda;
    }
    // A triple (`x86_64-pc-linux-gnu`, `amdgcn-amd-amdhsa`) names every
    // OpenMP image built for it; `gfx9-generic` parses to no known arch.
    if let Some(triple) = as_triple(text) {
        return Ok(triple.as_str().to_string());
    }
    let tid = text.rsplit_once("--").map_or(text, |(_, t)| t);
    // A processor missing from the table is taken as given (the inspector
    // matches it by name), but only if it looks like one: `--keep banana` is
    // a typo, not a target.
    let processor = tid.split(':').next().unwrap_or_default();
    let table = offload_format::amdgpu::Table::Current;
    if table.canonical_processor(&offload_format::triple::Triple::parse("amdgcn-amd-amdhsa"), processor).is_none()
        && !offload_format::amdgpu::looks_like_amdgcn_processor(processor)
    {
        let advice = offload_format::gpu_names::advice(tid).map(|a| format!("; {a}")).unwrap_or_default();
        return Err(TargetError(format!("'{text}' names no AMDGPU processor{advice}")));
    }
    match canonical_target_id("amdgcn-amd-amdhsa", tid) {
        Ok(t) if !t.is_empty() => Ok(t),
        Ok(_) => Err(TargetError(format!("'{text}' names no target"))),
        Err(e) => Err(TargetError(e.to_string())),
    }
}

/// Whether a `--drop` rule covers an entry: same processor, and every
/// feature the rule fixes fixed the same way by the entry. Dropping
/// `gfx90a:xnack-` leaves `gfx90a` (any), which xnack+ GPUs still load.
pub fn covers(rule: &str, entry: &str) -> bool {
    let (Ok(r), Ok(e)) = (parse_format(rule), parse_format(entry)) else { return false };
    r.processor == e.processor && r.features.iter().all(|(name, on)| e.features.get(name) == Some(on))
}

/// Whether an entry's target ID and a rule's agree: same processor, and no
/// feature set one way by one and the other way by the other.
pub fn agrees(rule: &str, entry: &str) -> bool {
    let (Ok(r), Ok(e)) = (parse_format(rule), parse_format(entry)) else { return false };
    r.processor == e.processor && r.features.iter().all(|(name, on)| e.features.get(name).is_none_or(|v| v == on))
}

/// What a target that leaves features out took, in words, for the note
/// `--keep`, `--target-id` and `size --keep` print: `gfx90a leaves xnack
/// unset: takes gfx90a:xnack+ and gfx90a:xnack-` when the `entries` it
/// [`agrees`] with fix a feature the rule leaves out; `None` otherwise.
/// A target ID names code, and code for either setting is code for the
/// target (a GPU is settled to one mode instead: `Gpu::settle`;
/// docs/reference/selection-rules.md).
///
/// ```
/// use offload_inspect::keep::either_setting_note;
///
/// let entries = ["gfx90a:xnack+", "gfx90a:xnack-", "gfx906"];
/// assert_eq!(
///     either_setting_note("gfx90a", entries).unwrap(),
///     "gfx90a leaves xnack unset: takes gfx90a:xnack+ and gfx90a:xnack-"
/// );
/// assert_eq!(either_setting_note("gfx90a:xnack+", entries), None);
/// assert_eq!(either_setting_note("gfx906", entries), None);
/// ```
pub fn either_setting_note<'a>(rule: &str, entries: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let r = parse_format(rule).ok()?;
    let mut taken: Vec<&str> = Vec::new();
    let mut unset: Vec<&str> = Vec::new();
    for entry in entries {
        let Ok(e) = parse_format(entry) else { continue };
        if !agrees(rule, entry) {
            continue;
        }
        let left_out: Vec<&str> = e.features.keys().copied().filter(|f| !r.features.contains_key(f)).collect();
        if left_out.is_empty() {
            continue;
        }
        for f in left_out {
            if !unset.contains(&f) {
                unset.push(f);
            }
        }
        if !taken.contains(&entry) {
            taken.push(entry);
        }
    }
    if taken.is_empty() {
        return None;
    }
    taken.sort_by(|a, b| crate::report::size::target_cmp(a, b));
    let list = match taken.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => taken.join(""),
    };
    Some(format!("{rule} leaves {} unset: takes {list}", unset.join(" and ")))
}

/// The triple a `--keep`/`--drop` text names, if it is one: two to four
/// `-`-separated parts, no target-ID features, a known architecture
/// (`gfx9-generic` is a target ID, `amdgcn-amd-amdhsa--gfx90a` an entry ID).
pub fn as_triple(text: &str) -> Option<Triple> {
    let parts = text.split('-').count();
    let triple = Triple::parse(text);
    ((2..=4).contains(&parts) && !text.contains(':') && triple.is_known_arch()).then_some(triple)
}

/// Same architecture, OS and environment; vendors differ in spelling
/// (`x86_64-pc-linux-gnu` and `x86_64-unknown-linux-gnu` are one target).
pub fn same_target(a: &Triple, b: &Triple) -> bool {
    a.arch() == b.arch() && a.os() == b.os() && a.environment() == b.environment()
}

/// Whether a rule names an image: a triple by [`same_target`]; a target ID
/// by `test` against an AMDGPU image's canonical arch, by name otherwise
/// (`sm_80`).
fn names(rule: &str, triple: &str, arch: &str, test: fn(&str, &str) -> bool) -> bool {
    let image = Triple::parse(triple);
    if let Some(t) = as_triple(rule) {
        return same_target(&t, &image);
    }
    if arch.is_empty() {
        return false;
    }
    if image.is_amdgcn() {
        let canonical = canonical_target_id(triple, arch).unwrap_or_else(|_| arch.to_string());
        return test(rule, &canonical);
    }
    rule == arch
}

impl Rules {
    /// Whether an OpenMP image of this triple and arch stays: not named by
    /// a `--drop` rule, and named by a `--keep` rule when there are any.
    pub fn keeps_image(&self, triple: &str, arch: &str) -> bool {
        if self.drop.iter().any(|d| names(d, triple, arch, covers)) {
            return false;
        }
        self.keep.is_empty() || self.keep.iter().any(|k| names(k, triple, arch, agrees))
    }
}

/// One entry of a unit as the rules see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    /// The bundle entry ID.
    pub id: String,
    /// Payload size in bytes.
    pub size: u64,
}

fn canonical(id: &str) -> (bool, String) {
    let split = split_entry_id(id);
    let target = canonical_target_id(&split.triple, &split.target).unwrap_or(split.target);
    (split.kind == "host", target)
}

impl Rules {
    fn restricts(&self) -> bool {
        !self.keep.is_empty() || !self.keep_gpu.is_empty()
    }

    /// For each unit (a list of entries), whether each entry stays.
    pub fn decide(&self, units: &[Vec<EntryInfo>]) -> Vec<Vec<bool>> {
        let chosen = self.gpu_choices(units);
        units
            .iter()
            .enumerate()
            .map(|(u, entries)| {
                entries
                    .iter()
                    .enumerate()
                    .map(|(e, entry)| {
                        let (host, target) = canonical(&entry.id);
                        if host {
                            return true;
                        }
                        if self.drop.iter().any(|d| covers(d, &target)) {
                            return false;
                        }
                        !self.restricts()
                            || target == "amdgcnspirv"
                            || self.keep.iter().any(|k| agrees(k, &target))
                            || chosen.contains(&(u, e))
                    })
                    .collect()
            })
            .collect()
    }

    /// (unit, entry) pairs the HIP runtime would load on a `--keep-gpu` GPU,
    /// by `offload select`'s rules.
    fn gpu_choices(&self, units: &[Vec<EntryInfo>]) -> Vec<(usize, usize)> {
        if self.keep_gpu.is_empty() {
            return Vec::new();
        }
        let mut objects = Vec::new();
        let mut index = Vec::new();
        for (u, entries) in units.iter().enumerate() {
            for (e, entry) in entries.iter().enumerate() {
                let split = split_entry_id(&entry.id);
                let (target_id, target_id_error) = match canonical_target_id(&split.triple, &split.target) {
                    Ok(t) => (t, None),
                    Err(err) => (split.target.clone(), Some(err.to_string())),
                };
                objects.push(CodeObject {
                    location: Location::default(),
                    format: Format::Bundle,
                    id: entry.id.clone(),
                    offload_kind: split.kind,
                    triple: split.triple,
                    target_id,
                    target_id_error,
                    stored_target: split.target,
                    size: entry.size,
                    offset: None,
                    compressed: false,
                    unit: u,
                    container: false,
                    image_kind: None,
                    cuda: None,
                    kpack: None,
                    payload: Payload::Plain(Bytes::Borrowed(&[])),
                });
                index.push((u, e));
            }
        }
        let mut out = Vec::new();
        for gpu in &self.keep_gpu {
            for i in select(&objects, gpu, Runtime::Hip).chosen {
                if let Some(&pair) = index.get(i) {
                    out.push(pair);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(ids: &[&str]) -> Vec<EntryInfo> {
        ids.iter().map(|id| EntryInfo { id: id.to_string(), size: 1 }).collect()
    }

    const IDS: [&str; 6] = [
        "host-x86_64-unknown-linux-gnu-",
        "hipv4-amdgcn-amd-amdhsa--gfx906",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
        "hipv4-amdgcn-amd-amdhsa--gfx90a",
        "hipv4-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
    ];

    fn keep(rules: Rules) -> Vec<bool> {
        rules.decide(&[unit(&IDS)]).remove(0)
    }

    #[test]
    fn keep_matches_by_target_id_rules() {
        let r = Rules { keep: vec![parse_target("gfx90a").unwrap()], ..Default::default() };
        assert_eq!(keep(r), [true, false, true, true, true, false]);
        let r = Rules { keep: vec![parse_target("gfx90a:xnack+").unwrap()], ..Default::default() };
        assert_eq!(keep(r), [true, false, true, false, true, false]);
        let r = Rules { keep: vec![parse_target("gfx942").unwrap(), "gfx906".into()], ..Default::default() };
        assert_eq!(keep(r), [true, true, false, false, false, true]);
    }

    #[test]
    fn drop_alone_keeps_everything_else() {
        let r = Rules { drop: vec![parse_target("gfx90a:xnack-").unwrap()], ..Default::default() };
        assert_eq!(keep(r), [true, true, true, false, true, true]);
    }

    #[test]
    fn keep_gpu_keeps_what_select_loads() {
        let gpu = Gpu::parse("gfx90a:sramecc+:xnack-").unwrap();
        let r = Rules { keep_gpu: vec![gpu], ..Default::default() };
        // select prefers the object that fixes more features.
        assert_eq!(keep(r), [true, false, false, true, false, false]);
    }

    #[test]
    fn bad_targets_are_refused() {
        // A gfx name missing from the processor table is kept as given (as
        // the inspector matches it); it keeps only code objects of that name.
        assert_eq!(parse_target("gfx9000").unwrap(), "gfx9000");
        assert!(parse_target("banana").is_err());
        assert!(parse_target("gfx90a:xnack").is_err());
        assert!(parse_target("").is_err());
        assert_eq!(parse_target("amdgcn-amd-amdhsa--gfx90a:xnack+").unwrap(), "gfx90a:xnack+");
    }
}
