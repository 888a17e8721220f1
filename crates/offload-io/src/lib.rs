//! File I/O policy shared by every tool:
//!
//! * inputs are memory-mapped (read fully for stdin, pipes and devices);
//! * outputs are staged in temporary files next to their destination and
//!   renamed into place only when every output of the run has been written,
//!   so a failed run creates nothing and changes nothing; a rename that
//!   fails at commit undoes the renames before it;
//! * standard output, pipes and devices are staged in anonymous temporary
//!   files (never in memory) and written after the files are in place;
//! * a symbolic link as output keeps the link and replaces its target,
//!   except a link in a sticky world-writable folder that belongs neither
//!   to us nor to the folder's owner, which is refused (EACCES);
//! * an input that is also an output is safe: the input stays mapped on the
//!   old inode while the new file is renamed over the path;
//! * payloads borrowed from a mapped input are copied by the kernel
//!   (`copy_file_range`), falling back to ordinary writes.

// Inputs are memory-mapped and outputs use raw descriptors (copy_file_range,
// fallocate, posix_fadvise): the unsafe blocks are in input.rs, write.rs
// outputs.rs, signals.rs and mapped.rs, each with a SAFETY comment.
#![allow(unsafe_code)]

mod input;
mod mapped;
mod outputs;
mod pool;
mod signals;
mod thin;
mod write;

pub use input::Input;
pub use mapped::MappedFile;
pub use outputs::{OutputError, Outputs, StagedOutput};
pub use pool::for_each_item;
use pool::*;
pub use signals::{remove_staging_on_signals, remove_stale_staging};
pub use thin::read_thin_member;
pub use write::materialize;
use write::*;

use std::io;

/// The text LLVM prints for an I/O error: the system message without Rust's
/// " (os error N)" suffix.
pub fn error_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

#[cfg(test)]
mod tests;
