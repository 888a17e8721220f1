//! Which inputs `prune` takes and how each is rewritten, behind one entry
//! point ([`plan_file`]):
//!
//! * HIP host binaries (`.hip_fatbin`): the zero mode of this module's
//!   parent, checked by [`super::verify`].
//! * CUDA objects, executables and shared libraries (`.nv_fatbin`,
//!   `__nv_relfatbin`) in zero mode, and standalone `.fatbin` files
//!   (rewritten smaller): [`super::cuda`].
//! * Static archives: every member that is a HIP or CUDA object or a fat
//!   object is pruned in place (zero mode keeps member sizes, so the
//!   archive layout and its symbol table stay as they are; a fat object
//!   member is the rewritten object followed by zeros); other members are
//!   copied.
//! * Raw bundle and compressed bundle (CCOB) files: no address refers to
//!   them, so the output is the rebuilt bundle alone, smaller.
//! * Fat objects (`clang-offload-bundler -type=o`): the sections of the
//!   dropped entries go, as `llvm-objcopy --remove-section` removes them
//!   (`elf::rewrite`); the file is rewritten, smaller.

use super::{PruneError, Pruned, Rules, UnitChange, cuda, plan, plan_units};
use object::read::archive::ArchiveFile;
use offload_format::bundle::{binary, compressed, object as fat_object};
use offload_format::elf::{self, ElfFile};
use offload_inspect::layout::{self, FileMap, UnitKind};

/// What kind of file `prune` read.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input {
    /// A HIP host binary, with its map (for [`super::verify`]).
    Hip(FileMap),
    /// An ELF file with CUDA fat binary sections.
    Cuda,
    /// A standalone CUDA `.fatbin` file.
    Fatbin,
    /// A static archive.
    Archive {
        /// Members with device code that was looked at.
        members: usize,
        /// Members with device code `prune` does not rewrite yet (OpenMP
        /// `.llvm.offloading`), copied unchanged.
        untouched: Vec<String>,
        /// The section checksums of COFF members (`.lib` archives), at
        /// archive offsets, rewritten with their sections.
        coff: super::coff::CoffInput,
    },
    /// A raw bundle or compressed bundle file.
    Bundle,
    /// A fat object (`-type=o`).
    FatObject,
    /// A PE image (Windows DLL or executable) with CUDA or HIP fat
    /// binary sections ([`super::pe`]).
    Pe(PeInput),
    /// A COFF object (`.obj`) with CUDA or HIP fat binary sections
    /// ([`super::coff`]).
    Coff(super::coff::CoffInput),
}

/// What zero mode needs to know of a PE input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeInput {
    /// File offset of the optional header's checksum field, when the
    /// input's checksum is set (and so is recomputed).
    pub checksum: Option<usize>,
    /// The Authenticode certificate table the output drops (a rewritten
    /// image no longer matches its signature).
    pub certificate: Option<super::pe::Certificate>,
}

impl Input {
    /// Whether the output has the input's size, every byte outside the
    /// rewritten units unchanged (in a PE image, but its checksum, and a
    /// signed image ends before its dropped certificate table; in a COFF
    /// object or `.lib`, but the section checksums).
    pub fn in_place(&self) -> bool {
        matches!(self, Input::Hip(_) | Input::Cuda | Input::Archive { .. } | Input::Pe(_) | Input::Coff(_))
    }

    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Input::Hip(_) => "HIP host binary",
            Input::Cuda => "CUDA host binary",
            Input::Fatbin => "CUDA fat binary file",
            Input::Archive { .. } => "static archive",
            Input::Bundle => "offload bundle file",
            Input::FatObject => "fat object",
            Input::Pe(_) => "PE image",
            Input::Coff(_) => "COFF object",
        }
    }
}

fn unsupported(what: String) -> PruneError {
    PruneError::Unsupported(what)
}

