//! Wheels and other zip archives (docs/guide/prune-trees.md, "Wheels").
//!
//! Members are pruned in parallel, each worker holding one decompressed
//! member and its pruned bytes, which it compresses (with the member's
//! compression method) into a one-member zip in an anonymous temporary
//! file. The output is then written in the input's member order: untouched
//! members are copied compressed as they are (names, timestamps,
//! permissions, compression and bytes kept), rewritten ones are copied
//! from their temporary zips, removed ones are left out, and the wheel's
//! `RECORD` gets the new hash and size of every rewritten member.

use super::file::{self, Outcome};
use super::{FileReport, Options, TreeError, TreeReport, record};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{BufWriter, Cursor, Read, Write};
use zip::{ZipArchive, ZipWriter};

/// A new version for a wheel's distribution (`offload split`): the
/// `.dist-info` folder is renamed and `METADATA`'s `Version:` changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Relabel {
    /// The `.dist-info` folder as it is (`name-1.0.dist-info`).
    pub old_dist_info: String,
    /// Its new name (`name-1.0+sm90.dist-info`).
    pub new_dist_info: String,
    /// The new version (`1.0+sm90`).
    pub version: String,
}

impl Relabel {
    fn rename(&self, path: &str) -> String {
        match path.strip_prefix(&self.old_dist_info).and_then(|r| r.strip_prefix('/')) {
            Some(rest) => format!("{}/{rest}", self.new_dist_info),
            None => path.to_string(),
        }
    }
}

/// Decompressed members may be at most this large (a real library is a
/// few GiB at most).
const MAX_MEMBER: u64 = 16 << 30;

/// The `.dist-info` folder of a wheel: the top-level folder ending in
/// `.dist-info` that holds a `RECORD`.
pub fn dist_info(names: &[String]) -> Option<String> {
    names.iter().find_map(|n| {
        let dir = n.strip_suffix("/RECORD")?;
        (dir.ends_with(".dist-info") && !dir.contains('/')).then(|| dir.to_string())
    })
}

/// A rewritten member, compressed in its temporary one-member zip.
struct NewMember {
    zip: File,
    hash: String,
    size: u64,
}

/// A worker's result for one member.
struct Done {
    report: Option<FileReport>,
    removed: bool,
    new: Option<NewMember>,
    /// Estimated compressed bytes saved (for a dry run's output size).
    saved_estimate: u64,
}

fn zip_error(e: impl std::fmt::Display) -> TreeError {
    TreeError::Malformed(format!("malformed zip archive: {e}"))
}

/// Reads member `i` whole, the size checked against its compressed size
/// and [`MAX_MEMBER`] before anything is allocated for it.
fn read_member(archive: &mut ZipArchive<Cursor<&[u8]>>, i: usize, name: &str) -> Result<Vec<u8>, TreeError> {
    let mut f = archive.by_index(i).map_err(zip_error)?;
    let size = f.size();
    let bound = f.compressed_size().saturating_mul(1100).saturating_add(1 << 20).min(MAX_MEMBER);
    if size > bound {
        return Err(TreeError::Malformed(format!(
            "{name}: claims {size} bytes from {} compressed, more than a real member expands to",
            f.compressed_size()
        )));
    }
    let mut buf = Vec::with_capacity(size.min(256 << 20) as usize);
    (&mut f).take(size + 1).read_to_end(&mut buf).map_err(|e| TreeError::Malformed(format!("{name}: {e}")))?;
    if buf.len() as u64 != size {
        return Err(TreeError::Malformed(format!("{name}: holds {} bytes, not the {size} it claims", buf.len())));
    }
    Ok(buf)
}

