//! Bundle entry IDs and target IDs, with the rules LLVM 19's bundler applies.
//!
//! A bundle entry ID is `<offload-kind>-<triple>[-<target-id>]`, and a target
//! ID is `<processor>(:<feature>(+|-))*`, e.g.
//! `hip-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`.
//!
//! LLVM 19 does not parse IDs by grammar: it looks at the text after the last
//! dash (before any `:`) and asks whether it is a name in clang's GPU table.
//! That table contains the empty string, so an ID ending in `-` "has a GPU"
//! and its target ID becomes the whole ID string. The IDs LLVM 19 writes
//! (its "standardized" form) follow from that; [`BundleEntryId`] reproduces
//! it exactly, quirks included, because the bytes in every bundle and the
//! answers of every match depend on it.

use crate::amdgpu;
use crate::llvm_release::{BundleIdStyle, LlvmRelease};
use crate::offload_arch::is_llvm19_offload_arch;
use crate::triple::{self as triple_names, Environment, Os, Triple, Vendor};
use std::collections::{BTreeMap, BTreeSet};

/// Why a target ID does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetIdError {
    /// Features without a processor (`:xnack+`; the whole ID).
    #[error("target ID '{id}' has an empty processor name")]
    EmptyProcessor {
        /// The whole target ID.
        id: String,
    },
    /// A feature without its `+`/`-`.
    #[error("target ID '{id}': feature '{feature}' must end in '+' or '-'")]
    MissingSign {
        /// The whole target ID.
        id: String,
        /// The feature as written.
        feature: String,
    },
    /// A feature given twice.
    #[error("target ID '{id}': feature '{feature}' appears more than once")]
    DuplicateFeature {
        /// The whole target ID.
        id: String,
        /// The feature's name.
        feature: String,
    },
    /// A processor the triple's table does not list.
    #[error("target ID '{id}': unknown processor '{processor}' for {triple}")]
    UnknownProcessor {
        /// The whole target ID.
        id: String,
        /// The processor as written.
        processor: String,
        /// The triple it was looked up for.
        triple: String,
    },
    /// A feature the processor does not have (`gfx1100:xnack+`).
    #[error("target ID '{id}': processor {processor} does not support feature '{feature}'")]
    UnsupportedFeature {
        /// The whole target ID.
        id: String,
        /// The canonical processor.
        processor: String,
        /// The feature's name.
        feature: String,
    },
}

/// A target ID split into its processor and features, without checking
/// either against a processor table (clang's "format-only" parse).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetIdParts<'a> {
    /// The processor as written (may be empty).
    pub processor: &'a str,
    /// Feature name to On (`+`) or Off (`-`), sorted by name.
    pub features: BTreeMap<&'a str, bool>,
}

/// Splits a target ID into processor and features. The empty string is a
/// valid target ID with an empty processor.
pub fn parse_format(id: &str) -> Result<TargetIdParts<'_>, TargetIdError> {
    let mut parts = TargetIdParts { processor: "", features: BTreeMap::new() };
    if id.is_empty() {
        return Ok(parts);
    }
    let (processor, rest) = id.split_once(':').unwrap_or((id, ""));
    if processor.is_empty() {
        return Err(TargetIdError::EmptyProcessor { id: id.to_string() });
    }
    parts.processor = processor;
    if rest.is_empty() {
        return Ok(parts);
    }
    for item in rest.split(':') {
        let (name, on) = match item.as_bytes().last() {
            Some(b'+') => (&item[..item.len() - 1], true),
            Some(b'-') => (&item[..item.len() - 1], false),
            _ => return Err(TargetIdError::MissingSign { id: id.to_string(), feature: item.to_string() }),
        };
        if parts.features.insert(name, on).is_some() {
            return Err(TargetIdError::DuplicateFeature { id: id.to_string(), feature: name.to_string() });
        }
    }
    Ok(parts)
}

/// A fully parsed target ID: the canonical processor name for the triple and
/// features the processor supports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetId {
    /// The canonical processor name (`gfx803` for `fiji`).
    pub processor: String,
    /// Feature name to On (`+`) or Off (`-`), sorted by name.
    pub features: BTreeMap<String, bool>,
}

