//! The registration records in `.nvFatBinSegment` (docs/formats/cuda-fatbin.md §2): 24 bytes each
//! on 64-bit hosts, one per fat binary the host code registers with the
//! CUDA runtime. Layout from NVIDIA's `fatbinary_section.h`:
//!
//! ```text
//! 0  u32 magic 0x466243B1    4  u32 version (1: one translation unit; 2: device-linked)
//! 8  u64 fat binary address  16 u64 file name (v1) / pre-linked module table (v2)
//! ```
//!
//! In relocatable objects the address is 0 and a relocation supplies it;
//! in executables and shared libraries it is the link-time address.

use crate::bytes::{u32_le, u64_le};

/// Magic of a registration record (`b1 43 62 46` on disk).
pub const WRAPPER_MAGIC: u32 = 0x4662_43B1;
/// Size of one record on a 64-bit host.
pub const WRAPPER_SIZE: usize = 24;
/// The section holding the records (ELF).
pub const WRAPPER_SECTION: &str = ".nvFatBinSegment";

/// One registration record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wrapper {
    /// Offset of the record in its section.
    pub offset: usize,
    /// The record's magic as stored.
    pub magic: u32,
    /// The record's version as stored.
    pub version: u32,
    /// The fat binary's address as stored (0 where a relocation supplies
    /// it).
    pub address: u64,
}

impl Wrapper {
    /// Whether the magic and version are ones the runtime accepts.
    pub fn is_valid(&self) -> bool {
        self.magic == WRAPPER_MAGIC && matches!(self.version, 1 | 2)
    }
}

/// The records of a `.nvFatBinSegment` section; trailing bytes shorter than
/// a record are ignored (the count is the section's size, nothing else).
pub fn wrappers(section: &[u8]) -> impl Iterator<Item = Wrapper> + '_ {
    section.chunks_exact(WRAPPER_SIZE).enumerate().filter_map(|(i, r)| {
        Some(Wrapper { offset: i * WRAPPER_SIZE, magic: u32_le(r, 0)?, version: u32_le(r, 4)?, address: u64_le(r, 8)? })
    })
}
