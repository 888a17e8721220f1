//! Fat binary and entry headers (docs/formats/cuda-fatbin.md §3–§5).

use super::{
    Arch, Codec, CudaError, ENTRY_HEADER_SIZE, EntryKind, FATBIN_HEADER_SIZE, FATBIN_MAGIC, FATBIN_MAGIC_BYTES,
};
use crate::bytes::{u16_le, u32_le, u64_le};

/// One fat binary: its header and the bytes of its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FatBinary<'a> {
    /// The whole fat binary, header included (`header size + fat size`
    /// bytes).
    pub data: &'a [u8],
    /// The header's version field (1 in every known toolchain's output).
    pub version: u16,
    /// Size of the header in bytes (16, or more with unknown fields).
    pub header_size: u16,
}

impl<'a> FatBinary<'a> {
    /// Reads the fat binary at the start of `data`; `at` is where `data`
    /// starts in the caller's slice (for messages). The fat binary must
    /// lie wholly inside `data`.
    pub fn parse(data: &'a [u8], at: usize) -> Result<FatBinary<'a>, CudaError> {
        let short = || CudaError::ShortHeader { at, needed: FATBIN_HEADER_SIZE, available: data.len() };
        let magic = u32_le(data, 0).ok_or_else(short)?;
        if magic != FATBIN_MAGIC {
            return Err(CudaError::BadMagic { at, found: magic });
        }
        let version = u16_le(data, 4).ok_or_else(short)?;
        let header_size = u16_le(data, 6).ok_or_else(short)?;
        let fat_size = u64_le(data, 8).ok_or_else(short)?;
        if usize::from(header_size) < FATBIN_HEADER_SIZE {
            return Err(CudaError::BadHeaderSize { at, size: header_size });
        }
        if usize::from(header_size) > data.len() {
            return Err(CudaError::ShortHeader { at, needed: usize::from(header_size), available: data.len() });
        }
        let available = data.len() - usize::from(header_size);
        let end = usize::try_from(fat_size)
            .ok()
            .filter(|&n| n <= available)
            .map(|n| n + usize::from(header_size))
            .ok_or(CudaError::FatSizeBeyondEnd { at, declared: fat_size, available })?;
        Ok(FatBinary { data: &data[..end], version, header_size })
    }

    /// The entries, in file order. Offsets in errors and in
    /// [`Entry::offset`] are from the start of this fat binary.
    pub fn entries(&self) -> Entries<'a> {
        Entries { data: self.data, pos: usize::from(self.header_size), done: false }
    }
}

/// The fat binaries placed back to back in `data` (a section or a file),
/// each with its offset in `data`. Zero bytes between them are padding.
/// After bytes that are no fat binary, or a fat binary whose header is
/// damaged, the iterator yields the error and stops.
///
/// ```
/// use offload_format::cuda::{EntryKind, fat_binaries, flags};
///
/// // A fat binary with one uncompressed sm_80 cubin entry, built by hand:
/// // a 16-byte header (magic, version 1, header size, size of the entries)
/// // and a 64-byte entry header followed by the payload.
/// let payload = b"\x7fELF cubin bytes...";
/// let mut entry = vec![0u8; 64];
/// entry[0..2].copy_from_slice(&2u16.to_le_bytes()); // kind: cubin
/// entry[4..8].copy_from_slice(&64u32.to_le_bytes()); // header size
/// entry[8..16].copy_from_slice(&(payload.len() as u64).to_le_bytes());
/// entry[0x1c..0x20].copy_from_slice(&80u32.to_le_bytes()); // sm_80
/// entry[0x28..0x30].copy_from_slice(&(flags::HOST_64BIT | flags::HOST_LINUX).to_le_bytes());
/// entry.extend_from_slice(payload);
/// let mut data = 0xBA55_ED50u32.to_le_bytes().to_vec();
/// data.extend_from_slice(&1u16.to_le_bytes());
/// data.extend_from_slice(&16u16.to_le_bytes());
/// data.extend_from_slice(&(entry.len() as u64).to_le_bytes());
/// data.extend_from_slice(&entry);
///
/// for fatbin in fat_binaries(&data) {
///     let (offset, fatbin) = fatbin?;
///     assert_eq!(offset, 0);
///     for e in fatbin.entries() {
///         let e = e?;
///         assert_eq!((e.header.kind(), e.header.arch().to_string()), (EntryKind::Elf, "sm_80".into()));
///         assert_eq!(e.header.codec(), None);
///         assert_eq!(e.stream()?, payload);
///     }
/// }
/// // Damage is an error, not a panic.
/// assert!(fat_binaries(&data[..40]).any(|r| r.is_err()));
/// # Ok::<(), offload_format::cuda::CudaError>(())
/// ```
pub fn fat_binaries(data: &[u8]) -> impl Iterator<Item = Result<(usize, FatBinary<'_>), CudaError>> {
    let mut pos = 0usize;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let rest = data.get(pos..)?;
        let skip = rest.iter().position(|&b| b != 0)?;
        pos += skip;
        let rest = &data[pos..];
        if !rest.starts_with(&FATBIN_MAGIC_BYTES) && rest.len() >= 4 {
            done = true;
            let found = u32_le(rest, 0).unwrap_or(0);
            return Some(Err(CudaError::BadMagic { at: pos, found }));
        }
        match FatBinary::parse(rest, pos) {
            Ok(fb) => {
                let at = pos;
                pos += fb.data.len();
                Some(Ok((at, fb)))
            }
            Err(e) => {
                done = true;
                Some(Err(e))
            }
        }
    })
}

