//! The Python classes for results: a code object (the fields of `offload
//! list --json`, plus select's verdict) and a verify finding.

use offload_inspect::{CodeObject as Found, Diagnostic as Finding};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// One code object (or host entry) found in a file.
#[pyclass(frozen, get_all, module = "offload_binutils")]
#[derive(Clone, Debug)]
pub struct CodeObject {
    pub file: Option<String>,
    pub location: String,
    pub format: String,
    pub id: String,
    pub offload_kind: String,
    pub triple: String,
    pub target_id: String,
    pub stored_target: String,
    pub size: u64,
    pub offset: Option<u64>,
    pub compressed: bool,
    pub unit: usize,
    /// `elf`, `ptx`, `nvvm`, `concat` for CUDA entries, the image kind of
    /// an OffloadBinary image (`o`, `bc`, ...), `None` for bundle entries.
    pub image_kind: Option<String>,
    /// Position in the scan of its input (what `extract` finds it by).
    pub index: usize,
    pub container: bool,
    /// select() only: whether it is loaded, and why not.
    pub selected: Option<bool>,
    pub reason_code: Option<String>,
    pub reason: Option<String>,
    /// The ROCm code-object URI (`file://ABSOLUTE-PATH#offset=N&size=M`),
    /// as `offload list --json` prints it; `None` for bytes and for code
    /// objects in no range of the file.
    pub uri: Option<String>,
}

impl CodeObject {
    /// The record of `o`, found in `scanned` (the bytes of `file`).
    pub fn new(file: Option<&str>, index: usize, o: &Found, scanned: &[u8]) -> CodeObject {
        let uri = file.filter(|f| *f != "-").and_then(|f| {
            let (offset, size) = offload_inspect::uri::range(o, scanned)?;
            offload_inspect::uri::for_path(std::path::Path::new(f), offset, size)
        });
        CodeObject {
            file: file.map(str::to_string),
            location: o.location.to_string(),
            format: o.format.name().to_string(),
            id: o.id.clone(),
            offload_kind: o.offload_kind.clone(),
            triple: o.triple.clone(),
            target_id: o.target_id.clone(),
            stored_target: o.stored_target.clone(),
            size: o.size,
            offset: o.offset,
            compressed: o.compressed,
            unit: o.unit,
            image_kind: o.image_kind_name(),
            index,
            container: o.container,
            selected: None,
            reason_code: None,
            reason: None,
            uri,
        }
    }
}

#[pymethods]
impl CodeObject {
    /// The record `offload list --json` prints (with select's three keys
    /// for select() results, then `uri`), keys in the schema's order.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("file", &self.file)?;
        d.set_item("location", &self.location)?;
        d.set_item("format", &self.format)?;
        d.set_item("id", &self.id)?;
        d.set_item("offload_kind", &self.offload_kind)?;
        d.set_item("triple", &self.triple)?;
        d.set_item("target_id", &self.target_id)?;
        d.set_item("size", self.size)?;
        d.set_item("offset", self.offset)?;
        d.set_item("compressed", self.compressed)?;
        d.set_item("unit", self.unit)?;
        d.set_item("image_kind", &self.image_kind)?;
        if let Some(selected) = self.selected {
            d.set_item("selected", selected)?;
            d.set_item("reason_code", &self.reason_code)?;
            d.set_item("reason", &self.reason)?;
        }
        d.set_item("uri", &self.uri)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "CodeObject(id={:?}, location={:?}, size={}, offset={})",
            self.id,
            self.location,
            self.size,
            self.offset.map_or_else(|| "None".to_string(), |o| format!("{o:#x}"))
        )
    }
}

/// A finding of verify().
#[pyclass(frozen, get_all, module = "offload_binutils")]
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub file: Option<String>,
    /// `error` or `warning`.
    pub severity: String,
    pub offset: Option<u64>,
    pub location: String,
    pub message: String,
}

impl Diagnostic {
    pub fn new(file: Option<&str>, d: &Finding) -> Diagnostic {
        Diagnostic {
            file: file.map(str::to_string),
            severity: d.severity.name().to_string(),
            offset: d.offset,
            location: d.location.clone(),
            message: d.message.clone(),
        }
    }
}

#[pymethods]
impl Diagnostic {
    /// The record `offload verify --json` prints.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("file", &self.file)?;
        d.set_item("severity", &self.severity)?;
        d.set_item("offset", self.offset)?;
        d.set_item("location", &self.location)?;
        d.set_item("message", &self.message)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("Diagnostic({}: {}: {})", self.severity, self.location, self.message)
    }
}