impl TargetId {
    /// Parses `id` for `triple` as clang does: AMDGPU processor names are
    /// canonicalised (alternative names such as `fiji` accepted) and only
    /// the features the processor supports are allowed. For other triples
    /// the processor is taken as is and no feature is allowed.
    pub fn parse(triple: &Triple, id: &str) -> Result<TargetId, TargetIdError> {
        TargetId::parse_in(amdgpu::Table::Llvm19, triple, id)
    }

    /// [`TargetId::parse`] with the AMDGPU processors `release` knows (LLVM
    /// 22 knows gfx950 and no longer gfx940), as that release's bundler
    /// matches target IDs.
    pub fn parse_for(release: LlvmRelease, triple: &Triple, id: &str) -> Result<TargetId, TargetIdError> {
        if release == LlvmRelease::Llvm19 {
            return TargetId::parse(triple, id);
        }
        let parsed = TargetId::parse_in(amdgpu::Table::Current, triple, id)?;
        if triple.is_amdgcn() && !release.knows_amdgcn_processor(&parsed.processor) {
            return Err(TargetIdError::UnknownProcessor {
                id: id.to_string(),
                processor: parse_format(id).map(|p| p.processor.to_string()).unwrap_or_default(),
                triple: triple.as_str().to_string(),
            });
        }
        Ok(parsed)
    }

    /// [`TargetId::parse`] with the processors of `table` (the inspector
    /// reads with [`amdgpu::Table::Current`]).
    pub fn parse_in(table: amdgpu::Table, triple: &Triple, id: &str) -> Result<TargetId, TargetIdError> {
        let parts = parse_format(id)?;
        let unknown = || TargetIdError::UnknownProcessor {
            id: id.to_string(),
            processor: parts.processor.to_string(),
            triple: triple.as_str().to_string(),
        };
        let (processor, xnack, sramecc) = if triple.is_amdgcn() {
            let p = table.amdgcn_processor(parts.processor).ok_or_else(unknown)?;
            (p.name, p.xnack, p.sramecc)
        } else if triple.is_r600() {
            (amdgpu::r600_canonical(parts.processor).ok_or_else(unknown)?, false, false)
        } else {
            (parts.processor, false, false)
        };
        if processor.is_empty() {
            return Err(unknown());
        }
        for &name in parts.features.keys() {
            let supported = (name == "xnack" && xnack) || (name == "sramecc" && sramecc);
            if !supported {
                return Err(TargetIdError::UnsupportedFeature {
                    id: id.to_string(),
                    processor: processor.to_string(),
                    feature: name.to_string(),
                });
            }
        }
        Ok(TargetId {
            processor: processor.to_string(),
            features: parts.features.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        })
    }

    /// The canonical spelling: processor, then features sorted by name.
    pub fn canonical(&self) -> String {
        let mut s = self.processor.clone();
        for (name, on) in &self.features {
            s.push(':');
            s.push_str(name);
            s.push(if *on { '+' } else { '-' });
        }
        s
    }
}

/// The offload kinds LLVM 19's bundler accepts.
pub const OFFLOAD_KINDS: [&str; 4] = ["host", "openmp", "hip", "hipv4"];

/// A bundle entry ID as the bundler of one LLVM release understands it
/// ([`BundleEntryId::parse`]: LLVM 19; [`BundleEntryId::parse_as`]: any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntryId {
    /// The release whose rules parsed the ID (and write it back).
    pub release: LlvmRelease,
    /// The offload kind (`host`, `hip`, `hipv4`, `openmp`, ...).
    pub kind: String,
    /// Always rebuilt from four components (`arch-vendor-os-env`).
    pub triple: Triple,
    /// Everything from the GPU name on, features included; empty when the
    /// ID names no GPU. For IDs ending in `-` it is the whole ID (see the
    /// module documentation).
    pub target_id: String,
    /// The target ID comes from the empty GPU name, not from a real one.
    pub target_id_is_artefact: bool,
}

fn four_field_triple(text: &str) -> Triple {
    let t = Triple::parse(text);
    Triple::from_parts(t.arch_name(), t.vendor_name(), t.os_name(), t.environment_name())
}

