//! Zero-copy reader for buffers of concatenated OffloadBinaries.
//!
//! The checks LLVM 19 makes come first, in its order, and fail with its
//! messages ("Invalid data was encountered while parsing the file", "The end
//! of the file was unexpectedly encountered"). LLVM then trusts the string
//! and image offsets and crashes on lying ones; this reader checks them too
//! and reports where the binary lies. Every error carries the byte offset of
//! the binary it concerns ([`Error::offset`]) and a full explanation
//! ([`Error::detail`]).
//!
//! Versions: 1 (LLVM 15-19) and 2 (several entries per header and sized
//! values, newer LLVM) are read. Version 3 (newer LLVM, optionally
//! compressed) is recognised and refused with its own message.

use super::{ENTRY_SIZE, HEADER_SIZE, ImageKind, MAGIC, OffloadKind, STRING_RECORD_SIZE_V1, STRING_RECORD_SIZE_V2};
use crate::bytes::{u16_le, u32_le, u64_le};
use std::borrow::Cow;

/// Why a buffer could not be read. Display is the message a tool prints
/// (LLVM's wording where LLVM reports the problem).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Fewer bytes are left than a header and one entry need (72).
    #[error("Invalid data was encountered while parsing the file")]
    TooShort {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// Bytes left from there.
        available: u64,
    },
    /// The bytes at `offset` are not `10 FF 10 AD`.
    #[error("Invalid data was encountered while parsing the file")]
    BadMagic {
        /// Offset of the bytes in the buffer.
        offset: u64,
    },
    /// A version no LLVM release has written (0, or above 3).
    #[error("Invalid data was encountered while parsing the file")]
    UnknownVersion {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// The version stored.
        version: u32,
    },
    /// Version 3, which only newer LLVM releases write.
    #[error(
        "OffloadBinary version {version} at offset {offset:#x} is not supported (this reader understands versions 1 and 2)"
    )]
    UnsupportedVersion {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// The version stored.
        version: u32,
    },
    /// A header or entry field points past the data that is there; LLVM 19
    /// checks these.
    #[error("The end of the file was unexpectedly encountered")]
    Truncated {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: u64,
        /// The largest value the data allows.
        limit: u64,
    },
    /// A part of the binary lies outside it (LLVM 19 reads out of bounds).
    #[error(
        "malformed OffloadBinary at offset {offset:#x}: {what} at {start:#x} with size {len:#x} lies outside the binary's {size:#x} bytes"
    )]
    OutOfBounds {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// Which part (`image`, `string table`, ...).
        what: &'static str,
        /// Where the part starts, relative to the binary.
        start: u64,
        /// The part's length in bytes.
        len: u64,
        /// The binary's size in bytes.
        size: u64,
    },
}

impl Error {
    /// Offset of the binary the error concerns, from the start of the
    /// buffer given to the reader.
    pub fn offset(&self) -> u64 {
        match *self {
            Error::TooShort { offset, .. }
            | Error::BadMagic { offset }
            | Error::UnknownVersion { offset, .. }
            | Error::UnsupportedVersion { offset, .. }
            | Error::Truncated { offset, .. }
            | Error::OutOfBounds { offset, .. } => offset,
        }
    }

    /// A self-contained explanation (for inspectors and logs), where
    /// Display keeps LLVM's terse wording.
    pub fn detail(&self) -> String {
        match self {
            Error::TooShort { offset, available } => format!(
                "at offset {offset:#x}: {available} bytes left, an OffloadBinary needs at least {}",
                HEADER_SIZE + ENTRY_SIZE
            ),
            Error::BadMagic { offset } => format!("at offset {offset:#x}: no OffloadBinary magic (10 FF 10 AD)"),
            Error::UnknownVersion { offset, version } => {
                format!("at offset {offset:#x}: unknown OffloadBinary version {version}")
            }
            Error::Truncated { offset, field, value, limit } => {
                format!("OffloadBinary at offset {offset:#x}: {field} {value:#x} exceeds the limit {limit:#x}")
            }
            Error::UnsupportedVersion { .. } | Error::OutOfBounds { .. } => self.to_string(),
        }
    }
}

