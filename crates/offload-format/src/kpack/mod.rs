//! kpack: AMD's split of HIP device code out of host libraries into
//! `.kpack` archives (ROCm/rocm-systems `shared/kpack`). The format, the
//! host-binary changes and the loader's rules are described, with their
//! public sources, in `docs/formats/kpack.md`.
//!
//! * [`archive`]: the `.kpack` file (`KPAK` header, msgpack table of
//!   contents, zstd frames), read without copying; one code object is
//!   decompressed on request, with a size limit.
//! * [`verify`]: the checks a reader can make on an archive beyond what
//!   parsing needs (frames inside the file and not overlapping, exact frame
//!   lengths, declared and decoded sizes, zstd checksums).
//! * [`host`]: the host side: the `.rocm_kpack_ref` marker, `HIPK`
//!   wrapper records, and a reader of both in an ELF host binary.
//! * [`resolve`]: which archive and key AMD's runtime loader would load for
//!   a GPU, or which error it would return, written from the published
//!   rules, for both loader behaviours (first compatible archive, or
//!   fall-through to the next compatible one).
//! * [`write`](mod@write): the archive writer (frames compressed by the caller, in
//!   parallel if it likes, or carried over from another archive).
//!
//! Everything works on byte slices; only [`resolve::RealFiles`] touches the
//! file system, and only when a caller hands it to the resolver.

pub mod archive;
pub mod frame;
pub mod host;
pub mod resolve;
pub mod verify;
pub mod write;

pub use archive::{Archive, ArchiveError, Binary, Entry, Scheme};
pub use host::{HostBinary, Marker, MarkerError, WrapperKind, WrapperRecord};
pub use resolve::{ArchiveSource, Env, LoadError, Loaded, RealFiles, Request, SearchOrder, clr_arch_list};
pub use verify::{Problem, VerifyOptions};

#[cfg(test)]
mod tests;
