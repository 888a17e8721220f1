//! `offload` on packages and folders: wheels (stored and deflated members),
//! tarballs of every compression, Debian and conda packages, nesting, and
//! folders with a symbolic-link loop, all built here from the repository's
//! samples and fixtures; locations, offsets, select, verify and extract are
//! checked against the same commands on the unpacked files.

// Tests set resource limits and signals through libc.
#![allow(unsafe_code)]

use crate::common;
use crate::inspect_support;
use crate::package_support;

use inspect_support::*;
use package_support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn sample() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/hip-gfx906-gfx90a.bc")).unwrap()
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(common::fixtures().join("inspect").join(name)).unwrap()
}

fn write(dir: &Path, name: &str, data: &[u8]) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&p, data).unwrap();
    p
}

fn find(hay: &[u8], needle: &[u8]) -> u64 {
    hay.windows(needle.len()).position(|w| w == needle).expect("member stored as is") as u64
}

/// What `list --json` says about the unpacked file, as the package listing
/// must say it for the file stored at `steps` (`member a/b.so`): the
/// location behind the steps, the offset moved by `base` (or null).
fn expected(dir: &Path, data: &[u8], steps: &str, base: Option<u64>) -> Vec<Value> {
    let alone = write(dir, "alone.bin", data);
    let mut records = list_json(&alone);
    for r in &mut records {
        let loc = s(r, "location");
        let loc = match loc.strip_prefix("file") {
            Some(rest) => format!("{steps}{rest}"),
            None => format!("{steps} {loc}"),
        };
        r["location"] = Value::String(loc);
        r["offset"] = match (base, r["offset"].as_u64()) {
            (Some(b), Some(o)) => Value::from(b + o),
            _ => Value::Null,
        };
        r["file"] = Value::Null;
        // The URI's range moves with the member; its path is compared in
        // `listed`.
        r["uri"] = match (base, r["uri"].as_str().and_then(uri_range)) {
            (Some(b), Some((o, n))) => Value::from(format!("#offset={}&size={n}", b + o)),
            _ => Value::Null,
        };
    }
    records
}

/// The range of a code-object URI.
fn uri_range(uri: &str) -> Option<(u64, u64)> {
    let (offset, size) = uri.split_once("#offset=")?.1.split_once("&size=")?;
    Some((offset.parse().ok()?, size.parse().ok()?))
}

/// `list --json` of a package, without the `file` key (compared separately).
fn listed(path: &Path) -> Vec<Value> {
    let mut records = list_json(path);
    for r in &mut records {
        assert_eq!(s(r, "file"), path.to_str().unwrap());
        r["file"] = Value::Null;
        if let Some(uri) = r["uri"].as_str() {
            let here = offload_inspect::uri::encode_path(path.to_str().unwrap().as_bytes());
            let range = uri.strip_prefix(&format!("file://{here}")).unwrap_or_else(|| panic!("{uri}"));
            r["uri"] = Value::from(range);
        }
    }
    records
}

