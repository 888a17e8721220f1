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
//! after any change: the certificate table is dropped (it ends the file)
//! and data directory 4 zeroed; the command line warns.
//!
//! Cut mode ([`plan_pe_cut`]) keeps every RVA: the fat binaries stay at
//! their addresses and only the raw data of the fat binary sections ends
//! earlier (`SizeOfRawData` cut to the last used byte, rounded up to the
//! file alignment; the loader fills the rest of `VirtualSize` with the
//! zeros zero mode would have written), and the raw data of every later
//! section, the overlay and the certificate table move down in the file.

use super::files::{FatRegion, check_unit, plan_regions};
use super::files::{Input, PeInput};
use super::{PruneError, Pruned, UnitChange};
use offload_format::coff::pe::{self, Checksum, PeImage, PeSection};
use offload_format::plan::{Piece, Plan};
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
    PeImage::parse(data).map_err(|e| PruneError::UnsupportedRead(e.into()))
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
        let openmp = image
            .section(b".llvm")
            .is_some_and(|s| image.section_data(s).starts_with(&offload_format::offload_binary::MAGIC));
        if openmp {
            return Err(refuse(
                "OpenMP offload images (section .llvm) are listed but not pruned in PE images: their registration table (__tgt_device_image records, base-relocated) is not rewritten yet".into(),
            ));
        }
        return Err(refuse("no device code to prune: no .nv_fatb or .hip_fat section in this PE image".into()));
    }
    fat.sort_by_key(|s| s.raw_offset);
    let mut regions: Vec<FatRegion> = fat
        .iter()
        .map(|s| FatRegion {
            offset: u64::from(s.raw_offset),
            len: u64::from(s.file_len()),
            cuda: CUDA_SECTIONS.contains(&s.name()),
        })
        .collect();
    let units = plan_regions(data, &mut regions, rules)?;
    check_records(&image, &fat, &units)?;
    let checksum = (image.checksum != 0).then_some(image.checksum_offset);
    let certificate = certificate(&image)?;
    Ok((Input::Pe(PeInput { checksum, certificate }), Pruned { units, unreferenced: Vec::new() }))
}

/// An Authenticode certificate table (data directory 4, whose "RVA" is a
/// file offset), dropped from every rewritten image: the signature covers
/// the bytes `prune` changes (docs/formats/pe.md §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Certificate {
    /// File offset of the table.
    pub offset: u64,
    /// Its size.
    pub size: u64,
    /// File offset of data directory 4 (8 bytes, zeroed in the output).
    pub directory: u64,
}

/// The certificate table of `image`, when it has one; it must end the
/// file (where signing tools append it), or it cannot be dropped.
fn certificate(image: &PeImage) -> Result<Option<Certificate>, PruneError> {
    let Some(d) = image.directory(pe::DIR_SECURITY).filter(|d| d.size != 0) else { return Ok(None) };
    let (offset, size) = (u64::from(d.rva), u64::from(d.size));
    let len = image.data.len() as u64;
    let last_section = image.sections.iter().map(|s| u64::from(s.raw_offset) + u64::from(s.file_len())).max();
    if offset + size != len || last_section.is_some_and(|end| offset < end) {
        return Err(refuse(format!(
            "the Authenticode certificate table (offset {offset:#x}, {size} bytes) does not end the file after the sections; it cannot be dropped, and a rewritten image must not keep it"
        )));
    }
    let directory = (image.directories_offset + 8 * pe::DIR_SECURITY) as u64;
    Ok(Some(Certificate { offset, size, directory }))
}

