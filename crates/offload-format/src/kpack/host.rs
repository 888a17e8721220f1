//! The host side of a kpacked binary (`docs/formats/kpack.md`, "The host
//! binary"): the `.rocm_kpack_ref` marker, a msgpack map naming the binary
//! and where its archives are, and the `HIPK` wrapper records in
//! `.hipFatBinSegment` that point at it.
//!
//! [`Marker::parse`] and [`WrapperRecord::parse`] take bytes; [`HostBinary::read`]
//! finds both in an ELF x86-64 host binary through the crate's [`crate::elf`]
//! reader, following `R_X86_64_RELATIVE` relocations for the pointers (the
//! splitter zeroes the pointer words in the file of a shared library).

use crate::elf::{ElfFile, SHF_ALLOC, SHT_NOBITS, SHT_RELA};
use crate::msgpack::{self, Value};
use std::collections::BTreeMap;

/// The marker section's name.
pub const MARKER_SECTION: &str = ".rocm_kpack_ref";
/// The section of the wrapper records.
pub const WRAPPER_SECTION: &str = ".hipFatBinSegment";
/// The section that held the device code (`SHT_NOBITS` once split).
pub const FATBIN_SECTION: &str = ".hip_fatbin";
/// The marker section of a PE image (section names of images are cut to
/// eight bytes; docs/formats/kpack.md, "PE images").
pub const PE_MARKER_SECTION: &str = ".kpackrf";
/// The wrapper records' section of a PE image.
pub const PE_WRAPPER_SECTION: &str = ".hipFatB";
/// The device code section of a PE image.
pub const PE_FATBIN_SECTION: &str = ".hip_fat";
/// The runtime reads the marker inside a window of this many bytes.
pub const MARKER_WINDOW: usize = 64 * 1024;
/// The text that stands for a target ID in a search path.
pub const GFXARCH: &str = "@GFXARCH@";
/// Bytes of one wrapper record.
pub const RECORD_LEN: usize = 24;
/// `HIPF` as the little-endian u32 of a record with embedded device code.
pub const HIPF: u32 = 0x4849_5046;
/// `HIPK` as the little-endian u32 of a record whose device code is in an
/// archive.
pub const HIPK: u32 = 0x4B50_4948;

use crate::elf::{EM_X86_64, R_X86_64_RELATIVE};

/// A parsed `.rocm_kpack_ref` marker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker<'a> {
    /// `kernel_name`: the binary's name in the archives' TOC keys.
    pub kernel_name: &'a str,
    /// `kpack_search_paths`, the string items in order.
    pub search_paths: Vec<&'a str>,
    /// Items of `kpack_search_paths` that are not UTF-8 strings (the
    /// runtime drops them).
    pub dropped_paths: usize,
    /// Bytes the msgpack map takes.
    pub len: usize,
}

