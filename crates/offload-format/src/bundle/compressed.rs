//! Compressed bundles ("CCOB"): a whole bundle (binary or text) compressed
//! with zstd or zlib behind a small header.
//!
//! | field             | v1     | v2     | v3     |
//! |-------------------|--------|--------|--------|
//! | magic `CCOB`      | 0..4   | 0..4   | 0..4   |
//! | version u16       | 4      | 4      | 4      |
//! | method u16        | 6      | 6      | 6      |
//! | total size        | –      | u32 @8 | u64 @8 |
//! | uncompressed size | u32 @8 | u32 @12| u64 @16|
//! | hash u64          | @12    | @16    | @24    |
//! | data from         | 20     | 24     | 32     |
//!
//! Method 0 is zlib, 1 is zstd. The hash is the first 8 bytes of the MD5
//! digest of the uncompressed bundle, read as a little-endian u64. The total
//! size covers header and data, so blobs placed back to back (as linkers do
//! with `.hip_fatbin` sections) are walked by that field, never by searching
//! for the magic, which can occur inside compressed data.

use crate::bytes;
use md5::{Digest, Md5};
use std::io::Read;

/// The magic that starts a compressed bundle.
pub const MAGIC: &[u8; 4] = b"CCOB";

/// The shortest input LLVM 19 treats as possibly compressed (a v1 header).
const V1_HEADER: usize = 20;

/// A compression method.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// zlib (RFC 1950), method code 0.
    Zlib,
    /// zstd, method code 1; what LLVM uses by default.
    Zstd,
}

impl Method {
    /// The method code stored in the header.
    pub fn code(self) -> u16 {
        match self {
            Method::Zlib => 0,
            Method::Zstd => 1,
        }
    }
    /// The method for a header's code; `None` for an unknown one.
    pub fn from_code(code: u16) -> Option<Method> {
        match code {
            0 => Some(Method::Zlib),
            1 => Some(Method::Zstd),
            _ => None,
        }
    }
    /// `zlib` or `zstd`.
    pub fn name(self) -> &'static str {
        match self {
            Method::Zlib => "zlib",
            Method::Zstd => "zstd",
        }
    }
}

/// Why a compressed bundle cannot be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompressedError {
    /// The input is shorter than its version's header. The message is
    /// LLVM 19's, which the bundler reproduces.
    #[error("Compressed bundle header size too small: {len} bytes, version {version} needs {needed}")]
    HeaderTruncated {
        /// Bytes available.
        len: usize,
        /// The version read (0 when even that is missing).
        version: u16,
        /// Bytes that version's header needs.
        needed: usize,
    },
    /// A version other than 1, 2 or 3.
    #[error("unknown compressed bundle version {0} (versions 1, 2 and 3 are known)")]
    UnknownVersion(u16),
    /// A method code other than 0 (zlib) or 1 (zstd).
    #[error("Unknown compressing method")]
    UnknownMethod(u16),
    /// The header's total size runs past the end of the input.
    #[error("compressed bundle claims a total size of {total} bytes, but {available} bytes are present")]
    TotalSizeBeyondInput {
        /// The total size declared, in bytes.
        total: u64,
        /// Bytes available from the blob's start.
        available: u64,
    },
    /// The header's total size does not even cover the header.
    #[error("compressed bundle claims a total size of {total} bytes, smaller than its {header}-byte header")]
    TotalSizeTooSmall {
        /// The total size declared, in bytes.
        total: u64,
        /// The header's length in bytes.
        header: usize,
    },
    /// The compressed data does not decode (the decoder's message).
    #[error("Could not decompress embedded file contents: {0}")]
    Decompress(String),
    /// The data decodes to another size than the header declares.
    #[error("decompressed size {actual} does not match the size in the header ({declared} bytes)")]
    SizeMismatch {
        /// The uncompressed size in the header.
        declared: u64,
        /// The bytes decoded (decoding stops just past the declared size).
        actual: u64,
    },
    /// The decompressed data's truncated MD5 differs from the header's.
    #[error(
        "compressed bundle is corrupt: stored hash {stored:#018x}, but the decompressed data hashes to {computed:#018x}"
    )]
    HashMismatch {
        /// The hash in the header.
        stored: u64,
        /// The hash of the decompressed data.
        computed: u64,
    },
    /// The compressor failed (its message).
    #[error("Could not compress: {0}")]
    Compress(String),
    /// Non-zero bytes after the one blob [`read_single_blob`] expects
    /// (how many bytes follow).
    #[error("{0} bytes follow the compressed bundle; one bundle per file is read here (`offload list` shows them all)")]
    TrailingData(usize),
}

