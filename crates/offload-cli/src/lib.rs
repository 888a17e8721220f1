//! Shared plumbing for the offload-binutils command-line tools: an LLVM-style
//! option parser, file I/O policy (mapped inputs, atomic outputs) and
//! diagnostics. Nothing about a file format lives here.

pub mod cl;
pub mod diag;
pub mod io;
pub mod report;
pub mod stream;