/// `plan` without the certificate table (which ends it, at `offset` of
/// the output) and with data directory 4 zeroed.
fn without_certificate<'a>(plan: Plan<'a>, cert: Option<Certificate>, offset: u64) -> Plan<'a> {
    match cert {
        Some(c) => patch(truncated(&plan, offset), c.directory, &[0; 8]),
        None => plan,
    }
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
    let plan = without_certificate(plan, pe.certificate, pe.certificate.map_or(0, |c| c.offset));
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
    let end = pe.certificate.map_or(input.len(), |c| c.offset as usize);
    if output.len() != end {
        return Err(fail(format!("it is {} bytes, {end} expected", output.len())));
    }
    let mut skips: Vec<(usize, usize)> = pe.checksum.map(|f| (f, f + 4)).into_iter().collect();
    skips.extend(pe.certificate.map(|c| (c.directory as usize, c.directory as usize + 8)));
    skips.sort_unstable();
    let same = |from: usize, to: usize| -> bool {
        let mut at = from;
        for &(a, b) in skips.iter().filter(|&&(a, b)| a < to && b > from) {
            if output.get(at..a.max(at)) != input.get(at..a.max(at)) {
                return false;
            }
            at = b.min(to);
        }
        output.get(at..to) == input.get(at..to)
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
    if !same(from, end) {
        return Err(fail(format!("bytes after {from:#x} changed")));
    }
    check_image(output, input, pe)
}

/// A dropped certificate table left no trace: data directory 4 is empty.
fn check_no_certificate(new: &PeImage, cert: Option<Certificate>) -> Result<(), PruneError> {
    let left = new.directories.get(pe::DIR_SECURITY).is_some_and(|d| d.rva != 0 || d.size != 0);
    if cert.is_some() && left {
        return Err(fail("its certificate table directory is still set".into()));
    }
    Ok(())
}

