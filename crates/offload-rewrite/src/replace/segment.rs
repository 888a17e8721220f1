//! Moving a linked file's fat binary section (HIP's `.hip_fatbin` or
//! CUDA's `.nv_fatbin`, whichever the file map describes) to a new PT_LOAD
//! at the end of the file when a rebuilt fat binary outgrows its place
//! (docs/formats/host-references.md §4 (c)). One mover for both: the two differ only in the
//! section names and the wrapper magic, which the map already carries.
//!
//! The whole section moves, not only the fat binary that grew: every tool
//! that reads HIP host binaries (ours, `llvm-objdump --offloading`, kpack)
//! or CUDA ones (`cuobjdump`) finds fat binaries through the one section of
//! that name, and the file map refuses two. The other fat binaries keep their bytes and their
//! alignment. The new segment is read-only and holds the program header
//! table (one entry longer) followed by the section; it starts at a file
//! offset `o` and address `o + (p_vaddr - p_offset of the first PT_LOAD)`,
//! above every segment, so that kernels that compute `AT_PHDR` from
//! `e_phoff` (docs/formats/host-references.md §7) still find the table. Then every reference is
//! redirected: the wrapper pointers by the file map's one pointer writer
//! (`FileMap::pointer_edits`: `R_X86_64_RELATIVE` addends and GNU ld's
//! copies in place, RELR and absolute words, symbol values), and the
//! values of every other symbol of the section in `.dynsym` and
//! `.symtab`. A relocation into the section that is not a wrapper's is
//! refused. The old bytes of the section are zeroed; its file range stays
//! mapped.
//! x86-64 only, as the file map is.

use super::{Placement, ReplaceError};
use offload_format::bytes::{u16_le, u64_le};
use offload_format::elf::segments::{self, PHDR_SIZE, Segment};
use offload_format::elf::{ET_DYN, ET_EXEC, PF_R, R_X86_64_RELATIVE};
use offload_format::elf::{ElfFile, SHF_ALLOC, SHT_DYNSYM, SHT_RELA, SHT_SYMTAB};
use offload_format::plan::Plan;
use offload_inspect::layout::{FatBinary, FileMap, Storage};
use std::collections::BTreeMap;

pub(super) use offload_format::elf::segments::{PT_LOAD, PT_PHDR};
/// Most zero padding written to keep a new segment's address equal to its
/// offset plus the first PT_LOAD's bias (a large `.bss` needs that much).
const MAX_GAP: u64 = 64 << 20;

/// Lays out a fat-binary region (`.hip_fatbin`, or a whole bundle file)
/// with unit `r` replaced by `rebuilt`. Units before it keep their
/// offsets; units after it shift by a multiple of the units' alignment.
/// Returns the content and each unit's new offset in it.
pub(super) fn relaid<'a>(
    region: &'a [u8],
    units_base: u64,
    units: &[FatBinary],
    r: usize,
    rebuilt: Plan<'a>,
) -> (Plan<'a>, Vec<u64>) {
    let rel = |u: &FatBinary| u.offset - units_base;
    // The largest power of two up to 4096 dividing every unit's offset.
    let mut align = 4096u64;
    while align > 1 && units.iter().any(|u| rel(u) % align != 0) {
        align /= 2;
    }
    let old = units[r];
    let (start, end) = (rel(&old) as usize, (rel(&old) + old.extent) as usize);
    let n = rebuilt.len();
    let last = r + 1 == units.len();
    let pad = if last { 0 } else { n.div_ceil(align) * align - n };
    let mut out = Plan::borrowed(region.get(..start).unwrap_or(&[]));
    out.pieces.extend(rebuilt.pieces);
    out.zeros(pad);
    if !last {
        out.borrow(region.get(end..).unwrap_or(&[]));
    }
    // Units after `r` start at or after its end, so this cannot underflow.
    let shift = |u: &FatBinary| rel(u) - old.extent + (n + pad);
    let offsets = units.iter().enumerate().map(|(j, u)| if j <= r { rel(u) } else { shift(u) }).collect();
    (out, offsets)
}

/// The result of moving the fat binary section.
pub(super) struct Moved<'a> {
    pub placement: Placement,
    pub unit_offsets: Vec<u64>,
    pub zeroed: Vec<(u64, u64)>,
    pub output: Plan<'a>,
}

/// The program headers (one reader for the crate: [`segments::read`]).
pub(super) fn read_phdrs(data: &[u8]) -> Result<Vec<Segment>, String> {
    segments::read(data).map(|(_, table)| table).map_err(|e| e.to_string())
}

/// Small edits to the input, by file offset.
struct Edits(BTreeMap<u64, Vec<u8>>);

