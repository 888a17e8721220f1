//! `prune` for OpenMP offloading programs and libraries (clang's new
//! driver), zero mode: nothing moves (docs/formats/host-references.md §2, §6).
//!
//! Dropping an image takes three edits: its record leaves the
//! `__tgt_device_image` table (later records move down one slot: each
//! field's RELA addend, and its word in place when the linker stored a
//! copy there; or the RELR or absolute word), the descriptor's
//! `NumDeviceImages` shrinks, and the OffloadBinary's bytes in
//! `.llvm.offloading` become zeros. Slots past the new count get a copy
//! of the last kept record, so no pointer is left leading into zeroed
//! bytes (libomptarget reads only `NumDeviceImages` records). Dropped
//! images before the first kept one or after the last also leave the
//! section header's extent (`sh_addr`, `sh_offset`, `sh_size`), so that
//! `llvm-objdump --offloading` still reads the section. Every other byte
//! stays, so program headers, symbols and unwind data need no change.
//!
//! The unit that must keep an image is the descriptor: one per linked
//! program or library. libomptarget tries every registered image on every
//! plugin and skips those no plugin accepts, so dropping the image of the
//! device a program runs on turns `OMP_TARGET_OFFLOAD=MANDATORY` runs into
//! errors and default runs into host fallback.

mod check;
mod cut;

pub use check::verify;
pub use cut::{OpenMpCut, output_plan as cut_output_plan, plan_cut, verify_cut};

use super::Rules;
use offload_format::plan::Plan;
pub use offload_inspect::keep::{as_triple, same_target};
use offload_inspect::layout::Storage;
use offload_inspect::layout::openmp::{Image, OpenMpError, OpenMpMap, Record, Word};

/// Why an OpenMP file cannot be pruned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OpenMpPruneError {
    /// The file's OpenMP layout cannot be read.
    #[error(transparent)]
    Map(#[from] OpenMpError),
    /// `--keep-gpu` names a GPU; OpenMP images are chosen by triple or
    /// target ID.
    #[error("--keep-gpu is for HIP fat binaries; name OpenMP images with --keep/--drop (a triple or a target ID)")]
    KeepGpu,
    /// Pruning would leave a descriptor with no image, and
    /// [`Rules::allow_empty`] is off.
    #[error(
        "the OpenMP descriptor at address {addr:#x} would register no image (it registers {held}); use --allow-empty to allow this"
    )]
    Empty {
        /// The descriptor's address.
        addr: u64,
        /// The images it registers, for the message.
        held: String,
    },
    /// A table word given by a symbolic relocation, which zero mode does
    /// not rewrite.
    #[error("the image table word at address {addr:#x} is relocated against a symbol; it cannot be moved in place")]
    Symbolic {
        /// The word's address.
        addr: u64,
    },
    /// A dropped image that no understood table registers.
    #[error(
        "the OpenMP image at offset {offset:#x} is registered by no table this tool understands; it cannot be dropped safely"
    )]
    Unregistered {
        /// The image's file offset.
        offset: u64,
    },
    /// Two edits touch the same bytes: tables or relocations that share
    /// storage, which no linker writes.
    #[error("two edits overlap at file offset {offset:#x}: table words share storage")]
    Overlap {
        /// Where the second edit starts.
        offset: u64,
    },
    /// The output fails [`verify`] (why); a bug, reported rather than
    /// written.
    #[error("the pruned output fails its check: {0}")]
    Verify(String),
    /// `--mode cut` cannot rewrite this file (why).
    #[error(transparent)]
    Cut(#[from] super::PruneError),
}

/// One image and its fate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageFate {
    /// The image, as the map describes it.
    pub image: Image,
    /// Kept (else zeroed).
    pub kept: bool,
}

/// What happens to one descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DescriptorChange {
    /// The descriptor's address.
    pub addr: u64,
    /// `NumDeviceImages` before.
    pub old_count: u32,
    /// `NumDeviceImages` after.
    pub new_count: u32,
}

/// One byte edit of the output.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Edit {
    /// New bytes at a file offset (a table word, an addend, a count).
    Bytes(Vec<u8>),
    /// This many zeros (a dropped OffloadBinary).
    Zeros(u64),
}

