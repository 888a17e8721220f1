//! The file map of an OpenMP offloading host binary (clang's new driver,
//! ELF x86-64, linked): the OffloadBinaries of `.llvm.offloading` and the
//! registration tables that point at them (docs/formats/host-references.md §2).
//!
//! clang's offload wrapper emits, for the whole link:
//!
//! * one OffloadBinary per device image, placed back to back in
//!   `.llvm.offloading` (`SHT_LLVM_OFFLOADING`, kept `SHF_ALLOC`);
//! * `.omp_offloading.device_images`: an array of
//!   `__tgt_device_image {ImageStart, ImageEnd, EntriesBegin, EntriesEnd}`
//!   (four pointers, 32 bytes), `ImageStart`/`ImageEnd` bracketing the
//!   image inside its OffloadBinary (clang 19: `image_offset` bytes in);
//! * `.omp_offloading.descriptor`:
//!   `__tgt_bin_desc {i32 NumDeviceImages; DeviceImages; HostEntriesBegin;
//!   HostEntriesEnd}`, handed to `__tgt_register_lib`.
//!
//! Symbols are local and often stripped, so the map is found from the
//! pointers themselves: a table record is a pointer word whose value is an
//! image's start followed by one whose value is that image's end; a
//! descriptor is a pointer word whose value is a record's address (its
//! count 8 bytes before). Each pointer word is resolved through the same
//! storages as HIP wrappers ([`Storage`]: RELA, RELR or absolute).

use super::pointers::{self, Found};
use super::{LayoutError, Storage, segments, skip_zeros};
use offload_format::bytes::u64_le;
use offload_format::elf::{EM_X86_64, ET_EXEC, ET_REL, SHF_EXECINSTR};
use offload_format::elf::{ElfFile, SHF_ALLOC, SHT_NOBITS, SHT_PROGBITS};
use offload_format::offload_binary::{Binaries, ImageKind, OffloadKind, SHT_LLVM_OFFLOADING};
use std::collections::{BTreeMap, HashMap};

/// Bytes of one `__tgt_device_image`.
pub const IMAGE_RECORD_SIZE: u64 = 32;

/// Why a file has no usable OpenMP map.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenMpError {
    /// A malformed ELF file.
    #[error(transparent)]
    Elf(offload_format::elf::ElfError),
    /// Not a 64-bit little-endian x86-64 ELF file.
    #[error("only 64-bit little-endian x86-64 ELF files are supported")]
    Unsupported,
    /// A relocatable object: its images are not registered yet.
    #[error(
        "a relocatable object: its .llvm.offloading is read by clang-linker-wrapper, which accepts no gaps; prune the linked program or library instead"
    )]
    Relocatable,
    /// No allocated `.llvm.offloading` section.
    #[error("no allocated .llvm.offloading section: not a linked OpenMP offloading program or library")]
    NoOffloading,
    /// More than one allocated `SHT_LLVM_OFFLOADING` section.
    #[error("{0} allocated SHT_LLVM_OFFLOADING sections; which one the tables mean is unclear")]
    SeveralSections(usize),
    /// The section's bytes are not where a PT_LOAD maps them.
    #[error(".llvm.offloading (address {addr:#x}, offset {offset:#x}) is not where a PT_LOAD segment maps it")]
    NotMapped {
        /// The section's address.
        addr: u64,
        /// Its file offset.
        offset: u64,
    },
    /// Bytes of `.llvm.offloading` that are neither padding nor a
    /// version 1 OffloadBinary.
    #[error(".llvm.offloading at file offset {offset:#x}: {reason}")]
    BadImage {
        /// File offset of the bytes.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A table or descriptor word that cannot be read or resolved.
    #[error("pointer word at address {addr:#x}: {reason}")]
    Pointer {
        /// The word's address.
        addr: u64,
        /// Why.
        reason: String,
    },
    /// The relocation sections cannot be read (why).
    #[error("relocations: {0}")]
    Relocations(#[source] LayoutError),
    /// A registration table this reader does not fully understand.
    #[error("image table at address {addr:#x}: {reason}")]
    Table {
        /// The table's address.
        addr: u64,
        /// What is wrong.
        reason: String,
    },
}

/// One OffloadBinary of `.llvm.offloading`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// File offset of the OffloadBinary.
    pub offset: u64,
    /// Its address.
    pub addr: u64,
    /// Its size in bytes (the header's `size`, padding included).
    pub size: u64,
    /// Address of the inner image (`ImageStart` of its record).
    pub start: u64,
    /// Address just past the inner image (`ImageEnd`).
    pub end: u64,
    /// The `triple` string.
    pub triple: String,
    /// The `arch` string (empty for host-offload images).
    pub arch: String,
    /// The offloading model.
    pub offload_kind: OffloadKind,
    /// What kind of file the inner image is.
    pub image_kind: ImageKind,
}

