//! Fixed-size fields read from input bytes at checked offsets: the one
//! place the readers and rewriters take integers out of a file.
//!
//! Every function returns `None` when the field does not lie wholly inside
//! the slice (including offsets that overflow `usize`), so a hostile
//! offset can never index out of bounds. Offsets may be `usize` or `u64`
//! (file offsets), whichever the caller holds.

/// An offset into a byte slice: `usize`, or a `u64` file offset that may
/// not fit in one.
pub trait Offset: Copy {
    /// The offset as an index, `None` when it cannot be one.
    fn index(self) -> Option<usize>;
}

impl Offset for usize {
    fn index(self) -> Option<usize> {
        Some(self)
    }
}

impl Offset for u64 {
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

impl Offset for u32 {
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

/// Integer literals (`u32_le(data, 4)`) are `i32`; a negative one is no
/// offset.
impl Offset for i32 {
    fn index(self) -> Option<usize> {
        usize::try_from(self).ok()
    }
}

/// The `N` bytes at `at`, when they lie inside `data`.
pub fn array<const N: usize>(data: &[u8], at: impl Offset) -> Option<[u8; N]> {
    let at = at.index()?;
    data.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The `len` bytes at `at`, when they lie inside `data`.
pub fn slice(data: &[u8], at: impl Offset, len: impl Offset) -> Option<&[u8]> {
    let at = at.index()?;
    data.get(at..at.checked_add(len.index()?)?)
}

/// A little-endian `u16` at `at`.
pub fn u16_le(data: &[u8], at: impl Offset) -> Option<u16> {
    array(data, at).map(u16::from_le_bytes)
}

/// A little-endian `u32` at `at`.
pub fn u32_le(data: &[u8], at: impl Offset) -> Option<u32> {
    array(data, at).map(u32::from_le_bytes)
}

/// A little-endian `u64` at `at`.
pub fn u64_le(data: &[u8], at: impl Offset) -> Option<u64> {
    array(data, at).map(u64::from_le_bytes)
}

/// A `u32` in this machine's byte order at `at` (files the local system
/// wrote for itself, such as `ld.so.cache`).
pub fn u32_ne(data: &[u8], at: impl Offset) -> Option<u32> {
    array(data, at).map(u32::from_ne_bytes)
}

/// A `u64` in this machine's byte order at `at`.
pub fn u64_ne(data: &[u8], at: impl Offset) -> Option<u64> {
    array(data, at).map(u64::from_ne_bytes)
}

/// Why a read of a field failed: what was being read, where, and how it
/// went wrong. Operation errors wrap it as their `#[source]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} at offset {offset:#x}: {kind}")]
#[non_exhaustive]
pub struct ReadError {
    /// How the read failed.
    pub kind: ReadErrorKind,
    /// The offset of the field in the input.
    pub offset: u64,
    /// What was being read (`"bundle entry count"`, `"section header"`).
    pub what: &'static str,
}

/// How a read failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadErrorKind {
    /// The field runs past the end of the input.
    #[error("{need} bytes needed, {have} available")]
    Truncated {
        /// Bytes the field needs from its offset.
        need: u64,
        /// Bytes the input has from that offset.
        have: u64,
    },
    /// The value is not one the format allows (why).
    #[error("{0}")]
    Invalid(String),
}

impl ReadError {
    /// A field of `need` bytes at `offset` that `data` does not hold.
    pub fn truncated(data: &[u8], offset: u64, need: u64, what: &'static str) -> ReadError {
        let have = (data.len() as u64).saturating_sub(offset);
        ReadError { kind: ReadErrorKind::Truncated { need, have }, offset, what }
    }

    /// A field whose value the format does not allow.
    pub fn invalid(offset: u64, what: &'static str, why: impl Into<String>) -> ReadError {
        ReadError { kind: ReadErrorKind::Invalid(why.into()), offset, what }
    }
}

/// The `len` bytes at `offset`, or a [`ReadError`] naming `what`.
pub fn require<'a>(data: &'a [u8], offset: u64, len: u64, what: &'static str) -> Result<&'a [u8], ReadError> {
    slice(data, offset, len).ok_or_else(|| ReadError::truncated(data, offset, len, what))
}

// Single bytes, big-endian fields and fields in a byte order known only at
// run time (ELF's `EI_DATA`); then a cursor for fields read in order.

/// A single byte at `at`.
pub fn u8(data: &[u8], at: impl Offset) -> Option<u8> {
    data.get(at.index()?).copied()
}

/// A big-endian `u16` at `at`.
pub fn u16_be(data: &[u8], at: impl Offset) -> Option<u16> {
    array(data, at).map(u16::from_be_bytes)
}

/// A big-endian `u32` at `at`.
pub fn u32_be(data: &[u8], at: impl Offset) -> Option<u32> {
    array(data, at).map(u32::from_be_bytes)
}

/// A big-endian `u64` at `at`.
pub fn u64_be(data: &[u8], at: impl Offset) -> Option<u64> {
    array(data, at).map(u64::from_be_bytes)
}

/// A `u16` at `at`, big-endian when `big` (an ELF file's `EI_DATA`).
pub fn u16_endian(data: &[u8], at: impl Offset, big: bool) -> Option<u16> {
    if big { u16_be(data, at) } else { u16_le(data, at) }
}

/// A `u32` at `at`, big-endian when `big`.
pub fn u32_endian(data: &[u8], at: impl Offset, big: bool) -> Option<u32> {
    if big { u32_be(data, at) } else { u32_le(data, at) }
}

/// A `u64` at `at`, big-endian when `big`.
pub fn u64_endian(data: &[u8], at: impl Offset, big: bool) -> Option<u64> {
    if big { u64_be(data, at) } else { u64_le(data, at) }
}

/// Fields read one after another from the start of a slice. Each read
/// returns `None`, and leaves the position where it was, when the field
/// does not lie wholly inside the slice.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Cursor<'a> {
        Cursor { data, at: 0 }
    }

