//! `prune` for NVIDIA CUDA fat binaries (zero mode): the `.nv_fatbin` and
//! `__nv_relfatbin` sections of objects, executables and shared libraries,
//! and standalone `.fatbin` files.
//!
//! Each fat binary is rewritten at its own offset with only its kept
//! entries, copied as stored (`cuda::write`), and its header's size field
//! updated; in a section the freed bytes after it become zeros, so every
//! other fat binary, the `.nvFatBinSegment` records (which point at fat
//! binary starts) and every relocation stay valid. `cuobjdump`, `nvlink`
//! and the driver skip zero bytes between fat binaries. A standalone
//! `.fatbin` has no address to keep: its fat binaries are written back to
//! back, smaller (`cuobjdump` refuses zero bytes at the end of a `.fatbin`
//! file).
//!
//! What stays, as NVIDIA's `nvprune` names targets: `--keep sm_80` keeps
//! the sm_80 cubin (not the PTX), `--keep compute_80` the compute_80 PTX,
//! `--keep lto_80` the sm_80 NVVM IR; suffixes count (`sm_90a` is not
//! `sm_90`). `--keep-gpu sm_86` keeps, per fat binary, what the CUDA
//! driver would load on an sm_86 GPU (`inspect::select_cuda`'s rules,
//! relocatable fat binaries judged as if they were loaded). A
//! concatenated entry (`nvcc --concat`: several cubins compressed as one
//! stream) is kept whole when any of its cubins stays, because compressed
//! data is never re-encoded.

use super::{EntryFate, PruneError, Rules, UnitChange};
use offload_format::cuda::{self, Arch, EntryKind, FatBinary, write};
use offload_format::elf::{ElfFile, SHT_NOBITS, SHT_REL, SHT_RELA};
pub(crate) use offload_inspect::keep::cuda::parse_target;
use offload_inspect::keep::cuda::{ImageGroup, decide_images};
use offload_inspect::layout::{self, UnitKind};

/// Section names that hold CUDA fat binaries.
pub const SECTIONS: [&[u8]; 2] = [b".nv_fatbin", b"__nv_relfatbin"];

/// The (kind, arch) pairs an entry stands for: itself, or a concatenated
/// entry's cubins.
fn images(entry: &cuda::Entry) -> Vec<(EntryKind, Arch, u64)> {
    let h = entry.header;
    match h.kind() {
        EntryKind::Concat => entry
            .children()
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.header.kind(), c.header.arch(), c.header.flags))
            .collect(),
        kind => vec![(kind, h.arch(), h.flags)],
    }
}

/// Which entries of one fat binary stay.
fn decide(rules: &Rules, entries: &[cuda::Entry]) -> Vec<bool> {
    let groups: Vec<ImageGroup> = entries.iter().map(images).collect();
    decide_images(rules, &groups)
}

/// The ID `offload list` gives an entry (`cuda-elf-sm_90a`); a
/// concatenated entry is named by its cubins (`cuda-concat-sm_75+sm_80`).
fn entry_id(entry: &cuda::Entry) -> String {
    if entry.header.kind() == EntryKind::Concat {
        let archs: Vec<String> = images(entry).iter().map(|(_, arch, _)| arch.to_string()).collect();
        return format!("cuda-concat-{}", archs.join("+"));
    }
    format!("cuda-{}-{}", entry.header.kind().name(), entry.header.arch())
}

/// Code-object bytes an entry stands for (decoded size when compressed).
fn entry_size(entry: &cuda::Entry) -> u64 {
    if entry.header.codec().is_some() { entry.header.uncompressed_size } else { entry.header.payload_size }
}

/// Plans the fat binaries of `region`, which lies at `offset` in the file
/// (a section, or the whole of a `.fatbin` file). `in_place`: freed bytes
/// become zeros and nothing moves; otherwise each fat binary shrinks.
pub(crate) fn plan_region<'a>(
    region: &'a [u8],
    offset: u64,
    rules: &Rules,
    in_place: bool,
) -> Result<Vec<UnitChange<'a>>, PruneError> {
    let mut changes = Vec::new();
    for found in cuda::fat_binaries(region) {
        let fail =
            |at: usize, e: cuda::CudaError| PruneError::Unit { offset: offset + at as u64, reason: e.to_string() };
        let (at, fatbin): (usize, FatBinary<'a>) = found.map_err(|e| fail(0, e))?;
        let entries: Vec<cuda::Entry<'a>> = fatbin.entries().collect::<Result<_, _>>().map_err(|e| fail(at, e))?;
        let keep = decide(rules, &entries);
        let fates: Vec<EntryFate> = entries
            .iter()
            .zip(&keep)
            .map(|(e, &kept)| EntryFate { id: entry_id(e), size: entry_size(e), kept })
            .collect();
        let file_offset = offset + at as u64;
        if !rules.allow_empty && !fates.is_empty() && fates.iter().all(|f| !f.kept) {
            let held = fates.iter().map(|f| f.id.as_str()).collect::<Vec<_>>().join(", ");
            return Err(PruneError::Empty { offset: file_offset, held });
        }
        let used = fatbin.data.len() as u64;
        let unit = layout::FatBinary {
            offset: file_offset,
            section_offset: at as u64,
            used,
            extent: used,
            kind: UnitKind::Cuda,
        };
        let mut change = UnitChange { unit, entries: fates, new_used: used, new_version: None, replacement: None };
        if keep.iter().any(|&k| !k) {
            let mut rebuilt = write::with_entries(&fatbin, &keep).map_err(|e| fail(at, e))?;
            change.new_used = rebuilt.len();
            if in_place {
                rebuilt.zeros(used.saturating_sub(change.new_used));
            }
            change.replacement = Some(rebuilt);
        }
        changes.push(change);
    }
    Ok(changes)
}

