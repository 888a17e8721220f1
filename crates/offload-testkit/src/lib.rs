//! Test builders shared by the offload-binutils crates' tests (a
//! dev-dependency only; nothing here ships).

pub mod damage;
pub mod schema;

use std::path::PathBuf;

/// The folder of the fixtures shared by the library crates' tests: real
/// host binaries built by clang 19 (`prune/`, `prune/omp/`, each with the
/// `make.sh` that built them), a glibc `ld.so.cache` (`check/`) and KFD
/// sysfs trees (`kfd/`).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures"))
}

/// The bytes of a shared fixture, by its path under [`fixtures_dir`].
pub fn fixture(rel: &str) -> Vec<u8> {
    let path = fixtures_dir().join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The bytes of a fixture of the command-line tests
/// (`crates/offload-cli/tests/fixtures`), which the library tests read too.
pub fn cli_fixture(rel: &str) -> Vec<u8> {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures")).join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The OpenMP host programs under `prune/omp/`, each with an x86_64 and an
/// amdgcn gfx90a image.
pub const OPENMP_PROGRAMS: [&str; 4] = ["gnu_pie", "lld_pie", "lld_relr.so", "nopie_gnu"];
