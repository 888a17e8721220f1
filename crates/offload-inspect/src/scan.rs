//! The scanner: containers (archives, objects, bitcode) lead to regions
//! (sections or whole files), and regions hold payloads placed back to back
//! (bundles, compressed bundles, OffloadBinaries, separated by zero
//! padding), whose entries are the code objects.

use super::ccob::{self, Inner};
use super::checks::{self, EntryView};
use super::deep;
use super::id::{canonical_target_id, split_entry_id};
use super::{Bytes, CodeObject, Diagnostic, Format, Inventory, Location, Options, Payload, Severity, Step, Unit};
use object::read::archive::ArchiveFile;
use object_file::HostFile;
use offload_format::bundle::binary::MAGIC as BUNDLE_MAGIC;
use offload_format::bundle::compressed::{self, MAGIC as CCOB_MAGIC};
use offload_format::offload_binary::{self, Binaries, MAGIC as OB_MAGIC};
use std::collections::HashMap;
use std::sync::Arc;

mod cuda;
pub(crate) mod kpack;
mod object_file;
mod pe_records;
mod records;

/// Finds every code object in `data`. `name` is the file's name, used for
/// archive locations (`member <name>(<member>)`).
pub fn scan<'a>(data: &'a [u8], name: &str, opts: &Options) -> Inventory<'a> {
    scan_counted(data, name, opts).0
}

/// [`scan`], and how many compressed bundles a deep scan took as checked in
/// parallel beforehand.
pub(crate) fn scan_counted<'a>(data: &'a [u8], name: &str, opts: &Options) -> (Inventory<'a>, usize) {
    let mut s = Scanner::new(data, opts);
    let mut prechecked = 0;
    if opts.deep {
        // The compressed bundles are found by a headers-only scan first, and
        // checked in parallel; the deep scan then takes their diagnostics
        // where it would have made them, so the order of everything it
        // reports is that of a scan on one core.
        let mut finder = Scanner::new(data, &Options { deep: false, ..*opts });
        finder.found = Some(Vec::new());
        finder.run(name);
        s.checked = deep::check_all(finder.found.unwrap_or_default(), opts.workers);
        prechecked = s.checked.len();
    }
    s.run(name);
    (s.inv, prechecked - s.checked.len())
}

/// The buffer a slice being scanned belongs to: the file, or a buffer the
/// scan decoded.
#[derive(Clone, Copy)]
struct Base<'s> {
    data: &'s [u8],
    owned: Option<usize>,
}

/// Where `inner` lies in `outer`, if it is a part of it.
fn subrange(outer: &[u8], inner: &[u8]) -> Option<(usize, usize)> {
    let start = (inner.as_ptr() as usize).checked_sub(outer.as_ptr() as usize)?;
    (start.checked_add(inner.len())? <= outer.len()).then_some((start, inner.len()))
}

fn looks_like_ccob(data: &[u8]) -> bool {
    data.starts_with(CCOB_MAGIC) && compressed::read_blob(data).is_ok()
}

fn looks_like_offload_binary(data: &[u8]) -> bool {
    matches!(Binaries::new(data).next(), Some(Ok(_) | Err(offload_binary::read::Error::Compressed { .. })))
}

/// Whether a section whose name says nothing holds offload payloads.
fn sniff(data: &[u8]) -> bool {
    data.starts_with(BUNDLE_MAGIC) || looks_like_ccob(data) || looks_like_offload_binary(data)
}

/// Section names that hold offload payloads (and nothing else).
fn is_offload_section(name: &str) -> bool {
    matches!(name, ".hip_fatbin" | "__hip_fatbin" | ".hip_fat") || name.starts_with(".llvm.offloading")
}

