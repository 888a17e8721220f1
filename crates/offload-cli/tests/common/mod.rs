//! Helpers shared by the integration tests.
//!
//! Interoperability tests compare with LLVM's own tools. Where a tool is not
//! installed they are skipped with a message, unless `OFFLOAD_REQUIRE_LLVM=1`
//! is set (CI sets it), in which case a missing tool is a failure.
#![allow(dead_code)]

pub mod diff;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The directory of LLVM `version`'s tools (`OFFLOAD_LLVM<version>_BIN`, or
/// Debian's `/usr/lib/llvm-<version>/bin`).
pub fn llvm_bin_dir(version: u32) -> PathBuf {
    std::env::var_os(format!("OFFLOAD_LLVM{version}_BIN"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/usr/lib/llvm-{version}/bin")))
}

/// Whether missing reference tools must fail the tests.
pub fn llvm_required() -> bool {
    std::env::var("OFFLOAD_REQUIRE_LLVM").is_ok_and(|v| v == "1")
}

/// Path of an LLVM tool, or `None` (with a message) when it is missing and
/// not required.
pub fn llvm_tool(version: u32, name: &str) -> Option<PathBuf> {
    let p = llvm_bin_dir(version).join(name);
    if p.is_file() {
        return Some(p);
    }
    assert!(
        !llvm_required(),
        "OFFLOAD_REQUIRE_LLVM=1 but {} is missing; run scripts/install-reference-llvm.sh",
        p.display()
    );
    eprintln!("skipping: {} not installed (set OFFLOAD_REQUIRE_LLVM=1 to fail instead)", p.display());
    None
}

/// Runs a command and returns its output; panics only if it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// The fixtures directory of the CLI crate.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}