#[test]
fn wheels_give_offsets_for_stored_members_and_null_for_deflated_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (bc, so) = (sample(), fixture("libtwo.so"));
    let wheel = zip_of(&[
        ("torch/__init__.py", b"import os\n", true),
        ("torch/lib/hip.bc", &bc, false),
        ("torch/lib/libtwo.so", &so, true),
        ("torch-2.9.dist-info/RECORD", b"torch/__init__.py,,\n", true),
    ]);
    let path = write(dir.path(), "torch-2.9-cp312-linux_x86_64.whl", &wheel);
    let mut want = expected(dir.path(), &bc, "member torch/lib/hip.bc", Some(find(&wheel, &bc)));
    want.extend(expected(dir.path(), &so, "member torch/lib/libtwo.so", None).into_iter().map(|mut r| {
        // Units are numbered across the package.
        r["unit"] = Value::from(n(&r, "unit") + 1);
        r
    }));
    let got = listed(&path);
    assert_eq!(got, want);
    assert!(got.iter().any(|r| r["offset"].is_u64()) && got.iter().any(|r| r["offset"].is_null()));
    // The offsets point at the code objects' bytes in the wheel itself.
    let out = tempfile::tempdir().unwrap();
    let o = offload(&["extract", "--index", "1", "-o", out.path().join("x").to_str().unwrap(), path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let one = std::fs::read(out.path().join("x")).unwrap();
    let at = n(&got[1], "offset") as usize;
    assert_eq!(&wheel[at..at + one.len()], &one[..]);
}

#[test]
fn tarballs_of_every_compression_list_like_the_unpacked_files() {
    let dir = tempfile::tempdir().unwrap();
    let (bc, cbc) = (
        sample(),
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/hip-gfx906-gfx90a.compressed.bc")).unwrap(),
    );
    let tar = tar_of(&[("./share/doc/x.txt", b"text"), ("./lib/a.bc", &bc), ("./lib/b.bc", &cbc)]);
    let plain = write(dir.path(), "x.tar", &tar);
    let mut want = expected(dir.path(), &bc, "member lib/a.bc", Some(find(&tar, &bc)));
    want.extend(expected(dir.path(), &cbc, "member lib/b.bc", Some(find(&tar, &cbc))).into_iter().map(|mut r| {
        r["unit"] = Value::from(n(&r, "unit") + 1);
        r
    }));
    assert_eq!(listed(&plain), want);
    for z in ALL {
        let path = write(dir.path(), &format!("x.tar.{}", z.ext()), &compress(z, &tar));
        let nulled: Vec<Value> = want
            .iter()
            .cloned()
            .map(|mut r| {
                r["offset"] = Value::Null;
                r["uri"] = Value::Null;
                r
            })
            .collect();
        assert_eq!(listed(&path), nulled, "{z:?}");
    }
}

#[test]
fn debs_condas_and_nested_packages_are_opened() {
    let dir = tempfile::tempdir().unwrap();
    let bc = sample();
    let files = [("./opt/rocm/lib/x.bc", &bc[..])];
    let deb = write(dir.path(), "x.deb", &deb_of(&files));
    assert_eq!(listed(&deb), expected(dir.path(), &bc, "member data.tar.xz member opt/rocm/lib/x.bc", None));

    let conda = write(dir.path(), "x-1.0-0.conda", &conda_of(&[("lib/x.bc", &bc)]));
    assert_eq!(listed(&conda), expected(dir.path(), &bc, "member pkg-x-1.0-0.tar.zst member lib/x.bc", None));
    let old_conda = write(dir.path(), "x-1.0-0.tar.bz2", &compress(Z::Bzip2, &tar_of(&[("lib/x.bc", &bc)])));
    assert_eq!(listed(&old_conda), expected(dir.path(), &bc, "member lib/x.bc", None));

    // A wheel stored in a zip: the offsets go through both.
    let wheel = zip_of(&[("x/x.bc", &bc, false)]);
    let outer = zip_of(&[("dist/x-1-py3-none-any.whl", &wheel, false)]);
    let path = write(dir.path(), "bundle.zip", &outer);
    let steps = "member dist/x-1-py3-none-any.whl member x/x.bc";
    assert_eq!(listed(&path), expected(dir.path(), &bc, steps, Some(find(&outer, &bc))));

    // A tarball holding a .deb.
    let deb_bytes = deb_of(&files);
    let path = write(dir.path(), "debs.tar.gz", &compress(Z::Gzip, &tar_of(&[("pool/x.deb", &deb_bytes)])));
    let steps = "member pool/x.deb member data.tar.xz member opt/rocm/lib/x.bc";
    assert_eq!(listed(&path), expected(dir.path(), &bc, steps, None));
}

#[test]
fn folders_list_each_file_once_through_link_loops() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    let (bc, so) = (sample(), fixture("libtwo.so"));
    write(&root, "a.bc", &bc);
    write(&root, "sub/libtwo.so", &so);
    write(&root, "sub/notes.txt", b"no code here");
    write(&root, "sub/x.whl", &zip_of(&[("x/x.bc", &bc, true)]));
    std::os::unix::fs::symlink(&root, root.join("sub/loop")).unwrap();
    std::os::unix::fs::symlink(root.join("a.bc"), root.join("link.bc")).unwrap();
    let records = list_json(&root);
    let files: Vec<String> = records.iter().map(|r| s(r, "file").to_string()).collect();
    let r = root.to_str().unwrap();
    let count = |f: &str| files.iter().filter(|x| **x == format!("{r}/{f}")).count();
    assert_eq!(count("a.bc"), 3, "{files:?}");
    assert_eq!(count("sub/libtwo.so"), 6);
    assert_eq!(count("sub/x.whl"), 3);
    assert_eq!(files.len(), 12, "nothing else, nothing twice: {files:?}");
    assert!(records.iter().filter(|x| s(x, "file").ends_with("x.whl")).all(|x| s(x, "location") == "member x/x.bc"));
    // A folder with no code at all is an error, said once.
    let empty = dir.path().join("empty");
    write(&empty, "readme", b"text");
    let o = offload(&["list", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stderr).matches("no offload code objects found").count(), 1);
}

