//! `prune` in zero mode: drop the code objects of unwanted GPU targets from
//! a HIP host binary without moving anything (docs/formats/host-references.md §4 (a), §6.3).
//!
//! Each fat binary is rewritten at its own address, in its old extent:
//! a bundle gets a new header and its kept payloads, laid out as LLVM's
//! bundler lays them out (original order, the input's payload alignment,
//! so the header stays well under the 4 KiB the runtime reads and the last
//! entry ends where the bundle ends); a compressed bundle is decompressed
//! (hash checked), rebuilt the same way and recompressed with the input's
//! format version (version 1 becomes 2: the runtime needs the total size)
//! and zstd level 3 with long-distance matching, LLVM's default. The rest
//! of the extent is zeroed. No pointer, relocation, program or section
//! header changes, so every byte outside the rewritten fat binaries stays.

mod check;
mod check_cut;
mod check_object;
pub mod coff;
pub mod cuda;
pub mod cut;
pub mod cut_archive;
pub mod cut_file;
pub mod cut_object;
pub mod files;
pub mod openmp;
pub mod pe;
mod rebuild;

pub use check::verify;
pub use check_cut::verify_cut;
pub use cut::{Cut, CutPlan, plan_cut};
pub use offload_inspect::keep::{EntryInfo, Rules, TargetError, parse_target};

use crate::FormatError;
use offload_format::bundle::{binary, compressed};
use offload_format::elf::ElfError;
use offload_format::elf::segments::SegmentsError;
use offload_format::plan::Plan;
use offload_inspect::layout::{FatBinary, FileMap, LayoutError, Target, UnitKind};
use std::num::NonZeroU64;

