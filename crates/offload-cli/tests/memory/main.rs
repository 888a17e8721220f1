//! Peak memory of `offload` on large inputs, alone in its own test binary:
//! the child's peak RSS comes from `wait4`, and Linux counts into it the RSS
//! of the process that spawned it (the spawning process's memory is the
//! child's until `exec`, with `posix_spawn`'s shared-memory clone as with
//! `fork`). In the `cli` harness the other tests' memory made that parent
//! large; here it stays a few MiB, as the limits assume.

#[path = "../support/mod.rs"]
mod support;
use support::*;

mod inspect_large;
