//! NVIDIA CUDA fat binaries: the `.nv_fatbin` / `__nv_relfatbin` sections
//! of CUDA objects, executables and libraries, and standalone `.fatbin`
//! files (`docs/formats/cuda-fatbin.md`; facts checked there
//! against `cuobjdump` 13.5).
//!
//! ```text
//! fat binary  = header (16 bytes: magic 0xBA55ED50, version, header size, fat size)
//!               entry*                       (fat size bytes, back to back)
//! entry       = header (64 bytes + extension: identifier, options, concat table)
//!               payload (payload size bytes: cubin, PTX text, NVVM, or their
//!                        LZ4 block / zstd frame)
//! ```
//!
//! The reader is zero-copy over `&[u8]`: [`fat_binaries`] walks a region
//! holding several fat binaries (skipping zero padding), [`FatBinary::entries`]
//! walks one fat binary's entries. Errors say what is wrong and at which
//! offset; iterators stop after the first error, having yielded everything
//! before it (the lenient use `verify` makes). Nothing is allocated from a
//! header field: decompression grows its output with the data it actually
//! produces (the `decode` module).

mod cubin;
mod decode;
mod fatbin;
pub mod nvinfo;
pub mod ptx;
pub mod wrapper;
pub mod write;

pub use cubin::{Cubin, cubin_extent, is_cubin};
pub use decode::{code_object_bytes, decompress, ptx_text};
pub use fatbin::{Child, Entry, EntryHeader, FatBinary, fat_binaries};

use std::fmt;

/// Fat binary magic (`50 ed 55 ba` on disk).
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// The bytes a fat binary starts with.
pub const FATBIN_MAGIC_BYTES: [u8; 4] = FATBIN_MAGIC.to_le_bytes();
/// Size of the fat binary header.
pub const FATBIN_HEADER_SIZE: usize = 16;
/// Size of an entry header without its extension, and of a concatenated
/// entry's child header.
pub const ENTRY_HEADER_SIZE: usize = 64;
/// `e_machine` of a cubin (EM_CUDA).
pub use crate::elf::EM_CUDA;

/// Entry flag bits (docs/formats/cuda-fatbin.md §4, "Flags").
pub mod flags {
    /// Built for a 64-bit host.
    pub const HOST_64BIT: u64 = 0x1;
    /// Built with debug information.
    pub const DEBUG: u64 = 0x2;
    /// Built for a Linux host.
    pub const HOST_LINUX: u64 = 0x10;
    /// Built for a macOS host.
    pub const HOST_MAC: u64 = 0x20;
    /// Built for a Windows host.
    pub const HOST_WINDOWS: u64 = 0x40;
    /// cuobjdump calls these "compressed" but no toolchain writes them.
    pub const COMPRESSED_UNKNOWN: u64 = 0x1000 | 0x4000;
    /// The payload is one raw LZ4 block.
    pub const LZ4: u64 = 0x2000;
    /// The payload is one zstd frame.
    pub const ZSTD: u64 = 0x8000;
    /// The payload is obfuscated.
    pub const OBFUSCATED: u64 = 0x10000;
    /// Architecture-specific code (`sm_90a`).
    pub const ARCH_A: u64 = 0x10_0000;
    /// Family-specific code (`sm_100f`).
    pub const ARCH_F: u64 = 0x20_0000;
    /// Set on sm_100+ cubins; the driver prefers a tied cubin without it.
    pub const SM100_ELF: u64 = 0x100_0000;
}

/// What an entry holds (the `kind` field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EntryKind {
    /// PTX text (kind 1).
    Ptx,
    /// A cubin (kind 2).
    Elf,
    /// NVVM IR for link-time optimisation (`code=lto_XY`).
    Nvvm,
    /// Several cubins compressed as one stream (`nvcc --concat`).
    Concat,
    /// A kind value with no known meaning.
    Other(u16),
}

