//! A CUDA fat binary that outgrows its place in a relocatable object: its
//! section moves to the end of the file. An object has no segments and no
//! addresses; a linker finds a section's bytes only through `sh_offset`
//! and `sh_size`, and the host code reaches the fat binary through a
//! relocation against the section (or a symbol of it) at the fat binary's
//! section offset. So the section's contents are copied to the end of the
//! file (aligned as the section asks), the rebuilt fat binary in its old
//! place in them, and the section header points there; the old bytes are
//! zeroed. Nothing else changes. Only the last fat binary of its section
//! may grow (nvcc writes one per object): a later one would move, and the
//! relocations and symbols that point at it would have to follow.

use super::ReplaceError;
use crate::prune::cuda::SECTIONS;
use offload_format::bytes::{u16_le, u64_le};
use offload_format::elf::ElfFile;
use offload_format::plan::Plan;
use offload_inspect::layout::FatBinary;

/// Where the section went.
pub(super) struct Grown<'a> {
    /// The output file.
    pub output: Plan<'a>,
    /// The section's old file range (zeros in the output).
    pub old: (u64, u64),
    /// Its new file range.
    pub new: (u64, u64),
}

/// File offset of the `sh_offset` word of section `index`'s header.
fn header_word(data: &[u8], index: usize) -> Option<u64> {
    let shoff = u64_le(data, 40)?;
    let shentsize = u64::from(u16_le(data, 58)?);
    let word = (index as u64).checked_mul(shentsize)?.checked_add(shoff)?.checked_add(24)?;
    (shentsize >= 64 && word.checked_add(16)? <= data.len() as u64).then_some(word)
}

fn refuse(needed: u64, unit: &FatBinary, why: &str) -> ReplaceError {
    ReplaceError::DoesNotFit { needed, extent: unit.extent, why: why.into() }
}

/// The CUDA fat binary section of `elf` that holds `unit`.
pub(super) fn section_of(elf: &ElfFile, unit: &FatBinary) -> Option<usize> {
    (1..elf.sections.len()).find(|&i| {
        let sh = elf.sections[i];
        elf.section_name(i).is_ok_and(|n| SECTIONS.contains(&n))
            && sh.offset <= unit.offset
            && unit.offset < sh.offset.saturating_add(sh.size)
    })
}

/// Moves the section of `unit` (one of `units`, the fat binaries of the
/// relocatable object `data`) to the end of the file with `rebuilt` in
/// place of `unit`.
pub(super) fn move_section<'a>(
    data: &'a [u8],
    units: &[FatBinary],
    unit: &FatBinary,
    rebuilt: Plan<'a>,
) -> Result<Grown<'a>, ReplaceError> {
    let needed = rebuilt.len();
    let elf = ElfFile::parse(data).map_err(|e| refuse(needed, unit, &e.to_string()))?;
    if !elf.codec.is64 || elf.codec.big {
        return Err(refuse(needed, unit, "only 64-bit little-endian objects are rewritten"));
    }
    let index = section_of(&elf, unit).ok_or_else(|| refuse(needed, unit, "its section cannot be found again"))?;
    let sh = elf.sections[index];
    let end = sh.offset + sh.size;
    if units.iter().any(|u| u.offset > unit.offset && u.offset < end) {
        return Err(refuse(needed, unit, "other fat binaries follow it in its section and would move"));
    }
    let header_word =
        header_word(data, index).ok_or_else(|| refuse(needed, unit, "its section header lies outside the file"))?;
    if header_word < end && sh.offset < header_word + 16 {
        return Err(refuse(needed, unit, "its section header lies inside its own contents"));
    }
    let align = sh.align.max(1);
    if !align.is_power_of_two() || align > 4096 {
        return Err(refuse(needed, unit, "its section alignment is not a power of two up to 4096"));
    }
    let file_len = data.len() as u64;
    let new_offset = file_len.div_ceil(align) * align;
    let head = data.get(sh.offset as usize..unit.offset as usize).unwrap_or(&[]);
    let new_size = head.len() as u64 + needed;
    let mut header = new_offset.to_le_bytes().to_vec();
    header.extend_from_slice(&new_size.to_le_bytes());
    // Two edits, in file order: the old contents zeroed, the header words.
    let mut edits = [(sh.offset, None, sh.size), (header_word, Some(header), 16)];
    edits.sort_by_key(|e| e.0);
    let mut output = Plan::new();
    let mut at = 0u64;
    for (start, bytes, len) in edits {
        // Both ranges lie in the file and do not overlap (checked above).
        output.borrow(data.get(at as usize..start as usize).unwrap_or(&[]));
        match bytes {
            Some(b) => output.own(b),
            None => output.zeros(len),
        }
        at = start + len;
    }
    output.borrow(data.get(at as usize..).unwrap_or(&[]));
    output.zeros(new_offset - file_len);
    output.borrow(head);
    output.pieces.extend(rebuilt.pieces);
    Ok(Grown { output, old: (sh.offset, sh.size), new: (new_offset, new_size) })
}

/// The check of a moved section: the output is the input with the old
/// contents of the section zeroed, its header's offset and size words set
/// to `new`, and zeros then the new contents after the input's end (which
/// the fat binary checks read back).
pub(super) fn verify_moved(output: &[u8], input: &[u8], unit: &FatBinary, new: (u64, u64)) -> Result<(), String> {
    let elf = ElfFile::parse(input).map_err(|e| e.to_string())?;
    let index = section_of(&elf, unit).ok_or("the moved section is not in the input")?;
    let sh = elf.sections[index];
    let word = header_word(input, index).ok_or("its section header lies outside the file")?;
    let (n, old_end) = (input.len(), (sh.offset + sh.size) as usize);
    if output.len() as u64 != new.0 + new.1 || output.get(n..new.0 as usize).is_none_or(|z| z.iter().any(|&b| b != 0)) {
        return Err("the file does not end with the moved section as planned".into());
    }
    if (u64_le(output, word), u64_le(output, word + 8)) != (Some(new.0), Some(new.1)) {
        return Err("the section header does not point at the moved contents".into());
    }
    if output.get(sh.offset as usize..old_end).is_none_or(|z| z.iter().any(|&b| b != 0)) {
        return Err("the old contents of the section are not zero".into());
    }
    let kept = |range: std::ops::Range<usize>| output.get(range.clone()) == input.get(range);
    let (first, second) = if (sh.offset as usize) < word as usize {
        ((sh.offset as usize, old_end), (word as usize, word as usize + 16))
    } else {
        ((word as usize, word as usize + 16), (sh.offset as usize, old_end))
    };
    if !(kept(0..first.0) && kept(first.1..second.0) && kept(second.1..n)) {
        return Err("bytes outside the moved section and its header changed".into());
    }
    Ok(())
}
