//! CUDA fat binaries in the scan: the `.nv_fatbin` / `__nv_relfatbin`
//! sections, standalone `.fatbin` files and lone cubins
//! (`docs/formats/cuda-fatbin.md`). Each fat binary is one unit;
//! each entry (and each child of a concatenated entry) one code object.
//! Listing reads headers only, except the NUL search in stored PTX text and
//! the ELF header tables of stored cubins; `verify` (deep) decodes every
//! entry and checks it against its header.

use super::object_file::HostFile;
use super::{Base, Scanner};
use crate::{CodeObject, CudaEntry, Format, Location, Payload, Severity, Step};
use offload_format::cuda::{self, Child, Codec, Entry, EntryKind, FatBinary};
use std::collections::{HashMap, HashSet};

/// The triple `offload` reports for CUDA device code.
const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// Whether a section holds fat binaries; `Some(true)` for the relocatable
/// ones (`__nv_relfatbin`, input to `nvlink`). Mach-O's `__nv_fatbin`
/// comes from NVIDIA's `fatbinary_section.h`; `.nv_fatb` is `.nv_fatbin`
/// in a linked PE image, whose section names are cut to eight bytes
/// (docs/formats/cuda-fatbin.md §2, "Windows").
pub(super) fn fatbin_section(name: &str) -> Option<bool> {
    match name {
        ".nv_fatbin" | "__nv_fatbin" | ".nv_fatb" => Some(false),
        "__nv_relfatbin" => Some(true),
        _ => None,
    }
}

/// The names of the section of registration records: ELF and COFF
/// objects spell it out, linked PE images cut it to `.nvFatBi`.
const WRAPPER_SECTIONS: [&str; 2] = [cuda::wrapper::WRAPPER_SECTION, ".nvFatBi"];

impl<'a> Scanner<'a> {
    /// The fat binaries back to back in `data` (a section or a whole file).
    pub(super) fn cuda_region(&mut self, base: &Base, data: &[u8], loc: &Location, relocatable: bool) {
        let found: Vec<_> = cuda::fat_binaries(data).collect();
        let several = found.iter().filter(|r| r.is_ok()).count() > 1;
        let mut index = 0;
        for result in found {
            match result {
                Ok((_, fat)) => {
                    let floc = if several { loc.with(Step::Index(index)) } else { loc.clone() };
                    self.fat_binary(base, &fat, &floc, relocatable);
                    index += 1;
                }
                Err(e) => {
                    let at = self.offset_of(base, data).map(|o| o + error_offset(&e) as u64);
                    self.diag(Severity::Error, at, loc, format!("CUDA {e}"));
                }
            }
        }
    }

    fn fat_binary(&mut self, base: &Base, fat: &FatBinary, loc: &Location, relocatable: bool) {
        let fat_at = self.offset_of(base, fat.data);
        let unit = self.new_unit(loc, Format::CudaFatbin);
        if fat.version != 1 {
            let msg = format!("CUDA fat binary version {} (only 1 is known)", fat.version);
            self.diag(Severity::Warning, fat_at, loc, msg);
        }
        let mut seen: HashMap<(EntryKind, cuda::Arch), usize> = HashMap::new();
        for (number, result) in fat.entries().enumerate() {
            let entry = match result {
                Ok(e) => e,
                Err(e) => {
                    let at = fat_at.map(|o| o + error_offset(&e) as u64);
                    self.diag(Severity::Error, at, loc, format!("CUDA {e}"));
                    break;
                }
            };
            let entry_at = fat_at.map(|o| o + entry.offset as u64);
            self.header_checks(&entry, entry_at, loc);
            let kind = entry.header.kind();
            if self.opts.deep
                && matches!(kind, EntryKind::Elf | EntryKind::Ptx | EntryKind::Nvvm)
                && let Some(first) = seen.insert((kind, entry.header.arch()), number)
            {
                let msg = format!(
                    "entries {first} and {number} are both {} for {}: the driver picks one by position",
                    kind.name(),
                    entry.header.arch()
                );
                self.diag(Severity::Warning, entry_at, loc, msg);
            }
            let info = CudaEntry {
                kind,
                arch: entry.header.arch(),
                flags: entry.header.flags,
                relocatable,
                fatbin: fat_at,
                unregistered: false,
            };
            if kind == EntryKind::Concat {
                self.concat(base, &entry, entry_at, info, unit, &loc.with(Step::Entry(number.to_string())));
                continue;
            }
            let (size, payload, offset) = match entry.header.codec() {
                Some(codec) => {
                    let stream = entry.stream().unwrap_or(&[]);
                    let declared = entry.header.uncompressed_size;
                    let size = if kind == EntryKind::Ptx { declared.saturating_sub(1) } else { declared };
                    let payload = Payload::Cuda {
                        stream: self.bytes_of(base, stream),
                        codec,
                        uncompressed: declared,
                        start: 0,
                        len: size,
                    };
                    (size, payload, None)
                }
                None => {
                    let object = match kind {
                        EntryKind::Elf => {
                            let n = cuda::cubin_extent(entry.stored).unwrap_or(entry.stored.len() as u64);
                            &entry.stored[..usize::try_from(n).unwrap_or(usize::MAX).min(entry.stored.len())]
                        }
                        EntryKind::Ptx => cuda::ptx_text(entry.stored),
                        _ => entry.stored,
                    };
                    let offset = self.offset_of(base, object);
                    (object.len() as u64, Payload::Plain(self.bytes_of(base, object)), offset)
                }
            };
            if self.opts.deep {
                self.deep_entry(&entry, entry_at, loc);
            }
            self.push_cuda(loc, info, size, offset, payload, unit);
        }
    }

