//! Reading the IDs inside a compressed bundle without decompressing it:
//! the decoder runs only until the binary bundle header it holds has been
//! read (zstd and zlib both decode as a stream). A compressed text bundle
//! has its IDs spread through the data and is decoded in full.

use offload_format::bundle::binary::{self, Table};
use offload_format::bundle::compressed::{Blob, BlobDecoder};
use offload_format::bundle::text::TextReader;

/// One entry of the bundle inside a compressed bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InnerEntry {
    pub id: Vec<u8>,
    /// Position of the payload in the decompressed bundle.
    pub start: u64,
    pub len: u64,
}

/// What the compressed bundle holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inner {
    pub text: bool,
    pub entries: Vec<InnerEntry>,
}

/// The comment prefix of a text bundle whose first START marker lies within
/// the first `within` bytes of `data`.
pub fn text_comment(data: &[u8], within: usize) -> Option<&'static str> {
    let head = &data[..data.len().min(within)];
    ["//", "#", ";"].into_iter().find(|c| {
        let marker = format!("\n{c} __CLANG_OFFLOAD_BUNDLE____START__ ");
        memchr::memmem::find(head, marker.as_bytes()).is_some()
    })
}

/// The entries of a text bundle, with their positions in `data`.
pub fn text_entries(data: &[u8], comment: &str) -> (Vec<InnerEntry>, Option<String>) {
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
/// possible: in growing steps until the table is complete. Errors describe
/// what is wrong in the decompressed bundle.
pub fn peek(blob: &Blob) -> Result<Inner, String> {
    let size = blob.header.uncompressed_size;
    let mut decoder = BlobDecoder::new(blob).map_err(|e| e.to_string())?;
    let (mut data, mut buf) = (Vec::new(), Vec::new());
    let mut step = 1 << 12;
    loop {
        let more = decoder.next_chunk(&mut buf, step).map_err(|e| e.to_string())?;
        data.extend_from_slice(&buf);
        if data.starts_with(b"\n") {
            // A text bundle: its IDs are spread through the data.
            // Decoded in full, so charged to a package's budget (of a
            // binary bundle only the table is decoded, growing with it).
            crate::decode::charge_decoded(size)?;
            while decoder.next_chunk(&mut buf, 1 << 22).map_err(|e| e.to_string())? {
                data.extend_from_slice(&buf);
            }
            let comment = text_comment(&data, data.len())
                .ok_or_else(|| "the decompressed data is neither a binary nor a text bundle".to_string())?;
            let (entries, problem) = text_entries(&data, comment);
            return match problem {
                Some(p) => Err(p),
                None => Ok(Inner { text: true, entries }),
            };
        }
        match binary::read_table(&data, if more { size } else { data.len() as u64 }) {
            Ok(Table::Incomplete) if more => step = (step * 2).min(1 << 22),
            Ok(Table::Complete(table)) => {
                let entries =
                    table.into_iter().map(|e| InnerEntry { id: e.id.to_vec(), start: e.offset, len: e.size }).collect();
                return Ok(Inner { text: false, entries });
            }
            Ok(_) => return Err("the decompressed data is neither a binary nor a text bundle".to_string()),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use offload_format::bundle::compressed::{CompressOptions, Method, compress, read_blob};
    use std::num::NonZeroU64;

    fn bundle(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        offload_format::bundle::binary::write(entries, NonZeroU64::new(4096).unwrap()).to_vec()
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
        let m = offload_format::bundle::text::Markers::new("#");
        let raw =
            offload_format::bundle::text::write(&m, &[(b"host-x".as_slice(), b"abc".as_slice()), (b"hip-y", b"")])
                .to_vec();
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
