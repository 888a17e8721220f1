//! `prune` on PE images (Windows DLLs and executables): the fat binaries
//! of `.nv_fatb`/`.nv_fatbin` (CUDA) and `.hip_fat`/`.hip_fatbin` (HIP)
//! rewritten in place, as on ELF (docs/formats/pe.md).
//!
//! Zero mode rewrites each fat binary at its own offset and zeroes the
//! bytes it frees; nothing else changes but the optional header's
//! checksum, recomputed when the input had one (a zero checksum stays
//! zero: the loader checks it only for drivers and a few system DLLs).
//! Every registration record (`.hipFatB`, `.nvFatBi`) that points into a
//! fat binary section must point at the start of a fat binary, or the
//! image is refused. An Authenticode signature, if any, no longer matches
//! after any change; it is kept as it was (see the docs page).
//!
//! Cut mode ([`plan_pe_cut`]) keeps every RVA: the fat binaries stay at
//! their addresses and only the raw data of the fat binary sections ends
//! earlier (`SizeOfRawData` cut to the last used byte, rounded up to the
//! file alignment; the loader fills the rest of `VirtualSize` with the
//! zeros zero mode would have written), and the raw data of every later
//! section, the overlay and the certificate table move down in the file.

use super::files::{Input, PeInput};
use super::files::check_unit;
use super::{PruneError, Pruned, UnitChange, cuda, plan_units};
use offload_format::coff::pe::{self, Checksum, PeImage, PeSection};
use offload_format::plan::{Piece, Plan};
use offload_inspect::layout;
use std::borrow::Cow;

/// Section names (cut to 8 bytes in images) that hold CUDA fat binaries.
pub const CUDA_SECTIONS: [&[u8]; 2] = [b".nv_fatb", b".nv_fatbin"];
/// Section names that hold HIP offload bundles.
pub const HIP_SECTIONS: [&[u8]; 2] = [b".hip_fat", b".hip_fatbin"];
/// `__hipRegisterFatBinary`'s record magic (`HIPF`), in `.hipFatB`.
const HIP_RECORD: u32 = 0x4849_5046;
/// `__cudaRegisterFatBinary`'s record magic, in `.nvFatBi`.
const CUDA_RECORD: u32 = 0x4662_43b1;

fn refuse(why: String) -> PruneError {
    PruneError::Unsupported(why)
}

fn parse(data: &[u8]) -> Result<PeImage<'_>, PruneError> {
    PeImage::parse(data).map_err(|e| refuse(e.to_string()))
}

fn is_fat(s: &PeSection) -> bool {
    CUDA_SECTIONS.contains(&s.name()) || HIP_SECTIONS.contains(&s.name())
}

/// Plans zero mode on a PE image: every fat binary of its CUDA and HIP
/// sections, in file order.
pub fn plan_pe<'a>(data: &'a [u8], rules: &super::Rules) -> Result<(Input, Pruned<'a>), PruneError> {
    let image = parse(data)?;
    let mut fat: Vec<&PeSection> = image.sections.iter().filter(|s| is_fat(s) && s.raw_size > 0).collect();
    if fat.is_empty() {
        return Err(refuse("no device code to prune: no .nv_fatb or .hip_fat section in this PE image".into()));
    }
    fat.sort_by_key(|s| s.raw_offset);
    let mut units: Vec<UnitChange<'a>> = Vec::new();
    let mut end = 0u64;
    for s in &fat {
        let start = u64::from(s.raw_offset);
        if start < end {
            return Err(PruneError::Unit { offset: start, reason: "fat binary sections overlap".into() });
        }
        end = start + u64::from(s.file_len());
        let region = image.section_data(s);
        if CUDA_SECTIONS.contains(&s.name()) {
            units.extend(cuda::plan_region(region, start, rules, true)?);
        } else {
            let found = layout::fatbin::walk(region, start)?;
            units.extend(plan_units(data, &found, rules, true)?);
        }
    }
    check_records(&image, &fat, &units)?;
    let checksum = (image.checksum != 0).then_some(image.checksum_offset);
    Ok((Input::Pe(PeInput { checksum }), Pruned { units, unreferenced: Vec::new() }))
}

/// Every registration record pointing into a fat binary section points
/// at the start of a planned fat binary (those starts do not move).
fn check_records(image: &PeImage, fat: &[&PeSection], units: &[UnitChange]) -> Result<(), PruneError> {
    let err = |e: pe::PeError| refuse(e.to_string());
    let mut records = image.records(b".hipFatB", HIP_RECORD).map_err(err)?;
    records.extend(image.records(b".nvFatBi", CUDA_RECORD).map_err(err)?);
    for (i, r) in records.iter().enumerate() {
        let inside = r.target.and_then(|rva| {
            fat.iter().find_map(|s| {
                let rel = rva.checked_sub(s.virtual_address).filter(|&rel| rel < s.file_len())?;
                Some(u64::from(s.raw_offset) + u64::from(rel))
            })
        });
        let Some(at) = inside else { continue };
        if !units.iter().any(|u| u.unit.offset == at) {
            return Err(PruneError::Dangling { record: i, offset: r.offset as u64, pointer: r.address });
        }
    }
    Ok(())
}

