//! The version 1 writer, byte-identical to LLVM 15-19's
//! `OffloadBinary::write`, and the string-table builder it uses.

use super::{ENTRY_SIZE, HEADER_SIZE, ImageKind, MAGIC, OffloadKind, STRING_RECORD_SIZE_V1, VERSION, align8};
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

/// Appends the binary for `img` to `plan`: everything before the image is
/// owned, the image is borrowed, padding is zeros.
fn append<'a>(plan: &mut Plan<'a>, img: &Image<'a>) -> Result<(), WriteError> {
    for (k, v) in &img.strings {
        for s in [k, v] {
            if s.contains(&0) {
                return Err(WriteError::NulInString(String::from_utf8_lossy(s).into_owned()));
            }
        }
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
    put16(&mut head, img.offload_kind.to_u16());
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

/// The concatenated binaries for `images`, borrowing the image bytes.
pub fn write_plan<'a>(images: &[Image<'a>]) -> Result<Plan<'a>, WriteError> {
    let mut plan = Plan::new();
    for img in images {
        append(&mut plan, img)?;
    }
    Ok(plan)
}

/// The binary for one image, as bytes.
pub fn write(img: &Image<'_>) -> Result<Vec<u8>, WriteError> {
    Ok(write_plan(std::slice::from_ref(img))?.to_vec())
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
