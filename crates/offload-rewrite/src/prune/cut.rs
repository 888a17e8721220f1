//! `prune --mode cut`: the file really shrinks (docs/formats/host-references.md §4 (b), §6.4).
//! One cutter for every section kind: HIP's `.hip_fatbin`, a linked CUDA
//! file's `.nv_fatbin` (the same wrapper records, magic `0x466243b1`) and
//! OpenMP's `.llvm.offloading` (`openmp::cut` supplies its table words);
//! `.hip_fatbin` below stands for any of them.
//!
//! The pruned fat binaries are packed from the start of `.hip_fatbin`,
//! each keeping its alignment; every wrapper pointer is moved by its
//! storage (`FileMap::pointer_edits`), and so is every symbol at a fat
//! binary's start. Whole pages `[roundup(new end, A), rounddown(old end,
//! A))` leave the file (A: the largest PT_LOAD `p_align`): the PT_LOAD
//! holding `.hip_fatbin` is split in two, the program header table (one
//! entry longer) moves into the freed bytes after the packed fat binaries
//! (at the end of the first half, where its address minus its offset is
//! that segment's: in an executable it must be the first PT_LOAD's, as
//! old kernels assume; a shared library needs it only congruent), and every
//! later `p_offset`, `sh_offset` and `e_shoff` moves down by the bytes cut.
//! No address changes: every allocated section other than `.hip_fatbin`
//! keeps its address and its bytes, except the pointer fields above.
//!
//! What the rewrite does not fully understand is refused: a relocation,
//! symbol or dynamic tag pointing inside `.hip_fatbin` other than at a
//! fat binary's start through a known wrapper storage, a section or
//! segment overlapping it. Relocatable objects are `cut_object`'s.

use super::{PruneError, Pruned};
use offload_format::bytes::{u16_le, u32_le, u64_le};
use offload_format::elf::STT_TLS;
use offload_format::elf::segments::{self, PHDR_SIZE, PT_LOAD, PT_PHDR, Segment};
use offload_format::elf::{ET_DYN, ET_EXEC, ElfFile, SHF_ALLOC, SHT_DYNAMIC, SHT_DYNSYM, SHT_NOBITS, SHT_SYMTAB};
use offload_format::plan::{Piece, Plan};
use offload_inspect::layout::FileMap;
use offload_inspect::layout::pointers::{self, Reloc};
use std::borrow::Cow;
use std::collections::HashSet;

/// Bytes written over the input at one offset outside the packed section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    /// Offset in the input.
    pub offset: u64,
    /// The new bytes.
    pub bytes: Vec<u8>,
}

/// Appends input bytes `[from, to)` to `plan` with the `patches` (sorted,
/// not overlapping) that start in that range applied.
pub(crate) fn copy_patched<'a>(plan: &mut Plan<'a>, data: &'a [u8], patches: &[Patch], from: u64, to: u64) {
    let mut at = from;
    for p in patches.iter().filter(|p| p.offset >= from && p.offset < to) {
        plan.borrow(data.get(at as usize..p.offset as usize).unwrap_or(&[]));
        plan.own(p.bytes.clone());
        at = p.offset + p.bytes.len() as u64;
    }
    plan.borrow(data.get(at as usize..to as usize).unwrap_or(&[]));
}

/// The layout of a cut output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutPlan {
    /// The section packed (`.hip_fatbin`, `.nv_fatbin`, `.llvm.offloading`).
    pub section_name: &'static str,
    /// The new file offset of each fat binary, in the map's order.
    pub unit_offsets: Vec<u64>,
    /// File offset (and, unchanged, address) of `.hip_fatbin`.
    pub fatbin_offset: u64,
    /// Address of `.hip_fatbin`.
    pub fatbin_addr: u64,
    /// The new size of `.hip_fatbin`.
    pub fatbin_size: u64,
    /// Where `.hip_fatbin` ended in the input.
    pub old_fatbin_end: u64,
    /// File offset of the new program header table.
    pub phdr_offset: u64,
    /// The new program header table.
    pub segments: Vec<Segment>,
    /// Input offset where the bytes after the cut start (page-aligned).
    pub resume_input: u64,
    /// Output offset of the same bytes.
    pub resume_output: u64,
    /// Bytes removed from the file (a multiple of the page alignment).
    pub removed: u64,
    /// Field edits at input offsets before or after `.hip_fatbin`, sorted,
    /// not overlapping.
    pub patches: Vec<Patch>,
}