/// Every file `extract --all` writes, by content, sorted.
fn extracted(path: &Path) -> Vec<Vec<u8>> {
    let out = tempfile::tempdir().unwrap();
    let o = offload(&["extract", "--all", "--output-dir", out.path().to_str().unwrap(), path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut all: Vec<Vec<u8>> =
        std::fs::read_dir(out.path()).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    all.sort();
    all
}

#[test]
fn select_verify_and_extract_work_inside_packages() {
    let dir = tempfile::tempdir().unwrap();
    let so = fixture("libtwo.so");
    let alone = write(dir.path(), "libtwo.so", &so);
    for (name, pkg) in [
        ("x.whl", zip_of(&[("lib/libtwo.so", &so, true)])),
        ("x.tar", tar_of(&[("lib/libtwo.so", &so)])),
        ("x.tar.xz", compress(Z::Xz, &tar_of(&[("lib/libtwo.so", &so)]))),
        ("x.deb", deb_of(&[("./lib/libtwo.so", &so)])),
    ] {
        let path = write(dir.path(), name, &pkg);
        assert_eq!(extracted(&path), extracted(&alone), "{name}");
        let p = path.to_str().unwrap();
        let o = offload(&["verify", p]);
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stdout));
        assert!(String::from_utf8_lossy(&o.stdout).contains(": OK: 6 code objects in 2 fat binaries"));
        let sel = offload(&["select", "--json", "--gpu", "gfx90a:xnack+", p]);
        let picked: Vec<String> =
            json(&sel).iter().filter(|r| r["selected"] == true).map(|r| s(r, "id").to_string()).collect();
        assert_eq!(picked, ["hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"], "{name}");
        // The first fat binary has no gfx90a code: exit 1, naming the member.
        assert_eq!(sel.status.code(), Some(1));
        assert!(
            String::from_utf8_lossy(&sel.stderr)
                .contains("member lib/libtwo.so section .hip_fatbin #0 loads on gfx90a:xnack+")
        );
    }
}

