//! `offload extract` and `verify` on files holding many compressed bundles:
//! the bundles are decoded on several threads, and the results must be
//! those of decoding them one by one (same files, same diagnostics in the
//! same order, nothing written on failure).

// Tests set resource limits and signals through libc.
#![allow(unsafe_code)]

use crate::common;
use crate::inspect_support;

use inspect_support::*;
use offload_format::bundle::compressed::{CompressOptions, Method, compress};
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::process::Command;

const HOST: &str = "host-x86_64-unknown-linux-gnu";
const GPUS: [&str; 3] = ["gfx906", "gfx90a", "gfx1100"];

fn id(gpu: &str) -> String {
    format!("hipv4-amdgcn-amd-amdhsa--{gpu}")
}

/// Distinct bytes for device entry `e` of bundle `b`; some look like ELF
/// code objects (their files get `.co`).
fn payload(b: usize, e: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..20_000 + 331 * b + 17 * e).map(|i| ((i / 7) * (b + 5) + e * 13) as u8).collect();
    if (b + e).is_multiple_of(2) {
        p[..4].copy_from_slice(b"\x7fELF");
    }
    p
}

/// The uncompressed bundle `b`: a host entry and one entry per GPU.
fn raw_bundle(b: usize) -> Vec<u8> {
    let payloads: Vec<Vec<u8>> = (0..GPUS.len()).map(|e| payload(b, e)).collect();
    let ids: Vec<String> = GPUS.iter().map(|g| id(g)).collect();
    let mut entries: Vec<(&[u8], &[u8])> = vec![(HOST.as_bytes(), b"")];
    entries.extend(ids.iter().map(|i| i.as_bytes()).zip(payloads.iter().map(|p| p.as_slice())));
    offload_format::bundle::binary::write(&entries, NonZeroU64::new(4096).unwrap()).to_vec()
}

/// Compressed bundle `b`: versions 2 and 3, zstd and zlib, in turn.
fn ccob(b: usize) -> Vec<u8> {
    let method = if b % 3 == 2 { Method::Zlib } else { Method::Zstd };
    let opts = CompressOptions { method, version: 2 + (b % 2) as u16, ..Default::default() };
    compress(&raw_bundle(b), &opts).unwrap().bytes
}

