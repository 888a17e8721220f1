//! Readers and writers for the binary containers of Clang's offloading
//! toolchains and NVIDIA's nvcc, and the naming tables they use: the
//! bottom layer of offload-binutils (see ARCHITECTURE.md).
//!
//! # What it reads and writes
//!
//! * **Offload bundles** as `clang-offload-bundler` makes them: binary
//!   bundles ([`bundle::binary`]), text bundles ([`bundle::text`]),
//!   compressed bundles (`CCOB`, zstd or zlib: [`bundle::compressed`]),
//!   bundles in the sections of objects ([`bundle::object`]) and in `ar`
//!   archives ([`bundle::archive`]). The bundler's operations as a whole
//!   are in [`bundler`].
//! * **OffloadBinary** packages (`clang-offload-packager`, the
//!   `.llvm.offloading` section): [`offload_binary`].
//! * **CUDA fat binaries** (`.nv_fatbin`, `__nv_relfatbin`, `.fatbin`
//!   files) and cubins: [`cuda`].
//! * The module `clang-offload-wrapper` writes: [`wrapper`].
//! * ROCm's **kpack** archives and the host binaries split into them, and
//!   the runtime loader's resolution of both: [`kpack`] (on top of a
//!   bounded MessagePack reader, [`msgpack`]).
//!
//! The building blocks: [`bytes`] (fields read at checked offsets),
//! [`elf`], [`coff`] and [`bitcode`] (the object and bitcode readers),
//! [`target_id`], [`offload_arch`], [`amdgpu`], [`gpu_names`] and [`triple`]
//! (names of targets and processors, and of the products people type),
//! [`llvm_hash`] and `string_map` (LLVM's hash
//! tables), [`llvm_release`] (what differs between the LLVM releases the
//! drop-in tools follow) and [`plan`] (outputs described as pieces).
//!
//! Every reader works on a byte slice without copying and checks every
//! offset and size against the slice before use: hostile input gives an
//! error or a diagnostic, never a panic, and no allocation is sized by a
//! field that was not checked first. Writers produce [`plan::Plan`]s or byte
//! vectors. Nothing here does I/O: finding code objects in files and
//! packages is `offload-inspect`'s, writing files `offload-io`'s.

#![warn(missing_docs)]

pub mod amdgpu;
pub mod bitcode;
pub mod bundle;
pub mod bundler;
pub mod bytes;
pub mod coff;
pub mod cuda;
pub mod elf;
pub mod gpu_names;
pub mod kpack;
pub mod llvm_hash;
pub mod llvm_release;
pub mod msgpack;
pub mod occupancy;
pub mod offload_arch;
pub mod offload_binary;
pub mod plan;
pub(crate) mod string_map;
pub mod target_id;
pub mod triple;
pub mod wrapper;
