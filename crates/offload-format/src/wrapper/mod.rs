//! The host-side registration module of LLVM 14's `clang-offload-wrapper`:
//! a small IR model ([`ir`]), an LLVM bitcode writer for it ([`bitcode`],
//! over the bitstream writer [`bitstream`]), a textual `.ll` printer in the
//! form `llvm-dis` of LLVM 14 shows ([`text`]), LLVM 14's target-triple
//! architecture names ([`triple`]), and the wrapper module itself
//! ([`module`]), with the `LLVMOMPOFFLOAD` notes of `-add-omp-offload-notes`
//! ([`omp_notes`]); and the modules of LLVM 22's `llvm-offload-wrapper` for
//! OpenMP, CUDA and HIP, with opaque pointers ([`module22`]).

pub mod bitcode;
pub mod bitstream;
pub mod ir;
pub mod module;
pub mod module22;
pub mod omp_notes;
pub mod text;
pub mod triple;
