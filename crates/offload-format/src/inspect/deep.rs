//! `verify`'s checks of compressed bundles: decompress, check the size and
//! the hash, check the bundle inside. The compressed bundles of a file are
//! independent, so they are checked on several cores before the deep scan
//! (which then takes each bundle's findings in its place, keeping the order
//! of a one-core scan); each worker holds one decompressed bundle at a time.

use super::checks::{self, EntryView};
use super::id::split_entry_id;
use super::{Diagnostic, Location, Severity, ccob, decode, scan::nests};
use crate::bundle::binary::MAGIC as BUNDLE_MAGIC;
use crate::bundle::compressed::Blob;
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
    let outcomes = decode::run_jobs(found.len(), workers, |i| {
        let f = found.get(i)?;
        let (diagnostics, nested) = check(&f.blob, f.at, &f.location);
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

/// Checks one compressed bundle: the findings, and, when the bundle holds
/// payloads to open, its decompressed bytes and where those payloads lie.
pub(super) fn check(blob: &Blob, at: Option<u64>, loc: &Location) -> (Vec<Diagnostic>, Option<(Vec<u8>, Nested)>) {
    let mut out = Vec::new();
    let Some(data) = checks::decompress(blob, at, loc, &mut out) else {
        return (out, None);
    };
    let ctx = checks::Context::compressed(at, loc);
    let mut nested = Vec::new();
    if data.starts_with(BUNDLE_MAGIC) {
        let parsed = checks::read_bundle(&data);
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
    } else if let Some(comment) = ccob::text_comment(&data, data.len()) {
        let (entries, _) = ccob::text_entries(&data, comment);
        let views: Vec<EntryView> = entries
            .iter()
            .map(|e| EntryView { id: &e.id, start: e.start, len: e.len, payload: checks::slice(&data, e.start, e.len) })
            .collect();
        checks::entries(&views, &ctx, &mut out);
    }
    if nested.is_empty() { (out, None) } else { (out, Some((data, nested))) }
}
