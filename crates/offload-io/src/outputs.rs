//! Outputs staged next to their destination and committed together.

use crate::*;
use offload_format::plan::{Piece, Plan};
use std::fs::{self, File};
use std::io::{self, Seek, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

pub(crate) enum Staged {
    /// Standard output: the bytes wait in an anonymous temporary file (not
    /// in memory, so a large output cannot exhaust it) and are copied out at
    /// commit.
    Stdout(File),
    /// A temporary file to rename over `dest`; `replaces` when a file is
    /// there already.
    /// `reg` is declared after `tmp`, so it is dropped after the file is.
    Renamed { dest: PathBuf, tmp: tempfile::NamedTempFile, replaces: bool, reg: crate::signals::Registration },
    /// A device or pipe: written directly at commit, from a temporary file.
    Direct { dest: PathBuf, data: File },
}

/// One output written by [`Outputs::stage_detached`].
pub struct StagedOutput(Staged);

/// Outputs of one run, written all together or not at all.
#[derive(Default)]
pub struct Outputs {
    staged: Vec<Staged>,
}

/// Where an output failed, for `'<path>': <reason>` messages.
#[derive(Debug)]
pub struct OutputError {
    pub path: String,
    pub error: io::Error,
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "'{}': {}", self.path, error_text(&self.error))
    }
}

impl Outputs {
    pub fn new() -> Self {
        Outputs::default()
    }

    /// Writes `plan` for `path` into a staging file; nothing is visible at
    /// `path` until [`Outputs::commit`].
    pub fn stage(&mut self, path: &str, plan: &Plan, inputs: &[&Input]) -> Result<(), OutputError> {
        let mut staged = prepare(path)?;
        fill(&mut staged, path, plan, inputs)?;
        self.staged.push(staged);
        Ok(())
    }

    /// Stages `plan` for `path` apart from any [`Outputs`], so that several
    /// threads can write outputs at once; [`Outputs::adopt`] adds it to the
    /// run. Dropped without being adopted, it leaves nothing behind.
    pub fn stage_detached(path: &str, plan: &Plan, inputs: &[&Input]) -> Result<StagedOutput, OutputError> {
        let mut staged = prepare(path)?;
        fill(&mut staged, path, plan, inputs)?;
        Ok(StagedOutput(staged))
    }

    /// Adds an output staged by [`Outputs::stage_detached`]; outputs are
    /// committed in the order they were staged or adopted.
    pub fn adopt(&mut self, output: StagedOutput) {
        self.staged.push(output.0);
    }

    /// Stages several outputs, writing them in parallel (the kernel copies of
    /// separate outputs are independent, and one core alone cannot keep up
    /// with the page cache). An error names the first failing output in the
    /// given order.
    pub fn stage_all(&mut self, items: &[(&str, &Plan)], inputs: &[&Input]) -> Result<(), OutputError> {
        let mut prepared = Vec::with_capacity(items.len());
        for (path, _) in items {
            prepared.push(prepare(path)?);
        }
        let results = in_parallel(&mut prepared, |i, staged| {
            let (path, plan) = items[i];
            fill(staged, path, plan, inputs)
        });
        let failed = results.into_iter().find_map(|r| match r {
            Some(Ok(())) => None,
            Some(Err(e)) => Some(e),
            None => Some(OutputError { path: String::new(), error: io::Error::other("a writer thread failed") }),
        });
        if let Some(e) = failed {
            return Err(e);
        }
        self.staged.extend(prepared);
        Ok(())
    }

    /// The staging file of the output staged `handle`-th (0 is the first),
    /// to read back what was written before it is committed (`offload
    /// prune` checks its output from the file, not from a copy in memory).
    pub fn staged_file(&self, handle: usize) -> Option<&File> {
        match self.staged.get(handle)? {
            Staged::Renamed { tmp, .. } => Some(tmp.as_file()),
            Staged::Stdout(data) | Staged::Direct { data, .. } => Some(data),
        }
    }

    /// Runs `check` on the bytes of the output staged `handle`-th, read
    /// back from its staging file as a reader will see it (memory-mapped:
    /// no second copy of a large file in memory). The rewriting commands
    /// (`prune`, `replace`) check their output this way before committing.
    pub fn check_staged(&self, handle: usize, check: impl FnOnce(&[u8]) -> Result<(), String>) -> Result<(), String> {
        let file = self.staged_file(handle).ok_or_else(|| "the staged output is missing".to_string())?;
        // SAFETY: a private read-only map of our own staging file, which
        // nothing else writes to.
        let written = unsafe { memmap2::Mmap::map(file) }.map_err(|e| error_text(&e))?;
        check(&written)
    }

