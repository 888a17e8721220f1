//! The file map of a HIP host binary (ELF x86-64): where every fat binary
//! lies in `.hip_fatbin` and which wrapper records of `.hipFatBinSegment`
//! point at it, with how each pointer is stored. `prune` rewrites from this
//! map; `list`, `verify` and `check` can share it.
//!
//! Facts from `docs/formats/host-references.md` §1: one 24-byte record per
//! translation unit (`HIPF`, version 1, pointer, reserved word); the HIP
//! runtime reads only the pointer and the bundle header.

pub mod fatbin;
pub mod openmp;
pub mod pointers;
use offload_format::elf::segments;

pub use fatbin::{FatBinary, UnitKind, skip_zeros};
pub use pointers::{Storage, WordEdit};

use offload_format::elf::{EM_X86_64, ET_REL};
use offload_format::elf::{ElfError, ElfFile, SHT_NOBITS};

pub use offload_format::kpack::host::{HIPF, HIPK};
/// Bytes of one wrapper record.
pub const RECORD_SIZE: u64 = 24;

/// Why a file has no usable map.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// A malformed ELF file.
    #[error(transparent)]
    Elf(ElfError),
    /// Not a 64-bit little-endian x86-64 ELF file (what it is).
    #[error("only 64-bit little-endian x86-64 ELF files are supported (this is {0})")]
    Unsupported(String),
    /// No `.hip_fatbin` section.
    #[error("no .hip_fatbin section: not a HIP host binary (or its section headers were stripped)")]
    NoFatbin,
    /// `.hip_fatbin` occupies no bytes in the file.
    #[error(".hip_fatbin has no contents in the file (SHT_NOBITS): its device code was moved out, e.g. by kpack")]
    FatbinNotInFile,
    /// More than one `.hip_fatbin` section (how many).
    #[error("{0} sections are named .hip_fatbin; which one the wrappers mean is unclear")]
    SeveralFatbins(usize),
    /// The section and program headers disagree about `.hip_fatbin`.
    #[error(
        ".hip_fatbin (address {addr:#x}, {size} bytes at offset {offset:#x}) is not where a PT_LOAD segment maps it: the section headers disagree with the program headers"
    )]
    NotMapped {
        /// The section's address.
        addr: u64,
        /// Its file offset.
        offset: u64,
        /// Its size in bytes.
        size: u64,
    },
    /// A fat binary in `.hip_fatbin` that cannot be read.
    #[error("fat binary at offset {offset:#x}: {reason}")]
    BadFatBinary {
        /// Its file offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A CUDA fat binary in `.nv_fatbin` that cannot be read.
    #[error("fat binary at offset {offset:#x}: {source}")]
    CudaFatBinary {
        /// Its file offset.
        offset: u64,
        /// The fat binary reader's error.
        #[source]
        source: offload_format::cuda::CudaError,
    },
    /// A bundle in `.hip_fatbin` whose header cannot be read.
    #[error("fat binary at offset {offset:#x}: {source}")]
    BundleHeader {
        /// Its file offset.
        offset: u64,
        /// The bundle reader's error.
        #[source]
        source: offload_format::bundle::BundleError,
    },
    /// A compressed bundle in `.hip_fatbin` whose header cannot be read.
    #[error("fat binary at offset {offset:#x}: {source}")]
    CompressedHeader {
        /// Its file offset.
        offset: u64,
        /// The compressed-bundle reader's error.
        #[source]
        source: offload_format::bundle::compressed::CompressedError,
    },
    /// `.hipFatBinSegment` is not a whole number of records (its size).
    #[error(".hipFatBinSegment is {0} bytes, not a whole number of 24-byte wrapper records")]
    RecordSize(u64),
    /// A record whose device code lives in a kpack archive.
    #[error("wrapper record {record} has magic HIPK: its device code lives in a kpack archive, outside this file")]
    Kpack {
        /// Index of the wrapper record.
        record: usize,
    },
    /// A record with an unknown magic.
    #[error("wrapper record {record}: magic {magic:#010x} is not {expected}")]
    Magic {
        /// Index of the wrapper record.
        record: usize,
        /// The magic the section's records carry (`HIPF`, or CUDA's
        /// `0x466243b1`).
        expected: &'static str,
        /// The magic stored.
        magic: u32,
    },
    /// A record with an unknown version.
    #[error("wrapper record {record}: version {version} (only version 1 is known)")]
    Version {
        /// Index of the wrapper record.
        record: usize,
        /// The version stored.
        version: u32,
    },
    /// A record whose pointer cannot be resolved.
    #[error("wrapper record {record}: {reason}")]
    Pointer {
        /// Index of the wrapper record.
        record: usize,
        /// Why.
        reason: String,
    },
}