/// The header fields as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawHeader {
    /// Format version (1 or 2).
    pub version: u32,
    /// Size of the whole binary in bytes, padding included.
    pub size: u64,
    /// Offset of the first entry, relative to the binary.
    pub entry_offset: u64,
    /// Version 1: size of the entry; version 2: number of entries.
    pub entry_size_or_count: u64,
}

/// The entry fields as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEntry {
    /// [`ImageKind`] value.
    pub image_kind: u16,
    /// [`OffloadKind`] value.
    pub offload_kind: u16,
    /// Flag bits (none defined by LLVM 19).
    pub flags: u32,
    /// Offset of the string records, relative to the binary.
    pub string_offset: u64,
    /// Number of string records.
    pub num_strings: u64,
    /// Offset of the image, relative to the binary.
    pub image_offset: u64,
    /// Size of the image in bytes.
    pub image_size: u64,
}

/// One device image and its metadata, borrowed from the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffloadBinary<'a> {
    data: &'a [u8],
    offset: u64,
    header: RawHeader,
    index: u64,
    entry: RawEntry,
    strings: Vec<(&'a [u8], &'a [u8])>,
    image: &'a [u8],
}

impl<'a> OffloadBinary<'a> {
    /// Reads every binary of `data` (concatenated binaries, as the packager
    /// writes them and as linkers merge sections).
    ///
    /// ```
    /// use offload_format::offload_binary::{Image, ImageKind, OffloadBinary, OffloadKind, write};
    ///
    /// let image = Image {
    ///     image_kind: ImageKind::Object,
    ///     offload_kind: OffloadKind::Hip,
    ///     strings: vec![(&b"triple"[..], &b"amdgcn-amd-amdhsa"[..]), (b"arch", b"gfx90a")],
    ///     image: b"\x7fELF...",
    ///     ..Default::default()
    /// };
    /// let mut data = write(&image)?;
    /// data.extend(write(&Image { image: b"second", ..image.clone() })?);
    /// let binaries = OffloadBinary::parse_all(&data).expect("well formed");
    /// assert_eq!(binaries.len(), 2);
    /// assert_eq!((binaries[0].triple(), binaries[0].arch()), ("amdgcn-amd-amdhsa".into(), "gfx90a".into()));
    /// assert_eq!(binaries[1].image(), b"second");
    /// assert_eq!(binaries[1].offset(), binaries[0].data().len() as u64);
    /// assert!(OffloadBinary::parse_all(&data[..100]).is_err());
    /// # Ok::<(), offload_format::offload_binary::WriteError>(())
    /// ```
    pub fn parse_all(data: &'a [u8]) -> Result<Vec<OffloadBinary<'a>>, Error> {
        Binaries::new(data).collect()
    }

    /// The bytes of the whole binary this image belongs to (header to final
    /// padding); for version 2 shared by all of its entries.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
    /// Offset of [`Self::data`] in the buffer given to the reader.
    pub fn offset(&self) -> u64 {
        self.offset
    }
    /// The binary's format version.
    pub fn version(&self) -> u32 {
        self.header.version
    }
    /// The header as stored.
    pub fn header(&self) -> RawHeader {
        self.header
    }
    /// This image's entry as stored.
    pub fn entry(&self) -> RawEntry {
        self.entry
    }
    /// Index of this entry among the entries of its binary (always 0 for
    /// version 1).
    pub fn entry_index(&self) -> u64 {
        self.index
    }
    /// What kind of file the image is.
    pub fn image_kind(&self) -> ImageKind {
        ImageKind::from_u16(self.entry.image_kind)
    }
    /// The offloading model that produced the image.
    pub fn offload_kind(&self) -> OffloadKind {
        OffloadKind::from_u16(self.entry.offload_kind)
    }
    /// The entry's flag bits.
    pub fn flags(&self) -> u32 {
        self.entry.flags
    }
    /// The device image.
    pub fn image(&self) -> &'a [u8] {
        self.image
    }
    /// The key/value records in file order.
    pub fn strings(&self) -> &[(&'a [u8], &'a [u8])] {
        &self.strings
    }
    /// The value of `key` (the last record wins, as in LLVM's map).
    pub fn get(&self, key: &[u8]) -> Option<&'a [u8]> {
        self.strings.iter().rev().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
    /// The value of `key` as text, empty when absent (LLVM's `getString`).
    pub fn string(&self, key: &str) -> Cow<'a, str> {
        String::from_utf8_lossy(self.get(key.as_bytes()).unwrap_or(b""))
    }
    /// The `triple` string, empty when absent.
    pub fn triple(&self) -> Cow<'a, str> {
        self.string("triple")
    }
    /// The `arch` string, empty when absent.
    pub fn arch(&self) -> Cow<'a, str> {
        self.string("arch")
    }
}