/// A parsed header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Format version: 1, 2 or 3.
    pub version: u16,
    /// How the data is compressed.
    pub method: Method,
    /// Header plus compressed data (versions 2 and 3).
    pub total_size: Option<u64>,
    /// Size of the bundle once decompressed, in bytes (as declared; checked
    /// when decompressing).
    pub uncompressed_size: u64,
    /// The truncated MD5 of the uncompressed bundle ([`truncated_md5`]).
    pub hash: u64,
    /// Length of the header in bytes (20, 24 or 32 by version).
    pub header_len: usize,
}

/// One compressed bundle inside a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blob<'a> {
    /// The parsed header.
    pub header: Header,
    /// The compressed data.
    pub data: &'a [u8],
    /// Bytes of the buffer this blob occupies, header included.
    pub len: usize,
}

// Header fields, read after `parse_header` has checked the header's length.
fn u16_at(d: &[u8], at: usize) -> u16 {
    bytes::u16_le(d, at).unwrap_or(0)
}
fn u32_at(d: &[u8], at: usize) -> u64 {
    bytes::u32_le(d, at).map_or(0, u64::from)
}
fn u64_at(d: &[u8], at: usize) -> u64 {
    bytes::u64_le(d, at).unwrap_or(0)
}

/// Whether LLVM 19 would treat `data` as a compressed bundle: at least a v1
/// header's worth of bytes starting with the magic.
pub fn is_compressed(data: &[u8]) -> bool {
    data.len() >= V1_HEADER && data.starts_with(MAGIC)
}

/// Parses the header at the start of `data` (which must start with the
/// magic).
pub fn parse_header(data: &[u8]) -> Result<Header, CompressedError> {
    let short = |version, needed| CompressedError::HeaderTruncated { len: data.len(), version, needed };
    if data.len() < 8 {
        return Err(short(0, V1_HEADER));
    }
    let version = u16_at(data, 4);
    let method_code = u16_at(data, 6);
    let (header_len, total_size, uncompressed_size, hash) = match version {
        1 => {
            if data.len() < 20 {
                return Err(short(1, 20));
            }
            (20, None, u32_at(data, 8), u64_at(data, 12))
        }
        2 => {
            if data.len() < 24 {
                return Err(short(2, 24));
            }
            (24, Some(u32_at(data, 8)), u32_at(data, 12), u64_at(data, 16))
        }
        3 => {
            if data.len() < 32 {
                return Err(short(3, 32));
            }
            (32, Some(u64_at(data, 8)), u64_at(data, 16), u64_at(data, 24))
        }
        v => return Err(CompressedError::UnknownVersion(v)),
    };
    let method = Method::from_code(method_code).ok_or(CompressedError::UnknownMethod(method_code))?;
    Ok(Header { version, method, total_size, uncompressed_size, hash, header_len })
}

/// Reads the compressed bundle at the start of `data`. Versions 2 and 3 end
/// where their total size says; version 1 has no size and takes the rest.
pub fn read_blob(data: &[u8]) -> Result<Blob<'_>, CompressedError> {
    let header = parse_header(data)?;
    let len = match header.total_size {
        None => data.len(),
        Some(total) => {
            if total < header.header_len as u64 {
                return Err(CompressedError::TotalSizeTooSmall { total, header: header.header_len });
            }
            if total > data.len() as u64 {
                return Err(CompressedError::TotalSizeBeyondInput { total, available: data.len() as u64 });
            }
            total as usize
        }
    };
    Ok(Blob { header, data: &data[header.header_len..len], len })
}

