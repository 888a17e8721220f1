//! The records handed out for listed code objects and for findings: what
//! `offload list`, `select` and `extract --json` print (one object per code
//! object, keys in the README's JSON schema order), what the C API fills
//! its structs from and what the Python classes hold. One definition, so
//! that the three cannot drift apart.
//!
//! Serialising a record (with `serde`) gives the JSON object: the fields
//! marked `skip` are for the bindings only.

use crate::select::{Gpu, Runtime, Tier, Verdict};
use crate::uri::{self, Origin};
use crate::{CodeObject, Diagnostic, Severity};
use serde::{Serialize, Serializer};

/// One listed code object (or host entry), as `offload list --json`
/// prints it; `select` adds its [`VerdictRecord`], `extract` the path it
/// wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CodeObjectRecord {
    /// The file as named by the caller; `None` for scanned bytes.
    pub file: Option<String>,
    /// Where it lies ([`crate::Location`]'s words).
    pub location: String,
    /// The container it is an entry of ([`crate::Format::name`]).
    pub format: &'static str,
    pub id: String,
    pub offload_kind: String,
    pub triple: String,
    /// Canonical target ID; empty when there is none.
    pub target_id: String,
    /// Uncompressed size in bytes.
    pub size: u64,
    /// Absolute offset in the file, when the bytes are stored there as is.
    pub offset: Option<u64>,
    pub compressed: bool,
    /// The fat binary it belongs to (numbered across a package).
    pub unit: usize,
    /// [`CodeObject::image_kind_name`].
    pub image_kind: Option<String>,
    /// `select` only: the keys `selected`, `reason_code`, `reason`.
    #[serde(flatten)]
    pub verdict: Option<VerdictRecord>,
    /// `extract` only: the file written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The ROCm code-object URI, where the bytes lie in a range of a file.
    pub uri: Option<String>,
    /// The target ID as stored (not printed: the bindings give it).
    #[serde(skip)]
    pub stored_target: String,
    /// Its payload holds further code objects (not printed).
    #[serde(skip)]
    pub container: bool,
    /// Its position in the scan's objects (not printed: the bindings find
    /// it again by this).
    #[serde(skip)]
    pub index: usize,
}

impl CodeObjectRecord {
    /// The record of `o`, object `index` of a scan of `scanned`, the bytes
    /// of `file` (`None`: bytes that are no file). `origin` says where
    /// `scanned` lies in a file, for the URI; `None` gives no URI.
    pub fn new(
        file: Option<&str>,
        index: usize,
        o: &CodeObject,
        scanned: &[u8],
        origin: Option<&Origin>,
    ) -> CodeObjectRecord {
        CodeObjectRecord {
            file: file.map(str::to_string),
            location: o.location.to_string(),
            format: o.format.name(),
            id: o.id.clone(),
            offload_kind: o.offload_kind.clone(),
            triple: o.triple.clone(),
            target_id: o.target_id.clone(),
            size: o.size,
            offset: o.offset,
            compressed: o.compressed,
            unit: o.unit,
            image_kind: o.image_kind_name(),
            verdict: None,
            path: None,
            uri: origin.and_then(|origin| uri::in_file(o, scanned, origin)),
            stored_target: o.stored_target.clone(),
            container: o.container,
            index,
        }
    }
}

/// What `select` says of a candidate: the JSON keys `selected`,
/// `reason_code` and `reason` (both `null` for a selected object).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VerdictRecord {
    pub selected: bool,
    /// `not-chosen` or the rejection's code ([`crate::select::Rejection::code`]).
    pub reason_code: Option<String>,
    /// Why, in a sentence.
    pub reason: Option<String>,
}

impl VerdictRecord {
    /// The record of `verdict` (of a selection among `objects`).
    pub fn new(verdict: &Verdict, objects: &[CodeObject], gpu: &Gpu, runtime: Runtime) -> VerdictRecord {
        let selected = matches!(verdict, Verdict::Selected(_));
        let (code, text) = explain(verdict, objects, gpu, runtime);
        VerdictRecord { selected, reason_code: (!selected).then_some(code), reason: (!selected).then_some(text) }
    }
}

/// The verdict in words: its code (`selected`, `not-chosen`, or the
/// rejection's code) and a sentence saying why (for a selected object, how
/// it serves the GPU).
pub fn explain(verdict: &Verdict, objects: &[CodeObject], gpu: &Gpu, runtime: Runtime) -> (String, String) {
    match verdict {
        Verdict::Selected(tier) => {
            let how = match tier {
                Tier::Native => format!("built for {}", gpu.processor),
                Tier::Generic => "generic code object for the GPU's family".to_string(),
                Tier::SpirV => "SPIR-V, compiled for the GPU when loaded".to_string(),
                Tier::Compatible => format!("cubin of the same major version, runs on {}", gpu.processor),
                Tier::Jit => {
                    "PTX, JIT-compiled for the GPU when loaded (needs a driver that knows its PTX version)".to_string()
                }
            };
            ("selected".into(), how)
        }
        Verdict::NotChosen { chosen, .. } => {
            let preferred = objects.get(*chosen).map(|o| o.id.as_str()).unwrap_or_default();
            let order = if runtime == Runtime::Cuda {
                "cubin before PTX, nearest architecture, file order"
            } else {
                "native before generic, more fixed features, file order"
            };
            ("not-chosen".into(), format!("also compatible, but '{preferred}' is preferred ({order})"))
        }
        Verdict::Rejected(r) => (r.code().into(), r.explain(gpu, runtime)),
    }
}

/// One finding, as `offload verify --json` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct DiagnosticRecord {
    /// The file as named by the caller; `None` for scanned bytes.
    pub file: Option<String>,
    #[serde(serialize_with = "severity_name")]
    pub severity: Severity,
    /// Absolute offset of the byte concerned, when known.
    pub offset: Option<u64>,
    pub location: String,
    pub message: String,
}

impl DiagnosticRecord {
    /// A finding about `file` that no scan made (an unreadable package
    /// member, a file without code objects).
    pub fn new(
        file: Option<&str>,
        severity: Severity,
        offset: Option<u64>,
        location: &str,
        message: &str,
    ) -> DiagnosticRecord {
        DiagnosticRecord {
            file: file.map(str::to_string),
            severity,
            offset,
            location: location.to_string(),
            message: message.to_string(),
        }
    }

    /// The record of a scan's finding `d` in `file`.
    pub fn of(file: Option<&str>, d: &Diagnostic) -> DiagnosticRecord {
        DiagnosticRecord::new(file, d.severity, d.offset, &d.location, &d.message)
    }
}

fn severity_name<S: Serializer>(severity: &Severity, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(severity.name())
}

#[cfg(test)]
mod tests;
