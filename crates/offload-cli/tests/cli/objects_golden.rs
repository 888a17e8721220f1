//! Object files (`-type=o`) and heterogeneous archives (`-type=a`) checked
//! against outputs LLVM 19 made (fixtures/objects, see COMMANDS.md). Runs
//! without LLVM installed.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OURS: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");
const HOST: &str = "host-x86_64-unknown-linux-gnu";
const G906: &str = "hip-amdgcn-amd-amdhsa--gfx906";
const G908: &str = "hip-amdgcn-amd-amdhsa--gfx908";
const HOSTS: [&str; 6] = ["x86_64", "i386", "ppc64", "aarch64", "cxx-gcc", "coff"];

fn fixture(name: &str) -> PathBuf {
    common::fixtures().join("objects").join(name)
}

fn read(name: &str) -> Vec<u8> {
    fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Runs our bundler in a fresh directory holding copies of `files`.
fn ours(files: &[&str], args: &[String]) -> (Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    for f in files {
        fs::copy(fixture(f), dir.path().join(f)).unwrap();
    }
    let out = common::run(Command::new(OURS).args(args).current_dir(dir.path()));
    (out, dir)
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn ok(out: &Output) {
    assert!(out.status.success(), "failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn error_of(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "expected an error, stdout {:?}", String::from_utf8_lossy(&out.stdout));
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(text.starts_with(&format!("{OURS}: error: ")), "{text}");
    text[OURS.len() + 9..].trim_end().to_string()
}

fn assert_bytes(what: &str, expected: &[u8], got: &[u8]) {
    if expected != got {
        let at = expected.iter().zip(got).position(|(a, b)| a != b).unwrap_or(expected.len().min(got.len()));
        panic!("{what}: differs from LLVM 19 at byte {at} (LLVM {} bytes, ours {})", expected.len(), got.len());
    }
}

fn no_files_but(dir: &Path, keep: &[&str]) {
    for e in fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(keep.contains(&name.as_str()), "unexpected file {name} left behind");
    }
}

#[test]
fn fat_objects_are_byte_identical_to_llvm19() {
    for h in HOSTS {
        let host = format!("host-{h}.o");
        let (out, dir) = ours(
            &[&host, "dev-gfx906.o", "payload.txt"],
            &[
                "-type=o".into(),
                format!("-targets={HOST},{G906},{G908}"),
                format!("-input={host}"),
                "-input=dev-gfx906.o".into(),
                "-input=payload.txt".into(),
                "-output=fat.o".into(),
            ],
        );
        ok(&out);
        assert_bytes(
            &format!("bundle of {host}"),
            &read(&format!("fat-{h}.o")),
            &fs::read(dir.path().join("fat.o")).unwrap(),
        );
    }
}

#[test]
fn listing_follows_the_section_table() {
    for f in HOSTS.iter().map(|h| format!("fat-{h}.o")).chain(["mid.o".into()]) {
        let (out, _dir) = ours(&[&f], &args(&["-type=o", "-list", &format!("-input={f}")]));
        ok(&out);
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{HOST}-\n{G906}\n{G908}\n"), "{f}");
    }
    for (f, ty) in [("host-macho.o", "o"), ("host-x86_64.o", "o"), ("lib.a", "o"), ("lib.a", "a")] {
        let (out, _dir) = ours(&[f], &args(&[&format!("-type={ty}"), "-list", &format!("-input={f}")]));
        ok(&out);
        assert!(out.stdout.is_empty(), "{f}: {:?}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
fn unbundling_gives_llvm19_host_objects_and_exact_payloads() {
    for h in HOSTS.iter().copied().chain(["mid"]) {
        let fat = if h == "mid" { "mid.o".to_string() } else { format!("fat-{h}.o") };
        let (out, dir) = ours(
            &[&fat],
            &[
                "-type=o".into(),
                "-unbundle".into(),
                format!("-targets={G908},{HOST},{G906}"),
                format!("-input={fat}"),
                "-output=d8".into(),
                "-output=host.o".into(),
                "-output=d6".into(),
            ],
        );
        ok(&out);
        let d = dir.path();
        let expected_host = if h == "mid" { "mid.host.o".to_string() } else { format!("fat-{h}.host.o") };
        assert_bytes(&format!("host of {fat}"), &read(&expected_host), &fs::read(d.join("host.o")).unwrap());
        assert_bytes(&format!("gfx906 of {fat}"), &read("dev-gfx906.o"), &fs::read(d.join("d6")).unwrap());
        assert_bytes(&format!("gfx908 of {fat}"), &read("payload.txt"), &fs::read(d.join("d8")).unwrap());
    }
}

#[test]
fn coff_bundle_sections_are_read() {
    let (out, dir) = ours(
        &["fat-coff.o"],
        &args(&[
            "-type=o",
            "-unbundle",
            &format!("-targets={G906},{G908}"),
            "-input=fat-coff.o",
            "-output=a",
            "-output=b",
        ]),
    );
    ok(&out);
    assert_eq!(fs::read(dir.path().join("a")).unwrap(), read("dev-gfx906.o"));
    assert_eq!(fs::read(dir.path().join("b")).unwrap(), read("payload.txt"));
}

#[test]
fn plain_objects_behave_as_in_llvm19() {
    let targets = format!("-targets={HOST},{G906}");
    let base = ["-type=o", "-unbundle", &targets, "-input=host-x86_64.o", "-output=h", "-output=d"];
    let (out, dir) = ours(&["host-x86_64.o"], &args(&base));
    assert_eq!(error_of(&out), format!("Can't find bundles for {G906} and {HOST}-"));
    no_files_but(dir.path(), &["host-x86_64.o"]);

    let mut allow = args(&base);
    allow.push("-allow-missing-bundles".into());
    let (out, dir) = ours(&["host-x86_64.o"], &allow);
    ok(&out);
    assert_eq!(fs::read(dir.path().join("h")).unwrap(), read("host-x86_64.o"));
    assert!(fs::read(dir.path().join("d")).unwrap().is_empty());
}

#[test]
fn archives_split_like_llvm19() {
    let (out, dir) = ours(
        &["lib.a"],
        &[
            "-type=a".into(),
            "-unbundle".into(),
            format!("-targets=hip-amdgcn-amd-amdhsa--gfx906:xnack+,{G908},{HOST}"),
            "-input=lib.a".into(),
            "-output=x.a".into(),
            "-output=8.a".into(),
            "-output=h.a".into(),
        ],
    );
    ok(&out);
    for (ours, llvm) in [("x.a", "lib-gfx906xnack.a"), ("8.a", "lib-gfx908.a"), ("h.a", "lib-host.a")] {
        assert_bytes(llvm, &read(llvm), &fs::read(dir.path().join(ours)).unwrap());
    }
}

/// The members of a GNU archive (short names only, as in `lib.a`), without
/// the symbol table.
fn members_of(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut members = Vec::new();
    let mut at = 8;
    while at + 60 <= archive.len() {
        let header = &archive[at..at + 60];
        let name = String::from_utf8_lossy(&header[..16]).trim_end().trim_end_matches('/').to_string();
        let size: usize = String::from_utf8_lossy(&header[48..58]).trim().parse().unwrap();
        if !name.is_empty() {
            members.push((name, archive[at + 60..at + 60 + size].to_vec()));
        }
        at += 60 + size + size % 2;
    }
    members
}

/// A GNU thin archive naming `paths` (its members' files, relative to the
/// archive's folder), as `llvm-ar rc --thin` writes it without a symbol
/// table: every name in the `//` table, sizes of the files, no data.
fn thin_archive(paths: &[(&str, usize)]) -> Vec<u8> {
    let header = |name: &str, size: usize| format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644);
    let mut names = String::new();
    let mut offsets = Vec::new();
    for (path, _) in paths {
        offsets.push(names.len());
        names.push_str(&format!("{path}/\n"));
    }
    let mut out = format!("!<thin>\n{}{names}", header("//", names.len()));
    if names.len() % 2 == 1 {
        out.push('\n');
    }
    for ((_, size), offset) in paths.iter().zip(offsets) {
        out.push_str(&header(&format!("/{offset}"), *size));
    }
    out.into_bytes()
}

/// A thin archive's members are read from the files it names, relative to
/// its own folder: the outputs are LLVM 19's for the same members in a
/// regular archive. A missing member file is LLVM's error, and nothing is
/// written.
#[test]
fn thin_archives_read_their_member_files() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    fs::create_dir_all(lib.join("m")).unwrap();
    let members = members_of(&read("lib.a"));
    assert_eq!(members.len(), 4);
    let mut paths = Vec::new();
    for (i, (name, data)) in members.iter().enumerate() {
        // Half of the members in a subfolder.
        let path = if i % 2 == 0 { format!("m/{name}") } else { name.clone() };
        fs::write(lib.join(&path), data).unwrap();
        paths.push((path, data.len()));
    }
    let paths: Vec<(&str, usize)> = paths.iter().map(|(p, n)| (p.as_str(), *n)).collect();
    fs::write(lib.join("thin.a"), thin_archive(&paths)).unwrap();
    let unbundle = |outputs: &[&str]| {
        let mut args = args(&["-type=a", "-unbundle", "-input=lib/thin.a"]);
        args.push(format!("-targets=hip-amdgcn-amd-amdhsa--gfx906:xnack+,{G908},{HOST}"));
        args.extend(outputs.iter().map(|o| format!("-output={o}")));
        common::run(Command::new(OURS).args(args).current_dir(dir.path()))
    };
    ok(&unbundle(&["x.a", "8.a", "h.a"]));
    for (ours, llvm) in [("x.a", "lib-gfx906xnack.a"), ("8.a", "lib-gfx908.a"), ("h.a", "lib-host.a")] {
        assert_bytes(llvm, &read(llvm), &fs::read(dir.path().join(ours)).unwrap());
    }

    fs::remove_file(lib.join("m/a1.o")).unwrap();
    let out = unbundle(&["y.a", "9.a", "i.a"]);
    assert_eq!(error_of(&out), "'m/a1.o': No such file or directory");
    for o in ["y.a", "9.a", "i.a"] {
        assert!(!dir.path().join(o).exists(), "{o} written by a failed run");
    }
}

#[test]
fn archive_errors_use_llvm19_wording_and_write_nothing() {
    let want = "-targets=hip-amdgcn-amd-amdhsa--gfx1030";
    let (out, dir) = ours(&["lib.a"], &args(&["-type=a", "-unbundle", want, "-input=lib.a", "-output=x.a"]));
    assert_eq!(
        error_of(&out),
        "no compatible code object found for the target 'hip-amdgcn-amd-amdhsa--gfx1030' in heterogeneous archive library: lib.a"
    );
    no_files_but(dir.path(), &["lib.a"]);

    let (out, dir) = ours(
        &["lib.a"],
        &args(&["-type=a", "-unbundle", want, "-input=lib.a", "-output=x.a", "-allow-missing-bundles"]),
    );
    ok(&out);
    assert_eq!(fs::read(dir.path().join("x.a")).unwrap(), b"!<arch>\n");

    let (out, dir) = ours(
        &["conflict.a"],
        &args(&[
            "-type=a",
            "-unbundle",
            "-check-input-archive",
            &format!("-targets={G906}"),
            "-input=conflict.a",
            "-output=x.a",
        ]),
    );
    assert_eq!(error_of(&out), format!("conflicting TargetIDs [{G906}, {G906}:xnack+] found in cf.bc of conflict.a"));
    no_files_but(dir.path(), &["conflict.a"]);
    // Without the check, the same archive unbundles.
    let (out, _dir) = ours(
        &["conflict.a"],
        &args(&["-type=a", "-unbundle", &format!("-targets={G906}"), "-input=conflict.a", "-output=x.a"]),
    );
    ok(&out);
}

/// Damaged inputs: a clear error, no output file, never a crash.
#[test]
fn corrupt_objects_and_archives_are_refused_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let fat = read("fat-x86_64.o");
    let lib = read("lib.a");
    // e_shoff is at byte 40 of an ELF64 header.
    let mut lying = fat.clone();
    lying[40..48].copy_from_slice(&(fat.len() as u64 - 8).to_le_bytes());
    // The last section header (the gfx908 bundle) claims a far offset.
    let mut far = fat.clone();
    let shoff = u64::from_le_bytes(fat[40..48].try_into().unwrap()) as usize;
    let last = shoff + 64 * (u16::from_le_bytes(fat[60..62].try_into().unwrap()) as usize - 1);
    far[last + 24..last + 32].copy_from_slice(&u64::MAX.to_le_bytes());
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("o", fat[..100].to_vec(), "malformed ELF file"),
        ("o", fat[..fat.len() - 30].to_vec(), "malformed ELF file"),
        ("o", lying, "malformed ELF file"),
        ("o", far, "malformed ELF file"),
        ("a", lib[..lib.len() / 2].to_vec(), "'in':"),
        ("a", b"!<arch>\nshort".to_vec(), "'in':"),
    ];
    for (i, (ty, bytes, expected)) in cases.into_iter().enumerate() {
        fs::write(dir.path().join("in"), &bytes).unwrap();
        let out = common::run(
            Command::new(OURS)
                .args(["-unbundle", &format!("-type={ty}"), &format!("-targets={G908},{HOST}"), "-input=in"])
                .args(["-output=o1", "-output=o2"])
                .current_dir(dir.path()),
        );
        let msg = error_of(&out);
        assert!(msg.contains(expected), "case {i}: {msg}");
        no_files_but(dir.path(), &["in"]);
    }
}
