//! `replace`: put a new code object in place of one bundle entry of a HIP
//! host binary (ELF x86-64 executable, shared library or object) or of a
//! raw bundle file (docs/formats/host-references.md §6.6), or of one entry of a
//! CUDA fat binary (`.nv_fatbin`/`__nv_relfatbin`
//! sections and `.fatbin` files), or of one OpenMP image of
//! `.llvm.offloading` (`openmp`).
//!
//! The entry is named by its bundle entry ID or by its target ID; where
//! several fat binaries hold it, a unit index picks one. The new object
//! must be an AMDGPU code object for exactly the entry's target (machine,
//! OSABI, processor and xnack/sramecc bits of `e_flags`) that defines every
//! kernel descriptor and global variable the old one defined, since the
//! host registers them by name ([`object`]).
//!
//! The fat binary is rebuilt as `prune` rebuilds it (same order, same
//! payload alignment, compressed bundles recompressed with their version).
//! Where the result fits the old extent it is written in place and the
//! slack zeroed; otherwise `.hip_fatbin` (or a linked file's `.nv_fatbin`)
//! moves to a new PT_LOAD at the end of the file with the program header
//! table (docs/formats/host-references.md §4 (c)), see `segment`. [`verify`] re-reads the output before it is written.

mod archive;
mod check;
mod cuda;
mod cuda_grow;
mod cuda_object;
pub mod object;
mod openmp;
mod rebuild;
mod segment;

pub use check::verify;
pub use object::{ObjectCheck, check_object};

use crate::prune::{PruneError, entry_infos as entry_infos_of};
use offload_format::elf::ElfError;
use offload_format::elf::segments::SegmentsError;
use offload_format::plan::Plan;
use offload_format::target_id::TargetId;
use offload_format::triple::Triple;
use offload_inspect::id::split_entry_id;
use offload_inspect::layout::{FatBinary, FileMap, LayoutError, Target, fatbin};
use rebuild::rebuild as rebuild_unit;

