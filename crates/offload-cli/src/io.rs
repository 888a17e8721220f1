//! File I/O policy shared by every tool:
//!
//! * inputs are memory-mapped (read fully for stdin, pipes and devices);
//! * outputs are staged in temporary files next to their destination and
//!   renamed into place only when every output of the run has been written,
//!   so a failed run creates nothing and changes nothing; a rename that
//!   fails at commit undoes the renames before it;
//! * standard output, pipes and devices are staged in anonymous temporary
//!   files (never in memory) and written after the files are in place;
//! * a symbolic link as output keeps the link and replaces its target;
//! * an input that is also an output is safe: the input stays mapped on the
//!   old inode while the new file is renamed over the path;
//! * payloads borrowed from a mapped input are copied by the kernel
//!   (`copy_file_range`), falling back to ordinary writes.

use offload_format::plan::{Piece, Plan};
use std::fs::{self, File};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The text LLVM prints for an I/O error: the system message without Rust's
/// " (os error N)" suffix.
pub fn error_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

enum Backing {
    Mapped { map: memmap2::Mmap, file: File },
    Owned(Vec<u8>),
}

/// One input file, as bytes.
pub struct Input {
    /// The path as given on the command line (`-` for stdin).
    pub path: String,
    backing: Backing,
}

impl Input {
    /// Opens `path` (`-` reads standard input).
    pub fn open(path: &str) -> io::Result<Input> {
        if path == "-" {
            let mut buf = Vec::new();
            io::stdin().lock().read_to_end(&mut buf)?;
            return Ok(Input::from_bytes(path, buf));
        }
        let file = File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the map is read-only and private to this process. As with
            // every mmap-based tool, a file truncated by another process while
            // we read it can fault; the tools never write to their inputs.
            let map = unsafe { memmap2::Mmap::map(&file)? };
            return Ok(Input { path: path.to_string(), backing: Backing::Mapped { map, file } });
        }
        let mut buf = Vec::new();
        (&file).read_to_end(&mut buf)?;
        Ok(Input::from_bytes(path, buf))
    }

    /// An input held in memory (tests, stdin, decompressed data).
    pub fn from_bytes(path: &str, bytes: Vec<u8>) -> Input {
        Input { path: path.to_string(), backing: Backing::Owned(bytes) }
    }

    pub fn bytes(&self) -> &[u8] {
        match &self.backing {
            Backing::Mapped { map, .. } => map,
            Backing::Owned(v) => v,
        }
    }

    /// If `slice` lies inside this input's mapped file: the file and the
    /// slice's offset in it.
    fn locate(&self, slice: &[u8]) -> Option<(&File, u64)> {
        let Backing::Mapped { map, file } = &self.backing else { return None };
        let base = map.as_ptr() as usize;
        let start = slice.as_ptr() as usize;
        let end = start.checked_add(slice.len())?;
        (start >= base && end <= base + map.len()).then(|| (file, (start - base) as u64))
    }
}

/// The bytes of a plan in one buffer (for compression). Pieces that lie in
/// a mapped input are read with `pread` straight into the buffer rather
/// than copied from the mapping (which costs a page fault per 4 KiB of
/// input) or zeroed first; the buffer asks for huge pages.
pub fn materialize(plan: &Plan, inputs: &[&Input]) -> io::Result<Vec<u8>> {
    let len = usize::try_from(plan.len()).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
    let mut out: Vec<u8> = Vec::new();
    out.try_reserve_exact(len).map_err(|_| io::Error::from(io::ErrorKind::OutOfMemory))?;
    advise_huge_pages(&mut out);
    for piece in &plan.pieces {
        match piece {
            Piece::Fill { byte, len } => out.resize(out.len() + *len as usize, *byte),
            Piece::Bytes(bytes) => match inputs.iter().find_map(|i| i.locate(bytes)) {
                Some((file, offset)) if bytes.len() >= 1 << 16 => pread_append(&mut out, file, offset, bytes.len())?,
                _ => out.extend_from_slice(bytes),
            },
        }
    }
    Ok(out)
}