    /// Gives the whole pages inside each zeroed `(offset, len)` range of the
    /// output staged `handle`-th back to the file system
    /// (`FALLOC_FL_PUNCH_HOLE`): the output takes less disk space where the
    /// file system allows it. The bytes read as zeros either way, so an
    /// error (no support, a pipe) changes nothing.
    pub fn punch_holes(&self, handle: usize, zeroed: impl IntoIterator<Item = (u64, u64)>) {
        const PAGE: u64 = 4096;
        let Some(file) = self.staged_file(handle) else { return };
        for (offset, len) in zeroed {
            let start = offset.div_ceil(PAGE).saturating_mul(PAGE);
            let end = offset.saturating_add(len) / PAGE * PAGE;
            if end > start {
                // SAFETY: fallocate only reads its arguments; the descriptor is open.
                unsafe {
                    libc::fallocate(
                        file.as_raw_fd(),
                        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                        start as libc::off_t,
                        (end - start) as libc::off_t,
                    );
                }
            }
        }
    }

    /// Stages an empty output to be filled piecewise with
    /// [`Outputs::write_at`] (for payloads written while a compressed input
    /// streams by); returns its handle.
    pub fn stage_empty(&mut self, path: &str) -> Result<usize, OutputError> {
        self.staged.push(prepare(path)?);
        Ok(self.staged.len() - 1)
    }

    /// Writes `bytes` at `offset` of a staged output.
    pub fn write_at(&mut self, handle: usize, offset: u64, bytes: &[u8]) -> Result<(), OutputError> {
        use std::os::unix::fs::FileExt;
        let Some(staged) = self.staged.get_mut(handle) else {
            return Err(OutputError { path: String::new(), error: io::ErrorKind::NotFound.into() });
        };
        match staged {
            Staged::Renamed { dest, tmp, .. } => tmp
                .as_file()
                .write_all_at(bytes, offset)
                .map_err(|error| OutputError { path: dest.display().to_string(), error }),
            Staged::Stdout(data) => {
                data.write_all_at(bytes, offset).map_err(|error| OutputError { path: "-".into(), error })
            }
            Staged::Direct { dest, data } => data
                .write_all_at(bytes, offset)
                .map_err(|error| OutputError { path: dest.display().to_string(), error }),
        }
    }

    /// Writes the bytes of `plan` that fall inside `ranges` (sorted
    /// `(offset, len)` pairs) into the output staged `handle`-th, which
    /// must already hold zeros there and `plan`'s bytes everywhere else:
    /// zero mode stages a copy of its input with the fat binary sections
    /// zeroed while it rebuilds them, then fills in only those sections.
    /// Zero pieces are skipped (the bytes are zeros already).
    /// Pieces that lie in a mapped input are kernel copies.
    pub fn fill_zeroed(
        &mut self,
        handle: usize,
        plan: &Plan,
        ranges: &[(u64, u64)],
        inputs: &[&Input],
    ) -> Result<(), OutputError> {
        let mut at = 0u64;
        for piece in &plan.pieces {
            let end = at.saturating_add(piece.len());
            for &(offset, len) in ranges {
                let (start, stop) = (offset.max(at), offset.saturating_add(len).min(end));
                if start >= stop {
                    continue;
                }
                let (from, to) = ((start - at) as usize, (stop - at) as usize);
                match piece {
                    Piece::Bytes(bytes) => {
                        let part = bytes.get(from..to).unwrap_or(&[]);
                        let copied = match (inputs.iter().find_map(|i| i.locate(part)), self.staged_file(handle)) {
                            (Some((src, offset)), Some(out)) => copy_range(src, offset, out, start, part.len()),
                            _ => 0,
                        };
                        self.write_at(handle, start + copied as u64, part.get(copied..).unwrap_or(&[]))?;
                    }
                    Piece::Fill { byte: 0, .. } => {}
                    Piece::Fill { byte, .. } => {
                        let run = vec![*byte; (to - from).min(1 << 16)];
                        let mut done = start;
                        while done < stop {
                            let k = (stop - done).min(run.len() as u64) as usize;
                            self.write_at(handle, done, &run[..k])?;
                            done += k as u64;
                        }
                    }
                }
            }
            at = end;
        }
        Ok(())
    }

