//! `replace` for OpenMP offloading programs and libraries (clang's new
//! driver, linked ELF x86-64): one device image of `.llvm.offloading`,
//! registered through the `__tgt_device_image` tables the OpenMP file map
//! reads (docs/formats/host-references.md §2).
//!
//! An image is named by its `offload list` ID (`x86_64-pc-linux-gnu-`,
//! `amdgcn-amd-amdhsa-gfx90a`), its triple, or its target ID (`gfx90a`);
//! `--unit N` is the image's index in `.llvm.offloading`. The new image
//! must be an ELF file for the same machine: for AMDGPU the checks HIP
//! entries get against the image's arch ([`check_object`]: processor,
//! xnack/sramecc, every kernel descriptor and variable); for an x86-64
//! image (libomptarget's host plugin `dlopen`s it and looks its entries up
//! by name) an x86-64 ELF of the same type defining every global function
//! and object the old one defined.
//!
//! LLVM writes an OffloadBinary as header, entry, string records, strings,
//! then the image, padded to 8 bytes; the next image follows it directly.
//! So the new image is written in place of the old one when it fits up to
//! its OffloadBinary's end: the entry's `image_size` field changes, the
//! header's total `size` stays (a larger total than the image needs is
//! allowed, and keeps the images back to back for `llvm-objdump
//! --offloading`), the rest is zeroed, and every record that brackets the
//! inner image gets its new `ImageEnd` through `prune`'s table writer. A
//! record bracketing the whole OffloadBinary (newer wrappers) stays as it
//! is. An image that does not fit is refused: moving it is not done yet.

use super::object::{ObjectCheck, check_object, defined_symbols};
use super::{InputKind, Placement, ReplaceError, Replaced, entry_matches, pick_entry};
use crate::prune::openmp::{Edit, as_triple, same_target, set_word};
use offload_format::bytes::{u16_le, u32_le};
use offload_format::elf::ElfFile;
use offload_format::elf::symbols::STT_FUNC;
use offload_format::elf::{EM_X86_64, STT_OBJECT};
use offload_format::offload_binary::{Binaries, OffloadBinary, STRING_RECORD_SIZE_V1};
use offload_format::plan::Plan;
use offload_format::triple::Triple;
use offload_inspect::layout::openmp::{Image, OpenMpMap};
use offload_inspect::layout::{FatBinary, UnitKind};
use std::collections::HashSet;

/// Offset of `image_size` in an OffloadBinary entry (LLVM's `Entry`:
/// kinds and flags, string offset, string count, image offset, size).
const IMAGE_SIZE_FIELD: u64 = 32;

/// Whether `replace` takes `data` as an OpenMP host file.
pub(super) fn applies(data: &[u8]) -> bool {
    offload_inspect::layout::openmp::is_openmp_host(data)
}

/// The ID `offload list` gives an image.
fn image_id(im: &Image) -> String {
    format!("{}-{}", im.triple, im.arch)
}

/// Whether `wanted` names image `im`: its ID, its triple, or its arch
/// (for AMDGPU as a target ID, features in any order).
fn names(im: &Image, wanted: &str) -> bool {
    if wanted == image_id(im) {
        return true;
    }
    if let Some(t) = as_triple(wanted) {
        return same_target(&t, &Triple::parse(&im.triple));
    }
    if im.arch.is_empty() {
        return false;
    }
    if Triple::parse(&im.triple).is_amdgcn() {
        return entry_matches(&format!("openmp-{}--{}", im.triple, im.arch), wanted);
    }
    wanted == im.arch
}

/// Where an image lies in its OffloadBinary.
struct Place<'a> {
    /// The old image.
    old: &'a [u8],
    /// File offset of the image.
    image_at: u64,
    /// Bytes from there to the OffloadBinary's end: the most a new image
    /// may take in place.
    room: u64,
    /// File offset of the entry's `image_size` word.
    size_field: u64,
}

fn unit_error(offset: u64, reason: String) -> ReplaceError {
    ReplaceError::Unit(crate::prune::PruneError::Unit { offset, reason })
}