/// Why a file cannot be pruned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PruneError {
    /// The file's offload layout cannot be read (not an ELF x86-64 HIP
    /// host binary, or a malformed one).
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A `--keep`/`--drop` target that does not parse (why).
    #[error(transparent)]
    BadTarget(#[from] TargetError),
    /// A wrapper record points into the middle of a fat binary or at
    /// nothing known: rewriting could break it.
    #[error(
        "wrapper record {record} (offset {offset:#x}) points at {pointer:#x}, which is not the start of a fat binary"
    )]
    Dangling {
        /// Index of the wrapper record.
        record: usize,
        /// Its file offset.
        offset: u64,
        /// The address it holds.
        pointer: u64,
    },
    /// A fat binary that cannot be read or rebuilt.
    #[error("fat binary at offset {offset:#x}: {reason}")]
    Unit {
        /// The fat binary's file offset.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A fat binary whose contents do not read (the reader's error).
    #[error("fat binary at offset {offset:#x}: {source}")]
    UnitRead {
        /// The fat binary's file offset.
        offset: u64,
        /// The reader's error.
        #[source]
        source: FormatError,
    },
    /// Pruning would leave a fat binary with no device code, and
    /// [`Rules::allow_empty`] is off.
    #[error(
        "fat binary at offset {offset:#x} would keep no device code (it holds {held}); use --allow-empty to allow this"
    )]
    Empty {
        /// The fat binary's file offset.
        offset: u64,
        /// The targets it holds, for the message.
        held: String,
    },
    /// A recompressed bundle came out larger than the space it had.
    #[error(
        "fat binary at offset {offset:#x}: the recompressed bundle needs {needed} bytes but only {extent} are free in place"
    )]
    DoesNotFit {
        /// The fat binary's file offset.
        offset: u64,
        /// Bytes the new bundle needs.
        needed: u64,
        /// Bytes available in place.
        extent: u64,
    },
    /// The output fails [`verify`] (why); a bug, reported rather than
    /// written.
    #[error("the pruned output fails its check: {0}")]
    Verify(String),
    /// The output, or the input it is checked against, does not read
    /// back (the reader's error); a bug, reported rather than written.
    #[error("the pruned output fails its check: {0}")]
    VerifyRead(#[source] FormatError),
    /// `--mode cut` cannot rewrite this file safely (why); zero mode can.
    #[error("cannot cut this file: {0}; --mode zero prunes it without moving anything")]
    CutRefused(String),
    /// `--mode cut` cannot read part of the file (the reader's error).
    #[error("cannot cut this file: {0}; --mode zero prunes it without moving anything")]
    CutRead(#[source] FormatError),
    /// `--mode cut` cannot read the file's ELF headers (the reader's error).
    #[error("cannot cut this file: {0}; --mode zero prunes it without moving anything")]
    CutElf(#[source] ElfError),
    /// `--mode cut` cannot read the program header table (the reader's error).
    #[error("cannot cut this file: {0}; --mode zero prunes it without moving anything")]
    CutSegments(#[source] SegmentsError),
    /// `--mode cut` cannot read the archive (the reader's error).
    #[error("cannot cut this file: malformed archive: {0}; --mode zero prunes it without moving anything")]
    CutArchive(#[source] object::read::Error),
    /// An input `prune` does not handle (what it is, or why not).
    #[error("{0}")]
    Unsupported(String),
    /// An input whose format's reader refuses it (the reader's error).
    #[error("{0}")]
    UnsupportedRead(#[source] FormatError),
    /// An archive that cannot be read (the reader's error).
    #[error("malformed archive: {0}")]
    MalformedArchive(#[source] object::read::Error),
    /// A problem in one member of an archive.
    #[error("member {name}: {source}")]
    Member {
        /// The member's name.
        name: String,
        /// What is wrong with it.
        source: Box<PruneError>,
    },
}

/// One entry of a unit and its fate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryFate {
    /// The bundle entry ID.
    pub id: String,
    /// Payload bytes (uncompressed).
    pub size: u64,
    /// Kept (else dropped).
    pub kept: bool,
}

/// What happens to one fat binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitChange<'a> {
    /// The fat binary, as the file map describes it.
    pub unit: FatBinary,
    /// Its entries in file order, each kept or dropped.
    pub entries: Vec<EntryFate>,
    /// Bytes the unit occupies after pruning (`unit.used` when unchanged).
    pub new_used: u64,
    /// The compressed format version written (compressed units only).
    pub new_version: Option<u16>,
    /// The unit's new extent (exactly `unit.extent` bytes), when it changes.
    pub replacement: Option<Plan<'a>>,
}

impl UnitChange<'_> {
    /// Whether the unit is rewritten.
    pub fn changed(&self) -> bool {
        self.replacement.is_some()
    }
    /// Payload bytes of the dropped entries.
    pub fn dropped_bytes(&self) -> u64 {
        self.entries.iter().filter(|e| !e.kept).map(|e| e.size).sum()
    }
    /// File bytes that were part of the unit and are zero now.
    pub fn freed_bytes(&self) -> u64 {
        self.unit.used.saturating_sub(self.new_used)
    }
}

/// The whole plan for one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pruned<'a> {
    /// One per fat binary of the file map, in its order.
    pub units: Vec<UnitChange<'a>>,
    /// Units no wrapper record points at (pruned all the same).
    pub unreferenced: Vec<usize>,
}

impl<'a> Pruned<'a> {
    /// Payload bytes of all dropped entries (uncompressed).
    pub fn dropped_bytes(&self) -> u64 {
        self.units.iter().map(UnitChange::dropped_bytes).sum()
    }
    /// File bytes zeroed by the rewrite, all units together.
    pub fn freed_bytes(&self) -> u64 {
        self.units.iter().map(UnitChange::freed_bytes).sum()
    }
    /// How many units are rewritten.
    pub fn changed(&self) -> usize {
        self.units.iter().filter(|u| u.changed()).count()
    }

    /// The output file: the input with each changed unit's extent replaced.
    pub fn output_plan(&self, input: &'a [u8]) -> Plan<'a> {
        let mut plan = Plan::new();
        let mut at = 0usize;
        for change in &self.units {
            let Some(rep) = &change.replacement else { continue };
            // Unit offsets come from the walk of a section inside `input`.
            let start = change.unit.offset as usize;
            plan.borrow(input.get(at..start).unwrap_or(&[]));
            plan.pieces.extend(rep.pieces.iter().cloned());
            at = start + change.unit.extent as usize;
        }
        plan.borrow(input.get(at..).unwrap_or(&[]));
        plan
    }
}

/// The entries of one unit: a bundle's table read in place, or the
/// decompressed bundle of a compressed one.
pub(crate) enum Contents<'a> {
    Bundle(Vec<binary::BinaryEntry<'a>>),
    Compressed { inner: Vec<u8> },
}

/// The unit's bytes, `used` long.
pub(crate) fn unit_bytes<'a>(data: &'a [u8], unit: &FatBinary) -> Result<&'a [u8], PruneError> {
    let start = usize::try_from(unit.offset).ok();
    let end = start.and_then(|s| s.checked_add(usize::try_from(unit.used).ok()?));
    match (start, end) {
        (Some(s), Some(e)) if e <= data.len() => Ok(&data[s..e]),
        _ => Err(PruneError::Unit { offset: unit.offset, reason: "lies past the end of the file".into() }),
    }
}

pub(crate) fn read_contents<'a>(data: &'a [u8], unit: &FatBinary) -> Result<Contents<'a>, PruneError> {
    let bytes = unit_bytes(data, unit)?;
    let fail = |reason: String| PruneError::Unit { offset: unit.offset, reason };
    match unit.kind {
        UnitKind::Bundle => {
            let entries =
                binary::read(bytes).map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?;
            Ok(Contents::Bundle(entries.unwrap_or_default()))
        }
        UnitKind::Compressed { .. } => {
            let blob = compressed::read_blob(bytes)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?;
            offload_inspect::decode::charge_decoded(blob.header.uncompressed_size).map_err(fail)?;
            let inner = compressed::decompress(&blob)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?;
            if !binary::has_magic(&inner) {
                return Err(fail("the compressed data is not a binary bundle".into()));
            }
            binary::read(&inner).map_err(|e| fail(format!("the decompressed bundle: {e}")))?;
            Ok(Contents::Compressed { inner })
        }
        UnitKind::Cuda | UnitKind::Object => Err(fail("is not a clang offload bundle".into())),
    }
}