#[test]
fn damaged_packages_name_the_member_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let so = fixture("libtwo.so");
    let mut wheel = zip_of(&[("torch/lib/libtwo.so", &so, true), ("torch/lib/b.bc", &sample(), false)]);
    let start = 30 + "torch/lib/libtwo.so".len() + 100;
    for b in &mut wheel[start..start + 64] {
        *b ^= 0x5a;
    }
    let path = write(dir.path(), "x.whl", &wheel);
    let p = path.to_str().unwrap();
    let o = offload(&["list", p]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("error: {p}: member torch/lib/libtwo.so: deflate stream corrupt")), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("member torch/lib/b.bc"), "the other member is listed");
    let v = offload(&["verify", "--json", p]);
    assert_eq!(v.status.code(), Some(1));
    assert!(json(&v).iter().any(|r| s(r, "location") == "member torch/lib/libtwo.so" && s(r, "severity") == "error"));

    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let e = offload(&["extract", "--all", "--output-dir", out.to_str().unwrap(), p]);
    assert_eq!(e.status.code(), Some(1));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "a failed extract writes nothing");

    let cut = write(dir.path(), "cut.tar.gz", &compress(Z::Gzip, &tar_of(&[("a.so", &so)]))[..400]);
    let o = offload(&["list", cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("gzip stream corrupt"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_deb_made_by_dpkg_deb_is_read() {
    // Checked in: made by dpkg-deb (see fixtures/packages/COMMANDS.md).
    let path = common::fixtures().join("packages/hip-sample_1.0_amd64.deb");
    let dir = tempfile::tempdir().unwrap();
    let steps = "member data.tar.xz member usr/lib/hip-sample/hip-gfx906-gfx90a.bc";
    assert_eq!(listed(&path), expected(dir.path(), &sample(), steps, None));
}

#[test]
fn progress_shows_on_a_terminal_only() {
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..2000).map(|i| format!("pkg/m{i}.py")).collect();
    let mut members: Vec<(&str, &[u8], bool)> = names.iter().map(|n| (n.as_str(), &b"x = 1\n"[..], true)).collect();
    let bc = sample();
    members.push(("pkg/x.bc", &bc, false));
    let path = write(dir.path(), "many.whl", &zip_of(&members));
    let p = path.to_str().unwrap();

    let piped = common::run(
        std::process::Command::new(env!("CARGO_BIN_EXE_offload"))
            .args(["list", p])
            .env("OFFLOAD_PROGRESS_AFTER_MS", "0"),
    );
    assert!(piped.status.success());
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("scanning"), "no progress when stderr is not a terminal");

    let (mut leader, mut follower) = (0, 0);
    // SAFETY: openpty writes two descriptors into the given integers.
    let rc =
        unsafe { libc::openpty(&mut leader, &mut follower, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    assert_eq!(rc, 0, "openpty");
    // SAFETY: both descriptors were just opened and are owned here.
    let (mut terminal, stderr) = unsafe { (std::fs::File::from_raw_fd(leader), std::fs::File::from_raw_fd(follower)) };
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_offload"))
        .args(["list", p])
        // At once rather than after half a second, for a small package.
        .env("OFFLOAD_PROGRESS_AFTER_MS", "0")
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap();
    // Read while it runs: the terminal's buffer is small.
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut chunk = [0u8; 4096];
        // Ends with EIO once the child has exited and closed its side.
        while let Ok(n @ 1..) = terminal.read(&mut chunk) {
            seen.extend_from_slice(&chunk[..n]);
        }
        seen
    });
    assert!(child.wait().unwrap().success());
    let seen = reader.join().unwrap();
    let seen = String::from_utf8_lossy(&seen);
    assert!(seen.contains("scanning many.whl") || seen.contains(&format!("scanning {p}: ")), "{seen:?}");
    assert!(seen.contains("/2001 members"), "{seen:?}");
    assert!(seen.ends_with("\r\x1b[K"), "the line is cleared at the end: {seen:?}");
}

/// `extract` from a package names each output after the member it came
/// from (`libtwo.so-1-hipv4-...`), never after the package
/// (`x.whl-1-...`), so that files from a wheel and from the library alone
/// get the same names (issue 28).
#[test]
fn extracted_files_are_named_after_the_member() {
    let dir = tempfile::tempdir().unwrap();
    let so = fixture("libtwo.so");
    let names = |path: &Path| -> Vec<String> {
        let out = tempfile::tempdir().unwrap();
        let o = offload(&["extract", "--all", "--output-dir", out.path().to_str().unwrap(), path.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut all: Vec<String> =
            std::fs::read_dir(out.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        all.sort();
        all
    };
    let alone = names(&write(dir.path(), "libtwo.so", &so));
    assert!(!alone.is_empty() && alone.iter().all(|n| n.starts_with("libtwo.so-")), "{alone:?}");
    for (name, pkg) in [
        ("x.whl", zip_of(&[("pkg/lib/libtwo.so", &so, true)])),
        ("x.tar.xz", compress(Z::Xz, &tar_of(&[("usr/lib/libtwo.so", &so)]))),
    ] {
        let path = write(dir.path(), name, &pkg);
        assert_eq!(names(&path), alone, "{name}");
    }
}
