//! Writing `.kpack` archives in the layout of `docs/formats/kpack.md`
//! ("The archive"): the 16-byte `KPAK` header padded to 64 bytes, a
//! `zstd-per-kernel` blob (kernel count, then one length-prefixed zstd
//! frame per code object, back to back) and the msgpack table of contents
//! up to the end of the file, its keys in the order AMD's writer uses.
//!
//! Compression is separate ([`compress`]), so that a caller can compress
//! code objects in parallel and can carry frames of an existing archive
//! over unchanged (prune). Our frames carry their content size and a
//! content checksum (AMD's carry the size only); the runtime reads both.

use super::archive::{MAX_BLOB, MAX_KERNELS, VERSION};
use crate::msgpack::encode;
use std::borrow::Cow;
use std::collections::HashSet;

/// The zstd level used unless told otherwise: 3, AMD's splitters' default
/// (`--compression-level 3`, python-zstandard's default level).
pub const DEFAULT_LEVEL: i32 = 3;

/// Where the blob starts (`BLOB_ALIGNMENT`).
const BLOB_OFFSET: u64 = 64;

/// One code object to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEntry<'a> {
    /// The binary key, `<kernel_name>#<co_index>`.
    pub key: String,
    /// The target ID it is filed under (one of the archive's `gfx_arches`).
    pub target: String,
    /// Its size once decompressed.
    pub original_size: u64,
    /// One complete zstd frame that decodes to exactly `original_size`
    /// bytes ([`compress`], or a frame of another archive).
    pub frame: Cow<'a, [u8]>,
    /// The bundle entry ID it came from (`metadata.target`), if known.
    pub source_id: Option<String>,
}

/// Why an archive cannot be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// zstd failed.
    #[error("zstd: {0}")]
    Compress(String),
    /// Two entries share a key and a target.
    #[error("two code objects for {key:?} under target {target}")]
    Duplicate {
        /// The key.
        key: String,
        /// The target.
        target: String,
    },
    /// An entry's target is not one the archive serves.
    #[error("{key:?} is filed under {target}, which the archive does not serve ({arches})")]
    Target {
        /// The key.
        key: String,
        /// The target.
        target: String,
        /// The archive's targets, comma-separated.
        arches: String,
    },
    /// Over the runtime's limits (frame over 4 GiB, blob over 4 GiB,
    /// more than 2^20 code objects).
    #[error("over the runtime's limits: {0}")]
    Limit(String),
}

/// One zstd frame holding `code`, with its content size and a content
/// checksum, at `level`.
pub fn compress(code: &[u8], level: i32) -> Result<Vec<u8>, WriteError> {
    compress_with(&mut compressor(level)?, code)
}

/// A compressor writing the frames of [`compress`] at `level`, to reuse
/// for many code objects (one per thread).
pub fn compressor(level: i32) -> Result<zstd::bulk::Compressor<'static>, WriteError> {
    let err = |e: std::io::Error| WriteError::Compress(e.to_string());
    let mut c = zstd::bulk::Compressor::new(level).map_err(err)?;
    c.include_checksum(true).map_err(err)?;
    c.include_contentsize(true).map_err(err)?;
    Ok(c)
}

/// [`compress`] with a compressor from [`compressor`].
pub fn compress_with(c: &mut zstd::bulk::Compressor<'_>, code: &[u8]) -> Result<Vec<u8>, WriteError> {
    c.compress(code).map_err(|e| WriteError::Compress(e.to_string()))
}

