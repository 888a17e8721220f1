//! The C API of offload-binutils (`liboffload`, header `include/offload.h`).
//!
//! Every entry point checks its pointers, runs its body under
//! `catch_unwind` (see `status::guard`) and reports failures as an
//! `offload_status` plus a per-thread message. No Rust type crosses the
//! boundary: handles are opaque pointers, and the structs C reads are
//! `#[repr(C)]` with C strings owned by the handle.
//!
//! Scanning, selection and decompression are `offload_format`'s; this crate
//! only adapts them.

// A C API is unsafe at its edge (raw pointers from C callers); every block
// states what the caller must guarantee.
#![allow(unsafe_code)]

mod inventory;
mod status;
mod strings;
mod types;

pub use inventory::offload_inventory;
pub use status::offload_status;
pub use types::{offload_code_object, offload_diagnostic};

use offload_format::bundle::compressed;
use offload_inspect::select::{Gpu, Runtime, select};
use status::{Failure, guard, guard_value};
use std::ffi::c_char;

/// offload_select(): the HIP runtime (bundle kinds hip, hipv4, hcc).
pub const OFFLOAD_RUNTIME_HIP: i32 = 0;
/// offload_select(): the OpenMP offloading runtime (bundle kind openmp).
pub const OFFLOAD_RUNTIME_OPENMP: i32 = 1;

/// offload_scan_*() flag: decompress and check everything, as `offload
/// verify` does; the findings are read with offload_inventory_diagnostic().
/// Without it only headers are read.
pub const OFFLOAD_SCAN_VERIFY: u32 = 1;

/// The library's version (`0.1.0`): a static string, never freed.
#[unsafe(no_mangle)]
pub extern "C" fn offload_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The message of the last failing call on this thread; empty when none
/// failed yet. Valid until the next failing call on this thread; never
/// NULL, never freed by the caller.
#[unsafe(no_mangle)]
pub extern "C" fn offload_last_error() -> *const c_char {
    guard_value("offload_last_error", c"".as_ptr(), status::last_error_ptr)
}

fn check_flags(flags: u32) -> Result<bool, Failure> {
    if flags & !OFFLOAD_SCAN_VERIFY != 0 {
        return Err(Failure::invalid(format!("unknown scan flags {flags:#x}")));
    }
    Ok(flags & OFFLOAD_SCAN_VERIFY != 0)
}

fn out_arg<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: a non-NULL pointer from the caller points to a writable T.
    unsafe { ptr.as_mut() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

fn handle<'a>(inv: *const offload_inventory) -> Result<&'a offload_inventory, Failure> {
    // SAFETY: a non-NULL handle came from offload_scan_* and is not freed.
    unsafe { inv.as_ref() }.ok_or_else(|| Failure::invalid("inventory is NULL"))
}

/// Finds every code object in the file at `path` (memory-mapped; `-` reads
/// standard input). `flags` is 0 or OFFLOAD_SCAN_VERIFY. On success `*out`
/// is a new inventory, to be released with offload_inventory_free(). A file
/// without code objects is not an error: its inventory is empty (and its
/// diagnostics may say why). The file stays mapped while the inventory
/// lives: it must not be modified in place meanwhile (replacing it by a
/// rename is safe).
///
/// A package (wheel, zip, tarball, .deb, conda) is read as `offload list`
/// reads it: the code objects of its members are listed, their locations
/// starting with `member PATH`, and members that cannot be read are
/// diagnostics (errors). offload_select() and offload_code_object_copy()
/// refuse such an inventory (OFFLOAD_ERROR_INVALID_ARGUMENT): extract the
/// member first.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_scan_file(
    path: *const c_char,
    flags: u32,
    out: *mut *mut offload_inventory,
) -> offload_status {
    guard("offload_scan_file", || {
        let out = out_arg(out, "out")?;
        *out = std::ptr::null_mut();
        // SAFETY: the caller passes a C string.
        let path = unsafe { strings::str_arg(path, "path") }?;
        let verify = check_flags(flags)?;
        *out = Box::into_raw(offload_inventory::from_file(path, verify)?);
        Ok(())
    })
}