/// Reads `data`, decides what to keep and plans the rewrite.
/// [`Pruned::output_plan`] gives the output, [`verify_file`] checks it.
///
/// ```
/// use offload_rewrite::prune::{Rules, files::{Input, plan_file, verify_file}, parse_target};
///
/// // An nvcc 13.5 relocatable-device-code object: an sm_90 cubin, sm_80
/// // NVVM IR (LTO) and compute_90 PTX in __nv_relfatbin.
/// let data = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/cuda/obj_lto.o"));
/// let rules = Rules { keep: vec![parse_target("sm_90")?], ..Default::default() };
/// let (input, pruned) = plan_file(data, &rules)?;
/// assert_eq!(input, Input::Cuda);
/// let kept: Vec<&str> =
///     pruned.units[0].entries.iter().filter(|e| e.kept).map(|e| e.id.as_str()).collect();
/// assert_eq!(kept, ["cuda-elf-sm_90"]);
/// let output = pruned.output_plan(data).to_vec();
/// assert_eq!(output.len(), data.len()); // zero mode: nothing moves
/// verify_file(&output, data, &input, &pruned)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plan_file<'a>(data: &'a [u8], rules: &Rules) -> Result<(Input, Pruned<'a>), PruneError> {
    let pruned = |units: Vec<UnitChange<'a>>| Pruned { units, unreferenced: Vec::new() };
    if data.starts_with(b"!<arch>\n") || data.starts_with(b"!<thin>\n") {
        let (members, untouched, units, checksums) = plan_archive(data, rules)?;
        let coff = super::coff::CoffInput { checksums };
        return Ok((Input::Archive { members, untouched, coff }, pruned(units)));
    }
    if data.starts_with(&offload_format::cuda::FATBIN_MAGIC_BYTES) {
        return Ok((Input::Fatbin, pruned(cuda::plan_region(data, 0, rules, false)?)));
    }
    if binary::has_magic(data) || data.starts_with(compressed::MAGIC) {
        let units = layout::fatbin::walk(data, 0)?;
        return Ok((Input::Bundle, pruned(plan_units(data, &units, rules, false)?)));
    }
    if offload_format::coff::pe::is_pe(data) {
        return super::pe::plan_pe(data, rules);
    }
    if offload_format::coff::is_object(data) {
        return match plan_coff(data, rules)? {
            Some((input, units)) => Ok((input, pruned(units))),
            None => Err(unsupported(
                "no device code to prune in this COFF object: no .hip_fatbin, .nv_fatbin, __nv_relfatbin or __CLANG_OFFLOAD_BUNDLE__ section (OpenMP's .llvm.offloading is not pruned in COFF objects, nor yet in PE images: rebuild with fewer --offload-arch)"
                    .into(),
            )),
        };
    }
    let file = ElfFile::parse(data).map_err(|e| {
        if data.starts_with(b"\x7fELF") {
            PruneError::Layout(layout::LayoutError::Elf(e))
        } else {
            unsupported(format!("not a static archive, a CUDA fat binary or an offload bundle, and {e}"))
        }
    })?;
    let named = |wanted: &[u8]| (1..file.sections.len()).any(|i| file.section_name(i).is_ok_and(|n| n == wanted));
    if named(b".hip_fatbin") {
        let map = FileMap::read(data)?;
        let p = plan(data, &map, rules)?;
        return Ok((Input::Hip(map), p));
    }
    let bundled = (1..file.sections.len()).any(|i| file.section_name(i).is_ok_and(|n| n.starts_with(binary::MAGIC)));
    if bundled {
        return Ok((Input::FatObject, pruned(plan_fat_object(data, rules, false)?)));
    }
    if cuda::has_sections(&file) {
        return Ok((Input::Cuda, pruned(cuda::plan_elf(&file, rules)?)));
    }
    Err(unsupported(
        "no device code to prune: no .hip_fatbin, .nv_fatbin, __nv_relfatbin or __CLANG_OFFLOAD_BUNDLE__ section"
            .into(),
    ))
}

/// How many members had device code, the members left untouched, the
/// units of every member with device code, at their offsets in the
/// archive, and the section checksums of COFF members there.
type ArchivePlan<'a> = (usize, Vec<String>, Vec<UnitChange<'a>>, Vec<(u64, u64, u64)>);

/// Plans every member of an archive.
fn plan_archive<'a>(data: &'a [u8], rules: &Rules) -> Result<ArchivePlan<'a>, PruneError> {
    let bad = PruneError::MalformedArchive;
    let archive = ArchiveFile::parse(data).map_err(bad)?;
    if archive.is_thin() {
        return Err(unsupported("a thin archive: its members live in other files; prune those".into()));
    }
    let mut units = Vec::new();
    let mut members = 0;
    let mut untouched = Vec::new();
    let mut checksums = Vec::new();
    for member in archive.members() {
        let member = member.map_err(bad)?;
        let name = String::from_utf8_lossy(member.name()).into_owned();
        let bytes = member.data(data).map_err(bad)?;
        let (offset, _) = member.file_range();
        let in_member = |e: PruneError| PruneError::Member { name: name.clone(), source: Box::new(e) };
        let Some(mut found) = plan_member(bytes, rules).map_err(in_member)? else {
            if has_offloading_section(bytes) {
                untouched.push(name);
            }
            continue;
        };
        members += 1;
        for change in &mut found {
            change.unit.offset += offset;
        }
        units.extend(found);
        if offload_format::coff::is_object(bytes) {
            checksums.extend(super::coff::member_checksums(bytes, offset));
        }
    }
    Ok((members, untouched, units, checksums))
}

