//! Decompressing many compressed bundles within the decoding budget, alone
//! in its own test binary for the reason `memory/main.rs` gives: its budget
//! test reads an `extract` child's peak RSS from `wait4`, which counts the
//! test process's own memory, so no unrelated test may run beside it.

#[path = "../support/mod.rs"]
mod support;
use support::*;

mod inspect_decompress;