/// Reads a buffer that holds one compressed bundle, optionally followed by
/// zero padding; other trailing bytes are an error (LLVM 19 would hand them
/// to the decompressor).
pub fn read_single_blob(data: &[u8]) -> Result<Blob<'_>, CompressedError> {
    let blob = read_blob(data)?;
    let rest = &data[blob.len..];
    if rest.iter().any(|&b| b != 0) {
        return Err(CompressedError::TrailingData(rest.len()));
    }
    Ok(blob)
}

/// Walks blobs placed back to back, by their size fields. Zero bytes between
/// blobs (section alignment padding) are skipped. Yields the offset of each
/// blob in `data` and the blob, or the error that stopped the walk.
pub fn blobs(data: &[u8]) -> impl Iterator<Item = Result<(usize, Blob<'_>), CompressedError>> {
    let mut pos = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed {
            return None;
        }
        while pos < data.len() && data[pos] == 0 {
            pos += 1;
        }
        if pos >= data.len() || !data[pos..].starts_with(MAGIC) {
            return None;
        }
        match read_blob(&data[pos..]) {
            Ok(blob) => {
                let at = pos;
                pos += blob.len;
                Some(Ok((at, blob)))
            }
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    })
}

/// The hash stored in the header: MD5's first 8 bytes as a little-endian u64.
pub fn truncated_md5(data: &[u8]) -> u64 {
    let mut h = Hasher::default();
    h.update(data);
    h.finish()
}

/// Decompresses a blob, checking its declared size and its hash.
///
/// ```
/// use offload_format::bundle::compressed::{CompressOptions, compress, decompress, read_blob};
///
/// let bundle = b"__CLANG_OFFLOAD_BUNDLE__ and the rest of a bundle".repeat(10);
/// let ccob = compress(&bundle, &CompressOptions::default())?;
/// assert!(ccob.bytes.starts_with(b"CCOB") && ccob.bytes.len() < bundle.len());
/// let blob = read_blob(&ccob.bytes)?;
/// assert_eq!(blob.header.uncompressed_size, bundle.len() as u64);
/// assert_eq!(decompress(&blob)?, bundle);
///
/// // A flipped byte in the data is caught (by zstd's checks or the hash).
/// let mut bad = ccob.bytes.clone();
/// *bad.last_mut().unwrap() ^= 1;
/// assert!(decompress(&read_blob(&bad)?).is_err());
/// # Ok::<(), offload_format::bundle::compressed::CompressedError>(())
/// ```
pub fn decompress(blob: &Blob) -> Result<Vec<u8>, CompressedError> {
    let out = decompress_unverified(blob)?;
    let computed = truncated_md5(&out);
    if computed != blob.header.hash {
        return Err(CompressedError::HashMismatch { stored: blob.header.hash, computed });
    }
    Ok(out)
}

/// Decompresses a blob and checks its declared size, but not its hash (the
/// caller must). Memory grows with the data actually produced, never with
/// the declared size alone, and decompression stops as soon as the output
/// exceeds it.
pub fn decompress_unverified(blob: &Blob) -> Result<Vec<u8>, CompressedError> {
    let mut decoder = BlobDecoder::new(blob)?;
    let (mut out, mut buf) = (Vec::new(), Vec::new());
    while decoder.next_chunk(&mut buf, 4 << 20)? {
        // Exact growth: large blocks are moved by the allocator without
        // copying, and the output never takes more than its real size. A
        // bomb that inflates past the memory there is fails cleanly.
        out.try_reserve_exact(buf.len()).map_err(|e| CompressedError::Decompress(e.to_string()))?;
        out.extend_from_slice(&buf);
    }
    Ok(out)
}