/// The OffloadBinary of `im` in `data`.
fn binary_of<'a>(data: &'a [u8], im: &Image) -> Result<OffloadBinary<'a>, ReplaceError> {
    let fail = |reason: String| unit_error(im.offset, reason);
    let bytes = usize::try_from(im.offset)
        .ok()
        .zip(usize::try_from(im.size).ok())
        .and_then(|(at, n)| data.get(at..at.checked_add(n)?))
        .ok_or_else(|| fail("the OffloadBinary lies past the end of the file".into()))?;
    match Binaries::new(bytes).next() {
        Some(Ok(b)) if b.version() == 1 => Ok(b),
        Some(Ok(b)) => Err(fail(format!("OffloadBinary version {} (only version 1 is replaced)", b.version()))),
        Some(Err(e)) => Err(fail(e.to_string())),
        None => Err(fail("no OffloadBinary".into())),
    }
}

/// Where the image of `im` lies, refusing an OffloadBinary whose metadata
/// follows its image (a new image would overwrite it).
fn place_of<'a>(data: &'a [u8], im: &Image) -> Result<Place<'a>, ReplaceError> {
    let binary = binary_of(data, im)?;
    let (header, entry) = (binary.header(), binary.entry());
    let base = binary.data().as_ptr() as usize;
    // Every string's end, as an offset in the binary (NUL included).
    let string_end = |s: &[u8]| (s.as_ptr() as usize).wrapping_sub(base) as u64 + s.len() as u64 + 1;
    let records_end = entry.num_strings.saturating_mul(STRING_RECORD_SIZE_V1).saturating_add(entry.string_offset);
    let metadata_end = binary
        .strings()
        .iter()
        .flat_map(|(k, v)| [string_end(k), string_end(v)])
        .chain([records_end, header.entry_offset.saturating_add(offload_format::offload_binary::ENTRY_SIZE)])
        .max()
        .unwrap_or(0);
    if metadata_end > entry.image_offset {
        return Err(ReplaceError::NotSupported(format!(
            "the OffloadBinary at offset {:#x} stores metadata after its image; only LLVM's layout (image last) is rewritten",
            im.offset
        )));
    }
    // The reader checked image_offset + image_size <= size, and the
    // entry's place inside the binary.
    Ok(Place {
        old: binary.image(),
        image_at: im.offset + entry.image_offset,
        room: im.size - entry.image_offset,
        size_field: im.offset + header.entry_offset + IMAGE_SIZE_FIELD,
    })
}

/// An ELF64 little-endian file's `e_type`, `e_machine` and `e_flags`.
fn elf_header(d: &[u8]) -> Option<(u16, u16, u32)> {
    if !(d.starts_with(b"\x7fELF") && d.get(4) == Some(&2) && d.get(5) == Some(&1)) {
        return None;
    }
    Some((u16_le(d, 16)?, u16_le(d, 18)?, u32_le(d, 48)?))
}

/// Checks that `new` may replace `old`, an x86-64 host-offload image that
/// libomptarget's host plugin loads with `dlopen` and whose entries it
/// finds by name.
fn check_host_image(id: &str, old: &[u8], new: &[u8]) -> Result<ObjectCheck, ReplaceError> {
    let fail = |reason: String| ReplaceError::Object { id: id.to_string(), reason };
    let Some((new_type, new_machine, new_flags)) = elf_header(new) else {
        return Err(fail("the new file is not a 64-bit little-endian ELF file".into()));
    };
    let Some((old_type, _, old_flags)) = elf_header(old) else {
        return Err(fail("the old image is not a 64-bit ELF file, so its symbols cannot be compared".into()));
    };
    if new_machine != EM_X86_64 {
        return Err(fail(format!("the new file is for ELF machine {new_machine}, the image is for x86-64 (62)")));
    }
    if new_type != old_type {
        return Err(fail(format!("the new file has ELF type {new_type}, the old image {old_type}")));
    }
    let old_elf = ElfFile::parse(old).map_err(|e| fail(format!("the old image: {e}")))?;
    let new_elf = ElfFile::parse(new).map_err(|e| fail(format!("the new image: {e}")))?;
    let (before, after) =
        (defined_symbols(&old_elf, &[STT_OBJECT, STT_FUNC]), defined_symbols(&new_elf, &[STT_OBJECT, STT_FUNC]));
    let missing: Vec<String> = before.difference(&after).cloned().collect();
    if !missing.is_empty() {
        return Err(ReplaceError::MissingSymbols { missing });
    }
    Ok(ObjectCheck {
        processor: "x86_64".into(),
        old_flags,
        new_flags,
        old_abi_version: old.get(8).copied().unwrap_or(0),
        new_abi_version: new.get(8).copied().unwrap_or(0),
        symbols: before.into_iter().collect(),
    })
}