/// Finds every code object in `len` bytes at `data`, without copying them:
/// the buffer must stay valid and unchanged until the inventory is freed.
/// Offsets are relative to `data`; `file` fields are NULL. `data` may be
/// NULL when `len` is 0.
///
/// # Safety
/// `data` points to `len` readable bytes that outlive the inventory; `out`
/// points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_scan_buffer(
    data: *const u8,
    len: usize,
    flags: u32,
    out: *mut *mut offload_inventory,
) -> offload_status {
    guard("offload_scan_buffer", || {
        let out = out_arg(out, "out")?;
        *out = std::ptr::null_mut();
        let verify = check_flags(flags)?;
        let bytes: &'static [u8] = if len == 0 {
            &[]
        } else if data.is_null() {
            return Err(Failure::invalid("data is NULL"));
        } else {
            // SAFETY: the caller promises `len` bytes that outlive the handle.
            unsafe { std::slice::from_raw_parts(data, len) }
        };
        *out = Box::into_raw(offload_inventory::from_buffer(bytes, verify));
        Ok(())
    })
}

/// Releases an inventory and every string read from it. NULL is ignored.
///
/// # Safety
/// `inv` is NULL or came from offload_scan_* and was not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_inventory_free(inv: *mut offload_inventory) {
    guard_value("offload_inventory_free", (), || {
        if !inv.is_null() {
            // SAFETY: the caller hands back a pointer from Box::into_raw.
            drop(unsafe { Box::from_raw(inv) });
        }
    })
}

/// How many code objects the inventory holds (0 for NULL), in file order.
///
/// # Safety
/// `inv` is NULL or a live inventory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_inventory_count(inv: *const offload_inventory) -> usize {
    guard_value("offload_inventory_count", 0, || handle(inv).map_or(0, |h| h.count()))
}

/// How many fat binaries (units) the inventory holds (0 for NULL).
///
/// # Safety
/// `inv` is NULL or a live inventory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_inventory_unit_count(inv: *const offload_inventory) -> usize {
    guard_value("offload_inventory_unit_count", 0, || handle(inv).map_or(0, |h| h.unit_count()))
}

/// Fills `*out` with code object `index` (0 .. count-1).
///
/// # Safety
/// `inv` is a live inventory; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_inventory_get(
    inv: *const offload_inventory,
    index: usize,
    out: *mut offload_code_object,
) -> offload_status {
    guard("offload_inventory_get", || {
        let out = out_arg(out, "out")?;
        *out = handle(inv)?.code_object(index)?;
        Ok(())
    })
}

/// How many diagnostics the scan produced (0 for NULL).
///
/// # Safety
/// `inv` is NULL or a live inventory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_inventory_diagnostic_count(inv: *const offload_inventory) -> usize {
    guard_value("offload_inventory_diagnostic_count", 0, || handle(inv).map_or(0, |h| h.diagnostic_count()))
}

/// Fills `*out` with diagnostic `index` (0 .. count-1).
///
/// # Safety
/// `inv` is a live inventory; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_inventory_diagnostic(
    inv: *const offload_inventory,
    index: usize,
    out: *mut offload_diagnostic,
) -> offload_status {
    guard("offload_inventory_diagnostic", || {
        let out = out_arg(out, "out")?;
        *out = handle(inv)?.diagnostic(index)?;
        Ok(())
    })
}