/// The largest zstd window (as a power of two) a frame may ask for when it
/// is declared to decompress to `declared` bytes. zstd allocates the window
/// a frame header asks for (up to this limit) before it decodes anything,
/// so a 20-byte hostile frame could otherwise claim 2 GiB. A genuine frame
/// never needs a window larger than its content (zstd shrinks the window
/// to the source size when it is known, as it is for every bundle), so the
/// limit is the declared size rounded up to a power of two, but never below
/// zstd's own default limit of 2^27 (for frames written by streaming
/// compressors that did not know the size) nor above the format's 2^31.
pub fn zstd_window_log_max(declared: u64) -> u32 {
    let needed = u64::BITS - declared.saturating_sub(1).leading_zeros();
    needed.clamp(27, 31)
}

fn decoder_reader<'a>(blob: &Blob<'a>) -> Result<Box<dyn Read + Send + 'a>, CompressedError> {
    Ok(match blob.header.method {
        Method::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(blob.data)
                .map_err(|e| CompressedError::Decompress(e.to_string()))?;
            d.window_log_max(zstd_window_log_max(blob.header.uncompressed_size))
                .map_err(|e| CompressedError::Decompress(e.to_string()))?;
            Box::new(d)
        }
        Method::Zlib => Box::new(flate2::read::ZlibDecoder::new(blob.data)),
    })
}

/// Decompresses a blob piece by piece, so that a large bundle can be
/// written out (or skipped) without ever being whole in memory. It never
/// yields more than the header declares, and reports a short stream.
pub struct BlobDecoder<'a> {
    reader: Box<dyn Read + Send + 'a>,
    declared: u64,
    produced: u64,
}

impl<'a> BlobDecoder<'a> {
    /// A decoder at the start of `blob`'s data.
    pub fn new(blob: &Blob<'a>) -> Result<Self, CompressedError> {
        Ok(BlobDecoder { reader: decoder_reader(blob)?, declared: blob.header.uncompressed_size, produced: 0 })
    }

    /// Replaces the contents of `buf` with up to `max` further bytes.
    /// Returns `Ok(false)` once every declared byte has been produced.
    pub fn next_chunk(&mut self, buf: &mut Vec<u8>, max: usize) -> Result<bool, CompressedError> {
        buf.clear();
        let left = self.declared - self.produced;
        // One byte more than declared is read to detect a lying size.
        let want = (max as u64).min(left.saturating_add(1)) as usize;
        buf.resize(want, 0);
        let mut filled = 0;
        while filled < want {
            match self.reader.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(CompressedError::Decompress(e.to_string())),
            }
        }
        buf.truncate(filled);
        self.produced += filled as u64;
        if self.produced > self.declared || (filled < want && self.produced != self.declared) {
            return Err(CompressedError::SizeMismatch { declared: self.declared, actual: self.produced });
        }
        Ok(filled > 0)
    }
}

/// The truncated MD5 of data seen piece by piece.
#[derive(Clone, Default)]
pub struct Hasher(Md5);

impl Hasher {
    /// Adds the next piece of the data.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }
    /// The hash of everything added, as [`truncated_md5`] gives it.
    pub fn finish(self) -> u64 {
        let digest = self.0.finalize();
        // The digest's first 8 bytes (it always has 16), not file data.
        let mut low = [0u8; 8];
        low.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(low)
    }
}

/// How to compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressOptions {
    /// zstd or zlib.
    pub method: Method,
    /// zstd: 1..=22 (higher values are clamped by zstd); zlib: 0..=9.
    pub level: i32,
    /// 2 or 3; version 2 is raised to 3 when a size does not fit in 32 bits.
    pub version: u16,
    /// zstd worker threads; 0 compresses on the calling thread, which is what
    /// gives LLVM 19's exact bytes.
    pub threads: u32,
}

impl Default for CompressOptions {
    /// LLVM 19's choice: zstd level 3, version 2, single-threaded.
    fn default() -> Self {
        CompressOptions { method: Method::Zstd, level: 3, version: 2, threads: 0 }
    }
}