impl BundleEntryId {
    /// Parses an ID exactly as LLVM 19 does.
    pub fn parse(id: &str) -> BundleEntryId {
        let before_colon = id.split_once(':').map_or(id, |(a, _)| a);
        let (head, gpu) = before_colon.rsplit_once('-').unwrap_or((before_colon, ""));
        if is_llvm19_offload_arch(gpu) {
            let (kind, triple) = head.split_once('-').unwrap_or((head, ""));
            let start = id.find(gpu).unwrap_or(0);
            BundleEntryId {
                release: LlvmRelease::Llvm19,
                kind: kind.to_string(),
                triple: four_field_triple(triple),
                target_id: id[start..].to_string(),
                target_id_is_artefact: gpu.is_empty(),
            }
        } else {
            let (kind, triple) = before_colon.split_once('-').unwrap_or((before_colon, ""));
            BundleEntryId {
                release: LlvmRelease::Llvm19,
                kind: kind.to_string(),
                triple: four_field_triple(triple),
                target_id: String::new(),
                target_id_is_artefact: false,
            }
        }
    }

    /// Parses an ID as `release`'s bundler does (see [`BundleIdStyle`]).
    /// For the six-field style an ID of fewer than five fields, which the
    /// bundler refuses as a request ([`has_six_field_shape`]) but may find
    /// stored in a file, is read with the missing fields empty.
    pub fn parse_as(release: LlvmRelease, id: &str) -> BundleEntryId {
        match release.facts().bundle_id_style {
            BundleIdStyle::LastPiece => BundleEntryId { release, ..BundleEntryId::parse(id) },
            BundleIdStyle::SixFields => {
                let fields: Vec<&str> = id.splitn(6, '-').collect();
                let field = |i: usize| fields.get(i).copied().unwrap_or("");
                let last = field(5);
                let processor = last.split_once(':').map_or(last, |(p, _)| p);
                let target_id = if !processor.is_empty() && release.knows_offload_arch(processor) { last } else { "" };
                BundleEntryId {
                    release,
                    kind: field(0).to_string(),
                    triple: Triple::from_parts(field(1), field(2), field(3), field(4)),
                    target_id: target_id.to_string(),
                    target_id_is_artefact: false,
                }
            }
        }
    }

    /// The standardized ID the ID's release writes: LLVM 19
    /// `kind-arch-vendor-os-env-targetid`; LLVM 22 the same with the triple
    /// normalised (`hip-amdgcn-amd-amdhsa--gfx90a`,
    /// `openmp-nvptx64-nvidia-cuda-unknown-sm_70`).
    pub fn standardized(&self) -> String {
        match self.release.facts().bundle_id_style {
            BundleIdStyle::LastPiece => format!("{}-{}-{}", self.kind, self.triple.as_str(), self.target_id),
            BundleIdStyle::SixFields => {
                format!("{}-{}-{}", self.kind, normalized_triple(&self.triple), self.target_id)
            }
        }
    }

    /// Whether the kind is one of [`OFFLOAD_KINDS`].
    pub fn is_kind_valid(&self) -> bool {
        OFFLOAD_KINDS.contains(&self.kind.as_str())
    }

    /// Whether the triple's architecture is one LLVM knows.
    pub fn is_triple_valid(&self) -> bool {
        self.triple.is_known_arch()
    }

    /// Whether this is the host entry.
    pub fn is_host(&self) -> bool {
        self.kind == "host"
    }

    /// `kind-triple`, the key LLVM groups target IDs by.
    pub fn kind_and_triple(&self) -> String {
        format!("{}-{}", self.kind, self.triple.as_str())
    }

    /// The target ID with the empty-GPU artefact removed: what the ID means.
    pub fn meaningful_target_id(&self) -> &str {
        if self.target_id_is_artefact { "" } else { &self.target_id }
    }
}

/// The ID LLVM 19 writes for a typed target.
pub fn standardize(id: &str) -> String {
    BundleEntryId::parse(id).standardized()
}

/// The ID `release`'s bundler writes for a typed target.
pub fn standardize_as(release: LlvmRelease, id: &str) -> String {
    BundleEntryId::parse_as(release, id).standardized()
}

/// Whether `id` has the shape LLVM 20+ bundlers require of a `-targets`
/// value: five or six `-`-separated fields once split at its first five
/// dashes (`<kind>-<arch>-<vendor>-<os>-<env>[-<target id>]`).
pub fn has_six_field_shape(id: &str) -> bool {
    id.splitn(6, '-').count() >= 5
}