/// Whether an ELF file has a CUDA fat binary section.
pub(crate) fn has_sections(file: &ElfFile) -> bool {
    (1..file.sections.len()).any(|i| file.section_name(i).is_ok_and(|n| SECTIONS.contains(&n)))
}

/// Plans every CUDA fat binary section of an ELF file, in section order
/// (sorted by offset: the output plan walks the file once).
pub(crate) fn plan_elf<'a>(file: &ElfFile<'a>, rules: &Rules) -> Result<Vec<UnitChange<'a>>, PruneError> {
    let elf = |e: offload_format::elf::ElfError| PruneError::Layout(layout::LayoutError::Elf(e));
    let mut sections: Vec<usize> = (1..file.sections.len())
        .filter(|&i| file.sections[i].sh_type != SHT_NOBITS)
        .filter(|&i| file.section_name(i).is_ok_and(|n| SECTIONS.contains(&n)))
        .collect();
    sections.sort_by_key(|&i| file.sections[i].offset);
    // Relocations applied inside a fat binary would land on moved bytes;
    // no toolchain writes any, so a file that has some is refused.
    let relocated = (1..file.sections.len()).find(|&r| {
        let sh = file.sections[r];
        matches!(sh.sh_type, SHT_RELA | SHT_REL) && sections.contains(&(sh.info as usize))
    });
    if let Some(r) = relocated {
        let reason = "relocations apply inside this CUDA fat binary section; its entries cannot move".into();
        return Err(PruneError::Unit { offset: file.sections[r].offset, reason });
    }
    let mut changes = Vec::new();
    let mut end = 0u64;
    for &i in &sections {
        let sh = file.sections[i];
        if sh.offset < end {
            return Err(PruneError::Unit { offset: sh.offset, reason: "CUDA fat binary sections overlap".into() });
        }
        end = sh.offset.saturating_add(sh.size);
        let region = file.section_data(i).map_err(elf)?;
        changes.extend(plan_region(region, sh.offset, rules, true)?);
    }
    check_wrappers(file, &sections, &changes)?;
    Ok(changes)
}

/// In a linked image, every `.nvFatBinSegment` record that points into a
/// fat binary section must point at the start of a fat binary: those
/// starts are what zero mode keeps in place. (In an object the address
/// comes from a relocation against the section; nvcc's point at offset 0.)
fn check_wrappers(file: &ElfFile, sections: &[usize], changes: &[UnitChange]) -> Result<(), PruneError> {
    use offload_format::elf::ET_REL;
    if file.header.e_type == ET_REL {
        return Ok(());
    }
    let Some(seg) = (1..file.sections.len())
        .find(|&i| file.section_name(i).is_ok_and(|n| n == cuda::wrapper::WRAPPER_SECTION.as_bytes()))
    else {
        return Ok(());
    };
    let records = file.section_data(seg).map_err(|e| PruneError::Layout(layout::LayoutError::Elf(e)))?;
    for (record, w) in cuda::wrapper::wrappers(records).enumerate().filter(|(_, w)| w.is_valid()) {
        let inside = sections.iter().map(|&i| file.sections[i]).find_map(|sh| {
            let rel = w.address.checked_sub(sh.addr).filter(|&rel| rel < sh.size)?;
            Some(sh.offset + rel)
        });
        let Some(at) = inside else { continue };
        if !changes.iter().any(|c| c.unit.offset == at) {
            let offset = file.sections[seg].offset + w.offset as u64;
            return Err(PruneError::Dangling { record, offset, pointer: w.address });
        }
    }
    Ok(())
}

/// The file map `--mode cut` needs for a linked CUDA executable or shared
/// library whose zero-mode plan is `pruned` ([`super::files::plan_file`]):
/// its `.nv_fatbin` fat binaries, which must be exactly the planned ones,
/// and the `.nvFatBinSegment` records, each leading to one of them.
/// Relocatable device code (`__nv_relfatbin`, registered through
/// `__cudaRegisterLinkedBinary` and a pre-linked module table) is refused:
/// the cutter packs one section.
pub fn linked_map(data: &[u8], pruned: &super::Pruned) -> Result<layout::FileMap, PruneError> {
    let refuse = |why: &str| PruneError::CutRefused(why.into());
    let file = ElfFile::parse(data).map_err(|e| PruneError::Layout(layout::LayoutError::Elf(e)))?;
    let named = |n: &[u8]| {
        (1..file.sections.len()).any(|i| file.section_name(i).is_ok_and(|m| m == n) && file.sections[i].size > 0)
    };
    if named(b"__nv_relfatbin") {
        return Err(refuse("__nv_relfatbin holds relocatable device code (-rdc); only .nv_fatbin is cut"));
    }
    let map = layout::FileMap::read_cuda(data)?;
    let planned: Vec<u64> = pruned.units.iter().map(|u| u.unit.offset).collect();
    let mapped: Vec<u64> = map.units.iter().map(|u| u.offset).collect();
    if planned != mapped {
        return Err(refuse("the fat binaries of .nv_fatbin are not the ones planned"));
    }
    if let Some(&record) = map.dangling().first() {
        let w = &map.wrappers[record];
        return Err(PruneError::Dangling { record, offset: w.offset, pointer: w.pointer });
    }
    Ok(map)
}

#[cfg(test)]
#[path = "cuda_tests.rs"]
mod tests;
