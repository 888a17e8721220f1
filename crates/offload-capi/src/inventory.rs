//! The inventory handle: a scan result together with the bytes it borrows
//! and the C strings handed out for its fields.

use crate::status::{Failure, OFFLOAD_ERROR_FORMAT, OFFLOAD_ERROR_IO};
use crate::strings::c_string;
use crate::types::{offload_code_object, offload_diagnostic};
use offload_inspect::record::{CodeObjectRecord, DiagnosticRecord};
use offload_inspect::{CodeObject, Inventory, Options, Severity, scan};
use offload_io::{Input, error_text};
use std::borrow::Cow;
use std::ffi::CString;

/// The C strings of one code object's record, made once at scan time so
/// that the pointers handed out stay put.
struct ObjectStrings {
    location: CString,
    format: CString,
    id: CString,
    offload_kind: CString,
    triple: CString,
    target_id: CString,
    stored_target: CString,
}

struct DiagnosticStrings {
    location: CString,
    message: CString,
}

/// A scanned file or buffer (opaque to C).
#[allow(non_camel_case_types)]
pub struct offload_inventory {
    // Field order matters: `inventory` borrows the bytes that `_input`
    // owns (a mapping or a buffer), and fields drop in declaration order.
    inventory: Inventory<'static>,
    /// One per code object: what offload_code_object is filled from.
    records: Vec<(CodeObjectRecord, ObjectStrings)>,
    /// One per finding: what offload_diagnostic is filled from.
    diagnostics: Vec<(DiagnosticRecord, DiagnosticStrings)>,
    file: Option<CString>,
    _input: Option<Input>,
}

fn options(verify: bool) -> Options {
    Options { deep: verify, ..Options::default() }
}

/// The name archive locations use for a file: its last path component.
fn display_name(path: &str) -> String {
    if path == "-" {
        return "<stdin>".into();
    }
    std::path::Path::new(path).file_name().map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned())
}

impl offload_inventory {
    /// Maps (or reads) `path` and scans it.
    pub fn from_file(path: &str, verify: bool) -> Result<Box<offload_inventory>, Failure> {
        let input =
            Input::open(path).map_err(|e| Failure::new(OFFLOAD_ERROR_IO, format!("'{path}': {}", error_text(&e))))?;
        let bytes = input.bytes();
        // SAFETY: the bytes live in a mapping or heap buffer owned by
        // `input`, which does not move them when it moves and is stored in
        // the handle next to the inventory, which is dropped first.
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) };
        let inventory = scan(bytes, &display_name(path), &options(verify));
        Ok(Self::new(inventory, Some(c_string(path)), Some(input)))
    }

    /// Scans a caller's buffer, which must outlive the handle.
    pub fn from_buffer(bytes: &'static [u8], verify: bool) -> Box<offload_inventory> {
        Self::new(scan(bytes, "<buffer>", &options(verify)), None, None)
    }

    fn new(inventory: Inventory<'static>, file: Option<CString>, input: Option<Input>) -> Box<offload_inventory> {
        // No file name in the records (the handle keeps it as a C string)
        // and no URI (the C struct has no field for it).
        let records = inventory
            .objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                let r = CodeObjectRecord::new(None, i, o, &[], None);
                let s = ObjectStrings {
                    location: c_string(&r.location),
                    format: c_string(r.format),
                    id: c_string(&r.id),
                    offload_kind: c_string(&r.offload_kind),
                    triple: c_string(&r.triple),
                    target_id: c_string(&r.target_id),
                    stored_target: c_string(&r.stored_target),
                };
                (r, s)
            })
            .collect();
        let diagnostics = inventory
            .diagnostics
            .iter()
            .map(|d| {
                let r = DiagnosticRecord::of(None, d);
                let s = DiagnosticStrings { location: c_string(&r.location), message: c_string(&r.message) };
                (r, s)
            })
            .collect();
        Box::new(offload_inventory { inventory, records, diagnostics, file, _input: input })
    }

    pub fn inventory(&self) -> &Inventory<'static> {
        &self.inventory
    }

    fn out_of_range(&self, index: usize) -> Failure {
        Failure::invalid(format!(
            "code object index {index} is out of range (the inventory holds {})",
            self.inventory.objects.len()
        ))
    }

    fn object(&self, index: usize) -> Result<&CodeObject<'static>, Failure> {
        self.inventory.objects.get(index).ok_or_else(|| self.out_of_range(index))
    }

    /// The C view of code object `index`.
    pub fn code_object(&self, index: usize) -> Result<offload_code_object, Failure> {
        let (r, s) = self.records.get(index).ok_or_else(|| self.out_of_range(index))?;
        Ok(offload_code_object {
            file: self.file.as_ref().map_or(std::ptr::null(), |f| f.as_ptr()),
            location: s.location.as_ptr(),
            format: s.format.as_ptr(),
            id: s.id.as_ptr(),
            offload_kind: s.offload_kind.as_ptr(),
            triple: s.triple.as_ptr(),
            target_id: s.target_id.as_ptr(),
            stored_target: s.stored_target.as_ptr(),
            size: r.size,
            offset: r.offset.unwrap_or(0),
            has_offset: r.offset.is_some(),
            compressed: r.compressed,
            unit: r.unit,
            container: r.container,
        })
    }

    /// The C view of diagnostic `index`.
    pub fn diagnostic(&self, index: usize) -> Result<offload_diagnostic, Failure> {
        let Some((d, s)) = self.diagnostics.get(index) else {
            return Err(Failure::invalid(format!(
                "diagnostic index {index} is out of range (the inventory holds {})",
                self.diagnostics.len()
            )));
        };
        Ok(offload_diagnostic {
            is_error: d.severity == Severity::Error,
            offset: d.offset.unwrap_or(0),
            has_offset: d.offset.is_some(),
            location: s.location.as_ptr(),
            message: s.message.as_ptr(),
        })
    }

    /// The declared (uncompressed) size of code object `index`: known
    /// without decompressing.
    pub fn declared_size(&self, index: usize) -> Result<u64, Failure> {
        Ok(self.object(index)?.size)
    }

    /// The bytes of code object `index`, decompressed as needed. The one
    /// place this crate asks the library for a code object's bytes.
    pub fn bytes(&self, index: usize) -> Result<Cow<'_, [u8]>, Failure> {
        let o = self.object(index)?;
        self.inventory
            .bytes(o)
            .map_err(|e| Failure::new(OFFLOAD_ERROR_FORMAT, format!("'{}' at {}: {e}", o.id, o.location)))
    }
}
