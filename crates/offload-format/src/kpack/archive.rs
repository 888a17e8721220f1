//! The `.kpack` archive (`docs/formats/kpack.md`, "The archive"): a 16-byte
//! `KPAK` header, the blob of code objects, and a msgpack table of contents
//! that runs to the end of the file.
//!
//! [`Archive::parse`] reads the header and the TOC and locates every code
//! object's bytes (for `zstd-per-kernel`, by walking the 4-byte length
//! prefixes of the frames; no frame is decoded), checking every offset and
//! size against the file. [`Archive::decompress`] then decodes one code
//! object, and only that one, with a size limit.

use super::frame;
use crate::bytes::{ReadError, u32_le, u64_le};
use crate::msgpack::{self, Value};
use std::io::Read;

/// The magic that starts an archive.
pub const MAGIC: &[u8; 4] = b"KPAK";
/// The only version the runtime accepts.
pub const VERSION: u32 = 1;
/// Bytes of the fixed header: magic, version, TOC offset.
pub const HEADER_LEN: u64 = 16;
/// The largest `zstd-per-kernel` blob the runtime accepts (4 GiB).
pub const MAX_BLOB: u64 = 4 << 30;
/// The most code objects a `zstd-per-kernel` blob may declare (2^20).
pub const MAX_KERNELS: u64 = 1 << 20;

/// How the blob holds the code objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `zstd-per-kernel`: one zstd frame per code object.
    ZstdPerKernel,
    /// `none`: the code objects stored as they are (also what the runtime
    /// makes of a missing or unknown `compression_scheme`).
    None,
}

/// Where one code object's stored bytes lie (a zstd frame, or the raw
/// code object for [`Scheme::None`]), as absolute file offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// Offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub size: u64,
}

impl Span {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.size
    }
}

/// One TOC entry: a code object of one binary for one target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The target ID it is filed under (`gfx90a:xnack+`).
    pub target: &'a str,
    /// `type` (`hsaco`).
    pub kind: &'a str,
    /// Index of its stored bytes ([`Archive::spans`]).
    pub ordinal: u32,
    /// Its size once decompressed.
    pub original_size: u64,
    /// `metadata.target`, the bundle entry ID it came from, when present.
    pub source_id: Option<&'a str>,
}

/// The entries of one binary key (`<kernel_name>#<co_index>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binary<'a> {
    /// The key.
    pub key: &'a str,
    /// Its entries, in TOC order.
    pub entries: Vec<Entry<'a>>,
}

/// A parsed archive, borrowing the file's bytes.
#[derive(Clone, Debug)]
pub struct Archive<'a> {
    data: &'a [u8],
    /// Absolute offset of the TOC.
    pub toc_offset: u64,
    /// Bytes the TOC's msgpack value takes (anything after it, up to the
    /// end of the file, is left over; see [`crate::kpack::verify`]).
    pub toc_len: u64,
    /// `format_version`, when present.
    pub format_version: Option<u64>,
    /// `group_name`, when present.
    pub group_name: Option<&'a str>,
    /// `gfx_arch_family`, when present.
    pub gfx_arch_family: Option<&'a str>,
    /// `gfx_arches`: the targets the loader matches the archive by.
    pub gfx_arches: Vec<&'a str>,
    /// How the code objects are stored.
    pub scheme: Scheme,
    /// `compression_scheme` as written, when it is none of the known ones.
    pub unknown_scheme: Option<&'a str>,
    /// `zstd-per-kernel`: the blob (`zstd_offset`, `zstd_size`).
    pub blob: Option<Span>,
    /// The stored bytes of each ordinal.
    pub spans: Vec<Span>,
    /// `toc`, in file order.
    pub binaries: Vec<Binary<'a>>,
}

