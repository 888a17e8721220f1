//! Structural checks: reading a bundle's entry table entry by entry (so
//! that a damaged table still yields the entries before the damage), and
//! the deep checks `verify` adds (overlaps, duplicate and invalid IDs,
//! hashes, and whether each code object is what its ID says).

use super::elf_flags::{self, Setting};
use super::id::{canonical_target_id, split_entry_id, unknown_processor};
use super::{Diagnostic, Location, Severity};
use offload_format::bytes::u64_le;
use offload_format::offload_binary::OffloadBinary;
use offload_format::target_id::{BundleEntryId, find_conflicting_targets};
use offload_format::triple::Triple;

/// ` at 0x…` when the offset is known.
pub(crate) fn at(offset: Option<u64>) -> String {
    offset.map(|o| format!(" at {o:#x}")).unwrap_or_default()
}

/// `len` bytes at `start` of `data`, if they are there.
pub(crate) fn slice(data: &[u8], start: u64, len: u64) -> Option<&[u8]> {
    let s = usize::try_from(start).ok()?;
    data.get(s..s.checked_add(usize::try_from(len).ok()?)?)
}

/// One entry of a bundle's table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawEntry<'d> {
    pub id: &'d [u8],
    /// Payload offset and size as stored (relative to the bundle).
    pub start: u64,
    pub len: u64,
    /// The payload, when it lies inside the data.
    pub payload: Option<&'d [u8]>,
}

/// What stopped the reading of an entry table.
#[derive(Clone, Debug)]
pub(crate) struct Problem {
    /// Offset (relative to the bundle) of the field concerned.
    pub offset: u64,
    pub message: String,
}

impl Problem {
    /// The message, with the offset made absolute when `base` is known.
    pub fn describe(&self, base: Option<u64>) -> String {
        match base {
            Some(b) => format!("{} (offset {:#x})", self.message, b.saturating_add(self.offset)),
            None => format!("{} (bundle offset {:#x})", self.message, self.offset),
        }
    }
}

/// A bundle's entry table, as far as it could be read.
#[derive(Clone, Debug, Default)]
pub(crate) struct ParsedBundle<'d> {
    pub entries: Vec<RawEntry<'d>>,
    /// End of the header (magic, count, records).
    pub header_end: u64,
    /// End of the bundle: the header or the last payload, whichever is
    /// further.
    pub end: usize,
    pub problem: Option<Problem>,
}

/// Reads the entry table of the binary bundle at the start of `data`,
/// keeping the entries before the first damaged record.
pub(crate) fn read_bundle(data: &[u8]) -> ParsedBundle<'_> {
    let mut out = ParsedBundle::default();
    let len = data.len() as u64;
    let Some(count) = u64_le(data, 24) else {
        out.problem = Some(Problem { offset: 24, message: "the entry count is cut off".into() });
        return out;
    };
    let mut pos = 32usize;
    let mut end = 32u64;
    for index in 0..count {
        let record = pos as u64;
        let fields = (u64_le(data, pos), u64_le(data, pos + 8), u64_le(data, pos + 16));
        let (Some(start), Some(size), Some(id_len)) = fields else {
            out.problem = Some(Problem {
                offset: record,
                message: format!("the header claims {count} entries, but the record of entry {index} is cut off"),
            });
            break;
        };
        pos += 24;
        let Some(id) = usize::try_from(id_len).ok().and_then(|l| data.get(pos..pos.checked_add(l)?)) else {
            out.problem = Some(Problem {
                offset: record + 16,
                message: format!("entry {index} claims a {id_len}-byte ID, which runs past the end of the data"),
            });
            break;
        };
        pos += id.len();
        let payload = if start == 0 { None } else { slice(data, start, size) };
        if payload.is_none() {
            out.problem = Some(Problem {
                offset: record,
                message: format!(
                    "entry {index} ('{}') claims {size} bytes at offset {start:#x}, outside the {len} bytes available",
                    String::from_utf8_lossy(id)
                ),
            });
            break;
        }
        end = end.max(start + size);
        out.entries.push(RawEntry { id, start, len: size, payload });
    }
    out.header_end = pos as u64;
    out.end = usize::try_from(end.max(pos as u64)).unwrap_or(usize::MAX);
    out
}