/// Prunes the zip archive `data` into `out` (a dry run when `None`),
/// relabelled when `relabel` says so. The caller stages `out` and commits
/// it when this returns `Ok` (nothing is half-written).
pub fn prune_zip(
    data: &[u8],
    out: Option<&File>,
    opts: &Options,
    relabel: Option<&Relabel>,
) -> Result<TreeReport, TreeError> {
    let archive = ZipArchive::new(Cursor::new(data)).map_err(zip_error)?;
    let names: Vec<String> = (0..archive.len())
        .map(|i| archive.clone().by_index_raw(i).map(|f| f.name().to_string()).map_err(zip_error))
        .collect::<Result<_, _>>()?;
    let dist = dist_info(&names);
    let record_name = dist.as_ref().map(|d| format!("{d}/RECORD"));
    if relabel.is_some() && dist.is_none() {
        return Err(TreeError::Refused("not a wheel: no .dist-info/RECORD to relabel".into()));
    }
    let results = offload_io::for_each_item(&names, opts.threads, |i, name| {
        prune_member(&mut archive.clone(), i, name, opts, out.is_none())
    });
    let mut done = Vec::with_capacity(results.len());
    for (r, name) in results.into_iter().zip(&names) {
        match r {
            Some(r) => done.push(r?),
            None => return Err(TreeError::io(name, "a worker thread failed")),
        }
    }
    let mut report = TreeReport { scanned: names.len(), input_size: data.len() as u64, ..Default::default() };
    report.files = done.iter().filter_map(|d| d.report.clone()).collect();
    let Some(out) = out else {
        report.output_size = report.input_size.saturating_sub(done.iter().map(|d| d.saved_estimate).sum());
        return Ok(report);
    };
    if relabel.is_none() && done.iter().all(|d| !d.removed && d.new.is_none()) {
        // Nothing changes: the input is the output, byte for byte (writing
        // it again would recompress RECORD, a few bytes off the original).
        let mut w = BufWriter::with_capacity(1 << 20, out);
        w.write_all(data).and_then(|()| w.flush()).map_err(|e| TreeError::io("the output", e))?;
        report.output_size = data.len() as u64;
        return Ok(report);
    }
    let mut new_hashes: HashMap<String, (String, u64)> = HashMap::new();
    let mut removed: HashSet<String> = HashSet::new();
    for (d, name) in done.iter().zip(&names) {
        if d.removed {
            removed.insert(name.clone());
        }
        if let Some(n) = &d.new {
            new_hashes.insert(name.clone(), (n.hash.clone(), n.size));
        }
    }
    let rename = |p: &str| relabel.map_or_else(|| p.to_string(), |r| r.rename(p));
    let mut writer = ZipWriter::new(BufWriter::with_capacity(1 << 20, out));
    let mut source = archive.clone();
    let metadata_name = dist.as_ref().map(|d| format!("{d}/METADATA"));
    let out_err = |e: zip::result::ZipError| TreeError::io("the output", e);
    for (i, (d, name)) in done.into_iter().zip(&names).enumerate() {
        if d.removed {
            continue;
        }
        let new_name = rename(name);
        if let Some(n) = d.new {
            let mut tmp = ZipArchive::new(n.zip).map_err(|e| TreeError::io("a temporary file", e))?;
            let f = tmp.by_index_raw(0).map_err(|e| TreeError::io("a temporary file", e))?;
            writer.raw_copy_file_rename(f, new_name).map_err(out_err)?;
            continue;
        }
        let is_record = Some(name) == record_name.as_ref();
        let is_metadata = relabel.is_some() && Some(name) == metadata_name.as_ref();
        if is_record || is_metadata {
            let text = String::from_utf8(read_member(&mut source, i, name)?)
                .map_err(|_| TreeError::Malformed(format!("{name}: not UTF-8")))?;
            let new_text = match (is_record, relabel) {
                (true, _) => {
                    // METADATA's own new hash, when it was relabelled.
                    if let (Some(r), Some(m)) = (relabel, metadata_name.as_ref()) {
                        let meta = String::from_utf8_lossy(&read_member(&mut source, names_index(&names, m)?, m)?)
                            .into_owned();
                        let meta = set_version(&meta, &r.version);
                        new_hashes.insert(m.clone(), (record::hash(meta.as_bytes()), meta.len() as u64));
                    }
                    record::rewrite(&text, &new_hashes, &removed, &rename)
                }
                (false, Some(r)) => set_version(&text, &r.version),
                (false, None) => text.clone(),
            };
            if new_text == text {
                // Unchanged (no line names a rewritten or removed member):
                // copied compressed as it is, like any other member.
                let f = source.by_index_raw(i).map_err(zip_error)?;
                writer.raw_copy_file_rename(f, new_name).map_err(out_err)?;
                continue;
            }
            let options = source.by_index_raw(i).map_err(zip_error)?.options();
            writer.start_file(new_name, options).map_err(out_err)?;
            writer.write_all(new_text.as_bytes()).map_err(|e| TreeError::io("the output", e))?;
            continue;
        }
        let f = source.by_index_raw(i).map_err(zip_error)?;
        writer.raw_copy_file_rename(f, new_name).map_err(out_err)?;
    }
    if !archive.comment().is_empty() {
        writer.set_raw_comment(archive.comment().into()).map_err(out_err)?;
    }
    let mut buffered = writer.finish().map_err(out_err)?;
    buffered.flush().map_err(|e| TreeError::io("the output", e))?;
    report.output_size = out.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(report)
}

