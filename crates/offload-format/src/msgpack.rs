//! A small MessagePack reader: zero-copy, bounds-checked, with a nesting
//! limit. It reads the kpack table of contents and `.rocm_kpack_ref`
//! markers (`docs/formats/kpack.md`), and is general enough for AMDGPU
//! `NT_AMDGPU_METADATA` notes (a msgpack map of maps and arrays).
//!
//! The API is a tree: [`read`] decodes one value at the start of a slice
//! into a [`Value`] whose strings, binaries and extension payloads borrow
//! from the input; the caller learns how many bytes the value took. Every
//! type of the MessagePack specification is decoded (nil, booleans, integers
//! of every width, `float 32/64`, `str`, `bin`, arrays, maps and `ext`,
//! `fixext` included). A `str` is kept as raw bytes: [`Value::as_str`] gives
//! it only when it is UTF-8, so a reader can tell "not a string" from "a
//! string that is not UTF-8".
//!
//! Hostile input: every length is checked against the bytes that remain
//! before use; an array or map count can reserve at most one slot per
//! remaining input byte (every element takes at least one byte), so memory
//! stays proportional to the input; nesting deeper than the limit
//! ([`MAX_DEPTH`] by default) is an error, which bounds the recursion.
//! Errors carry the offset (from the start of the slice given) of the byte
//! where decoding failed.

use std::fmt;

/// The default nesting limit: arrays and maps inside each other this deep
/// at most (kpack TOCs nest 4 deep, AMDGPU metadata 5).
pub const MAX_DEPTH: usize = 64;

/// One decoded value, borrowing from the input.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    /// `nil`.
    Nil,
    /// `true` or `false`.
    Bool(bool),
    /// A non-negative integer (any encoding, signed ones included).
    UInt(u64),
    /// A negative integer.
    Int(i64),
    /// `float 32`.
    F32(f32),
    /// `float 64`.
    F64(f64),
    /// `str`: the raw bytes (see [`Value::as_str`]).
    Str(&'a [u8]),
    /// `bin`.
    Bin(&'a [u8]),
    /// An array, in order.
    Array(Vec<Value<'a>>),
    /// A map as its key/value pairs, in file order (duplicate keys kept).
    Map(Vec<(Value<'a>, Value<'a>)>),
    /// `ext` or `fixext`: the type byte and the payload.
    Ext(i8, &'a [u8]),
}

impl<'a> Value<'a> {
    /// The string, when this is a `str` holding UTF-8.
    pub fn as_str(&self) -> Option<&'a str> {
        match self {
            Value::Str(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }

    /// The integer, when this is a non-negative integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::UInt(v) => Some(*v),
            _ => None,
        }
    }

    /// The elements, when this is an array.
    pub fn as_array(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The pairs, when this is a map.
    pub fn as_map(&self) -> Option<&[(Value<'a>, Value<'a>)]> {
        match self {
            Value::Map(pairs) => Some(pairs),
            _ => None,
        }
    }

    /// The value of the first pair whose key is the string `key`, when this
    /// is a map.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        self.as_map()?.iter().find(|(k, _)| matches!(k, Value::Str(s) if *s == key.as_bytes())).map(|(_, v)| v)
    }

    /// A short name of the value's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "nil",
            Value::Bool(_) => "bool",
            Value::UInt(_) | Value::Int(_) => "int",
            Value::F32(_) | Value::F64(_) => "float",
            Value::Str(_) => "str",
            Value::Bin(_) => "bin",
            Value::Array(_) => "array",
            Value::Map(_) => "map",
            Value::Ext(..) => "ext",
        }
    }
}

/// What went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input ends inside a value (bytes needed from the error offset).
    Truncated {
        /// Bytes the value needs from the error offset.
        needed: u64,
    },
    /// The byte `0xc1`, which MessagePack reserves ("never used").
    Reserved,
    /// Arrays and maps nested deeper than the limit.
    TooDeep {
        /// The limit.
        limit: usize,
    },
}

