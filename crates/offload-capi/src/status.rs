//! Status codes, the per-thread last-error message, and the guard every
//! entry point runs its body in (no panic may cross into C).

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What a call did. `OFFLOAD_OK` is 0; every other value is a failure, and
/// offload_last_error() says what went wrong.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum offload_status {
    /// Success.
    OFFLOAD_OK = 0,
    /// A NULL pointer where one is not allowed, a string that is not UTF-8,
    /// an index out of range, an unknown runtime or GPU name.
    OFFLOAD_ERROR_INVALID_ARGUMENT = 1,
    /// A file could not be opened or read.
    OFFLOAD_ERROR_IO = 2,
    /// The bytes are damaged or not what the call expects (a compressed
    /// bundle that does not decompress or whose hash does not match).
    OFFLOAD_ERROR_FORMAT = 3,
    /// offload_select: a fat binary holds code for the runtime but nothing
    /// that loads on the GPU, or the input holds no code for the runtime.
    OFFLOAD_ERROR_NOT_FOUND = 4,
    /// The caller's buffer is smaller than the size reported with it.
    OFFLOAD_ERROR_BUFFER_TOO_SMALL = 5,
    /// A bug in the library (a caught panic); please report it.
    OFFLOAD_ERROR_INTERNAL = 6,
}

pub use offload_status::*;

/// A failure: its status and message.
#[derive(Debug)]
pub struct Failure {
    pub status: offload_status,
    pub message: String,
}

impl Failure {
    pub fn new(status: offload_status, message: impl Into<String>) -> Failure {
        Failure { status, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(OFFLOAD_ERROR_INVALID_ARGUMENT, message)
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as this thread's last error.
pub fn set_last_error(message: &str) {
    let text = crate::strings::c_string(message);
    LAST_ERROR.with(|e| *e.borrow_mut() = text);
}

/// This thread's last error message (empty when there was none).
pub fn last_error_ptr() -> *const c_char {
    // The CString lives in the thread-local until the next failure replaces
    // it, so the pointer stays valid that long.
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Runs an entry point's body: failures and panics become a status and a
/// last-error message.
pub fn guard(name: &str, body: impl FnOnce() -> Result<(), Failure>) -> offload_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => OFFLOAD_OK,
        Ok(Err(f)) => {
            set_last_error(&f.message);
            f.status
        }
        Err(_) => {
            set_last_error(&format!("internal error in {name} (a bug in offload-binutils; please report it)"));
            OFFLOAD_ERROR_INTERNAL
        }
    }
}

/// Like [`guard`] for entry points that return a value: `fallback` on panic.
pub fn guard_value<T>(name: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        set_last_error(&format!("internal error in {name} (a bug in offload-binutils; please report it)"));
        fallback
    })
}
