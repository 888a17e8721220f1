//! `offload list` reads headers only: on a 2 GiB file (sparse, so the test
//! costs no disk) and on a compressed bundle holding 256 MiB, the peak
//! resident memory of the listing process stays a few megabytes. Measured
//! with `wait4`, which reports the child's own peak RSS; no timing.

// Tests set resource limits and signals through libc.
#![allow(unsafe_code)]

use crate::inspect_support;

use inspect_support::{n, s};
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

/// Runs `offload args`, returning its exit code, stdout and peak RSS in KiB.
/// The child is reaped by `wait4`, not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run_measured(args: &[&str]) -> (i32, Vec<u8>, u64) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_offload"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    let mut status = 0;
    // SAFETY: wait4 writes the status and the usage into the locals passed;
    // the child is ours and has not been waited for.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        assert_eq!(pid, child.id() as libc::pid_t);
        usage
    };
    let code = std::process::ExitStatus::from_raw(status).code().unwrap_or(-1);
    (code, out, usage.ru_maxrss as u64)
}

fn bundle_header(entries: &[(&str, u64, u64)]) -> Vec<u8> {
    let mut h = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    h.extend((entries.len() as u64).to_le_bytes());
    for (id, off, size) in entries {
        h.extend(off.to_le_bytes());
        h.extend(size.to_le_bytes());
        h.extend((id.len() as u64).to_le_bytes());
        h.extend(id.as_bytes());
    }
    h
}

const LIMIT_KIB: u64 = 48 * 1024;

#[test]
fn listing_a_2gib_bundle_reads_only_its_header() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("big.hipfb");
    let total: u64 = 2 << 30;
    let header = bundle_header(&[
        ("host-x86_64-unknown-linux-gnu-", 4096, 0),
        ("hipv4-amdgcn-amd-amdhsa--gfx906", 4096, 1 << 30),
        ("hipv4-amdgcn-amd-amdhsa--gfx90a", (1 << 30) + 4096, total - (1 << 30) - 4096),
    ]);
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&header).unwrap();
    f.set_len(total).unwrap();
    drop(f);
    let (code, out, rss) = run_measured(&["list", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    let records: Vec<serde_json::Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(n(&records[2], "size"), total - (1 << 30) - 4096);
    assert_eq!(s(&records[2], "target_id"), "gfx90a");
    assert!(rss < LIMIT_KIB, "peak RSS {rss} KiB listing a 2 GiB file");
    // select reads no payload either.
    let (code, _, rss) = run_measured(&["select", "--gpu", "gfx90a:xnack+", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(rss < LIMIT_KIB, "peak RSS {rss} KiB selecting in a 2 GiB file");
}

/// A compressed bundle holding 128 MiB: the IDs come from a partial decode.
/// The file is made by our bundler in its own process, so that this test
/// process never holds much memory: a child's peak RSS as the kernel
/// reports it includes its parent's peak at the time of the spawn.
#[test]
fn listing_a_large_compressed_bundle_does_not_decompress_it() {
    let d = tempfile::tempdir().unwrap();
    let size: u64 = 128 << 20;
    let (host, dev, path) = (d.path().join("host"), d.path().join("dev"), d.path().join("big.ccob"));
    std::fs::write(&host, b"").unwrap();
    std::fs::File::create(&dev).unwrap().set_len(size).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_clang-offload-bundler"))
        .args(["-type=bc", "-compress", "-compression-level=1", "-bundle-align=4096"])
        .arg("-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx906")
        .arg(format!("-input={}", host.display()))
        .arg(format!("-input={}", dev.display()))
        .arg(format!("-output={}", path.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let small = d.path().join("small.ccob");
    std::fs::write(&small, include_bytes!("../../../../samples/hip-gfx906-gfx90a.compressed.bc")).unwrap();
    let (_, _, baseline) = run_measured(&["list", small.to_str().unwrap()]);
    let (code, out, rss) = run_measured(&["list", "--json", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    let records: Vec<serde_json::Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(n(&records[1], "size"), size);
    assert!(records[1]["offset"].is_null());
    assert!(rss < baseline + 16 * 1024, "peak RSS {rss} KiB listing a compressed 128 MiB bundle (baseline {baseline})");
    // verify decompresses it: its peak is at least the bundle's size, which
    // shows that the measurement sees the memory a command uses.
    let (code, _, rss) = run_measured(&["verify", path.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(rss > size / 1024, "verify peak RSS {rss} KiB");
}