/// The output parses as a PE image with the input's section count, and
/// its checksum is right (or zero, as the input's was).
fn check_image(output: &[u8], input: &[u8], pe: &PeInput) -> Result<(), PruneError> {
    let new = PeImage::parse(output).map_err(|e| fail(format!("it no longer reads as PE: {e}")))?;
    let old = parse(input)?;
    if new.sections.len() != old.sections.len() || new.size_of_image != old.size_of_image {
        return Err(fail("its section table or SizeOfImage changed".into()));
    }
    check_no_certificate(&new, pe.certificate)?;
    match pe.checksum {
        Some(field) if pe::checksum(output, field) != new.checksum => Err(fail("its PE checksum is wrong".into())),
        None if new.checksum != 0 => Err(fail("its PE checksum was zero and is not".into())),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[path = "pe_tests.rs"]
mod tests;

/// The largest alignment a packed fat binary keeps.
const MAX_UNIT_ALIGN: u64 = 4096;

/// `IMAGE_SCN_CNT_INITIALIZED_DATA`.
const SCN_INITIALIZED: u32 = 0x40;

/// A planned `--mode cut` of a PE image: the fat binaries packed from the
/// start of their sections (RVAs of everything else unchanged), the raw
/// data of those sections shortened, and everything after them in the
/// file moved down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeCut {
    /// New file offset of each unit of the plan, in its order.
    pub unit_offsets: Vec<u64>,
    /// Per fat section: (raw offset, old raw size, new raw size).
    pub sections: Vec<(u64, u64, u64)>,
    /// Small writes over the input (offset in the input, bytes): section
    /// headers, optional header fields, moved file offsets, record
    /// addresses.
    pub patches: Vec<(u64, Vec<u8>)>,
    /// Where the checksum field is, when it is recomputed.
    pub checksum: Option<usize>,
    /// The certificate table dropped (it ends the input).
    pub certificate: Option<Certificate>,
}

impl PeCut {
    /// Bytes the output is smaller than the input.
    pub fn saved(&self) -> u64 {
        self.sections.iter().map(|&(_, old, new)| old - new).sum::<u64>() + self.certificate.map_or(0, |c| c.size)
    }
}

fn cut_refused(why: impl Into<String>) -> PruneError {
    PruneError::CutRefused(why.into())
}

/// The largest power of two up to [`MAX_UNIT_ALIGN`] dividing `offset`
/// (a section offset; the section itself is page aligned in memory).
fn alignment(offset: u64) -> u64 {
    let mut a = MAX_UNIT_ALIGN;
    while a > 1 && !offset.is_multiple_of(a) {
        a /= 2;
    }
    a
}

use super::cut::shifted as moved;

/// Plans `--mode cut` on a PE image pruned as `pruned` by [`plan_pe`].
pub fn plan_pe_cut(data: &[u8], pe_input: &PeInput, pruned: &Pruned) -> Result<PeCut, PruneError> {
    let image = parse(data)?;
    if image.file_alignment == 0 || !image.file_alignment.is_power_of_two() {
        return Err(cut_refused(format!("the file alignment {:#x} is not a power of two", image.file_alignment)));
    }
    let fa = u64::from(image.file_alignment);
    // Moving file bytes is only defined when no two sections share them: a
    // section lying inside a fat binary section would lose its bytes to the
    // cut (found by fuzzing, fuzz target `pe_image`).
    let mut ranges: Vec<(u64, u64)> = image
        .sections
        .iter()
        .filter(|s| s.raw_size > 0)
        .map(|s| (u64::from(s.raw_offset), u64::from(s.raw_offset) + u64::from(s.raw_size)))
        .collect();
    ranges.sort_unstable();
    if ranges.windows(2).any(|w| w[1].0 < w[0].1) {
        return Err(cut_refused("two sections share file bytes"));
    }
    let mut fat: Vec<&PeSection> = image.sections.iter().filter(|s| is_fat(s) && s.raw_size > 0).collect();
    fat.sort_by_key(|s| s.raw_offset);
    let mut unit_offsets = vec![0u64; pruned.units.len()];
    let mut sections = Vec::new();
    // Section offset of each unit in its section, before and after.
    let mut moves: Vec<(u32, u64, u64)> = Vec::new();
    for s in &fat {
        let start = u64::from(s.raw_offset);
        let end = start + u64::from(s.file_len());
        let mut at = 0u64;
        for (k, c) in pruned.units.iter().enumerate() {
            if c.unit.offset < start || c.unit.offset >= end {
                continue;
            }
            let old = c.unit.offset - start;
            at = at.next_multiple_of(alignment(old));
            unit_offsets[k] = start + at;
            moves.push((s.virtual_address, old, at));
            at += c.new_used;
        }
        let new_raw = at.next_multiple_of(fa).min(u64::from(s.raw_size));
        sections.push((start, u64::from(s.raw_size), new_raw));
    }
    if sections.iter().all(|&(_, old, new)| old == new) {
        return Err(cut_refused("no whole file-alignment block is freed"));
    }
    let in_fat = |rva: u64| {
        fat.iter().any(|s| {
            rva >= u64::from(s.virtual_address)
                && rva < u64::from(s.virtual_address) + u64::from(s.virtual_size.max(s.raw_size))
        })
    };
    // Directories that point into a fat section are not understood.
    for (i, d) in image.directories.iter().enumerate() {
        if i != pe::DIR_SECURITY && d.size != 0 && in_fat(u64::from(d.rva)) {
            return Err(cut_refused(format!("data directory {i} points into a fat binary section")));
        }
    }
    let mut patches: Vec<(u64, Vec<u8>)> = Vec::new();
    // Record addresses: each moves with the fat binary it points at.
    let err = |e: pe::PeError| refuse(e.to_string());
    let mut records = image.records(b".hipFatB", HIP_RECORD).map_err(err)?;
    records.extend(image.records(b".nvFatBi", CUDA_RECORD).map_err(err)?);
    let mut record_fields = Vec::new();
    for r in &records {
        let Some(rva) = r.target.filter(|&t| in_fat(u64::from(t))) else { continue };
        let Some(&(va, _, new)) = moves.iter().find(|&&(va, old, _)| u64::from(va) + old == u64::from(rva)) else {
            return Err(cut_refused(format!("the record at {:#x} does not point at a fat binary", r.offset)));
        };
        let address = image.image_base + u64::from(va) + new;
        let bytes = if image.is_64 { address.to_le_bytes().to_vec() } else { (address as u32).to_le_bytes().to_vec() };
        patches.push((r.offset as u64 + 8, bytes));
        record_fields.push(r.offset as u64 + 8);
    }
    // Any other relocated address pointing into a fat section is a
    // reference this rewrite would not move.
    let width = if image.is_64 { 8 } else { 4 };
    for (rva, _) in image.base_relocations().map_err(err)? {
        let Some(at) = image.rva_to_offset(rva) else { continue };
        let value = if image.is_64 {
            offload_format::bytes::u64_le(data, at)
        } else {
            offload_format::bytes::u32_le(data, at).map(u64::from)
        };
        let Some(target) = value.and_then(|v| v.checked_sub(image.image_base)) else { continue };
        if in_fat(target) && !record_fields.contains(&(at as u64)) && width > 0 {
            return Err(cut_refused(format!(
                "a relocated address at {at:#x} points into a fat binary section other than a registration record"
            )));
        }
    }
    // The section table: raw sizes of the fat sections, raw offsets of
    // every section after them.
    let mut initialized_cut = 0u64;
    for s in &image.sections {
        if s.raw_size == 0 {
            continue;
        }
        if s.raw_offset != 0
            && offload_format::bytes::u32_le(data, s.header_offset + 24).is_some_and(|relocations| relocations != 0)
        {
            return Err(cut_refused("a section has COFF relocations in an image"));
        }
        if let Some(&(_, old, new)) = sections.iter().find(|&&(off, _, _)| off == u64::from(s.raw_offset)) {
            patches.push((s.header_offset as u64 + 16, (new as u32).to_le_bytes().to_vec()));
            if s.characteristics & SCN_INITIALIZED != 0 {
                initialized_cut += old - new;
            }
        } else {
            let new = moved(&sections, u64::from(s.raw_offset));
            if new != u64::from(s.raw_offset) {
                patches.push((s.header_offset as u64 + 20, (new as u32).to_le_bytes().to_vec()));
            }
        }
    }
    let init_at = image.optional_offset + 8;
    let init = offload_format::bytes::u32_le(data, init_at).unwrap_or(0);
    patches.push((init_at as u64, init.saturating_sub(initialized_cut as u32).to_le_bytes().to_vec()));
    if image.symbol_table != 0 {
        let new = moved(&sections, u64::from(image.symbol_table));
        let at = image.optional_offset as u64 - 20 + 8;
        patches.push((at, (new as u32).to_le_bytes().to_vec()));
    }
    // The certificate table is dropped (zeroed directory, output cut
    // before it) rather than moved: it no longer matches.
    if let Some(d) = image.directory(pe::DIR_DEBUG) {
        let start = image.rva_to_offset(d.rva).ok_or_else(|| cut_refused("the debug directory is not in the file"))?;
        for e in 0..(d.size as usize / 28).min(64) {
            let field = start + 28 * e + 24;
            let Some(old) = offload_format::bytes::u32_le(data, field) else { break };
            let new = moved(&sections, u64::from(old));
            if old != 0 && new != u64::from(old) {
                patches.push((field as u64, (new as u32).to_le_bytes().to_vec()));
            }
        }
    }
    patches.sort();
    Ok(PeCut { unit_offsets, sections, patches, checksum: pe_input.checksum, certificate: pe_input.certificate })
}

/// The first `n` bytes of `plan`.
pub(crate) fn truncated<'a>(plan: &Plan<'a>, n: u64) -> Plan<'a> {
    let mut out = Plan::new();
    let mut left = n;
    for piece in &plan.pieces {
        if left == 0 {
            break;
        }
        let len = piece.len().min(left);
        out.pieces.push(match piece {
            Piece::Bytes(Cow::Borrowed(b)) => Piece::Bytes(Cow::Borrowed(&b[..len as usize])),
            Piece::Bytes(Cow::Owned(b)) => Piece::Bytes(Cow::Owned(b[..len as usize].to_vec())),
            Piece::Fill { byte, .. } => Piece::Fill { byte: *byte, len },
        });
        left -= len;
    }
    out
}