    /// Moves every staged output into place. Files are renamed first; if
    /// one rename fails, the files already renamed are put back as they
    /// were (the replaced ones from hard-linked backups, new ones removed),
    /// so a failed commit changes no file. Devices, pipes and standard
    /// output, which cannot be taken back, are written last. Staging files
    /// of a run that is dropped without commit are deleted.
    pub fn commit(self) -> Result<(), OutputError> {
        // Two outputs of one run at one path: the second would silently
        // replace the first. Refused before anything is renamed
        // (docs/reliability.md).
        let mut seen = std::collections::HashSet::new();
        for s in &self.staged {
            if let Staged::Renamed { dest, .. } = s {
                let dir = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                let key = fs::canonicalize(dir)
                    .unwrap_or_else(|_| dir.to_path_buf())
                    .join(dest.file_name().unwrap_or_default());
                if !seen.insert(key) {
                    return Err(OutputError {
                        path: dest.display().to_string(),
                        error: io::Error::other("two outputs of this run have this name; nothing was written"),
                    });
                }
            }
        }
        let mut files = Vec::new();
        let mut streams = Vec::new();
        for s in self.staged {
            match s {
                Staged::Renamed { dest, tmp, reg, .. } => files.push((dest, tmp, reg)),
                other => streams.push(other),
            }
        }
        // A SIGINT or SIGTERM now waits for the renames (or their undoing).
        crate::signals::deferring_signals(|| rename_all(files))?;
        for s in streams {
            match s {
                Staged::Stdout(mut data) => {
                    let mut out = io::stdout().lock();
                    data.rewind()
                        .and_then(|_| io::copy(&mut data, &mut out))
                        .and_then(|_| out.flush())
                        .map_err(|error| OutputError { path: "-".into(), error })?;
                }
                Staged::Direct { dest, mut data } => {
                    data.rewind()
                        .and_then(|_| fs::OpenOptions::new().write(true).open(&dest))
                        .and_then(|mut f| io::copy(&mut data, &mut f))
                        .map_err(|error| OutputError { path: dest.display().to_string(), error })?;
                }
                Staged::Renamed { .. } => {}
            }
        }
        Ok(())
    }
}

/// Writes a plan into a prepared output.
pub(crate) fn fill(staged: &mut Staged, path: &str, plan: &Plan, inputs: &[&Input]) -> Result<(), OutputError> {
    match staged {
        Staged::Renamed { tmp, replaces: false, .. } => {
            write_plan_to(tmp.as_file(), plan, inputs, false).map_err(|error| OutputError { path: path.into(), error })
        }
        Staged::Renamed { dest, tmp, replaces: true, .. } => {
            // The old file's pages leave the page cache meanwhile, on
            // another core, instead of in the rename at commit.
            let dest = &*dest;
            // Below a megabyte the gain is not worth a thread.
            let large = fs::metadata(dest).is_ok_and(|m| m.len() >= 1 << 20);
            let done = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|scope| {
                if large {
                    scope.spawn(|| drop_cached_pages(dest, inputs, &done));
                }
                let written = write_plan_to(tmp.as_file(), plan, inputs, true);
                // The drop stops at its next step rather than hold the commit.
                done.store(true, std::sync::atomic::Ordering::Relaxed);
                written
            })
            .map_err(|error| OutputError { path: path.into(), error })
        }
        Staged::Stdout(data) | Staged::Direct { data, .. } => {
            write_plan_to(data, plan, inputs, false).map_err(|error| OutputError { path: path.into(), error })
        }
    }
}