/// One wrapper record of `.hipFatBinSegment`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrapper {
    /// File offset of the record.
    pub offset: u64,
    /// Address of the record (in a relocatable object: its offset in the
    /// section).
    pub addr: u64,
    /// How the pointer word gets its value.
    pub storage: Storage,
    /// The address the pointer holds at run time, before the load bias.
    pub pointer: u64,
    /// What the pointer leads to.
    pub target: Target,
}

/// Where a wrapper's pointer leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// The start of `units[i]`.
    Unit(usize),
    /// Inside `.hip_fatbin` (at this section offset) but not at the start
    /// of a fat binary: the runtime would read garbage.
    InsideFatbin(u64),
    /// Outside `.hip_fatbin`.
    Elsewhere,
}

/// Which fat binary section a map describes: HIP's `.hip_fatbin` with
/// `HIPF` wrappers in `.hipFatBinSegment`, or CUDA's `.nv_fatbin` with
/// `__fatBinC_Wrapper_t` records in `.nvFatBinSegment` (the same 24-byte
/// shape: magic, version 1, pointer, one more word; docs/formats/host-references.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FatbinSection {
    /// `.hip_fatbin`, clang offload bundles or compressed bundles.
    Hip,
    /// `.nv_fatbin`, NVIDIA fat binaries (linked files only).
    Cuda,
}

impl FatbinSection {
    /// The section holding the fat binaries.
    pub fn name(self) -> &'static str {
        match self {
            FatbinSection::Hip => ".hip_fatbin",
            FatbinSection::Cuda => ".nv_fatbin",
        }
    }
    /// The section holding the wrapper records.
    pub fn wrapper_section(self) -> &'static str {
        match self {
            FatbinSection::Hip => ".hipFatBinSegment",
            FatbinSection::Cuda => offload_format::cuda::wrapper::WRAPPER_SECTION,
        }
    }
    fn magic_name(self) -> &'static str {
        match self {
            FatbinSection::Hip => "HIPF",
            FatbinSection::Cuda => "0x466243b1",
        }
    }
    fn magic(self) -> u32 {
        match self {
            FatbinSection::Hip => HIPF,
            FatbinSection::Cuda => offload_format::cuda::wrapper::WRAPPER_MAGIC,
        }
    }
}

/// The map of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMap {
    /// Which fat binary section this is.
    pub section: FatbinSection,
    /// File offset of `.hip_fatbin`.
    pub fatbin_offset: u64,
    /// Size of `.hip_fatbin` in bytes.
    pub fatbin_size: u64,
    /// Address of `.hip_fatbin` (0 in relocatable objects).
    pub fatbin_addr: u64,
    /// A relocatable object (`ET_REL`), not a linked binary.
    pub relocatable: bool,
    /// The fat binaries in `.hip_fatbin`, in section order.
    pub units: Vec<FatBinary>,
    /// The records of `.hipFatBinSegment`, in section order.
    pub wrappers: Vec<Wrapper>,
}

impl FileMap {
    /// Indices of units no wrapper points at.
    pub fn unreferenced(&self) -> Vec<usize> {
        (0..self.units.len()).filter(|&u| !self.wrappers.iter().any(|w| w.target == Target::Unit(u))).collect()
    }

    /// Indices of wrappers that lead to no fat binary.
    pub fn dangling(&self) -> Vec<usize> {
        (0..self.wrappers.len()).filter(|&w| !matches!(self.wrappers[w].target, Target::Unit(_))).collect()
    }

    /// Builds the map of an ELF x86-64 HIP host binary.
    pub fn read(data: &[u8]) -> Result<FileMap, LayoutError> {
        FileMap::read_section(data, FatbinSection::Hip)
    }

    /// Builds the map of a linked ELF x86-64 CUDA host binary (executable
    /// or shared library): the fat binaries of `.nv_fatbin` and the
    /// `.nvFatBinSegment` records pointing at them.
    pub fn read_cuda(data: &[u8]) -> Result<FileMap, LayoutError> {
        FileMap::read_section(data, FatbinSection::Cuda)
    }

