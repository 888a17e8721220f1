//! What this machine has and what its loader would do: [`gpus`] finds the
//! local GPUs (the KFD sysfs tree, NVIDIA's NVML loaded when present) and
//! [`check`] follows a program's or library's dependencies as glibc's
//! loader does (`ld.so.cache`, RPATH/RUNPATH) and judges every fat binary
//! it reaches per GPU. The only library code that reads the host's files
//! and loads system libraries; everything it judges comes from
//! `offload-inspect`.

// The one library crate that talks to the host: dlopen/dlsym of NVML and
// mapping ld.so.cache need unsafe code; each block has a SAFETY comment.
#![allow(unsafe_code)]
#![warn(missing_docs)]

pub mod check;
pub mod gpus;