/// The checks for image `im` by its triple.
fn check_image(id: &str, im: &Image, old: &[u8], new: &[u8]) -> Result<ObjectCheck, ReplaceError> {
    let triple = Triple::parse(&im.triple);
    if triple.is_amdgcn() {
        return check_object(&format!("openmp-{}--{}", im.triple, im.arch), old, new).map_err(|e| match e {
            ReplaceError::Object { reason, .. } => ReplaceError::Object { id: id.to_string(), reason },
            other => other,
        });
    }
    if triple.arch() == offload_format::triple::Arch::X86_64 {
        return check_host_image(id, old, new);
    }
    Err(ReplaceError::NotSupported(format!(
        "replacing an OpenMP image for '{}' is not supported (AMDGPU and x86-64 images are)",
        im.triple
    )))
}

/// The word edits that give every record of image `r` the end of a new
/// image of `n` bytes (records bracketing the whole OffloadBinary keep
/// theirs), plus the `image_size` word; by file offset.
fn table_edits(map: &OpenMpMap, r: usize, place: &Place, n: u64) -> Result<Vec<(u64, Edit)>, ReplaceError> {
    let im = &map.images[r];
    let mut edits = vec![(place.size_field, Edit::Bytes(n.to_le_bytes().to_vec()))];
    for record in map.descriptors.iter().flat_map(|d| &d.records).filter(|rec| rec.image == r) {
        if record.fields[0].value == im.start {
            let end = im.start.wrapping_add(n);
            set_word(&record.fields[1], end, &mut edits).map_err(|e| ReplaceError::NotSupported(e.to_string()))?;
        }
    }
    edits.sort_by_key(|e| e.0);
    Ok(edits)
}

/// Plans replacing the OpenMP image `wanted` of `data` by `object`.
pub(super) fn plan<'a>(
    data: &'a [u8],
    object: &'a [u8],
    wanted: &str,
    unit: Option<usize>,
) -> Result<Replaced<'a>, ReplaceError> {
    let map = OpenMpMap::read(data)?;
    let units: Vec<FatBinary> = map
        .images
        .iter()
        .map(|im| FatBinary {
            offset: im.offset,
            section_offset: im.offset.wrapping_sub(map.section_offset),
            used: im.size,
            extent: im.size,
            kind: UnitKind::Object,
        })
        .collect();
    let ids: Vec<Vec<String>> = map.images.iter().map(|im| vec![image_id(im)]).collect();
    let hits: HashSet<String> = map.images.iter().filter(|im| names(im, wanted)).map(image_id).collect();
    let (r, _, entry_id) = pick_entry(&units, &ids, wanted, unit, |id| hits.contains(id))?;
    let im = &map.images[r];
    if map.unreferenced().contains(&r) {
        return Err(ReplaceError::NotSupported(format!(
            "the OpenMP image at offset {:#x} is registered by no table this tool understands; its size cannot be updated safely",
            im.offset
        )));
    }
    let place = place_of(data, im)?;
    let check = check_image(&entry_id, im, place.old, object)?;
    let n = object.len() as u64;
    if n > place.room {
        return Err(ReplaceError::DoesNotFit {
            needed: n,
            extent: place.room,
            why: "an OpenMP image is only rewritten in place (the next OffloadBinary follows it; moving it is not done yet)"
                .into(),
        });
    }
    let edits = table_edits(&map, r, &place, n)?;
    let mut output = Plan::new();
    let mut at = 0u64;
    // The table words and the image_size word, then the image: none
    // overlaps another or the image (a damaged file may try).
    enum Piece {
        Bytes(Vec<u8>),
        Zeros,
        Image,
    }
    let mut all: Vec<(u64, u64, Piece)> = edits
        .into_iter()
        .map(|(offset, e)| match e {
            Edit::Bytes(b) => (offset, b.len() as u64, Piece::Bytes(b)),
            Edit::Zeros(z) => (offset, z, Piece::Zeros),
        })
        .collect();
    all.push((place.image_at, place.room, Piece::Image));
    all.sort_by_key(|e| e.0);
    for (start, len, piece) in all {
        let end = start.checked_add(len).filter(|&e| start >= at && e <= data.len() as u64);
        let Some(end) = end else {
            return Err(ReplaceError::NotSupported(format!(
                "edits overlap at file offset {start:#x}: table words share storage with the image"
            )));
        };
        output.borrow(&data[at as usize..start as usize]);
        match piece {
            Piece::Bytes(b) => output.own(b),
            Piece::Zeros => output.zeros(len),
            Piece::Image => {
                output.borrow(object);
                output.zeros(place.room - n);
            }
        }
        at = end;
    }
    output.borrow(&data[at as usize..]);
    Ok(Replaced {
        input: InputKind::OpenMp,
        unit_index: r,
        unit: units[r],
        entry_index: 0,
        entry_id,
        old_size: place.old.len() as u64,
        new_size: n,
        new_unit_size: im.size,
        new_version: None,
        stored_uncompressed: false,
        object: check,
        placement: Placement::InPlace,
        member: None,
        new_unit_offsets: units.iter().map(|u| u.offset).collect(),
        zeroed: vec![(place.image_at + n, place.room - n)],
        output,
    })
}