/// Why a code object cannot be replaced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplaceError {
    /// The input's offload layout cannot be read.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The input's OpenMP layout cannot be read.
    #[error(transparent)]
    OpenMp(#[from] offload_inspect::layout::openmp::OpenMpError),
    /// A fat binary that cannot be read or rebuilt.
    #[error(transparent)]
    Unit(#[from] PruneError),
    /// The input is neither an ELF file nor a bundle.
    #[error("not a HIP host binary (ELF) nor an offload bundle (binary or compressed)")]
    UnknownInput,
    /// No entry has this ID or target ID (the entries there are).
    #[error("no entry is '{wanted}'{where_}; the entries are: {present}")]
    NoEntry {
        /// What was asked for.
        wanted: String,
        /// " in unit N" when a unit was given.
        where_: String,
        /// The entry IDs present, for the message.
        present: String,
    },
    /// Several fat binaries hold the entry and no unit was given.
    #[error("'{wanted}' is in {count} fat binaries ({units}); choose one with --unit N")]
    Ambiguous {
        /// What was asked for.
        wanted: String,
        /// How many units hold it.
        count: usize,
        /// The units, as "N at offset 0x...".
        units: String,
    },
    /// One fat binary holds several entries that match.
    #[error("'{wanted}' matches several entries of one fat binary ({ids}); give the full entry ID")]
    SeveralInUnit {
        /// What was asked for.
        wanted: String,
        /// The matching IDs.
        ids: String,
    },
    /// `--unit N` past the last fat binary.
    #[error("unit {unit} does not exist: the file has {count} fat binaries (0 to {last})", last = count.saturating_sub(1))]
    NoUnit {
        /// The unit asked for.
        unit: usize,
        /// How many there are.
        count: usize,
    },
    /// A wrapper record leads to no fat binary: moving things could break it.
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
    /// The new code object does not fit the entry (what is wrong).
    #[error("the new code object cannot replace '{id}': {reason}")]
    Object {
        /// The entry ID.
        id: String,
        /// What is wrong.
        reason: String,
    },
    /// The new code object lacks symbols the host registers by name.
    #[error("the new code object does not define {} symbol(s) the old one defined: {}", missing.len(), missing.join(", "))]
    MissingSymbols {
        /// The names missing, sorted.
        missing: Vec<String>,
    },
    /// Entries of a kind this tool does not replace yet (which).
    #[error("{0}")]
    NotSupported(String),
    /// The rebuilt fat binary is larger than its place and the file cannot
    /// be re-laid out (relocatable objects).
    #[error("the rebuilt fat binary needs {needed} bytes but only {extent} are free in place, and {why}")]
    DoesNotFit {
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        extent: u64,
        /// Why it cannot move.
        why: String,
    },
    /// The ELF layout cannot take a new segment (why).
    #[error("cannot move the fat binary section to a new segment: {0}")]
    Segments(String),
    /// Part of the file the mover needs does not read (the reader's error).
    #[error("cannot move the fat binary section to a new segment: {0}")]
    SegmentsRead(#[source] crate::FormatError),
    /// The file is not ELF the mover can read (the reader's error).
    #[error("cannot move the fat binary section to a new segment: {0}")]
    SegmentsElf(#[source] ElfError),
    /// The program header table cannot be read (the reader's error).
    #[error("cannot move the fat binary section to a new segment: {0}")]
    SegmentTable(#[source] SegmentsError),
    /// An archive that cannot be read (why).
    #[error("{0}")]
    Archive(String),
    /// An archive the reader refuses (its error).
    #[error("malformed archive: {0}")]
    MalformedArchive(#[source] ::object::read::Error),
    /// No archive member has this name (the members there are).
    #[error("the archive has no member '{name}'; its members are: {members}")]
    NoMember {
        /// The name asked for.
        name: String,
        /// The members present.
        members: String,
    },
    /// Not exactly one archive member holds the entry (the ones that do).
    #[error("{}", member_choice(wanted, candidates))]
    MemberChoice {
        /// What was asked for.
        wanted: String,
        /// The members holding a matching entry.
        candidates: Vec<String>,
    },
    /// What went wrong inside an archive member.
    #[error("member {name}: {source}")]
    Member {
        /// The member's name.
        name: String,
        /// What is wrong there.
        source: Box<ReplaceError>,
    },
    /// The output fails [`verify`] (why); a bug, reported rather than written.
    #[error("the output fails its check: {0}")]
    Verify(String),
    /// The output, or the input it is checked against, does not read
    /// back (the reader's error); a bug, reported rather than written.
    #[error("the output fails its check: {0}")]
    VerifyRead(#[source] crate::FormatError),
}

fn member_choice(wanted: &str, candidates: &[String]) -> String {
    if candidates.is_empty() {
        return format!("no archive member holds an entry '{wanted}'");
    }
    format!(
        "'{wanted}' is in {} archive members ({}); choose one with --member NAME",
        candidates.len(),
        candidates.join(", ")
    )
}

/// What the input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputKind {
    /// A bundle file (binary or compressed), possibly several back to back.
    RawBundle,
    /// A linked ELF x86-64 executable or shared library.
    Linked,
    /// A relocatable ELF x86-64 object.
    Relocatable,
    /// A standalone CUDA `.fatbin` file (fat binaries back to back).
    FatbinFile,
    /// A static archive; [`Replaced::member`] says which member changed.
    Archive,
    /// A linked ELF x86-64 OpenMP offloading program or library: the unit
    /// is one OffloadBinary of `.llvm.offloading` (its [`FatBinary`] has
    /// kind `Object`), the entry its image.
    OpenMp,
}

/// The archive member a replacement happened in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArchiveMember {
    /// The member's name.
    pub name: String,
    /// File offset of the member's data in the archive.
    pub offset: u64,
    /// Its size in bytes (the same after the replacement).
    pub size: u64,
    /// What the member is.
    pub input: InputKind,
}

/// Where the rebuilt fat binary went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// At its old offset; the rest of its old extent is zero.
    InPlace,
    /// The fat binary section (`.hip_fatbin` or `.nv_fatbin`) moved to a new PT_LOAD.
    NewSegment {
        /// File offset of the moved section.
        offset: u64,
        /// Its address.
        addr: u64,
        /// File offset of the new segment (the program headers lead it).
        segment_offset: u64,
    },
    /// A bundle file: the output is the rebuilt bundle(s).
    Rewritten,
    /// A relocatable object's CUDA fat binary section moved to the end of
    /// the file (its old bytes zeroed), the rebuilt fat binary in it.
    MovedSection {
        /// File offset of the section's new contents.
        offset: u64,
    },
}

/// The plan of one replacement; [`Replaced::output`] is the new file.
#[derive(Clone, Debug)]
pub struct Replaced<'a> {
    /// What the input is.
    pub input: InputKind,
    /// Index of the fat binary (in `.hip_fatbin` or file order).
    pub unit_index: usize,
    /// The fat binary as it was.
    pub unit: FatBinary,
    /// Index of the entry in its bundle.
    pub entry_index: usize,
    /// The entry ID.
    pub entry_id: String,
    /// Bytes of the old code object.
    pub old_size: u64,
    /// Bytes of the new code object.
    pub new_size: u64,
    /// Bytes of the rebuilt fat binary.
    pub new_unit_size: u64,
    /// The compressed format version written (compressed units only).
    pub new_version: Option<u16>,
    /// The replaced CUDA entry was compressed and the new code object is
    /// stored uncompressed (every reader of fat binaries takes both).
    pub stored_uncompressed: bool,
    /// What was checked about the new object.
    pub object: ObjectCheck,
    /// Where the rebuilt fat binary went.
    pub placement: Placement,
    /// In an archive, the member that holds the fat binary; offsets in
    /// this plan are offsets in the archive, the unit and entry indices
    /// count in the member.
    pub member: Option<ArchiveMember>,
    /// File offset of every fat binary in the output (same order).
    pub new_unit_offsets: Vec<u64>,
    /// Ranges of the output (file offset, length) that are zeros: the
    /// slack of a fat binary rewritten in place, or the old fat binary section
    /// and the padding before a new segment. A writer may punch them out.
    pub zeroed: Vec<(u64, u64)>,
    output: Plan<'a>,
}

impl<'a> Replaced<'a> {
    /// The output file.
    pub fn output(&self) -> &Plan<'a> {
        &self.output
    }
}

/// Whether entry `id` is the one `wanted` names: its exact ID, its target
/// ID (`gfx90a:xnack+`, features in any order), or triple and target
/// (`amdgcn-amd-amdhsa--gfx90a:xnack+`).
pub fn entry_matches(id: &str, wanted: &str) -> bool {
    if id == wanted {
        return true;
    }
    let entry = split_entry_id(id);
    if entry.target.is_empty() {
        return false;
    }
    // An entry ID with another offload kind (`hip-` for `hipv4-`) names
    // the same triple and target.
    let kind = wanted.split('-').next().unwrap_or("");
    let given = split_entry_id(wanted);
    let (triple, target) = match wanted.rsplit_once("--") {
        Some(_) if ["hip", "hipv4", "hcc", "openmp", "cuda"].contains(&kind) => {
            (Some(given.triple.as_str()), given.target.as_str())
        }
        Some((t, target)) => (Some(t), target),
        None => (None, wanted),
    };
    if triple.is_some_and(|t| offload_inspect::id::display_triple(t) != entry.triple) {
        return false;
    }
    let t = Triple::parse(&entry.triple);
    let table = offload_format::amdgpu::Table::Current;
    match (TargetId::parse_in(table, &t, &entry.target), TargetId::parse_in(table, &t, target)) {
        (Ok(a), Ok(b)) => a == b,
        _ => entry.target == target,
    }
}

/// The units of `data` and what the input is.
fn units_of(data: &[u8]) -> Result<(InputKind, Option<FileMap>, Vec<FatBinary>), ReplaceError> {
    if offload_format::elf::is_elf(data) {
        let map = FileMap::read(data)?;
        for (record, w) in map.wrappers.iter().enumerate() {
            if !matches!(w.target, Target::Unit(_)) {
                return Err(ReplaceError::Dangling { record, offset: w.offset, pointer: w.pointer });
            }
        }
        let kind = if map.relocatable { InputKind::Relocatable } else { InputKind::Linked };
        let units = map.units.clone();
        return Ok((kind, Some(map), units));
    }
    if offload_format::bundle::binary::has_magic(data) || offload_format::bundle::compressed::is_compressed(data) {
        return Ok((InputKind::RawBundle, None, fatbin::walk(data, 0)?));
    }
    Err(ReplaceError::UnknownInput)
}

/// "a PE image" or "a COFF object" when `data` is one (Windows files,
/// which `replace` does not rewrite).
pub(crate) fn windows_kind(data: &[u8]) -> Option<&'static str> {
    if offload_format::coff::pe::is_pe(data) {
        Some("a PE image (DLL or EXE)")
    } else if offload_format::coff::is_object(data) {
        Some("a COFF object")
    } else {
        None
    }
}

