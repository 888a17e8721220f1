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
use crate::offload_arch::is_llvm19_offload_arch;
use crate::triple::Triple;
use std::collections::{BTreeMap, BTreeSet};

/// Why a target ID does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetIdError {
    /// Features without a processor (`:xnack+`; the whole ID).
    #[error("target ID '{0}' has an empty processor name")]
    EmptyProcessor(String),
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
        return Err(TargetIdError::EmptyProcessor(id.to_string()));
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

/// A bundle entry ID as LLVM 19's bundler understands it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleEntryId {
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
                kind: kind.to_string(),
                triple: four_field_triple(triple),
                target_id: id[start..].to_string(),
                target_id_is_artefact: gpu.is_empty(),
            }
        } else {
            let (kind, triple) = before_colon.split_once('-').unwrap_or((before_colon, ""));
            BundleEntryId {
                kind: kind.to_string(),
                triple: four_field_triple(triple),
                target_id: String::new(),
                target_id_is_artefact: false,
            }
        }
    }

    /// The standardized ID LLVM 19 writes: `kind-arch-vendor-os-env-targetid`.
    pub fn standardized(&self) -> String {
        format!("{}-{}-{}", self.kind, self.triple.as_str(), self.target_id)
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
fn parse_for_match(triple: &Triple, target_id: &str) -> Option<TargetId> {
    let id = TargetId::parse(triple, target_id).ok()?;
    (!id.processor.is_empty()).then_some(id)
}

/// LLVM 19's rule for whether a code object (a stored bundle entry) may be
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
        parse_for_match(&code_object.triple, &code_object.target_id),
        parse_for_match(&target.triple, &target.target_id),
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

    #[test]
    fn target_id_grammar() {
        let p = parse_format("gfx90a:xnack+:sramecc-").unwrap();
        assert_eq!(p.processor, "gfx90a");
        assert_eq!(p.features.into_iter().collect::<Vec<_>>(), [("sramecc", false), ("xnack", true)]);
        assert_eq!(parse_format("").unwrap().processor, "");
        assert!(matches!(parse_format(":xnack+"), Err(TargetIdError::EmptyProcessor(_))));
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
