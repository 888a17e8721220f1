//! What a stored bundle entry ID names, read by its grammar
//! (`<kind>-<arch>-<vendor>-<os>-<env>-<target-id>`) rather than by LLVM
//! 19's bundler heuristics, which mistake `gfx9-generic` for an environment
//! and the empty string for a GPU (see [`offload_format::target_id`]). The HIP
//! runtime's code-object lookup (comgr) splits IDs the same way: the kind
//! before the first dash, then at most five dash-separated fields, the fifth
//! being the target ID.

use offload_format::amdgpu::{self, Table};
use offload_format::target_id::{TargetId, TargetIdError, parse_format};
use offload_format::triple::Triple;

/// A stored ID split into what it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryId {
    /// The offload kind as stored (`host`, `hip`, `hipv4`, `openmp`, ...).
    pub kind: String,
    /// The triple as stored, with an empty trailing environment dropped
    /// (`amdgcn-amd-amdhsa-` is reported as `amdgcn-amd-amdhsa`).
    pub triple: String,
    /// The target ID as stored (`gfx90a:xnack+`), empty when none.
    pub target: String,
}

/// Splits a stored bundle entry ID.
///
/// * five fields after the kind: the fifth is the target ID (it may hold
///   dashes, as `gfx9-generic` does);
/// * four fields: an old three-field triple followed by a processor
///   (`hip-amdgcn-amd-amdhsa-gfx906`) when the fourth field names one, else
///   a four-field triple without target ID;
/// * fewer: a triple without target ID.
pub fn split_entry_id(id: &str) -> EntryId {
    let (kind, rest) = id.split_once('-').unwrap_or((id, ""));
    let fields: Vec<&str> = rest.splitn(5, '-').collect();
    let (triple, target) = match fields.as_slice() {
        [a, b, c, d, target] => (format!("{a}-{b}-{c}-{d}"), *target),
        [a, b, c, last] => {
            let three = format!("{a}-{b}-{c}");
            if names_processor(&three, last) { (three, *last) } else { (format!("{three}-{last}"), "") }
        }
        _ => (rest.to_string(), ""),
    };
    EntryId { kind: kind.to_string(), triple: display_triple(&triple), target: target.to_string() }
}

/// The triple text without an empty trailing environment.
pub fn display_triple(triple: &str) -> String {
    let fields: Vec<&str> = triple.split('-').collect();
    if fields.len() == 4 && fields[3].is_empty() { fields[..3].join("-") } else { triple.to_string() }
}

/// Whether `field` (features allowed) names a processor of `triple`.
fn names_processor(triple: &str, field: &str) -> bool {
    let processor = field.split(':').next().unwrap_or("");
    let t = Triple::parse(triple);
    if t.is_amdgpu() {
        Table::Current.canonical_processor(&t, processor).is_some()
            || (t.is_amdgcn() && amdgpu::looks_like_amdgcn_processor(processor))
    } else if t.is_nvptx() {
        processor.starts_with("sm_")
    } else {
        false
    }
}

/// The canonical spelling of `target` for `triple` (`fiji` is `gfx803`,
/// features sorted; processors of [`Table::Current`]), or why it has none.
/// An empty target has none and is no error. A well-formed target whose
/// AMDGPU processor is not in the table (a GPU newer than this tool) is
/// taken as stored: see [`unknown_processor`].
pub fn canonical_target_id(triple: &str, target: &str) -> Result<String, TargetIdError> {
    if target.is_empty() {
        return Ok(String::new());
    }
    let t = Triple::parse(triple);
    match TargetId::parse_in(Table::Current, &t, target) {
        Ok(id) => Ok(id.canonical()),
        Err(TargetIdError::UnknownProcessor { .. }) if t.is_amdgpu() => Ok(target.to_string()),
        Err(e) => Err(e),
    }
}