/// Why marker bytes are unusable; the loader answers all of these with
/// `KPACK_ERROR_INVALID_METADATA` (12).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MarkerError {
    /// Not valid msgpack inside the 64 KiB window.
    #[error("kpack marker: {0}")]
    Msgpack(#[source] msgpack::Error),
    /// msgpack of the wrong shape (what is wrong).
    #[error("kpack marker: {0}")]
    Shape(&'static str),
}

impl<'a> Marker<'a> {
    /// Parses the msgpack map at the start of `bytes` (looking at the first
    /// 64 KiB only, as the runtime does).
    ///
    /// ```
    /// use offload_format::kpack::Marker;
    ///
    /// // {"kpack_search_paths": ["../.kpack/x_@GFXARCH@.kpack"], "kernel_name": "lib/a.so"}
    /// let mut bytes = b"\x82\xb2kpack_search_paths\x91\xbb../.kpack/x_@GFXARCH@.kpack".to_vec();
    /// bytes.extend_from_slice(b"\xabkernel_name\xa8lib/a.so");
    /// let marker = Marker::parse(&bytes)?;
    /// assert_eq!(marker.kernel_name, "lib/a.so");
    /// assert_eq!(marker.search_paths, ["../.kpack/x_@GFXARCH@.kpack"]);
    /// assert_eq!(marker.lookup_key(1), "lib/a.so#1");
    /// # Ok::<(), offload_format::kpack::MarkerError>(())
    /// ```
    pub fn parse(bytes: &'a [u8]) -> Result<Marker<'a>, MarkerError> {
        let window = bytes.get(..MARKER_WINDOW).unwrap_or(bytes);
        let (value, len) = msgpack::read(window).map_err(MarkerError::Msgpack)?;
        if value.as_map().is_none() {
            return Err(MarkerError::Shape("not a map"));
        }
        let kernel_name = value
            .get("kernel_name")
            .ok_or(MarkerError::Shape("no kernel_name"))?
            .as_str()
            .ok_or(MarkerError::Shape("kernel_name is not a UTF-8 string"))?;
        let paths = value
            .get("kpack_search_paths")
            .ok_or(MarkerError::Shape("no kpack_search_paths"))?
            .as_array()
            .ok_or(MarkerError::Shape("kpack_search_paths is not an array"))?;
        if paths.is_empty() {
            return Err(MarkerError::Shape("kpack_search_paths is empty"));
        }
        let search_paths: Vec<&str> = paths.iter().filter_map(Value::as_str).collect();
        Ok(Marker { kernel_name, dropped_paths: paths.len() - search_paths.len(), search_paths, len })
    }

    /// The TOC key of the `co_index`-th fat binary: `kernel_name#co_index`.
    pub fn lookup_key(&self, co_index: u32) -> String {
        format!("{}#{co_index}", self.kernel_name)
    }
}

/// What a wrapper record's magic says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrapperKind {
    /// `HIPF`: the pointer leads to a fat binary in the file.
    Hipf,
    /// `HIPK`: the pointer leads to a kpack marker.
    Hipk,
    /// Any other magic.
    Other(u32),
}

/// One 24-byte `__CudaFatBinaryWrapper` record of `.hipFatBinSegment`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WrapperRecord {
    /// The magic (`HIPF` or `HIPK`).
    pub magic: u32,
    /// The version (1).
    pub version: u32,
    /// The pointer word as stored in the file (0 when a relocation sets it).
    pub binary: u64,
    /// The reserved word; for `HIPK`, its low 32 bits are the `co_index`.
    pub reserved1: u64,
}

impl WrapperRecord {
    /// Reads the record at the start of `bytes` (little-endian), or `None`
    /// when fewer than 24 bytes are given.
    pub fn parse(bytes: &[u8]) -> Option<WrapperRecord> {
        let b = bytes.get(..RECORD_LEN)?;
        let (u32_at, u64_at) = (|at: usize| crate::bytes::u32_le(b, at), |at: usize| crate::bytes::u64_le(b, at));
        Some(WrapperRecord { magic: u32_at(0)?, version: u32_at(4)?, binary: u64_at(8)?, reserved1: u64_at(16)? })
    }

    /// Whether the record is `HIPF`, `HIPK` or neither.
    pub fn kind(&self) -> WrapperKind {
        match self.magic {
            HIPF => WrapperKind::Hipf,
            HIPK => WrapperKind::Hipk,
            other => WrapperKind::Other(other),
        }
    }

    /// The index of this fat binary among the binary's fat binaries (the
    /// `#N` of the TOC key): the low 32 bits of `reserved1`.
    pub fn co_index(&self) -> u32 {
        self.reserved1 as u32
    }
}

/// Splits a `.hipFatBinSegment` into records; `None` when its size is not
/// a multiple of 24.
pub fn records(section: &[u8]) -> Option<Vec<WrapperRecord>> {
    if !section.len().is_multiple_of(RECORD_LEN) {
        return None;
    }
    section.chunks_exact(RECORD_LEN).map(WrapperRecord::parse).collect()
}

/// A section's placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionInfo {
    /// Index in the section table.
    pub index: usize,
    /// `sh_addr`.
    pub addr: u64,
    /// `sh_size`.
    pub size: u64,
    /// Whether it is `SHT_NOBITS` (no bytes in the file).
    pub nobits: bool,
}

/// One wrapper record of a host binary and where its pointer leads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostWrapper<'a> {
    /// The record.
    pub record: WrapperRecord,
    /// Its address.
    pub addr: u64,
    /// The pointer's value before the load bias: an `R_X86_64_RELATIVE`
    /// addend when one covers the word, else the word itself.
    pub pointer: u64,
    /// Whether a relocation gave the pointer.
    pub relocated: bool,
    /// For `HIPK`: the marker read where the pointer leads, or why it
    /// cannot be (`None` for other records, or when the pointer leads to
    /// no allocated section bytes in the file).
    pub marker: Option<Result<Marker<'a>, MarkerError>>,
}