/// How positions inside the checked data are reported.
pub(crate) struct Context {
    /// Absolute offset of the data's start in the file, when it lies there.
    base: Option<u64>,
    /// The data is a decompressed bundle; diagnostics point at the
    /// compressed bundle (`anchor`) and name decompressed offsets.
    compressed: bool,
    anchor: Option<u64>,
    location: String,
}

impl Context {
    pub fn bundle(base: Option<u64>, loc: &Location) -> Context {
        Context { base, compressed: false, anchor: base, location: loc.to_string() }
    }

    pub fn compressed(anchor: Option<u64>, loc: &Location) -> Context {
        Context { base: None, compressed: true, anchor, location: loc.to_string() }
    }

    /// Object sections: entry starts are absolute file offsets.
    pub fn sections(in_file: bool, loc: &Location) -> Context {
        Context { base: in_file.then_some(0), compressed: false, anchor: None, location: loc.to_string() }
    }

    fn pos(&self, rel: u64) -> String {
        match (self.compressed, self.base) {
            (true, _) => format!("decompressed offset {rel:#x}"),
            (false, Some(b)) => format!("offset {:#x}", b.saturating_add(rel)),
            (false, None) => format!("offset {rel:#x} of its container"),
        }
    }

    fn push(&self, out: &mut Vec<Diagnostic>, severity: Severity, rel: Option<u64>, message: String) {
        let offset = if self.compressed { self.anchor } else { self.base.zip(rel).map(|(b, r)| b.saturating_add(r)) };
        out.push(Diagnostic { severity, offset, location: self.location.clone(), message });
    }
}

/// An entry to check: its ID, where its payload lies and the payload.
pub(crate) struct EntryView<'d> {
    pub id: &'d [u8],
    pub start: u64,
    pub len: u64,
    pub payload: Option<&'d [u8]>,
}

/// Deep checks of a binary bundle: payloads that overlap the header, then
/// the entry checks.
pub(crate) fn bundle(parsed: &ParsedBundle, ctx: &Context, out: &mut Vec<Diagnostic>) {
    if parsed.entries.is_empty() && parsed.problem.is_none() {
        ctx.push(out, Severity::Warning, Some(0), "bundle has no entries".into());
    }
    for e in &parsed.entries {
        if e.len > 0 && e.start < parsed.header_end {
            let msg = format!(
                "entry '{}' at {} overlaps the bundle header, which ends at {}",
                String::from_utf8_lossy(e.id),
                ctx.pos(e.start),
                ctx.pos(parsed.header_end)
            );
            ctx.push(out, Severity::Error, Some(e.start), msg);
        }
    }
    let views: Vec<EntryView> =
        parsed.entries.iter().map(|e| EntryView { id: e.id, start: e.start, len: e.len, payload: e.payload }).collect();
    entries(&views, ctx, out);
}

