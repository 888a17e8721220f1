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
//! Versions (docs/llvm-releases.md): 1 (LLVM 15-22), 2 (LLVM 23: several
//! entries per header, sized values) and 3 (LLVM main: a 40-byte header
//! with an inflated size) are read. A compressed version 3 binary cannot be
//! read in place: [`Binaries`] reports it as [`Error::Compressed`], and
//! [`inflate`] / [`inflate_all`] give an uncompressed copy to read instead,
//! with a limit on the memory that takes.
//!
//! The offload kind of an entry is read by [`OffloadKind::from_stored`]:
//! in version 1 binaries 3 and 4 both mean HIP (LLVM 15-20 and LLVM 21-22
//! numbers), in later versions the kinds are bits.

use super::{
    ENTRY_SIZE, FLAG_METADATA, HEADER_SIZE, HEADER_SIZE_V3, ImageKind, MAGIC, OffloadKind, STRING_RECORD_SIZE_V1,
    STRING_RECORD_SIZE_V2, align8,
};
use crate::bytes::{u16_le, u32_le, u64_le};
use std::borrow::Cow;
use std::io::Read;

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
    /// A compressed version 3 binary, which cannot be read in place: see
    /// [`inflate`] and [`inflate_all`].
    #[error("OffloadBinary at offset {offset:#x} is compressed (version 3, {inflated_size} bytes inflated)")]
    Compressed {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// The size the header declares for the inflated binary.
        inflated_size: u64,
    },
    /// A compressed binary did not inflate to what its header declares.
    #[error("compressed OffloadBinary at offset {offset:#x}: {reason}")]
    Inflate {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// What went wrong.
        reason: String,
    },
    /// Inflating would take more memory than the caller allows.
    #[error(
        "compressed OffloadBinary at offset {offset:#x} inflates to {inflated_size} bytes, more than the limit of {limit}"
    )]
    InflateLimit {
        /// Offset of the binary in the buffer.
        offset: u64,
        /// The size the header declares (with the binaries inflated before
        /// it in the same call).
        inflated_size: u64,
        /// The limit.
        limit: u64,
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
            | Error::Compressed { offset, .. }
            | Error::Inflate { offset, .. }
            | Error::InflateLimit { offset, .. }
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
            Error::Compressed { .. }
            | Error::Inflate { .. }
            | Error::InflateLimit { .. }
            | Error::OutOfBounds { .. } => self.to_string(),
        }
    }
}

/// The header fields as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawHeader {
    /// Format version (1, 2 or 3).
    pub version: u32,
    /// Size of the whole binary in bytes (version 1 and 2: padding
    /// included; a compressed version 3 binary: header and compressed
    /// data, without the padding after it).
    pub size: u64,
    /// Offset of the first entry, relative to the binary.
    pub entry_offset: u64,
    /// Version 1: size of the entry; versions 2 and 3: number of entries.
    pub entry_size_or_count: u64,
    /// Version 3: the size of the binary once inflated, 0 when it is not
    /// compressed; 0 for versions 1 and 2 (which have no such field).
    pub inflated_size: u64,
}