/// The fixed 64-byte part of an entry header (docs/formats/cuda-fatbin.md §4). A concatenated
/// entry's child headers have the same layout, except that
/// `header_size` is the child's offset in the decompressed stream and
/// `payload_size` its exact size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct EntryHeader {
    /// [`EntryKind`] value.
    pub kind: u16,
    /// Size of the header with its extension, in bytes.
    pub header_size: u32,
    /// Size of the stored payload in bytes, padding included.
    pub payload_size: u64,
    /// Size of the compressed stream in bytes (0 when stored as is).
    pub compressed_size: u32,
    /// Offset of the options string in the header (0: none).
    pub options_offset: u32,
    /// Minor version of the producing toolchain's format.
    pub version_minor: u16,
    /// Major version of the producing toolchain's format.
    pub version_major: u16,
    /// The SM number, without suffix ([`EntryHeader::arch`] adds it).
    pub arch: u32,
    /// Offset of the identifier string in the header (0: none).
    pub identifier_offset: u32,
    /// Length of the identifier string in bytes.
    pub identifier_len: u32,
    /// Flag bits ([`super::flags`]).
    pub flags: u64,
    /// Obfuscation key, as stored.
    pub key: u64,
    /// Size of the decoded payload in bytes (for compressed entries).
    pub uncompressed_size: u64,
}

impl EntryHeader {
    /// Reads the 64 bytes at the start of `data`.
    pub fn parse(data: &[u8]) -> Option<EntryHeader> {
        Some(EntryHeader {
            kind: u16_le(data, 0)?,
            header_size: u32_le(data, 4)?,
            payload_size: u64_le(data, 8)?,
            compressed_size: u32_le(data, 0x10)?,
            options_offset: u32_le(data, 0x14)?,
            version_minor: u16_le(data, 0x18)?,
            version_major: u16_le(data, 0x1a)?,
            arch: u32_le(data, 0x1c)?,
            identifier_offset: u32_le(data, 0x20)?,
            identifier_len: u32_le(data, 0x24)?,
            flags: u64_le(data, 0x28)?,
            key: u64_le(data, 0x30)?,
            uncompressed_size: u64_le(data, 0x38)?,
        })
    }

    /// What the entry holds.
    pub fn kind(&self) -> EntryKind {
        EntryKind::from_u16(self.kind)
    }

    /// The header arch with its `a`/`f` suffix.
    pub fn arch(&self) -> Arch {
        Arch::from_header(self.arch, self.flags)
    }

    /// How the payload is stored; `None` when as is.
    pub fn codec(&self) -> Option<Codec> {
        Codec::from_flags(self.flags)
    }
}

/// One entry of a fat binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The header's fields.
    pub header: EntryHeader,
    /// Offset of the entry from the start of its fat binary.
    pub offset: usize,
    /// The whole header, extension included (`header_size` bytes).
    pub raw_header: &'a [u8],
    /// The payload as stored (`payload_size` bytes, padding included).
    pub stored: &'a [u8],
}

impl<'a> Entry<'a> {
    /// Offset of the payload from the start of the fat binary.
    pub fn payload_offset(&self) -> usize {
        self.offset + self.raw_header.len()
    }