/// The archive file serving `gfx_arches` (`gfx_arch_family` is the first),
/// named `group_name` in its TOC, holding `entries` in order (their
/// ordinals). Keys appear in the TOC in the order of their first entry.
///
/// ```
/// use offload_format::kpack::{Archive, write};
/// use std::borrow::Cow;
///
/// let code = b"\x7fELF not really a code object".to_vec();
/// let entry = write::NewEntry {
///     key: "lib/libdemo.so#0".into(),
///     target: "gfx942".into(),
///     original_size: code.len() as u64,
///     frame: Cow::Owned(write::compress(&code, write::DEFAULT_LEVEL).unwrap()),
///     source_id: None,
/// };
/// let bytes = write::archive("demo", &["gfx942"], &[entry]).unwrap();
/// let archive = Archive::parse(&bytes).unwrap();
/// let found = archive.find("lib/libdemo.so#0", "gfx942").unwrap();
/// assert_eq!(archive.decompress(found, 1 << 20).unwrap(), code);
/// ```
pub fn archive(group_name: &str, gfx_arches: &[&str], entries: &[NewEntry<'_>]) -> Result<Vec<u8>, WriteError> {
    if entries.len() as u64 > MAX_KERNELS {
        return Err(WriteError::Limit(format!("{} code objects", entries.len())));
    }
    let mut seen = HashSet::new();
    for e in entries {
        if !gfx_arches.contains(&e.target.as_str()) {
            return Err(WriteError::Target {
                key: e.key.clone(),
                target: e.target.clone(),
                arches: gfx_arches.join(", "),
            });
        }
        if !seen.insert((e.key.as_str(), e.target.as_str())) {
            return Err(WriteError::Duplicate { key: e.key.clone(), target: e.target.clone() });
        }
    }
    let blob_len: u64 = 4 + entries.iter().map(|e| 4 + e.frame.len() as u64).sum::<u64>();
    if blob_len > MAX_BLOB {
        return Err(WriteError::Limit(format!("a blob of {blob_len} bytes")));
    }
    let mut out = Vec::with_capacity((BLOB_OFFSET + blob_len) as usize + 256 * entries.len().max(1));
    out.extend_from_slice(super::archive::MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.resize(BLOB_OFFSET as usize, 0);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        // blob_len <= 4 GiB, so every frame length fits in a u32.
        out.extend_from_slice(&(e.frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&e.frame);
    }
    let toc_offset = out.len() as u64;
    out[8..16].copy_from_slice(&toc_offset.to_le_bytes());

    // Keys in first-seen order, each with its entries' indices.
    let mut keys: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        match keys.iter_mut().find(|(k, _)| *k == e.key) {
            Some((_, list)) => list.push(i),
            None => keys.push((&e.key, vec![i])),
        }
    }
    encode::map(&mut out, 8);
    encode::str(&mut out, "format_version");
    encode::uint(&mut out, 1);
    encode::str(&mut out, "group_name");
    encode::str(&mut out, group_name);
    encode::str(&mut out, "gfx_arch_family");
    encode::str(&mut out, gfx_arches.first().copied().unwrap_or(""));
    encode::str(&mut out, "gfx_arches");
    encode::array(&mut out, gfx_arches.len());
    for a in gfx_arches {
        encode::str(&mut out, a);
    }
    encode::str(&mut out, "toc");
    encode::map(&mut out, keys.len());
    for (key, list) in &keys {
        encode::str(&mut out, key);
        encode::map(&mut out, list.len());
        for &i in list {
            let e = &entries[i];
            encode::str(&mut out, &e.target);
            encode::map(&mut out, if e.source_id.is_some() { 4 } else { 3 });
            encode::str(&mut out, "type");
            encode::str(&mut out, "hsaco");
            encode::str(&mut out, "ordinal");
            encode::uint(&mut out, i as u64);
            encode::str(&mut out, "original_size");
            encode::uint(&mut out, e.original_size);
            if let Some(id) = &e.source_id {
                encode::str(&mut out, "metadata");
                encode::map(&mut out, 1);
                encode::str(&mut out, "target");
                encode::str(&mut out, id);
            }
        }
    }
    encode::str(&mut out, "compression_scheme");
    encode::str(&mut out, "zstd-per-kernel");
    encode::str(&mut out, "zstd_offset");
    encode::uint(&mut out, BLOB_OFFSET);
    encode::str(&mut out, "zstd_size");
    encode::uint(&mut out, blob_len);
    Ok(out)
}
