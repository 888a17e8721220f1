//! What a person sees on a terminal: `offload` runs with standard output
//! and standard error on one pseudo-terminal of a given width (as in a
//! shell window), and the tests read back the characters it drew. Checks:
//! progress on a package whose one compressed member takes the time (a
//! `.deb`), colour that never moves a column, tables that fit the width
//! with human sizes, and the same commands through a pipe printing
//! everything whole and exact.

// openpty and the window-size ioctl come from libc.
#![allow(unsafe_code)]

use crate::common;
use crate::package_support::*;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::{Command, Stdio};

/// Runs `offload ARGS` with standard output and error on a terminal of
/// `columns` columns; returns what it drew and its exit status.
fn on_terminal(args: &[&str], env: &[(&str, &str)], columns: u16) -> (String, Option<i32>) {
    let (mut leader, mut follower) = (0, 0);
    let size = libc::winsize { ws_row: 50, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: openpty writes two descriptors into the given integers and
    // reads the window size from a live local.
    let rc = unsafe { libc::openpty(&mut leader, &mut follower, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here.
    let (mut terminal, out) = unsafe { (std::fs::File::from_raw_fd(leader), std::fs::File::from_raw_fd(follower)) };
    let err = out.try_clone().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_offload"));
    command.args(args).current_dir(common::fixtures().join("..")).env_remove("NO_COLOR").env_remove("COLUMNS");
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.stdin(Stdio::null()).stdout(out).stderr(err).spawn().unwrap();
    // Our copies of the follower side went to the child; read while it
    // runs (the terminal's buffer is small) until EIO at its exit.
    drop(command);
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n @ 1..) = terminal.read(&mut chunk) {
            seen.extend_from_slice(&chunk[..n]);
        }
        seen
    });
    let status = child.wait().unwrap();
    let seen = reader.join().unwrap();
    (String::from_utf8_lossy(&seen).replace("\r\n", "\n"), status.code())
}

/// The same command through pipes: standard output only.
fn piped(args: &[&str]) -> String {
    let out =
        common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args).current_dir(common::fixtures().join("..")));
    String::from_utf8(out.stdout).unwrap()
}

/// `text` without SGR colour sequences (`ESC [ ... m`).
fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// The character column where each of `header`'s words starts, in the
/// header line and in each row (the columns must be the same).
fn assert_aligned(table: &str, header_words: &[&str]) {
    let lines: Vec<&str> = table.lines().collect();
    let header = lines.iter().position(|l| l.starts_with(header_words[0])).expect("a header line");
    let starts: Vec<usize> = header_words
        .iter()
        .map(|w| lines[header].find(w).unwrap_or_else(|| panic!("{w} in {:?}", lines[header])))
        .collect();
    for line in &lines[header + 1..] {
        if line.is_empty() || line.contains(": ") && !line.contains("  ") {
            continue;
        }
        for (&at, w) in starts.iter().zip(header_words).skip(1) {
            let chars: Vec<char> = line.chars().collect();
            assert!(
                at >= 2 && chars.get(at - 1) == Some(&' ') && chars.get(at).is_some_and(|c| *c != ' '),
                "column {w} does not start at {at} in {line:?}\nwhole table:\n{table}"
            );
        }
    }
}

#[test]
fn colour_never_moves_a_column() {
    // gfx1030 loads nothing from libscale.so: red "no" rows in check's
    // table; select colours its VERDICT column in three colours.
    let (check, code) = on_terminal(&["check", "--gpu", "gfx1030", "fixtures/inspect/libscale.so"], &[], 200);
    assert_eq!(code, Some(1), "{check}");
    assert!(check.contains("\x1b[1;31mno\x1b[0m"), "coloured on a terminal: {check:?}");
    assert_aligned(&plain(&check), &["FILE", "FAT BINARY", "GPU", "LOADS", "WHY / CODE OBJECT"]);
    let (select, code) =
        on_terminal(&["select", "--gpu", "gfx90a:sramecc+:xnack+", "fixtures/inspect/libscale.so"], &[], 250);
    assert_eq!(code, Some(0), "{select}");
    assert!(select.contains("\x1b[32mselected\x1b[0m"), "{select:?}");
    assert_aligned(&plain(&select), &["FILE", "LOCATION", "ID", "OFFSET", "SIZE", "VERDICT", "WHY"]);
}