/// The raw compressed data, without header. zstd runs with long-distance
/// matching on and the content size in the frame, as LLVM configures it.
pub fn compress_data(input: &[u8], opts: &CompressOptions) -> Result<Vec<u8>, CompressedError> {
    let err = |e: std::io::Error| CompressedError::Compress(e.to_string());
    match opts.method {
        Method::Zstd => {
            use zstd::zstd_safe::CParameter;
            let mut c = zstd::bulk::Compressor::new(opts.level).map_err(err)?;
            c.set_parameter(CParameter::EnableLongDistanceMatching(true)).map_err(err)?;
            if opts.threads > 0 {
                c.set_parameter(CParameter::NbWorkers(opts.threads)).map_err(err)?;
            }
            c.compress(input).map_err(err)
        }
        Method::Zlib => {
            use std::io::Write;
            let level = flate2::Compression::new(opts.level.clamp(0, 9) as u32);
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
            e.write_all(input).map_err(err)?;
            e.finish().map_err(err)
        }
    }
}

/// The version that will actually be written for an input of this size.
pub fn effective_version(requested: u16, uncompressed: u64, compressed: u64) -> u16 {
    let total_v2 = compressed.saturating_add(24);
    if requested >= 3 || uncompressed > u64::from(u32::MAX) || total_v2 > u64::from(u32::MAX) { 3 } else { 2 }
}

/// Builds the header for already compressed data.
pub fn header_bytes(method: Method, version: u16, uncompressed: &[u8], compressed_len: usize) -> Vec<u8> {
    header(method, version, uncompressed.len() as u64, truncated_md5(uncompressed), compressed_len)
}

fn header(method: Method, version: u16, uncompressed_len: u64, hash: u64, compressed_len: usize) -> Vec<u8> {
    let mut h = Vec::with_capacity(32);
    h.extend_from_slice(MAGIC);
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&method.code().to_le_bytes());
    if version >= 3 {
        h.extend_from_slice(&(32 + compressed_len as u64).to_le_bytes());
        h.extend_from_slice(&uncompressed_len.to_le_bytes());
    } else {
        h.extend_from_slice(&(24 + compressed_len as u32).to_le_bytes());
        h.extend_from_slice(&(uncompressed_len as u32).to_le_bytes());
    }
    h.extend_from_slice(&hash.to_le_bytes());
    h
}

/// What compression produced, for `-verbose`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compressed {
    /// The whole compressed bundle, header included.
    pub bytes: Vec<u8>,
    /// The header version written (see [`effective_version`]).
    pub version: u16,
    /// The truncated MD5 stored in the header.
    pub hash: u64,
    /// Bytes of compressed data after the header.
    pub compressed_len: usize,
}

/// Compresses a whole bundle into a CCOB blob. The hash is computed on a
/// second thread while the data compresses (MD5 takes about as long as
/// zstd's level 3).
pub fn compress(input: &[u8], opts: &CompressOptions) -> Result<Compressed, CompressedError> {
    let (data, hash) = std::thread::scope(|scope| {
        let hasher = scope.spawn(|| truncated_md5(input));
        let data = compress_data(input, opts);
        (data, hasher.join().unwrap_or_else(|_| truncated_md5(input)))
    });
    assemble(input, data?, hash, opts)
}

/// [`compress`] for a caller that has the truncated MD5 of `input` already
/// (`prune` computes it together with the hash of the bundle it read).
pub fn compress_hashed(input: &[u8], hash: u64, opts: &CompressOptions) -> Result<Compressed, CompressedError> {
    assemble(input, compress_data(input, opts)?, hash, opts)
}