/// Why `replace` refuses a Windows file (docs/guide/windows.md).
pub(crate) fn windows_refusal(what: &str) -> ReplaceError {
    ReplaceError::NotSupported(format!(
        "{what}: replace rewrites ELF files, bundles and .fatbin files only; in PE and COFF files a \
         rebuilt fat binary would need the section table, the base-relocated registration records and \
         the PE checksum rewritten, which only prune does yet (replace in the ELF build of the same code, \
         or rebuild the Windows file with the new code object)"
    ))
}

/// Finds the unit and entry `wanted` names.
fn find_entry(
    data: &[u8],
    units: &[FatBinary],
    wanted: &str,
    unit: Option<usize>,
) -> Result<(usize, usize, String), ReplaceError> {
    let mut ids = Vec::with_capacity(units.len());
    for (index, fat) in units.iter().enumerate() {
        // Only the unit asked for is read (the others may be damaged).
        let infos = if unit.is_none_or(|u| u == index) { entry_infos_of(data, fat)? } else { Vec::new() };
        ids.push(infos.into_iter().map(|e| e.id).collect());
    }
    pick_entry(units, &ids, wanted, unit, |id| entry_matches(id, wanted))
}

/// The (unit, entry, ID) that `wanted` names among `ids` (each unit's
/// entry IDs, in order), where `matches` tells a hit: exactly one, or an
/// error that says what is there.
fn pick_entry(
    units: &[FatBinary],
    ids: &[Vec<String>],
    wanted: &str,
    unit: Option<usize>,
    matches: impl Fn(&str) -> bool,
) -> Result<(usize, usize, String), ReplaceError> {
    if let Some(u) = unit.filter(|&u| u >= units.len()) {
        return Err(ReplaceError::NoUnit { unit: u, count: units.len() });
    }
    let mut hits = Vec::new();
    let mut present = Vec::new();
    for (index, unit_ids) in ids.iter().enumerate() {
        if unit.is_some_and(|u| u != index) {
            continue;
        }
        let matching: Vec<(usize, &String)> = unit_ids.iter().enumerate().filter(|(_, id)| matches(id)).collect();
        if matching.len() > 1 {
            let ids = matching.iter().map(|(_, id)| id.as_str()).collect::<Vec<_>>().join(", ");
            return Err(ReplaceError::SeveralInUnit { wanted: wanted.into(), ids });
        }
        present.extend(unit_ids.iter().cloned());
        hits.extend(matching.into_iter().map(|(entry, id)| (index, entry, id.clone())));
    }
    match hits.len() {
        1 => Ok(hits.remove(0)),
        0 => {
            present.sort();
            present.dedup();
            Err(ReplaceError::NoEntry {
                wanted: wanted.into(),
                where_: unit.map(|u| format!(" in unit {u}")).unwrap_or_default(),
                present: present.join(", "),
            })
        }
        count => {
            let list = hits.iter().map(|(u, _, _)| format!("unit {u} at offset {:#x}", units[*u].offset));
            Err(ReplaceError::Ambiguous { wanted: wanted.into(), count, units: list.collect::<Vec<_>>().join(", ") })
        }
    }
}