#[test]
fn tables_fit_the_terminal_with_human_sizes_and_are_whole_through_a_pipe() {
    let args = ["list", "fixtures/inspect/libscale.so"];
    let (seen, code) = on_terminal(&args, &[], 110);
    assert_eq!(code, Some(0));
    let seen = plain(&seen);
    for line in seen.lines() {
        assert!(line.chars().count() <= 110, "{} columns: {line:?}", line.chars().count());
    }
    assert!(seen.contains('…'), "long cells are elided: {seen}");
    assert!(seen.contains("4.0 KiB") && !seen.contains("4072"), "human sizes: {seen}");
    assert_aligned(&seen, &["FILE", "LOCATION", "FORMAT", "IMAGE", "KIND"]);
    // Wide enough: nothing elided.
    let (wide, _) = on_terminal(&args, &[], 300);
    assert!(!wide.contains('…'), "{wide}");
    // --bytes: exact sizes on a terminal too.
    let (exact, _) = on_terminal(&["list", "--bytes", "fixtures/inspect/libscale.so"], &[], 300);
    assert!(exact.contains("4072") && !exact.contains("KiB"), "{exact}");
    // Through a pipe: whole lines, exact bytes, no colour.
    let out = piped(&args);
    assert!(!out.contains('…') && !out.contains('\x1b') && out.contains("4072"), "{out}");
    assert!(out.lines().any(|l| l.chars().count() > 110), "a pipe gets the whole table: {out}");
}

/// A deb whose `data.tar.gz` holds a code object and filler: one
/// compressed member of the outermost package, the case where a count of
/// members stands still.
fn slow_deb() -> Vec<u8> {
    let bc = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/hip-gfx906-gfx90a.bc")).unwrap();
    // Bytes that do not compress, so that the compressed stream is long.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u8> = (0..2 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let names: Vec<String> = (0..400).map(|i| format!("./usr/share/doc/x/f{i}.txt")).collect();
    let mut files: Vec<(&str, &[u8])> = vec![("./usr/lib/x/kernels.bc", &bc)];
    for (i, name) in names.iter().enumerate() {
        let start = i * 4096;
        files.push((name.as_str(), &noise[start..start + 4096]));
    }
    files.push(("./usr/lib/x/blob.dat", &noise[400 * 4096..]));
    let control = compress(Z::Gzip, &tar_of(&[("./control", b"Package: x\nVersion: 1\n")]));
    let data = compress(Z::Gzip, &tar_of(&files));
    ar_of(&[("debian-binary", b"2.0\n"), ("control.tar.gz", &control), ("data.tar.gz", &data)])
}

#[test]
fn progress_moves_by_bytes_inside_a_compressed_member() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("slow.deb");
    std::fs::write(&path, slow_deb()).unwrap();
    let p = path.to_str().unwrap();
    // At once rather than after half a second, for a package this small.
    let (seen, code) = on_terminal(&["list", p], &[("OFFLOAD_PROGRESS_AFTER_MS", "0")], 200);
    assert_eq!(code, Some(0), "{seen}");
    let percents: Vec<u32> = seen
        .split("\r\x1b[Kscanning ")
        .skip(1)
        .filter_map(|l| l.split(" (").nth(1)?.split('%').next()?.parse().ok())
        .collect();
    assert!(!percents.is_empty(), "a progress line: {seen:?}");
    assert!(
        percents.iter().any(|&p| p < 50),
        "drawn while the one compressed member is read, not once at its end: {percents:?} in {seen:?}"
    );
    assert!(seen.contains(" of ") && seen.contains("MiB"), "{seen:?}");
    // The table after it starts on a clean line, and says what it found.
    assert!(plain(&seen).contains("kernels.bc"), "{seen}");
}

/// Bytes that do not compress: a deflate or gzip stream of them is as long
/// as they are, so that reading it takes many steps.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// The percentages and member counts of the progress lines drawn:
/// `scanning x.whl: 1.2 MiB of 4.0 MiB (30%), 0/1 members`.
fn progress_lines(seen: &str) -> Vec<(u32, String)> {
    seen.split("\r\x1b[Kscanning ")
        .skip(1)
        .filter_map(|l| {
            let rest = l.split(" (").nth(1)?;
            let percent = rest.split('%').next()?.parse().ok()?;
            let members = rest.split("), ").nth(1)?.split(" members").next()?.to_string();
            Some((percent, members))
        })
        .collect()
}

