//! The inventory handle: a scan result together with the bytes it borrows
//! and the C strings handed out for its fields.

use crate::status::{Failure, OFFLOAD_ERROR_FORMAT, OFFLOAD_ERROR_INVALID_ARGUMENT, OFFLOAD_ERROR_IO};
use crate::strings::c_string;
use crate::types::{offload_code_object, offload_diagnostic};
use offload_inspect::package::{self, Event, HEAD_LEN, Limits};
use offload_inspect::record::{CodeObjectRecord, DiagnosticRecord};
use offload_inspect::{CodeObject, Inventory, Location, Options, Severity, Step, scan};
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
    /// A package (wheel, .deb, tarball, ...): `inventory` is empty and the
    /// records come from its members, whose bytes lived only during the
    /// walk (see [`offload_inventory::from_package`]).
    package: bool,
    /// Fat binaries found (across a package's members).
    unit_count: usize,
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
        if package::detect(bytes.get(..bytes.len().min(HEAD_LEN)).unwrap_or_default()).is_some() {
            return Ok(Self::from_package(path, input, verify));
        }
        // SAFETY: the bytes live in a mapping or heap buffer owned by
        // `input`, which does not move them when it moves and is stored in
        // the handle next to the inventory, which is dropped first.
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) };
        let inventory = scan(bytes, &display_name(path), &options(verify));
        Ok(Self::new(inventory, Some(c_string(path)), Some(input)))
    }

    /// Walks a package as `offload list` does: each member that may hold
    /// code is scanned, its locations start with the member's path and its
    /// fat binaries are numbered after the previous members'. Members and
    /// nested packages that cannot be read become diagnostics. Only the
    /// records are kept (a deflated member's bytes live during the walk
    /// only), so copying and selecting refuse package inventories.
    fn from_package(path: &str, input: Input, verify: bool) -> Box<offload_inventory> {
        let opts = options(verify);
        let mut records = Vec::new();
        let mut diagnostics = Vec::new();
        let mut units = 0usize;
        fn problem(e: package::PackageError, diagnostics: &mut Vec<(DiagnosticRecord, DiagnosticStrings)>) {
            let location = if e.at.is_empty() { "file".to_string() } else { Location(e.at.clone()).to_string() };
            diagnostics.push(diagnostic(DiagnosticRecord::new(
                None,
                e.severity(),
                None,
                &location,
                &e.kind.to_string(),
            )));
        }
        let result = package::walk(input.bytes(), &Limits::default(), &mut |event| match event {
            Event::Member(m) => {
                let name = match m.steps.last() {
                    Some(Step::PackageMember(p)) => p.rsplit('/').next().unwrap_or(p).to_string(),
                    _ => display_name(path),
                };
                let mut inv = scan(m.bytes, &name, &opts);
                package::rebase(&mut inv, m.steps, m.offset);
                for (i, o) in inv.objects.iter().enumerate() {
                    let mut r = CodeObjectRecord::new(None, i, o, &[], None);
                    r.unit = r.unit.saturating_add(units);
                    records.push(object(r));
                }
                diagnostics.extend(inv.diagnostics.iter().map(|d| diagnostic(DiagnosticRecord::of(None, d))));
                units = units.saturating_add(inv.units.len());
            }
            Event::Progress { .. } => {}
            Event::Problem(e) => problem(e, &mut diagnostics),
        });
        if let Err(e) = result {
            problem(e, &mut diagnostics);
        }
        Box::new(offload_inventory {
            inventory: Inventory::default(),
            records,
            diagnostics,
            file: Some(c_string(path)),
            package: true,
            unit_count: units,
            _input: Some(input),
        })
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
            .map(|(i, o)| object(CodeObjectRecord::new(None, i, o, &[], None)))
            .collect();
        let diagnostics = inventory.diagnostics.iter().map(|d| diagnostic(DiagnosticRecord::of(None, d))).collect();
        let unit_count = inventory.units.len();
        Box::new(offload_inventory { inventory, records, diagnostics, file, package: false, unit_count, _input: input })
    }

    /// The scan, for selection; refused for a package, whose members were
    /// scanned one at a time.
    pub fn inventory(&self) -> Result<&Inventory<'static>, Failure> {
        if self.package {
            return Err(self.in_package());
        }
        Ok(&self.inventory)
    }

    fn in_package(&self) -> Failure {
        Failure::new(
            OFFLOAD_ERROR_INVALID_ARGUMENT,
            "the inventory is of a package: its members' code objects are listed, but selecting and copying \
             need the member itself (extract it, or use `offload select`/`offload extract`)",
        )
    }

    /// How many code objects (and host entries) were found.
    pub fn count(&self) -> usize {
        self.records.len()
    }

    /// How many fat binaries were found.
    pub fn unit_count(&self) -> usize {
        self.unit_count
    }

    /// How many findings there are.
    pub fn diagnostic_count(&self) -> usize {
        self.diagnostics.len()
    }

    fn out_of_range(&self, index: usize) -> Failure {
        Failure::invalid(format!(
            "code object index {index} is out of range (the inventory holds {})",
            self.records.len()
        ))
    }

    fn object(&self, index: usize) -> Result<&CodeObject<'static>, Failure> {
        if self.package {
            return Err(if index < self.records.len() { self.in_package() } else { self.out_of_range(index) });
        }
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

/// A code object's record with its C strings.
fn object(r: CodeObjectRecord) -> (CodeObjectRecord, ObjectStrings) {
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
}

/// A finding's record with its C strings.
fn diagnostic(r: DiagnosticRecord) -> (DiagnosticRecord, DiagnosticStrings) {
    let s = DiagnosticStrings { location: c_string(&r.location), message: c_string(&r.message) };
    (r, s)
}