/// Asks for transparent huge pages over a buffer's capacity (where the
/// system grants them on request): 2 MiB faults instead of 4 KiB ones. The
/// advice needs a page-aligned start, which an allocation need not have.
fn advise_huge_pages(buf: &mut Vec<u8>) {
    const PAGE: usize = 4096;
    let (start, cap) = (buf.as_mut_ptr() as usize, buf.capacity());
    let aligned = start.next_multiple_of(PAGE);
    if cap >= 1 << 21 && aligned < start + cap {
        // SAFETY: advice on memory this buffer owns; it changes no contents.
        unsafe { libc::madvise(aligned as *mut libc::c_void, start + cap - aligned, libc::MADV_HUGEPAGE) };
    }
}

/// Appends `len` bytes of `file` at `offset` to `out`, which has the
/// capacity, reading them straight into the spare capacity.
fn pread_append(out: &mut Vec<u8>, file: &File, offset: u64, len: usize) -> io::Result<()> {
    assert!(out.capacity() - out.len() >= len, "materialize reserved the whole plan");
    let mut done = 0;
    while done < len {
        let at = i64::try_from(offset + done as u64).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the destination is spare capacity of `out` (checked
        // above); the kernel writes at most `len - done` bytes into it.
        let n = unsafe { libc::pread(file.as_raw_fd(), out.as_mut_ptr().add(out.len() + done).cast(), len - done, at) };
        match n {
            n if n > 0 => done += n as usize,
            0 => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    // SAFETY: the `len` bytes after the old length were written by pread.
    unsafe { out.set_len(out.len() + len) };
    Ok(())
}

fn umask() -> u32 {
    static MASK: OnceLock<u32> = OnceLock::new();
    *MASK.get_or_init(|| {
        // SAFETY: umask cannot fail; it is set back at once. The tools call
        // this from their only thread.
        unsafe {
            let old = libc::umask(0o022);
            libc::umask(old);
            old as u32
        }
    })
}

/// Writes plans to a file, batching small pieces and handing borrowed
/// payloads to the kernel.
struct PlanWriter<'f> {
    out: &'f File,
    buf: Vec<u8>,
    kernel_copy: bool,
    /// Long runs of zeros are skipped with a seek, leaving a hole that
    /// reads as zeros (only in a regular file, which every staged output
    /// is: a fresh temporary file written from its start).
    holes: bool,
    /// Bytes skipped since the last write: the file is extended to its
    /// full length at the end.
    skipped: bool,
}

impl PlanWriter<'_> {
    const BUF: usize = 1 << 16;

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let mut out = self.out;
            out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buf.len() + bytes.len() > Self::BUF {
            self.flush()?;
            if bytes.len() > Self::BUF {
                let mut out = self.out;
                return out.write_all(bytes);
            }
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// Copies `len` bytes at `offset` of `src` with copy_file_range; returns
    /// how many bytes were copied before the kernel declined.
    fn kernel_copy(&mut self, src: &File, offset: u64, len: u64) -> io::Result<u64> {
        self.flush()?;
        let mut done = 0u64;
        while done < len {
            let mut off_in = libc::loff_t::try_from(offset + done).map_err(|_| io::ErrorKind::InvalidInput)?;
            let chunk = usize::try_from(len - done).unwrap_or(usize::MAX).min(1 << 30);
            // SAFETY: both descriptors are open for the duration of the call;
            // the kernel reads from `src` at `off_in` and appends to `out`
            // at its file position.
            let n = unsafe {
                libc::copy_file_range(
                    src.as_raw_fd(),
                    &mut off_in,
                    self.out.as_raw_fd(),
                    std::ptr::null_mut(),
                    chunk,
                    0,
                )
            };
            if n <= 0 {
                if n < 0 {
                    self.kernel_copy = false;
                }
                break;
            }
            done += n as u64;
        }
        Ok(done)
    }

    fn piece(&mut self, piece: &Piece, inputs: &[&Input]) -> io::Result<()> {
        match piece {
            Piece::Fill { byte: 0, len } if self.holes && *len >= Self::BUF as u64 => {
                self.flush()?;
                let by = i64::try_from(*len).map_err(|_| io::ErrorKind::InvalidInput)?;
                let mut out = self.out;
                out.seek(io::SeekFrom::Current(by))?;
                self.skipped = true;
                Ok(())
            }
            Piece::Fill { byte, len } => {
                let run = [*byte; 4096];
                let mut left = *len;
                while left > 0 {
                    let k = left.min(run.len() as u64) as usize;
                    self.write(&run[..k])?;
                    left -= k as u64;
                }
                Ok(())
            }
            Piece::Bytes(bytes) => {
                // Small pieces are cheaper to copy through the buffer.
                if self.kernel_copy
                    && bytes.len() >= 1 << 16
                    && let Some((file, offset)) = inputs.iter().find_map(|i| i.locate(bytes))
                {
                    let done = self.kernel_copy(file, offset, bytes.len() as u64)?;
                    return self.write(&bytes[done as usize..]);
                }
                self.write(bytes)
            }
        }
    }
}

fn write_plan_to(out: &File, plan: &Plan, inputs: &[&Input]) -> io::Result<()> {
    // A fresh regular file (the staged outputs are): zeros can be holes.
    let holes = out.metadata().is_ok_and(|m| m.is_file() && m.len() == 0);
    let mut w = PlanWriter { out, buf: Vec::with_capacity(PlanWriter::BUF), kernel_copy: true, holes, skipped: false };
    for p in &plan.pieces {
        w.piece(p, inputs)?;
    }
    w.flush()?;
    if w.skipped {
        // A seek past the end makes no bytes: a plan ending in zeros needs
        // the file extended to where the zeros end.
        let mut out = out;
        let end = out.stream_position()?;
        if out.metadata()?.len() < end {
            out.set_len(end)?;
        }
    }
    Ok(())
}

enum Staged {
    /// Standard output: the bytes wait in an anonymous temporary file (not
    /// in memory, so a large output cannot exhaust it) and are copied out at
    /// commit.
    Stdout(File),
    /// A temporary file to rename over `dest`; `replaces` when a file is
    /// there already.
    Renamed { dest: PathBuf, tmp: tempfile::NamedTempFile, replaces: bool },
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
        let mut files = Vec::new();
        let mut streams = Vec::new();
        for s in self.staged {
            match s {
                Staged::Renamed { dest, tmp, .. } => files.push((dest, tmp)),
                other => streams.push(other),
            }
        }
        rename_all(files)?;
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

/// Copies `len` bytes at `offset` of `src` to `at` in `out` in the kernel
/// (`copy_file_range` with both offsets given: the descriptors' positions
/// stay); returns how many bytes were copied before the kernel declined
/// (the caller writes the rest).
fn copy_range(src: &File, offset: u64, out: &File, at: u64, len: usize) -> usize {
    let mut done = 0usize;
    while done < len {
        let (Ok(mut off_in), Ok(mut off_out)) =
            (libc::loff_t::try_from(offset + done as u64), libc::loff_t::try_from(at + done as u64))
        else {
            break;
        };
        // SAFETY: both descriptors are open for the call; the kernel reads
        // `src` at `off_in` and writes `out` at `off_out`.
        let n = unsafe {
            libc::copy_file_range(
                src.as_raw_fd(),
                &mut off_in,
                out.as_raw_fd(),
                &mut off_out,
                (len - done).min(1 << 30),
                0,
            )
        };
        if n <= 0 {
            break;
        }
        done += n as usize;
    }
    done
}

/// Starts writing a staged file's pages back to disk, without waiting.
/// ext4 (and btrfs) do this themselves when a file is renamed over an
/// existing one, so that a crash cannot leave the path empty; there it
/// happens at commit, one file at a time under the directory's lock (20 to
/// 55 ms per 64 MiB output), here in the writer threads, in parallel.
/// Only a hint: an error changes nothing.
fn start_writeback(file: &File) {
    // SAFETY: sync_file_range only reads its arguments; the descriptor is open.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Reads a member of a thin archive: the file its stored `name` gives,
/// relative to the archive's folder unless absolute, as LLVM resolves it.
/// Only regular files are read (a name could point at a device or a pipe).
pub fn read_thin_member(archive: &str, name: &[u8]) -> Result<Vec<u8>, String> {
    use std::os::unix::ffi::OsStrExt;
    let name = Path::new(std::ffi::OsStr::from_bytes(name));
    let path = Path::new(archive).parent().map_or_else(|| name.to_path_buf(), |dir| dir.join(name));
    let meta = fs::metadata(&path).map_err(|e| error_text(&e))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    fs::read(&path).map_err(|e| error_text(&e))
}

/// Runs `work` on every item (with its index), spread over up to four
/// threads; the results come back in item order, `None` where a thread
/// panicked.
fn in_parallel<T: Send, R: Send>(items: &mut [T], work: impl Fn(usize, &mut T) -> R + Sync) -> Vec<Option<R>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    let per_thread = items.len().div_ceil(threads).max(1);
    let work = &work;
    std::thread::scope(|scope| {
        let jobs: Vec<_> = items
            .chunks_mut(per_thread)
            .enumerate()
            .map(|(c, chunk)| {
                let len = chunk.len();
                let job = scope.spawn(move || {
                    chunk.iter_mut().enumerate().map(|(i, item)| work(c * per_thread + i, item)).collect::<Vec<_>>()
                });
                (job, len)
            })
            .collect();
        jobs.into_iter()
            .flat_map(|(job, len)| match job.join() {
                Ok(results) => results.into_iter().map(Some).collect(),
                Err(_) => std::iter::repeat_with(|| None).take(len).collect::<Vec<_>>(),
            })
            .collect()
    })
}

/// Writes a plan into a prepared output.
fn fill(staged: &mut Staged, path: &str, plan: &Plan, inputs: &[&Input]) -> Result<(), OutputError> {
    match staged {
        Staged::Renamed { tmp, replaces, .. } => {
            write_plan_to(tmp.as_file(), plan, inputs).map_err(|error| OutputError { path: path.into(), error })?;
            if *replaces {
                start_writeback(tmp.as_file());
            }
            Ok(())
        }
        Staged::Stdout(data) | Staged::Direct { data, .. } => {
            write_plan_to(data, plan, inputs).map_err(|error| OutputError { path: path.into(), error })
        }
    }
}

/// Decides how an output will be written and creates its staging file:
/// stdout and devices are buffered, regular files (new or replaced, through
/// symlinks) get a temporary file in their own folder with the final mode.
fn prepare(path: &str) -> Result<Staged, OutputError> {
    let err = |error| OutputError { path: path.to_string(), error };
    if path == "-" {
        return Ok(Staged::Stdout(tempfile::tempfile().map_err(err)?));
    }
    let dest = resolve_output(Path::new(path)).map_err(err)?;
    let existing = fs::metadata(&dest).ok();
    if let Some(meta) = &existing {
        let ft = meta.file_type();
        if ft.is_char_device() || ft.is_fifo() || ft.is_block_device() || ft.is_socket() {
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
    let tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(|e| err(normalize_create_error(e, &dir)))?;
    let mode = existing.as_ref().map(|m| m.permissions().mode() & 0o7777).unwrap_or(0o666 & !umask());
    tmp.as_file().set_permissions(fs::Permissions::from_mode(mode)).map_err(err)?;
    Ok(Staged::Renamed { dest, tmp, replaces: existing.is_some() })
}

/// How many symbolic links are followed to find an output's real path.
const MAX_LINKS: usize = 40;

/// The file an output path names: a symbolic link is followed (also when
/// it dangles, as opening it for writing would), so the link stays and the
/// file it points to is replaced, in the link target's own directory.
/// A loop of links is ELOOP, as for `open`.
fn resolve_output(path: &Path) -> io::Result<PathBuf> {
    let mut dest = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        let is_link = fs::symlink_metadata(&dest).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            return Ok(dest);
        }
        let target = fs::read_link(&dest)?;
        dest = match dest.parent() {
            Some(dir) if target.is_relative() => dir.join(target),
            _ => target,
        };
    }
    Err(io::Error::from_raw_os_error(libc::ELOOP))
}

/// What renaming one output replaced, to undo it.
enum Replaced {
    /// Nothing was there: undoing removes the new file.
    Nothing,
    /// The old file, hard-linked under a temporary name.
    Backup(PathBuf),
    /// The old file could not be kept (no hard links here); it cannot be
    /// put back.
    Lost,
}

/// A fresh name next to `dest` for a backup link.
fn backup_name(dest: &Path, n: usize) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dest.with_file_name(format!(".{name}.{}.{n}.bak", std::process::id()))
}

fn rename_all(files: Vec<(PathBuf, tempfile::NamedTempFile)>) -> Result<(), OutputError> {
    let single = files.len() == 1;
    let mut done: Vec<(PathBuf, Replaced)> = Vec::with_capacity(files.len());
    let mut result = Ok(());
    for (dest, tmp) in files {
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
fn normalize_create_error(e: io::Error, dir: &Path) -> io::Error {
    if !dir.exists() {
        return io::Error::from_raw_os_error(libc::ENOENT);
    }
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staged_outputs_appear_only_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::write(&a, b"old").unwrap();
        let mut outs = Outputs::new();
        outs.stage(a.to_str().unwrap(), &Plan::borrowed(b"new-a"), &[]).unwrap();
        outs.stage(b.to_str().unwrap(), &Plan::borrowed(b"new-b"), &[]).unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"old");
        assert!(!b.exists());
        outs.commit().unwrap();
        assert_eq!(fs::read(&a).unwrap(), b"new-a");
        assert_eq!(fs::read(&b).unwrap(), b"new-b");
    }

    #[test]
    fn long_zero_runs_become_holes_and_read_as_zeros() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("sparse");
        // Zeros in the middle and at the end (the file must still reach
        // its full length), a short run written as bytes, other fills kept.
        let mut plan = Plan::borrowed(b"head");
        plan.zeros(8 << 20);
        plan.own(b"middle".to_vec());
        plan.zeros(100);
        plan.pieces.push(Piece::Fill { byte: 0xcc, len: 1 << 17 });
        plan.zeros(4 << 20);
        let mut outs = Outputs::new();
        outs.stage(out.to_str().unwrap(), &plan, &[]).unwrap();
        outs.commit().unwrap();
        let got = fs::read(&out).unwrap();
        assert_eq!(got, plan.to_vec());
        // Where the file system makes holes (ext4, xfs, tmpfs), the 12 MiB
        // of zeros take no blocks.
        let blocks = fs::metadata(&out).unwrap().blocks() * 512;
        assert!(blocks < 2 << 20, "{blocks} bytes allocated for a 12 MiB file of mostly zeros");
    }

    #[test]
    fn filling_zeroed_ranges_gives_the_whole_plan() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("filled");
        // The plan: bytes, a fill of 0xcc and zeros straddling the two
        // ranges, so every piece kind is cut at a range edge.
        let mut plan = Plan::borrowed(b"0123456789");
        plan.fill(0xcc, 6);
        plan.own(b"abcdef".to_vec());
        plan.zeros(4);
        plan.own(b"tail".to_vec());
        let full = plan.to_vec();
        let ranges = [(8u64, 10u64), (22, 4)];
        let mut skeleton = full.clone();
        for &(o, l) in &ranges {
            skeleton[o as usize..(o + l) as usize].fill(0);
        }
        let mut outs = Outputs::new();
        outs.stage(out.to_str().unwrap(), &Plan::borrowed(&skeleton), &[]).unwrap();
        outs.fill_zeroed(0, &plan, &ranges, &[]).unwrap();
        outs.commit().unwrap();
        assert_eq!(fs::read(&out).unwrap(), full);
    }

    #[test]
    fn dropped_outputs_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let mut outs = Outputs::new();
        outs.stage(a.to_str().unwrap(), &Plan::borrowed(b"x"), &[]).unwrap();
        drop(outs);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    /// A rename that fails at commit (here: the last destination became a
    /// directory after staging) puts back every output renamed before it.
    #[test]
    fn a_failed_commit_changes_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
        fs::write(p("a"), b"old-a").unwrap();
        fs::write(p("c"), b"old-c").unwrap();
        let mut outs = Outputs::new();
        for name in ["a", "b", "c", "d"] {
            outs.stage(&p(name), &Plan::borrowed(name.as_bytes()), &[]).unwrap();
        }
        fs::create_dir(p("d")).unwrap();
        fs::write(dir.path().join("d/keep"), b"").unwrap();
        let e = outs.commit().unwrap_err();
        assert!(e.path.ends_with("/d"), "{e}");
        assert_eq!(fs::read(p("a")).unwrap(), b"old-a");
        assert_eq!(fs::read(p("c")).unwrap(), b"old-c");
        assert!(!Path::new(&p("b")).exists());
        assert_eq!(names_in(dir.path()), ["a", "c", "d"]);
    }

    #[test]
    fn a_successful_commit_leaves_no_backups() {
        let dir = tempfile::tempdir().unwrap();
        let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
        fs::write(p("a"), b"old-a").unwrap();
        let mut outs = Outputs::new();
        outs.stage(&p("a"), &Plan::borrowed(b"new-a"), &[]).unwrap();
        outs.stage(&p("b"), &Plan::borrowed(b"new-b"), &[]).unwrap();
        outs.commit().unwrap();
        assert_eq!(fs::read(p("a")).unwrap(), b"new-a");
        assert_eq!(names_in(dir.path()), ["a", "b"]);
    }

    /// Links are followed, dangling or not: the link stays, its target is
    /// written.
    #[test]
    fn symbolic_links_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        std::os::unix::fs::symlink("sub/target", dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("link", dir.path().join("link2")).unwrap();
        let mut outs = Outputs::new();
        outs.stage(dir.path().join("link2").to_str().unwrap(), &Plan::borrowed(b"one"), &[]).unwrap();
        outs.commit().unwrap();
        assert_eq!(fs::read(sub.join("target")).unwrap(), b"one");
        assert!(fs::symlink_metadata(dir.path().join("link")).unwrap().file_type().is_symlink());
        let mut outs = Outputs::new();
        outs.stage(dir.path().join("link").to_str().unwrap(), &Plan::borrowed(b"two"), &[]).unwrap();
        outs.commit().unwrap();
        assert_eq!(fs::read(sub.join("target")).unwrap(), b"two");
        assert_eq!(names_in(&sub), ["target"]);
        // A loop of links is an error, as for open(2).
        let looped = dir.path().join("loop");
        std::os::unix::fs::symlink("loop", &looped).unwrap();
        let e = Outputs::new().stage(looped.to_str().unwrap(), &Plan::borrowed(b"x"), &[]).unwrap_err();
        assert_eq!(e.error.raw_os_error(), Some(libc::ELOOP));
        assert!(fs::symlink_metadata(&looped).unwrap().file_type().is_symlink());
    }

    #[test]
    fn missing_directory_is_reported_like_llvm() {
        let mut outs = Outputs::new();
        let e = outs.stage("/nonexistent-dir/x", &Plan::new(), &[]).unwrap_err();
        assert_eq!(e.to_string(), "'/nonexistent-dir/x': No such file or directory");
    }

    /// A mapped input file of `len` patterned bytes in `dir`.
    fn patterned_input(dir: &Path, len: u32) -> Input {
        let src = dir.join("src");
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        fs::write(&src, &data).unwrap();
        Input::open(src.to_str().unwrap()).unwrap()
    }

    #[test]
    fn filling_zeroed_ranges_copies_from_the_mapped_input() {
        let dir = tempfile::tempdir().unwrap();
        let input = patterned_input(dir.path(), 300_000);
        let bytes = input.bytes();
        // The output: the input with 100,000 bytes at 50,000 zeroed, then
        // the first 60,000 of them filled back from the input.
        let mut plan = Plan::borrowed(&bytes[..110_000]);
        plan.zeros(40_000);
        plan.borrow(&bytes[150_000..]);
        let mut skeleton = Plan::borrowed(&bytes[..50_000]);
        skeleton.zeros(100_000);
        skeleton.borrow(&bytes[150_000..]);
        let out = dir.path().join("filled");
        let mut outs = Outputs::new();
        outs.stage(out.to_str().unwrap(), &skeleton, &[&input]).unwrap();
        outs.fill_zeroed(0, &plan, &[(50_000, 100_000)], &[&input]).unwrap();
        outs.commit().unwrap();
        assert_eq!(fs::read(&out).unwrap(), plan.to_vec());
    }

    #[test]
    fn large_borrowed_pieces_are_copied_from_the_mapped_input() {
        let dir = tempfile::tempdir().unwrap();
        let input = patterned_input(dir.path(), 300_000);
        let mut plan = Plan::new();
        plan.own(b"head".to_vec());
        plan.borrow(&input.bytes()[1000..250_000]);
        plan.zeros(3);
        plan.borrow(&input.bytes()[5..9]);
        let out = dir.path().join("out");
        let mut outs = Outputs::new();
        outs.stage(out.to_str().unwrap(), &plan, &[&input]).unwrap();
        outs.commit().unwrap();
        assert_eq!(fs::read(&out).unwrap(), plan.to_vec());
    }

    /// `materialize` (compression's input) reads large pieces of a mapped
    /// input with pread into spare capacity: the bytes are the plan's.
    #[test]
    fn materialized_plans_hold_their_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let input = patterned_input(dir.path(), 3_000_000);
        let mut plan = Plan::new();
        plan.own(b"head".to_vec());
        plan.borrow(&input.bytes()[1000..2_500_000]);
        plan.fill(0xcc, 5);
        plan.borrow(&input.bytes()[5..9]);
        plan.borrow(&input.bytes()[100_000..2_900_000]);
        assert_eq!(materialize(&plan, &[&input]).unwrap(), plan.to_vec());
    }

    #[test]
    fn same_path_as_input_and_output() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data = vec![7u8; 200_000];
        fs::write(&p, &data).unwrap();
        let input = Input::open(p.to_str().unwrap()).unwrap();
        let mut plan = Plan::new();
        plan.own(b"prefix".to_vec());
        plan.borrow(input.bytes());
        let mut outs = Outputs::new();
        outs.stage(p.to_str().unwrap(), &plan, &[&input]).unwrap();
        outs.commit().unwrap();
        let got = fs::read(&p).unwrap();
        assert_eq!(&got[..6], b"prefix");
        assert_eq!(&got[6..], &data[..]);
        // The old mapping still shows the old content.
        assert_eq!(input.bytes(), &data[..]);
    }

    #[test]
    fn new_files_get_umask_permissions() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("perm");
        let mut outs = Outputs::new();
        outs.stage(p.to_str().unwrap(), &Plan::borrowed(b"x"), &[]).unwrap();
        outs.commit().unwrap();
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o666 & !umask());
    }

    #[test]
    fn several_outputs_are_written_together() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
        fs::write(&src, &data).unwrap();
        let input = Input::open(src.to_str().unwrap()).unwrap();
        let plans: Vec<Plan> = (0..7).map(|i| Plan::borrowed(&input.bytes()[i * 1000..(i + 1) * 100_000])).collect();
        let paths: Vec<String> = (0..7).map(|i| dir.path().join(format!("o{i}")).display().to_string()).collect();
        let items: Vec<(&str, &Plan)> = paths.iter().map(String::as_str).zip(&plans).collect();
        let mut outs = Outputs::new();
        outs.stage_all(&items, &[&input]).unwrap();
        outs.commit().unwrap();
        for i in 0..7 {
            assert_eq!(fs::read(&paths[i]).unwrap(), &data[i * 1000..(i + 1) * 100_000]);
        }
        let bad = ["/nonexistent-dir/x".to_string(), paths[0].clone()];
        let items: Vec<(&str, &Plan)> = bad.iter().map(String::as_str).zip(&plans).collect();
        let e = Outputs::new().stage_all(&items, &[&input]).unwrap_err();
        assert_eq!(e.path, "/nonexistent-dir/x");
    }

    #[test]
    fn outputs_can_be_filled_piecewise() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("piecewise");
        let mut outs = Outputs::new();
        let h = outs.stage_empty(p.to_str().unwrap()).unwrap();
        outs.write_at(h, 4, b"EFGH").unwrap();
        outs.write_at(h, 0, b"ABCD").unwrap();
        assert!(!p.exists());
        outs.commit().unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"ABCDEFGH");
    }

    #[test]
    fn error_text_drops_the_os_error_suffix() {
        let e = io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(error_text(&e), "No such file or directory");
    }
}