/// Iterator over the binaries of a buffer; stops after the first error.
pub struct Binaries<'a> {
    data: &'a [u8],
    pos: u64,
    pending: std::vec::IntoIter<OffloadBinary<'a>>,
    failed: bool,
}

impl<'a> Binaries<'a> {
    /// Binaries placed back to back from the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Binaries { data, pos: 0, pending: Vec::new().into_iter(), failed: false }
    }

    /// Parses the binary at `self.pos` and advances past it.
    fn next_chunk(&mut self) -> Result<Vec<OffloadBinary<'a>>, Error> {
        let offset = self.pos;
        let rest = usize::try_from(offset).ok().and_then(|o| self.data.get(o..)).unwrap_or(&[]);
        let (binaries, size) = parse_chunk(rest, offset)?;
        self.pos = offset + size;
        Ok(binaries)
    }
}

impl<'a> Iterator for Binaries<'a> {
    type Item = Result<OffloadBinary<'a>, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(b) = self.pending.next() {
                return Some(Ok(b));
            }
            if self.failed || self.pos >= self.data.len() as u64 {
                return None;
            }
            match self.next_chunk() {
                Ok(v) => self.pending = v.into_iter(),
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Parses the binary at the start of `rest` (which lies at `offset` in the
/// caller's buffer); returns its entries and its size.
fn parse_chunk(rest: &[u8], offset: u64) -> Result<(Vec<OffloadBinary<'_>>, u64), Error> {
    let available = rest.len() as u64;
    let truncated = |field, value, limit| Error::Truncated { offset, field, value, limit };
    // LLVM's order: minimum size, magic, version, then the size fields.
    if available < HEADER_SIZE + ENTRY_SIZE {
        return Err(Error::TooShort { offset, available });
    }
    if rest[..4] != MAGIC {
        return Err(Error::BadMagic { offset });
    }
    let rd = |at| u64_le(rest, at).ok_or(Error::TooShort { offset, available });
    let version = u32_le(rest, 4).ok_or(Error::TooShort { offset, available })?;
    match version {
        1 | 2 => {}
        3 => return Err(Error::UnsupportedVersion { offset, version }),
        _ => return Err(Error::UnknownVersion { offset, version }),
    }
    let header = RawHeader { version, size: rd(8)?, entry_offset: rd(16)?, entry_size_or_count: rd(24)? };
    let size = header.size;
    if size > available {
        return Err(truncated("binary size", size, available));
    }
    if size < ENTRY_SIZE || size < HEADER_SIZE {
        return Err(truncated("binary size", size, available));
    }
    let count = if version == 1 {
        if header.entry_offset > size - ENTRY_SIZE {
            return Err(truncated("entry offset", header.entry_offset, size - ENTRY_SIZE));
        }
        if header.entry_size_or_count > size - HEADER_SIZE {
            return Err(truncated("entry size", header.entry_size_or_count, size - HEADER_SIZE));
        }
        1
    } else {
        let count = header.entry_size_or_count;
        let entries_size = count
            .checked_mul(ENTRY_SIZE)
            .filter(|&s| s <= size - HEADER_SIZE)
            .ok_or_else(|| truncated("entry count", count, (size - HEADER_SIZE) / ENTRY_SIZE))?;
        if header.entry_offset > size - entries_size {
            return Err(truncated("entries offset", header.entry_offset, size - entries_size));
        }
        count
    };
    // `size` fits in the slice, so everything below is bounded by it.
    let data = &rest[..size as usize];
    let record_size = if version == 1 { STRING_RECORD_SIZE_V1 } else { STRING_RECORD_SIZE_V2 };
    let mut out = Vec::new();
    let mut strings_of = CStrings::new(data);
    // Records read over all entries: entries of a version 2 binary may share
    // one record table, and each would get its own copy of every record.
    let mut records_total = 0u64;
    for index in 0..count {
        let at = header.entry_offset + index * ENTRY_SIZE;
        let short = || Error::TooShort { offset, available };
        let entry = RawEntry {
            image_kind: u16_le(data, at).ok_or_else(short)?,
            offload_kind: u16_le(data, at + 2).ok_or_else(short)?,
            flags: u32_le(data, at + 4).ok_or_else(short)?,
            string_offset: u64_le(data, at + 8).ok_or_else(short)?,
            num_strings: u64_le(data, at + 16).ok_or_else(short)?,
            image_offset: u64_le(data, at + 24).ok_or_else(short)?,
            image_size: u64_le(data, at + 32).ok_or_else(short)?,
        };
        if entry.image_offset > size {
            return Err(truncated("image offset", entry.image_offset, size));
        }
        if entry.string_offset > size {
            return Err(truncated("string offset", entry.string_offset, size));
        }
        // Checks LLVM leaves out.
        let out_of_bounds = |what, start: u64, len: u64| Error::OutOfBounds { offset, what, start, len, size };
        let image_end = entry
            .image_offset
            .checked_add(entry.image_size)
            .filter(|&e| e <= size)
            .ok_or_else(|| out_of_bounds("the image", entry.image_offset, entry.image_size))?;
        let records_len = entry.num_strings.checked_mul(record_size);
        let records_end = records_len
            .and_then(|l| entry.string_offset.checked_add(l))
            .filter(|&e| e <= size)
            .ok_or_else(|| out_of_bounds("the string records", entry.string_offset, records_len.unwrap_or(u64::MAX)))?;
        records_total = records_total.saturating_add(records_end - entry.string_offset);
        if records_total > size {
            return Err(out_of_bounds(
                "the string records (counted over all entries)",
                entry.string_offset,
                records_total,
            ));
        }
        let mut strings = Vec::new();
        let mut rec = entry.string_offset;
        while rec < records_end {
            let key_at = u64_le(data, rec).ok_or_else(short)?;
            let value_at = u64_le(data, rec + 8).ok_or_else(short)?;
            let key = strings_of.get(key_at).ok_or_else(|| out_of_bounds("a key string", key_at, 1))?;
            let value = if version == 1 {
                strings_of.get(value_at).ok_or_else(|| out_of_bounds("a value string", value_at, 1))?
            } else {
                let len = u64_le(data, rec + 16).ok_or_else(short)?;
                value_at
                    .checked_add(len)
                    .filter(|&e| e <= size)
                    .map(|e| &data[value_at as usize..e as usize])
                    .ok_or_else(|| out_of_bounds("a value string", value_at, len))?
            };
            strings.push((key, value));
            rec += record_size;
        }
        out.push(OffloadBinary {
            data,
            offset,
            header,
            index,
            entry,
            strings,
            image: &data[entry.image_offset as usize..image_end as usize],
        });
    }
    Ok((out, size))
}

/// NUL-terminated strings of one binary, looked up by offset. The end of
/// the binary also ends a string, as it does for LLVM (whose copy of each
/// binary is followed by a NUL); an offset past the end is an error.
///
/// Records may point anywhere, many of them into one long run without a
/// NUL; searching for the NUL afresh for each would take quadratic time.
/// Every search is remembered as a run `[start, nul)` that holds no NUL, and
/// a search stops at the next known run, so each byte is searched once.
struct CStrings<'a> {
    data: &'a [u8],
    /// Start of a searched run to the offset of the NUL (or end) ending it.
    runs: std::collections::BTreeMap<usize, usize>,
}

impl<'a> CStrings<'a> {
    fn new(data: &'a [u8]) -> Self {
        CStrings { data, runs: std::collections::BTreeMap::new() }
    }

    fn get(&mut self, at: u64) -> Option<&'a [u8]> {
        let start = usize::try_from(at).ok().filter(|&s| s <= self.data.len())?;
        if let Some((_, &end)) = self.runs.range(..=start).next_back()
            && start <= end
        {
            return Some(&self.data[start..end]);
        }
        let next = self.runs.range(start..).next().map(|(&s, &e)| (s, e));
        let limit = next.map_or(self.data.len(), |(s, _)| s);
        let end = match memchr::memchr(0, &self.data[start..limit]) {
            Some(i) => start + i,
            // No NUL before the next known run: the string ends where it does.
            None => next.map_or(self.data.len(), |(_, e)| e),
        };
        self.runs.insert(start, end);
        Some(&self.data[start..end])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload_binary::{Image, write};
    use proptest::prelude::*;

    fn two_images() -> Vec<u8> {
        let a = Image {
            offload_kind: OffloadKind::OpenMp,
            strings: vec![(b"arch", b"generic"), (b"triple", b"x86_64-unknown-linux-gnu")],
            image: b"hello",
            ..Default::default()
        };
        let b = Image {
            image_kind: ImageKind::Object,
            offload_kind: OffloadKind::Hip,
            strings: vec![(b"feature", b"+xnack,-sramecc"), (b"arch", b"gfx90a"), (b"triple", b"amdgcn-amd-amdhsa")],
            image: b"ABCDEFGHIJKLMNOP",
            ..Default::default()
        };
        let mut v = write(&a).unwrap();
        v.extend(write(&b).unwrap());
        v
    }

    #[test]
    fn reads_concatenated_binaries() {
        let data = two_images();
        assert_eq!(data.len(), 0x168);
        let bins = OffloadBinary::parse_all(&data).unwrap();
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[1].offset(), 0xa0);
        assert_eq!(bins[1].image(), b"ABCDEFGHIJKLMNOP");
        assert_eq!(bins[1].offload_kind(), OffloadKind::Hip);
        assert_eq!(bins[1].image_kind(), ImageKind::Object);
        assert_eq!(bins[1].string("feature"), "+xnack,-sramecc");
        assert_eq!(bins[1].string("missing"), "");
        assert_eq!(bins[0].triple(), "x86_64-unknown-linux-gnu");
        assert!(OffloadBinary::parse_all(&[]).unwrap().is_empty());
    }

    #[test]
    fn every_truncation_is_refused_except_at_binary_boundaries() {
        let data = two_images();
        for len in 0..=data.len() {
            let r = OffloadBinary::parse_all(&data[..len]);
            match len {
                0 => assert_eq!(r.unwrap().len(), 0),
                0xa0 => assert_eq!(r.unwrap().len(), 1),
                0x168 => assert_eq!(r.unwrap().len(), 2),
                _ => {
                    let e = r.unwrap_err();
                    let first = if len < 0xa0 { 0 } else { 0xa0 };
                    assert_eq!(e.offset(), first, "length {len}");
                    assert!(matches!(e, Error::TooShort { .. } | Error::Truncated { .. }), "{len}: {e:?}");
                }
            }
        }
    }

    #[test]
    fn llvm_messages_for_the_errors_llvm_reports() {
        let data = two_images();
        let e = OffloadBinary::parse_all(&data[..100]).unwrap_err();
        assert_eq!(e.to_string(), "The end of the file was unexpectedly encountered");
        let e = OffloadBinary::parse_all(&data[..20]).unwrap_err();
        assert_eq!(e.to_string(), "Invalid data was encountered while parsing the file");
        let mut tail = data.clone();
        tail.extend([0u8; 8]);
        let e = OffloadBinary::parse_all(&tail).unwrap_err();
        assert_eq!((e.offset(), e.to_string()), (0x168, "Invalid data was encountered while parsing the file".into()));
        let mut tail = data.clone();
        tail.extend([0u8; 80]);
        assert!(matches!(OffloadBinary::parse_all(&tail), Err(Error::BadMagic { offset: 0x168 })));
    }

    #[test]
    fn versions_other_than_1_and_2_are_refused() {
        let mut data = two_images();
        for (v, want) in [(0u8, "unknown"), (3, "unsupported"), (4, "unknown"), (0xff, "unknown")] {
            data[4] = v;
            match (OffloadBinary::parse_all(&data), want) {
                (Err(Error::UnknownVersion { version, offset: 0 }), "unknown") => assert_eq!(version, u32::from(v)),
                (Err(Error::UnsupportedVersion { version: 3, offset: 0 }), "unsupported") => {}
                (r, _) => panic!("version {v}: {r:?}"),
            }
        }
        assert!(Error::UnsupportedVersion { offset: 0, version: 3 }.to_string().contains("version 3"));
        // A version 1 body labelled version 2 reads its entry size (40) as
        // an entry count, which does not fit.
        data[4] = 2;
        assert!(matches!(OffloadBinary::parse_all(&data), Err(Error::Truncated { field: "entry count", .. })));
    }

    fn put(data: &mut [u8], at: usize, v: u64) {
        data[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn lying_offsets_and_sizes_are_refused_cleanly() {
        let data = two_images();
        let interesting = [0, 1, 7, 8, 0x20, 0x47, 0x48, 0x97, 0x98, 0x99, 0xa0, 0xa1, 1 << 32, u64::MAX - 7, u64::MAX];
        // Every u64 field of the header, the entry and the string records.
        for at in (8..0x68).step_by(8) {
            for &v in &interesting {
                let mut d = data.clone();
                put(&mut d, at, v);
                if let Ok(bins) = OffloadBinary::parse_all(&d) {
                    for b in bins {
                        // Whatever was accepted lies inside the input.
                        assert!(b.image().len() <= d.len());
                        for (k, v) in b.strings() {
                            assert!(k.len() <= d.len() && v.len() <= d.len());
                        }
                    }
                }
            }
        }
        let mut d = data.clone();
        put(&mut d, 0x40, 0x1000);
        assert!(matches!(OffloadBinary::parse_all(&d), Err(Error::OutOfBounds { what: "the image", .. })));
        let mut d = data.clone();
        put(&mut d, 0x30, u64::MAX / 8);
        assert!(matches!(OffloadBinary::parse_all(&d), Err(Error::OutOfBounds { what: "the string records", .. })));
        let mut d = data.clone();
        put(&mut d, 0x48, 0xa1);
        assert!(matches!(OffloadBinary::parse_all(&d), Err(Error::OutOfBounds { what: "a key string", .. })));
        // A key pointing at the very end reads as empty, as in LLVM.
        let mut d = data.clone();
        put(&mut d, 0x48, 0xa0);
        assert_eq!(OffloadBinary::parse_all(&d).unwrap()[0].strings()[0].0, b"");
    }

    #[test]
    fn every_single_byte_corruption_is_handled() {
        let data = two_images();
        for at in 0..data.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut d = data.clone();
                d[at] ^= x;
                let _ = OffloadBinary::parse_all(&d).map_err(|e| e.detail());
            }
        }
    }

    /// A version 2 binary: two entries sharing one string table, values
    /// with NULs, images back to back.
    #[test]
    fn reads_version_2() {
        let mut d = vec![0u8; 0x100];
        d[..4].copy_from_slice(&super::super::MAGIC);
        d[4] = 2;
        put(&mut d, 8, 0x100);
        put(&mut d, 16, 32);
        put(&mut d, 24, 2);
        // entry 0 at 32, entry 1 at 72; records at 112 (3 x 24 bytes)
        for (i, (kind, ofk, str_at, n, img_at, img_len)) in
            [(1u16, 1u16, 112u64, 2u64, 0xe0u64, 5u64), (2, 3, 160, 1, 0xe5, 3)].into_iter().enumerate()
        {
            let e = 32 + 40 * i;
            d[e..e + 2].copy_from_slice(&kind.to_le_bytes());
            d[e + 2..e + 4].copy_from_slice(&ofk.to_le_bytes());
            put(&mut d, e + 8, str_at);
            put(&mut d, e + 16, n);
            put(&mut d, e + 24, img_at);
            put(&mut d, e + 32, img_len);
        }
        // string table at 184: "\0triple\0t\0meta\0a\0b\0"
        let table = b"\0triple\0t\0meta\0a\0b";
        d[184..184 + table.len()].copy_from_slice(table);
        for (i, (k, v, len)) in [(185u64, 192u64, 1u64), (194, 199, 3), (185, 192, 1)].into_iter().enumerate() {
            put(&mut d, 112 + 24 * i, k);
            put(&mut d, 120 + 24 * i, v);
            put(&mut d, 128 + 24 * i, len);
        }
        d[0xe0..0xe8].copy_from_slice(b"helloABC");
        let bins = OffloadBinary::parse_all(&d).unwrap();
        assert_eq!(bins.len(), 2);
        assert_eq!(bins[0].image(), b"hello");
        assert_eq!(bins[1].image(), b"ABC");
        assert_eq!(bins[0].strings(), &[(&b"triple"[..], &b"t"[..]), (&b"meta"[..], &b"a\0b"[..])]);
        assert_eq!(bins[1].offload_kind(), OffloadKind::Hip);
        assert_eq!((bins[0].version(), bins[1].entry_index()), (2, 1));
        // A count that does not fit is refused.
        put(&mut d, 24, 6);
        assert!(matches!(OffloadBinary::parse_all(&d), Err(Error::Truncated { .. })));
    }

    /// Many records pointing into one long run without a NUL, at distinct
    /// offsets: each string search used to scan to the end of the run
    /// (quadratic time). Strings must still come out right.
    #[test]
    fn strings_sharing_a_long_run_are_found_once() {
        let run = 1 << 20;
        let n = 60_000u64;
        // header, entry, n records, then the run of 'x' (no NUL anywhere).
        let records_at = 0x48u64;
        let run_at = records_at + 16 * n;
        let size = (run_at + run as u64).next_multiple_of(8);
        let mut d = vec![b'x'; size as usize];
        d[..4].copy_from_slice(&super::super::MAGIC);
        d[4..8].copy_from_slice(&1u32.to_le_bytes());
        put(&mut d, 8, size);
        put(&mut d, 16, 0x20);
        put(&mut d, 24, 40);
        d[0x20..0x28].fill(0);
        put(&mut d, 0x28, records_at);
        put(&mut d, 0x30, n);
        put(&mut d, 0x38, size);
        put(&mut d, 0x40, 0);
        for i in 0..n {
            let r = (records_at + 16 * i) as usize;
            put(&mut d, r, run_at + i * 7);
            put(&mut d, r + 8, run_at + (n - 1 - i) * 3);
        }
        let bins = OffloadBinary::parse_all(&d).unwrap();
        let strings = bins[0].strings();
        assert_eq!(strings.len(), n as usize);
        for (i, (k, v)) in strings.iter().enumerate().step_by(997) {
            let i = i as u64;
            assert_eq!(k.len() as u64, size - (run_at + i * 7));
            assert_eq!(v.len() as u64, size - (run_at + (n - 1 - i) * 3));
        }
    }

    #[test]
    fn c_strings_match_a_direct_search() {
        let data = b"ab\0cde\0\0fgh";
        let direct = |at: usize| {
            let tail = &data[at..];
            &tail[..tail.iter().position(|&b| b == 0).unwrap_or(tail.len())]
        };
        // Every order of lookups gives the same answers.
        for order in [[9usize, 0, 4, 3, 7, 1, 10, 8, 2, 5], [2, 3, 4, 5, 0, 1, 7, 8, 9, 10]] {
            let mut c = CStrings::new(data);
            for at in order {
                assert_eq!(c.get(at as u64), Some(direct(at)), "offset {at}");
                assert_eq!(c.get(at as u64), Some(direct(at)), "offset {at}, again");
            }
            assert_eq!(c.get(data.len() as u64), Some(&b""[..]));
            assert_eq!(c.get(data.len() as u64 + 1), None);
        }
    }

    /// Version 2 entries sharing one record table: each entry would copy
    /// every record (a few kilobytes claiming gigabytes of records). The
    /// records of all entries together may not exceed the binary.
    #[test]
    fn version_2_entries_may_not_share_more_records_than_fit() {
        let size = 0x1000u64;
        let count = 64u64;
        let mut d = vec![0u8; size as usize];
        d[..4].copy_from_slice(&super::super::MAGIC);
        d[4] = 2;
        put(&mut d, 8, size);
        put(&mut d, 16, 32);
        put(&mut d, 24, count);
        let records_at = 32 + 40 * count;
        let n = (size - records_at) / 24;
        for i in 0..count as usize {
            let e = 32 + 40 * i;
            put(&mut d, e + 8, records_at);
            put(&mut d, e + 16, n);
            put(&mut d, e + 24, size);
        }
        let e = OffloadBinary::parse_all(&d).unwrap_err();
        assert!(matches!(e, Error::OutOfBounds { what: "the string records (counted over all entries)", .. }), "{e:?}");
        // One entry with that table is fine.
        put(&mut d, 24, 1);
        assert_eq!(OffloadBinary::parse_all(&d).unwrap()[0].strings().len(), n as usize);
    }

    fn arb_string() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(1u8..=255, 0..24)
    }

    proptest! {
        #[test]
        fn write_then_read_gives_the_image_back(
            image_kind in 0u16..8,
            offload_kind in 0u16..6,
            flags in any::<u32>(),
            strings in prop::collection::vec((arb_string(), arb_string()), 0..12),
            image in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut seen = std::collections::HashSet::new();
            let strings: Vec<(&[u8], &[u8])> = strings
                .iter()
                .filter(|(k, _)| seen.insert(k.clone()))
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect();
            let img = Image {
                image_kind: ImageKind::from_u16(image_kind),
                offload_kind: OffloadKind::from_u16(offload_kind),
                flags,
                strings: strings.clone(),
                image: &image,
            };
            let bytes = write(&img).unwrap();
            prop_assert_eq!(bytes.len() % 8, 0);
            let bins = OffloadBinary::parse_all(&bytes).unwrap();
            prop_assert_eq!(bins.len(), 1);
            let b = &bins[0];
            prop_assert_eq!(b.image(), &image[..]);
            prop_assert_eq!(b.strings(), &strings[..]);
            prop_assert_eq!(b.flags(), flags);
            prop_assert_eq!(b.image_kind().to_u16(), image_kind);
            prop_assert_eq!(b.offload_kind().to_u16(), offload_kind);
        }

        #[test]
        fn arbitrary_bytes_never_panic(tail in prop::collection::vec(any::<u8>(), 0..400), version in 0u32..4) {
            let mut d = super::super::MAGIC.to_vec();
            d.extend(version.to_le_bytes());
            d.extend(tail);
            if let Ok(bins) = OffloadBinary::parse_all(&d) {
                for b in bins {
                    prop_assert!(b.data().len() <= d.len());
                }
            }
        }
    }
}
