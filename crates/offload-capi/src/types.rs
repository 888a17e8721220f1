//! The plain C structs the API fills in. Their strings point into the
//! offload_inventory they were read from.

use std::ffi::c_char;

/// One code object (or host entry), with the fields of `offload list
/// --json` (see docs/reference/json.md). Filled by
/// offload_inventory_get(); every string is owned by the inventory and is
/// valid until offload_inventory_free().
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct offload_code_object {
    /// The path given to offload_scan_file(); NULL for a scanned buffer.
    pub file: *const c_char,
    /// Where it lies: `file`, `section .hip_fatbin`,
    /// `member libx.a(foo.o) section .hip_fatbin #1`, ...
    pub location: *const c_char,
    /// `bundle`, `compressed-bundle`, `text-bundle` or `offload-binary`.
    pub format: *const c_char,
    /// The bundle entry ID as stored (`hip-amdgcn-amd-amdhsa--gfx90a:xnack+`);
    /// `<triple>-<arch>` for OffloadBinary images.
    pub id: *const c_char,
    /// `host`, `hip`, `hipv4`, `openmp`, `cuda`, ...
    pub offload_kind: *const c_char,
    /// The triple, without an empty trailing environment.
    pub triple: *const c_char,
    /// The canonical target ID (`gfx90a:sramecc-:xnack+`), or the stored
    /// text when it is not a valid one; empty when there is none.
    pub target_id: *const c_char,
    /// The target ID as stored in the file.
    pub stored_target: *const c_char,
    /// Size in bytes, uncompressed.
    pub size: u64,
    /// Absolute offset of the bytes in the scanned file or buffer; only
    /// meaningful when has_offset is true.
    pub offset: u64,
    /// False when the code object exists only compressed (or was decoded
    /// from bitcode): copy it out with offload_code_object_copy().
    pub has_offset: bool,
    /// It lies inside a compressed bundle.
    pub compressed: bool,
    /// Index of the fat binary (unit) it belongs to; a runtime registers
    /// each unit separately.
    pub unit: usize,
    /// Its payload holds further code objects (listed after it); such
    /// records are never selected.
    pub container: bool,
}

/// A problem the scan found (offload_scan_* with OFFLOAD_SCAN_VERIFY
/// reports everything `offload verify` reports).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
#[allow(non_camel_case_types)]
pub struct offload_diagnostic {
    /// True for an error, false for a warning.
    pub is_error: bool,
    /// Absolute offset of the byte concerned (or of the compressed bundle
    /// holding it); only meaningful when has_offset is true.
    pub offset: u64,
    pub has_offset: bool,
    /// Where, in the same words as offload_code_object.location.
    pub location: *const c_char,
    /// What is wrong.
    pub message: *const c_char,
}
