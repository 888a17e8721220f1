//! The host object files the scan opens: ELF through `offload_format::elf`
//! (the project's one ELF reader), COFF, PE and Mach-O through the `object`
//! crate (ARCHITECTURE.md, "One reader per format"). The scan sees both
//! through the few questions it asks: the sections with their names and
//! bytes, and for the CUDA registration records a section's relocations
//! and where an address lies in the file.

use object::{Object, ObjectSection, ObjectSymbol};
use offload_format::elf::{self, ElfFile, SHT_NOBITS};
use std::collections::{HashMap, HashSet};

/// A parsed host object file.
pub(super) enum HostFile<'d> {
    Elf(ElfFile<'d>),
    /// Boxed: `object::File` is several times the size of `ElfFile`.
    Other(Box<object::File<'d>>),
}

/// One section as the scan lists it.
pub(super) struct SectionView<'d> {
    /// The name; sections whose name cannot be read (or is not UTF-8) are
    /// left out of the list.
    pub name: &'d str,
    /// The name shown in locations: Mach-O's `segment,section`.
    pub display: String,
    /// The file bytes, or why they cannot be read.
    pub data: Result<&'d [u8], String>,
}

/// The section of CUDA registration records, with what is needed to
/// follow each record's address.
pub(super) struct RecordSection<'d> {
    pub data: Option<&'d [u8]>,
    pub address: u64,
    /// For relocatable objects: the relocations of the section by offset,
    /// each with the file offset of the section its target lies in and the
    /// explicit addend (`None`: the addend is the field itself).
    pub relocations: HashMap<u64, (Option<u64>, Option<i64>)>,
}

impl<'d> HostFile<'d> {
    /// Parses an ELF, COFF, PE or Mach-O file; the message says why not.
    pub(super) fn parse(data: &'d [u8]) -> Result<HostFile<'d>, String> {
        if elf::has_ident(data) {
            ElfFile::parse(data).map(HostFile::Elf).map_err(|e| e.to_string())
        } else {
            object::File::parse(data).map(|f| HostFile::Other(Box::new(f))).map_err(|e| e.to_string())
        }
    }

    /// Whether this is a linked PE image (where the linker cuts section
    /// names to eight characters).
    pub(super) fn is_pe(&self) -> bool {
        matches!(self, HostFile::Other(f) if f.format() == object::BinaryFormat::Pe)
    }

    /// The sections in file order (ELF's null section left out).
    pub(super) fn sections(&self) -> Vec<SectionView<'d>> {
        match self {
            HostFile::Elf(elf) => (1..elf.sections.len())
                .filter_map(|i| {
                    let name = std::str::from_utf8(elf.section_name(i).ok()?).ok()?;
                    let data = elf.section_data(i).map_err(|e| e.to_string());
                    Some(SectionView { name, display: name.to_string(), data })
                })
                .collect(),
            HostFile::Other(file) => file
                .sections()
                .filter_map(|section| {
                    let name = section.name().ok()?;
                    let display = match section.segment_name() {
                        Ok(Some(seg)) => format!("{seg},{name}"),
                        _ => name.to_string(),
                    };
                    let data = section.data().map_err(|e| e.to_string());
                    Some(SectionView { name, display, data })
                })
                .collect(),
        }
    }

    /// Whether the file is a relocatable object (not linked).
    pub(super) fn relocatable(&self) -> bool {
        match self {
            HostFile::Elf(elf) => elf.header.e_type == elf::ET_REL,
            HostFile::Other(file) => file.kind() == object::ObjectKind::Relocatable,
        }
    }

    /// The first section called `name`, with its relocations when the file
    /// is relocatable.
    pub(super) fn record_section(&self, name: &str) -> Option<RecordSection<'d>> {
        let relocatable = self.relocatable();
        match self {
            HostFile::Elf(elf) => {
                let index = (1..elf.sections.len()).find(|&i| elf.section_name(i).ok() == Some(name.as_bytes()))?;
                let sh = elf.sections.get(index)?;
                let mut relocations = HashMap::new();
                if relocatable {
                    for r in elf::relocations::for_section(elf, index) {
                        let start = (r.symbol != 0)
                            .then(|| elf::relocations::symbol_section(elf, r.symbol))
                            .flatten()
                            .and_then(|i| elf.sections.get(i))
                            .filter(|s| s.sh_type != SHT_NOBITS)
                            .map(|s| s.offset);
                        relocations.insert(r.offset, (start, r.addend));
                    }
                }
                Some(RecordSection { data: elf.section_data(index).ok(), address: sh.addr, relocations })
            }
            HostFile::Other(file) => {
                let section = file.section_by_name(name)?;
                let relocations = if relocatable {
                    section
                        .relocations()
                        .map(|(offset, r)| {
                            let target = match r.target() {
                                object::RelocationTarget::Section(i) => Some(i),
                                object::RelocationTarget::Symbol(i) => {
                                    file.symbol_by_index(i).ok().and_then(|s| s.section_index())
                                }
                                _ => None,
                            };
                            let start = target
                                .and_then(|i| file.section_by_index(i).ok())
                                .and_then(|s| s.file_range())
                                .map(|r| r.0);
                            // COFF keeps the addend in the field itself (read by the caller).
                            let addend = if r.has_implicit_addend() { None } else { Some(r.addend()) };
                            (offset, (start, addend))
                        })
                        .collect()
                } else {
                    HashMap::new()
                };
                Some(RecordSection { data: section.data().ok(), address: section.address(), relocations })
            }
        }
    }

    /// The file offset (within the object) of a link-time address, through
    /// the section holding it.
    pub(super) fn file_offset(&self, address: u64) -> Option<u64> {
        match self {
            HostFile::Elf(elf) => elf.sections.iter().skip(1).filter(|s| s.sh_type != SHT_NOBITS).find_map(|s| {
                let delta = address.checked_sub(s.addr)?;
                (delta < s.size).then_some(s.offset.checked_add(delta)?)
            }),
            HostFile::Other(file) => file.sections().find_map(|s| {
                let (start, size) = s.file_range()?;
                let delta = address.checked_sub(s.address())?;
                (delta < size.min(s.size())).then_some(start + delta)
            }),
        }
    }

    /// In a PE image with a base relocation table, the addresses (image
    /// base included) of the 64-bit fields the loader adjusts when it maps
    /// the image elsewhere (`IMAGE_REL_BASED_DIR64`). `None` for other
    /// files, and for images without such a table (linked `/FIXED`: never
    /// moved).
    pub(super) fn pe_base_relocations(&self, data: &[u8]) -> Option<HashSet<u64>> {
        let HostFile::Other(file) = self else { return None };
        let object::File::Pe64(pe) = &**file else { return None };
        let base = pe.relative_address_base();
        let mut blocks = pe.data_directories().relocation_blocks(data, &pe.section_table()).ok()??;
        let mut out = HashSet::new();
        // A malformed table ends the walk; what was read so far stands.
        while let Ok(Some(block)) = blocks.next() {
            for r in block {
                if r.typ == object::pe::IMAGE_REL_BASED_DIR64 {
                    out.insert(base.wrapping_add(u64::from(r.virtual_address)));
                }
            }
        }
        Some(out)
    }
}
