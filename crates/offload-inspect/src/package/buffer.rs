//! A member's decompressed bytes, held in memory when small and spooled to
//! an unlinked temporary file (then mapped) when large, so that a package
//! of any size costs at most [`Limits::in_memory`] bytes of anonymous
//! memory per member being read.

use super::Limits;
use std::io::{self, Read, Write};
use std::ops::Deref;

/// The bytes of one member.
pub(super) enum Buffer {
    Memory(Vec<u8>),
    /// An unlinked temporary file, mapped; the space is returned when the
    /// map is dropped.
    Spooled(memmap2::Mmap),
}

impl Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buffer::Memory(v) => v,
            Buffer::Spooled(m) => m,
        }
    }
}

/// Why a member could not be read into a [`Buffer`].
#[derive(Debug)]
pub(super) enum FillError {
    /// Larger than [`Limits::max_member`] (the declared size, or what the
    /// stream produced).
    TooLarge(u64),
    /// The member's stream failed (corrupt data, checksum).
    Read(io::Error),
    /// The temporary file could not be written or mapped.
    Spool(io::Error),
}

/// Reads a member whose first bytes, `head`, were read already; `declared`
/// is the size its container states, when it states one (a hint: the
/// stream's real length counts).
pub(super) fn fill(
    head: &[u8],
    rest: &mut dyn Read,
    declared: Option<u64>,
    limits: &Limits,
) -> Result<Buffer, FillError> {
    if let Some(size) = declared
        && size > limits.max_member
    {
        return Err(FillError::TooLarge(size));
    }
    let in_memory = limits.in_memory.min(limits.max_member);
    let reserve = declared.unwrap_or(0).min(in_memory);
    let mut memory = Vec::with_capacity(usize::try_from(reserve).unwrap_or(0));
    memory.extend_from_slice(head);
    let room = in_memory.saturating_sub(memory.len() as u64);
    rest.take(room).read_to_end(&mut memory).map_err(FillError::Read)?;
    let mut probe = [0u8; 1];
    let more = read_some(rest, &mut probe).map_err(FillError::Read)?;
    if more == 0 {
        return Ok(Buffer::Memory(memory));
    }
    spool(memory, probe[0], rest, limits.max_member)
}

fn read_some(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Moves what was read so far to a temporary file and copies the rest of
/// the stream after it, up to `max` bytes in all.
fn spool(memory: Vec<u8>, next: u8, rest: &mut dyn Read, max: u64) -> Result<Buffer, FillError> {
    let mut file = tempfile::tempfile().map_err(FillError::Spool)?;
    file.write_all(&memory).map_err(FillError::Spool)?;
    file.write_all(&[next]).map_err(FillError::Spool)?;
    let mut total = memory.len() as u64 + 1;
    drop(memory);
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = read_some(rest, &mut chunk).map_err(FillError::Read)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > max {
            return Err(FillError::TooLarge(total));
        }
        file.write_all(chunk.get(..n).unwrap_or_default()).map_err(FillError::Spool)?;
    }
    // SAFETY: the file is private to this process (unlinked, never shared)
    // and nothing writes to it after this point.
    #[allow(unsafe_code)]
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(FillError::Spool)?;
    Ok(Buffer::Spooled(map))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(in_memory: u64, max_member: u64) -> Limits {
        Limits { in_memory, max_member, ..Limits::default() }
    }

    #[test]
    fn small_members_stay_in_memory_and_large_ones_are_spooled() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let small = fill(&data[..10], &mut &data[10..], None, &limits(1 << 20, 1 << 30)).unwrap();
        assert!(matches!(small, Buffer::Memory(_)));
        assert_eq!(&small[..], &data[..]);
        let large = fill(&data[..10], &mut &data[10..], Some(10_000), &limits(1000, 1 << 30)).unwrap();
        assert!(matches!(large, Buffer::Spooled(_)));
        assert_eq!(&large[..], &data[..]);
    }

    #[test]
    fn the_member_limit_holds_whatever_the_declared_size() {
        let data = vec![7u8; 5000];
        assert!(matches!(fill(&[], &mut &data[..], Some(6000), &limits(100, 4000)), Err(FillError::TooLarge(6000))));
        // A container that understates the size is caught by the stream.
        assert!(matches!(fill(&[], &mut &data[..], Some(10), &limits(100, 4000)), Err(FillError::TooLarge(_))));
        assert_eq!(&fill(&[], &mut &data[..], None, &limits(100, 5000)).unwrap()[..], &data[..]);
    }
}
