//! Rewriting finished binaries: [`prune`] removes the code objects a set of
//! GPUs does not need (zero mode keeps every address, cut mode makes the
//! file smaller), [`replace`] swaps one code object for another, [`kpack`]
//! splits HIP device code into ROCm kpack archives and joins it back. They work
//! from the inspector's map of a file ([`offload_inspect::layout`]) and
//! produce [`offload_format::plan::Plan`]s that are checked before anything
//! is written; writing them is the caller's (`offload-io`).

#![warn(missing_docs)]

mod error;
pub mod kpack;
pub mod prune;
pub mod replace;
pub mod split;
pub mod tree;

pub use error::FormatError;
