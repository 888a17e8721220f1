//! The writers and the string-table builder they share:
//!
//! * version 1, byte-identical to LLVM 15-22's `OffloadBinary::write`
//!   ([`write_plan`] with LLVM 19's offload-kind numbers, [`write_plan_for`]
//!   with any release's: LLVM 22 stores HIP as 4);
//! * version 2 ([`write_v2`], LLVM 23's layout: one header, several entries,
//!   sized values) and version 3 ([`write_v3`], LLVM main: a 40-byte header,
//!   optionally a compressed body). No release the drop-ins follow writes
//!   these yet; they exist for tests and later rows of
//!   [`crate::llvm_release`]. The layouts are described in
//!   docs/llvm-releases.md.

use super::{
    ENTRY_SIZE, HEADER_SIZE, HEADER_SIZE_V3, ImageKind, MAGIC, OffloadKind, STRING_RECORD_SIZE_V1,
    STRING_RECORD_SIZE_V2, VERSION, align8,
};
use crate::llvm_release::{KindNumbering, LlvmRelease};
use crate::plan::Plan;
use std::collections::HashMap;

/// One image to package. The string records are written in the order
/// given (see [`super::ImageArgs::string_records`] for LLVM's orders).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image<'a> {
    /// What kind of file the image is.
    pub image_kind: ImageKind,
    /// The offloading model that produced it.
    pub offload_kind: OffloadKind,
    /// Flag bits, stored as given.
    pub flags: u32,
    /// Key/value records (`triple`, `arch`, ...); neither may hold a NUL.
    pub strings: Vec<(&'a [u8], &'a [u8])>,
    /// The image's bytes.
    pub image: &'a [u8],
}

/// Why an image cannot be written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// Version 1 strings end at the first NUL, so they cannot hold one.
    #[error("the string {0:?} contains a NUL byte, which an OffloadBinary string cannot hold")]
    NulInString(String),
    /// The binary would not fit in 64 bits.
    #[error("the image is too large for an OffloadBinary")]
    TooLarge,
    /// The release has no OffloadBinary (LLVM 14).
    #[error("{0} has no OffloadBinary format")]
    NoOffloadBinary(LlvmRelease),
    /// A version 2 or 3 binary needs at least one entry.
    #[error("an OffloadBinary of version 2 or 3 needs at least one image")]
    NoImages,
    /// Compression failed.
    #[error("compressing the OffloadBinary failed: {0}")]
    Compress(String),
}

/// A string table laid out like LLVM's ELF `StringTableBuilder` with tail
/// merging: byte 0 is NUL and the empty string's offset; the distinct
/// strings are sorted by their reversed bytes in descending order (so a
/// suffix directly follows the strings it ends), and a string that is a
/// suffix of the string last written shares that string's tail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StringTable {
    bytes: Vec<u8>,
    offsets: HashMap<Vec<u8>, u64>,
}

impl StringTable {
    /// The table for these strings (duplicates and the empty string are
    /// fine).
    pub fn build<'s>(strings: impl IntoIterator<Item = &'s [u8]>) -> Self {
        let mut distinct: Vec<&[u8]> = strings.into_iter().filter(|s| !s.is_empty()).collect();
        distinct.sort_unstable_by(|a, b| b.iter().rev().cmp(a.iter().rev()));
        distinct.dedup();
        let mut bytes = vec![0u8];
        let mut offsets = HashMap::new();
        offsets.insert(Vec::new(), 0);
        let mut previous: &[u8] = &[];
        for s in distinct {
            let at = if !previous.is_empty() && previous.ends_with(s) {
                // The tail of the previous string, whose NUL ends both.
                (bytes.len() - 1 - s.len()) as u64
            } else {
                let at = bytes.len() as u64;
                bytes.extend_from_slice(s);
                bytes.push(0);
                previous = s;
                at
            };
            offsets.insert(s.to_vec(), at);
        }
        StringTable { bytes, offsets }
    }

    /// The table's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Offset of a string added to the table.
    pub fn offset(&self, s: &[u8]) -> Option<u64> {
        self.offsets.get(s).copied()
    }
}

