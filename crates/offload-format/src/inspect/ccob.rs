//! Reading the IDs inside a compressed bundle without decompressing it:
//! the decoder runs only until the binary bundle header it holds has been
//! read (zstd and zlib both decode as a stream). A compressed text bundle
//! has its IDs spread through the data and is decoded in full.

use crate::bundle::binary::MAGIC as BUNDLE_MAGIC;
use crate::bundle::compressed::{Blob, Method};
use crate::bundle::text::TextReader;
use std::io::Read;

/// One entry of the bundle inside a compressed bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InnerEntry {
    pub id: Vec<u8>,
    /// Position of the payload in the decompressed bundle.
    pub start: u64,
    pub len: u64,
}

/// What the compressed bundle holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Inner {
    pub text: bool,
    pub entries: Vec<InnerEntry>,
}

/// Longest entry ID accepted inside a compressed bundle (a sanity bound:
/// real IDs are under a hundred bytes).
const MAX_ID: u64 = 1 << 16;

fn decoder<'b>(blob: &Blob<'b>) -> Result<Box<dyn Read + 'b>, String> {
    let limit = blob.header.uncompressed_size;
    Ok(match blob.header.method {
        Method::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(blob.data).map_err(|e| e.to_string())?;
            d.window_log_max(31).map_err(|e| e.to_string())?;
            Box::new(d.take(limit))
        }
        Method::Zlib => Box::new(flate2::read::ZlibDecoder::new(blob.data).take(limit)),
    })
}

/// Reads up to `n` bytes (fewer only at the end of the stream).
fn read_up_to(r: &mut dyn Read, n: u64) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    r.take(n).read_to_end(&mut out).map_err(|e| format!("Could not decompress embedded file contents: {e}"))?;
    Ok(out)
}

fn u64_le(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

/// The comment prefix of a text bundle whose first START marker lies within
/// the first `within` bytes of `data`.
pub(crate) fn text_comment(data: &[u8], within: usize) -> Option<&'static str> {
    let head = &data[..data.len().min(within)];
    ["//", "#", ";"].into_iter().find(|c| {
        let marker = format!("\n{c} __CLANG_OFFLOAD_BUNDLE____START__ ");
        memchr::memmem::find(head, marker.as_bytes()).is_some()
    })
}

/// The entries of a text bundle, with their positions in `data`.
pub(crate) fn text_entries(data: &[u8], comment: &str) -> (Vec<InnerEntry>, Option<String>) {
    let mut reader = TextReader::new(data, comment);
    let mut out = Vec::new();
    while let Some(id) = reader.next_id() {
        match reader.payload() {
            Ok(p) => {
                let start = (p.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize) as u64;
                out.push(InnerEntry { id: id.to_vec(), start, len: p.len() as u64 });
            }
            Err(e) => return (out, Some(e.to_string())),
        }
    }
    (out, None)
}

