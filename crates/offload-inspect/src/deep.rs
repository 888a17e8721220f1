//! `verify`'s checks of compressed bundles: decompress, check the size and
//! the hash, check the bundle inside. The compressed bundles of a file are
//! independent, so they are checked on several cores before the deep scan
//! (which then takes each bundle's findings in its place, keeping the order
//! of a one-core scan); each worker holds one decompressed bundle at a time.

use super::checks::{self, EntryView};
use super::id::split_entry_id;
use super::{Diagnostic, Location, Severity, ccob, decode, scan::nests};
use offload_format::bundle::binary::MAGIC as BUNDLE_MAGIC;
use offload_format::bundle::compressed::Blob;
use std::collections::HashMap;

/// A compressed bundle found in the file by the headers-only scan.
pub(super) struct Found<'a> {
    pub blob: Blob<'a>,
    pub at: Option<u64>,
    pub location: Location,
}

/// The findings of a compressed bundle checked beforehand.
struct Outcome {
    at: Option<u64>,
    location: String,
    diagnostics: Vec<Diagnostic>,
    /// The bundle holds payloads to open, which the deep scan needs the
    /// decompressed bytes for: it checks such a bundle itself.
    nested: bool,
}

/// Compressed bundles checked beforehand, by the address and length of
/// their compressed data.
#[derive(Default)]
pub(super) struct Checked(HashMap<(usize, usize), Outcome>);

impl Checked {
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The findings for `blob`, if it was checked at the same place.
    pub fn take(&mut self, blob: &Blob, at: Option<u64>, loc: &Location) -> Option<Vec<Diagnostic>> {
        let outcome = self.0.remove(&key(blob))?;
        (!outcome.nested && outcome.at == at && outcome.location == loc.to_string()).then_some(outcome.diagnostics)
    }
}

fn key(blob: &Blob) -> (usize, usize) {
    (blob.data.as_ptr() as usize, blob.data.len())
}

/// Checks every found bundle, on up to `workers` threads (0: one per core).
pub(super) fn check_all(found: Vec<Found>, workers: usize) -> Checked {
    let largest = found.iter().map(|f| f.blob.header.uncompressed_size).max().unwrap_or(0);
    let workers = decode::worker_count(workers, found.len(), largest);
    // Each worker decodes into one buffer, reused from bundle to bundle.
    let outcomes = decode::run_jobs(found.len(), workers, |buffer: &mut Vec<u8>, i| {
        let f = found.get(i)?;
        let (diagnostics, nested) = check(&f.blob, f.at, &f.location, buffer);
        Some(Outcome { at: f.at, location: f.location.to_string(), diagnostics, nested: nested.is_some() })
    });
    let mut checked = Checked::default();
    for (f, outcome) in found.iter().zip(outcomes) {
        if let Some(outcome) = outcome {
            checked.0.insert(key(&f.blob), outcome);
        }
    }
    checked
}

/// Payloads of a decompressed bundle that hold further code objects: the
/// entry ID, and the payload's start and length in the bundle.
pub(super) type Nested = Vec<(String, u64, usize)>;

/// Decompresses a compressed bundle into `data` and checks its size and
/// hash; false when it cannot be decompressed.
fn decompress(blob: &Blob, data: &mut Vec<u8>, at: Option<u64>, loc: &Location, out: &mut Vec<Diagnostic>) -> bool {
    let diag = |severity, message| Diagnostic { severity, offset: at, location: loc.to_string(), message };
    let computed = match decode::decode_into(blob, data) {
        Ok(hash) => hash,
        Err(e) => {
            out.push(diag(Severity::Error, format!("compressed bundle{}: {e}", checks::at(at))));
            return false;
        }
    };
    if computed != blob.header.hash {
        let (severity, what) = if blob.header.hash == 0 {
            (Severity::Warning, "has no hash (zero)")
        } else {
            (Severity::Error, "is corrupt: its hash does not match")
        };
        let msg = format!(
            "compressed bundle{} {what} (stored {:#018x}, computed {computed:#018x})",
            checks::at(at),
            blob.header.hash
        );
        out.push(diag(severity, msg));
    }
    true
}

/// Checks one compressed bundle, decompressing it into `buffer`: the
/// findings, and, when the bundle holds payloads to open, its decompressed
/// bytes (taken from `buffer`) and where those payloads lie.
pub(super) fn check(
    blob: &Blob,
    at: Option<u64>,
    loc: &Location,
    buffer: &mut Vec<u8>,
) -> (Vec<Diagnostic>, Option<(Vec<u8>, Nested)>) {
    let mut out = Vec::new();
    if !decompress(blob, buffer, at, loc, &mut out) {
        return (out, None);
    }
    let data = buffer.as_slice();
    let ctx = checks::Context::compressed(at, loc);
    let mut nested = Vec::new();
    if data.starts_with(BUNDLE_MAGIC) {
        let parsed = checks::read_bundle(data);
        if let Some(problem) = &parsed.problem {
            let msg = format!("compressed bundle{}: {}", checks::at(at), problem.describe(None));
            out.push(Diagnostic { severity: Severity::Error, offset: at, location: loc.to_string(), message: msg });
        }
        checks::bundle(&parsed, &ctx, &mut out);
        for e in &parsed.entries {
            let host = split_entry_id(&String::from_utf8_lossy(e.id)).kind == "host";
            if let Some(p) = e.payload.filter(|p| nests(p, host)) {
                nested.push((String::from_utf8_lossy(e.id).into_owned(), e.start, p.len()));
            }
        }
    } else if let Some(comment) = ccob::text_comment(data, data.len()) {
        let (entries, _) = ccob::text_entries(data, comment);
        let views: Vec<EntryView> = entries
            .iter()
            .map(|e| EntryView { id: &e.id, start: e.start, len: e.len, payload: checks::slice(data, e.start, e.len) })
            .collect();
        checks::entries(&views, &ctx, &mut out);
    }
    if nested.is_empty() { (out, None) } else { (out, Some((std::mem::take(buffer), nested))) }
}
