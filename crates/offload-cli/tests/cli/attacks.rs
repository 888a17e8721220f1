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
    crate::common::wait_with_timeout(&mut child, limit)?;
    Some(child.wait_with_output().unwrap())
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
        vec!["man"],
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

/// A CUDA fat binary holding one LZ4-compressed entry of `stream` that
/// declares `declared` bytes (layout: docs/formats/cuda-fatbin.md).
fn lz4_fatbin(stream: &[u8], declared: u64) -> Vec<u8> {
    let padded = stream.len().div_ceil(8) * 8;
    let mut e = Vec::new();
    e.extend_from_slice(&2u16.to_le_bytes()); // cubin
    e.extend_from_slice(&0x0101u16.to_le_bytes());
    e.extend_from_slice(&64u32.to_le_bytes());
    e.extend_from_slice(&(padded as u64).to_le_bytes());
    e.extend_from_slice(&(stream.len() as u32).to_le_bytes());
    e.extend_from_slice(&0u32.to_le_bytes());
    e.extend_from_slice(&[8, 0, 1, 0]);
    e.extend_from_slice(&80u32.to_le_bytes());
    e.extend_from_slice(&[0; 8]);
    e.extend_from_slice(&(0x11u64 | 0x2000).to_le_bytes());
    e.extend_from_slice(&0u64.to_le_bytes());
    e.extend_from_slice(&declared.to_le_bytes());
    e.extend_from_slice(stream);
    e.resize(64 + padded, 0);
    let mut f = 0xBA55_ED50u32.to_le_bytes().to_vec();
    f.extend_from_slice(&1u16.to_le_bytes());
    f.extend_from_slice(&16u16.to_le_bytes());
    f.extend_from_slice(&(e.len() as u64).to_le_bytes());
    f.extend_from_slice(&e);
    f
}

/// A 2 MiB fat binary whose LZ4 entry declares 510 MiB, read under a
/// 384 MiB address-space limit: an error for that entry, not an abort
/// (status 134) from an allocation that cannot be refused.
#[test]
fn a_declared_size_past_the_memory_limit_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let stream = vec![0u8; 2 << 20];
    let path = t.path().join("bomb.fatbin");
    fs::write(&path, lz4_fatbin(&stream, 510 << 20)).unwrap();
    for cmd in ["verify", "list"] {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -v 393216; exec '{OFFLOAD}' {cmd} '{}'", path.display()))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(0..=2)), "{cmd}: {:?} {err}", out.status);
        assert!(!err.contains("memory allocation"), "{cmd}: {err}");
    }
}

/// An uncompressed offload bundle of `(id, bytes)` entries
/// (docs/formats: magic, count, then offset, size, ID length and ID each).
fn bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut head = b"__CLANG_OFFLOAD_BUNDLE__".to_vec();
    head.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    let table: usize = entries.iter().map(|(id, _)| 24 + id.len()).sum();
    let mut at = (head.len() + table) as u64;
    for (id, bytes) in entries {
        head.extend_from_slice(&at.to_le_bytes());
        head.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        head.extend_from_slice(&(id.len() as u64).to_le_bytes());
        head.extend_from_slice(id.as_bytes());
        at += bytes.len() as u64;
    }
    for (_, bytes) in entries {
        head.extend_from_slice(bytes);
    }
    head
}

fn code_object(tag: u8) -> Vec<u8> {
    let mut v = b"\x7fELF\x02\x01\x01".to_vec();
    v.extend(std::iter::repeat_n(tag, 64));
    v
}

/// A 330-character entry ID gives a shortened output name (with a hash)
/// instead of "File name too long".
#[test]
fn over_long_entry_ids_give_shortened_names() {
    let t = tempfile::tempdir().unwrap();
    let long = format!("hipv4-amdgcn-amd-amdhsa--gfx906{}", ":x".repeat(150));
    let other = format!("hipv4-amdgcn-amd-amdhsa--gfx906{}", ":y".repeat(150));
    let path = t.path().join("b.bc");
    fs::write(&path, bundle(&[(&long, &code_object(1)), (&other, &code_object(2))])).unwrap();
    let out_dir = t.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    let out =
        Command::new(OFFLOAD).args(["extract", "--all", "--output-dir"]).arg(&out_dir).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let mut names: Vec<String> =
        fs::read_dir(&out_dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.len() <= 255 && n.ends_with(".co")), "{names:?}");
}

/// Two URIs of files with one name in two folders would write one output
/// name twice: refused, and nothing is written.
#[test]
fn two_outputs_with_one_name_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let co = code_object(3);
    for dir in ["a", "b"] {
        fs::create_dir(t.path().join(dir)).unwrap();
        fs::write(t.path().join(dir).join("x.co"), &co).unwrap();
    }
    let out_dir = t.path().join("out");
    fs::create_dir(&out_dir).unwrap();
    let uri = |d: &str| format!("file://{}#offset=0&size={}", t.path().join(d).join("x.co").display(), co.len());
    let out = Command::new(OFFLOAD)
        .arg("extract")
        .arg(uri("a"))
        .arg(uri("b"))
        .arg("--output-dir")
        .arg(&out_dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("two outputs of this run have this name"), "{err}");
    assert_eq!(fs::read_dir(&out_dir).unwrap().count(), 0);
}