/// Checks shared by every kind of bundle: overlapping payloads, duplicate
/// IDs, invalid IDs, several hosts, conflicting target IDs, and whether
/// each payload is the code object its ID names.
pub(crate) fn entries(views: &[EntryView], ctx: &Context, out: &mut Vec<Diagnostic>) {
    let name = |v: &EntryView| String::from_utf8_lossy(v.id).into_owned();
    let mut ranges: Vec<&EntryView> = views.iter().filter(|v| v.len > 0).collect();
    ranges.sort_by_key(|v| v.start);
    for pair in ranges.windows(2) {
        if pair[0].start.saturating_add(pair[0].len) > pair[1].start {
            let msg = format!(
                "entries '{}' ({} bytes at {}) and '{}' (at {}) overlap",
                name(pair[0]),
                pair[0].len,
                ctx.pos(pair[0].start),
                name(pair[1]),
                ctx.pos(pair[1].start)
            );
            ctx.push(out, Severity::Error, Some(pair[1].start), msg);
        }
    }
    let mut hosts = 0;
    let mut parsed_ids = Vec::new();
    // IDs seen so far: a set, as a search of the earlier entries for each
    // took quadratic time (minutes for 200,000 entries).
    let mut seen = std::collections::HashSet::with_capacity(views.len());
    for v in views {
        let id = name(v);
        if !seen.insert(v.id) {
            let msg = format!("ID '{id}' appears more than once; readers keep only one of the entries");
            ctx.push(out, Severity::Error, Some(v.start), msg);
        }
        let split = split_entry_id(&id);
        if !matches!(split.kind.as_str(), "host" | "hip" | "hipv4" | "openmp" | "hcc") {
            let msg = format!("entry '{id}': unknown offload kind '{}'", split.kind);
            ctx.push(out, Severity::Error, Some(v.start), msg);
        }
        if !Triple::parse(&split.triple).is_known_arch() {
            let msg = format!("entry '{id}': unknown architecture in triple '{}'", split.triple);
            ctx.push(out, Severity::Error, Some(v.start), msg);
        }
        target_id(&format!("entry '{id}'"), &split.triple, &split.target, Some(v.start), ctx, out);
        if split.kind == "host" {
            hosts += 1;
        } else {
            parsed_ids.push(BundleEntryId::parse(&id));
            if let Some(p) = v.payload {
                code_object(&id, &split.kind, &split.triple, &split.target, p, v.start, ctx, out);
            }
        }
    }
    if hosts > 1 {
        ctx.push(out, Severity::Error, None, format!("{hosts} host entries; a bundle has at most one"));
    }
    if let Some((a, b)) = find_conflicting_targets(&parsed_ids) {
        let msg = format!(
            "target IDs '{a}' and '{b}' conflict (LLVM 19 refuses to bundle them together; runtimes take the first compatible one in file order)"
        );
        ctx.push(out, Severity::Warning, None, msg);
    }
}

/// An invalid target ID is an error; a processor missing from the table
/// (a GPU newer than this tool) only a warning, as the file may be fine.
fn target_id(what: &str, triple: &str, target: &str, at: Option<u64>, ctx: &Context, out: &mut Vec<Diagnostic>) {
    if let Err(e) = canonical_target_id(triple, target) {
        ctx.push(out, Severity::Error, at, format!("{what}: {e}"));
    } else if let Some(processor) = unknown_processor(triple, target) {
        let msg = format!(
            "{what}: processor '{processor}' is not in this tool's processor table; its target ID and code object were not checked"
        );
        ctx.push(out, Severity::Warning, at, msg);
    }
}

fn setting_name(s: Setting) -> &'static str {
    match s {
        Setting::Unknown => "unsupported",
        Setting::Any => "any",
        Setting::Off => "off (-)",
        Setting::On => "on (+)",
    }
}