/// The whole plan for one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenMpPruned {
    /// One per image of the map, in its order.
    pub images: Vec<ImageFate>,
    /// One per descriptor of the map, in its order.
    pub descriptors: Vec<DescriptorChange>,
    /// The edits, by file offset, none overlapping.
    pub edits: Vec<(u64, Edit)>,
    /// Images no descriptor registers (kept: dropping one is refused).
    pub unreferenced: Vec<usize>,
}

impl OpenMpPruned {
    /// Bytes of the dropped OffloadBinaries, all zero in the output.
    pub fn dropped_bytes(&self) -> u64 {
        self.images.iter().filter(|f| !f.kept).map(|f| f.image.size).sum()
    }
    /// How many images are dropped.
    pub fn dropped(&self) -> usize {
        self.images.iter().filter(|f| !f.kept).count()
    }
    /// The output file: the input with the edits applied.
    pub fn output_plan<'a>(&self, input: &'a [u8]) -> Plan<'a> {
        let mut plan = Plan::new();
        let mut at = 0usize;
        for (offset, edit) in &self.edits {
            // Offsets come from the map of `input`; `edits` are sorted.
            let start = usize::try_from(*offset).unwrap_or(usize::MAX).min(input.len()).max(at);
            plan.borrow(input.get(at..start).unwrap_or(&[]));
            let len = match edit {
                Edit::Bytes(b) => {
                    plan.own(b.clone());
                    b.len()
                }
                Edit::Zeros(n) => {
                    plan.zeros(*n);
                    usize::try_from(*n).unwrap_or(usize::MAX)
                }
            };
            at = start.saturating_add(len).min(input.len());
        }
        plan.borrow(input.get(at..).unwrap_or(&[]));
        plan
    }
}

/// Gives `dest` the run-time value `value`, the way `dest` is stored: the
/// one writer of table words (`replace` uses it too).
pub(crate) fn set_word(dest: &Word, value: u64, edits: &mut Vec<(u64, Edit)>) -> Result<(), OpenMpPruneError> {
    if dest.value == value {
        return Ok(());
    }
    let bytes = || Edit::Bytes(value.to_le_bytes().to_vec());
    match (&dest.storage, dest.rela_entry) {
        (Storage::Relative { .. }, Some(entry)) => {
            edits.push((entry + 16, bytes()));
            // GNU ld also writes the address in place; lld leaves zero.
            if dest.in_place != 0 {
                edits.push((dest.offset, bytes()));
            }
        }
        (Storage::Relr | Storage::Absolute, _) => edits.push((dest.offset, bytes())),
        _ => return Err(OpenMpPruneError::Symbolic { addr: dest.addr }),
    }
    Ok(())
}

fn held(map: &OpenMpMap, records: &[Record]) -> String {
    let name = |i: usize| {
        let im = &map.images[i];
        if im.arch.is_empty() { im.triple.clone() } else { format!("{} {}", im.triple, im.arch) }
    };
    records.iter().map(|r| name(r.image)).collect::<Vec<_>>().join(", ")
}

/// The section header edit that leaves dropped images before the first
/// kept one and after the last outside `.llvm.offloading`: LLVM 19's
/// `llvm-objdump --offloading` (and clang-linker-wrapper) read the section
/// as OffloadBinaries back to back and reject zeros, while the runtime
/// reads only the registered tables. Only `sh_addr`, `sh_offset` and
/// `sh_size` change; no byte moves. Zeros between two kept images cannot
/// be hidden this way (a kept image's own size must stay, since newer
/// wrappers bracket the whole OffloadBinary), so such a file still makes
/// `llvm-objdump` stop at the hole.
fn trim_section(map: &OpenMpMap, kept: &[bool]) -> Option<(u64, Edit)> {
    let mut live = map.images.iter().zip(kept).filter(|(_, k)| **k).map(|(im, _)| im);
    let first = live.next()?;
    let last = live.next_back().unwrap_or(first);
    let start = first.addr.checked_sub(map.section_addr)?;
    let end = last.addr.checked_sub(map.section_addr)?.checked_add(last.size)?;
    if start == 0 && end == map.section_size || end > map.section_size {
        return None;
    }
    let header = map.section_header.checked_add(16)?;
    if start == 0 {
        return Some((header + 16, Edit::Bytes(end.to_le_bytes().to_vec())));
    }
    let fields = [map.section_addr.checked_add(start)?, map.section_offset.checked_add(start)?, end - start];
    Some((header, Edit::Bytes(fields.iter().flat_map(|f| f.to_le_bytes()).collect())))
}