/// Takes the pages of `dest`, a file an output is about to replace, out of
/// the page cache, leaving its contents on disk untouched: renaming the
/// new file over it frees them anyway, one by one (0.13 s for 576 MiB
/// here), and done now it overlaps the writing of the new file. Only when
/// that is sure to be a gain: `dest` is a regular file with no other name
/// (whose readers would lose the cache), not one of the run's inputs, and
/// none of its pages is dirty or being written (the advice would start
/// writing those to disk, a file about to be deleted). A hint: any
/// failure skips it. Done in steps of 64 MiB, and stopped when `done` is
/// set (the new file is written): on a busy machine the drop can take
/// longer than the writing, and the rename frees what is left anyway.
fn drop_cached_pages(dest: &Path, inputs: &[&Input], done: &std::sync::atomic::AtomicBool) {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let Ok(old) =
        fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY).open(dest)
    else {
        return;
    };
    let Ok(meta) = old.metadata() else { return };
    let is_input = inputs
        .iter()
        .filter_map(|i| i.file())
        .any(|f| f.metadata().is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino()));
    if !meta.is_file() || meta.nlink() != 1 || is_input || !all_pages_clean(&old) {
        return;
    }
    const STEP: u64 = 64 << 20;
    let mut at = 0u64;
    while at < meta.len() && !done.load(std::sync::atomic::Ordering::Relaxed) {
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(at), libc::off_t::try_from(STEP)) else { return };
        // SAFETY: posix_fadvise only reads its arguments; the descriptor is open.
        unsafe { libc::posix_fadvise(old.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED) };
        at += STEP;
    }
}

/// Whether none of `file`'s cached pages is dirty or under writeback, by
/// `cachestat` (Linux 6.5); false where the call is missing.
fn all_pages_clean(file: &File) -> bool {
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        /// The system call's number, the same on both architectures.
        const SYS_CACHESTAT: libc::c_long = 451;
        #[repr(C)]
        struct Range {
            off: u64,
            len: u64,
        }
        #[repr(C)]
        #[derive(Default)]
        struct Stat {
            nr_cache: u64,
            nr_dirty: u64,
            nr_writeback: u64,
            nr_evicted: u64,
            nr_recently_evicted: u64,
        }
        // A length of zero: to the end of the file.
        let range = Range { off: 0, len: 0 };
        let mut stat = Stat::default();
        // SAFETY: the kernel reads `range` and writes one `Stat`, both
        // live locals of the layout it expects; the descriptor is open.
        let r = unsafe {
            libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), &range as *const Range, &mut stat as *mut Stat, 0)
        };
        r == 0 && stat.nr_dirty == 0 && stat.nr_writeback == 0
    }
    #[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        let _ = file;
        false
    }
}

/// Decides how an output will be written and creates its staging file:
/// stdout and devices are buffered, regular files (new or replaced, through
/// symlinks) get a temporary file in their own folder with the final mode.
pub(crate) fn prepare(path: &str) -> Result<Staged, OutputError> {
    let err = |error| OutputError { path: path.to_string(), error };
    if path == "-" {
        return Ok(Staged::Stdout(tempfile::tempfile().map_err(err)?));
    }
    let dest = resolve_output(Path::new(path)).map_err(err)?;
    let existing = fs::metadata(&dest).ok();
    if let Some(meta) = &existing {
        let ft = meta.file_type();
        if ft.is_char_device() || ft.is_fifo() || ft.is_block_device() || ft.is_socket() {
            // A pipe or device another user left in /tmp is not written
            // into (the kernel's protected_fifos rule, by the same test).
            use std::os::unix::fs::MetadataExt;
            let dir = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            // SAFETY: geteuid has no preconditions.
            let euid = unsafe { libc::geteuid() };
            if let Ok(d) = fs::metadata(dir)
                && !may_follow(d.mode(), d.uid(), meta.uid(), euid)
            {
                return Err(err(io::Error::from_raw_os_error(libc::EACCES)));
            }
            return Ok(Staged::Direct { dest, data: tempfile::tempfile().map_err(err)? });
        }
        if meta.is_dir() {
            return Err(err(io::Error::from_raw_os_error(libc::EISDIR)));
        }
    }
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let (tmp, reg) = crate::signals::create_staging(&dir, &name).map_err(|e| err(normalize_create_error(e, &dir)))?;
    let mode = existing.as_ref().map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o666 & !umask());
    tmp.as_file().set_permissions(fs::Permissions::from_mode(mode)).map_err(err)?;
    Ok(Staged::Renamed { dest, tmp, replaces: existing.is_some(), reg })
}

/// How many symbolic links are followed to find an output's real path.
pub(crate) const MAX_LINKS: usize = 40;