/// The triple as LLVM 20+ bundlers write it in an ID (the triple of an ID
/// of the six-field style, always four fields as given). Recognised
/// components out of place are moved to their place (`x86_64-linux-gnu-`
/// becomes `x86_64-unknown-linux-gnu`), empty ones become `unknown`; for the
/// AMDHSA OS only three fields are kept and a `-` follows (`amdgcn-amd-amdhsa-`,
/// the form the HIP runtime expects). Our own rule, checked against
/// `clang-offload-bundler-22` on the forms the tests list; LLVM's
/// normaliser reorders more exotic mixes differently.
fn normalized_triple(triple: &Triple) -> String {
    let given = [triple.arch_name(), triple.vendor_name(), triple.os_name(), triple.environment_name()];
    let recognised = |slot: usize, name: &str| match slot {
        1 => triple_names::parse_vendor(name) != Vendor::Unknown,
        2 => triple_names::parse_os(name) != Os::Unknown,
        3 => {
            triple_names::parse_environment(name) != Environment::Unknown
                || triple_names::parse_object_format(name) != triple_names::ObjectFormat::Unknown
        }
        _ => false,
    };
    let mut slots: [&str; 4] = [given[0], "", "", ""];
    let mut placed = [true, false, false, false];
    let mut used = [true, false, false, false];
    // Components recognised for some slot go there, first come first.
    for slot in 1..4 {
        if let Some(i) = (1..4).find(|&i| !used[i] && !given[i].is_empty() && recognised(slot, given[i])) {
            slots[slot] = given[i];
            placed[slot] = true;
            used[i] = true;
        }
    }
    // The rest keep their place when it is free, else take the next free one.
    for i in 1..4 {
        if used[i] || given[i].is_empty() {
            continue;
        }
        let slot = if !placed[i] { Some(i) } else { (1..4).find(|&s| !placed[s]) };
        if let Some(s) = slot {
            slots[s] = given[i];
            placed[s] = true;
        }
    }
    let name = |s: &str| if s.is_empty() { "unknown".to_string() } else { s.to_string() };
    if triple.os() == Os::AmdHsa {
        format!("{}-{}-{}-", name(slots[0]), name(slots[1]), name(slots[2]))
    } else {
        format!("{}-{}-{}-{}", name(slots[0]), name(slots[1]), name(slots[2]), name(slots[3]))
    }
}

fn kinds_compatible(code_object: &str, target: &str, hip_openmp_compatible: bool) -> bool {
    if code_object == target
        || (code_object == "hip" && target == "hipv4")
        || (code_object == "hipv4" && target == "hip")
    {
        return true;
    }
    if hip_openmp_compatible {
        let hip = |k: &str| k.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("hip"));
        return (hip(code_object) && target == "openmp") || (code_object == "openmp" && hip(target));
    }
    false
}

/// Target IDs for the compatibility check: the processor as the triple's
/// table knows it, or the raw processor for other triples; `None` when it
/// does not parse (LLVM then treats the pair as incompatible).
fn parse_for_match(release: LlvmRelease, triple: &Triple, target_id: &str) -> Option<TargetId> {
    let id = TargetId::parse_for(release, triple, target_id).ok()?;
    (!id.processor.is_empty()).then_some(id)
}

/// LLVM 19's rule (and LLVM 22's, with the requested ID's release's
/// processor table) for whether a code object (a stored bundle entry) may be
/// used for a requested target: exact match, or compatible kinds and
/// triples, the same processor, and every feature the code object fixes
/// fixed the same way by the target (a feature it leaves out means "any").
pub fn is_compatible_llvm19(code_object: &BundleEntryId, target: &BundleEntryId, hip_openmp: bool) -> bool {
    if code_object.kind == target.kind
        && code_object.triple.is_compatible_with(&target.triple)
        && code_object.target_id == target.target_id
    {
        return true;
    }
    if !kinds_compatible(&code_object.kind, &target.kind, hip_openmp)
        || !code_object.triple.is_compatible_with(&target.triple)
    {
        return false;
    }
    let (Some(obj), Some(tgt)) = (
        parse_for_match(target.release, &code_object.triple, &code_object.target_id),
        parse_for_match(target.release, &target.triple, &target.target_id),
    ) else {
        return false;
    };
    obj.processor == tgt.processor
        && obj.features.len() <= tgt.features.len()
        && obj.features.iter().all(|(name, on)| tgt.features.get(name) == Some(on))
}