fn names_index(names: &[String], name: &str) -> Result<usize, TreeError> {
    names.iter().position(|n| n == name).ok_or_else(|| TreeError::Malformed(format!("{name} is missing")))
}

/// `METADATA` with its `Version:` header (in the header block, before the
/// first empty line) set to `version`.
pub(crate) fn set_version(metadata: &str, version: &str) -> String {
    let mut out = String::with_capacity(metadata.len() + 16);
    let mut in_headers = true;
    for line in metadata.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if body.is_empty() {
            in_headers = false;
        }
        if in_headers && body.starts_with("Version:") {
            out.push_str(&format!("Version: {version}{}", &line[body.len()..]));
        } else {
            out.push_str(line);
        }
    }
    out
}

fn prune_member(
    archive: &mut ZipArchive<Cursor<&[u8]>>,
    i: usize,
    name: &str,
    opts: &Options,
    dry_run: bool,
) -> Result<Done, TreeError> {
    let mut done = Done { report: None, removed: false, new: None, saved_estimate: 0 };
    let (size, compressed, is_dir) = {
        let f = archive.by_index_raw(i).map_err(zip_error)?;
        (f.size(), f.compressed_size(), f.is_dir())
    };
    if is_dir {
        return Ok(done);
    }
    if let Some(outcome) = file::removed_by_name(name, &opts.rules, size) {
        done.report = FileReport::new(name.to_string(), &outcome, size);
        done.removed = true;
        done.saved_estimate = compressed;
        return Ok(done);
    }
    // Most members are not code: judged by their first bytes.
    let mut head = Vec::with_capacity(offload_inspect::package::HEAD_LEN);
    {
        let f = archive.by_index(i).map_err(zip_error)?;
        f.take(offload_inspect::package::HEAD_LEN as u64)
            .read_to_end(&mut head)
            .map_err(|e| TreeError::Malformed(format!("{name}: {e}")))?;
    }
    if !file::worth_reading(name, &head) {
        return Ok(done);
    }
    let bytes = read_member(archive, i, name)?;
    let outcome =
        file::prune_file(name, &bytes, &opts.rules).map_err(|source| TreeError::Prune { path: name.into(), source })?;
    done.report = FileReport::new(name.to_string(), &outcome, size);
    match outcome {
        Outcome::Removed { .. } => {
            done.removed = true;
            done.saved_estimate = compressed;
        }
        Outcome::Rewritten(w) => {
            let ratio = compressed as f64 / size.max(1) as f64;
            done.saved_estimate = ((size - (w.bytes.len() as u64).min(size)) as f64 * ratio) as u64;
            if !dry_run {
                let options = archive.by_index_raw(i).map_err(zip_error)?.options();
                let tmp = tempfile::tempfile().map_err(|e| TreeError::io("a temporary file", e))?;
                let mut w1 = ZipWriter::new(BufWriter::new(tmp));
                let fail = |e: &dyn std::fmt::Display| TreeError::io("a temporary file", e);
                w1.start_file(name, options).map_err(|e| fail(&e))?;
                w1.write_all(&w.bytes).map_err(|e| fail(&e))?;
                let zip = w1.finish().map_err(|e| fail(&e))?.into_inner().map_err(|e| fail(&e.error().to_string()))?;
                done.new = Some(NewMember { zip, hash: record::hash(&w.bytes), size: w.bytes.len() as u64 });
            }
        }
        _ => {}
    }
    Ok(done)
}