/// The old code object's bytes (decompressed when the unit is compressed).
fn old_payload(data: &[u8], unit: &FatBinary, entry: usize) -> Result<Vec<u8>, ReplaceError> {
    let payload = match crate::prune::read_contents(data, unit)? {
        crate::prune::Contents::Bundle(list) => list.get(entry).map(|e| e.payload.to_vec()),
        crate::prune::Contents::Compressed { inner, .. } => offload_format::bundle::binary::read(&inner)
            .ok()
            .flatten()
            .and_then(|list| list.get(entry).map(|e| e.payload.to_vec())),
    };
    payload.ok_or_else(|| {
        PruneError::Unit { offset: unit.offset, reason: "its table changed while reading".into() }.into()
    })
}

/// Plans replacing entry `wanted` (entry ID or target ID; `unit` picks
/// the fat binary where several hold it) of `data` by `object`. Nothing is
/// written: [`Replaced::output`] is the new file, [`verify`] checks it.
///
/// ```
/// use offload_format::bundle::binary;
/// use offload_inspect::layout::FileMap;
/// use offload_rewrite::replace::{Placement, plan, verify};
///
/// // A HIP library with two translation units, built by clang 19.
/// let data = include_bytes!("../../../offload-testkit/fixtures/prune/gnu_rela.so");
/// let map = FileMap::read(data)?;
/// let unit = map.units[0];
/// let bundle = &data[unit.offset as usize..][..unit.used as usize];
/// let entries = binary::read(bundle)?.unwrap();
/// let old = entries.iter().find(|e| e.id.ends_with(b"gfx90a:xnack+")).unwrap();
/// // A "rebuilt" object: the same code with some bytes after it.
/// let mut new = old.payload.to_vec();
/// new.extend_from_slice(b"rebuilt");
/// let replaced = plan(data, &new, "gfx90a:xnack+", Some(0))?;
/// assert_eq!(replaced.placement, Placement::InPlace);
/// let output = replaced.output().to_vec();
/// verify(&output, data, &replaced, &new)?;
/// // Without --unit the entry is ambiguous: both units hold one.
/// assert!(plan(data, &new, "gfx90a:xnack+", None).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plan<'a>(
    data: &'a [u8],
    object: &'a [u8],
    wanted: &str,
    unit: Option<usize>,
) -> Result<Replaced<'a>, ReplaceError> {
    plan_in(data, object, wanted, unit, None)
}