impl EntryKind {
    /// The kind for a stored value.
    pub fn from_u16(v: u16) -> Self {
        match v {
            1 => EntryKind::Ptx,
            2 => EntryKind::Elf,
            8 => EntryKind::Nvvm,
            0x100 => EntryKind::Concat,
            n => EntryKind::Other(n),
        }
    }

    /// The word `cuobjdump` uses (`Fatbin elf code:`), also used in
    /// `offload`'s IDs and its JSON `image_kind`.
    pub fn name(self) -> String {
        match self {
            EntryKind::Ptx => "ptx".into(),
            EntryKind::Elf => "elf".into(),
            EntryKind::Nvvm => "nvvm".into(),
            EntryKind::Concat => "concat".into(),
            EntryKind::Other(n) => format!("kind{n:#x}"),
        }
    }
}

/// Architecture-specific (`a`) or family-specific (`f`) code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Suffix {
    /// Plain code (`sm_90`).
    None,
    /// Runs only on exactly this compute capability.
    A,
    /// Runs on this major version with a minor at least this one.
    F,
}

/// An SM architecture: the number is `10 * major + minor` (`sm_90` = 90,
/// `sm_121` = 121).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Arch {
    /// `10 * major + minor`.
    pub number: u32,
    /// The `a`/`f` suffix.
    pub suffix: Suffix,
}

impl Arch {
    /// The architecture an entry header names: its `arch` field with the
    /// suffix from its flags (`a` wins when both bits are set, as in
    /// `cuobjdump`).
    pub fn from_header(arch: u32, flag_bits: u64) -> Arch {
        let suffix = if flag_bits & flags::ARCH_A != 0 {
            Suffix::A
        } else if flag_bits & flags::ARCH_F != 0 {
            Suffix::F
        } else {
            Suffix::None
        };
        Arch { number: arch, suffix }
    }

    /// The major compute capability (9 for `sm_90`).
    pub fn major(self) -> u32 {
        self.number / 10
    }

    /// The minor compute capability (0 for `sm_90`).
    pub fn minor(self) -> u32 {
        self.number % 10
    }

    /// Parses `sm_90a`, `compute_100f`, `lto_80`, `90`, or `9.0`.
    pub fn parse(s: &str) -> Option<Arch> {
        let rest = ["sm_", "compute_", "lto_"].iter().find_map(|p| s.strip_prefix(p)).unwrap_or(s);
        let (digits, suffix) = match rest.as_bytes().last()? {
            b'a' => (&rest[..rest.len() - 1], Suffix::A),
            b'f' => (&rest[..rest.len() - 1], Suffix::F),
            _ => (rest, Suffix::None),
        };
        let number = match digits.split_once('.') {
            Some((major, minor)) if minor.len() == 1 => {
                major.parse::<u32>().ok()?.checked_mul(10)?.checked_add(minor.parse::<u32>().ok()?)?
            }
            Some(_) => return None,
            None if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => digits.parse().ok()?,
            None => return None,
        };
        (number >= 10).then_some(Arch { number, suffix })
    }
}

impl fmt::Display for Arch {
    /// `sm_90a`: the form `cuobjdump` prints for every entry kind.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let suffix = match self.suffix {
            Suffix::None => "",
            Suffix::A => "a",
            Suffix::F => "f",
        };
        write!(f, "sm_{}{suffix}", self.number)
    }
}

/// How an entry's payload is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Codec {
    /// One raw LZ4 block (flag 0x2000).
    Lz4,
    /// One zstd frame (flag 0x8000).
    Zstd,
    /// NVVM/PTX obfuscated with a key (flag 0x10000): listed, not decoded.
    Obfuscated,
    /// A compression flag (0x1000, 0x4000) no known toolchain writes.
    Unknown(u64),
}

impl Codec {
    /// The codec an entry's flags name; `None` when stored as is.
    pub fn from_flags(bits: u64) -> Option<Codec> {
        if bits & flags::OBFUSCATED != 0 {
            Some(Codec::Obfuscated)
        } else if bits & flags::ZSTD != 0 {
            Some(Codec::Zstd)
        } else if bits & flags::LZ4 != 0 {
            Some(Codec::Lz4)
        } else if bits & flags::COMPRESSED_UNKNOWN != 0 {
            Some(Codec::Unknown(bits & flags::COMPRESSED_UNKNOWN))
        } else {
            None
        }
    }
}