/// The PE checksum of a planned output whose checksum field is at
/// `field`.
pub fn plan_checksum(plan: &Plan, field: usize) -> u32 {
    let mut c = Checksum::new(field);
    for piece in &plan.pieces {
        match piece {
            Piece::Bytes(b) => c.update(b),
            Piece::Fill { byte: 0, len } => c.zeros(*len),
            Piece::Fill { byte, len } => {
                let chunk = [*byte; 4096];
                let mut left = *len;
                while left > 0 {
                    let n = left.min(4096);
                    c.update(&chunk[..n as usize]);
                    left -= n;
                }
            }
        }
    }
    c.finish()
}

/// `plan` with the bytes at `at` replaced by `bytes` (which lie inside it).
pub fn patch<'a>(plan: Plan<'a>, at: u64, bytes: &[u8]) -> Plan<'a> {
    let end = at + bytes.len() as u64;
    let mut out = Plan::new();
    let mut pos = 0u64;
    for piece in plan.pieces {
        let len = piece.len();
        let (p0, p1) = (pos, pos + len);
        pos = p1;
        if p1 <= at || p0 >= end {
            out.pieces.push(piece);
            continue;
        }
        let (cut0, cut1) = (at.max(p0) - p0, end.min(p1) - p0);
        let part = |from: u64, to: u64| -> Option<Piece<'a>> {
            (to > from).then(|| match &piece {
                Piece::Bytes(Cow::Borrowed(b)) => Piece::Bytes(Cow::Borrowed(&b[from as usize..to as usize])),
                Piece::Bytes(Cow::Owned(b)) => Piece::Bytes(Cow::Owned(b[from as usize..to as usize].to_vec())),
                Piece::Fill { byte, .. } => Piece::Fill { byte: *byte, len: to - from },
            })
        };
        out.pieces.extend(part(0, cut0));
        if p0 <= at {
            out.own(bytes.to_vec());
        }
        out.pieces.extend(part(cut1, len));
    }
    out
}

/// The zero-mode output: [`Pruned::output_plan`] with the checksum
/// recomputed when the input had one.
pub fn output_plan<'a>(data: &'a [u8], pe: &PeInput, pruned: &Pruned<'a>) -> Plan<'a> {
    let plan = pruned.output_plan(data);
    match pe.checksum {
        Some(field) => {
            let sum = plan_checksum(&plan, field);
            patch(plan, field as u64, &sum.to_le_bytes())
        }
        None => plan,
    }
}

fn fail(msg: String) -> PruneError {
    PruneError::Verify(msg)
}

/// Checks a zero-mode output from its bytes: the same length, every byte
/// outside the rewritten fat binaries and the checksum field unchanged,
/// each rewritten fat binary holding exactly the kept entries followed by
/// zeros, the checksum right (or still zero), and the image still parses
/// with the same sections.
pub fn verify_zero(output: &[u8], input: &[u8], pe: &PeInput, pruned: &Pruned) -> Result<(), PruneError> {
    if output.len() != input.len() {
        return Err(fail(format!("it is {} bytes, the input {}", output.len(), input.len())));
    }
    let skip = pe.checksum.map(|f| (f, f + 4));
    let same = |from: usize, to: usize| -> bool {
        match skip {
            Some((a, b)) if a < to && b > from => {
                output.get(from..a.max(from)) == input.get(from..a.max(from))
                    && output.get(b.min(to)..to) == input.get(b.min(to)..to)
            }
            _ => output.get(from..to) == input.get(from..to),
        }
    };
    let mut from = 0usize;
    for change in &pruned.units {
        let Some(rep) = &change.replacement else { continue };
        let start = change.unit.offset as usize;
        if start < from || !same(from, start) {
            return Err(fail(format!("bytes between {from:#x} and {start:#x} changed")));
        }
        check_unit(output, start, input, change)?;
        let tail = output.get(start + change.new_used as usize..start + rep.len() as usize).unwrap_or(&[]);
        if tail.iter().any(|&b| b != 0) {
            return Err(fail(format!("the freed bytes of the unit at {start:#x} are not zero")));
        }
        from = start + change.unit.extent as usize;
    }
    if !same(from, input.len()) {
        return Err(fail(format!("bytes after {from:#x} changed")));
    }
    check_image(output, input, pe)
}

/// The output parses as a PE image with the input's section count, and
/// its checksum is right (or zero, as the input's was).
fn check_image(output: &[u8], input: &[u8], pe: &PeInput) -> Result<(), PruneError> {
    let new = PeImage::parse(output).map_err(|e| fail(format!("it no longer reads as PE: {e}")))?;
    let old = parse(input)?;
    if new.sections.len() != old.sections.len() || new.size_of_image != old.size_of_image {
        return Err(fail("its section table or SizeOfImage changed".into()));
    }
    match pe.checksum {
        Some(field) if pe::checksum(output, field) != new.checksum => Err(fail("its PE checksum is wrong".into())),
        None if new.checksum != 0 => Err(fail("its PE checksum was zero and is not".into())),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "pe_tests.rs"]
mod tests;
