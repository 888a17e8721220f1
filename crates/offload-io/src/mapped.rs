//! Mapped inputs that another process may shrink (docs/reliability.md,
//! "Inputs that shrink while read"):
//!
//! * every read-only map of an input is entered in a registry of address
//!   ranges, each with the error line to print if it faults, behind a spin
//!   lock that the fault handler may take (no thread holding it touches a
//!   mapped page, so the faulting thread never holds it);
//! * a SIGBUS whose address lies in a registered range (the page is past
//!   the file's new end) prints that line, unlinks every staging file of
//!   the process and exits with status 2: the run ends with an error
//!   naming the file, never a signal, and no output is committed;
//! * a SIGBUS anywhere else keeps its default action.
//!
//! Reading costs nothing: the handler runs only on a fault.

use std::cell::UnsafeCell;
use std::fs::File;
use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

struct Range {
    id: u64,
    start: usize,
    end: usize,
    message: Vec<u8>,
}

struct Maps {
    lock: AtomicBool,
    ranges: UnsafeCell<Vec<Range>>,
}

// SAFETY: `ranges` is only touched with `lock` held.
unsafe impl Sync for Maps {}

static MAPS: Maps = Maps { lock: AtomicBool::new(false), ranges: UnsafeCell::new(Vec::new()) };
static NEXT: AtomicU64 = AtomicU64::new(1);
/// The program name for error lines, set when the handler is installed.
static PROGRAM: OnceLock<String> = OnceLock::new();

fn lock() {
    while MAPS.lock.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
        std::hint::spin_loop();
    }
}

fn unlock() {
    MAPS.lock.store(false, Release);
}

/// A read-only private map of a file, registered so that a fault in it
/// (the file shrank under us) becomes an error naming the file instead of
/// SIGBUS, in programs that called [`crate::remove_staging_on_signals`].
pub struct MappedFile {
    map: memmap2::Mmap,
    id: u64,
}

impl MappedFile {
    /// Maps `file` (named `path` in the error line) read-only.
    pub fn map(file: &File, path: &str) -> io::Result<MappedFile> {
        // SAFETY: the map is read-only and private to this process; the
        // tools never write to their inputs. A file truncated by another
        // process while it is read faults; the fault is handled (see the
        // module comment).
        let map = unsafe { memmap2::Mmap::map(file)? };
        let id = NEXT.fetch_add(1, Relaxed);
        let program = PROGRAM.get().map_or("offload", String::as_str);
        let path: String =
            path.chars().map(|c| if c.is_control() { format!("\\x{:02x}", c as u32) } else { c.to_string() }).collect();
        let message = format!(
            "{program}: error: '{path}': the file changed size while being read (truncated by another process?)\n"
        )
        .into_bytes();
        let start = map.as_ptr() as usize;
        let range = Range { id, start, end: start.saturating_add(map.len()), message };
        lock();
        // SAFETY: the lock is held.
        unsafe { (*MAPS.ranges.get()).push(range) };
        unlock();
        Ok(MappedFile { map, id })
    }
}

impl std::ops::Deref for MappedFile {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        lock();
        // SAFETY: the lock is held.
        let ranges = unsafe { &mut *MAPS.ranges.get() };
        if let Some(i) = ranges.iter().position(|r| r.id == self.id) {
            ranges.swap_remove(i);
        }
        unlock();
    }
}

extern "C" fn on_bus(sig: libc::c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler;
    // si_addr is the faulting address for SIGBUS.
    let (addr, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    // A fault from the kernel (si_code > 0), not kill(2) or raise(3).
    if code > 0 {
        lock();
        // SAFETY: the lock is held; the list is only read. It is never given
        // back when the process ends here.
        let ranges = unsafe { &*MAPS.ranges.get() };
        if let Some(r) = ranges.iter().find(|r| r.start <= addr && addr < r.end) {
            // SAFETY: write and _exit are async-signal-safe; the message is
            // a live buffer of the registry, which no one changes now.
            unsafe { libc::write(2, r.message.as_ptr().cast(), r.message.len()) };
            crate::signals::remove_all_staging();
            // SAFETY: see above.
            unsafe { libc::_exit(2) };
        }
        unlock();
    }
    // Not one of ours: the action that was there before ours (the Rust
    // runtime's stack-overflow handler, or the default) takes over, and
    // the retried access faults into it.
    match PREVIOUS.get() {
        // SAFETY: sigaction is async-signal-safe; the saved action is valid.
        Some(old) => unsafe { libc::sigaction(sig, &old.0, std::ptr::null_mut()) },
        // SAFETY: signal is async-signal-safe.
        None => unsafe { libc::signal(sig, libc::SIG_DFL) as libc::c_int },
    };
    if code <= 0 {
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(sig) };
    }
}

/// The SIGBUS action in place before ours.
struct Previous(libc::sigaction);
// SAFETY: plain data (a handler address, flags and a mask), only read.
unsafe impl Sync for Previous {}
// SAFETY: as above.
unsafe impl Send for Previous {}
static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// Installs the SIGBUS handler (once; called by
/// [`crate::remove_staging_on_signals`]).
pub(crate) fn install_fault_handler() {
    let program = std::env::args_os()
        .next()
        .and_then(|a| std::path::Path::new(&a).file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "offload".to_string());
    let _ = PROGRAM.set(program);
    // SAFETY: sigaction reads and writes valid local structures; the handler
    // only uses async-signal-safe calls and atomics.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        // The Rust runtime has a SIGBUS handler of its own (stack overflow
        // in a guard page): it is kept, and faults that are not in a mapped
        // input go back to it. An ignored SIGBUS, or a second call, is left.
        if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0
            || old.sa_sigaction == libc::SIG_IGN
            || PREVIOUS.set(Previous(old)).is_err()
        {
            return;
        }
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_bus as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) as usize;
        libc::sigemptyset(&mut act.sa_mask);
        act.sa_flags = libc::SA_SIGINFO;
        libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut());
    }
}