/// Whether an ELF file has an `.llvm.offloading` section (OpenMP or new
/// driver device images).
fn has_offloading_section(data: &[u8]) -> bool {
    let Ok(file) = ElfFile::parse(data) else { return false };
    (1..file.sections.len()).any(|i| file.section_name(i).is_ok_and(|n| n.starts_with(b".llvm.offloading")))
}

/// A member's units (offsets in the member), or `None` when it holds no
/// device code `prune` knows.
fn plan_member<'a>(data: &'a [u8], rules: &Rules) -> Result<Option<Vec<UnitChange<'a>>>, PruneError> {
    if binary::has_magic(data) || data.starts_with(compressed::MAGIC) {
        // A bundle member (`-type=bc` archives): rebuilt in place, zeros
        // after it; the bundle's own table says where its entries end.
        let units = layout::fatbin::walk(data, 0)?;
        return Ok(Some(plan_units(data, &units, rules, true)?));
    }
    if offload_format::coff::is_object(data) {
        return Ok(plan_coff(data, rules)?.map(|(_, units)| units));
    }
    if !data.starts_with(b"\x7fELF") {
        return Ok(None);
    }
    let file = ElfFile::parse(data).map_err(|e| PruneError::Layout(layout::LayoutError::Elf(e)))?;
    let named = |pick: &dyn Fn(&[u8]) -> bool| (1..file.sections.len()).any(|i| file.section_name(i).is_ok_and(pick));
    if named(&|n| n == b".hip_fatbin") {
        let map = FileMap::read(data)?;
        return Ok(Some(plan(data, &map, rules)?.units));
    }
    if named(&|n| n.starts_with(binary::MAGIC)) {
        // Zeros after the rewritten object keep the member's size, so no
        // later member moves and the archive's symbol table stays right;
        // an ELF reader ignores bytes past its tables.
        return Ok(Some(plan_fat_object(data, rules, true)?));
    }
    if cuda::has_sections(&file) {
        return Ok(Some(cuda::plan_elf(&file, rules)?));
    }
    Ok(None)
}

/// A fat object without the sections of its dropped entries; `in_place`:
/// followed by zeros up to the input's size (an archive member).
fn plan_fat_object<'a>(data: &'a [u8], rules: &Rules, in_place: bool) -> Result<Vec<UnitChange<'a>>, PruneError> {
    let format = object_format(data);
    let sections =
        fat_object::bundles(data, format).map_err(|e| PruneError::UnitRead { offset: 0, source: e.into() })?;
    let infos: Vec<super::EntryInfo> = sections
        .iter()
        .map(|s| super::EntryInfo { id: String::from_utf8_lossy(s.id).into_owned(), size: s.contents.len() as u64 })
        .collect();
    let keep = rules.decide(std::slice::from_ref(&infos)).pop().unwrap_or_default();
    let entries: Vec<super::EntryFate> =
        infos.into_iter().zip(&keep).map(|(i, &kept)| super::EntryFate { id: i.id, size: i.size, kept }).collect();
    let device: Vec<&super::EntryFate> =
        entries.iter().filter(|e| offload_inspect::id::split_entry_id(&e.id).kind != "host").collect();
    if !rules.allow_empty && !device.is_empty() && device.iter().all(|e| !e.kept) {
        let held = device.iter().map(|e| e.id.as_str()).collect::<Vec<_>>().join(", ");
        return Err(PruneError::Empty { offset: 0, held });
    }
    let len = data.len() as u64;
    let unit = layout::FatBinary { offset: 0, section_offset: 0, used: len, extent: len, kind: UnitKind::Object };
    let mut change = UnitChange { unit, entries, new_used: len, new_version: None, replacement: None };
    if keep.iter().any(|&k| !k) {
        let dropped: Vec<Vec<u8>> = sections
            .iter()
            .zip(&keep)
            .filter(|(_, k)| !**k)
            .map(|(s, _)| [binary::MAGIC.as_slice(), s.id].concat())
            .collect();
        let remove = |name: &[u8]| dropped.iter().any(|d| d.as_slice() == name);
        let mut rewritten = match format {
            fat_object::Format::Coff => offload_format::coff::rewrite(data, &remove, Vec::new())
                .map_err(|e| PruneError::UnitRead { offset: 0, source: e.into() })?,
            _ => elf::rewrite(data, &remove, Vec::new())
                .map_err(|e| PruneError::UnitRead { offset: 0, source: e.into() })?,
        };
        change.new_used = rewritten.len();
        if in_place {
            if change.new_used > len {
                return Err(PruneError::DoesNotFit { offset: 0, needed: change.new_used, extent: len });
            }
            rewritten.zeros(len - change.new_used);
        }
        change.replacement = Some(rewritten);
    }
    Ok(vec![change])
}

