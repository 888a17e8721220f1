//! Helpers shared by the integration tests.
//!
//! Interoperability tests compare with LLVM's own tools. build.rs probes for
//! them: a test whose tool is missing is ignored (`cfg_attr(not(has_...),
//! ignore)`), and under `OFFLOAD_REQUIRE_LLVM=1` (CI) the build fails. The
//! helpers below assert that the tool is there, so a test run with
//! `--include-ignored` fails without it instead of passing.
#![allow(dead_code)]

pub mod diff;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The directory of LLVM `version`'s tools (`OFFLOAD_LLVM<version>_BIN`, or
/// Debian's `/usr/lib/llvm-<version>/bin`).
pub fn llvm_bin_dir(version: u32) -> PathBuf {
    std::env::var_os(format!("OFFLOAD_LLVM{version}_BIN"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/usr/lib/llvm-{version}/bin")))
}

/// Path of an LLVM tool. A test that calls this carries
/// `#[cfg_attr(not(has_llvm<version>), ignore = ...)]` (build.rs probes the
/// tools), so a missing tool here is a failure, never a silent pass.
pub fn llvm_tool(version: u32, name: &str) -> PathBuf {
    let p = llvm_bin_dir(version).join(name);
    assert!(p.is_file(), "needs LLVM {version}: {} is missing; run scripts/install-reference-llvm.sh", p.display());
    p
}

/// Whether build.rs found LLVM `version`'s tools (cfg `has_llvm<version>`).
pub fn llvm_found(version: u32) -> bool {
    (version == 19 && cfg!(has_llvm19)) || (version == 14 && cfg!(has_llvm14))
}

/// For a test whose own checks need nothing and which compares with LLVM as
/// an extra: the tool when build.rs found LLVM `version` (then it must be
/// there), `None` when it did not.
pub fn llvm_tool_if_found(version: u32, name: &str) -> Option<PathBuf> {
    llvm_found(version).then(|| llvm_tool(version, name))
}

/// LLVM 19's OpenMP runtime folder (`OFFLOAD_OMP19_LIB`, or /opt/omp19/lib
/// where scripts/install-reference-llvm.sh puts it), checked with GNU ld
/// beside it when `gnu_ld`. Its tests are ignored without `has_omp19`.
pub fn omp19_runtime(gnu_ld: bool) -> PathBuf {
    let dir = std::env::var_os("OFFLOAD_OMP19_LIB").map(PathBuf::from).unwrap_or_else(|| "/opt/omp19/lib".into());
    for f in ["libomp.so", "libomptarget.so", "libomptarget.devicertl.a"] {
        assert!(
            dir.join(f).exists(),
            "needs LLVM 19's OpenMP runtime: {} is missing; run scripts/install-reference-llvm.sh",
            dir.join(f).display()
        );
    }
    assert!(!gnu_ld || std::path::Path::new("/usr/bin/ld.bfd").exists(), "needs GNU ld (/usr/bin/ld.bfd)");
    dir
}

/// LLVM 14's libomptarget folder (with its host plugin); tests that need it
/// are ignored without `has_omp14`.
pub fn omp14_lib() -> PathBuf {
    let lib = llvm_bin_dir(14).join("../lib");
    for f in ["libomptarget.so", "libomptarget.rtl.x86_64.so"] {
        assert!(
            lib.join(f).exists(),
            "needs libomptarget 14: {} is missing; run scripts/install-reference-llvm.sh",
            lib.join(f).display()
        );
    }
    lib
}

/// Runs a command and returns its output; panics only if it cannot start.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// The fixtures directory of the CLI crate.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Waits for `child` at most `timeout`, killing it after that (`None`).
/// Sleeps in `poll` on a pidfd, so the end of a run is seen at once; where
/// `pidfd_open` is missing (Linux before 5.3), polls `try_wait` instead.
#[allow(unsafe_code)] // pidfd_open and poll have no safe wrapper in std
pub fn wait_with_timeout(
    child: &mut std::process::Child,
    timeout: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let started = std::time::Instant::now();
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor
    // or -1; the descriptor is owned (and closed) by `pidfd` below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id() as libc::pid_t, 0) };
    let pidfd = (fd >= 0).then(|| {
        use std::os::fd::FromRawFd;
        // SAFETY: `fd` is a descriptor just returned to us and owned by nobody else.
        unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }
    });
    let mut nap = std::time::Duration::from_micros(200);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        match &pidfd {
            Some(pidfd) => {
                use std::os::fd::AsRawFd;
                let mut p = libc::pollfd { fd: pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                let ms = left.as_millis().min(i32::MAX as u128) as i32;
                // SAFETY: one valid pollfd, for the duration of the call.
                unsafe { libc::poll(&mut p, 1, ms.max(1)) };
            }
            None => {
                std::thread::sleep(nap.min(left));
                nap = (nap * 2).min(std::time::Duration::from_millis(20));
            }
        }
    }
}