fn assemble(input: &[u8], data: Vec<u8>, hash: u64, opts: &CompressOptions) -> Result<Compressed, CompressedError> {
    let version = effective_version(opts.version, input.len() as u64, data.len() as u64);
    let mut bytes = header(opts.method, version, input.len() as u64, hash, data.len());
    bytes.extend_from_slice(&data);
    Ok(Compressed { bytes, version, hash, compressed_len: data.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/formats/bundle.md §6.7 (a): the 86-byte single-entry bundle LLVM 19
    /// compresses to a 101-byte CCOB with hash 01564c68ac2d85f0.
    fn spec_bundle() -> Vec<u8> {
        let entries: [(&[u8], &[u8]); 1] = [(b"hip-amdgcn-amd-amdhsa--gfx906", b"A")];
        super::super::binary::write(&entries, std::num::NonZeroU64::new(1).unwrap()).to_vec()
    }

    #[test]
    fn header_matches_llvm19() {
        let bundle = spec_bundle();
        assert_eq!(bundle.len(), 86);
        let c = compress(&bundle, &CompressOptions::default()).unwrap();
        assert_eq!(
            &c.bytes[..24],
            &[
                0x43, 0x43, 0x4f, 0x42, 2, 0, 1, 0, 0x65, 0, 0, 0, 0x56, 0, 0, 0, 0x01, 0x56, 0x4c, 0x68, 0xac, 0x2d,
                0x85, 0xf0
            ]
        );
        assert_eq!(c.bytes.len(), 101);
        assert_eq!(&c.bytes[24..30], &[0x28, 0xb5, 0x2f, 0xfd, 0x20, 0x56]);
    }

    #[test]
    fn round_trips_every_version_and_method() {
        let bundle: Vec<u8> = (0..5000u32).map(|i| (i % 7) as u8).collect();
        for method in [Method::Zstd, Method::Zlib] {
            for version in [2, 3] {
                let c = compress(&bundle, &CompressOptions { method, version, level: 5, threads: 0 }).unwrap();
                let blob = read_blob(&c.bytes).unwrap();
                assert_eq!(blob.header.version, version);
                assert_eq!(blob.len, c.bytes.len());
                assert_eq!(decompress(&blob).unwrap(), bundle);
            }
        }
    }

    #[test]
    fn version_1_is_read() {
        let bundle = spec_bundle();
        let data = compress_data(&bundle, &CompressOptions::default()).unwrap();
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&1u16.to_le_bytes());
        v1.extend_from_slice(&1u16.to_le_bytes());
        v1.extend_from_slice(&(bundle.len() as u32).to_le_bytes());
        v1.extend_from_slice(&truncated_md5(&bundle).to_le_bytes());
        v1.extend_from_slice(&data);
        assert_eq!(decompress(&read_blob(&v1).unwrap()).unwrap(), bundle);
    }

    #[test]
    fn damage_is_detected() {
        let bundle: Vec<u8> = (0..3000u32).map(|i| (i * 31 % 251) as u8).collect();
        let good = compress(&bundle, &CompressOptions::default()).unwrap().bytes;
        // Wrong hash.
        let mut bad = good.clone();
        bad[16] ^= 1;
        assert!(matches!(decompress(&read_blob(&bad).unwrap()), Err(CompressedError::HashMismatch { .. })));
        // Lying uncompressed size, both ways.
        for size in [1u32, 2999, 3001, u32::MAX] {
            let mut bad = good.clone();
            bad[12..16].copy_from_slice(&size.to_le_bytes());
            assert!(matches!(decompress(&read_blob(&bad).unwrap()), Err(CompressedError::SizeMismatch { .. })));
        }
        // Lying total size.
        let mut bad = good.clone();
        bad[8..12].copy_from_slice(&(good.len() as u32 + 1).to_le_bytes());
        assert!(matches!(read_blob(&bad), Err(CompressedError::TotalSizeBeyondInput { .. })));
        // Unknown method and version.
        let mut bad = good.clone();
        bad[6] = 7;
        assert_eq!(read_blob(&bad).unwrap_err(), CompressedError::UnknownMethod(7));
        let mut bad = good.clone();
        bad[4] = 4;
        assert_eq!(read_blob(&bad).unwrap_err(), CompressedError::UnknownVersion(4));
        // Every truncation fails cleanly.
        for cut in 0..good.len() {
            let r = read_blob(&good[..cut]).and_then(|b| decompress(&b));
            assert!(r.is_err(), "truncation at {cut} accepted");
        }
        // Bit flips never panic.
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            let _ = read_blob(&bad).and_then(|b| decompress(&b));
        }
    }

    /// A zstd frame header asking for a 2 GiB window and giving no content
    /// size, followed by one empty raw block: zstd would allocate the window
    /// before decoding. The window is now bounded by the declared size.
    #[test]
    fn huge_zstd_windows_are_refused_before_allocation() {
        let frame = |window_byte: u8| {
            let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, window_byte];
            f.extend_from_slice(&[0x01, 0x00, 0x00]); // last block, raw, 0 bytes
            f
        };
        fn blob_with(data: &[u8], declared: u64) -> Blob<'_> {
            Blob {
                header: Header {
                    version: 3,
                    method: Method::Zstd,
                    total_size: Some(32 + data.len() as u64),
                    uncompressed_size: declared,
                    hash: truncated_md5(b""),
                    header_len: 32,
                },
                data,
                len: 32 + data.len(),
            }
        }
        // Window descriptor: exponent 21 gives 2^(10+21) = 2 GiB.
        let big = frame(21 << 3);
        let e = decompress(&blob_with(&big, 0)).unwrap_err();
        assert!(matches!(&e, CompressedError::Decompress(m) if m.contains("memory")), "{e}");
        // The same frame with a 1 KiB window decodes.
        assert_eq!(decompress(&blob_with(&frame(0), 0)).unwrap(), b"");
        assert_eq!(zstd_window_log_max(0), 27);
        assert_eq!(zstd_window_log_max(1 << 27), 27);
        assert_eq!(zstd_window_log_max((1 << 29) + 1), 30);
        assert_eq!(zstd_window_log_max(u64::MAX), 31);
    }

    #[test]
    fn piecewise_decoding_gives_the_same_bytes_and_catches_lying_sizes() {
        let bundle: Vec<u8> = (0..100_000u32).map(|i| (i * 13 % 61) as u8).collect();
        for method in [Method::Zstd, Method::Zlib] {
            let good = compress(&bundle, &CompressOptions { method, ..Default::default() }).unwrap().bytes;
            let mut d = BlobDecoder::new(&read_blob(&good).unwrap()).unwrap();
            let (mut out, mut buf, mut h) = (Vec::new(), Vec::new(), Hasher::default());
            while d.next_chunk(&mut buf, 4096).unwrap() {
                h.update(&buf);
                out.extend_from_slice(&buf);
            }
            assert_eq!(out, bundle);
            assert_eq!(h.finish(), truncated_md5(&bundle));
            for size in [99_999u32, 100_001, 0] {
                let mut bad = good.clone();
                bad[12..16].copy_from_slice(&size.to_le_bytes());
                let mut d = BlobDecoder::new(&read_blob(&bad).unwrap()).unwrap();
                let r = (|| {
                    while d.next_chunk(&mut buf, 4096)? {}
                    Ok::<(), CompressedError>(())
                })();
                assert!(matches!(r, Err(CompressedError::SizeMismatch { .. })), "size {size}: {r:?}");
            }
        }
    }

    #[test]
    fn back_to_back_blobs_are_walked_by_size() {
        let a = compress(b"first bundle CCOB CCOB", &CompressOptions::default()).unwrap().bytes;
        let b = compress(&[b'C'; 1000], &CompressOptions { method: Method::Zlib, ..Default::default() }).unwrap().bytes;
        let mut all = a.clone();
        all.extend_from_slice(&[0; 5]);
        all.extend_from_slice(&b);
        let found: Vec<_> = blobs(&all).map(|r| r.unwrap()).collect();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, 0);
        assert_eq!(found[1].0, a.len() + 5);
        assert_eq!(decompress(&found[1].1).unwrap(), vec![b'C'; 1000]);
    }

    #[test]
    fn large_sizes_switch_to_version_3() {
        assert_eq!(effective_version(2, 1 << 20, 1 << 10), 2);
        assert_eq!(effective_version(2, 1 << 32, 1 << 10), 3);
        assert_eq!(effective_version(2, 10, u64::from(u32::MAX)), 3);
        assert_eq!(effective_version(3, 10, 10), 3);
    }
}
