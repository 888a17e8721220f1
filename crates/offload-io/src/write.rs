//! Writing a plan's bytes: into one buffer, or into a file with borrowed
//! payloads copied by the kernel.

use crate::*;
use offload_format::plan::{Piece, Plan};
use std::fs::File;
use std::io::{self, Seek, Write};
use std::os::unix::io::AsRawFd;
use std::sync::OnceLock;

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
pub(crate) fn advise_huge_pages(buf: &mut Vec<u8>) {
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
pub(crate) fn pread_append(out: &mut Vec<u8>, file: &File, offset: u64, len: usize) -> io::Result<()> {
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

pub(crate) fn umask() -> u32 {
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
pub(crate) struct PlanWriter<'f> {
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
    /// Whether the file's pages are sent to disk after every
    /// [`WRITEBACK_STEP`] written (see [`write_plan_to`]).
    writeback: bool,
}

/// How much is written between two starts of the writeback.
const WRITEBACK_STEP: usize = 16 << 20;

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

    /// Starts writing back what was written so far, when asked to.
    fn progressed(&self) {
        if self.writeback {
            start_writeback(self.out);
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        if self.buf.len() + bytes.len() > Self::BUF {
            self.flush()?;
            if bytes.len() > Self::BUF {
                let mut out = self.out;
                for part in bytes.chunks(WRITEBACK_STEP) {
                    out.write_all(part)?;
                    self.progressed();
                }
                return Ok(());
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
            let step = if self.writeback { WRITEBACK_STEP } else { 1 << 30 };
            let chunk = usize::try_from(len - done).unwrap_or(usize::MAX).min(step);
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
            self.progressed();
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

/// Writes `plan` into `out`. With `writeback`, the pages written are also
/// sent to disk (see [`start_writeback`] for why): for a large plan after
/// every [`WRITEBACK_STEP`] written, so that the flush goes on while the
/// file is written instead of after it, and little is left at the end.
/// (Started from a second thread, the writeback slowed the copy: 0.82 s
/// against 0.69 s for 576 MiB here; docs/development.md.)
pub(crate) fn write_plan_to(out: &File, plan: &Plan, inputs: &[&Input], writeback: bool) -> io::Result<()> {
    // A fresh regular file (the staged outputs are): zeros can be holes.
    let holes = out.metadata().is_ok_and(|m| m.is_file() && m.len() == 0);
    let mut w = PlanWriter {
        out,
        buf: Vec::with_capacity(PlanWriter::BUF),
        kernel_copy: true,
        holes,
        skipped: false,
        writeback: writeback && plan.len() >= 2 * WRITEBACK_STEP as u64,
    };
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
    if writeback {
        // What was written since the last start (or all of a small plan).
        start_writeback(out);
    }
    Ok(())
}

/// Copies `len` bytes at `offset` of `src` to `at` in `out` in the kernel
/// (`copy_file_range` with both offsets given: the descriptors' positions
/// stay); returns how many bytes were copied before the kernel declined
/// (the caller writes the rest).
pub(crate) fn copy_range(src: &File, offset: u64, out: &File, at: u64, len: usize) -> usize {
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
pub(crate) fn start_writeback(file: &File) {
    // SAFETY: sync_file_range only reads its arguments; the descriptor is open.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
    }
}
