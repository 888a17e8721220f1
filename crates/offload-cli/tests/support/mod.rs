//! Helpers shared by the three test harnesses (`tests/cli`, `tests/interop`,
//! `tests/corpus`). Each harness includes this tree once (`#[path]` in its
//! `main.rs`) and re-exports its modules at the crate root, so a test module
//! names them `crate::common`, `crate::inspect_support`, ... A harness uses
//! only some of them.
#![allow(dead_code, unused_imports)]

pub mod common;
pub mod cuda_support;
pub mod inspect_support;
mod llvm19;
pub mod package_support;
pub mod prune_support;
pub mod real_corpus_support;
pub mod uri_support;
pub mod wrapper_common;