/// Chooses, per fat binary, the code object `runtime` (OFFLOAD_RUNTIME_HIP
/// or OFFLOAD_RUNTIME_OPENMP) loads on `gpu`, by the rules of `offload
/// select`. `gpu` is a target ID as the runtime sees the device
/// (`gfx90a:sramecc+:xnack-`, `amdgcn-amd-amdhsa--gfx90a:xnack+`, `fiji`,
/// `sm_80`).
///
/// The indices of the chosen code objects (for offload_inventory_get and
/// offload_code_object_copy), in file order, are written to `indices`
/// (room for `capacity`) and their number to `*count`. When `capacity` is
/// too small, nothing is written to `indices`, `*count` is the number
/// needed and the result is OFFLOAD_ERROR_BUFFER_TOO_SMALL (`indices` may
/// be NULL with `capacity` 0 to ask for the number).
///
/// OFFLOAD_ERROR_NOT_FOUND: some fat binary holds code for the runtime but
/// nothing that loads on the GPU, or there is no code for the runtime at
/// all (the message is `offload select`'s). The indices chosen in the other
/// fat binaries are still written.
///
/// # Safety
/// `inv` is a live inventory; `gpu` a C string; `indices` NULL or room for
/// `capacity` values; `count` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_select(
    inv: *const offload_inventory,
    gpu: *const c_char,
    runtime: i32,
    indices: *mut usize,
    capacity: usize,
    count: *mut usize,
) -> offload_status {
    guard("offload_select", || {
        let count = out_arg(count, "count")?;
        *count = 0;
        let h = handle(inv)?;
        // SAFETY: the caller passes a C string.
        let gpu_text = unsafe { strings::str_arg(gpu, "gpu") }?;
        let runtime = match runtime {
            OFFLOAD_RUNTIME_HIP => Runtime::Hip,
            OFFLOAD_RUNTIME_OPENMP => Runtime::OpenMp,
            other => return Err(Failure::invalid(format!("unknown runtime {other} (0: hip, 1: openmp)"))),
        };
        let gpu = Gpu::parse(gpu_text).map_err(|e| Failure::invalid(format!("gpu: {e}")))?;
        let objects = &h.inventory()?.objects;
        let sel = select(objects, &gpu, runtime);
        *count = sel.chosen.len();
        if sel.chosen.len() > capacity {
            return Err(Failure::new(
                status::OFFLOAD_ERROR_BUFFER_TOO_SMALL,
                format!("{} code objects are selected; the index buffer holds {capacity}", sel.chosen.len()),
            ));
        }
        if !sel.chosen.is_empty() {
            if indices.is_null() {
                return Err(Failure::invalid("indices is NULL"));
            }
            // SAFETY: the caller promises room for `capacity` >= len values.
            let out = unsafe { std::slice::from_raw_parts_mut(indices, sel.chosen.len()) };
            out.copy_from_slice(&sel.chosen);
        }
        if let Some(&unit) = sel.failed_units.first() {
            let loc = h.inventory()?.units.get(unit).map(|u| u.location.to_string()).unwrap_or_default();
            return Err(Failure::new(
                status::OFFLOAD_ERROR_NOT_FOUND,
                format!("no code object in the fat binary at {loc} loads on {gpu} ({} runtime)", runtime.name()),
            ));
        }
        if sel.chosen.is_empty() {
            return Err(Failure::new(
                status::OFFLOAD_ERROR_NOT_FOUND,
                format!("no {} code objects found", runtime.name()),
            ));
        }
        Ok(())
    })
}

/// Copies the bytes of code object `index` into `buffer`, decompressing
/// them if they lie in a compressed bundle (each compressed bundle is
/// decompressed once per inventory and its hash checked).
///
/// `*size` is set to the code object's size. With `buffer` NULL the call
/// only reports the size (without decompressing) and returns OFFLOAD_OK;
/// when `capacity` is smaller than the size it returns
/// OFFLOAD_ERROR_BUFFER_TOO_SMALL and writes nothing.
///
/// # Safety
/// `inv` is a live inventory; `buffer` NULL or room for `capacity` bytes;
/// `size` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_code_object_copy(
    inv: *const offload_inventory,
    index: usize,
    buffer: *mut u8,
    capacity: usize,
    size: *mut usize,
) -> offload_status {
    guard("offload_code_object_copy", || {
        let size = out_arg(size, "size")?;
        *size = 0;
        let h = handle(inv)?;
        let declared = h.declared_size(index)?;
        let too_big = || Failure::new(status::OFFLOAD_ERROR_FORMAT, "the code object does not fit in memory");
        if buffer.is_null() {
            *size = usize::try_from(declared).map_err(|_| too_big())?;
            return Ok(());
        }
        // Refuse before decompressing: the declared size is what the bytes
        // will be (a mismatch is caught below).
        if declared > capacity as u64 {
            *size = usize::try_from(declared).map_err(|_| too_big())?;
            return Err(Failure::new(
                status::OFFLOAD_ERROR_BUFFER_TOO_SMALL,
                format!("the code object has {declared} bytes; the buffer holds {capacity}"),
            ));
        }
        let bytes = h.bytes(index)?;
        *size = bytes.len();
        if bytes.len() > capacity {
            return Err(Failure::new(
                status::OFFLOAD_ERROR_BUFFER_TOO_SMALL,
                format!("the code object has {} bytes; the buffer holds {capacity}", bytes.len()),
            ));
        }
        // SAFETY: the caller promises room for `capacity` >= len bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(buffer, bytes.len()) };
        out.copy_from_slice(&bytes);
        Ok(())
    })
}