/// Whether a device payload is the code object the ID names: an AMDGPU ELF
/// for the processor and feature settings in the ID (or LLVM bitcode).
#[allow(clippy::too_many_arguments)]
fn code_object(
    id: &str,
    kind: &str,
    triple: &str,
    target: &str,
    payload: &[u8],
    start: u64,
    ctx: &Context,
    out: &mut Vec<Diagnostic>,
) {
    if payload.is_empty() {
        let msg = format!("entry '{id}': the {kind} code object is empty");
        ctx.push(out, Severity::Warning, Some(start), msg);
        return;
    }
    if !Triple::parse(triple).is_amdgcn() || offload_format::offload_binary::is_bitcode(payload) {
        return;
    }
    let Some(elf) = elf_flags::read(payload) else {
        let msg = format!("entry '{id}': the payload is neither an ELF code object nor LLVM bitcode");
        ctx.push(out, Severity::Warning, Some(start), msg);
        return;
    };
    if elf.machine != elf_flags::EM_AMDGPU {
        let msg = format!("entry '{id}': the payload is an ELF file for machine {}, not AMDGPU (224)", elf.machine);
        ctx.push(out, Severity::Error, Some(start), msg);
        return;
    }
    let table = offload_format::amdgpu::Table::Current;
    let Ok(tid) = offload_format::target_id::TargetId::parse_in(table, &Triple::parse(triple), target) else { return };
    match elf.processor {
        Some(p) if p != tid.processor => {
            let msg = format!(
                "entry '{id}' names {} but holds a code object for {p} (ELF e_flags {:#x})",
                tid.processor, elf.flags
            );
            ctx.push(out, Severity::Error, Some(start), msg);
            return;
        }
        None => {
            let msg = format!(
                "entry '{id}': ELF e_flags {:#x} name a processor that is not in this tool's processor table",
                elf.flags
            );
            ctx.push(out, Severity::Warning, Some(start), msg);
            return;
        }
        _ => {}
    }
    // Only target-ID features are compared: a processor without one cannot
    // say "any" for it in its ID, whatever its ELF header records.
    let supported = table.target_id_features(&Triple::parse(triple), &tid.processor);
    for (feature, setting) in [("xnack", elf.xnack), ("sramecc", elf.sramecc)] {
        if !supported.contains(&feature) {
            continue;
        }
        let wanted = tid.features.get(feature).copied();
        let bad = match (wanted, setting) {
            (_, Setting::Unknown) => false,
            (Some(true), s) => s != Setting::On,
            (Some(false), s) => s != Setting::Off,
            (None, s) => s != Setting::Any,
        };
        if bad {
            let said = match wanted {
                Some(true) => "+",
                Some(false) => "-",
                None => " any (not given)",
            };
            let msg = format!(
                "entry '{id}' says {feature}{said}, but its code object was built with {feature} {} (ELF e_flags {:#x}); the runtime would pick it for a GPU it cannot run on",
                setting_name(setting),
                elf.flags
            );
            ctx.push(out, Severity::Error, Some(start), msg);
        }
    }
}