/// Why a file is not a usable archive, or a code object cannot be served.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArchiveError {
    /// The file is shorter than the 16-byte header.
    #[error("a kpack archive starts with a 16-byte header; the file has {0} bytes")]
    Truncated(u64),
    /// The magic is not `KPAK`.
    #[error("no KPAK magic: not a kpack archive")]
    Magic,
    /// A version other than 1.
    #[error("kpack archive version {0} (only version 1 is known)")]
    Version(u32),
    /// The TOC offset is not inside the file (or inside the header).
    #[error("the table of contents offset {offset:#x} is not inside the file ({len} bytes)")]
    TocOffset {
        /// The offset stored.
        offset: u64,
        /// The file size.
        len: u64,
    },
    /// The TOC is not valid msgpack.
    #[error("table of contents at {toc_offset:#x}: {error}")]
    TocMsgpack {
        /// Where the TOC starts.
        toc_offset: u64,
        /// The decoder's error (its offset counts from the TOC's start).
        error: msgpack::Error,
    },
    /// The TOC is msgpack but not of the documented shape (the offset is
    /// the TOC's: its values have none of their own).
    #[error("{0}")]
    TocShape(#[source] ReadError),
    /// The blob or a code object lies outside the file.
    #[error("{what} ({size} bytes at offset {offset:#x}) runs past the end of the file ({len} bytes)")]
    OutOfFile {
        /// What lies there.
        what: String,
        /// Its offset.
        offset: u64,
        /// Its size.
        size: u64,
        /// The file size.
        len: u64,
    },
    /// The `zstd-per-kernel` blob or its frame table is malformed.
    #[error("zstd-per-kernel blob: {0}")]
    Blob(#[source] ReadError),
    /// No entry for this key and target.
    #[error("no entry for {key:?} under target {target:?}")]
    NoEntry {
        /// The binary key looked up.
        key: String,
        /// The target looked up.
        target: String,
    },
    /// An entry's ordinal names no stored code object.
    #[error("ordinal {ordinal} names no code object (the archive stores {count})")]
    Ordinal {
        /// The ordinal.
        ordinal: u32,
        /// How many code objects are stored.
        count: usize,
    },
    /// The declared size is over the caller's limit.
    #[error("the code object declares {declared} bytes, over the limit of {limit}")]
    TooLarge {
        /// The declared size.
        declared: u64,
        /// The limit.
        limit: u64,
    },
    /// zstd refused the frame (its message).
    #[error("ordinal {ordinal}: zstd: {message}")]
    Decompress {
        /// The ordinal.
        ordinal: u32,
        /// What zstd said.
        message: String,
    },
    /// The code object is not the declared size.
    #[error("ordinal {ordinal}: {actual} bytes, but the TOC declares {declared}")]
    SizeMismatch {
        /// The ordinal.
        ordinal: u32,
        /// `original_size`.
        declared: u64,
        /// What decoding produced (at most one byte more than declared).
        actual: u64,
    },
}

/// A TOC of the wrong shape; [`Archive::parse`] puts in the TOC's offset.
fn shape(msg: impl Into<String>) -> ArchiveError {
    ArchiveError::TocShape(ReadError::invalid(0, "table of contents", msg))
}

fn blob_error(offset: u64, what: &'static str, why: impl Into<String>) -> ArchiveError {
    ArchiveError::Blob(ReadError::invalid(offset, what, why))
}

fn str_field<'a>(v: &Value<'a>, what: &str) -> Result<&'a str, ArchiveError> {
    v.as_str().ok_or_else(|| shape(format!("{what} is a {}, not a UTF-8 string", v.type_name())))
}

fn uint_field(v: &Value<'_>, what: &str) -> Result<u64, ArchiveError> {
    v.as_u64().ok_or_else(|| shape(format!("{what} is a {}, not an unsigned integer", v.type_name())))
}

fn opt_str<'a>(toc: &Value<'a>, key: &str) -> Result<Option<&'a str>, ArchiveError> {
    toc.get(key).map(|v| str_field(v, key)).transpose()
}

/// Whether `data` starts with the archive magic.
pub fn has_magic(data: &[u8]) -> bool {
    data.starts_with(MAGIC)
}