    fn push_cuda(
        &mut self,
        loc: &Location,
        info: CudaEntry,
        size: u64,
        offset: Option<u64>,
        payload: Payload<'a>,
        unit: usize,
    ) {
        let compressed = matches!(payload, Payload::Cuda { .. });
        let target = info.arch.to_string();
        self.inv.objects.push(CodeObject {
            location: loc.clone(),
            format: Format::CudaFatbin,
            id: format!("cuda-{}-{target}", info.kind.name()),
            offload_kind: "cuda".into(),
            triple: TRIPLE.into(),
            target_id: target.clone(),
            target_id_error: None,
            stored_target: target,
            size,
            offset,
            compressed,
            unit,
            container: false,
            image_kind: None,
            payload,
            cuda: Some(info),
            kpack: None,
        });
    }

    /// A concatenated entry: listed as a container record, then its
    /// children, each with the parent's compression.
    fn concat(
        &mut self,
        base: &Base,
        entry: &Entry,
        entry_at: Option<u64>,
        info: CudaEntry,
        unit: usize,
        loc: &Location,
    ) {
        let children = match entry.children() {
            Ok(c) => c,
            Err(e) => return self.diag(Severity::Error, entry_at, loc, format!("CUDA {e}")),
        };
        let codec = entry.header.codec();
        let stream = entry.stream().unwrap_or(&[]);
        let whole = match codec {
            Some(codec) => Payload::Cuda {
                stream: self.bytes_of(base, stream),
                codec,
                uncompressed: entry.header.uncompressed_size,
                start: 0,
                len: entry.header.uncompressed_size,
            },
            None => Payload::Plain(self.bytes_of(base, entry.stored)),
        };
        let size = if codec.is_some() { entry.header.uncompressed_size } else { entry.stored.len() as u64 };
        let offset = if codec.is_some() { None } else { self.offset_of(base, entry.stored) };
        let concat = CudaEntry { arch: cuda::Arch { number: 0, suffix: cuda::Suffix::None }, ..info };
        self.push_cuda(loc, concat, size, offset, whole, unit);
        if let Some(record) = self.inv.objects.last_mut() {
            record.container = true;
            record.id = "cuda-concat".into();
            record.target_id.clear();
            record.stored_target.clear();
        }
        let decoded = match (self.opts.deep, codec) {
            (true, Some(codec)) => match cuda::decompress(codec, stream, entry.header.uncompressed_size) {
                Ok(d) => Some(d),
                Err(e) => {
                    self.diag(Severity::Error, entry_at, loc, format!("CUDA concatenated entry: {e}"));
                    None
                }
            },
            _ => None,
        };
        for child in children {
            let cloc = loc.with(Step::Image(child.index));
            let cinfo =
                CudaEntry { kind: child.header.kind(), arch: child.header.arch(), flags: child.header.flags, ..info };
            let (payload, offset) = match codec {
                Some(codec) => (
                    Payload::Cuda {
                        stream: self.bytes_of(base, stream),
                        codec,
                        uncompressed: entry.header.uncompressed_size,
                        start: child.start,
                        len: child.len,
                    },
                    None,
                ),
                None => match child_slice(entry.stored, &child) {
                    Some(b) => (Payload::Plain(self.bytes_of(base, b)), self.offset_of(base, b)),
                    None => {
                        let msg = format!("CUDA concatenated entry: child {} lies outside the payload", child.index);
                        self.diag(Severity::Error, entry_at, &cloc, msg);
                        continue;
                    }
                },
            };
            if self.opts.deep {
                let bytes = match (&decoded, codec) {
                    (Some(d), _) => child_slice(d, &child),
                    (None, None) => child_slice(entry.stored, &child),
                    (None, Some(_)) => None,
                };
                match bytes {
                    Some(b) => self.check_cubin(b, b.len(), child.header.arch(), entry_at, &cloc),
                    None if decoded.is_some() || codec.is_none() => {
                        let msg =
                            format!("CUDA concatenated entry: child {} lies outside the decoded data", child.index);
                        self.diag(Severity::Error, entry_at, &cloc, msg);
                    }
                    None => {}
                }
            }
            self.push_cuda(&cloc, cinfo, child.len, offset, payload, unit);
        }
    }

