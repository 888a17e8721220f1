//! Hermetic tests of the four binaries: golden fixtures of the bundler,
//! packager and wrapper, the `offload` commands on shipped fixtures, the
//! hostile-input corpus and atomic output. Nothing outside the repository is
//! needed, except where a test says so with an `ignore` (see build.rs).

#[path = "../support/mod.rs"]
mod support;
use support::*;

mod atomic;
mod attacks;
mod bundler_fixtures;
mod cases;
mod check_cli;
mod cuda_fixtures;
mod docs_examples;
mod gpus_cli;
mod hostile;
mod inspect_cli;
mod inspect_fixtures;
mod inspect_tables;
mod inspect_uri;
mod json_schemas;
mod kpack_cli;
mod objects_golden;
mod offload_conventions;
mod packager_golden;
mod packager_robustness;
mod packages_cli;
mod prune_cli;
mod prune_env_cli;
mod registration;
mod replace_cli;
mod size_diff_cli;
mod terminal;
mod windows_built;
mod windows_pe;
mod wrapper_fixtures;
