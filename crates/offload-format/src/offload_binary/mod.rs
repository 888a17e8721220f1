//! OffloadBinary: the package format of Clang's new offload driver
//! (`clang-offload-packager`, magic `10 FF 10 AD`).
//!
//! Version 1 layout (every integer little-endian, every part 8-byte aligned):
//!
//! ```text
//! 0x00 header  magic[4] version:u32 size:u64 entry_offset:u64 entry_size:u64
//! 0x20 entry   image_kind:u16 offload_kind:u16 flags:u32
//!              string_offset:u64 num_strings:u64 image_offset:u64 image_size:u64
//! 0x48 records num_strings x (key_offset:u64, value_offset:u64)
//!      string table (NUL-terminated strings, suffixes shared), zero pad to 8
//!      image bytes, zero pad to 8            (size = total, a multiple of 8)
//! ```
//!
//! Several binaries are simply concatenated (one per image; a linker merges
//! `.llvm.offloading` sections the same way). Offsets are relative to the
//! start of the binary they belong to.
//!
//! Version 2 (LLVM 23) puts several entries behind one header (the last
//! header field is their count) and gives string records a value size (24
//! bytes); version 3 (LLVM main) adds an inflated size to a 40-byte header
//! and may compress everything after it. The offload kind numbers changed
//! in LLVM 21 (HIP 3 became 4). docs/llvm-releases.md describes all of it.
//!
//! * [`read`]: zero-copy reader over a buffer of concatenated binaries, with
//!   every offset and size checked; versions 1, 2 and 3 are read, compressed
//!   version 3 binaries through [`read::inflate_all`].
//! * [`mod@write`]: the version 1 writer (byte-identical to LLVM 19, and to
//!   LLVM 22 with [`write_plan_for`]), the version 2 and 3 writers and the
//!   string-table builder.
//! * [`args`]: the `--image=key=value,...` syntax of the packager and the
//!   record orders of LLVM 19 and LLVM 16.
//! * [`container`]: finding packages inside ELF/COFF objects, LLVM bitcode and
//!   `ar` archives (bitcode through the crate's bitstream reader,
//!   [`crate::bitcode`]).
//! * [`archive`]: writing extracted images as a GNU `ar` archive, as
//!   `clang-offload-packager --archive` does.

pub mod archive;
pub mod args;
pub mod container;
pub mod read;
pub mod write;

#[cfg(test)]
mod llvm22_tests;

pub use crate::bitcode::is_bitcode;
pub use args::{ImageArgs, RecordOrder};
pub use read::{Binaries, Error, OffloadBinary};
pub use write::{Compression, Image, WriteError, write, write_plan, write_plan_for, write_v2, write_v3};

use crate::bitcode::embedded as bitcode;
use std::fmt;

/// The magic bytes that start every OffloadBinary.
pub const MAGIC: [u8; 4] = [0x10, 0xFF, 0x10, 0xAD];
/// The version LLVM 15 to 22 write and read.
pub const VERSION: u32 = 1;
/// Every part of a binary is aligned to this many bytes.
pub const ALIGNMENT: u64 = 8;
/// Size of the version 1 and 2 header.
pub const HEADER_SIZE: u64 = 32;
/// Size of the version 3 header (adds the inflated size).
pub const HEADER_SIZE_V3: u64 = 40;
/// Entry flag of version 2 and 3: the entry carries metadata only, no
/// image (`OIF_Metadata`).
pub const FLAG_METADATA: u32 = 1;
/// Size of one entry.
pub const ENTRY_SIZE: u64 = 40;
/// Size of one version 1 string record (key offset, value offset).
pub const STRING_RECORD_SIZE_V1: u64 = 16;
/// Size of one version 2 string record (key offset, value offset, value size).
pub const STRING_RECORD_SIZE_V2: u64 = 24;
/// ELF section type of `.llvm.offloading` (`SHT_LLVM_OFFLOADING`).
pub const SHT_LLVM_OFFLOADING: u32 = 0x6fff_4c0b;