    /// A lone cubin (`nvcc -cubin`): one code object, its own unit.
    pub(super) fn cubin(&mut self, base: &Base, data: &[u8], loc: &Location) {
        let Some(header) = cuda::Cubin::parse(data) else { return };
        let unit = self.new_unit(loc, Format::Cubin);
        let n = cuda::cubin_extent(data).unwrap_or(data.len() as u64);
        let object = &data[..usize::try_from(n).unwrap_or(usize::MAX).min(data.len())];
        let info = CudaEntry {
            kind: EntryKind::Elf,
            arch: cuda::Arch { number: header.sm(), suffix: cuda::Suffix::None },
            flags: 0,
            relocatable: header.elf_type == 1,
            fatbin: None,
            unregistered: false,
        };
        let offset = self.offset_of(base, object);
        let payload = Payload::Plain(self.bytes_of(base, object));
        self.push_cuda(loc, info, object.len() as u64, offset, payload, unit);
        if let Some(record) = self.inv.objects.last_mut() {
            record.format = Format::Cubin;
        }
    }
}

fn child_slice<'d>(data: &'d [u8], child: &Child) -> Option<&'d [u8]> {
    let start = usize::try_from(child.start).ok()?;
    data.get(start..start.checked_add(usize::try_from(child.len).ok()?)?)
}

/// The offset an error names (from the start of the slice read).
fn error_offset(e: &cuda::CudaError) -> usize {
    use cuda::CudaError::*;
    match e {
        ShortHeader { at, .. }
        | BadMagic { at, .. }
        | BadHeaderSize { at, .. }
        | FatSizeBeyondEnd { at, .. }
        | ShortEntry { at, .. }
        | BadEntryHeaderSize { at, .. }
        | PayloadBeyondEnd { at, .. }
        | CompressedBeyondPayload { at, .. }
        | StringOutsideHeader { at, .. }
        | BadConcat { at, .. } => *at,
        _ => 0,
    }
}

impl Scanner<'_> {
    /// Checks that need only the header (run by `list` too: a damaged
    /// header is worth knowing about whatever the command).
    fn header_checks(&mut self, entry: &Entry, at: Option<u64>, loc: &Location) {
        let h = &entry.header;
        if let EntryKind::Other(k) = h.kind() {
            let msg = format!("CUDA entry of unknown kind {k:#x} (listed, not decoded)");
            self.diag(Severity::Warning, at, loc, msg);
        }
        if let Err(e) = entry.identifier().and(entry.options()).and(entry.stream()) {
            self.diag(Severity::Error, at, loc, format!("CUDA {e}"));
        }
        if let Some(Codec::Unknown(bits)) = h.codec() {
            let msg = format!("CUDA entry compressed with flag {bits:#x}, which no toolchain is known to write");
            self.diag(Severity::Error, at, loc, msg);
        }
    }

    /// `verify`: decodes the entry and checks what it holds against its
    /// header (docs/formats/cuda-fatbin.md §10).
    fn deep_entry(&mut self, entry: &Entry, at: Option<u64>, loc: &Location) {
        let h = &entry.header;
        if h.codec().is_some() && h.payload_size != u64::from(h.compressed_size).div_ceil(8) * 8 {
            let msg = format!(
                "CUDA entry: payload size {} is not the compressed size {} rounded up to 8",
                h.payload_size, h.compressed_size
            );
            self.diag(Severity::Warning, at, loc, msg);
        }
        if h.codec() == Some(Codec::Obfuscated) {
            return;
        }
        let data = match cuda::code_object_bytes(entry) {
            Ok(d) => d,
            Err(e) => return self.diag(Severity::Error, at, loc, format!("CUDA entry: {e}")),
        };
        match h.kind() {
            EntryKind::Elf => {
                let room = if h.codec().is_some() { data.len() } else { entry.stored.len() };
                self.check_cubin(&data, room, h.arch(), at, loc);
            }
            EntryKind::Ptx => self.check_ptx(&data, h, at, loc),
            _ => {}
        }
    }

    fn check_cubin(&mut self, data: &[u8], room: usize, arch: cuda::Arch, at: Option<u64>, loc: &Location) {
        let Some(cubin) = cuda::Cubin::parse(data) else {
            let msg = "CUDA ELF entry: the payload is not an ELF64 cubin (EM_CUDA)".to_string();
            return self.diag(Severity::Error, at, loc, msg);
        };
        match cuda::cubin_extent(data) {
            Some(n) if n <= room as u64 => {}
            _ => {
                let msg = "CUDA ELF entry: the cubin's section or program headers reach past its bytes".to_string();
                self.diag(Severity::Error, at, loc, msg);
            }
        }
        if cubin.sm() != arch.number {
            let msg = format!("CUDA ELF entry: the header says {arch} but the cubin is for sm_{}", cubin.sm());
            self.diag(Severity::Error, at, loc, msg);
        }
    }

    fn check_ptx(&mut self, text: &[u8], h: &cuda::EntryHeader, at: Option<u64>, loc: &Location) {
        if h.codec().is_some() && text.len() as u64 + 1 != h.uncompressed_size {
            let msg = format!(
                "CUDA PTX entry: the text is {} bytes but the header declares {} (text and NUL)",
                text.len(),
                h.uncompressed_size
            );
            self.diag(Severity::Warning, at, loc, msg);
        }
        let target = text
            .split(|&b| b == b'\n')
            .find_map(|line| line.trim_ascii().strip_prefix(b".target"))
            .map(|rest| rest.trim_ascii().split(|&b| b == b',' || b.is_ascii_whitespace()).next().unwrap_or(&[]));
        let expected = h.arch().to_string();
        match target {
            None => self.diag(Severity::Error, at, loc, "CUDA PTX entry: no .target line".to_string()),
            Some(t) if t != expected.as_bytes() => {
                let msg =
                    format!("CUDA PTX entry: .target {} but the header says {expected}", String::from_utf8_lossy(t));
                self.diag(Severity::Error, at, loc, msg);
            }
            Some(_) => {}
        }
    }
}