mod verify;
pub use verify::verify_file;
pub(crate) use verify::{check_unit, verify_in_place};

/// The container format of a fat object (`-type=o`): ELF or COFF.
pub(crate) fn object_format(data: &[u8]) -> fat_object::Format {
    if offload_format::coff::is_object(data) { fat_object::Format::Coff } else { fat_object::Format::Elf }
}

/// A COFF object: a fat object (bundle sections), planned as on ELF, or
/// an object with fat binary sections ([`super::coff`]); `None` when it
/// holds neither. A fat object reads as [`Input::FatObject`].
fn plan_coff<'a>(data: &'a [u8], rules: &Rules) -> Result<Option<(Input, Vec<UnitChange<'a>>)>, PruneError> {
    let bundled = fat_object::bundles(data, fat_object::Format::Coff).is_ok_and(|b| !b.is_empty());
    if bundled {
        return Ok(Some((Input::FatObject, plan_fat_object(data, rules, false)?)));
    }
    Ok(super::coff::plan_object(data, rules)?.map(|(coff, units)| (Input::Coff(coff), units)))
}

/// One section holding fat binaries: its file range and whether they are
/// CUDA's (else clang offload bundles).
pub(crate) struct FatRegion {
    /// File offset of the section's bytes.
    pub offset: u64,
    /// Their length.
    pub len: u64,
    /// CUDA fat binaries.
    pub cuda: bool,
}

/// Plans zero mode on every fat binary of `regions` (sections of `data`,
/// sorted here by offset; overlapping ones are refused): the one loop of
/// PE images and COFF objects.
pub(crate) fn plan_regions<'a>(
    data: &'a [u8],
    regions: &mut [FatRegion],
    rules: &Rules,
) -> Result<Vec<UnitChange<'a>>, PruneError> {
    regions.sort_by_key(|r| r.offset);
    let mut units = Vec::new();
    let mut end = 0u64;
    for r in regions.iter() {
        if r.offset < end {
            return Err(PruneError::Unit { offset: r.offset, reason: "fat binary sections overlap".into() });
        }
        end = r.offset.saturating_add(r.len);
        let region = usize::try_from(r.offset)
            .ok()
            .zip(usize::try_from(end).ok())
            .and_then(|(a, b)| data.get(a..b))
            .ok_or(PruneError::Unit { offset: r.offset, reason: "lies past the end of the file".into() })?;
        if r.cuda {
            units.extend(cuda::plan_region(region, r.offset, rules, true)?);
        } else {
            let found = layout::fatbin::walk(region, r.offset)?;
            units.extend(plan_units(data, &found, rules, true)?);
        }
    }
    Ok(units)
}

/// The zero-mode output of any input: [`Pruned::output_plan`], with the
/// fields outside the fat binaries that depend on their bytes rewritten
/// (a PE image's checksum, a COFF object's section checksums).
pub fn zero_output_plan<'a>(data: &'a [u8], input: &Input, pruned: &Pruned<'a>) -> offload_format::plan::Plan<'a> {
    match input {
        Input::Pe(pe) => super::pe::output_plan(data, pe, pruned),
        Input::Coff(coff) | Input::Archive { coff, .. } => super::coff::output_plan(data, coff, pruned),
        _ => pruned.output_plan(data),
    }
}

#[cfg(test)]
mod tests;

/// The file ranges `(offset, len)` of the sections that can hold the fat
/// binaries a zero-mode prune rewrites ([`super::cut_object::FAT_SECTIONS`]),
/// sorted, overlapping ones joined (a hostile file's sections may overlap);
/// empty for anything but an ELF file holding one. Every byte outside them
/// is copied unchanged by zero mode, so a writer may copy those bytes before
/// [`plan_file`] has decided anything.
pub fn device_sections(data: &[u8]) -> Vec<(u64, u64)> {
    use super::cut_object::FAT_SECTIONS;
    let Ok(file) = ElfFile::parse(data) else { return Vec::new() };
    let ranges = (1..file.sections.len())
        .filter(|&i| file.section_name(i).is_ok_and(|n| FAT_SECTIONS.contains(&n)))
        .filter_map(|i| {
            let sh = file.sections.get(i)?;
            let in_file = sh.sh_type != elf::SHT_NOBITS && sh.offset.checked_add(sh.size)? <= data.len() as u64;
            in_file.then_some((sh.offset, sh.size))
        })
        .collect();
    joined(ranges)
}

/// Sorted ranges with the overlapping and touching ones joined (their ends
/// are known not to overflow).
fn joined(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (offset, len) in ranges {
        match out.last_mut() {
            Some((o, l)) if offset <= *o + *l => *l = (*l).max(offset + len - *o),
            _ => out.push((offset, len)),
        }
    }
    out
}