fn put16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn put64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn refuse_nul(s: &[u8]) -> Result<(), WriteError> {
    if s.contains(&0) { Err(WriteError::NulInString(String::from_utf8_lossy(s).into_owned())) } else { Ok(()) }
}

/// Appends the binary for `img` to `plan`: everything before the image is
/// owned, the image is borrowed, padding is zeros.
fn append<'a>(plan: &mut Plan<'a>, img: &Image<'a>, numbering: KindNumbering) -> Result<(), WriteError> {
    for (k, v) in &img.strings {
        refuse_nul(k)?;
        refuse_nul(v)?;
    }
    let table = StringTable::build(img.strings.iter().flat_map(|(k, v)| [*k, *v]));
    let n = img.strings.len() as u64;
    let records = HEADER_SIZE + ENTRY_SIZE;
    let table_at = records + STRING_RECORD_SIZE_V1 * n;
    let image_at = align8(table_at + table.bytes().len() as u64).ok_or(WriteError::TooLarge)?;
    let image_len = img.image.len() as u64;
    let size = image_at.checked_add(image_len).and_then(align8).ok_or(WriteError::TooLarge)?;

    let mut head = Vec::with_capacity(image_at as usize);
    head.extend_from_slice(&MAGIC);
    put32(&mut head, VERSION);
    put64(&mut head, size);
    put64(&mut head, HEADER_SIZE);
    put64(&mut head, ENTRY_SIZE);
    put16(&mut head, img.image_kind.to_u16());
    put16(&mut head, numbering.value(img.offload_kind));
    put32(&mut head, img.flags);
    put64(&mut head, records);
    put64(&mut head, n);
    put64(&mut head, image_at);
    put64(&mut head, image_len);
    for (k, v) in &img.strings {
        // Every string was added to the table above.
        put64(&mut head, table_at + table.offset(k).unwrap_or(0));
        put64(&mut head, table_at + table.offset(v).unwrap_or(0));
    }
    head.extend_from_slice(table.bytes());
    head.resize(image_at as usize, 0);
    plan.own(head);
    plan.borrow(img.image);
    plan.zeros(size - image_at - image_len);
    Ok(())
}

/// The concatenated version 1 binaries for `images` as LLVM 19 writes
/// them (HIP stored as 3), borrowing the image bytes.
pub fn write_plan<'a>(images: &[Image<'a>]) -> Result<Plan<'a>, WriteError> {
    write_numbered(images, KindNumbering::Sequential)
}

/// The concatenated binaries for `images` as `release`'s packager writes
/// them: version 1 in LLVM 15-22, with the release's offload-kind numbers
/// (LLVM 22 stores HIP as 4 and SYCL as 8).
pub fn write_plan_for<'a>(release: LlvmRelease, images: &[Image<'a>]) -> Result<Plan<'a>, WriteError> {
    let numbering = release.facts().kind_numbering.ok_or(WriteError::NoOffloadBinary(release))?;
    write_numbered(images, numbering)
}

fn write_numbered<'a>(images: &[Image<'a>], numbering: KindNumbering) -> Result<Plan<'a>, WriteError> {
    let mut plan = Plan::new();
    for img in images {
        append(&mut plan, img, numbering)?;
    }
    Ok(plan)
}

/// The binary for one image as LLVM 19 writes it, as bytes.
pub fn write(img: &Image<'_>) -> Result<Vec<u8>, WriteError> {
    Ok(write_plan(std::slice::from_ref(img))?.to_vec())
}

/// How [`write_v3`] compresses the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// zstd at this level.
    Zstd(i32),
    /// zlib at this level (0-9).
    Zlib(u32),
}

