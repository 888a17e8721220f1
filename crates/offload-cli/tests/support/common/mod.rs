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

/// LLVM 19's OpenMP runtime folder (`OFFLOAD_OMP19_LIB`, or /opt/omp19/lib
/// where scripts/install-reference-llvm.sh puts it), and GNU ld beside it
/// when `gnu_ld`; `None` (with a message) when missing and not required.
pub fn omp19_runtime(gnu_ld: bool) -> Option<PathBuf> {
    let dir = std::env::var_os("OFFLOAD_OMP19_LIB").map(PathBuf::from).unwrap_or_else(|| "/opt/omp19/lib".into());
    let needed = ["libomp.so", "libomptarget.so", "libomptarget.devicertl.a"];
    let ld = !gnu_ld || std::path::Path::new("/usr/bin/ld.bfd").exists();
    if needed.iter().all(|f| dir.join(f).exists()) && ld {
        return Some(dir);
    }
    let what = if gnu_ld { " (or GNU ld)" } else { "" };
    assert!(
        !llvm_required(),
        "OFFLOAD_REQUIRE_LLVM=1 but LLVM 19's OpenMP runtime in {}{what} is missing; run scripts/install-reference-llvm.sh",
        dir.display()
    );
    eprintln!("skipping: LLVM 19's OpenMP runtime not found in {}{what}", dir.display());
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