/// Bytes the library allocated (opaque); read them with offload_buffer_data
/// and offload_buffer_size, release them with offload_buffer_free.
#[allow(non_camel_case_types)]
pub struct offload_buffer {
    bytes: Vec<u8>,
}

/// Decompresses a compressed bundle (`CCOB`, versions 1 to 3, zstd or
/// zlib) of `len` bytes at `data` and checks its hash. On success `*out` is
/// a new buffer holding the bundle, to be released with
/// offload_buffer_free(). Bytes after the compressed bundle other than zero
/// padding are an error, as in `clang-offload-bundler`.
///
/// # Safety
/// `data` points to `len` readable bytes; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_decompress(
    data: *const u8,
    len: usize,
    out: *mut *mut offload_buffer,
) -> offload_status {
    guard("offload_decompress", || {
        let out = out_arg(out, "out")?;
        *out = std::ptr::null_mut();
        let input: &[u8] = if len == 0 {
            &[]
        } else if data.is_null() {
            return Err(Failure::invalid("data is NULL"));
        } else {
            // SAFETY: the caller promises `len` readable bytes.
            unsafe { std::slice::from_raw_parts(data, len) }
        };
        if !compressed::is_compressed(input) {
            return Err(Failure::new(status::OFFLOAD_ERROR_FORMAT, "not a compressed bundle (no CCOB header)"));
        }
        let format_error = |e: compressed::CompressedError| {
            Failure::new(status::OFFLOAD_ERROR_FORMAT, format!("Failed to decompress input: {e}"))
        };
        let blob = compressed::read_single_blob(input).map_err(format_error)?;
        let bytes = compressed::decompress(&blob).map_err(format_error)?;
        *out = Box::into_raw(Box::new(offload_buffer { bytes }));
        Ok(())
    })
}

/// Lists the kernels of every AMDGPU code object, cubin and PTX module of
/// the inventory with their resources and occupancy estimate, as
/// `offload kernels --json` lists them: `*out` is a new buffer holding a
/// UTF-8 JSON array (not NUL-terminated; its size is
/// offload_buffer_size()) of one record per kernel per code object, the
/// record documented in `docs/reference/kernels-json.md`. Code objects
/// whose kernels cannot be read have no record. Release the buffer with
/// offload_buffer_free().
///
/// # Safety
/// `inv` is a live inventory; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_kernels_json(
    inv: *const offload_inventory,
    out: *mut *mut offload_buffer,
) -> offload_status {
    guard("offload_kernels_json", || {
        let out = out_arg(out, "out")?;
        *out = std::ptr::null_mut();
        // A package's inventory is refused with a message, as for
        // offload_select (its members' bytes are not kept).
        let inv = handle(inv)?.inventory()?;
        let rows = offload_inspect::kernels::rows(inv, &offload_inspect::kernels::kernels(inv, 0));
        let bytes = serde_json::to_vec(&rows).map_err(|e| Failure::invalid(format!("kernel records: {e}")))?;
        *out = Box::into_raw(Box::new(offload_buffer { bytes }));
        Ok(())
    })
}

/// The bytes of a buffer (NULL for NULL); valid until offload_buffer_free.
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_buffer_data(buf: *const offload_buffer) -> *const u8 {
    guard_value("offload_buffer_data", std::ptr::null(), || {
        // SAFETY: a non-NULL buffer came from this library and is not freed.
        unsafe { buf.as_ref() }.map_or(std::ptr::null(), |b| b.bytes.as_ptr())
    })
}

/// The size in bytes of a buffer (0 for NULL).
///
/// # Safety
/// `buf` is NULL or a live buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_buffer_size(buf: *const offload_buffer) -> usize {
    // SAFETY: a non-NULL buffer came from this library and is not freed.
    guard_value("offload_buffer_size", 0, || unsafe { buf.as_ref() }.map_or(0, |b| b.bytes.len()))
}

/// Releases a buffer. NULL is ignored.
///
/// # Safety
/// `buf` is NULL or came from this library and was not freed yet.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn offload_buffer_free(buf: *mut offload_buffer) {
    guard_value("offload_buffer_free", (), || {
        if !buf.is_null() {
            // SAFETY: the caller hands back a pointer from Box::into_raw.
            drop(unsafe { Box::from_raw(buf) });
        }
    })
}

#[cfg(test)]
mod tests;
