//! Itanium C++ demangling of kernel names, bounded for hostile input
//! (`docs/formats/kernels.md` §5): the `cpp_demangle` crate with recursion
//! limits on parsing and printing, names longer than [`MAX_NAME`] left as
//! they are, and the printed name cut off (and given up) past
//! [`MAX_OUTPUT`], which also bounds the time spent.

use cpp_demangle::{DemangleOptions, ParseOptions, Symbol};
use std::fmt;

/// Mangled names longer than this are not demangled.
pub const MAX_NAME: usize = 4096;
/// Demangled names longer than this are given up (substitutions can make
/// the output exponentially longer than the input).
pub const MAX_OUTPUT: usize = 16 * 1024;
/// Recursion limit for parsing and for printing.
const RECURSION: u32 = 64;

struct Bounded(String);

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.0.len().saturating_add(s.len()) > MAX_OUTPUT {
            return Err(fmt::Error);
        }
        self.0.push_str(s);
        Ok(())
    }
}

/// The demangled form of an Itanium C++ name (`_Z...`), `None` when `name`
/// is not one, is too long, or cannot be demangled within the bounds.
pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") || name.len() > MAX_NAME {
        return None;
    }
    let symbol = Symbol::new_with_options(name.as_bytes(), &ParseOptions::default().recursion_limit(RECURSION)).ok()?;
    let mut out = Bounded(String::new());
    symbol.structured_demangle(&mut out, &DemangleOptions::default().recursion_limit(RECURSION)).ok()?;
    Some(out.0)
}

/// `demangle(name)`, or `name` itself.
pub fn display_name(name: &str) -> String {
    demangle(name).unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names() {
        assert_eq!(demangle("_Z5scalePff").as_deref(), Some("scale(float*, float)"));
        assert_eq!(demangle("_Z5scalePffi").as_deref(), Some("scale(float*, float, int)"));
        assert_eq!(
            demangle("_ZN6thrust8cuda_cub4core13_kernel_agentIiEEvT_").as_deref(),
            Some("void thrust::cuda_cub::core::_kernel_agent<int>(int)")
        );
        assert_eq!(demangle("plain_c_kernel"), None);
        assert_eq!(display_name("plain_c_kernel"), "plain_c_kernel");
        assert_eq!(demangle("_Zgarbage"), None);
    }

    #[test]
    fn hostile_names_are_bounded() {
        // Deep nesting: a recursion limit, not a stack overflow.
        let deep = format!("_Z1f{}i{}", "PFv".repeat(1000), "E".repeat(1000));
        assert_eq!(demangle(&deep), None);
        // Too long to try.
        let long = format!("_Z{}", "a".repeat(MAX_NAME));
        assert_eq!(demangle(&long), None);
        // Substitutions that double the output at every step: cut off.
        let mut name = String::from("_Z1fIJ");
        name.push_str("1A");
        for _ in 0..40 {
            name.push_str("S_");
        }
        name.push_str("EEvv");
        let start = std::time::Instant::now();
        let out = demangle(&name);
        assert!(out.is_none_or(|s| s.len() <= MAX_OUTPUT));
        assert!(start.elapsed().as_secs() < 2);
    }
}