/// What kind of file the image is (`ImageKind` in LLVM).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ImageKind {
    /// No kind recorded (value 0).
    #[default]
    None,
    /// A relocatable object or executable (`o`, value 1).
    Object,
    /// LLVM bitcode (`bc`, value 2).
    Bitcode,
    /// An NVIDIA cubin (value 3).
    Cubin,
    /// An NVIDIA fat binary (value 4).
    Fatbinary,
    /// PTX assembly (`s`, value 5).
    Ptx,
    /// SPIR-V (value 6): only newer LLVM releases write it.
    SpirV,
    /// A value this reader has no name for.
    Other(u16),
}

impl ImageKind {
    /// The kind for a stored value; unknown values are kept as
    /// [`ImageKind::Other`].
    pub fn from_u16(v: u16) -> Self {
        match v {
            0 => ImageKind::None,
            1 => ImageKind::Object,
            2 => ImageKind::Bitcode,
            3 => ImageKind::Cubin,
            4 => ImageKind::Fatbinary,
            5 => ImageKind::Ptx,
            6 => ImageKind::SpirV,
            n => ImageKind::Other(n),
        }
    }

    /// The stored value.
    pub fn to_u16(self) -> u16 {
        match self {
            ImageKind::None => 0,
            ImageKind::Object => 1,
            ImageKind::Bitcode => 2,
            ImageKind::Cubin => 3,
            ImageKind::Fatbinary => 4,
            ImageKind::Ptx => 5,
            ImageKind::SpirV => 6,
            ImageKind::Other(n) => n,
        }
    }

    /// The kind LLVM 19's packager gives a file extension (without the dot,
    /// case-sensitive); unknown extensions, and `spv`, give `None`.
    pub fn from_extension(ext: &str) -> Self {
        match ext {
            "o" => ImageKind::Object,
            "bc" => ImageKind::Bitcode,
            "cubin" => ImageKind::Cubin,
            "fatbin" => ImageKind::Fatbinary,
            "s" => ImageKind::Ptx,
            _ => ImageKind::None,
        }
    }

    /// The kind LLVM 19's packager records for an input file: bitcode
    /// content (raw or wrapped) wins over the extension, otherwise the
    /// extension of the path's last component decides.
    pub fn infer(path: &str, content: &[u8]) -> Self {
        if is_bitcode(content) { ImageKind::Bitcode } else { ImageKind::from_extension(path_extension(path)) }
    }

    /// The suffix LLVM uses for extracted files (`getImageKindName`): empty
    /// for kinds without one.
    pub fn name(self) -> &'static str {
        match self {
            ImageKind::Object => "o",
            ImageKind::Bitcode => "bc",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbinary => "fatbin",
            ImageKind::Ptx => "s",
            // LLVM 19 has no name for SPIR-V and prints nothing.
            ImageKind::None | ImageKind::SpirV | ImageKind::Other(_) => "",
        }
    }

    /// The label `llvm-objdump --offloading` prints.
    pub fn objdump_label(self) -> &'static str {
        match self {
            ImageKind::Object => "elf",
            ImageKind::Bitcode => "llvm ir",
            ImageKind::Cubin => "cubin",
            ImageKind::Fatbinary => "fatbinary",
            ImageKind::Ptx => "ptx",
            ImageKind::None | ImageKind::SpirV | ImageKind::Other(_) => "<none>",
        }
    }
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageKind::None => f.write_str("none"),
            ImageKind::SpirV => f.write_str("spv"),
            ImageKind::Other(n) => write!(f, "unknown({n})"),
            k => f.write_str(k.name()),
        }
    }
}

