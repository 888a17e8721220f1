//! Interoperability tests: everything that runs an external tool (LLVM 14
//! and 19, clang builds, NVIDIA's CUDA tools, comgr, hipcc). A test whose
//! tool is missing is ignored (build.rs probes for each tool), and the build
//! fails under OFFLOAD_REQUIRE_LLVM=1 / OFFLOAD_REQUIRE_CUDA=1.

#[path = "../support/mod.rs"]
mod support;
use support::*;

mod bundler_llvm19;
mod compressed_llvm19;
mod cuda_clang;
mod cuda_live;
mod gpus_nvml;
mod inspect_llvm19;
mod objects_llvm19;
mod packager_interop;
mod packager_openmp;
mod prune_archives;
mod prune_cuda;
mod prune_cut_cuda;
mod prune_cut_objects;
mod prune_live;
mod prune_openmp;
mod replace_cuda;
mod replace_live;
mod replace_openmp;
mod wrapper_llvm;
mod wrapper_notes;
mod wrapper_openmp;