/// One large member that holds code (the sample bundle, then 6 MiB that
/// do not compress): a wheel deflates it, a `.deb` gzips the tarball
/// holding it alone. The progress line must move while that one member
/// is decompressed, with the member not yet counted as passed, instead of
/// jumping from its start to its end (issue 28: "by bytes, including
/// inside compressed members").
#[test]
fn progress_moves_while_one_large_member_is_decompressed() {
    let bc = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/hip-gfx906-gfx90a.bc")).unwrap();
    let mut big = bc.clone();
    big.extend(noise(6 << 20));
    let dir = tempfile::tempdir().unwrap();
    let wheel = dir.path().join("big-1.0-py3-none-any.whl");
    std::fs::write(&wheel, zip_of(&[("big/libbig.so", &big, true)])).unwrap();
    let control = compress(Z::Gzip, &tar_of(&[("./control", b"Package: big\nVersion: 1\n")]));
    let data = compress(Z::Gzip, &tar_of(&[("./usr/lib/libbig.so", &big)]));
    let deb = dir.path().join("big_1_amd64.deb");
    std::fs::write(&deb, ar_of(&[("debian-binary", b"2.0\n"), ("control.tar.gz", &control), ("data.tar.gz", &data)]))
        .unwrap();
    // Every step drawn, at once: what is seen does not depend on speed.
    let env = [("OFFLOAD_PROGRESS_AFTER_MS", "0"), ("OFFLOAD_PROGRESS_EVERY_MS", "0")];
    for (package, inside) in [(&wheel, "0/1"), (&deb, "2")] {
        for command in ["list", "verify", "size", "kernels"] {
            let (seen, code) = on_terminal(&[command, package.to_str().unwrap()], &env, 200);
            assert!(code == Some(0) || code == Some(1), "{command}: {seen}");
            let lines = progress_lines(&seen);
            // Drawn while the member is read: it is not passed yet.
            let during: std::collections::BTreeSet<u32> =
                lines.iter().filter(|(p, members)| members == inside && *p > 0 && *p < 100).map(|(p, _)| *p).collect();
            assert!(
                during.len() >= 5,
                "{command} {}: the line moves inside the member ({during:?}); drawn: {lines:?}",
                package.display()
            );
            if command == "list" {
                assert!(plain(&seen).contains("libbig.so"), "{command}: {seen}");
            }
        }
    }
}

/// `prune`'s tables and summary on a terminal: human sizes in the
/// per-entry table (SIZE, FATE) and the per-target table of a wheel
/// (KEPT BYTES, DROPPED BYTES), `--bytes` and a pipe exact, as `list` and
/// `size` do.
#[test]
fn prune_reports_human_sizes_on_a_terminal() {
    let lib = "fixtures/inspect/libtwo.so";
    let args = ["prune", "--dry-run", "--keep", "gfx906,gfx90a", lib];
    let (seen, code) = on_terminal(&args, &[], 200);
    assert_eq!(code, Some(0), "{seen}");
    let seen = plain(&seen);
    // gfx1030's 3240 bytes, gfx90a's 4072: 3.2 KiB and 4.0 KiB.
    assert!(seen.contains("3.2 KiB") && seen.contains("4.0 KiB") && !seen.contains("4072"), "{seen}");
    assert!(seen.contains("3.2 KiB of code objects dropped; 24.2 KiB -> 24.2 KiB, 0 B saved (283 B zeroed)"), "{seen}");
    assert_aligned(&seen, &["FAT BINARY", "FORMAT", "ID", "SIZE", "FATE"]);
    let (exact, _) = on_terminal(&["prune", "--bytes", "--dry-run", "--keep", "gfx906,gfx90a", lib], &[], 200);
    assert!(exact.contains("4072") && !exact.contains("KiB") && exact.contains("bytes of code objects"), "{exact}");
    let out = piped(&args);
    assert!(out.contains("4072") && !out.contains("KiB"), "{out}");

    // A wheel: the per-file and per-target tables.
    let dir = tempfile::tempdir().unwrap();
    let wheel = dir.path().join("two-1.0-py3-none-any.whl");
    let bytes = std::fs::read(common::fixtures().join("inspect/libtwo.so")).unwrap();
    std::fs::write(&wheel, zip_of(&[("two/libtwo.so", &bytes, true)])).unwrap();
    let wheel = wheel.to_str().unwrap();
    let args = ["prune", "--dry-run", "--keep", "gfx906,gfx90a", wheel];
    let (seen, code) = on_terminal(&args, &[], 200);
    assert_eq!(code, Some(0), "{seen}");
    let seen = plain(&seen);
    let at = seen.find("TARGET").unwrap_or_else(|| panic!("a per-target table: {seen}"));
    let (files, targets) = seen.split_at(at);
    assert!(targets.contains("KiB") && !targets.contains("4072"), "{seen}");
    assert!(files.contains("KiB") && !targets.contains(" bytes"), "{seen}");
    assert_aligned(files, &["FILE", "ACTION", "MODE", "OLD SIZE", "NEW SIZE", "WHY"]);
    assert_aligned(targets, &["TARGET", "KEPT BYTES", "DROPPED BYTES"]);
    let out = piped(&args);
    assert!(out.contains("4072") && !out.contains("KiB") && out.contains(" bytes saved"), "{out}");
}