/// Whether a payload found inside a code object is worth opening.
pub(super) fn nests(payload: &[u8], host: bool) -> bool {
    if payload.starts_with(BUNDLE_MAGIC)
        || payload.starts_with(CCOB_MAGIC)
        || payload.starts_with(&OB_MAGIC)
        || payload.starts_with(b"!<arch>\n")
        || payload.starts_with(&offload_format::cuda::FATBIN_MAGIC_BYTES)
    {
        return true;
    }
    host && offload_format::bundle::object::looks_like_object(payload)
}

struct Scanner<'a> {
    file: &'a [u8],
    opts: Options,
    inv: Inventory<'a>,
    /// Payloads and sections already opened, by the address of their first
    /// byte, and whether they held code objects. Entries, images and
    /// sections may point at the same bytes; opening them again at every
    /// reference made a 3 KiB file of OffloadBinaries nested six deep, ten
    /// images each pointing at the next level, list a million objects (and
    /// eight deep, a hundred million).
    opened: HashMap<usize, bool>,
    /// When set, the compressed bundles lying in the file are noted here
    /// (to be checked in parallel before the deep scan).
    found: Option<Vec<deep::Found<'a>>>,
    /// Compressed bundles checked before the deep scan.
    checked: deep::Checked,
}

impl<'a> Scanner<'a> {
    fn new(file: &'a [u8], opts: &Options) -> Self {
        let mut opened = HashMap::new();
        opened.insert(file.as_ptr() as usize, true);
        Scanner { file, opts: *opts, inv: Inventory::default(), opened, found: None, checked: Default::default() }
    }

    fn run(&mut self, name: &str) {
        let base = Base { data: self.file, owned: None };
        self.container(&base, self.file, name, &Location::default(), 0, true);
    }