/// Deep checks of one OffloadBinary image.
pub(crate) fn offload_binary(b: &OffloadBinary, at: Option<u64>, loc: &Location, out: &mut Vec<Diagnostic>) {
    let ctx = Context::bundle(at, loc);
    let triple = b.triple();
    let arch = b.arch();
    let what = format!("OffloadBinary image '{triple}-{arch}'");
    if triple.is_empty() {
        ctx.push(out, Severity::Error, Some(0), format!("{what} has no triple"));
        return;
    }
    if !Triple::parse(&triple).is_known_arch() {
        ctx.push(out, Severity::Error, Some(0), format!("{what}: unknown architecture in triple '{triple}'"));
    }
    target_id(&what, &triple, &arch, Some(0), &ctx, out);
    if b.version() != 1 {
        let msg = format!("{what}: OffloadBinary version {} (LLVM 15 to 19 read version 1 only)", b.version());
        ctx.push(out, Severity::Warning, Some(0), msg);
    }
    let image_at = (b.image().as_ptr() as usize).wrapping_sub(b.data().as_ptr() as usize) as u64;
    let kind = b.offload_kind().name();
    code_object(&what, kind, &triple, &arch, b.image(), image_at, &ctx, out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    fn bundle(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        offload_format::bundle::binary::write(entries, NonZeroU64::new(1).unwrap()).to_vec()
    }

    #[test]
    fn damaged_tables_keep_the_entries_before_the_damage() {
        let mut b = bundle(&[(b"hip-a", b"AAAA"), (b"hip-b", b"BB")]);
        let p = read_bundle(&b);
        assert!(p.problem.is_none());
        assert_eq!(p.entries.len(), 2);
        assert_eq!(p.end, b.len());
        // Second record's offset points past the end.
        let second = 32 + 24 + 5;
        b[second..second + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let p = read_bundle(&b);
        assert_eq!(p.entries.len(), 1);
        let problem = p.problem.unwrap();
        assert_eq!(problem.offset, second as u64);
        assert!(problem.describe(Some(0x1000)).contains(&format!("{:#x}", 0x1000 + second)));
        // Every truncation fails cleanly.
        let good = bundle(&[(b"hip-a", b"AAAA"), (b"hip-b", b"BB")]);
        for cut in 24..good.len() {
            let p = read_bundle(&good[..cut]);
            assert!(p.problem.is_some(), "cut {cut}");
        }
    }

    #[test]
    fn deep_checks_find_overlaps_duplicates_and_bad_ids() {
        let mut b = bundle(&[(b"hip-amdgcn-amd-amdhsa--gfx906", b"AAAA"), (b"hip-amdgcn-amd-amdhsa--gfx906", b"BB")]);
        let p = read_bundle(&b);
        let mut out = Vec::new();
        bundle_checks(&p, &mut out);
        assert!(out.iter().any(|d| d.message.contains("more than once")), "{out:?}");
        // Make entry 1 overlap entry 0.
        let second = 32 + 24 + 29;
        let first_payload = u64_le(&b, 32).unwrap();
        b[second..second + 8].copy_from_slice(&(first_payload + 1).to_le_bytes());
        let p = read_bundle(&b);
        let mut out = Vec::new();
        bundle_checks(&p, &mut out);
        assert!(out.iter().any(|d| d.message.contains("overlap") && d.offset == Some(first_payload + 1)), "{out:?}");
        let b = bundle(&[(b"cuda-amdgcn-amd-amdhsa--gfx1030:xnack+", b"x"), (b"host-x", b""), (b"host-y", b"")]);
        let mut out = Vec::new();
        bundle_checks(&read_bundle(&b), &mut out);
        let text: Vec<_> = out.iter().map(|d| d.message.as_str()).collect();
        assert!(text.iter().any(|m| m.contains("unknown offload kind 'cuda'")), "{text:?}");
        assert!(text.iter().any(|m| m.contains("does not support feature 'xnack'")), "{text:?}");
        assert!(text.iter().any(|m| m.contains("2 host entries")), "{text:?}");
    }

    fn bundle_checks(p: &ParsedBundle, out: &mut Vec<Diagnostic>) {
        super::bundle(p, &Context::bundle(Some(0), &Location::default()), out);
    }

    fn elf(flags: u32) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[7] = 64;
        h[8] = 3;
        h[18..20].copy_from_slice(&224u16.to_le_bytes());
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h
    }

    #[test]
    fn code_objects_must_match_their_ids() {
        let check = |id: &[u8], payload: &[u8]| {
            let mut out = Vec::new();
            bundle_checks(&read_bundle(&bundle(&[(id, payload)])), &mut out);
            out
        };
        // gfx906 with xnack and sramecc "any".
        assert!(check(b"hipv4-amdgcn-amd-amdhsa--gfx906", &elf(0x52f)).is_empty());
        let out = check(b"hipv4-amdgcn-amd-amdhsa--gfx90a", &elf(0x52f));
        assert!(out[0].message.contains("names gfx90a but holds a code object for gfx906"), "{out:?}");
        // gfx90a built xnack+ sramecc- but labelled xnack-.
        let out = check(b"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-", &elf(0xb3f));
        assert!(out.iter().any(|d| d.message.contains("says xnack-")), "{out:?}");
        assert!(out.iter().any(|d| d.message.contains("says sramecc any")), "{out:?}");
        assert!(check(b"hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc-:xnack+", &elf(0xb3f)).is_empty());
        assert!(check(b"hipv4-amdgcn-amd-amdhsa--gfx906", b"BC\xc0\xde....").is_empty());
        assert!(check(b"hipv4-amdgcn-amd-amdhsa--gfx906", b"garbage").iter().any(|d| d.severity == Severity::Warning));
    }
}
