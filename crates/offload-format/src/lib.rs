//! Readers and writers for the binary containers of Clang's offloading
//! toolchains, and an inspector that finds GPU code objects in any file.
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
//!   files) and cubins: [`cuda`] (read only).
//! * The module `clang-offload-wrapper` writes: [`wrapper`].
//!
//! On top of these, [`inspect`] finds every code object in any file (raw
//! containers, ELF/COFF/Mach-O objects and executables, archives, LLVM
//! bitcode, nesting of all of these), [`inspect::select`] tells which one a
//! GPU loads, and [`inspect::Inventory::bytes`] produces a code object's
//! bytes, decompressing as needed. [`package`] walks zip/wheel, tar, deb
//! and conda packages and folders for files to scan; [`layout`] and
//! [`prune`] describe a file's offload sections and plan a smaller copy
//! without the code objects a set of GPUs does not need.
//!
//! The remaining modules are the building blocks: [`elf`], [`coff`] and
//! [`bitcode`] (the object and bitcode readers), [`target_id`],
//! [`offload_arch`], [`amdgpu`] and [`triple`] (names of targets and
//! processors), [`llvm_hash`] and [`string_map`] (LLVM's hash tables),
//! [`llvm_release`] (what differs between the LLVM releases the drop-in
//! tools follow) and [`plan`] (outputs described as pieces).
//!
//! Every reader works on a byte slice without copying and checks every
//! offset and size against the slice before use: hostile input gives an
//! error or a diagnostic, never a panic, and no allocation is sized by a
//! field that was not checked first. Writers produce [`plan::Plan`]s or byte
//! vectors; nothing here does I/O except [`package`], which may spill a
//! large decompressed member to an unlinked temporary file.
//!
//! # The three common tasks
//!
//! The examples use a HIP bundle compiled for `gfx906` and `gfx90a:xnack+`
//! (the repository's `samples/hip-gfx906-gfx90a.bc`: a host entry and two
//! device entries). For a file on disk, read or memory-map it and pass the
//! bytes; the name passed to [`inspect::scan`] is only used in messages.
//!
//! ## List the code objects of a file
//!
//! ```
//! use offload_format::inspect::{Options, scan};
//!
//! let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.bc");
//! let inventory = scan(data, "hip-gfx906-gfx90a.bc", &Options::default());
//! for o in &inventory.objects {
//!     // The bundle entry ID, the canonical target ID, the size in bytes,
//!     // and where the object lies ("file", "member libx.a(foo.o) section
//!     // .hip_fatbin", ...).
//!     println!("{}\t{}\t{}\t{}", o.id, o.target_id, o.size, o.location);
//! }
//! let targets: Vec<&str> = inventory.objects.iter().map(|o| o.target_id.as_str()).collect();
//! assert_eq!(targets, ["", "gfx906", "gfx90a:xnack+"]);
//! assert!(!inventory.has_errors());
//! ```
//!
//! ## Select the code object a GPU loads
//!
//! ```
//! use offload_format::inspect::select::{Gpu, Runtime, Verdict, select};
//! use offload_format::inspect::{Options, scan};
//!
//! let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.bc");
//! let inventory = scan(data, "sample", &Options::default());
//! // A GPU as `rocminfo` or `--offload-arch` names it, features included.
//! let gpu = Gpu::parse("gfx90a:xnack+")?;
//! let selection = select(&inventory.objects, &gpu, Runtime::Hip);
//! let chosen: Vec<&str> =
//!     selection.chosen.iter().map(|&i| inventory.objects[i].target_id.as_str()).collect();
//! assert_eq!(chosen, ["gfx90a:xnack+"]);
//! // Every other object has a verdict that says why it was not taken.
//! if let Some(Verdict::Rejected(why)) = &selection.verdicts[1] {
//!     println!("{}: {}", why.code(), why.explain(&gpu, Runtime::Hip));
//! }
//! # Ok::<(), offload_format::inspect::select::GpuError>(())
//! ```
//!
//! ## Extract a code object's bytes, decompressing
//!
//! ```
//! use offload_format::inspect::{Options, scan};
//!
//! // The same bundle, compressed with `clang-offload-bundler -compress`.
//! let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.compressed.bc");
//! let inventory = scan(data, "sample", &Options::default());
//! let gfx906 = inventory.objects.iter().find(|o| o.target_id == "gfx906").unwrap();
//! assert!(gfx906.compressed);
//! // Decompressed, with the bundle's hash checked.
//! let bytes = inventory.bytes(gfx906)?;
//! assert_eq!(bytes.len() as u64, gfx906.size);
//! # Ok::<(), offload_format::inspect::BytesError>(())
//! ```
//!
//! To extract many objects, [`inspect::decode::visit_objects`] decompresses
//! each compressed bundle once, on several threads, with bounded memory.

#![warn(missing_docs)]

pub mod amdgpu;
pub mod bitcode;
pub mod bundle;
pub mod bundler;
pub mod check;
pub mod coff;
pub mod cuda;
#[cfg(test)]
mod damage;
pub mod elf;
pub mod gpus;
pub mod inspect;
pub mod layout;
pub mod llvm_hash;
pub mod llvm_release;
pub mod offload_arch;
pub mod offload_binary;
pub mod package;
pub mod plan;
pub mod prune;
pub mod replace;
pub mod report;
pub mod string_map;
pub mod target_id;
pub mod triple;
pub mod wrapper;
