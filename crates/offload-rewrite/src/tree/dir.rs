//! Folders and installed environments, rewritten in place
//! (docs/guide/prune-trees.md, "Folders"). Each file is replaced on its
//! own, atomically: its pruned bytes are staged beside it by `offload-io`
//! with the old file's permissions and owner, then renamed over it, so a
//! failure or an interrupt leaves every file either as it was or pruned,
//! never half-written. A file with several hard links is pruned once and
//! every link is then pointed at the new file (each link replaced by a
//! rename). Symbolic links are not followed; their targets are pruned
//! where they lie inside the folder.

use super::file::{self, Outcome};
use super::{Action, FileReport, Options, TreeError, TreeReport, record};
use offload_format::plan::Plan;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// One regular file of the folder (the first path of its inode) and its
/// other hard links inside the folder.
#[derive(Clone, Debug)]
struct Item {
    path: PathBuf,
    rel: String,
    links: Vec<PathBuf>,
    size: u64,
    mode: u32,
    uid: u32,
    gid: u32,
}

/// Every regular file under `root`, hard links grouped, in path order.
fn walk(root: &Path) -> Result<Vec<Item>, TreeError> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = fs::read_dir(&dir)
            .map_err(|e| TreeError::io(dir.display().to_string(), e))?
            .collect::<Result<_, _>>()
            .map_err(|e| TreeError::io(dir.display().to_string(), e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries.into_iter().rev() {
            let path = e.path();
            let meta = fs::symlink_metadata(&path).map_err(|err| TreeError::io(path.display().to_string(), err))?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                files.push((path, meta));
            }
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut by_inode: HashMap<(u64, u64), usize> = HashMap::new();
    let mut items: Vec<Item> = Vec::new();
    for (path, meta) in files {
        if meta.nlink() > 1 {
            if let Some(&i) = by_inode.get(&(meta.dev(), meta.ino())) {
                items[i].links.push(path);
                continue;
            }
            by_inode.insert((meta.dev(), meta.ino()), items.len());
        }
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
        items.push(Item {
            path,
            rel,
            links: Vec::new(),
            size: meta.len(),
            mode: meta.permissions().mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        });
    }
    Ok(items)
}

/// Prunes every file under `root` in place (a dry run when
/// `opts.dry_run`).
pub fn prune_dir(root: &Path, opts: &Options) -> Result<TreeReport, TreeError> {
    let items = walk(root)?;
    // Installed distributions (`*.dist-info/RECORD`, PEP 376) record each
    // file's hash: the new hashes are then needed for what is rewritten.
    let records: Vec<&Item> = items.iter().filter(|i| is_installed_record(&i.rel)).collect();
    let want_hash = !records.is_empty() && !opts.dry_run;
    let results = offload_io::for_each_item(&items, opts.threads, |_, item| prune_item(item, opts, want_hash));
    let mut report =
        TreeReport { scanned: items.len(), input_size: items.iter().map(|i| i.size).sum(), ..Default::default() };
    let mut saved = 0u64;
    let mut first_error = None;
    let mut new_hashes: HashMap<String, (String, u64)> = HashMap::new();
    let mut removed: HashSet<String> = HashSet::new();
    for (r, item) in results.into_iter().zip(&items) {
        match r {
            Some(Ok(Some((f, hash)))) => {
                if let Some(h) = hash {
                    new_hashes.insert(item.rel.clone(), (h, f.new_size));
                }
                if f.action == Action::Removed {
                    removed.insert(item.rel.clone());
                    removed.extend(item.links.iter().map(|l| rel_of(root, l)));
                } else if let Some(h) = new_hashes.get(&item.rel).cloned() {
                    for l in &item.links {
                        new_hashes.insert(rel_of(root, l), h.clone());
                    }
                }
                saved += f.old_size - f.new_size.min(f.old_size);
                if !item.links.is_empty() {
                    report.notes.push(format!(
                        "{}: {} more hard links, all pointed at the pruned file",
                        f.path,
                        item.links.len()
                    ));
                }
                report.files.push(f);
            }
            Some(Ok(None)) => {}
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {
                first_error.get_or_insert(TreeError::io(item.rel.clone(), "a worker thread failed"));
            }
        }
    }
    report.output_size = report.input_size - saved.min(report.input_size);
    // The files already pruned are recorded even when a later one failed.
    if want_hash && (!new_hashes.is_empty() || !removed.is_empty()) {
        for record in records {
            match update_record(record, &new_hashes, &removed) {
                Ok(Some(new_len)) => {
                    report.output_size = (report.output_size + new_len).saturating_sub(record.size);
                    report.notes.push(format!("{}: the new hashes and sizes recorded", record.rel));
                }
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    match first_error {
        // The files done before the error stay pruned (each was replaced
        // whole); the report of the error names the file.
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// Whether `rel` is the `RECORD` of an installed distribution.
fn is_installed_record(rel: &str) -> bool {
    rel.strip_suffix("/RECORD").is_some_and(|dir| dir.rsplit('/').next().is_some_and(|d| d.ends_with(".dist-info")))
}

fn rel_of(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).to_string_lossy().into_owned()
}

/// `path` (relative to `base`, a folder relative to the root) as a path
/// relative to the root, normalized
/// lexically (`..` goes up); `None` when it leaves the folder or is
/// absolute.
fn resolve(base: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Rewrites the installed `RECORD` `item` (its paths are relative to the
/// folder holding the `.dist-info`) with the new hash and size of every
/// rewritten file it lists, without the lines of removed ones, atomically.
/// Its new size when it changed.
fn update_record(
    item: &Item,
    new_hashes: &HashMap<String, (String, u64)>,
    removed: &HashSet<String>,
) -> Result<Option<u64>, TreeError> {
    // A RECORD is a few hundred kB at most; anything far larger is not one.
    const MAX_RECORD: u64 = 64 << 20;
    if item.size > MAX_RECORD {
        return Ok(None);
    }
    let name = item.path.display().to_string();
    let input = offload_io::Input::open_regular(&name).map_err(|e| TreeError::io(&name, offload_io::error_text(&e)))?;
    let Ok(text) = std::str::from_utf8(input.bytes()) else { return Ok(None) };
    let base = item.rel.rsplitn(3, '/').nth(2).unwrap_or("");
    let (mut hashes, mut gone) = (HashMap::new(), HashSet::new());
    for line in text.lines() {
        let Some(path) = record::path_of(line) else { continue };
        let Some(rel) = resolve(base, &path) else { continue };
        if let Some(h) = new_hashes.get(&rel) {
            hashes.insert(path, h.clone());
        } else if removed.contains(&rel) {
            gone.insert(path);
        }
    }
    if hashes.is_empty() && gone.is_empty() {
        return Ok(None);
    }
    let new_text = record::rewrite(text, &hashes, &gone, &|p| p.to_string());
    replace(item, new_text.as_bytes(), &input)?;
    Ok(Some(new_text.len() as u64))
}

/// The file's report, and the `RECORD` hash of its new bytes when it was
/// rewritten and `want_hash`.
type ItemResult = Option<(FileReport, Option<String>)>;

fn prune_item(item: &Item, opts: &Options, want_hash: bool) -> Result<ItemResult, TreeError> {
    let name = item.path.display().to_string();
    if let Some(outcome) = file::removed_by_name(&item.rel, &opts.rules, item.size) {
        if !opts.dry_run {
            for p in std::iter::once(&item.path).chain(&item.links) {
                fs::remove_file(p).map_err(|e| TreeError::io(p.display().to_string(), e))?;
            }
        }
        return Ok(FileReport::new(item.rel.clone(), &outcome, item.size).map(|r| (r, None)));
    }
    let mut head = Vec::with_capacity(offload_inspect::package::HEAD_LEN);
    let f = fs::File::open(&item.path).map_err(|e| TreeError::io(&name, e))?;
    f.take(offload_inspect::package::HEAD_LEN as u64).read_to_end(&mut head).map_err(|e| TreeError::io(&name, e))?;
    if !file::worth_reading(&item.rel, &head) {
        return Ok(None);
    }
    let input = offload_io::Input::open_regular(&name).map_err(|e| TreeError::io(&name, offload_io::error_text(&e)))?;
    let outcome = file::prune_file(&item.rel, input.bytes(), &opts.rules)
        .map_err(|source| TreeError::Prune { path: item.rel.clone(), source })?;
    let report = FileReport::new(item.rel.clone(), &outcome, item.size);
    let mut hash = None;
    match (&outcome, opts.dry_run) {
        (Outcome::Rewritten(w), false) => {
            // The RECORD hash is computed while the file is written.
            let (written, hashed) = std::thread::scope(|scope| {
                let hasher = want_hash.then(|| scope.spawn(|| record::hash(&w.bytes)));
                (replace(item, &w.bytes, &input), hasher.map(|h| h.join()))
            });
            written?;
            hash = match hashed {
                Some(Ok(h)) => Some(h),
                Some(Err(_)) => return Err(TreeError::io(&name, "a worker thread failed")),
                None => None,
            };
        }
        // A standalone code object for a target no kept GPU loads (by its
        // ELF header, not its name): removed with all its links.
        (Outcome::Removed { .. }, false) => {
            drop(input);
            for p in std::iter::once(&item.path).chain(&item.links) {
                fs::remove_file(p).map_err(|e| TreeError::io(p.display().to_string(), e))?;
            }
        }
        _ => {}
    }
    Ok(report.map(|r| (r, hash)))
}

/// Replaces the file (and its other hard links) with `bytes`, atomically.
fn replace(item: &Item, bytes: &[u8], input: &offload_io::Input) -> Result<(), TreeError> {
    let name = item.path.display().to_string();
    let mut outputs = offload_io::Outputs::new();
    outputs.stage(&name, &Plan::borrowed(bytes), &[input]).map_err(|e| TreeError::io(&name, e))?;
    if let Some(staged) = outputs.staged_file(0) {
        staged.set_permissions(fs::Permissions::from_mode(item.mode)).map_err(|e| TreeError::io(&name, e))?;
        // Root keeps the owner; anyone else owns what they write.
        let _ = std::os::unix::fs::fchown(staged, Some(item.uid), Some(item.gid));
    }
    outputs.commit().map_err(|e| TreeError::io(&name, e))?;
    for link in &item.links {
        let dir = link.parent().unwrap_or(Path::new("."));
        let base = link.file_name().map(|b| b.to_string_lossy().into_owned()).unwrap_or_default();
        let tmp = dir.join(format!(".{base}.offload-link-{}", std::process::id()));
        let _ = fs::remove_file(&tmp);
        fs::hard_link(&item.path, &tmp).map_err(|e| TreeError::io(link.display().to_string(), e))?;
        if let Err(e) = fs::rename(&tmp, link) {
            let _ = fs::remove_file(&tmp);
            return Err(TreeError::io(link.display().to_string(), e));
        }
    }
    Ok(())
}