impl<'a> Archive<'a> {
    /// Parses an archive: header, TOC, and where each code object lies.
    ///
    /// ```
    /// use offload_format::kpack::Archive;
    ///
    /// assert!(Archive::parse(b"KPAK\x02\0\0\0\x10\0\0\0\0\0\0\0\x80").is_err());
    /// assert!(Archive::parse(b"not an archive").is_err());
    /// ```
    pub fn parse(data: &'a [u8]) -> Result<Archive<'a>, ArchiveError> {
        Archive::parse_unplaced(data).map_err(|mut e| {
            if let ArchiveError::TocShape(read) = &mut e {
                read.offset = u64_le(data, 8).unwrap_or(0);
            }
            e
        })
    }

    fn parse_unplaced(data: &'a [u8]) -> Result<Archive<'a>, ArchiveError> {
        let len = data.len() as u64;
        if len < HEADER_LEN {
            return Err(ArchiveError::Truncated(len));
        }
        if !has_magic(data) {
            return Err(ArchiveError::Magic);
        }
        let version = u32_le(data, 4).unwrap_or(0);
        if version != VERSION {
            return Err(ArchiveError::Version(version));
        }
        let toc_offset = u64_le(data, 8).unwrap_or(0);
        if toc_offset < HEADER_LEN || toc_offset >= len {
            return Err(ArchiveError::TocOffset { offset: toc_offset, len });
        }
        // toc_offset < len, so it fits in usize.
        let (toc, toc_len) = msgpack::read(&data[toc_offset as usize..])
            .map_err(|error| ArchiveError::TocMsgpack { toc_offset, error })?;
        if toc.as_map().is_none() {
            return Err(shape(format!("a {}, not a map", toc.type_name())));
        }
        let gfx_arches = match toc.get("gfx_arches") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .ok_or_else(|| shape("gfx_arches is not an array"))?
                .iter()
                .map(|a| str_field(a, "a gfx_arches item"))
                .collect::<Result<_, _>>()?,
        };
        let scheme_name = opt_str(&toc, "compression_scheme")?;
        let scheme = match scheme_name {
            Some("zstd-per-kernel") => Scheme::ZstdPerKernel,
            _ => Scheme::None,
        };
        let mut archive = Archive {
            data,
            toc_offset,
            toc_len: toc_len as u64,
            format_version: toc.get("format_version").map(|v| uint_field(v, "format_version")).transpose()?,
            group_name: opt_str(&toc, "group_name")?,
            gfx_arch_family: opt_str(&toc, "gfx_arch_family")?,
            gfx_arches,
            scheme,
            unknown_scheme: scheme_name.filter(|s| !matches!(*s, "zstd-per-kernel" | "none")),
            blob: None,
            spans: Vec::new(),
            binaries: read_toc(toc.get("toc").ok_or_else(|| shape("no \"toc\" map"))?)?,
        };
        match scheme {
            Scheme::ZstdPerKernel => archive.read_frames(&toc)?,
            Scheme::None => archive.read_blobs(&toc)?,
        }
        Ok(archive)
    }

    fn check_in_file(&self, what: impl FnOnce() -> String, offset: u64, size: u64) -> Result<(), ArchiveError> {
        let len = self.data.len() as u64;
        if offset.checked_add(size).is_none_or(|end| end > len) {
            return Err(ArchiveError::OutOfFile { what: what(), offset, size, len });
        }
        Ok(())
    }

    fn read_frames(&mut self, toc: &Value<'a>) -> Result<(), ArchiveError> {
        let field = |key: &str| -> Result<u64, ArchiveError> {
            uint_field(toc.get(key).ok_or_else(|| shape(format!("zstd-per-kernel without {key}")))?, key)
        };
        let blob = Span { offset: field("zstd_offset")?, size: field("zstd_size")? };
        if blob.size > MAX_BLOB {
            return Err(blob_error(
                blob.offset,
                "zstd blob",
                format!("{} bytes, over the runtime's limit of 4 GiB", blob.size),
            ));
        }
        self.check_in_file(|| "the zstd blob".into(), blob.offset, blob.size)?;
        let end = blob.end();
        let count = u32_le(self.data, blob.offset)
            .filter(|_| blob.size >= 4)
            .ok_or_else(|| blob_error(blob.offset, "kernel count", "the blob is too short to hold it"))?;
        if u64::from(count) > MAX_KERNELS {
            return Err(blob_error(
                blob.offset,
                "kernel count",
                format!("{count} kernels, over the runtime's limit of 2^20"),
            ));
        }
        // Each frame takes at least its 4-byte length.
        let mut spans = Vec::with_capacity((u64::from(count).min(blob.size / 4)) as usize);
        let mut pos = blob.offset + 4;
        for ordinal in 0..count {
            let frame_len = u32_le(self.data, pos).filter(|_| pos + 4 <= end).ok_or_else(|| {
                blob_error(pos, "frame length", format!("the length of frame {ordinal} is past the end of the blob"))
            })?;
            let span = Span { offset: pos + 4, size: u64::from(frame_len) };
            if span.end() > end {
                let why = format!("frame {ordinal} ({frame_len} bytes) runs past the end of the blob at {end:#x}");
                return Err(blob_error(span.offset, "frame", why));
            }
            spans.push(span);
            pos = span.end();
        }
        self.blob = Some(blob);
        self.spans = spans;
        Ok(())
    }

    fn read_blobs(&mut self, toc: &Value<'a>) -> Result<(), ArchiveError> {
        let Some(blobs) = toc.get("blobs") else { return Ok(()) };
        let blobs = blobs.as_array().ok_or_else(|| shape("blobs is not an array"))?;
        let mut spans = Vec::with_capacity(blobs.len());
        for (ordinal, b) in blobs.iter().enumerate() {
            let field = |key: &str| -> Result<u64, ArchiveError> {
                let what = format!("blobs[{ordinal}].{key}");
                uint_field(b.get(key).ok_or_else(|| shape(format!("{what} is missing")))?, &what)
            };
            let span = Span { offset: field("offset")?, size: field("size")? };
            self.check_in_file(|| format!("code object {ordinal}"), span.offset, span.size)?;
            spans.push(span);
        }
        self.spans = spans;
        Ok(())
    }

    /// The whole file.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The entry for binary key `key` under target `target`, both matched
    /// exactly (as the runtime does).
    pub fn find(&self, key: &str, target: &str) -> Option<&Entry<'a>> {
        self.binaries.iter().find(|b| b.key == key)?.entries.iter().find(|e| e.target == target)
    }