/// Decides which images of `map` (a map of a file) stay and plans the
/// edits. Nothing is written: [`OpenMpPruned::output_plan`] gives the
/// output, [`verify`] checks it.
///
/// ```
/// use offload_inspect::layout::openmp::OpenMpMap;
/// use offload_rewrite::prune::{Rules, parse_target, openmp};
///
/// // A clang 19 OpenMP program with an x86_64 and an amdgcn gfx90a image.
/// let data = include_bytes!("../../../offload-testkit/fixtures/prune/omp/gnu_pie");
/// let map = OpenMpMap::read(data)?;
/// let rules = Rules { keep: vec![parse_target("x86_64-pc-linux-gnu")?], ..Default::default() };
/// let pruned = openmp::plan(&map, &rules)?;
/// let output = pruned.output_plan(data).to_vec();
/// openmp::verify(&output, data, &map, &pruned)?;
/// assert_eq!(output.len(), data.len());
/// assert_eq!((pruned.descriptors[0].old_count, pruned.descriptors[0].new_count), (2, 1));
/// assert_eq!(OpenMpMap::read(&output)?.images.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plan(map: &OpenMpMap, rules: &Rules) -> Result<OpenMpPruned, OpenMpPruneError> {
    plan_with(map, rules, &|_, value| value, true)
}

/// [`plan`], with each kept record's `ImageStart`/`ImageEnd` values passed
/// through `moved(image, value)` (cut mode packs the images) and, when
/// `zero_dropped`, the dropped images zeroed in place.
pub(crate) fn plan_with(
    map: &OpenMpMap,
    rules: &Rules,
    moved: &dyn Fn(usize, u64) -> u64,
    zero_dropped: bool,
) -> Result<OpenMpPruned, OpenMpPruneError> {
    if !rules.keep_gpu.is_empty() {
        return Err(OpenMpPruneError::KeepGpu);
    }
    let kept: Vec<bool> = map.images.iter().map(|im| rules.keeps_image(&im.triple, &im.arch)).collect();
    // An image no understood table registers may be reached some other
    // way: zeroing it could break that, keeping it never does.
    let unreferenced = map.unreferenced();
    if let Some(&i) = unreferenced.iter().find(|&&i| !kept[i]) {
        return Err(OpenMpPruneError::Unregistered { offset: map.images[i].offset });
    }
    let mut edits = Vec::new();
    let mut descriptors = Vec::new();
    for d in &map.descriptors {
        let kept_records: Vec<&Record> = d.records.iter().filter(|r| kept[r.image]).collect();
        if !rules.allow_empty && !d.records.is_empty() && kept_records.is_empty() {
            return Err(OpenMpPruneError::Empty { addr: d.addr, held: held(map, &d.records) });
        }
        // At most `count` records: the count fits in u32.
        let new_count = kept_records.len() as u32;
        if new_count != d.count {
            edits.push((d.offset, Edit::Bytes(new_count.to_le_bytes().to_vec())));
        }
        for (slot, record) in d.records.iter().enumerate() {
            let Some(source) = kept_records.get(slot).or(kept_records.last()) else { continue };
            for (field, (dest, from)) in record.fields.iter().zip(&source.fields).enumerate() {
                // ImageStart and ImageEnd lead into .llvm.offloading.
                let value = if field < 2 { moved(source.image, from.value) } else { from.value };
                set_word(dest, value, &mut edits)?;
            }
        }
        descriptors.push(DescriptorChange { addr: d.addr, old_count: d.count, new_count });
    }
    for (im, _) in map.images.iter().zip(&kept).filter(|(_, k)| zero_dropped && !**k) {
        edits.push((im.offset, Edit::Zeros(im.size)));
    }
    if zero_dropped {
        edits.extend(trim_section(map, &kept));
    }
    edits.sort_by_key(|(offset, _)| *offset);
    let len = |e: &Edit| match e {
        Edit::Bytes(b) => b.len() as u64,
        Edit::Zeros(n) => *n,
    };
    if let Some(w) = edits.windows(2).find(|w| w[0].0.saturating_add(len(&w[0].1)) > w[1].0) {
        return Err(OpenMpPruneError::Overlap { offset: w[1].0 });
    }
    let images = map.images.iter().zip(kept).map(|(im, kept)| ImageFate { image: im.clone(), kept }).collect();
    Ok(OpenMpPruned { images, descriptors, edits, unreferenced })
}

#[cfg(test)]
mod tests;