/// A pointer-sized word of a table or descriptor and how it gets its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// The word's address.
    pub addr: u64,
    /// Its file offset.
    pub offset: u64,
    /// How its run-time value is given.
    pub storage: Storage,
    /// Its run-time value, before the load bias.
    pub value: u64,
    /// The word as stored in the file.
    pub in_place: u64,
    /// File offset of the RELA record that relocates it, if any.
    pub rela_entry: Option<u64>,
}

/// One `__tgt_device_image` of a table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// `ImageStart`, `ImageEnd`, `EntriesBegin`, `EntriesEnd`.
    pub fields: [Word; 4],
    /// Index into [`OpenMpMap::images`] of the image it registers.
    pub image: usize,
}

/// One `__tgt_bin_desc` and the table it registers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Its address.
    pub addr: u64,
    /// Its file offset (where `NumDeviceImages` is stored).
    pub offset: u64,
    /// `NumDeviceImages`.
    pub count: u32,
    /// The `DeviceImages` word.
    pub table: Word,
    /// The first `count` records of the table.
    pub records: Vec<Record>,
}

/// The OpenMP map of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenMpMap {
    /// File offset of `.llvm.offloading`.
    pub section_offset: u64,
    /// Its address.
    pub section_addr: u64,
    /// Its size in bytes.
    pub section_size: u64,
    /// File offset of its entry in the section header table.
    pub section_header: u64,
    /// The OffloadBinaries, in section order.
    pub images: Vec<Image>,
    /// The descriptors, by address.
    pub descriptors: Vec<Descriptor>,
}

impl OpenMpMap {
    /// Indices of images no descriptor registers.
    pub fn unreferenced(&self) -> Vec<usize> {
        (0..self.images.len())
            .filter(|&i| !self.descriptors.iter().any(|d| d.records.iter().any(|r| r.image == i)))
            .collect()
    }
}

/// Whether `data` is an ELF file with an `SHT_LLVM_OFFLOADING` section and
/// no `.hip_fatbin`: the files the OpenMP map is for (it refuses objects
/// and unallocated sections with a reason).
pub fn is_openmp_host(data: &[u8]) -> bool {
    let Ok(file) = ElfFile::parse(data) else { return false };
    let hip = (1..file.sections.len()).any(|i| file.section_name(i).ok() == Some(b".hip_fatbin"));
    !hip && file.sections.iter().any(|s| s.sh_type == SHT_LLVM_OFFLOADING)
}

/// The allocated sections with file contents, by address, to turn an
/// address into a file offset in O(log n) (a hostile file may hold 65 000
/// sections and a million relocations).
struct Spans(Vec<(u64, u64, u64)>);

impl Spans {
    fn new(file: &ElfFile) -> Spans {
        let mut v: Vec<(u64, u64, u64)> = file
            .sections
            .iter()
            .filter(|s| s.flags & SHF_ALLOC != 0 && s.sh_type != SHT_NOBITS && s.size > 0)
            .map(|s| (s.addr, s.size, s.offset))
            .collect();
        v.sort_unstable();
        Spans(v)
    }

