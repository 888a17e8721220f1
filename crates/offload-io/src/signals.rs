//! Staging files and signals (docs/reliability.md, "Interrupted runs"):
//!
//! * every staging file is named `.<name>.ofl<pid>-<random>.tmp` and is
//!   created and entered in a registry of C strings in one step, so that a
//!   SIGINT, SIGTERM or SIGHUP handler can unlink every staging file
//!   (with `unlink` only: async-signal-safe) and then die by the signal
//!   as it would have;
//! * a signal that arrives while outputs are being renamed into place
//!   waits for the renames (a commit is all or nothing either way);
//! * a staging file is held with `flock` while it is written, so the next
//!   run can tell the staging files of dead runs (pid gone, lock free, ours)
//!   from those of live ones, and remove only the former.

use std::cell::UnsafeCell;
use std::collections::HashSet;
use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::*};

/// The signals that remove staging files before ending the process.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The paths of the staging files that exist now, behind a spin lock that
/// a signal handler may take: a thread changes the list only with these
/// signals blocked on itself, so a handler never waits for its own thread.
struct Registry {
    lock: AtomicBool,
    paths: UnsafeCell<Vec<(u64, CString)>>,
}

// SAFETY: `paths` is only touched with `lock` held.
unsafe impl Sync for Registry {}

static REGISTRY: Registry = Registry { lock: AtomicBool::new(false), paths: UnsafeCell::new(Vec::new()) };
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
/// Commits in progress, and a signal that arrived during one.
static COMMITTING: AtomicUsize = AtomicUsize::new(0);
static PENDING: AtomicI32 = AtomicI32::new(0);

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn lock() {
    while REGISTRY.lock.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
        std::hint::spin_loop();
    }
}

/// Runs `f` on the registry, with the signals blocked on this thread.
fn with_registry<R>(f: impl FnOnce(&mut Vec<(u64, CString)>) -> R) -> R {
    let set = signal_set();
    // SAFETY: a zeroed sigset_t is a valid output buffer for pthread_sigmask.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: both sets are valid for the call.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
    lock();
    // SAFETY: the lock is held, and no handler on this thread can run.
    let result = f(unsafe { &mut *REGISTRY.paths.get() });
    REGISTRY.lock.store(false, Release);
    // SAFETY: restores the mask saved above.
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    result
}

/// A staging file's place in the registry; dropping it takes the path out.
pub(crate) struct Registration(u64);

impl Drop for Registration {
    fn drop(&mut self) {
        let id = self.0;
        with_registry(|paths| {
            if let Some(i) = paths.iter().position(|(k, _)| *k == id) {
                paths.swap_remove(i);
            }
        });
    }
}

/// The marker between an output's name and its staging suffix.
const MARK: &str = ".ofl";

