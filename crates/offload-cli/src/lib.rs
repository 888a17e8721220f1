//! Shared plumbing for the offload-binutils command-line tools: an LLVM-style
//! option parser ([`cl`]), LLVM's diagnostics ([`diag`]) and `-time-trace`
//! style timers ([`timers`]), and chunked reading of standard input
//! ([`stream`]). File I/O is `offload-io`'s; nothing about a file format
//! lives here.

pub mod cl;
pub mod diag;
pub mod packager;
pub mod stream;
pub mod timers;