    /// The file offset of the `len` bytes at address `addr`, through the
    /// allocated section that holds them.
    fn file_offset(&self, addr: u64, len: u64) -> Option<u64> {
        let i = self.0.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let &(start, size, offset) = self.0.get(i)?;
        let rel = addr - start;
        (rel.checked_add(len)? <= size).then(|| offset.checked_add(rel)).flatten()
    }
}

/// Walks `.llvm.offloading`: OffloadBinaries back to back, zero runs of any
/// length between them (a pruned file is mostly zeros).
fn walk(section: &[u8], offset: u64, addr: u64) -> Result<Vec<Image>, OpenMpError> {
    let mut images = Vec::new();
    let mut pos = 0usize;
    loop {
        pos += skip_zeros(section.get(pos..).unwrap_or(&[]));
        let Some(rest) = section.get(pos..).filter(|r| !r.is_empty()) else { break };
        let at = offset + pos as u64;
        let bad = |reason: String| OpenMpError::BadImage { offset: at, reason };
        let binary = match Binaries::new(rest).next() {
            Some(Ok(b)) => b,
            Some(Err(e)) => return Err(bad(e.to_string())),
            None => break,
        };
        if binary.version() != 1 {
            return Err(bad(format!(
                "OffloadBinary version {} (only version 1 is registered by clang)",
                binary.version()
            )));
        }
        let entry = binary.entry();
        // Addresses come from the file: wrapping, never overflowing.
        // parse_chunk checked image_offset + image_size <= size <= rest.len().
        let here = addr.wrapping_add(pos as u64);
        let start = here.wrapping_add(entry.image_offset);
        images.push(Image {
            offset: at,
            addr: here,
            size: binary.data().len() as u64,
            start,
            end: start.wrapping_add(entry.image_size),
            triple: binary.triple().into_owned(),
            arch: binary.arch().into_owned(),
            offload_kind: binary.offload_kind(),
            image_kind: binary.image_kind(),
        });
        pos += binary.data().len().max(1);
    }
    Ok(images)
}

/// Resolves pointer words: relocations of a linked file, or words in place.
struct Resolver<'f, 'a> {
    file: &'f ElfFile<'a>,
    spans: Spans,
    relocs: HashMap<u64, Vec<Found>>,
}

impl Resolver<'_, '_> {
    fn word(&self, addr: u64) -> Result<Word, OpenMpError> {
        let fail = |reason: String| OpenMpError::Pointer { addr, reason };
        let offset = self.spans.file_offset(addr, 8).ok_or_else(|| fail("not inside a section of the file".into()))?;
        let in_place = u64_le(self.file.data, offset).ok_or_else(|| fail("past the end of the file".into()))?;
        let found = self.relocs.get(&addr);
        let (storage, value) = pointers::resolve(self.file, found, in_place, 0).map_err(|e| fail(e.to_string()))?;
        let rela_entry = match found.map(Vec::as_slice) {
            Some([Found::Rela { entry, .. }]) => Some(*entry),
            _ => None,
        };
        Ok(Word { addr, offset, storage, value, in_place, rela_entry })
    }