    /// The offset of the next read.
    pub fn position(&self) -> usize {
        self.at
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.data.get(self.at..).unwrap_or_default()
    }

    /// The next `len` bytes.
    pub fn take(&mut self, len: impl Offset) -> Option<&'a [u8]> {
        let s = slice(self.data, self.at, len)?;
        self.at += s.len();
        Some(s)
    }

    fn field<const N: usize>(&mut self) -> Option<[u8; N]> {
        let a = array(self.data, self.at)?;
        self.at += N;
        Some(a)
    }

    /// The next byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.field::<1>().map(|[b]| b)
    }
    /// The next little-endian `u16`.
    pub fn u16_le(&mut self) -> Option<u16> {
        self.field().map(u16::from_le_bytes)
    }
    /// The next little-endian `u32`.
    pub fn u32_le(&mut self) -> Option<u32> {
        self.field().map(u32::from_le_bytes)
    }
    /// The next little-endian `u64`.
    pub fn u64_le(&mut self) -> Option<u64> {
        self.field().map(u64::from_le_bytes)
    }
    /// The next big-endian `u16`.
    pub fn u16_be(&mut self) -> Option<u16> {
        self.field().map(u16::from_be_bytes)
    }
    /// The next big-endian `u32`.
    pub fn u32_be(&mut self) -> Option<u32> {
        self.field().map(u32::from_be_bytes)
    }
    /// The next big-endian `u64`.
    pub fn u64_be(&mut self) -> Option<u64> {
        self.field().map(u64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_inside_the_slice_are_read_and_others_are_none() {
        let d = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(u16_le(&d, 0usize), Some(0x0201));
        assert_eq!(u32_le(&d, 1u64), Some(0x0504_0302));
        assert_eq!(u64_le(&d, 1usize), Some(0x0908_0706_0504_0302));
        assert_eq!(u64_le(&d, 2usize), None);
        assert_eq!(u16_le(&d, usize::MAX), None);
        assert_eq!(u16_le(&d, u64::MAX), None);
        assert_eq!(slice(&d, 8usize, 1usize), Some(&[9u8][..]));
        assert_eq!(slice(&d, 8usize, 2usize), None);
    }

    #[test]
    fn errors_say_what_where_and_how_much() {
        let d = [0u8; 10];
        let e = require(&d, 8, 4, "entry count").unwrap_err();
        assert_eq!(e.to_string(), "entry count at offset 0x8: 4 bytes needed, 2 available");
        assert_eq!(require(&d, 6, 4, "x").unwrap(), &[0u8; 4]);
        let e = require(&d, u64::MAX, 1, "x").unwrap_err();
        assert_eq!(e.kind, ReadErrorKind::Truncated { need: 1, have: 0 });
    }

    #[test]
    fn big_endian_and_either_order_read_the_same_bytes() {
        let d = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(u8(&d, 8usize), Some(9));
        assert_eq!(u8(&d, 9usize), None);
        assert_eq!(u16_be(&d, 0usize), Some(0x0102));
        assert_eq!(u32_be(&d, 1usize), Some(0x0203_0405));
        assert_eq!(u64_be(&d, 1usize), Some(0x0203_0405_0607_0809));
        assert_eq!(u64_be(&d, 2usize), None);
        assert_eq!(u32_be(&d, u64::MAX), None);
        for big in [false, true] {
            assert_eq!(u16_endian(&d, 3usize, big), if big { u16_be(&d, 3usize) } else { u16_le(&d, 3usize) });
            assert_eq!(u32_endian(&d, 5usize, big), if big { u32_be(&d, 5usize) } else { u32_le(&d, 5usize) });
            assert_eq!(u64_endian(&d, 1usize, big), if big { u64_be(&d, 1usize) } else { u64_le(&d, 1usize) });
            assert_eq!(u64_endian(&d, 2usize, big), None);
        }
    }

    #[test]
    fn a_cursor_moves_past_what_it_reads_and_stays_on_a_short_read() {
        let d = [0xaau8, 1, 0, 2, 0, 0, 0, 0, 0, 0, 3, 0x12, 0x34, 9];
        let mut c = Cursor::new(&d);
        assert_eq!(c.u8(), Some(0xaa));
        assert_eq!(c.u16_le(), Some(1));
        assert_eq!(c.u32_le(), Some(2));
        assert_eq!(c.position(), 7);
        assert_eq!(c.u64_le(), None);
        assert_eq!(c.position(), 7, "a short read does not move");
        assert_eq!(c.take(4usize), Some(&[0u8, 0, 0, 3][..]));
        assert_eq!(c.u16_be(), Some(0x1234));
        assert_eq!(c.rest(), &[9]);
        assert_eq!(c.take(2u64), None);
        assert_eq!(c.take(u64::MAX), None);
        assert_eq!(c.u8(), Some(9));
        assert_eq!((c.u8(), c.u32_be(), c.rest()), (None, None, &[][..]));
        let mut c = Cursor::new(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]);
        assert_eq!((c.u32_be(), c.u64_be()), (Some(1), Some(2)));
    }
}