/// The payload alignment a bundle was written with: the largest power of
/// two up to 4096 that divides every payload offset (HIP bundles use 4096).
pub(crate) fn alignment(entries: &[binary::BinaryEntry]) -> NonZeroU64 {
    let mut align = 4096u64;
    while align > 1 && entries.iter().any(|e| e.offset % align != 0) {
        align /= 2;
    }
    NonZeroU64::new(align).unwrap_or(NonZeroU64::MIN)
}

/// A unit's entry IDs and sizes, read from headers only.
pub(crate) fn entry_infos(data: &[u8], unit: &FatBinary) -> Result<Vec<EntryInfo>, PruneError> {
    let bytes = unit_bytes(data, unit)?;
    let fail = |reason: String| PruneError::Unit { offset: unit.offset, reason };
    match unit.kind {
        UnitKind::Bundle => Ok(infos(
            &binary::read(bytes)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?
                .unwrap_or_default(),
        )),
        UnitKind::Compressed { .. } => {
            let blob = compressed::read_blob(bytes)
                .map_err(|e| PruneError::UnitRead { offset: unit.offset, source: e.into() })?;
            let inner = offload_inspect::ccob::peek(&blob).map_err(fail)?;
            if inner.text {
                return Err(fail("holds a text bundle, which a HIP runtime does not load".into()));
            }
            Ok(inner
                .entries
                .into_iter()
                .map(|e| EntryInfo { id: String::from_utf8_lossy(&e.id).into_owned(), size: e.len })
                .collect())
        }
        UnitKind::Cuda | UnitKind::Object => Err(fail("is not a clang offload bundle".into())),
    }
}

fn infos(entries: &[binary::BinaryEntry]) -> Vec<EntryInfo> {
    entries
        .iter()
        .map(|e| EntryInfo { id: String::from_utf8_lossy(e.id).into_owned(), size: e.payload.len() as u64 })
        .collect()
}