    fn bytes_of(&self, base: &Base, sub: &[u8]) -> Bytes<'a> {
        let (start, len) = subrange(base.data, sub).unwrap_or((0, 0));
        match base.owned {
            None => Bytes::Borrowed(self.file.get(start..start + len).unwrap_or(&[])),
            Some(buffer) => Bytes::Owned { buffer, start, len },
        }
    }

    /// Absolute offset of `sub` in the file, when it lies there.
    fn offset_of(&self, base: &Base, sub: &[u8]) -> Option<u64> {
        if base.owned.is_some() {
            return None;
        }
        subrange(self.file, sub).map(|(s, _)| s as u64)
    }

    fn diag(&mut self, severity: Severity, offset: Option<u64>, loc: &Location, message: String) {
        self.inv.diagnostics.push(Diagnostic { severity, offset, location: loc.to_string(), message });
    }

    fn new_unit(&mut self, loc: &Location, format: Format) -> usize {
        self.inv.units.push(Unit { location: loc.clone(), format });
        self.inv.units.len() - 1
    }

    fn own(&mut self, data: Vec<u8>) -> (Arc<[u8]>, usize) {
        let rc: Arc<[u8]> = data.into();
        self.inv.owned.push(rc.clone());
        (rc, self.inv.owned.len() - 1)
    }

    /// Dispatches on what `data` is. `top` is set for files and archive
    /// members, where bitcode is looked into too.
    fn container(&mut self, base: &Base, data: &[u8], name: &str, loc: &Location, depth: usize, top: bool) {
        if depth > self.opts.max_depth {
            let at = self.offset_of(base, data);
            let msg = format!("containers nested more than {} deep are not opened", self.opts.max_depth);
            self.diag(Severity::Warning, at, loc, msg);
            return;
        }
        if data.starts_with(BUNDLE_MAGIC) || data.starts_with(CCOB_MAGIC) || data.starts_with(&OB_MAGIC) {
            return self.region(base, data, loc, depth, true);
        }
        if data.starts_with(&offload_format::cuda::FATBIN_MAGIC_BYTES) {
            return self.cuda_region(base, data, loc, false);
        }
        if offload_format::cuda::is_cubin(data) {
            return self.cubin(base, data, loc);
        }
        if offload_format::kpack::archive::has_magic(data) {
            return self.kpack_archive(base, data, loc);
        }
        if offload_format::elf::has_ident(data) {
            return self.object(base, data, loc, depth);
        }
        match object::FileKind::parse(data) {
            Ok(object::FileKind::Archive) => self.archive(base, data, name, loc, depth),
            Ok(
                object::FileKind::Coff
                | object::FileKind::CoffBig
                | object::FileKind::MachO32
                | object::FileKind::MachO64
                | object::FileKind::Pe32
                | object::FileKind::Pe64,
            ) => self.object(base, data, loc, depth),
            _ if top && offload_binary::is_bitcode(data) => self.bitcode(data, name, loc, depth),
            _ => {
                if let Some(comment) = ccob::text_comment(data, 4096) {
                    self.text_bundle(base, data, comment, loc);
                }
            }
        }
    }

    fn archive(&mut self, base: &Base, data: &[u8], name: &str, loc: &Location, depth: usize) {
        let at = self.offset_of(base, data);
        let archive = match ArchiveFile::parse(data) {
            Ok(a) => a,
            Err(e) => return self.diag(Severity::Error, at, loc, format!("malformed archive: {e}")),
        };
        if archive.is_thin() {
            let msg = "thin archive: its members live in other files, which are not read".to_string();
            return self.diag(Severity::Warning, at, loc, msg);
        }
        for member in archive.members() {
            let member = match member {
                Ok(m) => m,
                Err(e) => return self.diag(Severity::Error, at, loc, format!("malformed archive: {e}")),
            };
            let member_name = String::from_utf8_lossy(member.name()).into_owned();
            let mloc = loc.with(Step::Member { archive: name.to_string(), member: member_name.clone() });
            match member.data(data) {
                Ok(bytes) => self.container(base, bytes, &member_name, &mloc, depth + 1, true),
                Err(e) => {
                    let msg = format!("archive member '{member_name}': {e}");
                    self.diag(Severity::Error, at, loc, msg);
                }
            }
        }
    }

    fn object(&mut self, base: &Base, data: &[u8], loc: &Location, depth: usize) {
        let at = self.offset_of(base, data);
        let file = match HostFile::parse(data) {
            Ok(f) => f,
            Err(e) => return self.diag(Severity::Error, at, loc, format!("malformed object file: {e}")),
        };
        let mut bundle_unit = None;
        let mut bundle_sections: Vec<(&[u8], &[u8])> = Vec::new();
        for section in file.sections() {
            let name = section.name;
            let sloc = loc.with(Step::Section(section.display));
            let known = is_offload_section(name) || name.starts_with("__CLANG_OFFLOAD_BUNDLE__");
            let bytes = match section.data {
                Ok(b) => b,
                Err(e) => {
                    if known {
                        self.diag(Severity::Error, at, &sloc, format!("section data cannot be read: {e}"));
                    }
                    continue;
                }
            };
            if let Some(id) = name.strip_prefix("__CLANG_OFFLOAD_BUNDLE__") {
                let unit = *bundle_unit.get_or_insert_with(|| self.new_unit(loc, Format::Bundle));
                let host = bytes == [0];
                let record = self.push_entry(base, Format::Bundle, id.as_bytes(), bytes, unit, &sloc);
                bundle_sections.push((id.as_bytes(), bytes));
                if !host {
                    self.nested(base, bytes, &sloc, depth, record, false);
                }
            } else if let Some(relocatable) = cuda::fatbin_section(name) {
                if self.seen_before(base, bytes, &sloc).is_none() {
                    self.cuda_region(base, bytes, &sloc, relocatable);
                }
            } else if is_offload_section(name) || sniff(bytes) {
                // Sections may overlap; the same bytes are listed once.
                if self.seen_before(base, bytes, &sloc).is_none() {
                    // lld-link 22 links `.llvm.offloading` (the OpenMP
                    // images) and `.llvm.rodata.offloading` (their entry
                    // names) into one `.llvm` section of a PE image: the
                    // names follow the images (docs/formats/pe.md §7).
                    let names_after = name == ".llvm" && file.is_pe();
                    self.region_then(base, bytes, &sloc, depth, is_offload_section(name), names_after);
                }
            }
        }
        self.cuda_wrappers(base, &file, data, loc);
        if self.opts.deep {
            self.registration(base, data, loc);
        }
        if self.opts.deep && !bundle_sections.is_empty() {
            let in_file = base.owned.is_none();
            let views: Vec<EntryView> = bundle_sections
                .iter()
                .map(|(id, bytes)| EntryView {
                    id,
                    start: if in_file { subrange(self.file, bytes).map_or(0, |(s, _)| s as u64) } else { 0 },
                    len: bytes.len() as u64,
                    payload: Some(bytes),
                })
                .collect();
            let mut out = Vec::new();
            checks::entries(&views, &checks::Context::sections(in_file, loc), &mut out);
            self.inv.diagnostics.extend(out);
        }
    }

    fn bitcode(&mut self, data: &[u8], name: &str, loc: &Location, depth: usize) {
        let found = offload_binary::container::scan(data, name);
        if let Some(e) = found.error {
            self.diag(Severity::Error, None, loc, e.detail());
        }
        for package in found.packages {
            let global = match &package.origin {
                offload_binary::container::Origin::Bitcode { global } => global.clone(),
                _ => String::new(),
            };
            let (rc, index) = self.own(package.data.into_owned());
            let owned = Base { data: &rc, owned: Some(index) };
            self.region(&owned, &rc, &loc.with(Step::Global(global)), depth, true);
        }
    }

    /// Walks payloads placed back to back in `data`, skipping zero padding.
    /// In a `known` region, bytes that are no payload are an error.
    fn region(&mut self, base: &Base, data: &[u8], loc: &Location, depth: usize, known: bool) {
        self.region_then(base, data, loc, depth, known, false);
    }

    /// [`Self::region`]; `other_after`: bytes that are no payload after
    /// the last payload are other data of the section, not damage.
    fn region_then(&mut self, base: &Base, data: &[u8], loc: &Location, depth: usize, known: bool, other_after: bool) {
        let mut pos = 0usize;
        let mut spans = Vec::new();
        let mut ob_unit = None;
        // Zero runs of any length are padding: a pruned .hip_fatbin is
        // mostly zeros between its fat binaries.
        while let Some(skip) = data.get(pos..).map(crate::layout::skip_zeros).filter(|&s| pos + s < data.len()) {
            pos += skip;
            let rest = &data[pos..];
            let (objects, units) = (self.inv.objects.len(), self.inv.units.len());
            let consumed = if rest.starts_with(BUNDLE_MAGIC) {
                self.bundle(base, rest, loc, depth)
            } else if rest.starts_with(CCOB_MAGIC) {
                self.compressed(base, rest, loc, depth)
            } else if rest.starts_with(&OB_MAGIC) {
                self.offload_binaries(base, rest, loc, depth, &mut ob_unit)
            } else {
                // Before any payload: damage in a known section; after
                // one: damage unless other data may follow.
                let damaged = if spans.is_empty() { known } else { !other_after };
                if damaged {
                    let at = self.offset_of(base, rest);
                    let msg = format!(
                        "{} bytes at region offset {pos:#x} are neither a bundle, a compressed bundle nor an OffloadBinary",
                        rest.len()
                    );
                    self.diag(Severity::Error, at, loc, msg);
                }
                break;
            };
            spans.push((objects, self.inv.objects.len(), units, self.inv.units.len()));
            match consumed {
                Some(n) if n > 0 => pos += n,
                _ => break,
            }
        }
        if spans.len() > 1 {
            let at = loc.0.len();
            for (k, (o0, o1, u0, u1)) in spans.into_iter().enumerate() {
                for o in &mut self.inv.objects[o0..o1] {
                    o.location.0.insert(at.min(o.location.0.len()), Step::Index(k));
                }
                for u in u0..u1 {
                    if Some(u) != ob_unit {
                        let l = &mut self.inv.units[u].location.0;
                        l.insert(at.min(l.len()), Step::Index(k));
                    }
                }
            }
        }
    }

    /// Adds one record for a bundle entry (binary, text, or object section).
    fn push_entry(
        &mut self,
        base: &Base,
        format: Format,
        id: &[u8],
        payload: &[u8],
        unit: usize,
        loc: &Location,
    ) -> usize {
        let id = String::from_utf8_lossy(id).into_owned();
        let split = split_entry_id(&id);
        let (target_id, target_id_error) = match canonical_target_id(&split.triple, &split.target) {
            Ok(t) => (t, None),
            Err(e) => (split.target.clone(), Some(e.to_string())),
        };
        self.inv.objects.push(CodeObject {
            location: loc.clone(),
            format,
            id,
            offload_kind: split.kind,
            triple: split.triple,
            target_id,
            target_id_error,
            stored_target: split.target,
            size: payload.len() as u64,
            offset: self.offset_of(base, payload),
            compressed: false,
            unit,
            container: false,
            image_kind: None,
            payload: Payload::Plain(self.bytes_of(base, payload)),
            cuda: None,
            kpack: None,
        });
        self.inv.objects.len() - 1
    }

    /// Whether the bytes at `data` were opened before (and then notes it);
    /// otherwise remembers them as opened.
    fn seen_before(&mut self, base: &Base, data: &[u8], loc: &Location) -> Option<bool> {
        if data.is_empty() {
            return None;
        }
        match self.opened.get(&(data.as_ptr() as usize)) {
            Some(&found) => {
                let at = self.offset_of(base, data);
                let msg = "holds the same bytes as a payload listed before; its contents are listed once".to_string();
                self.diag(Severity::Warning, at, loc, msg);
                Some(found)
            }
            None => {
                self.opened.insert(data.as_ptr() as usize, false);
                None
            }
        }
    }

    /// Opens a payload that holds further code objects.
    fn nested(&mut self, base: &Base, payload: &[u8], loc: &Location, depth: usize, record: usize, host: bool) {
        if !nests(payload, host) {
            return;
        }
        let found = match self.seen_before(base, payload, loc) {
            Some(found) => found,
            None => {
                let before = self.inv.objects.len();
                self.container(base, payload, "", loc, depth + 1, false);
                let found = self.inv.objects.len() > before;
                self.opened.insert(payload.as_ptr() as usize, found);
                found
            }
        };
        if found && let Some(r) = self.inv.objects.get_mut(record) {
            r.container = true;
        }
    }

    /// A binary bundle at the start of `rest`; returns how far it reaches.
    fn bundle(&mut self, base: &Base, rest: &[u8], loc: &Location, depth: usize) -> Option<usize> {
        let bundle_at = self.offset_of(base, rest);
        let parsed = checks::read_bundle(rest);
        if let Some(problem) = &parsed.problem {
            let msg = format!("bundle{}: {}", checks::at(bundle_at), problem.describe(bundle_at));
            self.diag(Severity::Error, bundle_at.map(|b| b.saturating_add(problem.offset)), loc, msg);
        }
        let unit = self.new_unit(loc, Format::Bundle);
        if self.opts.deep {
            let mut out = Vec::new();
            checks::bundle(&parsed, &checks::Context::bundle(bundle_at, loc), &mut out);
            self.inv.diagnostics.extend(out);
        }
        for e in &parsed.entries {
            let payload = e.payload.unwrap_or(&[]);
            let record = self.push_entry(base, Format::Bundle, e.id, payload, unit, loc);
            let eloc = loc.with(Step::Entry(self.inv.objects[record].id.clone()));
            let host = self.inv.objects[record].offload_kind == "host";
            self.nested(base, payload, &eloc, depth, record, host);
        }
        parsed.problem.is_none().then_some(parsed.end)
    }

    /// A text bundle (the whole of `data`).
    fn text_bundle(&mut self, base: &Base, data: &[u8], comment: &str, loc: &Location) {
        let unit = self.new_unit(loc, Format::TextBundle);
        let (entries, problem) = ccob::text_entries(data, comment);
        if let Some(p) = problem {
            let at = self.offset_of(base, data);
            self.diag(Severity::Error, at, loc, p);
        }
        let views: Vec<EntryView> = entries
            .iter()
            .map(|e| EntryView { id: &e.id, start: e.start, len: e.len, payload: checks::slice(data, e.start, e.len) })
            .collect();
        if self.opts.deep {
            let mut out = Vec::new();
            checks::entries(&views, &checks::Context::bundle(self.offset_of(base, data), loc), &mut out);
            self.inv.diagnostics.extend(out);
        }
        for v in views {
            let payload = v.payload.unwrap_or(&[]);
            self.push_entry(base, Format::TextBundle, v.id, payload, unit, loc);
        }
    }

    /// A compressed bundle at the start of `rest`.
    fn compressed(&mut self, base: &Base, rest: &[u8], loc: &Location, depth: usize) -> Option<usize> {
        let at = self.offset_of(base, rest);
        let blob = match compressed::read_blob(rest) {
            Ok(b) => b,
            Err(e) => {
                self.diag(Severity::Error, at, loc, format!("compressed bundle{}: {e}", checks::at(at)));
                return None;
            }
        };
        let unit = self.new_unit(loc, Format::CompressedBundle);
        let blob_bytes = self.bytes_of(base, &rest[..blob.len]);
        match ccob::peek(&blob) {
            Ok(inner) => self.push_compressed(&inner, blob_bytes, unit, loc),
            Err(e) => self.diag(Severity::Error, at, loc, format!("compressed bundle{}: {e}", checks::at(at))),
        }
        let file: &'a [u8] = self.file;
        if let (Some(found), None) = (&mut self.found, base.owned)
            && let Some(in_file) = subrange(file, rest).and_then(|(s, _)| file.get(s..))
            && let Ok(blob) = compressed::read_blob(in_file)
        {
            found.push(deep::Found { blob, at, location: loc.clone() });
        }
        if self.opts.deep {
            self.deep_compressed(&blob, at, loc, depth);
        }
        Some(blob.len)
    }

    fn push_compressed(&mut self, inner: &Inner, blob: Bytes<'a>, unit: usize, loc: &Location) {
        for e in &inner.entries {
            let id = String::from_utf8_lossy(&e.id).into_owned();
            let split = split_entry_id(&id);
            let (target_id, target_id_error) = match canonical_target_id(&split.triple, &split.target) {
                Ok(t) => (t, None),
                Err(err) => (split.target.clone(), Some(err.to_string())),
            };
            self.inv.objects.push(CodeObject {
                location: loc.clone(),
                format: Format::CompressedBundle,
                id,
                offload_kind: split.kind,
                triple: split.triple,
                target_id,
                target_id_error,
                stored_target: split.target.clone(),
                size: e.len,
                offset: None,
                compressed: true,
                unit,
                container: false,
                image_kind: None,
                payload: Payload::Compressed { blob, start: e.start, len: e.len },
                cuda: None,
                kpack: None,
            });
        }
    }

    /// `verify`: decompresses, checks size and hash, checks the bundle inside
    /// and opens nested payloads. Bundles checked beforehand give their
    /// findings without being decoded again, unless they hold payloads to
    /// open.
    fn deep_compressed(&mut self, blob: &compressed::Blob, at: Option<u64>, loc: &Location, depth: usize) {
        let (out, nested) = match self.checked.take(blob, at, loc) {
            Some(diagnostics) => (diagnostics, None),
            None => deep::check(blob, at, loc, &mut Vec::new()),
        };
        self.inv.diagnostics.extend(out);
        let Some((data, nested)) = nested else { return };
        let (rc, index) = self.own(data);
        let owned = Base { data: &rc, owned: Some(index) };
        for (id, start, len) in nested {
            let Some(payload) = usize::try_from(start).ok().and_then(|s| rc.get(s..s.checked_add(len)?)) else {
                continue;
            };
            let eloc = loc.with(Step::Entry(id));
            if self.seen_before(&owned, payload, &eloc).is_none() {
                self.container(&owned, payload, "", &eloc, depth + 1, false);
            }
        }
    }

    /// The OffloadBinary at the start of `rest` (one header; version 2 may
    /// hold several entries). All binaries of a region form one unit.
    fn offload_binaries(
        &mut self,
        base: &Base,
        rest: &[u8],
        loc: &Location,
        depth: usize,
        unit: &mut Option<usize>,
    ) -> Option<usize> {
        let at = self.offset_of(base, rest);
        let unit = *unit.get_or_insert_with(|| self.new_unit(loc, Format::OffloadBinary));
        // A compressed version 3 binary (docs/llvm-releases.md): its entries
        // are read from the inflated copy (bounded like a compressed
        // bundle), and the region goes on after its stored size rounded up
        // to 8.
        if let Some(Err(offload_binary::read::Error::Compressed { .. })) = Binaries::new(rest).next() {
            let size = offload_format::bytes::u64_le(rest, 8)?;
            match offload_binary::read::inflate(rest, at.unwrap_or(0), crate::decode::MEMORY_BUDGET) {
                Ok(data) => {
                    let (rc, index) = self.own(data);
                    let owned = Base { data: &rc, owned: Some(index) };
                    self.offload_binaries(&owned, &rc, loc, depth, &mut Some(unit));
                }
                Err(e) => {
                    self.diag(Severity::Error, at, loc, format!("OffloadBinary: {}", e.detail()));
                    return None;
                }
            }
            return usize::try_from(size.next_multiple_of(8)).ok();
        }
        // Only the first header's entries: one for version 1, its entry
        // count for version 2.
        let mut found = Vec::new();
        let mut binaries = Binaries::new(rest);
        loop {
            match binaries.next() {
                Some(Ok(b)) if b.offset() == 0 => {
                    let count = if b.version() == 1 { 1 } else { b.header().entry_size_or_count };
                    found.push(b);
                    if found.len() as u64 >= count {
                        break;
                    }
                }
                Some(Err(e)) if e.offset() == 0 => {
                    let msg = format!("OffloadBinary: {}", e.detail());
                    self.diag(Severity::Error, at, loc, msg);
                    return None;
                }
                _ => break,
            }
        }
        let consumed = found.first().map_or(0, |b| b.data().len());
        for (j, b) in found.iter().enumerate() {
            let triple = b.triple().into_owned();
            let arch = b.arch().into_owned();
            let (target_id, target_id_error) = match canonical_target_id(&triple, &arch) {
                Ok(t) => (t, None),
                Err(e) => (arch.clone(), Some(e.to_string())),
            };
            let image = b.image();
            if self.opts.deep {
                let mut out = Vec::new();
                checks::offload_binary(b, self.offset_of(base, b.data()), loc, &mut out);
                self.inv.diagnostics.extend(out);
            }
            self.inv.objects.push(CodeObject {
                location: loc.clone(),
                format: Format::OffloadBinary,
                id: format!("{triple}-{arch}"),
                offload_kind: b.offload_kind().name().to_string(),
                triple: super::id::display_triple(&triple),
                target_id,
                target_id_error,
                stored_target: arch.clone(),
                size: image.len() as u64,
                offset: self.offset_of(base, image),
                compressed: false,
                unit,
                container: false,
                image_kind: Some(b.image_kind()),
                payload: Payload::Plain(self.bytes_of(base, image)),
                cuda: None,
                kpack: None,
            });
            let record = self.inv.objects.len() - 1;
            self.nested(base, image, &loc.with(Step::Image(j)), depth, record, false);
        }
        Some(consumed)
    }
}
