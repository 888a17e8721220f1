//! The Python classes for results: a code object (the fields of `offload
//! list --json`, plus select's verdict) and a verify finding. Each wraps
//! the library's record (`offload_inspect::record`), the one the CLI
//! prints and the C API hands out: the attributes read its fields and
//! `to_dict()` is the record serialised, so the keys, their order and
//! their values are the CLI's by construction.

use offload_inspect::record::{CodeObjectRecord, DiagnosticRecord};
use pyo3::IntoPyObjectExt;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The methods of a class that wraps a record: read-only attributes that
/// return the record's field of the same name, then the methods given
/// (pyo3 takes one `#[pymethods]` block per class).
macro_rules! record_methods {
    ($class:ty, fields: [$($field:ident),* $(,)?], $($methods:tt)*) => {
        #[pymethods]
        impl $class {
            $(
                #[getter]
                fn $field(&self, py: Python<'_>) -> PyResult<PyObject> {
                    self.record.$field.clone().into_py_any(py)
                }
            )*
            $($methods)*
        }
    };
}

/// `record` as a dict with the keys (and order) of its JSON object.
fn as_dict<'py, T: serde::Serialize>(py: Python<'py>, record: &T) -> PyResult<Bound<'py, PyDict>> {
    let text = serde_json::to_string(record)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("record not serialisable: {e}")))?;
    Ok(py.import("json")?.call_method1("loads", (text,))?.downcast_into::<PyDict>()?)
}

/// One code object (or host entry) found in a file.
#[pyclass(frozen, module = "offload_binutils")]
#[derive(Clone, Debug)]
pub struct CodeObject {
    pub record: CodeObjectRecord,
}

record_methods! {
    CodeObject,
    fields: [
        file, location, format, id, offload_kind, triple, target_id, stored_target, size, offset, compressed, unit,
        image_kind, index, container, uri,
    ],
    /// select() only: whether it is loaded (`None` from scan()).
    #[getter]
    fn selected(&self) -> Option<bool> {
        self.record.verdict.as_ref().map(|v| v.selected)
    }

    /// select() only: why it is not loaded (`not-chosen` or a rejection).
    #[getter]
    fn reason_code(&self) -> Option<String> {
        self.record.verdict.as_ref().and_then(|v| v.reason_code.clone())
    }

    /// select() only: the explanation of `reason_code`.
    #[getter]
    fn reason(&self) -> Option<String> {
        self.record.verdict.as_ref().and_then(|v| v.reason.clone())
    }

    /// The record `offload list --json` prints (with select's three keys
    /// for select() results, then `uri`), keys in the schema's order.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        as_dict(py, &self.record)
    }

    fn __repr__(&self) -> String {
        let r = &self.record;
        format!(
            "CodeObject(id={:?}, location={:?}, size={}, offset={})",
            r.id,
            r.location,
            r.size,
            r.offset.map_or_else(|| "None".to_string(), |o| format!("{o:#x}"))
        )
    }
}

/// A finding of verify().
#[pyclass(frozen, module = "offload_binutils")]
#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub record: DiagnosticRecord,
}

record_methods! {
    Diagnostic,
    fields: [file, offset, location, message],
    /// `error` or `warning`.
    #[getter]
    fn severity(&self) -> &'static str {
        self.record.severity.name()
    }

    /// The record `offload verify --json` prints.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        as_dict(py, &self.record)
    }

    fn __repr__(&self) -> String {
        let r = &self.record;
        format!("Diagnostic({}: {}: {})", r.severity.name(), r.location, r.message)
    }
}
