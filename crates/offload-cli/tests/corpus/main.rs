//! Tests on the real ROCm corpus that scripts/fetch-real-corpus.sh fetches
//! (ignored without it; the build fails under OFFLOAD_REQUIRE_REAL_CORPUS=1).

#[path = "../support/mod.rs"]
mod support;
use support::*;

mod real_corpus;
mod real_corpus_diff;
mod real_corpus_kpack;
mod real_corpus_uri;
mod real_venv_prune;