/// What a cut would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Cut as planned.
    Planned(CutPlan),
    /// Not worth it: the cut would save `saves` bytes, less than `minimum`
    /// (two pages of the largest alignment); write in zero mode instead.
    TooSmall {
        /// Bytes the cut would remove.
        saves: u64,
        /// The least it must remove.
        minimum: u64,
    },
}

const DT_PTR_TAGS: [u64; 17] = [
    3,
    4,
    5,
    6,
    7,
    12,
    13,
    17,
    23,
    25,
    26,
    32,
    36, // PLTGOT … RELR (ELF gABI)
    0x6fff_fef5,
    0x6fff_fff0,
    0x6fff_fffc,
    0x6fff_fffe, // GNU_HASH, VERSYM, VERDEF, VERNEED
];

/// The largest segment alignment a cut accepts (x86-64 uses 4 KiB, some
/// linkers 2 MiB for huge pages); larger is taken as damage.
const MAX_ALIGN: u64 = 1 << 30;
/// `R_X86_64_DTPMOD64`, `DTPOFF64`, `TPOFF64`, `TLSDESC` (x86-64 psABI).
const TLS_TYPES: [u32; 4] = [16, 17, 18, 36];

fn refuse(why: impl Into<String>) -> PruneError {
    PruneError::CutRefused(why.into())
}

/// The alignment kept for every packed fat binary: the largest power of
/// two up to 4096 dividing the section's address and every fat binary's
/// old offset in it (4096 for the classic driver, 16 for the new one).
fn unit_alignment(addr: u64, old_offsets: &[u64]) -> u64 {
    let mut align = 4096u64;
    while align > 1 && (!addr.is_multiple_of(align) || old_offsets.iter().any(|o| !o.is_multiple_of(align))) {
        align /= 2;
    }
    align
}

/// The section a cut packs, and the units in it.
pub(crate) struct Packed<'s> {
    /// The section's name (`.hip_fatbin`, `.nv_fatbin`, `.llvm.offloading`).
    pub name: &'static str,
    /// File offset, address and size of the section.
    pub offset: u64,
    /// Its address.
    pub addr: u64,
    /// Its size.
    pub size: u64,
    /// Whether the file is relocatable (refused).
    pub relocatable: bool,
    /// Each unit's old offset in the section, in section order.
    pub old_offsets: &'s [u64],
    /// Each unit's new size (0: the unit leaves).
    pub new_sizes: &'s [u64],
    /// Addresses of the pointer words allowed to point into the section:
    /// the caller moves them (its patches).
    pub words: &'s HashSet<u64>,
}

/// Where each unit of `packed` lands: new offsets in the section.
pub(crate) fn packed_offsets(packed: &Packed) -> Vec<u64> {
    pack_units(packed.addr, packed.old_offsets, packed.new_sizes)
}

/// Where units of `new_sizes` bytes, which lay at `old_offsets` in a
/// section at address `addr` (0 in an object), land when packed from the
/// section start at the alignment [`unit_alignment`] keeps.
pub(crate) fn pack_units(addr: u64, old_offsets: &[u64], new_sizes: &[u64]) -> Vec<u64> {
    let unit_align = unit_alignment(addr, old_offsets);
    let mut at = 0u64;
    let mut offsets = Vec::with_capacity(new_sizes.len());
    for &size in new_sizes {
        at = at.next_multiple_of(unit_align);
        offsets.push(at);
        at += size;
    }
    offsets
}

/// A file offset after some ranges of the file shrank: `cuts` holds
/// (offset, old size, new size) per range; `at` moves down by what was
/// cut from the ranges ending at or before it (PE images, COFF objects).
pub(crate) fn shifted(cuts: &[(u64, u64, u64)], at: u64) -> u64 {
    let cut: u64 = cuts.iter().filter(|&&(off, old, _)| off + old <= at).map(|&(_, old, new)| old - new).sum();
    at - cut
}