/// Which offloading model produced the image (`OffloadKind` in LLVM).
///
/// The stored number changed in LLVM 21 (docs/llvm-releases.md): LLVM 15-20
/// number the kinds 1, 2, 3 (HIP 3), LLVM 21 on use one bit each (HIP 4,
/// SYCL 8). The enum is the kind itself; [`crate::llvm_release`] has each
/// release's numbers, and [`OffloadKind::from_stored`] is the reader's rule
/// for a number found in a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OffloadKind {
    /// No kind recorded (value 0).
    #[default]
    None,
    /// OpenMP offloading (value 1).
    OpenMp,
    /// CUDA (value 2).
    Cuda,
    /// HIP (value 3 in LLVM 15-20, 4 from LLVM 21).
    Hip,
    /// SYCL (value 8, LLVM 21 on).
    Sycl,
    /// A value no release gives a name (in version 2 and 3 binaries also 3,
    /// which there means OpenMP and CUDA together).
    Other(u16),
}

impl OffloadKind {
    /// The kind a stored value means in a version 1 binary, whichever
    /// release wrote it: 3 is HIP (LLVM 15-20), 4 is HIP and 8 SYCL (LLVM
    /// 21 on, which never write 3); unknown values are kept as
    /// [`OffloadKind::Other`]. The numbers of the two numberings only
    /// collide at 3 and 4, and no release wrote 3 or 4 for anything but
    /// HIP into a version 1 binary.
    pub fn from_u16(v: u16) -> Self {
        match v {
            0 => OffloadKind::None,
            1 => OffloadKind::OpenMp,
            2 => OffloadKind::Cuda,
            3 | 4 => OffloadKind::Hip,
            8 => OffloadKind::Sycl,
            n => OffloadKind::Other(n),
        }
    }

    /// The kind a stored value means in a binary of format `version`:
    /// version 1 per [`Self::from_u16`]; versions 2 and 3 exist only since
    /// LLVM 23, which number the kinds as bits (3 is no single kind).
    pub fn from_stored(version: u32, v: u16) -> Self {
        if version <= 1 { Self::from_u16(v) } else { crate::llvm_release::KindNumbering::BitMask.kind(v) }
    }

    /// The value LLVM 15-20 store (HIP 3; SYCL, which they cannot name, as
    /// the newer 8). The writer for a given release uses
    /// [`crate::llvm_release::LlvmRelease::offload_kind_value`] instead.
    pub fn to_u16(self) -> u16 {
        crate::llvm_release::KindNumbering::Sequential.value(self)
    }

    /// The kind for a `kind=` value as LLVM 19 reads it: exact,
    /// case-sensitive names; anything else (including `sycl` and joined
    /// values like `openmp,cuda`) is None. LLVM 22's reading (with `sycl`)
    /// is [`crate::llvm_release::LlvmRelease::offload_kind_from_name`].
    pub fn from_name(name: &str) -> Self {
        match name {
            "openmp" => OffloadKind::OpenMp,
            "cuda" => OffloadKind::Cuda,
            "hip" => OffloadKind::Hip,
            _ => OffloadKind::None,
        }
    }

    /// LLVM's `getOffloadKindName` (LLVM 22's, which knows `sycl`): `none`
    /// for every kind without a name.
    pub fn name(self) -> &'static str {
        match self {
            OffloadKind::OpenMp => "openmp",
            OffloadKind::Cuda => "cuda",
            OffloadKind::Hip => "hip",
            OffloadKind::Sycl => "sycl",
            OffloadKind::None | OffloadKind::Other(_) => "none",
        }
    }
}