    /// Every entry with its key, in TOC order.
    pub fn entries(&self) -> impl Iterator<Item = (&'a str, &Entry<'a>)> + '_ {
        self.binaries.iter().flat_map(|b| b.entries.iter().map(move |e| (b.key, e)))
    }

    /// The stored bytes of `ordinal`: a zstd frame, or the code object
    /// itself for [`Scheme::None`].
    pub fn stored(&self, ordinal: u32) -> Result<&'a [u8], ArchiveError> {
        let span =
            self.spans.get(ordinal as usize).ok_or(ArchiveError::Ordinal { ordinal, count: self.spans.len() })?;
        // Checked against the file when parsed.
        Ok(&self.data[span.offset as usize..span.end() as usize])
    }

    /// The header of `ordinal`'s zstd frame (`zstd-per-kernel` only).
    pub fn frame_header(&self, ordinal: u32) -> Result<Option<frame::FrameHeader>, ArchiveError> {
        let stored = self.stored(ordinal)?;
        Ok(match self.scheme {
            Scheme::ZstdPerKernel => frame::read_header(stored).ok(),
            Scheme::None => None,
        })
    }

    /// Decodes `entry`'s code object. Nothing is decoded, and nothing
    /// allocated, when its declared size is over `limit`; memory then grows
    /// with the bytes zstd actually produces, decoding stops one byte past
    /// the declared size, and the result must be exactly that size. zstd
    /// checks the frame's content checksum when it has one.
    pub fn decompress(&self, entry: &Entry<'_>, limit: u64) -> Result<Vec<u8>, ArchiveError> {
        let declared = entry.original_size;
        if declared > limit {
            return Err(ArchiveError::TooLarge { declared, limit });
        }
        decode_stored(self.stored(entry.ordinal)?, self.scheme, entry.ordinal, declared, limit)
    }
}

