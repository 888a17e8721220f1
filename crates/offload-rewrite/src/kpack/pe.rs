//! Splitting a PE image (a HIP DLL or EXE) into kpack form
//! (`docs/formats/kpack.md`, "PE images").
//!
//! What AMD's splitter does to a PE image, per the public sources cited on
//! that page: a new section `.kpackrf` holds the marker, every record of
//! `.hipFatB` becomes `HIPK`, points at the marker and carries its index
//! as `co_index`, and the whole pages of `.hip_fat` leave the file. This
//! module gives the same answer to the runtime with a smaller change:
//! `.hip_fat` itself becomes `.kpackrf` (the name in its header), its raw
//! data is the marker padded to the file alignment, and the raw data of
//! every later section moves down. No RVA changes (the section keeps its
//! virtual size; the loader fills it with zeros), so no code, import or
//! relocation needs touching; file offsets that point past the section
//! (later sections, the debug directory's raw data, the certificate table,
//! a COFF symbol table) move with the bytes, and the checksum is recomputed
//! when the input had one. The output is read back before it is returned.

use super::KpackError;
use super::host::{SplitBinary, marker_bytes, push_code_objects, refuse, target_of};
use offload_format::bundle::binary;
use offload_format::bytes::{u32_le, u64_le};
use offload_format::coff::pe::{self, PeImage};
use offload_format::kpack::host::{
    HIPF, HIPK, HostBinary, PE_FATBIN_SECTION, PE_MARKER_SECTION, PE_WRAPPER_SECTION, RECORD_LEN, WrapperKind,
};
use std::collections::BTreeMap;

/// `IMAGE_SCN_CNT_INITIALIZED_DATA`.
const SCN_INITIALIZED: u32 = 0x40;