/// Decides what to keep in every unit of `map` (a map of `data`) and plans
/// the rewrite. Nothing is written: [`Pruned::output_plan`] gives the
/// output, [`verify`] checks it.
///
/// ```
/// use offload_inspect::layout::FileMap;
/// use offload_rewrite::prune::{Rules, parse_target, plan, verify};
///
/// // A HIP shared library with gfx906 and gfx90a code, built by clang.
/// let data = include_bytes!("../../../offload-testkit/fixtures/prune/gnu_rela.so");
/// let map = FileMap::read(data)?;
/// let rules = Rules { keep: vec![parse_target("gfx90a")?], ..Default::default() };
/// let pruned = plan(data, &map, &rules)?;
/// let output = pruned.output_plan(data).to_vec();
/// verify(&output, data, &map, &pruned)?;
/// // Nothing moves: same size, only the fat binaries' bytes differ.
/// assert_eq!(output.len(), data.len());
/// assert!(pruned.changed() > 0 && pruned.dropped_bytes() > 0);
/// let kept: Vec<&str> =
///     pruned.units[0].entries.iter().filter(|e| e.kept).map(|e| e.id.as_str()).collect();
/// assert!(kept.iter().all(|id| id.starts_with("host") || id.contains("gfx90a")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plan<'a>(data: &'a [u8], map: &FileMap, rules: &Rules) -> Result<Pruned<'a>, PruneError> {
    for (record, w) in map.wrappers.iter().enumerate() {
        if !matches!(w.target, Target::Unit(_)) {
            return Err(PruneError::Dangling { record, offset: w.offset, pointer: w.pointer });
        }
    }
    let units = plan_units(data, &map.units, rules, true)?;
    Ok(Pruned { units, unreferenced: map.unreferenced() })
}

/// Decides what to keep in each bundle or compressed bundle of `units`
/// (lying in `data`) and rebuilds the changed ones. `in_place`: a rebuilt
/// unit is followed by zeros up to its extent, so nothing after it moves
/// (a host binary); otherwise it is written alone, and the output shrinks
/// (a raw bundle file, which no address refers to).
pub(crate) fn plan_units<'a>(
    data: &'a [u8],
    units: &[FatBinary],
    rules: &Rules,
    in_place: bool,
) -> Result<Vec<UnitChange<'a>>, PruneError> {
    // Headers only: a compressed bundle is decoded just far enough to read
    // its table, so deciding (and --dry-run) costs little for any size.
    let all: Vec<Vec<EntryInfo>> = units.iter().map(|u| entry_infos(data, u)).collect::<Result<_, _>>()?;
    let decisions = rules.decide(&all);
    let mut changes = Vec::with_capacity(units.len());
    let mut work = Vec::new();
    for ((unit, infos), keep) in units.iter().zip(all).zip(decisions) {
        let entries: Vec<EntryFate> =
            infos.into_iter().zip(&keep).map(|(i, &kept)| EntryFate { id: i.id, size: i.size, kept }).collect();
        let device: Vec<&EntryFate> =
            entries.iter().filter(|e| offload_inspect::id::split_entry_id(&e.id).kind != "host").collect();
        if !rules.allow_empty && !device.is_empty() && device.iter().all(|e| !e.kept) {
            let held = device.iter().map(|e| e.id.as_str()).collect::<Vec<_>>().join(", ");
            return Err(PruneError::Empty { offset: unit.offset, held });
        }
        let mut change = UnitChange { unit: *unit, entries, new_used: unit.used, new_version: None, replacement: None };
        if let UnitKind::Compressed { version } = unit.kind {
            change.new_version = Some(version);
        }
        if !keep.iter().all(|&k| k) {
            work.push((changes.len(), keep));
        }
        changes.push(change);
    }
    // The units are rebuilt in parallel (decompressing and recompressing
    // is most of the work), each worker holding one decompressed unit at a
    // time: memory is bounded by a few units, never by the file.
    for ((i, _), rebuilt) in work.iter().zip(rebuild::all(data, &changes, &work, rules.compression_level)) {
        let change = &mut changes[*i];
        let unit = change.unit;
        let rebuilt = rebuilt?;
        let needed = rebuilt.plan.len();
        if needed > unit.extent {
            return Err(PruneError::DoesNotFit { offset: unit.offset, needed, extent: unit.extent });
        }
        let mut rep = rebuilt.plan;
        if in_place {
            rep.zeros(unit.extent - needed);
        }
        if rebuilt.version.is_some() {
            change.new_version = rebuilt.version;
        }
        change.new_used = needed;
        change.replacement = Some(rep);
    }
    Ok(changes)
}

#[cfg(test)]
mod cut_cuda_tests;
#[cfg(test)]
mod cut_object_tests;
#[cfg(test)]
mod cut_tests;
#[cfg(test)]
mod tests;