/// Plans the cut of `data` (mapped as `map`, pruned as `pruned`): HIP's
/// `.hip_fatbin` or a linked CUDA file's `.nv_fatbin`, as `map.section`
/// says.
pub fn plan_cut(data: &[u8], map: &FileMap, pruned: &Pruned) -> Result<Cut, PruneError> {
    let old_offsets: Vec<u64> = map.units.iter().map(|u| u.section_offset).collect();
    let new_sizes: Vec<u64> = pruned.units.iter().map(|u| u.new_used).collect();
    if old_offsets.len() != new_sizes.len() {
        return Err(refuse("the prune plan and the file map disagree about the fat binaries"));
    }
    let words: HashSet<u64> = map.wrappers.iter().map(|w| w.addr.wrapping_add(8)).collect();
    let packed = Packed {
        name: map.section.name(),
        offset: map.fatbin_offset,
        addr: map.fatbin_addr,
        size: map.fatbin_size,
        relocatable: map.relocatable,
        old_offsets: &old_offsets,
        new_sizes: &new_sizes,
        words: &words,
    };
    let section_offsets = packed_offsets(&packed);
    let v = map.fatbin_addr;
    // Wrapper pointers, by their storage.
    let mut new_pointers = Vec::with_capacity(map.wrappers.len());
    for (record, w) in map.wrappers.iter().enumerate() {
        let offload_inspect::layout::Target::Unit(u) = w.target else {
            return Err(PruneError::Dangling { record, offset: w.offset, pointer: w.pointer });
        };
        new_pointers.push(section_offsets.get(u).map_or(w.pointer, |n| v + n));
    }
    let mut patches = Vec::new();
    for edit in map.pointer_edits(data, &new_pointers)? {
        patches.push(Patch { offset: edit.offset, bytes: edit.value.to_le_bytes().to_vec() });
    }
    cut_section(data, &packed, patches)
}