/// One version 2 binary holding every image (LLVM 23's layout): header,
/// all entries, the string records of all entries in entry order (24 bytes:
/// key offset, value offset, value size), one shared string table, zeros
/// to a multiple of 8, the images back to back, zeros to a multiple of 8.
/// Offload kinds use the bit numbering (HIP 4). Values may hold NULs
/// (their size is stored); keys may not.
pub fn write_v2(images: &[Image<'_>]) -> Result<Vec<u8>, WriteError> {
    write_multi(images, 2)
}

/// One version 3 binary (LLVM main's layout): as [`write_v2`] with a
/// 40-byte header whose last field, the inflated size, is 0. With
/// `compression`, everything after the header is compressed, the inflated
/// size is the uncompressed binary's size, the size is the header's and
/// the compressed data's (not a multiple of 8), and zeros follow up to a
/// multiple of 8.
pub fn write_v3(images: &[Image<'_>], compression: Option<Compression>) -> Result<Vec<u8>, WriteError> {
    let plain = write_multi(images, 3)?;
    let Some(compression) = compression else { return Ok(plain) };
    let body = &plain[HEADER_SIZE_V3 as usize..];
    let packed = match compression {
        Compression::Zstd(level) => {
            zstd::bulk::compress(body, level).map_err(|e| WriteError::Compress(e.to_string()))?
        }
        Compression::Zlib(level) => {
            use std::io::Write;
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level.min(9)));
            e.write_all(body).map_err(|e| WriteError::Compress(e.to_string()))?;
            e.finish().map_err(|e| WriteError::Compress(e.to_string()))?
        }
    };
    let size = HEADER_SIZE_V3 + packed.len() as u64;
    let mut out = Vec::with_capacity(size.next_multiple_of(8) as usize);
    out.extend_from_slice(&plain[..HEADER_SIZE_V3 as usize]);
    out[8..16].copy_from_slice(&size.to_le_bytes());
    out[32..40].copy_from_slice(&(plain.len() as u64).to_le_bytes());
    out.extend_from_slice(&packed);
    out.resize(out.len().next_multiple_of(8), 0);
    Ok(out)
}