/// The rule we apply when unbundling: LLVM 19's, and in addition a stored
/// ID matches when LLVM 19 would have written it as the requested ID. That
/// second part lets us extract entries (the host above all) from bundles
/// written by LLVM 14 and 16, which store `host-x86_64-unknown-linux-gnu`
/// where LLVM 19 writes and asks for `host-x86_64-unknown-linux-gnu-`;
/// LLVM 19 itself cannot. It never applies to IDs LLVM 19 wrote.
///
/// `stored` is the parsed stored ID; `requested` the parsed standardized
/// request, whose text is `requested_text`.
pub fn is_compatible(
    stored: &BundleEntryId,
    requested: &BundleEntryId,
    requested_text: &str,
    hip_openmp: bool,
) -> bool {
    is_compatible_llvm19(stored, requested, hip_openmp) || stored.standardized() == requested_text
}

/// LLVM 19's check for target IDs that cannot be bundled together. Within
/// one `kind-triple` group, IDs are taken in sorted order; the first ID seen
/// for a processor fixes which features are specified, and a later ID of
/// the same processor conflicts if it specifies a feature the first did
/// not. Signs do not matter, and the rule is one-sided: {gfx90a:xnack+,
/// gfx90a} conflicts (gfx90a sorts first), {gfx90a:sramecc+:xnack+,
/// gfx90a:xnack+} does not. IDs that do not parse are skipped. Returns the
/// first conflicting pair.
pub fn find_conflict<'a>(target_ids: &BTreeSet<&'a str>) -> Option<(&'a str, &'a str)> {
    let mut first_by_processor: BTreeMap<&str, (&str, BTreeSet<&str>)> = BTreeMap::new();
    for &id in target_ids {
        let Ok(parts) = parse_format(id) else { continue };
        let features: BTreeSet<&str> = parts.features.keys().copied().collect();
        match first_by_processor.get(parts.processor) {
            None => {
                first_by_processor.insert(parts.processor, (id, features));
            }
            Some((first, seen)) => {
                if features.iter().any(|f| !seen.contains(f)) {
                    return Some((first, id));
                }
            }
        }
    }
    None
}