/// The one cutter: packs the units of `packed` from the section start,
/// splits the PT_LOAD, moves the program header table and shifts what
/// follows. `pointer_patches` are the caller's edits of the words that
/// point into the section (`packed.words`), made for [`packed_offsets`].
pub(crate) fn cut_section(data: &[u8], packed: &Packed, pointer_patches: Vec<Patch>) -> Result<Cut, PruneError> {
    let name = packed.name;
    if packed.relocatable {
        return Err(refuse(format!(
            "a relocatable object (.o) is cut by prune::cut_file, not as a linked binary ({name})"
        )));
    }
    let file = ElfFile::parse(data).map_err(PruneError::CutElf)?;
    if !matches!(file.header.e_type, ET_EXEC | ET_DYN) {
        return Err(refuse(format!("ELF type {} is neither an executable nor a shared object", file.header.e_type)));
    }
    let (_, old) = segments::read(data).map_err(PruneError::CutSegments)?;
    // The output's PT_LOADs must be sorted, congruent and apart: so must
    // the input's, or the cut would only carry the damage over.
    segments::check_loads(&old, data.len() as u64).map_err(|e| refuse(format!("the input's {e}")))?;
    let (f, s, v) = (packed.offset, packed.size, packed.addr);
    let old_end = f.checked_add(s).ok_or_else(|| refuse(format!("{name} ends past the end of the file")))?;
    if v.checked_add(s).is_none() {
        return Err(refuse(format!("{name} ends past the end of the address space")));
    }
    let Some(li) = old.iter().position(|p| {
        p.kind == PT_LOAD
            && v >= p.vaddr
            && (v - p.vaddr).checked_add(s).is_some_and(|e| e <= p.filesz)
            && p.offset.checked_add(v - p.vaddr) == Some(f)
    }) else {
        return Err(refuse(format!("no PT_LOAD maps {name}")));
    };
    let l = old[li];
    let align = old.iter().filter(|p| p.kind == PT_LOAD).map(|p| p.align).max().unwrap_or(0);
    if !(4096..=MAX_ALIGN).contains(&align) || !align.is_power_of_two() {
        return Err(refuse(format!(
            "the largest PT_LOAD alignment is {align:#x}, not a power of two from 4 KiB to 1 GiB"
        )));
    }
    let bias = l.vaddr.wrapping_sub(l.offset);
    let first = old.iter().find(|p| p.kind == PT_LOAD).map_or(bias, |p| p.vaddr.wrapping_sub(p.offset));
    // The moved table sits in the first half of this segment, so its
    // address minus its offset is `bias`: a multiple of the alignment
    // keeps it congruent. A program also needs `bias` to be the first
    // PT_LOAD's (see `segments::is_shared_library`); in a shared library any
    // congruent place will do (docs/formats/kpack.md).
    let program = !segments::is_shared_library(file.header.e_type, &old);
    if !bias.is_multiple_of(align) {
        return Err(refuse(format!(
            "the segment holding {name} maps its bytes at a distance from their offset that is not a multiple of {align:#x}, so the moved program header table would not keep address − offset congruent"
        )));
    }
    if program && first != bias {
        return Err(refuse(format!(
            "the segment holding {name} maps its bytes at another distance than the first PT_LOAD, so in an executable the moved program header table would not keep address − offset"
        )));
    }
    if l.memsz < l.filesz {
        return Err(refuse(format!("the PT_LOAD holding {name} has fewer bytes in memory than in the file")));
    }

    // Pack the units from the section start.
    let section_offsets = packed_offsets(packed);
    // Up to the end of the last unit that stays: no padding after it
    // (llvm-objdump reads `.llvm.offloading` to its end, refusing zeros).
    let new_size =
        section_offsets.iter().zip(packed.new_sizes).filter(|(_, n)| **n > 0).map(|(o, n)| o + n).max().unwrap_or(0);
    if new_size > s || packed.old_offsets.len() != packed.new_sizes.len() {
        return Err(refuse(format!("the packed units of {name} would not fit in the section")));
    }
    // The second half starts at the page holding the old end; it loses
    // its bytes before `old_end` (zeroed) but keeps its address.
    let resume = old_end / align * align;
    let tail = l.offset.saturating_add(l.memsz).saturating_sub(resume);
    let count = old.len() + usize::from(tail > 0);
    let table_len = count as u64 * PHDR_SIZE;
    let phdr_offset = (f + new_size).next_multiple_of(8);
    let keep_end = (phdr_offset + table_len).next_multiple_of(align);
    let removed = resume.saturating_sub(keep_end);
    if removed < 2 * align {
        return Ok(Cut::TooSmall { saves: removed, minimum: 2 * align });
    }
    let shift = |off: u64| if off >= old_end { off - removed } else { off };

    // The new program header table.
    let mut segments = Vec::with_capacity(count);
    for (j, p) in old.iter().enumerate() {
        // A program header whose bytes are not where the PT_LOADs map its
        // address describes a layout the cut cannot keep consistent.
        if p.kind != PT_LOAD && p.filesz > 0 && segments::file_offset(&old, p.vaddr, p.filesz) != Some(p.offset) {
            return Err(refuse(format!(
                "program header {j} (type {:#x}) is not where the PT_LOADs map its address",
                p.kind
            )));
        }
        if j == li {
            let first_len = phdr_offset + table_len - l.offset;
            segments.push(Segment { filesz: first_len, memsz: first_len, ..l });
            if tail > 0 {
                let skip = resume - l.offset;
                segments.push(Segment {
                    offset: keep_end,
                    vaddr: l.vaddr + skip,
                    paddr: l.paddr.wrapping_add(skip),
                    filesz: l.filesz.saturating_sub(skip),
                    memsz: l.memsz - skip,
                    ..l
                });
            }
        } else if p.kind == PT_PHDR {
            let vaddr = phdr_offset.wrapping_add(bias);
            let paddr = p.paddr.wrapping_sub(p.vaddr).wrapping_add(vaddr);
            segments.push(Segment { offset: phdr_offset, vaddr, paddr, filesz: table_len, memsz: table_len, ..*p });
        } else if p.offset >= old_end || (p.offset.saturating_add(p.filesz) <= f && !overlaps(p.vaddr, p.memsz, v, s)) {
            segments.push(Segment { offset: shift(p.offset), ..*p });
        } else {
            return Err(refuse(format!("program header {j} (type {:#x}) overlaps {name}", p.kind)));
        }
    }

    let fat_index = (1..file.sections.len())
        .find(|&i| file.section_name(i).ok() == Some(name.as_bytes()) && file.sections[i].offset == f)
        .ok_or_else(|| refuse(format!("no {name} section")))?;
    let unit_moves: Vec<(u64, u64)> =
        packed.old_offsets.iter().zip(&section_offsets).map(|(o, &n)| (v + o, v + n)).collect();
    let mut patches = pointer_patches;
    audit_sections(&file, &old, fat_index, f, s, v, name)?;
    audit_dynamic(&file, v, s, name)?;
    audit_relocations(&file, &old, packed.words, v, s, name)?;
    symbol_patches(&file, v, s, &unit_moves, &mut patches, name)?;

    // ELF header and section headers.
    patches.push(Patch { offset: 32, bytes: phdr_offset.to_le_bytes().to_vec() });
    patches.push(Patch { offset: 56, bytes: (count as u16).to_le_bytes().to_vec() });
    let shoff = u64_le(data, 40).unwrap_or(0);
    if shoff > f && shoff < old_end {
        return Err(refuse(format!("the section header table lies inside {name}")));
    }
    if shoff >= old_end {
        patches.push(Patch { offset: 40, bytes: (shoff - removed).to_le_bytes().to_vec() });
    }
    for (i, sh) in file.sections.iter().enumerate().skip(1) {
        let entry = shoff + i as u64 * 64;
        if i == fat_index {
            patches.push(Patch { offset: entry + 32, bytes: new_size.to_le_bytes().to_vec() });
        } else if sh.offset >= old_end {
            patches.push(Patch { offset: entry + 24, bytes: (sh.offset - removed).to_le_bytes().to_vec() });
        }
    }
    let patches = merge(patches, f, old_end)?;
    Ok(Cut::Planned(CutPlan {
        section_name: name,
        unit_offsets: section_offsets.iter().map(|n| f + n).collect(),
        fatbin_offset: f,
        fatbin_addr: v,
        fatbin_size: new_size,
        old_fatbin_end: old_end,
        phdr_offset,
        segments,
        resume_input: resume,
        resume_output: keep_end,
        removed,
        patches,
    }))
}

