//! `offload_binutils`: the inspector and the bundle/package formats of
//! offload-binutils for Python. Each function takes a path or bytes, does
//! its work without the GIL (`allow_threads`) on plain Rust data, and
//! returns Python objects; errors are `offload_binutils.Error` subclasses
//! with the CLI's messages.

mod formats;
mod records;
mod source;

use offload_inspect::record::{CodeObjectRecord, DiagnosticRecord, VerdictRecord};
use offload_inspect::select::{Gpu, Runtime, select as judge};
use offload_inspect::uri;
use offload_inspect::{CodeObject as Found, Inventory, Options, Severity, scan as scan_bytes};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use records::{CodeObject, Diagnostic};
use source::{Failure, Source};
use std::borrow::Cow;

/// The bytes of a code object, decompressed as needed: the one place this
/// crate asks the library for them.
fn object_bytes<'i, 'a>(inv: &'i Inventory<'a>, o: &Found<'a>, prefix: &str) -> Result<Cow<'i, [u8]>, Failure> {
    inv.bytes(o).map_err(|e| Failure::Format(format!("{prefix}'{}' at {}: {e}", o.id, o.location)))
}

/// The records of the code objects of a scan of `source` (`bytes`), with
/// their URIs where `source` is a file; `keep` picks the objects.
fn records(
    source: &Source,
    inv: &Inventory,
    bytes: &[u8],
    mut keep: impl FnMut(usize, CodeObjectRecord) -> Option<CodeObject>,
) -> Vec<CodeObject> {
    let file = source.file();
    let prefix = file.filter(|f| *f != "-").and_then(|f| uri::file_prefix(std::path::Path::new(f)));
    let origin = prefix.as_deref().map(|prefix| uri::Origin { prefix, offset: 0 });
    let records =
        inv.objects.iter().enumerate().map(|(i, o)| CodeObjectRecord::new(file, i, o, bytes, origin.as_ref()));
    records.enumerate().filter_map(|(i, r)| keep(i, r)).collect()
}

fn listing(source: &Source, deep: bool) -> Result<(Vec<CodeObject>, Vec<Diagnostic>), Failure> {
    source.with_bytes(|bytes| {
        let inv = scan_bytes(bytes, &source.display_name(), &Options { deep, ..Options::default() });
        let objects = records(source, &inv, bytes, |_, record| Some(CodeObject { record }));
        let file = source.file();
        let diagnostics =
            inv.diagnostics.iter().map(|d| Diagnostic { record: DiagnosticRecord::of(file, d) }).collect();
        Ok((objects, diagnostics))
    })
}

/// Every code object in a file (path) or in bytes, in file order. Reads
/// headers only. A file without code objects gives an empty list.
#[pyfunction]
fn scan(py: Python<'_>, input: &Bound<'_, PyAny>) -> PyResult<Vec<CodeObject>> {
    let source = Source::from_py(input)?;
    Ok(py.allow_threads(|| listing(&source, false))?.0)
}

/// What `offload verify` finds: damaged structures, decompression and hash
/// failures, code objects that are not what their ID says. An input with
/// no code objects gives one error, as in the CLI.
#[pyfunction]
fn verify(py: Python<'_>, input: &Bound<'_, PyAny>) -> PyResult<Vec<Diagnostic>> {
    let source = Source::from_py(input)?;
    let (objects, mut diagnostics) = py.allow_threads(|| listing(&source, true))?;
    if objects.is_empty() && !diagnostics.iter().any(|d| d.record.severity == Severity::Error) {
        let none = "no offload code objects found";
        diagnostics
            .push(Diagnostic { record: DiagnosticRecord::new(source.file(), Severity::Error, None, "file", none) });
    }
    Ok(diagnostics)
}

/// select's verdicts, selected objects first, and the error for a fat
/// binary with nothing loadable (or no code for the runtime at all).
fn judge_source(source: &Source, gpu: &Gpu, runtime: Runtime) -> Result<(Vec<CodeObject>, Option<String>), Failure> {
    source.with_bytes(|bytes| {
        let inv = scan_bytes(bytes, &source.display_name(), &Options::default());
        let sel = judge(&inv.objects, gpu, runtime);
        // Candidates only (containers get no verdict), selected ones first.
        let candidates = records(source, &inv, bytes, |i, mut record| {
            let v = sel.verdicts.get(i)?.as_ref()?;
            record.verdict = Some(VerdictRecord::new(v, &inv.objects, gpu, runtime));
            Some(CodeObject { record })
        });
        let (mut chosen, others): (Vec<_>, Vec<_>) =
            candidates.into_iter().partition(|c| c.record.verdict.as_ref().is_some_and(|v| v.selected));
        let prefix = source.prefix();
        let error = if let Some(&u) = sel.failed_units.first() {
            let loc = inv.units.get(u).map(|u| u.location.to_string()).unwrap_or_default();
            Some(format!(
                "{prefix}no code object in the fat binary at {loc} loads on {gpu} ({} runtime)",
                runtime.name()
            ))
        } else if sel.chosen.is_empty() {
            Some(format!("{prefix}no {} code objects found", runtime.name()))
        } else {
            None
        };
        chosen.extend(others);
        Ok((chosen, error))
    })
}

/// The code objects `runtime` (`hip` or `openmp`) loads on `gpu`
/// (`gfx90a:sramecc+:xnack-`, `fiji`, `sm_80`, an HSA ISA name), by the
/// rules of `offload select`: every candidate with `selected`,
/// `reason_code` and `reason` set, selected ones first. Raises SelectError
/// (with the verdicts as `candidates`) when a fat binary holds code for the
/// runtime but nothing that loads, or there is no code for the runtime.
#[pyfunction]
#[pyo3(signature = (input, gpu, runtime = "hip"))]
fn select(py: Python<'_>, input: &Bound<'_, PyAny>, gpu: &str, runtime: &str) -> PyResult<Vec<CodeObject>> {
    let source = Source::from_py(input)?;
    let runtime = Runtime::parse(runtime)
        .ok_or_else(|| Failure::Invalid(format!("runtime: '{runtime}' is not hip, openmp or cuda")))?;
    let gpu = Gpu::parse(gpu).map_err(|e| Failure::Invalid(format!("gpu: {e}")))?;
    let (candidates, error) = py.allow_threads(|| judge_source(&source, &gpu, runtime))?;
    if let Some(message) = error {
        let err = source::SelectError::new_err(message);
        err.value(py).setattr("candidates", candidates)?;
        return Err(err);
    }
    Ok(candidates)
}

/// The bytes of a code object found by scan() or select() on the same
/// input (or its index), decompressed as needed.
#[pyfunction]
fn extract<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    code_object: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let source = Source::from_py(input)?;
    let (index, expected) = match code_object.downcast::<CodeObject>() {
        Ok(c) => {
            let c = &c.get().record;
            (c.index, Some((c.id.clone(), c.location.clone())))
        }
        Err(_) => (code_object.extract::<usize>()?, None),
    };
    let bytes = py.allow_threads(|| {
        source.with_bytes(|data| {
            let inv = scan_bytes(data, &source.display_name(), &Options::default());
            let o = inv
                .objects
                .get(index)
                .filter(|o| expected.as_ref().is_none_or(|(id, loc)| *id == o.id && *loc == o.location.to_string()));
            let Some(o) = o else {
                return Err(Failure::Invalid(format!("{}no code object matches", source.prefix())));
            };
            Ok(object_bytes(&inv, o, &source.prefix())?.into_owned())
        })
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// Every kernel of every AMDGPU code object, cubin and PTX module of a
/// file (path) or bytes, one dict per kernel per code object: the records
/// of `offload kernels --json` (`docs/reference/kernels-json.md`), sorted
/// as the command sorts them. Code objects whose kernels cannot be read
/// have none.
#[pyfunction]
fn kernels<'py>(py: Python<'py>, input: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let source = Source::from_py(input)?;
    let text = py.allow_threads(|| {
        source.with_bytes(|bytes| {
            let inv = scan_bytes(bytes, &source.display_name(), &Options::default());
            let rows = offload_inspect::kernels::rows(&inv, &offload_inspect::kernels::kernels(&inv, 0));
            serde_json::to_string(&rows).map_err(|e| Failure::Format(format!("kernel records: {e}")))
        })
    })?;
    py.import("json")?.call_method1("loads", (text,))
}

#[pymodule]
fn offload_binutils(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<CodeObject>()?;
    m.add_class::<Diagnostic>()?;
    m.add("Error", py.get_type::<source::Error>())?;
    m.add("FileError", py.get_type::<source::FileError>())?;
    m.add("FormatError", py.get_type::<source::FormatError>())?;
    m.add("SelectError", py.get_type::<source::SelectError>())?;
    m.add("BundlerError", py.get_type::<source::BundlerError>())?;
    m.add("InvalidArgumentError", py.get_type::<source::InvalidArgumentError>())?;
    m.add_function(wrap_pyfunction!(scan, m)?)?;
    m.add_function(wrap_pyfunction!(select, m)?)?;
    m.add_function(wrap_pyfunction!(extract, m)?)?;
    m.add_function(wrap_pyfunction!(verify, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    formats::register(m)?;
    Ok(())
}