fn fail(msg: String) -> ReplaceError {
    ReplaceError::Verify(msg)
}

/// [`super::verify`] for OpenMP, from the output's own bytes: the same
/// images (offset, size, triple, arch) and descriptors, each record
/// registering the same image; the replaced image holding exactly the new
/// object with the rest of its OffloadBinary zero and its metadata as it
/// was; every other byte of the file the input's, except the words the
/// plan rewrites (that image's `image_size` and its records' `ImageEnd`).
pub(super) fn verify(output: &[u8], input: &[u8], replaced: &Replaced, object: &[u8]) -> Result<(), ReplaceError> {
    let before = OpenMpMap::read(input)?;
    let after = OpenMpMap::read(output).map_err(|e| fail(format!("it cannot be read back: {e}")))?;
    if output.len() != input.len() {
        return Err(fail("the file changed size".into()));
    }
    let shape = |m: &OpenMpMap| {
        m.images.iter().map(|im| (im.offset, im.size, im.triple.clone(), im.arch.clone())).collect::<Vec<_>>()
    };
    if shape(&before) != shape(&after) {
        return Err(fail("its images differ from the input's in place, size or target".into()));
    }
    let records = |m: &OpenMpMap| {
        m.descriptors
            .iter()
            .map(|d| (d.addr, d.records.iter().map(|r| r.image).collect::<Vec<_>>()))
            .collect::<Vec<_>>()
    };
    if records(&before) != records(&after) {
        return Err(fail("a descriptor registers other images than before".into()));
    }
    let r = replaced.unit_index;
    let (old_im, new_im) = (&before.images[r], &after.images[r]);
    let place = place_of(input, old_im)?;
    let binary = binary_of(output, new_im)?;
    if binary.image() != object {
        return Err(fail("the replaced OffloadBinary does not hold the new image".into()));
    }
    if new_im.end != new_im.start.wrapping_add(object.len() as u64) {
        return Err(fail("the image's registered end is not the new image's end".into()));
    }
    let n = object.len() as u64;
    let tail = output.get((place.image_at + n) as usize..(place.image_at + place.room) as usize);
    if tail.is_none_or(|t| t.iter().any(|&b| b != 0)) {
        return Err(fail("the rest of the OffloadBinary is not zero".into()));
    }
    // Everything else is the input's but the words the plan rewrites.
    let mut changed: Vec<(u64, u64)> = table_edits(&before, r, &place, n)?
        .iter()
        .map(|(at, e)| match e {
            Edit::Bytes(b) => (*at, b.len() as u64),
            Edit::Zeros(z) => (*at, *z),
        })
        .collect();
    changed.push((place.image_at, place.room));
    changed.sort_unstable();
    let mut at = 0u64;
    for (start, len) in changed.into_iter().chain([(input.len() as u64, 0)]) {
        if start > at && output.get(at as usize..start as usize) != input.get(at as usize..start as usize) {
            return Err(fail(format!("bytes between {at:#x} and {start:#x} changed")));
        }
        at = at.max(start.saturating_add(len));
    }
    Ok(())
}

#[cfg(test)]
#[path = "openmp_tests.rs"]
mod tests;