impl Edits {
    fn word(&mut self, at: u64, value: u64) {
        self.0.insert(at, value.to_le_bytes().to_vec());
    }
    /// The input with the edits and the zeroed range applied.
    fn apply<'a>(&self, data: &'a [u8], zero: (u64, u64)) -> Result<Plan<'a>, ReplaceError> {
        let mut all: Vec<(u64, Option<&Vec<u8>>, u64)> =
            self.0.iter().map(|(at, b)| (*at, Some(b), b.len() as u64)).collect();
        all.push((zero.0, None, zero.1));
        all.sort_by_key(|e| e.0);
        let mut plan = Plan::new();
        let mut at = 0u64;
        for (start, bytes, len) in all {
            let end = start.checked_add(len).filter(|&e| start >= at && e <= data.len() as u64);
            let Some(end) = end else {
                return Err(ReplaceError::Segments(format!("overlapping or out-of-file edit at {start:#x}")));
            };
            plan.borrow(&data[at as usize..start as usize]);
            match bytes {
                Some(b) => plan.own(b.clone()),
                None => plan.zeros(len),
            }
            at = end;
        }
        plan.borrow(&data[at as usize..]);
        Ok(plan)
    }
}

/// Moves the fat binary section of `data` (mapped by `map`: `.hip_fatbin`
/// or `.nv_fatbin`) to a new segment, with unit `r` replaced by `rebuilt`.
pub(super) fn move_fatbin<'a>(
    data: &'a [u8],
    map: &FileMap,
    r: usize,
    rebuilt: Plan<'a>,
) -> Result<Moved<'a>, ReplaceError> {
    let refuse = |why: String| ReplaceError::Segments(why);
    let (fat_name, wrapper_name) = (map.section.name(), map.section.wrapper_section());
    let elf = ElfFile::parse(data).map_err(ReplaceError::SegmentsElf)?;
    if !matches!(elf.header.e_type, ET_EXEC | ET_DYN) {
        return Err(refuse("only executables and shared libraries have segments".into()));
    }
    let phdrs = segments::read(data).map_err(ReplaceError::SegmentTable)?.1;
    // The rewrite keeps every segment: they must be sound to begin with.
    segments_sound(data).map_err(|e| refuse(format!("the input's program headers: {e}")))?;
    let loads: Vec<&Segment> = phdrs.iter().filter(|p| p.kind == PT_LOAD).collect();
    let (Some(first), Some(last_index)) = (loads.first(), phdrs.iter().rposition(|p| p.kind == PT_LOAD)) else {
        return Err(refuse("the file has no PT_LOAD segment".into()));
    };
    if loads.windows(2).any(|w| w[1].vaddr < w[0].vaddr) {
        return Err(refuse("its PT_LOAD segments are not sorted by address".into()));
    }
    let align = loads.iter().map(|p| p.align).max().unwrap_or(0).max(4096);
    if !align.is_power_of_two() || align > 1 << 30 {
        return Err(refuse(format!("segment alignment {align:#x} is not a usable power of two")));
    }
    let delta = first.vaddr.wrapping_sub(first.offset);
    if delta % align != 0 {
        return Err(refuse("the first PT_LOAD's address and offset are not congruent".into()));
    }
    let max_end = loads
        .iter()
        .map(|p| p.vaddr.checked_add(p.memsz))
        .try_fold(0u64, |m, e| e.map(|e| m.max(e)))
        .ok_or_else(|| refuse("a segment ends past the address space".into()))?;
    let file_len = data.len() as u64;
    let up = |v: u64| v.div_ceil(align).checked_mul(align);
    let identity = up(file_len.max(max_end.saturating_sub(delta))).filter(|o| o - file_len <= MAX_GAP);
    let (seg_offset, seg_addr) = match identity {
        Some(o) => (o, o.checked_add(delta).ok_or_else(|| refuse("addresses overflow".into()))?),
        // A shared library is mapped by ld.so, which finds the table
        // through PT_PHDR or the PT_LOAD holding it: any congruent address
        // above the others will do, without padding.
        None if segments::is_shared_library(elf.header.e_type, &phdrs) => match (up(file_len), up(max_end)) {
            (Some(o), Some(a)) => (o, a),
            _ => return Err(refuse("addresses overflow".into())),
        },
        None => {
            return Err(refuse(
                "an executable's new segment would need more than 64 MiB of padding (a large .bss) to keep its address equal to its offset"
                    .into(),
            ));
        }
    };
    let count = phdrs.len() + 1;
    if count >= 0xffff {
        return Err(refuse("too many program headers".into()));
    }
    let table_len = count as u64 * PHDR_SIZE;
    let fatbin_rel = table_len.div_ceil(4096) * 4096;

    let fat_index = (1..elf.sections.len())
        .find(|&i| elf.section_name(i).ok() == Some(fat_name.as_bytes()))
        .ok_or_else(|| refuse(format!("no {fat_name} section")))?;
    let region = data
        .get(map.fatbin_offset as usize..(map.fatbin_offset + map.fatbin_size) as usize)
        .ok_or_else(|| refuse(format!("{fat_name} lies outside the file")))?;
    let (content, offsets) = relaid(region, map.fatbin_offset, &map.units, r, rebuilt);
    let new_size = content.len();
    // Every address and offset below lies in the new segment.
    let seg_len = fatbin_rel + new_size;
    if seg_addr.checked_add(seg_len).is_none() || seg_offset.checked_add(seg_len).is_none() {
        return Err(refuse("the new segment would end past the address space".into()));
    }
    let (new_off, new_addr) = (seg_offset + fatbin_rel, seg_addr + fatbin_rel);
    let (old_addr, old_size) = (map.fatbin_addr, map.fatbin_size);
    let old_units: Vec<u64> = map.units.iter().map(|u| u.section_offset).collect();
    let replaced_start = old_units[r];
    // Where an address into the old section is now. A pointer into the
    // middle of the replaced unit has no new counterpart.
    let moved = |a: u64| -> Option<u64> {
        let rel = a.checked_sub(old_addr).filter(|&rel| rel <= old_size)?;
        if rel == old_size {
            return Some(new_addr + new_size);
        }
        match map.units.iter().rposition(|u| u.section_offset <= rel) {
            None => Some(new_addr + rel),
            Some(j) if j == r => (rel == replaced_start).then_some(new_addr + offsets[r]),
            Some(j) => Some(new_addr + offsets[j] + (rel - old_units[j])),
        }
    };
    let unmovable = |what: String, a: u64| {
        refuse(format!("{what} points at {a:#x}, inside the replaced fat binary or outside {fat_name}"))
    };

    let wrapper_words: Vec<u64> = map.wrappers.iter().map(|w| w.addr.wrapping_add(8)).collect();
    let mut edits = Edits(BTreeMap::new());
    edits.word(32, seg_offset);
    edits.0.insert(56, (count as u16).to_le_bytes().to_vec());
    let shoff = elf_shoff(data)?;
    let sh_at = shoff + fat_index as u64 * 64;
    edits.word(sh_at + 16, new_addr);
    edits.word(sh_at + 24, new_off);
    edits.word(sh_at + 32, new_size);
    // The symbol tables: by type, and whatever a relocation section names
    // as its table (the file map reads symbols from there, whatever its type).
    let linked: Vec<usize> =
        elf.sections.iter().filter(|sh| sh.sh_type == SHT_RELA).map(|sh| sh.link as usize).collect();
    for (index, sh) in elf.sections.iter().enumerate() {
        let table = elf.section_data(index).map_err(|e| ReplaceError::SegmentsRead(e.into()))?;
        if sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM || linked.contains(&index) {
            for (i, sym) in table.chunks_exact(24).enumerate() {
                // Symbols are 24 bytes each: these reads cannot fail.
                let shndx = u16_le(sym, 6).unwrap_or(0);
                let value = u64_le(sym, 8).unwrap_or(0);
                if usize::from(shndx) != fat_index {
                    continue;
                }
                let to = moved(value).ok_or_else(|| unmovable(format!("symbol {i} of section {index}"), value))?;
                edits.word(sh.offset + i as u64 * 24 + 8, to);
            }
        } else if sh.sh_type == SHT_RELA && sh.flags & SHF_ALLOC != 0 {
            for (i, rel) in table.chunks_exact(24).enumerate() {
                let (r_offset, info, addend) =
                    (u64_le(rel, 0).unwrap_or(0), u64_le(rel, 8).unwrap_or(0), u64_le(rel, 16).unwrap_or(0));
                if info as u32 != R_X86_64_RELATIVE || addend.wrapping_sub(old_addr) >= old_size {
                    continue;
                }
                // Only wrapper records are known to point into the section
                // (kpack checks the same); anything else is not understood.
                if !wrapper_words.contains(&r_offset) {
                    return Err(refuse(format!(
                        "relocation {i} of section {index} (at {r_offset:#x}) points into {fat_name} but is not a wrapper record's pointer"
                    )));
                }
                // The wrapper pointers themselves are rewritten below.
            }
        }
    }
    let mut new_pointers = Vec::with_capacity(map.wrappers.len());
    for (record, w) in map.wrappers.iter().enumerate() {
        // The symbols of the section move; one of another section whose
        // value happens to lie in it (a damaged file) would not.
        if let Storage::Symbolic { symbol, section, .. } = &w.storage
            && usize::from(*section) != fat_index
        {
            return Err(refuse(format!(
                "wrapper record {record} points through symbol '{symbol}', which is not defined in {fat_name}"
            )));
        }
        new_pointers.push(moved(w.pointer).ok_or_else(|| unmovable(format!("wrapper record {record}"), w.pointer))?);
    }
    // One writer for the four ways a pointer is stored (RELA addend and its
    // copy in place, RELR or absolute word, symbol value): the file map's.
    let pointer_edits = map.pointer_edits(data, &new_pointers).map_err(|e| ReplaceError::SegmentsRead(e.into()))?;
    for edit in pointer_edits {
        edits.word(edit.offset, edit.value);
    }

    // Every rewritten byte must belong to what the move is meant to
    // change; a section laid over them (only a damaged file has one) is
    // not understood.
    let zero = (map.fatbin_offset, map.fatbin_size);
    for (index, sh) in elf.sections.iter().enumerate() {
        let name = elf.section_name(index).unwrap_or(b"");
        let expected = matches!(sh.sh_type, SHT_RELA | SHT_SYMTAB | SHT_DYNSYM)
            || name == fat_name.as_bytes()
            || name == wrapper_name.as_bytes();
        if sh.flags & SHF_ALLOC == 0 || sh.sh_type == offload_format::elf::SHT_NOBITS || expected || sh.size == 0 {
            continue;
        }
        let overlaps = |at: u64, len: u64| at < sh.offset.saturating_add(sh.size) && sh.offset < at.saturating_add(len);
        let hit =
            edits.0.iter().map(|(at, b)| (*at, b.len() as u64)).chain([zero]).find(|&(at, len)| overlaps(at, len));
        if let Some((at, _)) = hit {
            return Err(refuse(format!(
                "section {} overlaps bytes the move rewrites at {at:#x}",
                elf.display_name(index)
            )));
        }
    }
    let mut table = Vec::with_capacity(table_len as usize);
    for (i, p) in phdrs.iter().enumerate() {
        let mut p = *p;
        if p.kind == PT_PHDR {
            (p.offset, p.vaddr, p.paddr, p.filesz, p.memsz) = (seg_offset, seg_addr, seg_addr, table_len, table_len);
        }
        table.extend_from_slice(&segments::write(&[p]));
        if i == last_index {
            let load = Segment {
                kind: PT_LOAD,
                flags: PF_R,
                offset: seg_offset,
                vaddr: seg_addr,
                paddr: seg_addr,
                filesz: seg_len,
                memsz: seg_len,
                align,
            };
            table.extend_from_slice(&segments::write(&[load]));
        }
    }
    let mut output = edits.apply(data, (map.fatbin_offset, map.fatbin_size))?;
    output.zeros(seg_offset - file_len);
    output.own(table);
    output.zeros(fatbin_rel - table_len);
    output.pieces.extend(content.pieces);
    Ok(Moved {
        placement: Placement::NewSegment { offset: new_off, addr: new_addr, segment_offset: seg_offset },
        unit_offsets: offsets.iter().map(|o| new_off + o).collect(),
        zeroed: vec![(map.fatbin_offset, map.fatbin_size), (file_len, seg_offset - file_len)],
        output,
    })
}