fn overlaps(a: u64, a_len: u64, b: u64, b_len: u64) -> bool {
    a_len > 0 && b_len > 0 && a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

/// Sorts the patches and drops exact duplicates; two different patches of
/// one byte, or a patch inside the packed section, are a bug in this module.
fn merge(mut patches: Vec<Patch>, f: u64, old_end: u64) -> Result<Vec<Patch>, PruneError> {
    patches.sort_by(|a, b| a.offset.cmp(&b.offset).then_with(|| a.bytes.cmp(&b.bytes)));
    patches.dedup();
    for pair in patches.windows(2) {
        if pair[0].offset + pair[0].bytes.len() as u64 > pair[1].offset {
            return Err(refuse(format!("two edits of the byte at {:#x} disagree", pair[1].offset)));
        }
    }
    if let Some(p) = patches.iter().find(|p| p.offset + p.bytes.len() as u64 > f && p.offset < old_end) {
        return Err(refuse(format!("an edit at {:#x} falls inside the packed section", p.offset)));
    }
    Ok(patches)
}

/// No other section may share `.hip_fatbin`'s bytes or addresses, and
/// every allocated one must be where a PT_LOAD maps it (the cut moves
/// sections by their offsets and the loader finds them by the segments:
/// both must agree before as they will after).
fn audit_sections(
    file: &ElfFile,
    phdrs: &[Segment],
    fat_index: usize,
    f: u64,
    s: u64,
    v: u64,
    name: &str,
) -> Result<(), PruneError> {
    for (i, sh) in file.sections.iter().enumerate().skip(1) {
        if i == fat_index {
            continue;
        }
        let in_file = sh.sh_type != SHT_NOBITS && sh.size > 0;
        if let Err(e) = file.section_data(i) {
            return Err(refuse(e.to_string()));
        }
        if in_file && sh.flags & SHF_ALLOC != 0 && segments::file_offset(phdrs, sh.addr, sh.size) != Some(sh.offset) {
            return Err(refuse(format!("section {} is not where the program headers map it", file.display_name(i))));
        }
        let clash = (in_file && overlaps(sh.offset, sh.size, f, s))
            || (sh.flags & SHF_ALLOC != 0 && overlaps(sh.addr, sh.size, v, s))
            || (sh.offset > f && sh.offset < f + s);
        if clash {
            return Err(refuse(format!("section {} overlaps {name}", file.display_name(i))));
        }
    }
    Ok(())
}

/// No dynamic tag may hold an address inside `.hip_fatbin`.
fn audit_dynamic(file: &ElfFile, v: u64, s: u64, name: &str) -> Result<(), PruneError> {
    for (i, sh) in file.sections.iter().enumerate() {
        if sh.sh_type != SHT_DYNAMIC {
            continue;
        }
        let data = file.section_data(i).map_err(|e| PruneError::CutRead(e.into()))?;
        for entry in data.chunks_exact(16) {
            let (tag, value) = (u64_le(entry, 0).unwrap_or(0), u64_le(entry, 8).unwrap_or(0));
            if DT_PTR_TAGS.contains(&tag) && overlaps(value, 1, v, s) {
                return Err(refuse(format!("dynamic tag {tag:#x} points into {name} ({value:#x})")));
            }
        }
    }
    Ok(())
}

/// Relocations may point into `.hip_fatbin` only from a wrapper's pointer
/// word, and only with a type the pointer writer knows.
fn audit_relocations(
    file: &ElfFile,
    phdrs: &[Segment],
    words: &HashSet<u64>,
    v: u64,
    s: u64,
    name: &str,
) -> Result<(), PruneError> {
    let inside = |a: u64| overlaps(a, 1, v, s);
    let mut problem: Option<String> = None;
    pointers::for_each_relocation(file, &mut |r| {
        if problem.is_some() {
            return;
        }
        match r {
            Reloc::Relr { place } => {
                if inside(place) {
                    problem = Some(format!("a RELR entry relocates {place:#x}, inside {name}"));
                } else if !words.contains(&place) {
                    let word = segments::file_offset(phdrs, place, 8).and_then(|at| u64_le(file.data, at));
                    if word.is_some_and(inside) {
                        problem = Some(format!("the RELR word at {place:#x} points into {name}"));
                    }
                }
            }
            // TLS relocations hold offsets into a TLS block, not addresses.
            Reloc::Rela { r_type, .. } if TLS_TYPES.contains(&r_type) => {}
            Reloc::Rela { place, r_type, addend, symbol } => {
                let target = match &symbol {
                    Some((_, value, shndx)) if *shndx != 0 => Some(value.wrapping_add(addend)),
                    Some(_) => None,
                    None => Some(addend),
                };
                if inside(place) {
                    problem = Some(format!("a relocation of type {r_type} applies at {place:#x}, inside {name}"));
                } else if target.is_some_and(inside)
                    && !(words.contains(&place) && pointers::known_pointer_type(r_type))
                {
                    let symbol = symbol.map(|s| format!(" (symbol '{}')", s.0)).unwrap_or_default();
                    problem = Some(format!(
                        "a relocation of type {r_type} at {place:#x}{symbol} points into {name} and is not a wrapper pointer"
                    ));
                }
            }
        }
    })?;
    problem.map_or(Ok(()), |p| Err(refuse(p)))
}

/// Moves every symbol at a fat binary's start with it; a symbol anywhere
/// else inside `.hip_fatbin` (other than its first byte) is refused.
fn symbol_patches(
    file: &ElfFile,
    v: u64,
    s: u64,
    moves: &[(u64, u64)],
    patches: &mut Vec<Patch>,
    name: &str,
) -> Result<(), PruneError> {
    for (index, sh) in file.sections.iter().enumerate() {
        if sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM {
            continue;
        }
        let data = file.section_data(index).map_err(|e| PruneError::CutRead(e.into()))?;
        let names = file.string_table(sh.link as usize).ok();
        for (i, sym) in data.chunks_exact(24).enumerate() {
            // Symbols are 24 bytes each: these reads cannot fail.
            let shndx = u16_le(sym, 6).unwrap_or(0);
            let value = u64_le(sym, 8).unwrap_or(0);
            if shndx == 0 || sym[4] & 0xf == STT_TLS || !overlaps(value, 1, v, s) || value == v {
                continue;
            }
            let Some(&(_, new)) = moves.iter().find(|m| m.0 == value) else {
                let name_at = u32_le(sym, 0).unwrap_or(0);
                let symbol = names.and_then(|t| offload_format::elf::c_string(t, name_at)).unwrap_or(b"?");
                return Err(refuse(format!(
                    "symbol '{}' ({value:#x}) points inside {name}, at no fat binary's start",
                    String::from_utf8_lossy(symbol)
                )));
            };
            if new != value {
                patches.push(Patch { offset: sh.offset + i as u64 * 24 + 8, bytes: new.to_le_bytes().to_vec() });
            }
        }
    }
    Ok(())
}

/// The first `len` bytes of `plan`, appended to `out`.
pub(crate) fn append_prefix<'a>(out: &mut Plan<'a>, plan: &Plan<'a>, mut len: u64) {
    for piece in &plan.pieces {
        if len == 0 {
            break;
        }
        let take = piece.len().min(len);
        match piece {
            Piece::Fill { byte, .. } => out.fill(*byte, take),
            Piece::Bytes(Cow::Borrowed(b)) => out.borrow(&b[..take as usize]),
            Piece::Bytes(Cow::Owned(b)) => out.own(b[..take as usize].to_vec()),
        }
        len -= take;
    }
}