/// A decoding error and the offset of the byte where it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Error {
    /// Offset from the start of the input given to [`read`].
    pub offset: usize,
    /// What went wrong.
    pub kind: ErrorKind,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::Truncated { needed } => {
                write!(f, "msgpack: the input ends inside a value at offset {:#x} ({needed} bytes needed)", self.offset)
            }
            ErrorKind::Reserved => write!(f, "msgpack: reserved byte 0xc1 at offset {:#x}", self.offset),
            ErrorKind::TooDeep { limit } => {
                write!(f, "msgpack: arrays/maps nested more than {limit} deep at offset {:#x}", self.offset)
            }
        }
    }
}

/// Decodes the value at the start of `data` with the default nesting limit.
/// Returns it and the number of bytes it took; bytes after it are left to
/// the caller.
///
/// ```
/// use offload_format::msgpack::{Value, read};
///
/// // {"a": [1, -2, "x"]}
/// let bytes = b"\x81\xa1a\x93\x01\xfe\xa1x";
/// let (value, used) = read(bytes)?;
/// assert_eq!(used, bytes.len());
/// let items = value.get("a").and_then(Value::as_array).unwrap();
/// assert_eq!(items, &[Value::UInt(1), Value::Int(-2), Value::Str(b"x")]);
/// assert!(read(&bytes[..5]).is_err());
/// # Ok::<(), offload_format::msgpack::Error>(())
/// ```
pub fn read(data: &[u8]) -> Result<(Value<'_>, usize), Error> {
    read_with_limit(data, MAX_DEPTH)
}