impl PeCut {
    /// The output file.
    pub fn output_plan<'a>(&self, data: &'a [u8], pruned: &Pruned<'a>) -> Plan<'a> {
        let mut plan = Plan::new();
        let mut at = 0u64;
        // Input bytes [at, to) with the patches that fall inside.
        let copy = |plan: &mut Plan<'a>, from: u64, to: u64| {
            let mut pos = from;
            for (off, bytes) in self.patches.iter().filter(|(o, _)| *o >= from && *o < to) {
                plan.borrow(data.get(pos as usize..*off as usize).unwrap_or(&[]));
                plan.own(bytes.clone());
                pos = off + bytes.len() as u64;
            }
            plan.borrow(data.get(pos as usize..to as usize).unwrap_or(&[]));
        };
        for &(start, old, new) in &self.sections {
            copy(&mut plan, at, start);
            let mut pos = start;
            for (k, c) in pruned.units.iter().enumerate() {
                if c.unit.offset < start || c.unit.offset >= start + old {
                    continue;
                }
                let to = self.unit_offsets[k];
                plan.zeros(to - pos);
                match &c.replacement {
                    Some(rep) => plan.pieces.extend(truncated(rep, c.new_used).pieces),
                    None => plan.borrow(
                        data.get(c.unit.offset as usize..(c.unit.offset + c.unit.used) as usize).unwrap_or(&[]),
                    ),
                }
                pos = to + c.new_used;
            }
            plan.zeros((start + new).saturating_sub(pos));
            at = start + old;
        }
        copy(&mut plan, at, data.len() as u64);
        let plan = match self.certificate {
            Some(c) => without_certificate(plan, self.certificate, moved(&self.sections, c.offset)),
            None => plan,
        };
        match self.checksum {
            Some(field) => {
                let sum = plan_checksum(&plan, field);
                patch(plan, field as u64, &sum.to_le_bytes())
            }
            None => plan,
        }
    }

    /// Checks a cut output from its bytes: it reads as a PE image with
    /// the same sections at the same RVAs, each fat binary at its new
    /// offset holds exactly the kept entries, every registration record
    /// points at one of them, every other section's raw data is the
    /// input's (but for the patched fields), and the checksum is right.
    pub fn verify(&self, output: &[u8], input: &[u8], pruned: &Pruned) -> Result<(), PruneError> {
        let new = PeImage::parse(output).map_err(|e| fail(format!("it no longer reads as PE: {e}")))?;
        let old = parse(input)?;
        if output.len() as u64 + self.saved() != input.len() as u64 {
            return Err(fail(format!("it is {} bytes, {} expected", output.len(), input.len() as u64 - self.saved())));
        }
        if new.sections.len() != old.sections.len() || new.size_of_image != old.size_of_image {
            return Err(fail("its section table or SizeOfImage changed".into()));
        }
        check_no_certificate(&new, self.certificate)?;
        for (n, o) in new.sections.iter().zip(&old.sections) {
            if n.name != o.name || n.virtual_address != o.virtual_address || n.virtual_size != o.virtual_size {
                return Err(fail(format!("section {} moved in memory", String::from_utf8_lossy(o.name()))));
            }
            if is_fat(o) {
                continue;
            }
            let (nb, ob) = (new.section_data(n), old.section_data(o));
            let patched = |i: usize| {
                let at = o.raw_offset as u64 + i as u64;
                self.patches.iter().any(|(p, b)| at >= *p && at < p + b.len() as u64)
            };
            if nb.len() != ob.len() || nb.iter().zip(ob).enumerate().any(|(i, (a, b))| a != b && !patched(i)) {
                return Err(fail(format!("section {} changed", String::from_utf8_lossy(o.name()))));
            }
        }
        for (k, c) in pruned.units.iter().enumerate() {
            let at = self.unit_offsets[k] as usize;
            if c.replacement.is_some() {
                check_unit(output, at, input, c)?;
            } else if output.get(at..at + c.unit.used as usize)
                != input.get(c.unit.offset as usize..(c.unit.offset + c.unit.used) as usize)
            {
                return Err(fail(format!("the unchanged unit at {:#x} differs", c.unit.offset)));
            }
        }
        let err = |e: pe::PeError| fail(e.to_string());
        let mut records = new.records(b".hipFatB", HIP_RECORD).map_err(err)?;
        records.extend(new.records(b".nvFatBi", CUDA_RECORD).map_err(err)?);
        for r in records {
            let Some(at) = r.target.and_then(|t| new.rva_to_offset(t)) else { continue };
            let in_fat = new
                .sections
                .iter()
                .any(|s| is_fat(s) && at >= s.raw_offset as usize && at < (s.raw_offset + s.file_len()) as usize);
            if in_fat && !self.unit_offsets.contains(&(at as u64)) {
                return Err(fail(format!("the record at {:#x} points at no fat binary", r.offset)));
            }
        }
        match self.checksum {
            Some(field) if pe::checksum(output, field) != new.checksum => Err(fail("its PE checksum is wrong".into())),
            None if new.checksum != 0 => Err(fail("its PE checksum was zero and is not".into())),
            _ => Ok(()),
        }
    }
}