/// What is wrong with a fat binary, an entry or a compressed stream.
/// Offsets are from the start of the slice given to the reader.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CudaError {
    /// The fat binary header is cut short.
    #[error("fat binary at {at:#x}: {needed} bytes of header needed, {available} left")]
    ShortHeader {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// Bytes the header needs.
        needed: usize,
        /// Bytes available there.
        available: usize,
    },
    /// No fat binary magic.
    #[error("fat binary at {at:#x}: bad magic {found:#010x} (expected 0xba55ed50)")]
    BadMagic {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// The magic found.
        found: u32,
    },
    /// A header size below 16 bytes.
    #[error("fat binary at {at:#x}: header size {size} is smaller than 16")]
    BadHeaderSize {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// The size stored, in bytes.
        size: u16,
    },
    /// The entries run past the end of the data.
    #[error("fat binary at {at:#x}: its {declared} bytes of entries reach past the {available} bytes there")]
    FatSizeBeyondEnd {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// The size declared, in bytes.
        declared: u64,
        /// Bytes available there.
        available: usize,
    },
    /// An entry header is cut short.
    #[error("entry at {at:#x}: only {available} bytes left for its 64-byte header")]
    ShortEntry {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// Bytes available there.
        available: usize,
    },
    /// An entry header size below 64 or past the fat binary.
    #[error("entry at {at:#x}: header size {size} is smaller than 64 or reaches past the fat binary")]
    BadEntryHeaderSize {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// The size stored, in bytes.
        size: u32,
    },
    /// An entry payload runs past the fat binary.
    #[error("entry at {at:#x}: its {size}-byte payload reaches past the end of the fat binary")]
    PayloadBeyondEnd {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// The size stored, in bytes.
        size: u64,
    },
    /// A compressed size larger than the payload holding it.
    #[error("entry at {at:#x}: compressed size {compressed} exceeds the payload size {payload}")]
    CompressedBeyondPayload {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// The compressed size stored, in bytes.
        compressed: u32,
        /// The payload size stored, in bytes.
        payload: u64,
    },
    /// An entry string lies outside its header.
    #[error("entry at {at:#x}: {what} lies outside the entry header")]
    StringOutsideHeader {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// Which string (`identifier`, `options`).
        what: &'static str,
    },
    /// A malformed table of a concatenated entry.
    #[error("concatenated entry at {at:#x}: {problem}")]
    BadConcat {
        /// Offset of the fat binary or entry concerned.
        at: usize,
        /// What is wrong.
        problem: String,
    },
    /// A compressed stream that does not decode.
    #[error("{codec:?} stream: {problem}")]
    Decompress {
        /// The codec.
        codec: Codec,
        /// What is wrong.
        problem: String,
    },
    /// A stream decodes to another size than declared.
    #[error("decompressed to {actual} bytes, the header says {declared}")]
    SizeMismatch {
        /// The size declared, in bytes.
        declared: u64,
        /// The bytes produced.
        actual: u64,
    },
    /// An obfuscated payload, which is not decoded.
    #[error("the payload is obfuscated (flag 0x10000) and is not decoded")]
    Obfuscated,
    /// A compression flag with no known codec (the flag bits).
    #[error("compression flag {0:#x} names a codec no toolchain is known to write")]
    UnknownCodec(u64),
    /// A concatenated entry's child lies outside the decoded data.
    #[error("child image {index} ({start:#x}+{len:#x}) lies outside the {available} decompressed bytes")]
    ChildOutside {
        /// The child's position, from 0.
        index: usize,
        /// Its offset in the decompressed data.
        start: u64,
        /// Its length in bytes.
        len: u64,
        /// Bytes available there.
        available: usize,
    },
}

#[cfg(test)]
mod tests;
