//! `prune --mode cut` for OpenMP programs and libraries: the kept
//! OffloadBinaries are packed from the start of `.llvm.offloading` (each
//! keeping its alignment, so they stay back to back as `llvm-objdump
//! --offloading` reads them), every kept `__tgt_device_image` gets its new
//! `ImageStart`/`ImageEnd` (through the storages the map knows: RELA
//! addend and the copy in place, RELR or absolute word), the table is
//! compacted and `NumDeviceImages` lowered as in zero mode, and then the
//! freed pages leave the file by the one cutter HIP and CUDA use
//! (`prune::cut`): the PT_LOAD is split, the program header table moves
//! into the freed bytes, later offsets shift. Every allocated section
//! other than `.llvm.offloading` keeps its address and bytes, except the
//! table words and counts.

use super::{Edit, OpenMpPruneError, OpenMpPruned, Rules, plan, plan_with};
use crate::prune::PruneError;
use crate::prune::check_cut::verify_layout;
use crate::prune::cut::{Cut, CutPlan, Packed, Patch, cut_section, packed_offsets};
use offload_format::plan::Plan;
use offload_inspect::layout::openmp::OpenMpMap;
use std::collections::HashSet;

/// What a cut of an OpenMP file does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenMpCut {
    /// The decisions and the edits outside `.llvm.offloading` (no zeroed
    /// images: they leave).
    pub pruned: OpenMpPruned,
    /// The layout, or why not worth it.
    pub cut: Cut,
}

impl OpenMpCut {
    /// The output file, when the cut is planned.
    pub fn output_plan<'a>(&self, data: &'a [u8]) -> Option<Plan<'a>> {
        let Cut::Planned(cut) = &self.cut else { return None };
        Some(output_plan(cut, data, &self.pruned))
    }
}

/// The output of `cut` (planned for `pruned`, of `data`): the kept images,
/// packed, and the rest of the file as the cut lays it out.
pub fn output_plan<'a>(cut: &CutPlan, data: &'a [u8], pruned: &OpenMpPruned) -> Plan<'a> {
    cut.output_with(data, |i, plan| {
        let Some(fate) = pruned.images.get(i).filter(|f| f.kept) else { return 0 };
        let start = usize::try_from(fate.image.offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(usize::try_from(fate.image.size).unwrap_or(usize::MAX));
        plan.borrow(data.get(start..end).unwrap_or(&[]));
        fate.image.size
    })
}

/// Plans the cut of `data` (mapped as `map`). A [`Cut::TooSmall`] answer
/// means: write [`plan`]'s zero-mode output instead.
///
/// ```
/// use offload_inspect::layout::openmp::OpenMpMap;
/// use offload_rewrite::prune::{Cut, Rules, parse_target, openmp};
///
/// // lld PIE with an x86_64 image (15.7 KiB) and an amdgcn gfx90a one.
/// let data = include_bytes!("../../../../offload-testkit/fixtures/prune/omp/lld_pie");
/// let map = OpenMpMap::read(data)?;
/// let rules = Rules { keep: vec![parse_target("gfx90a")?], ..Default::default() };
/// let planned = openmp::plan_cut(data, &map, &rules)?;
/// let output = planned.output_plan(data).expect("planned").to_vec();
/// let Cut::Planned(cut) = &planned.cut else { unreachable!() };
/// openmp::verify_cut(&output, data, &map, &planned.pruned, cut)?;
/// assert_eq!(output.len() as u64, data.len() as u64 - cut.removed);
/// assert_eq!(OpenMpMap::read(&output)?.images.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plan_cut(data: &[u8], map: &OpenMpMap, rules: &Rules) -> Result<OpenMpCut, OpenMpPruneError> {
    let refuse = |why: &str| OpenMpPruneError::Cut(PruneError::CutRefused(why.into()));
    // The zero-mode plan decides what stays (and refuses what it refuses).
    let decided = plan(map, rules)?;
    if decided.descriptors.iter().any(|d| d.new_count == 0) {
        return Err(refuse("a descriptor would register no image; its table would lead nowhere"));
    }
    let old_offsets: Vec<u64> = map.images.iter().map(|im| im.offset - map.section_offset).collect();
    let new_sizes: Vec<u64> = decided.images.iter().map(|f| if f.kept { f.image.size } else { 0 }).collect();
    let words: HashSet<u64> =
        map.descriptors.iter().flat_map(|d| &d.records).flat_map(|r| [r.fields[0].addr, r.fields[1].addr]).collect();
    let packed = Packed {
        name: ".llvm.offloading",
        offset: map.section_offset,
        addr: map.section_addr,
        size: map.section_size,
        relocatable: false,
        old_offsets: &old_offsets,
        new_sizes: &new_sizes,
        words: &words,
    };
    let new_offsets = packed_offsets(&packed);
    let moved = |image: usize, value: u64| {
        let (Some(im), Some(new)) = (map.images.get(image), new_offsets.get(image)) else { return value };
        value.wrapping_sub(im.addr).wrapping_add(map.section_addr + new)
    };
    let pruned = plan_with(map, rules, &moved, false)?;
    let mut patches = Vec::new();
    for (offset, edit) in &pruned.edits {
        match edit {
            Edit::Bytes(bytes) => patches.push(Patch { offset: *offset, bytes: bytes.clone() }),
            Edit::Zeros(_) => return Err(refuse("a zeroing edit in a cut plan")),
        }
    }
    let cut = cut_section(data, &packed, patches)?;
    Ok(OpenMpCut { pruned, cut })
}

