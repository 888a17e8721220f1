//! The program headers of a linked ELF64 little-endian file, read only as
//! far as the map needs them: whether a PT_LOAD maps an address range to
//! the file offsets the section headers claim.

const PT_LOAD: u32 = 1;
const PHDR_SIZE: usize = 56;

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// Whether some PT_LOAD maps `[addr, addr + size)` from the file bytes
/// `[offset, offset + size)`.
pub(super) fn maps(data: &[u8], addr: u64, offset: u64, size: u64) -> bool {
    let (Some(phoff), Some(entsize), Some(count)) = (u64_at(data, 32), u16_at(data, 54), u16_at(data, 56)) else {
        return false;
    };
    if usize::from(entsize) != PHDR_SIZE {
        return false;
    }
    let Ok(phoff) = usize::try_from(phoff) else { return false };
    (0..usize::from(count)).any(|i| {
        // The whole 56-byte entry must lie in the file (e_phoff is input).
        let Some(entry) = phoff.checked_add(i * PHDR_SIZE).and_then(|at| data.get(at..at.checked_add(PHDR_SIZE)?))
        else {
            return false;
        };
        let (Some(kind), Some(p_offset), Some(p_vaddr), Some(p_filesz)) =
            (u32_at(entry, 0), u64_at(entry, 8), u64_at(entry, 16), u64_at(entry, 32))
        else {
            return false;
        };
        let Some(rel) = addr.checked_sub(p_vaddr) else { return false };
        kind == PT_LOAD
            && rel.checked_add(size).is_some_and(|end| end <= p_filesz)
            && p_offset.checked_add(rel) == Some(offset)
    })
}