/// [`plan`], and in a static archive, in member `member` (by name; `None`:
/// the one member that holds a matching entry). `member` is ignored for
/// other inputs.
pub fn plan_in<'a>(
    data: &'a [u8],
    object: &'a [u8],
    wanted: &str,
    unit: Option<usize>,
    member: Option<&str>,
) -> Result<Replaced<'a>, ReplaceError> {
    if archive::is_archive(data) {
        return archive::plan(data, object, wanted, unit, member);
    }
    if let Some(what) = windows_kind(data) {
        return Err(windows_refusal(what));
    }
    if cuda::applies(data, wanted) {
        return cuda::plan(data, object, wanted, unit);
    }
    if openmp::applies(data) {
        return openmp::plan(data, object, wanted, unit);
    }
    let (input, map, units) = units_of(data)?;
    let (unit_index, entry_index, entry_id) = find_entry(data, &units, wanted, unit)?;
    let fat = units[unit_index];
    let old = old_payload(data, &fat, entry_index)?;
    let check = check_object(&entry_id, &old, object)?;
    let (rebuilt, new_version) = rebuild_unit(data, &fat, &[], Some((entry_index, object)))?;
    let needed = rebuilt.len();
    let mut replaced = Replaced {
        input,
        unit_index,
        unit: fat,
        entry_index,
        entry_id,
        old_size: old.len() as u64,
        new_size: object.len() as u64,
        new_unit_size: needed,
        new_version,
        stored_uncompressed: false,
        object: check,
        placement: Placement::InPlace,
        member: None,
        new_unit_offsets: units.iter().map(|u| u.offset).collect(),
        zeroed: Vec::new(),
        output: Plan::new(),
    };
    if input == InputKind::RawBundle {
        let (content, offsets) = segment::relaid(data, 0, &units, unit_index, rebuilt);
        replaced.output = content;
        replaced.new_unit_offsets = offsets;
        replaced.placement = Placement::Rewritten;
        return Ok(replaced);
    }
    if needed <= fat.extent {
        let start = fat.offset as usize;
        let mut out = Plan::borrowed(data.get(..start).unwrap_or(&[]));
        out.pieces.extend(rebuilt.pieces);
        out.zeros(fat.extent - needed);
        out.borrow(data.get(start + fat.extent as usize..).unwrap_or(&[]));
        replaced.output = out;
        replaced.zeroed = vec![(fat.offset + needed, fat.extent - needed)];
        return Ok(replaced);
    }
    let Some(map) = map.filter(|m| !m.relocatable) else {
        return Err(ReplaceError::DoesNotFit {
            needed,
            extent: fat.extent,
            why: "a relocatable object has no segments to add (rebuild the object, or replace in the linked file)"
                .into(),
        });
    };
    let moved = segment::move_fatbin(data, &map, unit_index, rebuilt)?;
    replaced.placement = moved.placement;
    replaced.new_unit_offsets = moved.unit_offsets;
    replaced.zeroed = moved.zeroed;
    replaced.output = moved.output;
    Ok(replaced)
}

#[cfg(test)]
mod tests;