/// Reads the entry table of the bundle inside `blob`, decoding as little as
/// possible. Errors describe what is wrong in the decompressed bundle.
pub(crate) fn peek(blob: &Blob) -> Result<Inner, String> {
    let size = blob.header.uncompressed_size;
    let mut r = decoder(blob)?;
    let head = read_up_to(&mut *r, 32)?;
    if head.starts_with(b"\n") {
        let mut rest = head;
        r.read_to_end(&mut rest).map_err(|e| format!("Could not decompress embedded file contents: {e}"))?;
        let comment = text_comment(&rest, rest.len())
            .ok_or_else(|| "the decompressed data is neither a binary nor a text bundle".to_string())?;
        let (entries, problem) = text_entries(&rest, comment);
        return match problem {
            Some(p) => Err(p),
            None => Ok(Inner { text: true, entries }),
        };
    }
    if head.len() < 32 || !head.starts_with(BUNDLE_MAGIC) {
        return Err(if head.starts_with(BUNDLE_MAGIC) {
            "the decompressed bundle ends inside its entry count".to_string()
        } else {
            "the decompressed data is neither a binary nor a text bundle".to_string()
        });
    }
    let count = u64_le(&head[24..32]);
    let mut pos = 32u64;
    let mut entries = Vec::new();
    for index in 0..count {
        let record = read_up_to(&mut *r, 24)?;
        if record.len() < 24 {
            return Err(format!("the decompressed bundle ends inside entry record {index} (offset {pos:#x})"));
        }
        let (offset, len, id_len) = (u64_le(&record), u64_le(&record[8..]), u64_le(&record[16..]));
        pos += 24;
        if id_len > MAX_ID || id_len > size.saturating_sub(pos) {
            return Err(format!("entry record {index} claims an ID of {id_len} bytes at offset {pos:#x}"));
        }
        let id = read_up_to(&mut *r, id_len)?;
        if (id.len() as u64) < id_len {
            return Err(format!("the decompressed bundle ends inside the ID of entry {index}"));
        }
        pos += id_len;
        if offset == 0 || offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(format!(
                "entry {index} ('{}') claims {len} bytes at offset {offset:#x}, outside the {size}-byte bundle",
                String::from_utf8_lossy(&id)
            ));
        }
        entries.push(InnerEntry { id, start: offset, len });
    }
    Ok(Inner { text: false, entries })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::compressed::{CompressOptions, compress, read_blob};
    use std::num::NonZeroU64;

    fn bundle(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        crate::bundle::binary::write(entries, NonZeroU64::new(4096).unwrap()).to_vec()
    }

    #[test]
    fn ids_come_from_the_header_alone() {
        let big = vec![7u8; 3 << 20];
        let raw = bundle(&[(b"host-x86_64-unknown-linux-gnu-", b""), (b"hipv4-amdgcn-amd-amdhsa--gfx906", &big)]);
        for method in [Method::Zstd, Method::Zlib] {
            let c = compress(&raw, &CompressOptions { method, ..Default::default() }).unwrap();
            let inner = peek(&read_blob(&c.bytes).unwrap()).unwrap();
            assert!(!inner.text);
            assert_eq!(inner.entries.len(), 2);
            assert_eq!(inner.entries[1].id, b"hipv4-amdgcn-amd-amdhsa--gfx906");
            assert_eq!(inner.entries[1].start, 4096);
            assert_eq!(inner.entries[1].len, big.len() as u64);
        }
    }

    #[test]
    fn text_bundles_are_read_in_full() {
        let m = crate::bundle::text::Markers::new("#");
        let raw =
            crate::bundle::text::write(&m, &[(b"host-x".as_slice(), b"abc".as_slice()), (b"hip-y", b"")]).to_vec();
        let c = compress(&raw, &CompressOptions::default()).unwrap();
        let inner = peek(&read_blob(&c.bytes).unwrap()).unwrap();
        assert!(inner.text);
        assert_eq!(inner.entries.len(), 2);
        let e = &inner.entries[0];
        assert_eq!(&raw[e.start as usize..(e.start + e.len) as usize], b"abc");
    }

    #[test]
    fn lies_inside_are_errors() {
        let raw = bundle(&[(b"hip-a", b"xyz")]);
        let mut bad = raw.clone();
        bad[24..32].copy_from_slice(&u64::MAX.to_le_bytes());
        let c = compress(&bad, &CompressOptions::default()).unwrap();
        assert!(peek(&read_blob(&c.bytes).unwrap()).is_err());
        let mut bad = raw.clone();
        bad[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        let c = compress(&bad, &CompressOptions::default()).unwrap();
        assert!(peek(&read_blob(&c.bytes).unwrap()).unwrap_err().contains("outside"));
        let c = compress(b"plain data, not a bundle", &CompressOptions::default()).unwrap();
        assert!(peek(&read_blob(&c.bytes).unwrap()).is_err());
    }
}
