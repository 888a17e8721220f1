//! The header of one zstd frame (RFC 8878 §3.1.1), read without decoding:
//! the declared content size and whether a content checksum follows the
//! data. kpack's `zstd-per-kernel` blobs hold one frame per code object
//! (`docs/formats/kpack.md`, "Blob schemes").

/// The magic number that starts a zstd frame (little-endian on disk).
pub const ZSTD_MAGIC: u32 = 0xFD2F_B528;

/// What a zstd frame header declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// `Frame_Content_Size`, when the header carries it.
    pub content_size: Option<u64>,
    /// Whether a 4-byte content checksum (XXH64's low half) ends the frame.
    pub checksum: bool,
    /// A dictionary ID, when the frame needs one (kpack never writes one).
    pub dictionary: Option<u32>,
    /// Length of the header in bytes, magic included.
    pub len: usize,
}

/// Why bytes are not a zstd frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameHeaderError {
    /// Fewer bytes than the header needs.
    #[error("the zstd frame header is cut short ({have} of {needed} bytes)")]
    Truncated {
        /// Bytes present.
        have: usize,
        /// Bytes the header needs.
        needed: usize,
    },
    /// No zstd magic (the first four bytes, little-endian).
    #[error("not a zstd frame (magic {0:#010x})")]
    Magic(u32),
    /// The reserved bit of the frame header descriptor is set.
    #[error("zstd frame header descriptor {0:#04x} has its reserved bit set")]
    Reserved(u8),
}

/// Reads the frame header at the start of `data`.
///
/// ```
/// use offload_format::kpack::frame::read_header;
///
/// let frame = zstd::bulk::compress(b"hello hello hello", 3).unwrap();
/// let header = read_header(&frame).unwrap();
/// assert_eq!(header.content_size, Some(17));
/// assert!(read_header(b"KPAK").is_err());
/// ```
pub fn read_header(data: &[u8]) -> Result<FrameHeader, FrameHeaderError> {
    let short = |needed| FrameHeaderError::Truncated { have: data.len(), needed };
    let (Some(magic), Some(fhd)) = (crate::bytes::u32_le(data, 0), crate::bytes::u8(data, 4)) else {
        return Err(short(5));
    };
    if magic != ZSTD_MAGIC {
        return Err(FrameHeaderError::Magic(magic));
    }
    if fhd & 0x08 != 0 {
        return Err(FrameHeaderError::Reserved(fhd));
    }
    let single_segment = fhd & 0x20 != 0;
    let window_len = usize::from(!single_segment);
    let dict_len = [0usize, 1, 2, 4][usize::from(fhd & 0x03)];
    let fcs_len = match fhd >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let len = 5 + window_len + dict_len + fcs_len;
    let Some(rest) = data.get(5 + window_len..len) else { return Err(short(len)) };
    let (dict, fcs) = rest.split_at(dict_len);
    // A field of 0 to 8 bytes (its width is in `fhd`), of a slice taken above.
    let le = |bytes: &[u8]| bytes.iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    let content_size = match fcs_len {
        0 => None,
        // The 2-byte form is offset by 256 (RFC 8878 §3.1.1.1.4).
        2 => Some(le(fcs) + 256),
        _ => Some(le(fcs)),
    };
    Ok(FrameHeader {
        content_size,
        checksum: fhd & 0x04 != 0,
        dictionary: (dict_len > 0).then(|| le(dict) as u32),
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn sizes_and_checksum_flag() {
        for size in [0usize, 1, 255, 256, 300, 70_000] {
            let data = vec![7u8; size];
            let plain = zstd::bulk::compress(&data, 3).unwrap();
            let header = read_header(&plain).unwrap();
            assert_eq!(header.content_size, Some(size as u64), "size {size}");
            assert!(!header.checksum);
            let mut enc = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
            enc.include_checksum(true).unwrap();
            enc.set_pledged_src_size(Some(size as u64)).unwrap();
            enc.write_all(&data).unwrap();
            let checked = enc.finish().unwrap();
            let header = read_header(&checked).unwrap();
            assert!(header.checksum);
            assert_eq!(header.content_size, Some(size as u64));
            // Every cut of the header is an error, not a panic.
            for cut in 0..header.len {
                assert!(read_header(&checked[..cut]).is_err());
            }
        }
    }

    #[test]
    fn not_a_frame() {
        assert_eq!(read_header(b"\x28\xb5\x2f\xfd\x08"), Err(FrameHeaderError::Reserved(0x08)));
        assert_eq!(read_header(b"\0\0\0\0\0"), Err(FrameHeaderError::Magic(0)));
        assert!(matches!(read_header(b""), Err(FrameHeaderError::Truncated { .. })));
    }
}
