//! ROCm kpack archives (`.kpack`) as containers: every TOC entry is a code
//! object, grouped in one unit per binary key (one fat binary of one
//! library). A deep scan runs `offload_format::kpack::verify` and decodes
//! every entry, checking its size and that the code object is for the
//! target it is filed under. See `docs/formats/kpack.md`.

use super::{Base, Scanner};
use crate::id::{canonical_target_id, split_entry_id};
use crate::kpack::{KpackRef, entry_id, problem_offset};
use crate::{CodeObject, Format, Location, Payload, Severity, Step};
use offload_format::kpack::archive::{Archive, ArchiveError, Scheme};
use offload_format::kpack::verify::{VerifyOptions, verify};

/// Where in the archive an error that stops parsing points.
pub(crate) fn error_offset(e: &ArchiveError) -> u64 {
    match e {
        ArchiveError::Truncated(_) | ArchiveError::Magic => 0,
        ArchiveError::Version(_) => 4,
        ArchiveError::TocOffset { .. } => 8,
        ArchiveError::TocMsgpack { toc_offset, error } => toc_offset.saturating_add(error.offset as u64),
        ArchiveError::OutOfFile { offset, .. } => *offset,
        _ => 0,
    }
}

impl<'a> Scanner<'a> {
    /// A kpack archive: the whole of `data`.
    pub(super) fn kpack_archive(&mut self, base: &Base, data: &[u8], loc: &Location) {
        let at = self.offset_of(base, data);
        let archive = match Archive::parse(data) {
            Ok(a) => a,
            Err(e) => {
                let offset = at.map(|a| a.saturating_add(error_offset(&e)));
                return self.diag(Severity::Error, offset, loc, format!("kpack archive: {e}"));
            }
        };
        for binary in &archive.binaries {
            let unit = self.new_unit(&loc.with(Step::Entry(binary.key.to_string())), Format::KpackArchive);
            for entry in &binary.entries {
                let Ok(stored) = archive.stored(entry.ordinal) else {
                    // verify reports it (Problem::Ordinal).
                    continue;
                };
                let id = entry_id(entry);
                let split = split_entry_id(&id);
                let (target_id, target_id_error) = match canonical_target_id(&split.triple, entry.target) {
                    Ok(t) => (t, None),
                    Err(e) => (entry.target.to_string(), Some(e.to_string())),
                };
                let compressed = archive.scheme == Scheme::ZstdPerKernel;
                self.inv.objects.push(CodeObject {
                    location: loc.with(Step::KpackEntry { key: binary.key.into(), target: entry.target.into() }),
                    format: Format::KpackArchive,
                    id,
                    offload_kind: split.kind,
                    triple: split.triple,
                    target_id,
                    target_id_error,
                    stored_target: entry.target.to_string(),
                    size: entry.original_size,
                    offset: if compressed { None } else { self.offset_of(base, stored) },
                    compressed,
                    unit,
                    container: false,
                    image_kind: None,
                    payload: Payload::Kpack {
                        stored: self.bytes_of(base, stored),
                        scheme: archive.scheme,
                        ordinal: entry.ordinal,
                        len: entry.original_size,
                    },
                    cuda: None,
                    kpack: Some(KpackRef {
                        archive: None,
                        key: binary.key.to_string(),
                        target: entry.target.to_string(),
                        ordinal: entry.ordinal,
                        record: None,
                    }),
                });
            }
        }
        if self.opts.deep {
            let mut out = Vec::new();
            check_archive(&archive, at, loc, &mut out);
            self.inv.diagnostics.extend(out);
        }
    }
}

/// `verify`'s checks of one parsed archive; offsets are absolute when `at`
/// (the archive's offset in the scanned file) is known.
pub(crate) fn check_archive(archive: &Archive<'_>, at: Option<u64>, loc: &Location, out: &mut Vec<crate::Diagnostic>) {
    let abs = |o: u64| at.map(|a| a.saturating_add(o));
    for p in verify(archive, &VerifyOptions { decompress: false, limit: crate::kpack::DECODE_LIMIT }) {
        out.push(crate::Diagnostic {
            severity: Severity::Error,
            offset: abs(problem_offset(archive, &p)),
            location: loc.to_string(),
            message: format!("kpack archive: {p}"),
        });
    }
    for binary in &archive.binaries {
        for entry in &binary.entries {
            let eloc = loc.with(Step::KpackEntry { key: binary.key.into(), target: entry.target.into() });
            let offset = abs(archive.spans.get(entry.ordinal as usize).map_or(archive.toc_offset, |s| s.offset));
            let mut error = |message: String| {
                out.push(crate::Diagnostic { severity: Severity::Error, offset, location: eloc.to_string(), message })
            };
            let bytes = match archive.decompress(entry, crate::kpack::DECODE_LIMIT) {
                Ok(b) => b,
                Err(e) => {
                    error(format!("kpack entry: {e}"));
                    continue;
                }
            };
            if let Some(problem) = crate::kpack::target_mismatch(&bytes, entry.target) {
                error(problem);
            }
        }
    }
}