/// Splits one PE image: `None` when it has no `.hip_fat` raw data, else
/// the rewritten image and its code objects (never joinable: `offload
/// join` restores ELF binaries only).
pub fn split_pe<'a>(
    data: &'a [u8],
    kernel_name: &str,
    search_paths: &[String],
) -> Result<Option<SplitBinary<'a>>, KpackError> {
    let image = PeImage::parse(data).map_err(|e| KpackError::RefusedRead(e.into()))?;
    let Some(fat_index) = image.sections.iter().position(|s| s.name() == PE_FATBIN_SECTION.as_bytes()) else {
        return Ok(None);
    };
    let Some(&fat) = image.sections.get(fat_index) else { return Ok(None) };
    if fat.raw_size == 0 {
        return Ok(None);
    }
    let (fat_start, old_raw) = (u64::from(fat.raw_offset), u64::from(fat.raw_size));
    if fat_start.checked_add(old_raw).is_none_or(|end| end > data.len() as u64) {
        return Err(refuse(format!("{PE_FATBIN_SECTION}'s raw data runs past the end of the file")));
    }
    let overlaps = |s: &pe::PeSection| {
        let (a, b) = (u64::from(s.raw_offset), u64::from(s.raw_offset) + u64::from(s.raw_size));
        s.header_offset != fat.header_offset && s.raw_size != 0 && a < fat_start + old_raw && fat_start < b
    };
    if image.sections.iter().any(overlaps) {
        return Err(refuse(format!("another section's raw data overlaps {PE_FATBIN_SECTION}'s")));
    }
    if !image.is_64 || image.machine != 0x8664 {
        return Err(refuse("only PE32+ x86-64 images are split"));
    }
    if image.sections.iter().any(|s| s.name() == PE_MARKER_SECTION.as_bytes()) {
        return Err(refuse(format!("the image already has a {PE_MARKER_SECTION} section")));
    }
    let fa = u64::from(image.file_alignment);
    if fa == 0 || !fa.is_power_of_two() {
        return Err(refuse(format!("the file alignment {fa:#x} is not a power of two")));
    }
    let seg = image
        .section(PE_WRAPPER_SECTION.as_bytes())
        .copied()
        .ok_or_else(|| refuse(format!("no {PE_WRAPPER_SECTION} section (no registration records)")))?;
    let fat_bytes = image.section_data(&fat);
    let fat_va = u64::from(fat.virtual_address);
    let seg_bytes = image.section_data(&seg);
    let used = (seg.virtual_size as usize).min(seg_bytes.len());
    if used == 0 || !used.is_multiple_of(RECORD_LEN) {
        return Err(refuse(format!("{PE_WRAPPER_SECTION} is {used} bytes, not a whole number of 24-byte records")));
    }
    // The records: HIPF, version 1, each pointing at a bundle in .hip_fat.
    let mut objects = Vec::new();
    let mut units: BTreeMap<u64, Vec<(String, &[u8])>> = BTreeMap::new();
    let mut record_offsets = Vec::new();
    for (i, rec) in seg_bytes[..used].chunks_exact(RECORD_LEN).enumerate() {
        let (magic, version, address) = (u32_le(rec, 0), u32_le(rec, 4), u64_le(rec, 8));
        if magic != Some(HIPF) || version != Some(1) {
            return Err(refuse(format!("record {i} of {PE_WRAPPER_SECTION} is not a version-1 HIPF record")));
        }
        let at = address
            .and_then(|a| a.checked_sub(image.image_base))
            .and_then(|rva| rva.checked_sub(fat_va))
            .filter(|&o| o < fat_bytes.len() as u64)
            .ok_or_else(|| refuse(format!("record {i} does not point into {PE_FATBIN_SECTION}")))?;
        let co_index = u32::try_from(i).map_err(|_| refuse("too many records"))?;
        if let std::collections::btree_map::Entry::Vacant(slot) = units.entry(at) {
            let bytes = &fat_bytes[at as usize..];
            if bytes.starts_with(b"CCOB") {
                return Err(refuse(format!(
                    "the fat binary at {PE_FATBIN_SECTION}+{at:#x} is a compressed bundle; PE images with compressed bundles are not split yet"
                )));
            }
            let entries = binary::read(bytes)
                .map_err(|e| refuse(format!("{PE_FATBIN_SECTION}+{at:#x}: {e}")))?
                .ok_or_else(|| refuse(format!("record {i} points at no offload bundle")))?;
            let list: Vec<(String, &[u8])> =
                entries.iter().map(|e| (String::from_utf8_lossy(e.id).into_owned(), e.payload)).collect();
            let mut seen = std::collections::HashSet::new();
            for (id, _) in &list {
                let t = target_of(id);
                if !t.is_empty() && !seen.insert(t.to_string()) {
                    return Err(refuse(format!("the fat binary at {at:#x} holds two code objects for {t}")));
                }
            }
            slot.insert(list);
        }
        push_code_objects(
            &mut objects,
            co_index,
            units.get(&at).into_iter().flatten().map(|(id, payload)| (id, std::borrow::Cow::Borrowed(*payload))),
        )?;
        record_offsets.push(seg.raw_offset as u64 + (i * RECORD_LEN) as u64);
    }
    // Nothing else may point into .hip_fat: no data directory, and no
    // relocated address but the records' pointers.
    let fat_end_va = fat_va + u64::from(fat.virtual_size.max(fat.raw_size));
    let in_fat = |rva: u64| rva >= fat_va && rva < fat_end_va;
    for (i, d) in image.directories.iter().enumerate() {
        if i != pe::DIR_SECURITY && d.size != 0 && in_fat(u64::from(d.rva)) {
            return Err(refuse(format!("data directory {i} points into {PE_FATBIN_SECTION}")));
        }
    }
    let pointer_fields: Vec<u64> = record_offsets.iter().map(|o| o + 8).collect();
    for (rva, _) in image.base_relocations().map_err(|e| KpackError::RefusedRead(e.into()))? {
        let Some(at) = image.rva_to_offset(rva) else { continue };
        let Some(target) = u64_le(data, at).and_then(|v| v.checked_sub(image.image_base)) else { continue };
        if in_fat(target) && !pointer_fields.contains(&(at as u64)) {
            return Err(refuse(format!(
                "a relocated address at {at:#x} points into {PE_FATBIN_SECTION} and is not a registration record"
            )));
        }
    }

    let marker = marker_bytes(kernel_name, search_paths, None);
    let new_raw = (marker.len() as u64).next_multiple_of(fa);
    if new_raw > old_raw {
        return Err(refuse(format!(
            "the marker ({} bytes) does not fit in {PE_FATBIN_SECTION} ({old_raw} bytes)",
            marker.len()
        )));
    }
    let cut = old_raw - new_raw;
    let moved = |off: u64| if off >= fat_start + old_raw { off - cut } else { off };
    let mut patches: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut name = [0u8; 8];
    name[..PE_MARKER_SECTION.len()].copy_from_slice(PE_MARKER_SECTION.as_bytes());
    patches.push((fat.header_offset as u64, name.to_vec()));
    patches.push((fat.header_offset as u64 + 16, (new_raw as u32).to_le_bytes().to_vec()));
    for s in &image.sections {
        if s.header_offset != fat.header_offset && s.raw_size != 0 && u64::from(s.raw_offset) >= fat_start + old_raw {
            patches.push((s.header_offset as u64 + 20, (moved(u64::from(s.raw_offset)) as u32).to_le_bytes().to_vec()));
        }
    }
    if fat.characteristics & SCN_INITIALIZED != 0 {
        let at = image.optional_offset + 8;
        let init = u32_le(data, at).unwrap_or(0);
        patches.push((at as u64, init.saturating_sub(cut as u32).to_le_bytes().to_vec()));
    }
    if image.symbol_table != 0 {
        let at = image.optional_offset as u64 - 20 + 8;
        patches.push((at, (moved(u64::from(image.symbol_table)) as u32).to_le_bytes().to_vec()));
    }
    if let Some(d) = image.directory(pe::DIR_SECURITY) {
        let at = (image.directories_offset + 8 * pe::DIR_SECURITY) as u64;
        patches.push((at, (moved(u64::from(d.rva)) as u32).to_le_bytes().to_vec()));
    }
    if let Some(d) = image.directory(pe::DIR_DEBUG) {
        let start = image.rva_to_offset(d.rva).ok_or_else(|| refuse("the debug directory is not in the file"))?;
        for e in 0..(d.size as usize / 28).min(64) {
            let field = start + 28 * e + 24;
            let Some(old) = u32_le(data, field) else { break };
            if old != 0 && moved(u64::from(old)) != u64::from(old) {
                patches.push((field as u64, (moved(u64::from(old)) as u32).to_le_bytes().to_vec()));
            }
        }
    }
    let pointer = image.image_base + fat_va;
    for (i, &r) in record_offsets.iter().enumerate() {
        patches.push((r, HIPK.to_le_bytes().to_vec()));
        patches.push((r + 8, pointer.to_le_bytes().to_vec()));
        patches.push((r + 16, (i as u64).to_le_bytes().to_vec()));
    }
    // Apply the patches to a copy, then drop the cut bytes.
    let mut buf = data.to_vec();
    for (at, bytes) in &patches {
        let s = usize::try_from(*at).map_err(|_| refuse("patch offset"))?;
        if s >= fat_start as usize && s < (fat_start + old_raw) as usize {
            return Err(refuse("an edit falls inside the fat binary section"));
        }
        buf.get_mut(s..s + bytes.len()).ok_or_else(|| refuse("an edit falls past the end"))?.copy_from_slice(bytes);
    }
    let (head, rest) = buf.split_at(fat_start as usize);
    let tail = rest.get(old_raw as usize..).ok_or_else(|| refuse("the fat binary section runs past the end"))?;
    let mut out = Vec::with_capacity(buf.len() - cut as usize);
    out.extend_from_slice(head);
    out.extend_from_slice(&marker);
    out.resize(out.len() + (new_raw as usize - marker.len()), 0);
    out.extend_from_slice(tail);
    if image.checksum != 0 {
        let sum = pe::checksum(&out, image.checksum_offset);
        out.get_mut(image.checksum_offset..image.checksum_offset + 4)
            .ok_or_else(|| refuse("the checksum field is past the end"))?
            .copy_from_slice(&sum.to_le_bytes());
    }
    check_pe(&out, data, &patches, kernel_name, search_paths, record_offsets.len())?;
    Ok(Some(SplitBinary { host: out, objects, cut: cut > 0, joinable: false }))
}

