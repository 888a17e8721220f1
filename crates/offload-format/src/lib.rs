//! Readers and writers for the binary containers of Clang's offloading
//! toolchains: offload bundles (binary, text, compressed, inside objects and
//! archives), OffloadBinary packages, and the offload wrapper module.
//!
//! Every reader works on a byte slice without copying and checks every
//! offset and size against the slice before use; no input makes it panic.
//! Writers produce [`plan::Plan`]s or byte vectors; nothing here does I/O.

pub mod amdgpu;
pub mod bitcode;
pub mod bundle;
pub mod bundler;
pub mod coff;
pub mod cuda;
pub mod elf;
pub mod inspect;
pub mod layout;
pub mod llvm_hash;
pub mod offload_arch;
pub mod offload_binary;
pub mod package;
pub mod plan;
pub mod prune;
pub mod report;
pub mod string_map;
pub mod target_id;
pub mod triple;
pub mod wrapper;