    /// Every pointer word whose value `wanted` accepts, as (address,
    /// value). A PIE or shared library relocates every pointer, so its
    /// relocations list them all; an executable holds absolute addresses,
    /// found by reading its data sections word by word.
    fn pointers_to(&self, wanted: &dyn Fn(u64) -> bool, skip: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if self.file.header.e_type == ET_EXEC {
            for s in &self.file.sections {
                let data_like = s.flags & SHF_ALLOC != 0 && s.flags & SHF_EXECINSTR == 0 && s.sh_type == SHT_PROGBITS;
                if !data_like || s.addr == skip {
                    continue;
                }
                let Some(bytes) = usize::try_from(s.offset)
                    .ok()
                    .and_then(|o| self.file.data.get(o..o.checked_add(usize::try_from(s.size).ok()?)?))
                else {
                    continue;
                };
                let first = (8 - s.addr % 8) % 8;
                let words = bytes.get(first as usize..).unwrap_or(&[]).chunks_exact(8).filter_map(|w| u64_le(w, 0));
                for (i, word) in words.enumerate() {
                    let addr = s.addr.wrapping_add(first + i as u64 * 8);
                    if wanted(word) && !self.relocs.contains_key(&addr) {
                        out.push((addr, word));
                    }
                }
            }
        }
        // Only the storages a table word may have (RELATIVE, RELR): a
        // library may hold millions of relocations, and resolving each in
        // full would cost seconds. A record stored another way stays
        // unfound, so its image counts as unregistered and is kept.
        for (&addr, found) in &self.relocs {
            let value = match found.as_slice() {
                [Found::Rela { r_type: pointers::R_X86_64_RELATIVE, addend, .. }] => Some(*addend),
                [Found::Relr] => self.spans.file_offset(addr, 8).and_then(|o| u64_le(self.file.data, o)),
                _ => None,
            };
            if let Some(v) = value.filter(|&v| wanted(v)) {
                out.push((addr, v));
            }
        }
        out.sort_unstable();
        out
    }
}

impl OpenMpMap {
    /// Builds the OpenMP map of a linked ELF x86-64 file.
    pub fn read(data: &[u8]) -> Result<OpenMpMap, OpenMpError> {
        let file = ElfFile::parse(data).map_err(OpenMpError::Elf)?;
        if !file.codec.is64 || file.codec.big || file.header.machine != EM_X86_64 {
            return Err(OpenMpError::Unsupported);
        }
        if file.header.e_type == ET_REL {
            return Err(OpenMpError::Relocatable);
        }
        let found: Vec<usize> = (1..file.sections.len())
            .filter(|&i| file.sections[i].sh_type == SHT_LLVM_OFFLOADING && file.sections[i].flags & SHF_ALLOC != 0)
            .collect();
        let index = match found.as_slice() {
            [] => return Err(OpenMpError::NoOffloading),
            [one] => *one,
            many => return Err(OpenMpError::SeveralSections(many.len())),
        };
        let sec = file.sections[index];
        let bytes = file.section_data(index).map_err(OpenMpError::Elf)?;
        if !segments::maps(data, sec.addr, sec.offset, sec.size) {
            return Err(OpenMpError::NotMapped { addr: sec.addr, offset: sec.offset });
        }
        let images = walk(bytes, sec.offset, sec.addr)?;
        let mut map = OpenMpMap {
            section_offset: sec.offset,
            section_addr: sec.addr,
            section_size: sec.size,
            section_header: u64_le(data, 40).unwrap_or(0).wrapping_add(index as u64 * 64),
            images,
            descriptors: Vec::new(),
        };
        let relocs = pointers::relocations(&file, false, 0, &|_| true).map_err(OpenMpError::Relocations)?;
        let resolver = Resolver { file: &file, spans: Spans::new(&file), relocs };
        // clang 19 brackets the image inside each OffloadBinary; newer
        // wrappers bracket the whole buffer when it is not an
        // OffloadBinary. Both are understood: start -> (image, end).
        let mut starts: HashMap<u64, (usize, u64)> = HashMap::new();
        for (i, im) in map.images.iter().enumerate() {
            starts.insert(im.start, (i, im.end));
            starts.insert(im.addr, (i, im.addr.wrapping_add(im.size)));
        }
        // Record candidates: an image start followed by that image's end.
        let records: Vec<u64> = resolver
            .pointers_to(&|v| starts.contains_key(&v), sec.addr)
            .into_iter()
            .filter(|&(addr, v)| {
                let end = starts.get(&v).map(|&(_, end)| end);
                resolver.word(addr.wrapping_add(8)).ok().map(|w| w.value) == end
            })
            .map(|(addr, _)| addr)
            .collect();
        let record_set: std::collections::HashSet<u64> = records.iter().copied().collect();
        // Descriptors: the DeviceImages word points at a record, 8 bytes
        // after NumDeviceImages.
        let mut by_table: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
        for (addr, value) in resolver.pointers_to(&|v| record_set.contains(&v), sec.addr) {
            by_table.entry(value).or_default().push(addr.wrapping_sub(8));
        }
        // Every counted record is a candidate, so the counts together can
        // not exceed the candidates: this bounds the work on hostile files.
        // One more per descriptor lets its first bad record say what is
        // wrong with it.
        let mut budget = records.len() + by_table.len();
        for (table, descs) in &by_table {
            let [desc] = descs.as_slice() else {
                let reason = format!("{} words point at it; which is the descriptor is unclear", descs.len());
                return Err(OpenMpError::Table { addr: *table, reason });
            };
            map.descriptors.push(map.descriptor(&resolver, *desc, &starts, &mut budget)?);
        }
        map.check_tables(&records)?;
        Ok(map)
    }