/// `count` compressed bundles back to back, 4096-aligned as in a
/// `.hip_fatbin` section; returns the file and where each bundle starts.
fn library(count: usize, damage: impl Fn(usize, &mut Vec<u8>)) -> (Vec<u8>, Vec<usize>) {
    let (mut data, mut starts) = (Vec::new(), Vec::new());
    for b in 0..count {
        let mut blob = ccob(b);
        damage(b, &mut blob);
        starts.push(data.len());
        data.extend_from_slice(&blob);
        data.resize(data.len().next_multiple_of(4096), 0);
    }
    (data, starts)
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// Unbundles one entry of a compressed bundle with a bundler binary.
fn unbundle_one(bundler: &Path, input: &Path, id: &str, out: &Path) -> Vec<u8> {
    let o = common::run(Command::new(bundler).args([
        "-type=o",
        "-unbundle",
        &format!("-input={}", input.display()),
        &format!("-targets={id}"),
        &format!("-output={}", out.display()),
    ]));
    assert!(o.status.success(), "{} failed: {}", bundler.display(), String::from_utf8_lossy(&o.stderr));
    std::fs::read(out).unwrap()
}

const BUNDLES: usize = 24;

#[test]
fn extract_all_writes_what_unbundling_each_entry_gives() {
    let d = tempfile::tempdir().unwrap();
    let (data, _) = library(BUNDLES, |_, _| {});
    let f = write(d.path(), "lib.so", &data);
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = offload(&["extract", "--all", "--json", "--output-dir", out_dir.to_str().unwrap(), f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records = json(&out);
    let per_bundle = GPUS.len() + 1;
    assert_eq!(records.len(), BUNDLES * per_bundle);
    assert_eq!(names_in(&out_dir).len(), BUNDLES * per_bundle, "one file per entry, no leftovers");

    let ours = PathBuf::from(env!("CARGO_BIN_EXE_clang-offload-bundler"));
    let one = d.path().join("one");
    for (index, r) in records.iter().enumerate() {
        let (b, e) = (index / per_bundle, index % per_bundle);
        let expected_id = if e == 0 { HOST.to_string() } else { id(GPUS[e - 1]) };
        assert_eq!(s(r, "id"), expected_id, "records in file order");
        let path = PathBuf::from(s(r, "path"));
        let expected_name = format!("lib.so-{index}-{expected_id}");
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(name.trim_end_matches(".co"), expected_name);
        let got = std::fs::read(&path).unwrap();
        let want = if e == 0 { Vec::new() } else { payload(b, e - 1) };
        assert_eq!(got, want, "{name}");
        // The same bytes as our bundler unbundling that entry alone (every
        // fourth bundle, to keep the test short).
        if b.is_multiple_of(4) {
            let single = write(d.path(), "single.ccob", &ccob(b));
            assert_eq!(unbundle_one(&ours, &single, &expected_id, &one), got, "{name}");
        }
    }

    // The same run again gives the same output (names, order, bytes).
    let again =
        offload(&["extract", "--all", "--json", "--output-dir", out_dir.to_str().unwrap(), f.to_str().unwrap()]);
    assert_eq!(again.stdout, out.stdout);
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn extract_matches_llvm19_unbundling_version_2_bundles() {
    let bundler = common::llvm_tool(19, "clang-offload-bundler");
    let d = tempfile::tempdir().unwrap();
    // LLVM 19 reads version 2 zstd bundles only.
    let blobs: Vec<Vec<u8>> = (0..8)
        .map(|b| compress(&raw_bundle(b), &CompressOptions { version: 2, ..Default::default() }).unwrap().bytes)
        .collect();
    let mut data = Vec::new();
    for blob in &blobs {
        data.extend_from_slice(blob);
        data.resize(data.len().next_multiple_of(4096), 0);
    }
    let f = write(d.path(), "lib.so", &data);
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = offload(&["extract", "--all", "--json", "--output-dir", out_dir.to_str().unwrap(), f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records = json(&out);
    assert_eq!(records.len(), blobs.len() * (GPUS.len() + 1));
    let one = d.path().join("llvm.out");
    for (index, r) in records.iter().enumerate() {
        if index.is_multiple_of(GPUS.len() + 1) {
            // LLVM 19 finds no host entry stored with a 3-field triple
            // (`Can't find bundles for host-x86_64-unknown-linux-gnu-`).
            continue;
        }
        let single = write(d.path(), "single.ccob", &blobs[index / (GPUS.len() + 1)]);
        let theirs = unbundle_one(&bundler, &single, s(r, "id"), &one);
        assert_eq!(std::fs::read(s(r, "path")).unwrap(), theirs, "{}", s(r, "path"));
    }
}

/// `extract --all` writes every code object it can decode and names each
/// one it cannot, with exit status 1 (docs/reference/offload.md): the
/// objects of the damaged bundles are missing, every other one is written.
#[test]
fn a_damaged_bundle_anywhere_is_named_and_the_others_are_written() {
    let d = tempfile::tempdir().unwrap();
    // Bundles 9 and 17 have a wrong stored hash.
    let (data, _) = library(BUNDLES, |b, blob| {
        if b == 9 || b == 17 {
            let hash_at = if b.is_multiple_of(2) { 16 } else { 24 };
            blob[hash_at] ^= 0x5a;
        }
    });
    let f = write(d.path(), "lib.so", &data);
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let per_bundle = GPUS.len() + 1;
    for _ in 0..3 {
        let out = offload(&["extract", "--all", "--output-dir", out_dir.to_str().unwrap(), f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        for bundle in [9, 17] {
            assert!(err.contains(&format!("'{HOST}' at file #{bundle}:")), "bundle {bundle} is named: {err}");
        }
        assert!(err.contains("hash"), "{err}");
        let written = names_in(&out_dir);
        assert_eq!(written.len(), (BUNDLES - 2) * per_bundle, "{written:?}");
        for name in &written {
            let index: usize = name.split('-').nth(1).and_then(|i| i.parse().ok()).expect("lib.so-INDEX-...");
            assert!(![9, 17].contains(&(index / per_bundle)), "{name} comes from a damaged bundle");
        }
    }
}

#[test]
fn verify_reports_every_damaged_bundle_in_file_order_every_time() {
    let d = tempfile::tempdir().unwrap();
    // Three kinds of damage: a wrong hash, a corrupt stream, a lying size.
    let (data, starts) = library(BUNDLES, |b, blob| match b {
        3 => blob[if b.is_multiple_of(2) { 16 } else { 24 }] ^= 0xff,
        11 => {
            let k = blob.len() - 9;
            blob[k] ^= 0xff;
        }
        20 => {
            // The uncompressed size of a version 2 header.
            let size = u32::from_le_bytes(blob[12..16].try_into().unwrap());
            blob[12..16].copy_from_slice(&(size + 1).to_le_bytes());
        }
        _ => {}
    });
    let f = write(d.path(), "lib.so", &data);
    let first = offload(&["verify", "--json", f.to_str().unwrap()]);
    assert_eq!(first.status.code(), Some(1));
    let diags = json(&first);
    // (The payloads are no real code objects: their entries draw findings
    // too, counted below.)
    let errors = diags.iter().filter(|d| s(d, "severity") == "error").count();
    let mut seen: Vec<u64> = diags
        .iter()
        .filter(|d| s(d, "severity") == "error" && s(d, "message").starts_with("compressed bundle"))
        .map(|d| n(d, "offset"))
        .collect();
    let damaged: Vec<u64> = [3, 11, 20].iter().map(|&b| starts[b] as u64).collect();
    seen.dedup();
    assert_eq!(seen, damaged, "{diags:?}");
    for _ in 0..4 {
        let again = offload(&["verify", "--json", f.to_str().unwrap()]);
        assert_eq!(again.stdout, first.stdout, "same findings, same order");
    }
    let text = offload(&["verify", f.to_str().unwrap()]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.ends_with(&format!(
            "FAILED: {} code objects in {BUNDLES} fat binaries, {errors} errors, {} warnings\n",
            BUNDLES * 4,
            diags.len() - errors
        )),
        "{text}"
    );
}

/// Runs `offload args`; returns its exit code and peak RSS in KiB (wait4
/// reports the child's own peak).
#[allow(clippy::zombie_processes)]
fn run_peak_rss(args: &[&str]) -> (i32, u64) {
    use std::os::unix::process::ExitStatusExt;
    let child = Command::new(env!("CARGO_BIN_EXE_offload"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let mut status = 0;
    // SAFETY: wait4 writes the status and the usage into the locals passed;
    // the child is ours and has not been waited for.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        assert_eq!(pid, child.id() as libc::pid_t);
        usage
    };
    (std::process::ExitStatus::from_raw(status).code().unwrap_or(-1), usage.ru_maxrss as u64)
}

/// Not a timed test. 32 compressed bundles of 24 MiB each (768 MiB
/// decompressed) from which one small object each is extracted: every
/// bundle must be decoded, and a run that kept them all (as extract did)
/// peaks above 768 MiB. Decoding holds at most one bundle per worker, and
/// no more than the 384 MiB budget in all, whatever the number of cores.
#[test]
fn extract_memory_stays_within_the_decoding_budget() {
    let d = tempfile::tempdir().unwrap();
    // Mostly zeros with a varying byte every 64: about 100:1, cheap to make.
    let big: Vec<u8> = (0..24usize << 20).map(|i| if i % 64 == 0 { (i >> 6) as u8 } else { 0 }).collect();
    let small = payload(0, 1);
    let (big_id, small_id) = (id("gfx906"), id("gfx90a"));
    let entries: [(&[u8], &[u8]); 3] =
        [(HOST.as_bytes(), b""), (big_id.as_bytes(), &big), (small_id.as_bytes(), &small)];
    let raw = offload_format::bundle::binary::write(&entries, NonZeroU64::new(4096).unwrap()).to_vec();
    let blob = compress(&raw, &CompressOptions::default()).unwrap().bytes;
    let mut data = Vec::new();
    for _ in 0..32 {
        data.extend_from_slice(&blob);
        data.resize(data.len().next_multiple_of(4096), 0);
    }
    let f = write(d.path(), "lib.so", &data);
    let out_dir = d.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let (code, peak_kib) = run_peak_rss(&[
        "extract",
        "--target-id",
        "gfx90a",
        "--output-dir",
        out_dir.to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert_eq!(names_in(&out_dir).len(), 32);
    let peak_mib = peak_kib >> 10;
    // The budget, the mapped input (about 8 MiB) and the program itself.
    assert!(peak_mib < 384 + 64, "peak RSS {peak_mib} MiB");
}