/// Creates a staging file for the output named `name` in `dir`, entered in
/// the registry in the same step, and locked (`flock`) while it is open.
pub(crate) fn create_staging(dir: &Path, name: &str) -> io::Result<(tempfile::NamedTempFile, Registration)> {
    clean_stale_once(dir);
    // An absolute path, so the handler's unlink does not depend on the
    // current folder.
    let dir = &std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    // The staging name only has to be ours and unique: a long output name
    // is cut so that the staging name stays within 255 bytes.
    let mut cut = name.len().min(180);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let pid = std::process::id();
    for _ in 0..100 {
        let id = NEXT_ID.fetch_add(1, Relaxed);
        let path = dir.join(format!(".{}{MARK}{pid}-{}.tmp", &name[..cut], random_tag(id)));
        let c_path =
            CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let created = with_registry(|paths| {
            let file = fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
            paths.push((id, c_path));
            Ok::<File, io::Error>(file)
        });
        match created {
            Ok(file) => {
                // SAFETY: flock only reads its arguments; the descriptor is open.
                unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
                let reg = Registration(id);
                let tmp_path = tempfile::TempPath::try_from_path(&path).inspect_err(|_| {
                    let _ = fs::remove_file(&path);
                })?;
                return Ok((tempfile::NamedTempFile::from_parts(file, tmp_path), reg));
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::from(io::ErrorKind::AlreadyExists))
}

/// Six letters or digits from the clock and a counter (unique names come
/// from `create_new`; this only makes collisions rare).
fn random_tag(id: u64) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    let mut x = nanos.unwrap_or(0) ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 32;
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    (0..6)
        .map(|_| {
            let c = DIGITS[(x % 36) as usize] as char;
            x /= 36;
            c
        })
        .collect()
}

/// The process id in a staging file name of ours
/// (`.<name>.ofl<pid>-<six letters or digits>.tmp`), or `None`.
pub(crate) fn staging_pid(file_name: &OsStr) -> Option<u32> {
    let s = file_name.to_str()?;
    let rest = s.strip_prefix('.')?.strip_suffix(".tmp")?;
    let at = rest.rfind(MARK)?;
    let (pid, tag) = rest[at + MARK.len()..].split_once('-')?;
    let ok = at > 0
        && !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && tag.len() == 6
        && tag.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
    ok.then(|| pid.parse().ok()).flatten()
}

/// Removes, once per folder and process, the staging files of earlier runs
/// that are certainly dead.
fn clean_stale_once(dir: &Path) {
    static DONE: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let key = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    {
        let Ok(mut done) = DONE.lock() else { return };
        if !done.get_or_insert_with(HashSet::new).insert(key) {
            return;
        }
    }
    remove_stale_staging(dir);
}

/// Removes the staging files in `dir` left by runs that died: a file is
/// removed only when its name is ours, it is a regular file of the user
/// running this process, the process its name names is gone (`kill(pid,
/// 0)` says ESRCH), and no process holds its `flock` (which also covers a
/// live writer in another pid namespace). Returns how many were removed.
pub fn remove_stale_staging(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = staging_pid(&name) else { continue };
        if pid == std::process::id() || pid == 0 || pid > i32::MAX as u32 {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        if !meta.is_file() || meta.uid() != euid {
            continue;
        }
        // SAFETY: kill with signal 0 only checks that the process exists.
        let gone = unsafe { libc::kill(pid as libc::pid_t, 0) } == -1
            && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if !gone {
            continue;
        }
        let Ok(file) = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&path)
        else {
            continue;
        };
        let same = file.metadata().is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino());
        if same
            // SAFETY: flock only reads its arguments; the descriptor is open.
            && unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0
            && fs::remove_file(&path).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

/// Unlinks every registered staging file. The lock is never given back:
/// the process is about to end, and no new staging file may appear.
pub(crate) fn remove_all_staging() {
    lock();
    // SAFETY: the lock is held; the list is only read.
    let paths = unsafe { &*REGISTRY.paths.get() };
    for (_, p) in paths {
        // SAFETY: unlink reads a NUL-terminated path; async-signal-safe.
        unsafe { libc::unlink(p.as_ptr()) };
    }
}

/// Ends the process by `sig` with its default action, as it would have
/// ended without our handler.
fn die_by(sig: libc::c_int) {
    remove_all_staging();
    // SAFETY: signal, pthread_sigmask, raise and _exit are async-signal-safe
    // and take valid arguments.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig);
    }
}

extern "C" fn on_signal(sig: libc::c_int) {
    if COMMITTING.load(SeqCst) > 0 {
        // Renames in progress finish first; whoever takes the pending
        // signal (this handler if the commit ended meanwhile) acts on it.
        PENDING.store(sig, SeqCst);
        if COMMITTING.load(SeqCst) > 0 {
            return;
        }
        match PENDING.swap(0, SeqCst) {
            0 => return,
            s => die_by(s),
        }
    }
    die_by(sig);
}

/// Runs `f` (the renames of a commit) with SIGINT, SIGTERM and SIGHUP
/// held back: one that arrives meanwhile takes effect when `f` returns.
pub(crate) fn deferring_signals<R>(f: impl FnOnce() -> R) -> R {
    COMMITTING.fetch_add(1, SeqCst);
    let result = f();
    COMMITTING.fetch_sub(1, SeqCst);
    match PENDING.swap(0, SeqCst) {
        0 => {}
        s => die_by(s),
    }
    result
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that remove this
/// process's staging files and then end it by the same signal. A signal
/// that is ignored (`nohup`, a background job) or already handled by
/// someone else is left as it is. For programs, not libraries: call it
/// once at the start of `main`.
///
/// Also installs the SIGBUS handler that turns a fault in a mapped input
/// (another process shrank the file) into an error naming the file, exit
/// status 2, with the staging files removed ([`crate::MappedFile`]).
pub fn remove_staging_on_signals() {
    crate::mapped::install_fault_handler();
    for sig in SIGNALS {
        // SAFETY: sigaction reads and writes valid local structures; the
        // handler only uses async-signal-safe calls and atomics.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            act.sa_mask = signal_set();
            act.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}