fn write_multi(images: &[Image<'_>], version: u32) -> Result<Vec<u8>, WriteError> {
    if images.is_empty() {
        return Err(WriteError::NoImages);
    }
    for img in images {
        for (k, _) in &img.strings {
            refuse_nul(k)?;
        }
    }
    let header_len = if version >= 3 { HEADER_SIZE_V3 } else { HEADER_SIZE };
    let table = StringTable::build(images.iter().flat_map(|i| i.strings.iter().flat_map(|(k, v)| [*k, *v])));
    let count = images.len() as u64;
    let records: u64 = images.iter().map(|i| i.strings.len() as u64).sum();
    let too_large = || WriteError::TooLarge;
    let records_at =
        header_len.checked_add(count.checked_mul(ENTRY_SIZE).ok_or_else(too_large)?).ok_or_else(too_large)?;
    let table_at =
        records.checked_mul(STRING_RECORD_SIZE_V2).and_then(|r| r.checked_add(records_at)).ok_or_else(too_large)?;
    let images_at = align8(table_at + table.bytes().len() as u64).ok_or_else(too_large)?;
    let images_len = images.iter().try_fold(0u64, |a, i| a.checked_add(i.image.len() as u64)).ok_or_else(too_large)?;
    let size = images_at.checked_add(images_len).and_then(align8).ok_or_else(too_large)?;
    let cap = usize::try_from(size).map_err(|_| too_large())?;

    let numbering = KindNumbering::BitMask;
    let mut out = Vec::with_capacity(cap);
    out.extend_from_slice(&MAGIC);
    put32(&mut out, version);
    put64(&mut out, size);
    put64(&mut out, header_len);
    put64(&mut out, count);
    if version >= 3 {
        put64(&mut out, 0);
    }
    let (mut record_at, mut image_at) = (records_at, images_at);
    for img in images {
        put16(&mut out, img.image_kind.to_u16());
        put16(&mut out, numbering.value(img.offload_kind));
        put32(&mut out, img.flags);
        put64(&mut out, record_at);
        put64(&mut out, img.strings.len() as u64);
        put64(&mut out, image_at);
        put64(&mut out, img.image.len() as u64);
        record_at += STRING_RECORD_SIZE_V2 * img.strings.len() as u64;
        image_at += img.image.len() as u64;
    }
    for img in images {
        for (k, v) in &img.strings {
            // Every string was added to the table above.
            put64(&mut out, table_at + table.offset(k).unwrap_or(0));
            put64(&mut out, table_at + table.offset(v).unwrap_or(0));
            put64(&mut out, v.len() as u64);
        }
    }
    out.extend_from_slice(table.bytes());
    out.resize(images_at as usize, 0);
    for img in images {
        out.extend_from_slice(img.image);
    }
    out.resize(cap, 0);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offload_binary::OffloadBinary;

    #[test]
    fn string_table_sorts_by_reversed_bytes_and_merges_tails() {
        let t = StringTable::build([&b"arch"[..], b"gnu", b"triple", b"x86_64-pc-linux-gnu", b"gnu", b""]);
        assert_eq!(t.bytes(), b"\0x86_64-pc-linux-gnu\0arch\0triple\0");
        assert_eq!(t.offset(b""), Some(0));
        assert_eq!(t.offset(b"x86_64-pc-linux-gnu"), Some(1));
        assert_eq!(t.offset(b"gnu"), Some(1 + 19 - 3));
        assert_eq!(t.offset(b"arch"), Some(21));
        assert_eq!(t.offset(b"triple"), Some(26));
    }

    #[test]
    fn merging_only_uses_the_string_written_last() {
        // Reversed: "by" > "bax" > "b": "b" merges into "xab" (the last
        // written), "ab" as well.
        let t = StringTable::build([&b"yb"[..], b"xab", b"b", b"ab"]);
        assert_eq!(t.bytes(), b"\0yb\0xab\0");
        assert_eq!(t.offset(b"b"), Some(6));
        assert_eq!(t.offset(b"ab"), Some(5));
    }

    #[test]
    fn worked_example_of_the_spec() {
        // --image=file=a.bin,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp
        let img = Image {
            image_kind: ImageKind::None,
            offload_kind: OffloadKind::OpenMp,
            flags: 0,
            strings: vec![(b"arch", b"sm_70"), (b"triple", b"nvptx64-nvidia-cuda")],
            image: b"hello",
        };
        let bytes = write(&img).unwrap();
        assert_eq!(bytes.len(), 0x98);
        assert_eq!(&bytes[0x68..0x8f], b"\0arch\0triple\0nvptx64-nvidia-cuda\0sm_70\0");
        assert_eq!(&bytes[0x90..], b"hello\0\0\0");
        let b = OffloadBinary::parse_all(&bytes).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].image(), b"hello");
        assert_eq!(b[0].arch(), "sm_70");
        assert_eq!(b[0].entry().image_offset, 0x90);
    }

    #[test]
    fn empty_image_and_exact_alignment() {
        let img = Image { strings: vec![(b"triple", b"t")], ..Default::default() };
        assert_eq!(write(&img).unwrap().len(), 0x68);
        let img = Image { strings: vec![(b"triple", b"abc")], image: b"12345678", ..Default::default() };
        let bytes = write(&img).unwrap();
        assert_eq!(bytes.len(), 0x70);
        assert_eq!(&bytes[0x58..0x64], b"\0triple\0abc\0");
    }

    #[test]
    fn nul_in_a_string_is_refused() {
        let img = Image { strings: vec![(b"k\0", b"v")], ..Default::default() };
        assert!(matches!(write(&img), Err(WriteError::NulInString(_))));
    }
}