/// The file an output path names: a symbolic link is followed (also when
/// it dangles, as opening it for writing would), so the link stays and the
/// file it points to is replaced, in the link target's own directory.
/// A loop of links is ELOOP, as for `open`.
///
/// A link in a sticky world-writable folder (`/tmp`) is followed only when
/// it belongs to the user running the tool or to the folder's owner, the
/// rule of the kernel's `fs.protected_symlinks`; any other link there is
/// refused with EACCES, so another user cannot plant a link at an output
/// name and have our output replace a file of their choosing
/// (docs/reliability.md).
pub(crate) fn resolve_output(path: &Path) -> io::Result<PathBuf> {
    let mut dest = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let meta = match fs::symlink_metadata(&dest) {
            Ok(m) if m.file_type().is_symlink() => m,
            _ => return Ok(dest),
        };
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if let Ok(dir_meta) = fs::metadata(dir) {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid has no preconditions.
            let euid = unsafe { libc::geteuid() };
            if !may_follow(dir_meta.mode(), dir_meta.uid(), meta.uid(), euid) {
                return Err(io::Error::from_raw_os_error(libc::EACCES));
            }
        }
        let target = fs::read_link(&dest)?;
        dest = match dest.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// Whether a symbolic link owned by `link_uid` in a folder of mode
/// `dir_mode` owned by `dir_uid` may be followed by user `euid`: always,
/// unless the folder is sticky and world-writable and the link belongs
/// neither to `euid` nor to the folder's owner.
pub(crate) fn may_follow(dir_mode: u32, dir_uid: u32, link_uid: u32, euid: u32) -> bool {
    let shared = dir_mode & 0o1002 == 0o1002;
    !shared || link_uid == euid || link_uid == dir_uid
}

/// What renaming one output replaced, to undo it.
pub(crate) enum Replaced {
    /// Nothing was there: undoing removes the new file.
    Nothing,
    /// The old file, hard-linked under a temporary name.
    Backup(PathBuf),
    /// The old file could not be kept (no hard links here); it cannot be
    /// put back.
    Lost,
}

/// A fresh name next to `dest` for a backup link.
pub(crate) fn backup_name(dest: &Path, n: usize) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dest.with_file_name(format!(".{name}.{}.{n}.bak", std::process::id()))
}

pub(crate) fn rename_all(
    files: Vec<(PathBuf, tempfile::NamedTempFile, crate::signals::Registration)>,
) -> Result<(), OutputError> {
    let single = files.len() == 1;
    let mut done: Vec<(PathBuf, Replaced)> = Vec::with_capacity(files.len());
    let mut result = Ok(());
    for (dest, tmp, _reg) in files {
        // A single output needs no undo: rename is atomic by itself.
        let replaced = if single || fs::symlink_metadata(&dest).is_err() {
            Replaced::Nothing
        } else {
            (0..100)
                .map(|n| backup_name(&dest, n))
                .find_map(|b| fs::hard_link(&dest, &b).ok().map(|_| Replaced::Backup(b)))
                .unwrap_or(Replaced::Lost)
        };
        match tmp.persist(&dest) {
            Ok(_) => done.push((dest, replaced)),
            Err(e) => {
                if let Replaced::Backup(b) = &replaced {
                    let _ = fs::remove_file(b);
                }
                result = Err(OutputError { path: dest.display().to_string(), error: e.error });
                break;
            }
        }
    }
    if result.is_ok() {
        // Removing a backup frees the replaced file's blocks, the slow part
        // of replacing large outputs (about 15 ms per 64 MiB on ext4 with
        // online discard): done in parallel.
        let mut backups: Vec<PathBuf> = done
            .into_iter()
            .filter_map(|(_, r)| match r {
                Replaced::Backup(b) => Some(b),
                _ => None,
            })
            .collect();
        in_parallel(&mut backups, |_, b| {
            let _ = fs::remove_file(b);
        });
        return result;
    }
    // A rename failed: undo the ones before it, last first. (A single
    // output that failed renamed nothing, so `done` is empty then.)
    for (dest, replaced) in done.into_iter().rev() {
        match replaced {
            Replaced::Backup(b) => {
                let _ = fs::rename(b, &dest);
            }
            Replaced::Nothing => {
                let _ = fs::remove_file(&dest);
            }
            Replaced::Lost => {}
        }
    }
    result
}

/// tempfile reports a missing directory as ENOENT with its own wording; keep
/// the system's message.
pub(crate) fn normalize_create_error(e: io::Error, dir: &Path) -> io::Error {
    if !dir.exists() {
        return io::Error::from_raw_os_error(libc::ENOENT);
    }
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => e,
    }
}