    fn read_section(data: &[u8], section: FatbinSection) -> Result<FileMap, LayoutError> {
        let file = ElfFile::parse(data).map_err(LayoutError::Elf)?;
        if !file.codec.is64 || file.codec.big || file.header.machine != EM_X86_64 {
            let what = format!(
                "{}-bit {}-endian, machine {}",
                if file.codec.is64 { 64 } else { 32 },
                if file.codec.big { "big" } else { "little" },
                file.header.machine
            );
            return Err(LayoutError::Unsupported(what));
        }
        let find = |wanted: &[u8]| (1..file.sections.len()).find(|&i| file.section_name(i).ok() == Some(wanted));
        let fat_name = section.name().as_bytes();
        let fat_index = find(fat_name).ok_or(LayoutError::NoFatbin)?;
        let named = (1..file.sections.len()).filter(|&i| file.section_name(i).ok() == Some(fat_name)).count();
        if named > 1 {
            return Err(LayoutError::SeveralFatbins(named));
        }
        let fat = file.sections[fat_index];
        if fat.sh_type == SHT_NOBITS {
            return Err(LayoutError::FatbinNotInFile);
        }
        let fat_data = file.section_data(fat_index).map_err(LayoutError::Elf)?;
        let relocatable = file.header.e_type == ET_REL;
        if relocatable && section == FatbinSection::Cuda {
            return Err(LayoutError::Unsupported("a relocatable CUDA object (only linked files are mapped)".into()));
        }
        // The runtime reaches the bytes through the segments; a rewrite by
        // section offsets is only right where both agree.
        if !relocatable && !segments::maps(data, fat.addr, fat.offset, fat.size) {
            return Err(LayoutError::NotMapped { addr: fat.addr, offset: fat.offset, size: fat.size });
        }
        let units = match section {
            FatbinSection::Hip => fatbin::walk(fat_data, fat.offset)?,
            FatbinSection::Cuda => fatbin::walk_cuda(fat_data, fat.offset)?,
        };
        let mut map = FileMap {
            section,
            fatbin_offset: fat.offset,
            fatbin_size: fat.size,
            fatbin_addr: fat.addr,
            relocatable,
            units,
            wrappers: Vec::new(),
        };
        let Some(seg_index) = find(section.wrapper_section().as_bytes()) else { return Ok(map) };
        let seg = file.sections[seg_index];
        let seg_data = file.section_data(seg_index).map_err(LayoutError::Elf)?;
        if seg.size % RECORD_SIZE != 0 {
            return Err(LayoutError::RecordSize(seg.size));
        }
        let (seg_addr, seg_size) = (seg.addr, seg.size);
        let is_pointer_word =
            move |at: u64| at.checked_sub(seg_addr).is_some_and(|rel| rel < seg_size && rel % RECORD_SIZE == 8);
        let relocs = pointers::relocations(&file, relocatable, seg_index, &is_pointer_word)?;
        for (record, raw) in seg_data.chunks_exact(RECORD_SIZE as usize).enumerate() {
            // Each record is RECORD_SIZE bytes: the words read are inside it.
            let word = |i: usize| offload_format::bytes::u64_le(raw, i).unwrap_or(0);
            let magic = (word(0) & 0xffff_ffff) as u32;
            let version = (word(0) >> 32) as u32;
            if magic == HIPK && section == FatbinSection::Hip {
                return Err(LayoutError::Kpack { record });
            }
            if magic != section.magic() {
                return Err(LayoutError::Magic { record, magic, expected: section.magic_name() });
            }
            if version != 1 {
                return Err(LayoutError::Version { record, version });
            }
            // Addresses come from the file: wrapping, never overflowing.
            let addr = seg_addr.wrapping_add(record as u64 * RECORD_SIZE);
            let (storage, pointer) = pointers::resolve(&file, relocs.get(&addr.wrapping_add(8)), word(8), record)?;
            let target = map.target_of(&storage, pointer, fat_index, relocatable);
            map.wrappers.push(Wrapper {
                offset: seg.offset + record as u64 * RECORD_SIZE,
                addr,
                storage,
                pointer,
                target,
            });
        }
        Ok(map)
    }

    /// The word edits that make wrapper record `i` lead to `new[i]` (one
    /// address per record, in record order), whichever way its pointer is
    /// stored: the one place that writes pointers, next to the one that
    /// reads them. Applying them to `data` gives a file whose map has
    /// these pointers.
    pub fn pointer_edits(&self, data: &[u8], new: &[u64]) -> Result<Vec<WordEdit>, LayoutError> {
        pointers::edits(data, self, new)
    }

    fn target_of(&self, storage: &Storage, pointer: u64, fat_index: usize, relocatable: bool) -> Target {
        // In an object, only a symbol of .hip_fatbin leads into it, and
        // its value is an offset in the section.
        let in_section = if relocatable {
            match storage {
                Storage::Symbolic { section, .. } if usize::from(*section) == fat_index => Some(pointer),
                _ => None,
            }
        } else {
            pointer.checked_sub(self.fatbin_addr).filter(|&rel| rel < self.fatbin_size)
        };
        let Some(rel) = in_section else { return Target::Elsewhere };
        match self.units.iter().position(|u| u.section_offset == rel) {
            Some(u) => Target::Unit(u),
            None => Target::InsideFatbin(rel),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