/// The processor of a well-formed AMDGPU `target` when it is not in this
/// tool's processor table (its features could not be checked).
pub fn unknown_processor<'a>(triple: &str, target: &'a str) -> Option<&'a str> {
    let t = Triple::parse(triple);
    let processor = parse_format(target).ok()?.processor;
    let unknown = t.is_amdgpu() && !processor.is_empty() && Table::Current.canonical_processor(&t, processor).is_none();
    unknown.then_some(processor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(id: &str) -> (String, String, String) {
        let e = split_entry_id(id);
        (e.kind, e.triple, e.target)
    }

    #[test]
    fn ids_split_by_grammar() {
        let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        assert_eq!(split("hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"), s("hipv4", "amdgcn-amd-amdhsa", "gfx90a:xnack+"));
        assert_eq!(split("host-x86_64-unknown-linux-gnu-"), s("host", "x86_64-unknown-linux-gnu", ""));
        assert_eq!(split("host-x86_64-unknown-linux--"), s("host", "x86_64-unknown-linux", ""));
        assert_eq!(split("host-x86_64-unknown-linux-gnu"), s("host", "x86_64-unknown-linux-gnu", ""));
        assert_eq!(split("hip-amdgcn-amd-amdhsa--gfx9-generic"), s("hip", "amdgcn-amd-amdhsa", "gfx9-generic"));
        assert_eq!(split("hip-amdgcn-amd-amdhsa-gfx906"), s("hip", "amdgcn-amd-amdhsa", "gfx906"));
        assert_eq!(split("hip-amdgcn-amd-amdhsa-unknown-gfx906"), s("hip", "amdgcn-amd-amdhsa-unknown", "gfx906"));
        assert_eq!(split("openmp-nvptx64-nvidia-cuda--sm_70"), s("openmp", "nvptx64-nvidia-cuda", "sm_70"));
        assert_eq!(split("openmp-nvptx64-nvidia-cuda-sm_70"), s("openmp", "nvptx64-nvidia-cuda", "sm_70"));
        assert_eq!(split("openmp-x86_64-pc-linux-gnu"), s("openmp", "x86_64-pc-linux-gnu", ""));
        assert_eq!(split("hip"), s("hip", "", ""));
        assert_eq!(split(""), s("", "", ""));
    }

    #[test]
    fn canonical_ids() {
        assert_eq!(
            canonical_target_id("amdgcn-amd-amdhsa", "gfx90a:xnack+:sramecc-").unwrap(),
            "gfx90a:sramecc-:xnack+"
        );
        assert_eq!(canonical_target_id("amdgcn-amd-amdhsa", "fiji").unwrap(), "gfx803");
        assert_eq!(canonical_target_id("x86_64-unknown-linux-gnu", "").unwrap(), "");
        assert!(canonical_target_id("amdgcn-amd-amdhsa", "gfx1030:xnack+").is_err());
        assert_eq!(canonical_target_id("nvptx64-nvidia-cuda", "sm_70").unwrap(), "sm_70");
        // Newer than LLVM 19, in the current table.
        assert_eq!(
            canonical_target_id("amdgcn-amd-amdhsa", "gfx950:xnack-:sramecc+").unwrap(),
            "gfx950:sramecc+:xnack-"
        );
        assert!(canonical_target_id("amdgcn-amd-amdhsa", "gfx1153:xnack+").is_err());
        assert_eq!(unknown_processor("amdgcn-amd-amdhsa", "gfx950:sramecc+"), None);
        // Not in the table: kept as stored, reported as unknown.
        assert_eq!(
            canonical_target_id("amdgcn-amd-amdhsa", "gfx9999:xnack+:sramecc-").unwrap(),
            "gfx9999:xnack+:sramecc-"
        );
        assert_eq!(unknown_processor("amdgcn-amd-amdhsa", "gfx9999:xnack+"), Some("gfx9999"));
        assert_eq!(unknown_processor("amdgcn-amd-amdhsa", ""), None);
        assert_eq!(unknown_processor("nvptx64-nvidia-cuda", "sm_999"), None);
        assert!(canonical_target_id("amdgcn-amd-amdhsa", "gfx9999:xnack").is_err());
    }

    #[test]
    fn unknown_gfx_names_split_as_processors() {
        let e = split_entry_id("hip-amdgcn-amd-amdhsa-gfx9999");
        assert_eq!((e.triple.as_str(), e.target.as_str()), ("amdgcn-amd-amdhsa", "gfx9999"));
        let e = split_entry_id("hip-amdgcn-amd-amdhsa-gfx1250");
        assert_eq!((e.triple.as_str(), e.target.as_str()), ("amdgcn-amd-amdhsa", "gfx1250"));
    }
}