/// Decodes the stored bytes of one code object (what [`Archive::stored`]
/// returns for `ordinal`) under `scheme`, as [`Archive::decompress`] does:
/// nothing is allocated when `declared` is over `limit`, decoding stops one
/// byte past `declared`, and the result must be exactly `declared` bytes.
/// For callers that keep the stored bytes and not the parsed archive.
pub fn decode_stored(
    stored: &[u8],
    scheme: Scheme,
    ordinal: u32,
    declared: u64,
    limit: u64,
) -> Result<Vec<u8>, ArchiveError> {
    if declared > limit {
        return Err(ArchiveError::TooLarge { declared, limit });
    }
    let out = match scheme {
        Scheme::None => stored.to_vec(),
        Scheme::ZstdPerKernel => {
            let zstd_err = |e: std::io::Error| ArchiveError::Decompress { ordinal, message: e.to_string() };
            let mut decoder = zstd::stream::read::Decoder::with_buffer(stored).map_err(zstd_err)?;
            decoder.window_log_max(crate::bundle::compressed::zstd_window_log_max(declared)).map_err(zstd_err)?;
            let mut out = Vec::new();
            decoder.take(declared.saturating_add(1)).read_to_end(&mut out).map_err(zstd_err)?;
            out
        }
    };
    if out.len() as u64 != declared {
        return Err(ArchiveError::SizeMismatch { ordinal, declared, actual: out.len() as u64 });
    }
    Ok(out)
}

/// Whether the stored bytes of one code object (as for [`decode_stored`])
/// decode to exactly `expected`: decoded in 64 KiB pieces, each compared
/// with `expected` as it comes, so nothing the size of the code object is
/// allocated; decoding stops at the first difference, or one byte past
/// `expected`'s length. An error where [`decode_stored`] would fail to
/// decode.
pub fn stored_equals(stored: &[u8], scheme: Scheme, ordinal: u32, expected: &[u8]) -> Result<bool, ArchiveError> {
    match scheme {
        Scheme::None => Ok(stored == expected),
        Scheme::ZstdPerKernel => {
            let declared = expected.len() as u64;
            let zstd_err = |e: std::io::Error| ArchiveError::Decompress { ordinal, message: e.to_string() };
            let mut decoder = zstd::stream::read::Decoder::with_buffer(stored).map_err(zstd_err)?;
            decoder.window_log_max(crate::bundle::compressed::zstd_window_log_max(declared)).map_err(zstd_err)?;
            let mut buffer = vec![0u8; 64 << 10];
            let mut at = 0usize;
            loop {
                let n = decoder.read(&mut buffer).map_err(zstd_err)?;
                if n == 0 {
                    return Ok(at == expected.len());
                }
                let Some(piece) = buffer.get(..n) else { return Ok(false) };
                match expected.get(at..at.saturating_add(n)) {
                    Some(want) if want == piece => at += n,
                    _ => return Ok(false),
                }
            }
        }
    }
}

fn read_toc<'a>(toc: &Value<'a>) -> Result<Vec<Binary<'a>>, ArchiveError> {
    let map = toc.as_map().ok_or_else(|| shape(format!("toc is a {}, not a map", toc.type_name())))?;
    let mut binaries = Vec::with_capacity(map.len());
    for (key, targets) in map {
        let key = str_field(key, "a toc key")?;
        let targets =
            targets.as_map().ok_or_else(|| shape(format!("toc[{key:?}] is a {}, not a map", targets.type_name())))?;
        let mut entries = Vec::with_capacity(targets.len());
        for (target, entry) in targets {
            let target = str_field(target, &format!("a target of toc[{key:?}]"))?;
            let what = |field: &str| format!("toc[{key:?}][{target:?}].{field}");
            let get = |field: &str| entry.get(field).ok_or_else(|| shape(format!("{} is missing", what(field))));
            let ordinal = uint_field(get("ordinal")?, &what("ordinal"))?;
            entries.push(Entry {
                target,
                kind: str_field(get("type")?, &what("type"))?,
                ordinal: u32::try_from(ordinal)
                    .map_err(|_| shape(format!("{} {ordinal} is over 2^32", what("ordinal"))))?,
                original_size: uint_field(get("original_size")?, &what("original_size"))?,
                source_id: entry.get("metadata").and_then(|m| m.get("target")).and_then(Value::as_str),
            });
        }
        binaries.push(Binary { key, entries });
    }
    Ok(binaries)
}