impl RawHeader {
    /// Bytes the header takes (32, or 40 for version 3).
    pub fn header_len(&self) -> u64 {
        if self.version >= 3 { HEADER_SIZE_V3 } else { HEADER_SIZE }
    }
    /// Whether the header says the body is compressed.
    pub fn is_compressed(&self) -> bool {
        self.version >= 3 && self.inflated_size != 0
    }
    /// How many entries the binary holds.
    pub fn entry_count(&self) -> u64 {
        if self.version == 1 { 1 } else { self.entry_size_or_count }
    }
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
    /// The offloading model that produced the image, read as
    /// [`OffloadKind::from_stored`] says (HIP for 3 and 4 in version 1).
    /// The number as stored is `entry().offload_kind`.
    pub fn offload_kind(&self) -> OffloadKind {
        OffloadKind::from_stored(self.header.version, self.entry.offload_kind)
    }
    /// The entry's flag bits.
    pub fn flags(&self) -> u32 {
        self.entry.flags
    }
    /// Whether a version 2 or 3 entry is marked as carrying metadata only
    /// (`OIF_Metadata`); never for version 1, where no flag has a meaning.
    pub fn is_metadata_only(&self) -> bool {
        self.header.version >= 2 && self.entry.flags & FLAG_METADATA != 0
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
        let (binaries, advance) = parse_chunk(rest, offset)?;
        self.pos = offset + advance;
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

/// The header at the start of `rest`, checked as far as the header alone
/// allows (magic, version, the size against the data there, and for a
/// compressed binary its entries offset and inflated size).
fn parse_header(rest: &[u8], offset: u64) -> Result<RawHeader, Error> {
    let available = rest.len() as u64;
    let truncated = |field, value, limit| Error::Truncated { offset, field, value, limit };
    let version = u32_le(rest, 4);
    // A compressed version 3 binary may be shorter than a header and an
    // entry; every other binary is at least that long.
    let compressed_v3 = rest.get(..4) == Some(&MAGIC[..])
        && version == Some(3)
        && available >= HEADER_SIZE_V3
        && u64_le(rest, 32).is_some_and(|v| v != 0);
    // LLVM's order: minimum size, magic, version, then the size fields.
    if available < HEADER_SIZE + ENTRY_SIZE && !compressed_v3 {
        return Err(Error::TooShort { offset, available });
    }
    if rest.get(..4) != Some(&MAGIC[..]) {
        return Err(Error::BadMagic { offset });
    }
    let rd = |at| u64_le(rest, at).ok_or(Error::TooShort { offset, available });
    let version = version.ok_or(Error::TooShort { offset, available })?;
    if !(1..=3).contains(&version) {
        return Err(Error::UnknownVersion { offset, version });
    }
    let header = RawHeader {
        version,
        size: rd(8)?,
        entry_offset: rd(16)?,
        entry_size_or_count: rd(24)?,
        inflated_size: if version >= 3 { rd(32)? } else { 0 },
    };
    let size = header.size;
    if size > available || size < header.header_len() {
        return Err(truncated("binary size", size, available));
    }
    if header.is_compressed() {
        if header.entry_offset != HEADER_SIZE_V3 {
            // The inflated binary starts with this header, so its entries
            // follow it directly; LLVM reads other offsets out of bounds.
            return Err(truncated("entries offset", header.entry_offset, HEADER_SIZE_V3));
        }
        if header.inflated_size < HEADER_SIZE_V3 + ENTRY_SIZE {
            return Err(truncated("inflated size", header.inflated_size, HEADER_SIZE_V3 + ENTRY_SIZE));
        }
    }
    Ok(header)
}

/// Parses the binary at the start of `rest` (which lies at `offset` in the
/// caller's buffer); returns its entries and how far the next binary lies
/// (its size; for version 3 rounded up to 8, as LLVM steps, because a
/// compressed binary's size is not a multiple of 8).
fn parse_chunk(rest: &[u8], offset: u64) -> Result<(Vec<OffloadBinary<'_>>, u64), Error> {
    let available = rest.len() as u64;
    let truncated = |field, value, limit| Error::Truncated { offset, field, value, limit };
    let header = parse_header(rest, offset)?;
    if header.is_compressed() {
        return Err(Error::Compressed { offset, inflated_size: header.inflated_size });
    }
    let version = header.version;
    let size = header.size;
    if size < ENTRY_SIZE {
        return Err(truncated("binary size", size, available));
    }
    let advance = if version >= 3 { align8(size).unwrap_or(u64::MAX) } else { size };
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
            .filter(|&s| s <= size - header.header_len())
            .ok_or_else(|| truncated("entry count", count, (size - header.header_len()) / ENTRY_SIZE))?;
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
    Ok((out, advance))
}

/// The magic that starts a zstd frame; a compressed body without it is
/// zlib, as LLVM decides.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// The uncompressed form of the compressed version 3 binary at the start
/// of `chunk` (which lies at `offset` in the caller's buffer, for
/// messages): its header with the size set to the inflated size and the
/// inflated size to 0, then the inflated body. [`OffloadBinary::parse_all`]
/// reads the result.
///
/// The body is zstd when it starts with zstd's magic, zlib otherwise, and
/// must inflate to exactly the declared size. Nothing larger than `limit`
/// bytes is produced: a declared size above it is refused before
/// decompressing, and memory grows with the data actually produced, not
/// with the declared size.
///
/// ```
/// use offload_format::offload_binary::{Image, OffloadKind, OffloadBinary, read, write};
///
/// let image = vec![7u8; 4096];
/// let img = Image { offload_kind: OffloadKind::Hip, strings: vec![(&b"triple"[..], &b"amdgcn-amd-amdhsa"[..])], image: &image, ..Default::default() };
/// let packed = write::write_v3(&[img], Some(write::Compression::Zstd(3))).unwrap();
/// assert!(packed.len() < 200);
/// assert!(matches!(OffloadBinary::parse_all(&packed), Err(read::Error::Compressed { .. })));
/// let inflated = read::inflate(&packed, 0, 1 << 20).unwrap();
/// let bins = OffloadBinary::parse_all(&inflated).unwrap();
/// assert_eq!((bins[0].image(), bins[0].offload_kind()), (&image[..], OffloadKind::Hip));
/// assert!(read::inflate(&packed, 0, 1000).is_err());
/// ```
pub fn inflate(chunk: &[u8], offset: u64, limit: u64) -> Result<Vec<u8>, Error> {
    let header = parse_header(chunk, offset)?;
    if !header.is_compressed() {
        return Err(Error::Inflate { offset, reason: "the binary is not compressed".into() });
    }
    if header.inflated_size > limit {
        return Err(Error::InflateLimit { offset, inflated_size: header.inflated_size, limit });
    }
    // parse_header checked entry_offset == 40 <= size <= chunk.len() and
    // inflated_size >= 80.
    let body = &chunk[HEADER_SIZE_V3 as usize..header.size as usize];
    let body_size = header.inflated_size - HEADER_SIZE_V3;
    let fail = |reason: String| Error::Inflate { offset, reason };
    let reader: Box<dyn Read + '_> = if body.starts_with(&ZSTD_MAGIC) {
        let mut d = zstd::stream::read::Decoder::with_buffer(body).map_err(|e| fail(format!("zstd: {e}")))?;
        d.window_log_max(crate::bundle::compressed::zstd_window_log_max(body_size))
            .map_err(|e| fail(format!("zstd: {e}")))?;
        Box::new(d)
    } else {
        Box::new(flate2::read::ZlibDecoder::new(body))
    };
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&header.inflated_size.to_le_bytes());
    out.extend_from_slice(&header.entry_offset.to_le_bytes());
    out.extend_from_slice(&header.entry_size_or_count.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    // One byte more than declared is asked for, to see a lying size; the
    // vector grows with what arrives.
    let produced = reader
        .take(body_size.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| fail(format!("the body does not decompress: {e}")))? as u64;
    if produced != body_size {
        return Err(fail(format!("the body inflates to {produced} bytes, the header declares {body_size}")));
    }
    Ok(out)
}

/// `data` (binaries back to back, as [`Binaries`] reads them) with every
/// compressed version 3 binary replaced by its inflated form ([`inflate`],
/// followed by zeros up to a multiple of 8); borrowed unchanged when
/// nothing is compressed. At most `limit` bytes are inflated in all.
/// Offsets of binaries read from the result are offsets in the result.
pub fn inflate_all(data: &[u8], limit: u64) -> Result<Cow<'_, [u8]>, Error> {
    let mut out: Option<Vec<u8>> = None;
    let mut pos = 0u64;
    let mut inflated = 0u64;
    while pos < data.len() as u64 {
        let rest = usize::try_from(pos).ok().and_then(|p| data.get(p..)).unwrap_or(&[]);
        let header = parse_header(rest, pos)?;
        let advance = if header.is_compressed() {
            let left = limit.saturating_sub(inflated);
            let mut bytes = inflate(rest, pos, left).map_err(|e| match e {
                Error::InflateLimit { offset, inflated_size, .. } => {
                    Error::InflateLimit { offset, inflated_size: inflated.saturating_add(inflated_size), limit }
                }
                e => e,
            })?;
            inflated += bytes.len() as u64;
            // The reader steps over a version 3 binary rounded up to 8.
            bytes.resize(bytes.len().next_multiple_of(8), 0);
            out.get_or_insert_with(|| data[..rest_start(data, pos)].to_vec()).extend_from_slice(&bytes);
            align8(header.size).unwrap_or(u64::MAX)
        } else {
            // Checked in full, so that a damaged binary is reported here.
            let (_, advance) = parse_chunk(rest, pos)?;
            if let Some(o) = out.as_mut() {
                let end = usize::try_from(advance).map_or(rest.len(), |a| a.min(rest.len()));
                o.extend_from_slice(&rest[..end]);
            }
            advance
        };
        pos = pos.saturating_add(advance);
    }
    Ok(out.map_or(Cow::Borrowed(data), Cow::Owned))
}