fn fail(msg: String) -> OpenMpPruneError {
    OpenMpPruneError::Verify(msg)
}

/// Checks a cut `output` against `input`, its map and the plan: the
/// layout checks every cut passes (program and section headers, every
/// byte outside `.llvm.offloading` the input's but the planned fields),
/// then, read back, exactly the kept images at their planned offsets with
/// the input's bytes, and each descriptor registering exactly its kept
/// images, in order, with their host entry tables.
pub fn verify_cut(
    output: &[u8],
    input: &[u8],
    map: &OpenMpMap,
    pruned: &OpenMpPruned,
    cut: &CutPlan,
) -> Result<(), OpenMpPruneError> {
    verify_layout(output, input, cut)?;
    let out = OpenMpMap::read(output).map_err(|e| fail(format!("it cannot be read back: {e}")))?;
    let kept: Vec<(usize, u64)> = pruned
        .images
        .iter()
        .zip(&cut.unit_offsets)
        .enumerate()
        .filter(|(_, (f, _))| f.kept)
        .map(|(i, (_, &at))| (i, at))
        .collect();
    if out.images.iter().map(|i| i.offset).ne(kept.iter().map(|k| k.1)) {
        return Err(fail(format!("it holds {} images, {} planned where planned", out.images.len(), kept.len())));
    }
    for (new, &(i, _)) in out.images.iter().zip(&kept) {
        let old = &map.images[i];
        let bytes = |d: &[u8], at: u64| {
            let at = usize::try_from(at).ok()?;
            d.get(at..at.checked_add(usize::try_from(old.size).ok()?)?).map(<[u8]>::to_vec)
        };
        if new.size != old.size
            || bytes(output, new.offset).is_none()
            || bytes(output, new.offset) != bytes(input, old.offset)
        {
            return Err(fail(format!("the image now at {:#x} is not the input's", new.offset)));
        }
    }
    if out.descriptors.len() != map.descriptors.len() {
        return Err(fail(format!("{} descriptors, {} planned", out.descriptors.len(), map.descriptors.len())));
    }
    for ((old, change), new) in map.descriptors.iter().zip(&pruned.descriptors).zip(&out.descriptors) {
        let expected: Vec<(usize, u64, u64)> = old
            .records
            .iter()
            .filter(|r| pruned.images.get(r.image).is_some_and(|f| f.kept))
            .map(|r| (r.image, r.fields[2].value, r.fields[3].value))
            .collect();
        let got: Vec<(usize, u64, u64)> = new
            .records
            .iter()
            .map(|r| (kept.get(r.image).map_or(usize::MAX, |k| k.0), r.fields[2].value, r.fields[3].value))
            .collect();
        if new.addr != old.addr || new.count != change.new_count || got != expected {
            return Err(fail(format!("the descriptor at {:#x} does not register exactly the kept images", old.addr)));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "cut_tests.rs"]
mod tests;