impl fmt::Display for OffloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The last component of a path, as LLVM's `sys::path::filename` gives it
/// for the paths tools see (`/` separated).
pub fn path_file_name(path: &str) -> &str {
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return if path.is_empty() { "" } else { "/" };
    }
    if trimmed.len() != path.len() {
        // LLVM reports a trailing separator as the component ".".
        return ".";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

/// LLVM's `sys::path::extension` without the dot: text after the last `.`
/// of the file name (a leading dot counts), empty for `.` and `..`.
pub fn path_extension(path: &str) -> &str {
    let name = path_file_name(path);
    if name == "." || name == ".." {
        return "";
    }
    match name.rfind('.') {
        Some(i) => &name[i + 1..],
        None => "",
    }
}

/// LLVM's `sys::path::stem`: the file name without its last extension.
pub fn path_stem(path: &str) -> &str {
    let name = path_file_name(path);
    if name == "." || name == ".." {
        return name;
    }
    match name.rfind('.') {
        Some(i) => &name[..i],
        None => name,
    }
}

/// Rounds `v` up to the format's 8-byte alignment (None on overflow).
pub(crate) fn align8(v: u64) -> Option<u64> {
    v.checked_add(ALIGNMENT - 1).map(|x| x & !(ALIGNMENT - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_have_llvm_names() {
        for v in 0..20u16 {
            assert_eq!(ImageKind::from_u16(v).to_u16(), v);
            // LLVM 21's HIP number reads as HIP and is written back as
            // LLVM 19's.
            assert_eq!(OffloadKind::from_u16(v).to_u16(), if v == 4 { 3 } else { v });
        }
        assert_eq!(OffloadKind::from_u16(4), OffloadKind::Hip);
        assert_eq!(OffloadKind::from_u16(8).name(), "sycl");
        assert_eq!(OffloadKind::from_stored(2, 3), OffloadKind::Other(3));
        assert_eq!(OffloadKind::from_stored(3, 4), OffloadKind::Hip);
        assert_eq!(OffloadKind::from_stored(1, 3), OffloadKind::Hip);
        assert_eq!(OffloadKind::from_name("hip"), OffloadKind::Hip);
        assert_eq!(OffloadKind::from_name("OpenMP"), OffloadKind::None);
        assert_eq!(OffloadKind::from_name("sycl"), OffloadKind::None);
        assert_eq!(OffloadKind::from_name("openmp,cuda"), OffloadKind::None);
        assert_eq!(OffloadKind::Other(9).name(), "none");
        assert_eq!(ImageKind::Object.name(), "o");
        assert_eq!(ImageKind::None.name(), "");
        assert_eq!(ImageKind::Bitcode.objdump_label(), "llvm ir");
    }

    #[test]
    fn image_kind_inference_follows_llvm_19() {
        assert_eq!(ImageKind::infer("x.o", b""), ImageKind::Object);
        assert_eq!(ImageKind::infer("x.bc", b"abcd"), ImageKind::Bitcode);
        assert_eq!(ImageKind::infer("x.cubin", b""), ImageKind::Cubin);
        assert_eq!(ImageKind::infer("x.fatbin", b""), ImageKind::Fatbinary);
        assert_eq!(ImageKind::infer("x.s", b""), ImageKind::Ptx);
        assert_eq!(ImageKind::infer("x.spv", b""), ImageKind::None);
        assert_eq!(ImageKind::infer("x.O", b""), ImageKind::None);
        assert_eq!(ImageKind::infer("dir.o/x", b""), ImageKind::None);
        assert_eq!(ImageKind::infer("bc.o", b"BC\xC0\xDE\x35\x14\x00\x00"), ImageKind::Bitcode);
        assert_eq!(ImageKind::infer("w.bin", b"\xDE\xC0\x17\x0B...."), ImageKind::Bitcode);
        assert_eq!(ImageKind::infer("short.bin", b"BC\xC0"), ImageKind::None);
    }

    #[test]
    fn paths_split_like_llvm() {
        assert_eq!(path_stem("dir/pkg.out"), "pkg");
        assert_eq!(path_stem("a.tar.gz"), "a.tar");
        assert_eq!(path_stem("noext"), "noext");
        assert_eq!(path_stem(".o"), "");
        assert_eq!(path_extension(".o"), "o");
        assert_eq!(path_stem("-"), "-");
        assert_eq!(path_extension("a/b.c/d"), "");
        assert_eq!(path_extension(".."), "");
        assert_eq!(path_stem("x/"), ".");
    }
}