impl CutPlan {
    /// Bytes of the output.
    pub fn output_len(&self, input_len: u64) -> u64 {
        input_len - self.removed
    }

    /// Where an input offset outside `.hip_fatbin` lands in the output.
    pub fn output_offset(&self, input: u64) -> u64 {
        if input >= self.old_fatbin_end { input - self.removed } else { input }
    }

    /// The output file: borrowed input ranges, the rebuilt fat binaries,
    /// the new program header table and the patched fields.
    pub fn output_plan<'a>(&self, data: &'a [u8], pruned: &Pruned<'a>) -> Plan<'a> {
        self.output_with(data, |i, plan| {
            let Some(change) = pruned.units.get(i) else { return 0 };
            match &change.replacement {
                Some(rep) => append_prefix(plan, rep, change.new_used),
                None => {
                    let start = change.unit.offset as usize;
                    plan.borrow(data.get(start..start + change.unit.used as usize).unwrap_or(&[]));
                }
            }
            change.new_used
        })
    }

    /// The output file, with `unit(i, plan)` appending unit `i`'s new
    /// bytes and returning how many it appended.
    pub(crate) fn output_with<'a>(
        &self,
        data: &'a [u8],
        mut unit: impl FnMut(usize, &mut Plan<'a>) -> u64,
    ) -> Plan<'a> {
        let mut plan = Plan::new();
        copy_patched(&mut plan, data, &self.patches, 0, self.fatbin_offset);
        let mut at = self.fatbin_offset;
        for (i, &offset) in self.unit_offsets.iter().enumerate() {
            plan.zeros(offset.saturating_sub(at));
            at = offset + unit(i, &mut plan);
        }
        plan.zeros(self.phdr_offset.saturating_sub(at));
        let table = segments::write(&self.segments);
        let table_end = self.phdr_offset + table.len() as u64;
        plan.own(table);
        plan.zeros(self.resume_output - table_end);
        plan.zeros(self.old_fatbin_end - self.resume_input);
        copy_patched(&mut plan, data, &self.patches, self.old_fatbin_end, data.len() as u64);
        plan
    }
}