/// [`read`] with another nesting limit (0: no arrays or maps at all).
pub fn read_with_limit(data: &[u8], max_depth: usize) -> Result<(Value<'_>, usize), Error> {
    let mut reader = Reader { data, pos: 0, max_depth };
    let value = reader.value(0)?;
    Ok((value, reader.pos))
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    max_depth: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], Error> {
        let left = (self.data.len() - self.pos) as u64;
        if n > left {
            return Err(Error { offset: self.pos, kind: ErrorKind::Truncated { needed: n } });
        }
        // n <= left, which fits in usize.
        let slice = &self.data[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(slice)
    }

    /// A big-endian integer of `n` (1 to 8) bytes; `take` checks the bounds.
    fn uint(&mut self, n: u64) -> Result<u64, Error> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, Error> {
        let start = self.pos;
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::UInt(u64::from(tag)),
            0x80..=0x8f => self.map(u64::from(tag & 0x0f), depth, start)?,
            0x90..=0x9f => self.array(u64::from(tag & 0x0f), depth, start)?,
            0xa0..=0xbf => Value::Str(self.take(u64::from(tag & 0x1f))?),
            0xc0 => Value::Nil,
            0xc1 => return Err(Error { offset: start, kind: ErrorKind::Reserved }),
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let len = self.uint(1 << (tag - 0xc4))?;
                Value::Bin(self.take(len)?)
            }
            0xc7..=0xc9 => {
                let len = self.uint(1 << (tag - 0xc7))?;
                let kind = self.take(1)?[0] as i8;
                Value::Ext(kind, self.take(len)?)
            }
            0xca => Value::F32(f32::from_bits(self.uint(4)? as u32)),
            0xcb => Value::F64(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => Value::UInt(self.uint(1 << (tag - 0xcc))?),
            0xd0..=0xd3 => {
                let bytes = 1u32 << (tag - 0xd0);
                let raw = self.uint(u64::from(bytes))?;
                // Sign-extend from `bytes` bytes.
                let shift = 64 - 8 * bytes;
                let v = ((raw << shift) as i64) >> shift;
                if v >= 0 { Value::UInt(v as u64) } else { Value::Int(v) }
            }
            0xd4..=0xd8 => {
                let kind = self.take(1)?[0] as i8;
                Value::Ext(kind, self.take(1 << (tag - 0xd4))?)
            }
            0xd9..=0xdb => {
                let len = self.uint(1 << (tag - 0xd9))?;
                Value::Str(self.take(len)?)
            }
            0xdc | 0xdd => {
                let count = self.uint(if tag == 0xdc { 2 } else { 4 })?;
                self.array(count, depth, start)?
            }
            0xde | 0xdf => {
                let count = self.uint(if tag == 0xde { 2 } else { 4 })?;
                self.map(count, depth, start)?
            }
            0xe0..=0xff => Value::Int(i64::from(tag as i8)),
        })
    }

    fn enter(&self, depth: usize, start: usize) -> Result<(), Error> {
        if depth >= self.max_depth {
            return Err(Error { offset: start, kind: ErrorKind::TooDeep { limit: self.max_depth } });
        }
        Ok(())
    }

    /// Slots to reserve for `count` elements of `per` bytes at least each.
    fn capacity(&self, count: u64, per: u64) -> usize {
        let left = (self.data.len() - self.pos) as u64;
        (count.min(left / per)) as usize
    }

    fn array(&mut self, count: u64, depth: usize, start: usize) -> Result<Value<'a>, Error> {
        self.enter(depth, start)?;
        let mut items = Vec::with_capacity(self.capacity(count, 1));
        for _ in 0..count {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, count: u64, depth: usize, start: usize) -> Result<Value<'a>, Error> {
        self.enter(depth, start)?;
        let mut pairs = Vec::with_capacity(self.capacity(count, 2));
        for _ in 0..count {
            let key = self.value(depth + 1)?;
            let value = self.value(depth + 1)?;
            pairs.push((key, value));
        }
        Ok(Value::Map(pairs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type() {
        let cases: &[(&[u8], Value)] = &[
            (b"\xc0", Value::Nil),
            (b"\xc2", Value::Bool(false)),
            (b"\xc3", Value::Bool(true)),
            (b"\x7f", Value::UInt(127)),
            (b"\xff", Value::Int(-1)),
            (b"\xe0", Value::Int(-32)),
            (b"\xcc\xff", Value::UInt(255)),
            (b"\xcd\x01\x00", Value::UInt(256)),
            (b"\xce\x00\x01\x00\x00", Value::UInt(65536)),
            (b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff", Value::UInt(u64::MAX)),
            (b"\xd0\x80", Value::Int(-128)),
            (b"\xd0\x05", Value::UInt(5)),
            (b"\xd1\xff\x00", Value::Int(-256)),
            (b"\xd2\xff\xff\xff\xfe", Value::Int(-2)),
            (b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00", Value::Int(i64::MIN)),
            (b"\xca\x3f\x80\x00\x00", Value::F32(1.0)),
            (b"\xcb\x40\x00\x00\x00\x00\x00\x00\x00", Value::F64(2.0)),
            (b"\xa3abc", Value::Str(b"abc")),
            (b"\xd9\x02hi", Value::Str(b"hi")),
            (b"\xda\x00\x01z", Value::Str(b"z")),
            (b"\xdb\x00\x00\x00\x00", Value::Str(b"")),
            (b"\xc4\x02\x00\x01", Value::Bin(b"\x00\x01")),
            (b"\xc5\x00\x01\x07", Value::Bin(b"\x07")),
            (b"\xc6\x00\x00\x00\x00", Value::Bin(b"")),
            (b"\xd4\x05\xaa", Value::Ext(5, b"\xaa")),
            (b"\xd8\xff0123456789abcdef", Value::Ext(-1, b"0123456789abcdef")),
            (b"\xc7\x01\x02z", Value::Ext(2, b"z")),
            (b"\x92\x01\xc0", Value::Array(vec![Value::UInt(1), Value::Nil])),
            (b"\xdc\x00\x01\x01", Value::Array(vec![Value::UInt(1)])),
            (b"\x81\xa1k\xc3", Value::Map(vec![(Value::Str(b"k"), Value::Bool(true))])),
            (b"\xde\x00\x00", Value::Map(vec![])),
        ];
        for (bytes, want) in cases {
            let (got, used) = read(bytes).unwrap_or_else(|e| panic!("{bytes:x?}: {e}"));
            assert_eq!(&got, want, "{bytes:x?}");
            assert_eq!(used, bytes.len(), "{bytes:x?}");
            // Every proper prefix is truncated, never a panic or a value.
            for cut in 0..bytes.len() {
                let err = read(&bytes[..cut]).unwrap_err();
                assert!(matches!(err.kind, ErrorKind::Truncated { .. }), "{bytes:x?}[..{cut}]: {err}");
            }
        }
    }

    #[test]
    fn trailing_bytes_are_left() {
        assert_eq!(read(b"\x01\x02").unwrap(), (Value::UInt(1), 1));
    }

    #[test]
    fn reserved_byte_and_offsets() {
        let err = read(b"\x93\x01\x02\xc1").unwrap_err();
        assert_eq!(err, Error { offset: 3, kind: ErrorKind::Reserved });
        let err = read(b"\x92\x01\xd9\x10ab").unwrap_err();
        assert_eq!(err, Error { offset: 4, kind: ErrorKind::Truncated { needed: 16 } });
    }

    #[test]
    fn lying_counts_reserve_little_and_fail() {
        // 2^32-1 elements declared, 3 present.
        let err = read(b"\xdd\xff\xff\xff\xff\x01\x02\x03").unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Truncated { .. }));
        let err = read(b"\xdf\xff\xff\xff\xff\x01").unwrap_err();
        assert!(matches!(err.kind, ErrorKind::Truncated { .. }));
        // A huge str length.
        let err = read(b"\xdb\xff\xff\xff\xffab").unwrap_err();
        assert_eq!(err, Error { offset: 5, kind: ErrorKind::Truncated { needed: 0xffff_ffff } });
    }

    #[test]
    fn nesting_limit() {
        let deep = vec![0x91u8; 100_000];
        let err = read(&deep).unwrap_err();
        assert_eq!(err, Error { offset: MAX_DEPTH, kind: ErrorKind::TooDeep { limit: MAX_DEPTH } });
        // Exactly at the limit is fine.
        let mut ok = vec![0x91u8; MAX_DEPTH];
        ok.push(0xc0);
        assert!(read(&ok).is_ok());
        let mut maps = [0x81u8, 0xc0].repeat(10);
        maps.push(0xc0);
        assert!(read_with_limit(&maps, 10).is_ok());
        assert!(matches!(read_with_limit(&maps, 9).unwrap_err().kind, ErrorKind::TooDeep { limit: 9 }));
    }

    #[test]
    fn accessors() {
        let (v, _) = read(b"\x82\xa1a\x01\xa1b\xa2\xff\xfe").unwrap();
        assert_eq!(v.get("a").and_then(Value::as_u64), Some(1));
        // Not UTF-8: a str, but no &str.
        assert!(matches!(v.get("b"), Some(Value::Str(_))));
        assert_eq!(v.get("b").and_then(Value::as_str), None);
        assert_eq!(v.get("c"), None);
        assert_eq!(Value::Nil.get("a"), None);
        assert_eq!(v.type_name(), "map");
    }
}

/// Writing: the smallest encoding of each value, as the reference
/// MessagePack packers choose it (what AMD's splitter writes through
/// Python's `msgpack.packb`, so our TOCs and markers read the same).
pub mod encode {
    /// Appends a `str` (fixstr, str 8, 16 or 32 by length).
    pub fn str(out: &mut Vec<u8>, s: &str) {
        let n = s.len();
        if n < 32 {
            out.push(0xa0 | n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xd9, n as u8]);
        } else if n <= 0xffff {
            out.push(0xda);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0xdb);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        out.extend_from_slice(s.as_bytes());
    }

    /// Appends a non-negative integer (positive fixint, uint 8 to 64).
    pub fn uint(out: &mut Vec<u8>, v: u64) {
        if v < 0x80 {
            out.push(v as u8);
        } else if v <= 0xff {
            out.extend_from_slice(&[0xcc, v as u8]);
        } else if v <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(v as u16).to_be_bytes());
        } else if v <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(v as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&v.to_be_bytes());
        }
    }

    fn len(out: &mut Vec<u8>, n: usize, fix: u8, m16: u8, m32: u8) {
        if n < 16 {
            out.push(fix | n as u8);
        } else if n <= 0xffff {
            out.push(m16);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(m32);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
    }

    /// Appends a `bin` (bin 8, 16 or 32 by length).
    pub fn bin(out: &mut Vec<u8>, b: &[u8]) {
        let n = b.len();
        if n <= 0xff {
            out.extend_from_slice(&[0xc4, n as u8]);
        } else if n <= 0xffff {
            out.push(0xc5);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else {
            out.push(0xc6);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        }
        out.extend_from_slice(b);
    }

    /// Appends a map header for `n` pairs; the caller appends them.
    pub fn map(out: &mut Vec<u8>, n: usize) {
        len(out, n, 0x80, 0xde, 0xdf);
    }

    /// Appends an array header for `n` items; the caller appends them.
    pub fn array(out: &mut Vec<u8>, n: usize) {
        len(out, n, 0x90, 0xdc, 0xdd);
    }
}
