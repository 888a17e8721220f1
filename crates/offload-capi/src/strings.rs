//! Strings across the boundary: Rust strings out as NUL-terminated C
//! strings, C strings in as UTF-8.

use crate::status::Failure;
use std::ffi::{CStr, CString, c_char};

/// `s` as a C string. A NUL inside (a hostile bundle ID can hold one) would
/// cut the string short in C, so it becomes U+FFFD, as other undecodable
/// bytes of an ID already do.
pub fn c_string(s: &str) -> CString {
    CString::new(s).unwrap_or_else(|_| {
        let cleaned = s.replace('\0', "\u{FFFD}");
        CString::new(cleaned).unwrap_or_default()
    })
}

/// A C string argument as UTF-8; `what` names it in the error.
///
/// # Safety
/// `ptr` is NULL or points to a NUL-terminated string.
pub unsafe fn str_arg<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if ptr.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller promises a NUL-terminated string.
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str().map_err(|_| Failure::invalid(format!("{what} is not UTF-8")))
}