/// Applies [`find_conflict`] to every `kind-triple` group of `ids` (groups
/// in sorted order) and returns the conflicting pair as full IDs.
pub fn find_conflicting_targets(ids: &[BundleEntryId]) -> Option<(String, String)> {
    let mut groups: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for id in ids {
        groups.entry(id.kind_and_triple()).or_default().insert(&id.target_id);
    }
    groups
        .iter()
        .find_map(|(group, tids)| find_conflict(tids).map(|(a, b)| (format!("{group}-{a}"), format!("{group}-{b}"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> BundleEntryId {
        BundleEntryId::parse(s)
    }

    /// docs/formats/bundle.md §2.4, every row the installed table can decide.
    #[test]
    fn standardization_examples() {
        for (typed, written) in [
            ("host-x86_64-unknown-linux-gnu", "host-x86_64-unknown-linux-gnu-"),
            ("openmp-x86_64-pc-linux-gnu", "openmp-x86_64-pc-linux-gnu-"),
            ("hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx906"),
            ("hip-amdgcn-amd-amdhsa--gfx906:xnack+", "hip-amdgcn-amd-amdhsa--gfx906:xnack+"),
            ("hip-amdgcn-amd-amdhsa-gfx906", "hip-amdgcn-amd-amdhsa--gfx906"),
            ("openmp-nvptx64-nvidia-cuda-sm_70", "openmp-nvptx64-nvidia-cuda--sm_70"),
            ("openmp-nvptx64-nvidia-cuda", "openmp-nvptx64-nvidia-cuda--"),
            ("hip-amdgcn-amd-amdhsa", "hip-amdgcn-amd-amdhsa--"),
            ("hip-amdgcn-amd-amdhsa-unknown", "hip-amdgcn-amd-amdhsa-unknown-"),
            ("hip-amdgcn-amd-amdhsa-gnu-gfx906", "hip-amdgcn-amd-amdhsa-gnu-gfx906"),
            ("hip-amdgcn-amd-amdhsa--gfx9000", "hip-amdgcn-amd-amdhsa--gfx9000-"),
            ("hip-amdgcn-amd-amdhsa-", "hip-amdgcn-amd-amdhsa--hip-amdgcn-amd-amdhsa-"),
            ("openmp-nvptx64---", "openmp-nvptx64----openmp-nvptx64---"),
            ("hip-amdgcn-amd-amdhsa--fiji", "hip-amdgcn-amd-amdhsa--fiji-"),
            ("foo-bar", "foo-bar----"),
            ("", "-----"),
            ("host", "host-----host"),
        ] {
            assert_eq!(standardize(typed), written, "for {typed}");
        }
    }

    /// What `clang-offload-bundler-22` writes for each typed target
    /// (observed with Debian's 22.1.8; docs/llvm-releases.md).
    #[test]
    fn standardization_of_llvm_22() {
        let r = LlvmRelease::Llvm22;
        for (typed, written) in [
            ("host-x86_64-unknown-linux-gnu", "host-x86_64-unknown-linux-gnu-"),
            ("hip-amdgcn-amd-amdhsa--gfx90a", "hip-amdgcn-amd-amdhsa--gfx90a"),
            ("hip-amdgcn-amd-amdhsa-unknown-gfx90a", "hip-amdgcn-amd-amdhsa--gfx90a"),
            ("hip-amdgcn-amd-amdhsa-gnu-gfx90a", "hip-amdgcn-amd-amdhsa--gfx90a"),
            ("hip-amdgcn-amd-amdhsa--gfx950", "hip-amdgcn-amd-amdhsa--gfx950"),
            ("hip-amdgcn-amd-amdhsa--gfx9-4-generic", "hip-amdgcn-amd-amdhsa--gfx9-4-generic"),
            ("hip-amdgcn-amd-amdhsa--gfx940", "hip-amdgcn-amd-amdhsa--"),
            ("hip-amdgcn-amd-amdhsa--fiji", "hip-amdgcn-amd-amdhsa--"),
            ("hip-amdgcn-amd-amdhsa--gfx90a-extra", "hip-amdgcn-amd-amdhsa--"),
            ("hip-amdgcn-amd-amdhsa--gfx90a:xnack+:sramecc-", "hip-amdgcn-amd-amdhsa--gfx90a:xnack+:sramecc-"),
            ("hip-amdgcn--amdhsa--gfx90a", "hip-amdgcn-unknown-amdhsa--gfx90a"),
            ("hip-amdgcn-amd---gfx90a", "hip-amdgcn-amd-unknown-unknown-gfx90a"),
            ("hip-amdgcn-amd-amdpal--gfx90a", "hip-amdgcn-amd-amdpal-unknown-gfx90a"),
            ("hip-spirv64-amd-amdhsa--amdgcnspirv", "hip-spirv64-amd-amdhsa--amdgcnspirv"),
            ("openmp-nvptx64-nvidia-cuda--sm_70", "openmp-nvptx64-nvidia-cuda-unknown-sm_70"),
            ("openmp-nvptx64-nvidia-cuda--sm_120a", "openmp-nvptx64-nvidia-cuda-unknown-sm_120a"),
            ("openmp-nvptx64---", "openmp-nvptx64-unknown-unknown-unknown-"),
            ("openmp-nvptx64-cuda--", "openmp-nvptx64-unknown-cuda-unknown-"),
            ("openmp-x86_64-linux-gnu-", "openmp-x86_64-unknown-linux-gnu-"),
            ("openmp-x86_64-foo-linux-gnu", "openmp-x86_64-foo-linux-gnu-"),
            ("openmp-x86_64-pc-linux-gnu-gfx90a", "openmp-x86_64-pc-linux-gnu-gfx90a"),
        ] {
            assert_eq!(standardize_as(r, typed), written, "for {typed}");
        }
        assert_eq!(
            standardize_as(LlvmRelease::Llvm19, "hip-amdgcn-amd-amdhsa--gfx950"),
            "hip-amdgcn-amd-amdhsa--gfx950-"
        );
        assert!(has_six_field_shape("host-x86_64-unknown-linux-gnu"));
        assert!(!has_six_field_shape("host-x86_64-unknown-linux"));
        assert!(!has_six_field_shape("hip-amdgcn-amd-amdhsa"));
        // A stored ID of too few fields still parses (missing fields empty).
        assert_eq!(BundleEntryId::parse_as(r, "host").standardized(), "host-unknown-unknown-unknown-unknown-");
    }

    /// LLVM 22 matches `hip` with `hipv4`, knows gfx950 and the
    /// generic targets by name (a generic entry is not offered for a
    /// processor it covers), and no longer knows gfx940.
    #[test]
    fn compatibility_of_llvm_22() {
        let r = LlvmRelease::Llvm22;
        let ok = |obj: &str, tgt: &str| {
            let tgt = standardize_as(r, tgt);
            is_compatible(&BundleEntryId::parse_as(r, obj), &BundleEntryId::parse_as(r, &tgt), &tgt, false)
        };
        assert!(ok("hipv4-amdgcn-amd-amdhsa--gfx950:xnack+", "hip-amdgcn-amd-amdhsa--gfx950:xnack+"));
        assert!(!ok("hipv4-amdgcn-amd-amdhsa--gfx950:xnack+", "hip-amdgcn-amd-amdhsa--gfx950"));
        assert!(ok("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic", "hip-amdgcn-amd-amdhsa--gfx9-4-generic"));
        assert!(!ok("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic", "hip-amdgcn-amd-amdhsa--gfx942"));
        assert!(ok("hipv4-amdgcn-amd-amdhsa-unknown-gfx90a", "hip-amdgcn-amd-amdhsa--gfx90a"));
        // LLVM 19 wrote gfx950 with a trailing dash: not gfx950 for LLVM 22.
        assert!(!ok("hip-amdgcn-amd-amdhsa--gfx950-", "hip-amdgcn-amd-amdhsa--gfx950"));
    }

    #[test]
    fn target_id_grammar() {
        let p = parse_format("gfx90a:xnack+:sramecc-").unwrap();
        assert_eq!(p.processor, "gfx90a");
        assert_eq!(p.features.into_iter().collect::<Vec<_>>(), [("sramecc", false), ("xnack", true)]);
        assert_eq!(parse_format("").unwrap().processor, "");
        assert!(matches!(parse_format(":xnack+"), Err(TargetIdError::EmptyProcessor { .. })));
        assert!(matches!(parse_format("gfx906:xnack"), Err(TargetIdError::MissingSign { .. })));
        assert!(matches!(parse_format("gfx906:xnack+:xnack-"), Err(TargetIdError::DuplicateFeature { .. })));
        assert!(matches!(parse_format("gfx906::xnack+"), Err(TargetIdError::MissingSign { .. })));
    }

    #[test]
    fn canonical_form_sorts_features_and_uses_primary_names() {
        let amd = Triple::parse("amdgcn-amd-amdhsa");
        assert_eq!(TargetId::parse(&amd, "gfx90a:xnack+:sramecc-").unwrap().canonical(), "gfx90a:sramecc-:xnack+");
        assert_eq!(TargetId::parse(&amd, "fiji").unwrap().canonical(), "gfx803");
        assert!(matches!(TargetId::parse(&amd, "gfx803:xnack+"), Err(TargetIdError::UnsupportedFeature { .. })));
        assert!(matches!(TargetId::parse(&amd, "gfx9999"), Err(TargetIdError::UnknownProcessor { .. })));
        let nv = Triple::parse("nvptx64-nvidia-cuda");
        assert_eq!(TargetId::parse(&nv, "sm_70").unwrap().canonical(), "sm_70");
        assert!(TargetId::parse(&nv, "sm_70:xnack+").is_err());
    }

    /// docs/formats/bundle.md §7.3 examples and §10 cases 34–37.
    #[test]
    fn compatibility_rules() {
        let ok = |obj: &str, tgt: &str| is_compatible_llvm19(&id(obj), &id(&standardize(tgt)), false);
        assert!(ok("hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx906"));
        assert!(ok("hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx906:xnack+"));
        assert!(ok("hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx906:sramecc+:xnack+"));
        assert!(!ok("hip-amdgcn-amd-amdhsa--gfx90a:xnack+", "hip-amdgcn-amd-amdhsa--gfx90a"));
        assert!(ok("hip-amdgcn-amd-amdhsa--gfx90a:xnack+", "hip-amdgcn-amd-amdhsa--gfx90a:xnack+:sramecc-"));
        assert!(!ok("hip-amdgcn-amd-amdhsa--gfx90a:xnack+", "hip-amdgcn-amd-amdhsa--gfx90a:xnack-"));
        assert!(ok("hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa-unknown-gfx906"));
        assert!(ok("hip-amdgcn-amd-amdhsa--gfx906", "hipv4-amdgcn-amd-amdhsa--gfx906"));
        assert!(!ok("hip-amdgcn-amd-amdhsa--gfx906", "openmp-amdgcn-amd-amdhsa--gfx906"));
        assert!(is_compatible_llvm19(
            &id("hip-amdgcn-amd-amdhsa--gfx906"),
            &id("openmp-amdgcn-amd-amdhsa--gfx906"),
            true
        ));
        assert!(!ok("hip-amdgcn-amd-amdhsa--gfx906", "hip-amdgcn-amd-amdhsa--gfx908"));
        // Exact string matches hold even for features the processor lacks.
        assert!(ok("hip-amdgcn-amd-amdhsa--gfx1030:xnack+", "hip-amdgcn-amd-amdhsa--gfx1030:xnack+"));
    }

    /// LLVM 19 cannot take the host out of a bundle written by LLVM 14/16;
    /// our rule can, and agrees with LLVM 19 otherwise.
    #[test]
    fn older_host_ids_match_with_our_rule_only() {
        let ours = |stored: &str, wanted: &str| {
            let wanted = standardize(wanted);
            is_compatible(&id(stored), &id(&wanted), &wanted, false)
        };
        let stored = "host-x86_64-unknown-linux-gnu";
        let wanted = standardize(stored);
        assert!(!is_compatible_llvm19(&id(stored), &id(&wanted), false));
        assert!(ours(stored, stored));
        assert!(ours("openmp-x86_64-pc-linux-gnu", "openmp-x86_64-pc-linux-gnu"));
        assert!(!ours(stored, "host-aarch64-unknown-linux-gnu"));
        assert!(!ours(stored, "hip-amdgcn-amd-amdhsa--gfx906"));
        // An ID LLVM 19 wrote is matched by LLVM 19's rule alone.
        assert!(ours("host-x86_64-unknown-linux-gnu-", stored));
        assert!(!ours("openmp-x86_64-pc-linux-gnu-", "openmp-x86_64-pc-linux-gnu-unknown"));
    }

    /// docs/formats/bundle.md §7.5 and §10 cases 18–20.
    #[test]
    fn conflicts_are_one_sided() {
        fn c<'a>(ids: &[&'a str]) -> Option<(&'a str, &'a str)> {
            find_conflict(&ids.iter().copied().collect())
        }
        assert_eq!(c(&["gfx90a", "gfx90a:xnack+"]), Some(("gfx90a", "gfx90a:xnack+")));
        assert_eq!(c(&["gfx90a:sramecc+", "gfx90a:xnack+"]), Some(("gfx90a:sramecc+", "gfx90a:xnack+")));
        assert_eq!(c(&["gfx90a:sramecc+:xnack+", "gfx90a:xnack+"]), None);
        assert_eq!(c(&["gfx90a:xnack-", "gfx90a:xnack+"]), None);
        assert_eq!(c(&["gfx906:xnack+", "gfx908:xnack-"]), None);
        assert_eq!(c(&["gfx906:xnack", "gfx906:xnack+"]), None);
    }

    #[test]
    fn conflicts_are_reported_with_their_group() {
        let ids: Vec<_> = [
            "hipv4-amdgcn-amd-amdhsa--gfx90a",
            "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            "hip-amdgcn-amd-amdhsa--gfx906",
            "hip-amdgcn-amd-amdhsa--gfx906:sramecc+",
        ]
        .iter()
        .map(|s| id(s))
        .collect();
        assert_eq!(
            find_conflicting_targets(&ids),
            Some(("hip-amdgcn-amd-amdhsa--gfx906".into(), "hip-amdgcn-amd-amdhsa--gfx906:sramecc+".into()))
        );
    }
}