/// An entry ID holding ESC and BEL (a terminal title sequence) is printed
/// escaped in the text table; JSON escapes it as JSON does.
#[test]
fn control_characters_in_ids_are_escaped_in_tables() {
    let t = tempfile::tempdir().unwrap();
    let id = "hipv4-amdgcn-amd-amdhsa--gfx906\u{1b}]0;pwned\u{7}\n";
    let path = t.path().join("b.bc");
    fs::write(&path, bundle(&[(id, &code_object(1))])).unwrap();
    let out = Command::new(OFFLOAD).arg("list").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\\x1b]0;pwned\\x07\\x0a"), "{text}");
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text}");
}

/// Hidden staging files in `dir` (`.<name>...tmp`).
fn staging_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.ends_with(".tmp"))
        .collect()
}

/// SIGTERM or SIGINT while `prune -o OUT` writes its staging file: the
/// handler removes the staging file, the process still dies by the
/// signal, and OUT keeps its old bytes. The writer is caught with its
/// staging file present by SIGSTOP, so the test does not depend on timing
/// (a run that finished before it was caught is tried again).
#[test]
#[allow(unsafe_code)]
fn signals_during_a_write_leave_no_staging_file() {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let t = tempfile::tempdir().unwrap();
    let input = t.path().join("big.bc");
    // Two entries of 96 MiB each (sparse zeros after an ELF magic).
    let size = 96usize << 20;
    let mut a = code_object(1);
    let mut b = code_object(2);
    a.resize(size, 0);
    b.resize(size, 0);
    fs::write(&input, bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx906", &a), ("hipv4-amdgcn-amd-amdhsa--gfx90a", &b)]))
        .unwrap();
    drop((a, b));
    let out = t.path().join("out.bc");
    for (sig, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let mut caught = false;
        for _attempt in 0..20 {
            fs::write(&out, b"precious").unwrap();
            let mut command = Command::new(OFFLOAD);
            // A shell's background job (`cargo test &`) starts with SIGINT
            // ignored, and the child would inherit that and never see it:
            // the test is about the default disposition.
            // SAFETY: signal() is async-signal-safe, as pre_exec requires.
            unsafe {
                command.pre_exec(|| {
                    libc::signal(libc::SIGINT, libc::SIG_DFL);
                    Ok(())
                });
            }
            let mut child = command
                .args(["prune", "--keep", "gfx906"])
                .arg(&input)
                .arg("-o")
                .arg(&out)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let pid = child.id().to_string();
            let start = Instant::now();
            while staging_files(t.path()).is_empty()
                && child.try_wait().unwrap().is_none()
                && start.elapsed() < Duration::from_secs(30)
            {
                std::hint::spin_loop();
            }
            kill(&pid, "STOP");
            if staging_files(t.path()).is_empty() || child.try_wait().unwrap().is_some() {
                kill(&pid, "CONT");
                let status = child.wait().unwrap();
                assert!(status.success() || status.signal().is_none(), "{status:?}");
                continue;
            }
            kill(&pid, &name[3..]);
            kill(&pid, "CONT");
            let status = child.wait().unwrap();
            assert_eq!(status.signal(), Some(sig), "{name}: {status:?}");
            assert_eq!(staging_files(t.path()), Vec::<String>::new(), "{name}");
            assert_eq!(fs::read(&out).unwrap(), b"precious", "{name}");
            caught = true;
            break;
        }
        assert!(caught, "{name}: the writer was never caught before its commit");
    }
}

fn kill(pid: &str, sig: &str) {
    assert!(Command::new("kill").arg(format!("-{sig}")).arg(pid).status().unwrap().success());
}

/// `n` bytes that zstd cannot compress (xorshift), after an ELF magic.
fn incompressible_code_object(n: usize) -> Vec<u8> {
    let mut v = code_object(3);
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

/// Whether `pid` has `path` mapped (`/proc/PID/maps` names mapped files).
fn maps_file(pid: u32, path: &Path) -> bool {
    let maps = fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines().any(|l| l.ends_with(path.to_str().unwrap()))
}

/// Break 6 of issue 25: another process truncates a large compressed
/// bundle while `verify`, `extract --all` or `prune` reads it (mapped).
/// Each run is stopped (SIGSTOP) as soon as the input shows in its
/// memory maps, the input is cut to 4 KiB, and the run continued: it
/// must end with status 2 and an error naming the input (never SIGBUS),
/// leave no staging file and no output, and keep an old output intact.
/// Each command is tried 3 times; a run that got past its reading before
/// it was stopped is not counted, but every command must be caught at
/// least once.
#[test]
fn inputs_that_shrink_while_read_are_an_error_not_a_signal() {
    use offload_format::bundle::compressed::{CompressOptions, Method, compress};
    use std::os::unix::process::ExitStatusExt;
    let t = tempfile::tempdir().unwrap();
    let input = t.path().join("big.ccob");
    let big = incompressible_code_object(160 << 20);
    let small = code_object(4);
    let plain = bundle(&[("hipv4-amdgcn-amd-amdhsa--gfx906", &big), ("hipv4-amdgcn-amd-amdhsa--gfx90a", &small)]);
    drop(big);
    let options = CompressOptions { method: Method::Zstd, level: 1, version: 2, threads: 0 };
    let ccob = compress(&plain, &options).unwrap().bytes;
    drop(plain);
    assert!(ccob.len() > 150 << 20, "the bundle must stay large: {}", ccob.len());
    let outs = t.path().join("outs");
    let pruned = outs.join("pruned.ccob");
    let dir_arg = format!("--output-dir={}", outs.display());
    let commands: [(&str, Vec<&str>); 3] = [
        ("verify", vec!["verify"]),
        ("extract", vec!["extract", "--all", &dir_arg]),
        ("prune", vec!["prune", "--keep", "gfx90a", "-o", pruned.to_str().unwrap()]),
    ];
    for (name, args) in &commands {
        let mut caught = 0;
        for _attempt in 0..3 {
            fs::create_dir_all(&outs).unwrap();
            for e in fs::read_dir(&outs).unwrap() {
                fs::remove_file(e.unwrap().path()).unwrap();
            }
            fs::write(&pruned, b"precious").unwrap();
            fs::write(&input, &ccob).unwrap();
            let mut child = Command::new(OFFLOAD)
                .args(args)
                .arg(&input)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let pid = child.id();
            let start = Instant::now();
            while !maps_file(pid, &input)
                && child.try_wait().unwrap().is_none()
                && start.elapsed() < Duration::from_secs(60)
            {
                std::hint::spin_loop();
            }
            kill(&pid.to_string(), "STOP");
            fs::OpenOptions::new().write(true).open(&input).unwrap().set_len(4096).unwrap();
            kill(&pid.to_string(), "CONT");
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.signal(), None, "{name}: {:?} {err}", out.status);
            assert_eq!(staging_files(&outs), Vec::<String>::new(), "{name}");
            assert_eq!(staging_files(t.path()), Vec::<String>::new(), "{name}");
            assert_eq!(fs::read(&pruned).unwrap(), b"precious", "{name}: {err}");
            if err.contains("changed size while being read") {
                assert_eq!(out.status.code(), Some(2), "{name}: {err}");
                assert!(err.contains(input.to_str().unwrap()), "{name}: {err}");
                let left: Vec<_> = fs::read_dir(&outs).unwrap().map(|e| e.unwrap().file_name()).collect();
                assert_eq!(left.len(), 1, "{name}: only the old output: {left:?}");
                caught += 1;
            }
        }
        assert!(caught > 0, "{name}: no run was caught while it read its input");
    }
}

/// Break 3 of issue 25 (the remainder): a compressed bundle inside a
/// package is charged to the package's decompression budget before it is
/// decoded. The tarball (a few KiB: its budget is the 4 GiB minimum) holds
/// a bundle declaring 8 GiB: `verify` refuses to decode it, with an error
/// naming the member, instead of decoding toward 8 GiB.
#[test]
fn bundles_inside_packages_are_charged_to_the_package_budget() {
    let t = tempfile::tempdir().unwrap();
    let declared: u64 = 8 << 30;
    let junk = vec![0x5au8; 4000];
    // A CCOB version 3 header (docs/formats: magic, version, method 1 =
    // zstd, total size, uncompressed size, hash), then data.
    let mut ccob = b"CCOB".to_vec();
    ccob.extend_from_slice(&3u16.to_le_bytes());
    ccob.extend_from_slice(&1u16.to_le_bytes());
    ccob.extend_from_slice(&(32 + junk.len() as u64).to_le_bytes());
    ccob.extend_from_slice(&declared.to_le_bytes());
    ccob.extend_from_slice(&0u64.to_le_bytes());
    ccob.extend_from_slice(&junk);
    let mut tar = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(ccob.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, "lib/bomb.ccob", &ccob[..]).unwrap();
    let pkg = t.path().join("pkg.tar");
    fs::write(&pkg, tar.into_inner().unwrap()).unwrap();
    let out = Command::new(OFFLOAD).arg("verify").arg(&pkg).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("decompression budget"), "{text}");
    assert!(text.contains("lib/bomb.ccob"), "{text}");
}