fn rest_start(data: &[u8], pos: u64) -> usize {
    usize::try_from(pos).map_or(data.len(), |p| p.min(data.len()))
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
    fn versions_other_than_1_to_3_are_refused() {
        let mut data = two_images();
        for v in [0u8, 4, 0xff] {
            data[4] = v;
            match OffloadBinary::parse_all(&data) {
                Err(Error::UnknownVersion { version, offset: 0 }) => assert_eq!(version, u32::from(v)),
                r => panic!("version {v}: {r:?}"),
            }
        }
        // A version 1 body labelled version 3: the first entry's kinds are
        // read as an inflated size, so it claims to be compressed, with its
        // entries at 32 instead of after a 40-byte header.
        data[4] = 3;
        let e = OffloadBinary::parse_all(&data).unwrap_err();
        assert!(matches!(e, Error::Truncated { field: "entries offset", value: 32, .. }), "{e:?}");
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
            [(1u16, 1u16, 112u64, 2u64, 0xe0u64, 5u64), (2, 4, 160, 1, 0xe5, 3)].into_iter().enumerate()
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
        // Version 2 comes from LLVM 23: HIP is 4, and 3 is no single kind.
        assert_eq!(bins[1].offload_kind(), OffloadKind::Hip);
        assert_eq!((bins[0].version(), bins[1].entry_index()), (2, 1));
        d[72 + 2] = 3;
        assert_eq!(OffloadBinary::parse_all(&d).unwrap()[1].offload_kind(), OffloadKind::Other(3));
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
            // 4 (LLVM 21's HIP) reads as HIP and is written as LLVM 19's 3.
            prop_assert_eq!(b.offload_kind(), OffloadKind::from_u16(offload_kind));
            prop_assert_eq!(b.entry().offload_kind, OffloadKind::from_u16(offload_kind).to_u16());
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
