//! `prune` for whole packages and folders (docs/guide/prune-trees.md):
//! wheels and other zip archives ([`wheel`]), folders and installed
//! environments rewritten in place ([`dir`]), tarballs and container
//! layers ([`tarball`]). Every file inside goes through [`file::prune_file`],
//! the rules of one-file `prune` in the mode that makes it smallest (cut
//! where it applies, zero elsewhere); files named for one GPU target and
//! standalone code objects no kept GPU loads are removed. Files are
//! rewritten in parallel ([`offload_io::for_each_item`]), each worker
//! holding one file at a time.

pub mod dir;
pub mod file;
pub mod names;
mod record;
pub mod tarball;
pub mod wheel;

pub use file::{Mode, Outcome, TargetFate, prune_file};

use crate::prune::{PruneError, Rules};
use std::collections::BTreeMap;

/// How a package or folder is pruned.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Which code objects stay.
    pub rules: Rules,
    /// Decide and report, write nothing.
    pub dry_run: bool,
    /// Worker threads (0: one per core).
    pub threads: usize,
}

/// What happened to one file of a package or folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Rewritten smaller.
    Rewritten,
    /// Removed (a file for a target no kept GPU loads).
    Removed,
    /// Device code, all of it kept.
    Kept,
    /// Device code left as it is (see the reason).
    Untouched,
}

impl Action {
    /// `rewritten`, `removed`, `kept`, `untouched`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Rewritten => "rewritten",
            Action::Removed => "removed",
            Action::Kept => "kept",
            Action::Untouched => "untouched",
        }
    }
}

/// The report of one file with device code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileReport {
    /// Its path in the package or folder.
    pub path: String,
    /// What happened.
    pub action: Action,
    /// The mode of a rewritten file.
    pub mode: Option<Mode>,
    /// Why (the mode's reason, the removal's, why it was left as it is).
    pub reason: String,
    /// Its code objects and their fate.
    pub entries: Vec<TargetFate>,
    /// Bytes before.
    pub old_size: u64,
    /// Bytes after (0 when removed).
    pub new_size: u64,
}

impl FileReport {
    /// The report of `outcome` for `path`, `old_size` bytes.
    pub fn new(path: String, outcome: &Outcome, old_size: u64) -> Option<FileReport> {
        let mut r = FileReport {
            path,
            action: Action::Kept,
            mode: None,
            reason: String::new(),
            entries: Vec::new(),
            old_size,
            new_size: old_size,
        };
        match outcome {
            Outcome::Plain => return None,
            Outcome::Rewritten(w) => {
                r.action = Action::Rewritten;
                r.mode = Some(w.mode);
                r.reason = w.reason.clone();
                r.entries = w.entries.clone();
                r.new_size = w.bytes.len() as u64;
            }
            Outcome::Removed { target, reason } => {
                r.action = Action::Removed;
                r.reason = reason.clone();
                r.entries = vec![TargetFate { id: target.clone(), size: old_size, kept: false }];
                r.new_size = 0;
            }
            Outcome::AllKept { entries } => r.entries = entries.clone(),
            Outcome::Untouched { reason } => {
                r.action = Action::Untouched;
                r.reason = reason.clone();
            }
        }
        Some(r)
    }
}

/// Bytes of one target across a package or folder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TargetTotals {
    /// Bytes of its code objects that stay.
    pub kept: u64,
    /// Bytes of its code objects dropped.
    pub dropped: u64,
}

/// The report of a whole package or folder.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeReport {
    /// Files with device code, in package or folder order.
    pub files: Vec<FileReport>,
    /// Files looked at.
    pub scanned: usize,
    /// The package's size, or the folder's files' bytes.
    pub input_size: u64,
    /// The output's size (for a dry run: what it would be, estimated from
    /// the files' sizes where the package is compressed).
    pub output_size: u64,
    /// Notes (hard links, members left alone, ...).
    pub notes: Vec<String>,
}

impl TreeReport {
    /// Bytes saved.
    pub fn saved(&self) -> i64 {
        self.input_size as i64 - self.output_size as i64
    }
    /// Files rewritten or removed.
    pub fn changed(&self) -> usize {
        self.files.iter().filter(|f| matches!(f.action, Action::Rewritten | Action::Removed)).count()
    }
    /// Kept and dropped bytes per target (the target part of each entry
    /// ID: `gfx90a`, `sm_90`), sorted by target.
    pub fn targets(&self) -> BTreeMap<String, TargetTotals> {
        let mut out: BTreeMap<String, TargetTotals> = BTreeMap::new();
        for f in &self.files {
            for e in &f.entries {
                let split = offload_inspect::id::split_entry_id(&e.id);
                if split.kind == "host" {
                    continue;
                }
                let target = if split.target.is_empty() { e.id.clone() } else { split.target };
                let t = out.entry(target).or_default();
                if e.kept {
                    t.kept += e.size;
                } else {
                    t.dropped += e.size;
                }
            }
        }
        out
    }
}

/// Why a package or folder cannot be pruned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    /// Reading or writing failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// The package is malformed.
    #[error("{0}")]
    Malformed(String),
    /// A rewritten file failed its check (a bug; nothing was written).
    #[error("{path}: {source}")]
    Prune {
        /// The file inside the package or folder.
        path: String,
        /// The failure.
        source: PruneError,
    },
    /// An input this does not rewrite, and why.
    #[error("{0}")]
    Refused(String),
}

impl TreeError {
    pub(crate) fn io(path: impl Into<String>, e: impl std::fmt::Display) -> TreeError {
        TreeError::Io { path: path.into(), message: e.to_string() }
    }
}

/// What kind of package or folder a path is, from its type and first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PackageKind {
    /// A folder.
    Dir,
    /// A zip archive (a wheel when it has a `.dist-info/RECORD`).
    Zip,
    /// A tarball, compressed as said.
    Tar(tarball::Compression),
    /// A Debian package (refused).
    Deb,
    /// A conda package (refused).
    Conda,
}

/// The package kind of `path` (`None`: a single file for one-file `prune`).
pub fn package_kind(path: &std::path::Path, head: &[u8]) -> Option<PackageKind> {
    if path.is_dir() {
        return Some(PackageKind::Dir);
    }
    let name = path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    if head.starts_with(b"!<arch>\ndebian-binary") {
        return Some(PackageKind::Deb);
    }
    if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        return Some(if name.ends_with(".conda") { PackageKind::Conda } else { PackageKind::Zip });
    }
    if name.ends_with(".tar.bz2") && head.starts_with(b"BZh") {
        return Some(PackageKind::Conda);
    }
    tarball::detect(head).map(PackageKind::Tar)
}

/// The refusal of a package kind this does not rewrite.
pub fn refusal(kind: PackageKind) -> Option<&'static str> {
    match kind {
        PackageKind::Deb => Some(
            "a Debian package: its md5sums and any signature would no longer match; unpack it (dpkg-deb -R), prune the folder with --in-place and rebuild it (dpkg-deb -b)",
        ),
        PackageKind::Conda => Some(
            "a conda package: its info/paths.json records each file's sha256 and size, which this does not rewrite yet; prune the installed environment's folder with --in-place instead",
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