    /// The bytes to decode: the compressed stream (`compressed size`
    /// bytes) of a compressed entry, else the stored payload.
    pub fn stream(&self) -> Result<&'a [u8], CudaError> {
        if self.header.codec().is_none() || self.header.compressed_size == 0 {
            return Ok(self.stored);
        }
        usize::try_from(self.header.compressed_size).ok().and_then(|n| self.stored.get(..n)).ok_or(
            CudaError::CompressedBeyondPayload {
                at: self.offset,
                compressed: self.header.compressed_size,
                payload: self.header.payload_size,
            },
        )
    }

    /// A NUL-terminated string of the header extension at `offset`
    /// (from the entry start), at most `len` bytes when given.
    fn header_string(&self, offset: u32, len: Option<u32>, what: &'static str) -> Result<&'a [u8], CudaError> {
        let outside = CudaError::StringOutsideHeader { at: self.offset, what };
        let start = usize::try_from(offset).map_err(|_| outside.clone())?;
        let rest = self.raw_header.get(start..).filter(|_| start >= ENTRY_HEADER_SIZE).ok_or(outside.clone())?;
        let text = match len {
            Some(n) => rest.get(..usize::try_from(n).map_err(|_| outside.clone())?).ok_or(outside)?,
            None => rest,
        };
        Ok(memchr::memchr(0, text).map_or(text, |n| &text[..n]))
    }

    /// The identifier (source path with `-G`), if the entry has one.
    pub fn identifier(&self) -> Result<Option<&'a [u8]>, CudaError> {
        if self.header.identifier_offset == 0 {
            return Ok(None);
        }
        self.header_string(self.header.identifier_offset, Some(self.header.identifier_len), "the identifier").map(Some)
    }

    /// The ptxas/nvvm options string (PTX and NVVM entries), if any. ELF
    /// entries for sm_100+ carry binary data there, returned as is.
    pub fn options(&self) -> Result<Option<&'a [u8]>, CudaError> {
        if self.header.options_offset == 0 || self.header.kind() == EntryKind::Concat {
            return Ok(None);
        }
        let at = usize::try_from(self.header.options_offset).unwrap_or(usize::MAX);
        let outside = CudaError::StringOutsideHeader { at: self.offset, what: "the options block" };
        let (off, len) =
            u32_le(self.raw_header, at).zip(u32_le(self.raw_header, at.saturating_add(4))).ok_or(outside)?;
        if off == 0 {
            return Ok(None);
        }
        self.header_string(off, Some(len), "the options string").map(Some)
    }

    /// The child images of a concatenated entry (docs/formats/cuda-fatbin.md §5), in the order
    /// stored (which is the order `cuobjdump` lists them in).
    pub fn children(&self) -> Result<Vec<Child>, CudaError> {
        let bad = |problem: String| CudaError::BadConcat { at: self.offset, problem };
        let table = usize::try_from(self.header.options_offset).map_err(|_| bad("table offset".into()))?;
        let count = u32_le(self.raw_header, table).ok_or_else(|| bad("the table lies outside the header".into()))?;
        let count = usize::try_from(count).map_err(|_| bad("child count".into()))?;
        let first = table.checked_add(8).ok_or_else(|| bad("table offset".into()))?;
        // The count is checked against the header bytes before anything is
        // sized by it.
        let room = self.raw_header.len().saturating_sub(first) / ENTRY_HEADER_SIZE;
        if count > room {
            return Err(bad(format!("{count} child headers do not fit in the {}-byte header", self.raw_header.len())));
        }
        let mut children = Vec::with_capacity(count);
        for index in 0..count {
            let at = first + index * ENTRY_HEADER_SIZE;
            let header =
                self.raw_header.get(at..).and_then(EntryHeader::parse).ok_or_else(|| bad("child header".into()))?;
            children.push(Child { index, start: u64::from(header.header_size), len: header.payload_size, header });
        }
        Ok(children)
    }
}

/// One image inside a concatenated entry's decompressed stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Child {
    /// Its position in the entry's table, from 0.
    pub index: usize,
    /// Its header (see [`EntryHeader`] for how the fields differ).
    pub header: EntryHeader,
    /// Offset of the image in the decoded stream.
    pub start: u64,
    /// Exact size of the image.
    pub len: u64,
}

/// The entries of one fat binary. Stops at the first damaged entry, after
/// yielding its error; fewer than 64 trailing bytes end the walk (the
/// walk `cuobjdump` does), reported as an error when they are not zero.
pub struct Entries<'a> {
    data: &'a [u8],
    pos: usize,
    done: bool,
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>, CudaError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = self.data.get(self.pos..)?;
        let at = self.pos;
        if rest.len() < ENTRY_HEADER_SIZE {
            self.done = true;
            return (!rest.iter().all(|&b| b == 0)).then_some(Err(CudaError::ShortEntry { at, available: rest.len() }));
        }
        let result = parse_entry(rest, at);
        match &result {
            Ok(e) => self.pos = at + e.raw_header.len() + e.stored.len(),
            Err(_) => self.done = true,
        }
        Some(result)
    }
}

fn parse_entry(rest: &[u8], at: usize) -> Result<Entry<'_>, CudaError> {
    let header = EntryHeader::parse(rest).ok_or(CudaError::ShortEntry { at, available: rest.len() })?;
    let header_len = usize::try_from(header.header_size)
        .ok()
        .filter(|&n| n >= ENTRY_HEADER_SIZE && n <= rest.len())
        .ok_or(CudaError::BadEntryHeaderSize { at, size: header.header_size })?;
    let payload_len = usize::try_from(header.payload_size)
        .ok()
        .filter(|&n| n <= rest.len() - header_len)
        .ok_or(CudaError::PayloadBeyondEnd { at, size: header.payload_size })?;
    Ok(Entry {
        header,
        offset: at,
        raw_header: &rest[..header_len],
        stored: &rest[header_len..header_len + payload_len],
    })
}