/// Reads a split image back: same sections at the same RVAs, every other
/// section's bytes the input's but for the patched fields, every record
/// `HIPK` with this marker and its index, and the checksum right.
fn check_pe(
    out: &[u8],
    input: &[u8],
    patches: &[(u64, Vec<u8>)],
    kernel_name: &str,
    search_paths: &[String],
    records: usize,
) -> Result<(), KpackError> {
    let fail = |why: String| refuse(format!("the split image does not read back: {why}"));
    let new = PeImage::parse(out).map_err(|e| KpackError::ReadBack { what: "image", source: e.into() })?;
    let old = PeImage::parse(input).map_err(|e| KpackError::ReadBack { what: "image", source: e.into() })?;
    if new.sections.len() != old.sections.len() || new.size_of_image != old.size_of_image {
        return Err(fail("its section table or SizeOfImage changed".into()));
    }
    for (n, o) in new.sections.iter().zip(&old.sections) {
        if n.virtual_address != o.virtual_address || n.virtual_size != o.virtual_size {
            return Err(fail(format!("section {} moved in memory", String::from_utf8_lossy(o.name()))));
        }
        if o.name() == PE_FATBIN_SECTION.as_bytes() {
            continue;
        }
        let (nb, ob) = (new.section_data(n), old.section_data(o));
        let patched = |i: usize| {
            let at = u64::from(o.raw_offset) + i as u64;
            patches.iter().any(|(p, b)| at >= *p && at < p + b.len() as u64)
        };
        if nb.len() != ob.len() || nb.iter().zip(ob).enumerate().any(|(i, (a, b))| a != b && !patched(i)) {
            return Err(fail(format!("section {} changed", String::from_utf8_lossy(o.name()))));
        }
    }
    if new.checksum != 0 && new.checksum != pe::checksum(out, new.checksum_offset) {
        return Err(fail("the checksum is wrong".into()));
    }
    let hb = HostBinary::read(out).map_err(|e| KpackError::ReadBack { what: "image", source: e.into() })?;
    if hb.wrappers.len() != records || hb.fatbin.is_some() {
        return Err(fail(format!("{} records, not {records}", hb.wrappers.len())));
    }
    for (i, w) in hb.wrappers.iter().enumerate() {
        let ok = w.record.kind() == WrapperKind::Hipk
            && w.record.co_index() as usize == i
            && matches!(&w.marker, Some(Ok(m)) if m.kernel_name == kernel_name && m.search_paths == search_paths);
        if !ok {
            return Err(fail(format!("record {i} is not HIPK with this marker and its index")));
        }
    }
    match hb.marker {
        Some(Ok(_)) => Ok(()),
        _ => Err(fail(format!("no readable {PE_MARKER_SECTION} section"))),
    }
}