/// The kpack view of a host binary (ELF shared library or executable, or
/// PE image).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostBinary<'a> {
    /// The section of the wrapper records: [`WRAPPER_SECTION`], or
    /// [`PE_WRAPPER_SECTION`] in a PE image.
    pub wrapper_section: &'static str,
    /// `.hip_fatbin`, when present.
    pub fatbin: Option<SectionInfo>,
    /// `.rocm_kpack_ref`, when present.
    pub marker_section: Option<SectionInfo>,
    /// The marker at the start of `.rocm_kpack_ref`, when present.
    pub marker: Option<Result<Marker<'a>, MarkerError>>,
    /// The records of `.hipFatBinSegment`, in order (empty without one).
    pub wrappers: Vec<HostWrapper<'a>>,
}

/// Why a host binary cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// Not a readable ELF file.
    #[error(transparent)]
    Elf(#[from] crate::elf::ElfError),
    /// Not 64-bit little-endian x86-64 (the only layout the splitter makes).
    #[error("kpack host binaries are read as 64-bit little-endian x86-64 ELF or PE32+ x86-64 only")]
    Unsupported,
    /// Not a readable PE image.
    #[error(transparent)]
    Pe(#[from] crate::coff::pe::PeError),
    /// `.hipFatBinSegment` is not a whole number of records (its size).
    #[error(".hipFatBinSegment is {0} bytes, not a whole number of 24-byte records")]
    RecordSize(u64),
}

impl<'a> HostBinary<'a> {
    /// Whether any wrapper record is `HIPK`.
    pub fn is_kpacked(&self) -> bool {
        self.wrappers.iter().any(|w| w.record.kind() == WrapperKind::Hipk)
    }

    /// Reads the kpack view of an ELF x86-64 host binary, or of a PE32+
    /// x86-64 image ([`HostBinary::read_pe`]).
    pub fn read(data: &'a [u8]) -> Result<HostBinary<'a>, HostError> {
        if crate::coff::pe::is_pe(data) {
            return Self::read_pe(data);
        }
        let file = ElfFile::parse(data)?;
        if !file.codec.is64 || file.codec.big || file.header.machine != EM_X86_64 {
            return Err(HostError::Unsupported);
        }
        let find = |name: &str| {
            (1..file.sections.len()).find(|&i| file.section_name(i).ok() == Some(name.as_bytes())).map(|index| {
                let sh = file.sections[index];
                SectionInfo { index, addr: sh.addr, size: sh.size, nobits: sh.sh_type == SHT_NOBITS }
            })
        };
        let marker_section = find(MARKER_SECTION);
        let marker = marker_section.and_then(|s| file.section_data(s.index).ok()).map(Marker::parse);
        let mut wrappers = Vec::new();
        if let Some(seg) = find(WRAPPER_SECTION) {
            let bytes = file.section_data(seg.index)?;
            let recs = records(bytes).ok_or(HostError::RecordSize(seg.size))?;
            let relative = relative_addends(&file, seg.addr, seg.size);
            for (i, record) in recs.into_iter().enumerate() {
                let addr = seg.addr.wrapping_add((i * RECORD_LEN) as u64);
                let word = addr.wrapping_add(8);
                let found = relative.get(&word).copied();
                let pointer = found.unwrap_or(record.binary);
                let marker =
                    (record.kind() == WrapperKind::Hipk).then(|| bytes_at(&file, pointer).map(Marker::parse)).flatten();
                wrappers.push(HostWrapper { record, addr, pointer, relocated: found.is_some(), marker });
            }
        }
        Ok(HostBinary {
            wrapper_section: WRAPPER_SECTION,
            fatbin: find(FATBIN_SECTION),
            marker_section,
            marker,
            wrappers,
        })
    }

    /// Reads the kpack view of a PE32+ x86-64 image (a HIP DLL or EXE):
    /// the records of `.hipFatB`, the marker section `.kpackrf`, and
    /// `.hip_fat` (docs/formats/kpack.md, "PE images"). A record's pointer
    /// is a virtual address at the image's preferred base (the base
    /// relocation table moves it when the image loads elsewhere), so the
    /// marker is read at `pointer - ImageBase`, from there to the end of
    /// that section's file bytes. Addresses in [`SectionInfo::addr`] and
    /// [`HostWrapper::addr`] are virtual addresses at the preferred base;
    /// [`SectionInfo::nobits`] says that fewer file bytes back the section
    /// than it has in memory (the device code was taken out).
    pub fn read_pe(data: &'a [u8]) -> Result<HostBinary<'a>, HostError> {
        use crate::coff::pe::PeImage;
        let pe = PeImage::parse(data)?;
        if !pe.is_64 || pe.machine != 0x8664 {
            return Err(HostError::Unsupported);
        }
        let base = pe.image_base;
        let find = |name: &str| {
            pe.sections.iter().position(|s| s.name() == name.as_bytes()).and_then(|index| {
                let s = pe.sections.get(index)?;
                Some(SectionInfo {
                    index,
                    addr: base.wrapping_add(u64::from(s.virtual_address)),
                    size: u64::from(s.virtual_size.max(s.file_len())),
                    nobits: s.file_len() < s.virtual_size,
                })
            })
        };
        let marker_section = find(PE_MARKER_SECTION);
        let marker = pe
            .section(PE_MARKER_SECTION.as_bytes())
            .map(|s| pe.section_data(s))
            .filter(|b| !b.is_empty())
            .map(Marker::parse);
        let mut wrappers = Vec::new();
        if let Some(seg) = pe.section(PE_WRAPPER_SECTION.as_bytes()) {
            let bytes = pe.section_data(seg);
            let used = bytes.get(..seg.virtual_size as usize).unwrap_or(bytes);
            // Raw data is padded to the file alignment: the records are the
            // section's virtual size, or the whole records of its bytes.
            let whole = used.len() - used.len() % RECORD_LEN;
            let recs = records(used.get(..whole).unwrap_or(&[])).ok_or(HostError::RecordSize(used.len() as u64))?;
            let relocs = pe.base_relocations()?;
            for (i, record) in recs.into_iter().enumerate() {
                let rva = seg.virtual_address.wrapping_add((i * RECORD_LEN) as u32);
                let relocated = relocs
                    .iter()
                    .any(|&(r, kind)| r == rva.wrapping_add(8) && kind == crate::coff::pe::REL_BASED_DIR64);
                let marker = (record.kind() == WrapperKind::Hipk)
                    .then(|| {
                        let target = u32::try_from(record.binary.checked_sub(base)?).ok()?;
                        let s = pe.section_at_rva(target)?;
                        let at = pe.rva_to_offset(target)?;
                        let end = s.raw_offset as usize + s.file_len() as usize;
                        data.get(at..end).map(Marker::parse)
                    })
                    .flatten();
                wrappers.push(HostWrapper {
                    record,
                    addr: base.wrapping_add(u64::from(rva)),
                    pointer: record.binary,
                    relocated,
                    marker,
                });
            }
        }
        Ok(HostBinary {
            wrapper_section: PE_WRAPPER_SECTION,
            fatbin: find(PE_FATBIN_SECTION),
            marker_section,
            marker,
            wrappers,
        })
    }
}

/// The `R_X86_64_RELATIVE` relocations of every `SHT_RELA` section that
/// patch a word in `[start, start + size)`: address to addend (a later one
/// wins, as the dynamic loader applies them in order).
fn relative_addends(file: &ElfFile<'_>, start: u64, size: u64) -> BTreeMap<u64, u64> {
    let mut out = BTreeMap::new();
    for (i, sh) in file.sections.iter().enumerate() {
        if sh.sh_type != SHT_RELA {
            continue;
        }
        let Ok(bytes) = file.section_data(i) else { continue };
        for rel in bytes.chunks_exact(24) {
            let word = |at: usize| crate::bytes::u64_le(rel, at);
            // Each entry is 24 bytes: the three words are inside it.
            let (Some(at), Some(info), Some(addend)) = (word(0), word(8), word(16)) else { continue };
            if info as u32 == R_X86_64_RELATIVE && at.wrapping_sub(start) < size {
                out.insert(at, addend);
            }
        }
    }
    out
}

/// The file bytes of the allocated section that holds address `addr`, from
/// `addr` to the section's end.
fn bytes_at<'a>(file: &ElfFile<'a>, addr: u64) -> Option<&'a [u8]> {
    let (index, sh) = file.sections.iter().enumerate().find(|(_, sh)| {
        sh.flags & SHF_ALLOC != 0 && sh.sh_type != SHT_NOBITS && addr.wrapping_sub(sh.addr) < sh.size
    })?;
    let data = file.section_data(index).ok()?;
    data.get(usize::try_from(addr.wrapping_sub(sh.addr)).ok()?..)
}