    fn descriptor(
        &self,
        resolver: &Resolver,
        addr: u64,
        starts: &HashMap<u64, (usize, u64)>,
        budget: &mut usize,
    ) -> Result<Descriptor, OpenMpError> {
        let fail = |reason: String| OpenMpError::Pointer { addr, reason };
        let offset = resolver.spans.file_offset(addr, 32).ok_or_else(|| fail("descriptor outside the file".into()))?;
        let count = u64_le(resolver.file.data, offset).ok_or_else(|| fail("past the end of the file".into()))? as u32;
        let table = resolver.word(addr.wrapping_add(8))?;
        *budget = budget.checked_sub(count as usize).ok_or_else(|| OpenMpError::Table {
            addr: table.value,
            reason: format!("NumDeviceImages is {count}, more records than the file holds"),
        })?;
        let mut records = Vec::new();
        for i in 0..u64::from(count) {
            let at = table.value.wrapping_add(i * IMAGE_RECORD_SIZE);
            let fields = [0u64, 8, 16, 24].map(|f| resolver.word(at.wrapping_add(f)));
            let [a, b, c, d] = fields;
            let fields = [a?, b?, c?, d?];
            let image = starts.get(&fields[0].value).filter(|&&(_, end)| end == fields[1].value).map(|&(im, _)| im);
            let Some(image) = image else {
                let reason = format!(
                    "record {i} brackets {:#x}..{:#x}, which is no image of .llvm.offloading",
                    fields[0].value, fields[1].value
                );
                return Err(OpenMpError::Table { addr: table.value, reason });
            };
            records.push(Record { fields, image });
        }
        Ok(Descriptor { addr, offset, count, table, records })
    }

    /// Refuses what is not understood: overlapping tables, and records no
    /// descriptor reaches (some registration this reader does not know).
    /// Slots right after a descriptor's counted records are spare: a
    /// pruned table keeps its size.
    fn check_tables(&self, candidates: &[u64]) -> Result<(), OpenMpError> {
        let mut spans: Vec<(u64, u64)> = self
            .descriptors
            .iter()
            .map(|d| (d.table.value, d.table.value.saturating_add(u64::from(d.count) * IMAGE_RECORD_SIZE)))
            .collect();
        spans.sort_unstable();
        if let Some(w) = spans.windows(2).find(|w| w[1].0 < w[0].1) {
            let reason = "overlaps the table of another descriptor".to_string();
            return Err(OpenMpError::Table { addr: w[1].0, reason });
        }
        let set: std::collections::HashSet<u64> = candidates.iter().copied().collect();
        let mut covered = std::collections::HashSet::new();
        for (start, end) in spans {
            let mut at = start;
            while at < end || set.contains(&at) {
                covered.insert(at);
                at = at.saturating_add(IMAGE_RECORD_SIZE);
                if at == u64::MAX {
                    break;
                }
            }
        }
        if let Some(&c) = candidates.iter().find(|c| !covered.contains(c)) {
            let reason = "records image pointers, but no descriptor points at it".to_string();
            return Err(OpenMpError::Table { addr: c, reason });
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