impl Scanner<'_> {
    /// Reads an object's `.nvFatBinSegment` records (docs/formats/cuda-fatbin.md §2): each must
    /// point at the start of a fat binary listed from this object (an
    /// error otherwise, as the runtime would register garbage). In an
    /// executable or shared library, fat binaries of `.nv_fatbin` that no
    /// record points at are marked unregistered: the runtime never loads
    /// them (cuRAND's first fat binary is one).
    pub(super) fn cuda_wrappers(&mut self, base: &Base, file: &HostFile, data: &[u8], loc: &Location) {
        let Some(object_at) = self.offset_of(base, data) else { return };
        let Some((section, name)) = WRAPPER_SECTIONS.iter().find_map(|&name| Some((file.record_section(name)?, name)))
        else {
            return;
        };
        let sloc = loc.with(Step::Section(name.into()));
        let Some(records) = section.data else {
            return self.diag(Severity::Error, Some(object_at), &sloc, "section data cannot be read".into());
        };
        let starts: HashSet<u64> = self.inv.objects.iter().filter_map(|o| o.cuda?.fatbin).collect();
        let relocatable = file.relocatable();
        let relocations = &section.relocations;
        let rebased = file.pe_base_relocations(data);
        let mut registered = HashSet::new();
        for w in cuda::wrapper::wrappers(records) {
            let at = self.offset_of(base, records).map(|o| o + w.offset as u64);
            if !w.is_valid() {
                let msg = format!(
                    "CUDA registration record at {:#x}: magic {:#010x} version {} (expected 0x466243b1, version 1 or 2)",
                    w.offset, w.magic, w.version
                );
                self.diag(Severity::Error, at, &sloc, msg);
                continue;
            }
            let target = if relocatable {
                relocations
                    .get(&(w.offset as u64 + 8))
                    .and_then(|&(start, addend)| start?.checked_add_signed(addend.unwrap_or(w.address.cast_signed())))
            } else {
                file.file_offset(w.address)
            };
            let field = section.address.wrapping_add(w.offset as u64 + 8);
            if let Some(rebased) = &rebased
                && !rebased.contains(&field)
            {
                let msg = format!(
                    "CUDA registration record at {:#x}: no base relocation fixes its fat binary address, so the runtime reads garbage when Windows loads the image at another base",
                    w.offset
                );
                self.diag(Severity::Warning, at, &sloc, msg);
            }
            match target.map(|t| object_at + t) {
                Some(t) if starts.contains(&t) => {
                    registered.insert(t);
                }
                _ => {
                    let msg = format!(
                        "CUDA registration record at {:#x} points at no fat binary (address {:#x})",
                        w.offset, w.address
                    );
                    self.diag(Severity::Error, at, &sloc, msg);
                }
            }
        }
        if relocatable || registered.is_empty() {
            return;
        }
        for o in &mut self.inv.objects {
            if let Some(c) = o.cuda.as_mut()
                && !c.relocatable
                && c.fatbin.is_some_and(|f| f >= object_at && f < object_at + data.len() as u64)
                && !c.fatbin.is_some_and(|f| registered.contains(&f))
            {
                c.unregistered = true;
            }
        }
    }
}