fn elf_shoff(data: &[u8]) -> Result<u64, ReplaceError> {
    u64_le(data, 40).ok_or_else(|| ReplaceError::Segments("no section header offset".into()))
}

/// PT_LOADs sorted, congruent, inside the file and not overlapping;
/// PT_PHDR before them and inside one.
pub(super) fn segments_sound(data: &[u8]) -> Result<(), String> {
    let phdrs = read_phdrs(data)?;
    let loads: Vec<_> = phdrs.iter().filter(|p| p.kind == PT_LOAD).collect();
    for w in loads.windows(2) {
        if w[1].vaddr < w[0].vaddr.saturating_add(w[0].memsz) {
            return Err(format!("PT_LOADs at {:#x} and {:#x} overlap or are out of order", w[0].vaddr, w[1].vaddr));
        }
    }
    for l in &loads {
        if l.align > 1 && l.offset % l.align != l.vaddr % l.align {
            return Err(format!("the PT_LOAD at {:#x} is not congruent with its offset", l.vaddr));
        }
        if l.offset.checked_add(l.filesz).is_none_or(|e| e > data.len() as u64) {
            return Err(format!("the PT_LOAD at {:#x} runs past the end of the file", l.vaddr));
        }
    }
    let first_load = phdrs.iter().position(|p| p.kind == PT_LOAD);
    if let Some(at) = phdrs.iter().position(|p| p.kind == PT_PHDR) {
        let p = phdrs[at];
        let inside = loads.iter().any(|l| {
            p.vaddr >= l.vaddr
                && p.vaddr.saturating_add(p.filesz) <= l.vaddr.saturating_add(l.filesz)
                && p.offset.checked_sub(l.offset) == Some(p.vaddr - l.vaddr)
        });
        if first_load.is_some_and(|f| f < at) || !inside {
            return Err("PT_PHDR does not lead the PT_LOADs or is not mapped by one".into());
        }
    }
    Ok(())
}
