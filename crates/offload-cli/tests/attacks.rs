//! Attacks on the environment and on the budgets (issue 25): each test
//! sets up one hostile situation and asserts the promise of
//! docs/reliability.md that it attacks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const OFFLOAD: &str = env!("CARGO_BIN_EXE_offload");

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

fn shared_fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures").join(rel)
}

/// Runs `cmd` with a time limit: `None` when it had to be killed.
fn run_for(mut cmd: Command, limit: Duration) -> Option<Output> {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while start.elapsed() < limit {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// Runs offload with standard output on /dev/full.
fn to_dev_full(args: &[&str]) -> Output {
    let full = fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    Command::new(OFFLOAD).args(args).stdout(full).stderr(Stdio::piped()).output().unwrap()
}

#[test]
fn a_full_standard_output_is_an_error_not_a_panic() {
    let lib = fixture("inspect/libscale.so");
    let lib = lib.to_str().unwrap();
    for args in [
        vec!["list", lib],
        vec!["list", "--json", lib],
        vec!["verify", lib],
        vec!["size", lib],
        vec!["diff", lib, lib],
        vec!["select", "--gpu", "gfx90a", lib],
        vec!["completions", "bash"],
    ] {
        let out = to_dev_full(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("error: standard output: No space left on device"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_closed_pipe_still_ends_the_process_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let mut child = Command::new(OFFLOAD)
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.signal() == Some(libc_sigpipe()) || out.status.success(), "{:?}", out.status);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
}

fn libc_sigpipe() -> i32 {
    13
}

/// A library name that resolves to a FIFO is passed over by `check`; it
/// used to wait for a writer forever.
#[test]
fn check_passes_over_a_fifo_dependency() {
    let t = tempfile::tempdir().unwrap();
    let libs = t.path().join("libs");
    fs::create_dir(&libs).unwrap();
    mkfifo(&libs.join("libamdhip64.so"));
    let root = t.path().join("root");
    fs::create_dir(&root).unwrap();
    let mut cmd = Command::new(OFFLOAD);
    cmd.args(["check", "--gpu", "gfx90a", "--root"])
        .arg(&root)
        .arg(shared_fixture("prune/gnu_rela.so"))
        .env("LD_LIBRARY_PATH", &libs);
    let out = run_for(cmd, Duration::from_secs(30)).expect("offload check hung on a FIFO");
    assert!(out.status.code().is_some(), "{:?}", out.status);
}

/// A FIFO in a folder is passed over by a folder scan.
#[test]
fn folder_scans_pass_over_fifos() {
    let t = tempfile::tempdir().unwrap();
    fs::copy(fixture("inspect/libscale.so"), t.path().join("libscale.so")).unwrap();
    mkfifo(&t.path().join("a-fifo.so"));
    let mut cmd = Command::new(OFFLOAD);
    cmd.arg("list").arg(t.path());
    let out = run_for(cmd, Duration::from_secs(30)).expect("offload list hung on a FIFO");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}
