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

/// The kpack fixtures: AMD's splitter's output for small clang-built
/// libraries, and its loader's answers (docs/formats/kpack.md). Their file
/// names spell `:` as `%3A`, so that the repository checks out anywhere.
pub fn kpack_fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-format/tests/fixtures/kpack"))
}

/// Copies the tree `from` into `to` under the names AMD's tools gave its
/// files (`%3A` back to `:`), as the loader looks them up.
pub fn copy_with_real_names(from: &std::path::Path, to: &std::path::Path) {
    let entries = std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    for entry in entries {
        let path = entry.unwrap_or_else(|e| panic!("{}: {e}", from.display())).path();
        let name = path.file_name().unwrap_or_default().to_string_lossy().replace("%3A", ":");
        let dest = to.join(name);
        if path.is_dir() {
            copy_with_real_names(&path, &dest);
        } else {
            std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
            std::fs::copy(&path, &dest).unwrap_or_else(|e| panic!("{} -> {}: {e}", path.display(), dest.display()));
        }
    }
}

/// Every file under `dir`, at any depth (folders themselves left out), in
/// the order the directory reads give them.
pub fn files_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path();
        if path.is_dir() { out.extend(files_under(&path)) } else { out.push(path) }
    }
    out
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

/// An OpenMP program whose one target region must run on a device (exit 0
/// and `sum=500500 square15=225` when it did): the program the OpenMP
/// run tests of LLVM 19 and LLVM 22 build.
pub const OPENMP_TARGET_PROGRAM: &str = r#"#include <stdio.h>
int main(void) {
  const int n = 1000;
  long sum = 0;
  int squares[16];
#pragma omp target map(tofrom: sum, squares)
  {
    for (int i = 1; i <= n; ++i)
      sum += i;
    for (int i = 0; i < 16; ++i)
      squares[i] = i * i;
  }
  printf("sum=%ld square15=%d\n", sum, squares[15]);
  return sum == 500500 && squares[15] == 225 ? 0 : 1;
}
"#;
