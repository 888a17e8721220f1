//! Golden tests for clang-offload-packager: every case of
//! `fixtures/packager/cases.txt` is run with our binary in a fresh copy of
//! `fixtures/packager/inputs`, and the files it writes, its stderr and its
//! exit code must equal what LLVM 19 produced (`expected/<case>/`, made by
//! `fixtures/packager/make.sh`). No LLVM is needed to run these.

use crate::common;

use offload_format::offload_binary::{OffloadBinary, container};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixture_dir() -> PathBuf {
    common::fixtures().join("packager")
}

/// Every regular file under `dir`, by path relative to it.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn copy_tree(from: &Path, to: &Path) {
    for (rel, bytes) in files(from) {
        let dest = to.join(rel);
        fs::create_dir_all(dest.parent().unwrap()).unwrap();
        fs::write(dest, bytes).unwrap();
    }
}

struct Case {
    id: String,
    stdin: Option<String>,
    args: Vec<String>,
}

fn cases() -> Vec<Case> {
    let text = fs::read_to_string(fixture_dir().join("cases.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut cols = l.splitn(3, '\t');
            let id = cols.next().unwrap().to_string();
            let stdin = cols.next().unwrap();
            let args = cols.next().unwrap_or("").split_whitespace().map(String::from).collect();
            Case { id, stdin: (stdin != "-").then(|| stdin.to_string()), args }
        })
        .collect()
}

/// Runs our packager like make.sh ran LLVM's: in a copy of inputs/, with
/// argv[0] "clang-offload-packager". Returns (new files, stderr, rc).
fn run_ours(case: &Case) -> (BTreeMap<String, Vec<u8>>, String, i32) {
    let work = tempfile::tempdir().unwrap();
    copy_tree(&fixture_dir().join("inputs"), work.path());
    let before = files(work.path());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_clang-offload-packager"));
    cmd.arg0("clang-offload-packager").args(&case.args).current_dir(work.path());
    match &case.stdin {
        Some(f) => cmd.stdin(fs::File::open(work.path().join(f)).unwrap()),
        None => cmd.stdin(Stdio::null()),
    };
    let out = common::run(&mut cmd);
    let mut after = files(work.path());
    after.retain(|k, v| before.get(k) != Some(v));
    (after, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code().unwrap_or(-1))
}

#[test]
fn every_case_matches_llvm_19_byte_for_byte() {
    let cases = cases();
    assert!(cases.len() >= 50, "cases.txt lost cases");
    let mut failures = Vec::new();
    for case in &cases {
        let dir = fixture_dir().join("expected").join(&case.id);
        let mut expected = files(&dir);
        let rc: i32 = expected.remove(".rc").map(|b| String::from_utf8(b).unwrap().trim().parse().unwrap()).unwrap();
        let stderr = String::from_utf8(expected.remove(".stderr").unwrap()).unwrap();
        let (got, got_stderr, got_rc) = run_ours(case);
        if got_rc != rc {
            failures.push(format!("{}: exit code {got_rc}, LLVM {rc}; stderr {got_stderr:?}", case.id));
        }
        if got_stderr != stderr {
            failures.push(format!("{}: stderr {got_stderr:?}, LLVM {stderr:?}", case.id));
        }
        let names: Vec<&String> = got.keys().collect();
        let want: Vec<&String> = expected.keys().collect();
        if names != want {
            failures.push(format!("{}: wrote {names:?}, LLVM {want:?}", case.id));
        } else {
            for (name, bytes) in &expected {
                if &got[name] != bytes {
                    failures.push(format!("{}: {name} differs from LLVM's", case.id));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// What `llvm-objdump --offloading` prints for the binaries of a file,
/// without its file-format line.
fn objdump_blocks(path: &Path) -> String {
    let data = fs::read(path).unwrap();
    let scan = container::scan(&data, &path.to_string_lossy());
    assert!(scan.error.is_none(), "{:?}", scan.error);
    let mut out = String::new();
    let mut i = 0;
    for pkg in &scan.packages {
        for b in OffloadBinary::parse_all(&pkg.data).unwrap() {
            out.push_str(&format!(
                "\nOFFLOADING IMAGE [{i}]:\n{:<16}{}\n{:<16}{}\n{:<16}{}\n{:<16}{}\n",
                "kind",
                b.image_kind().objdump_label(),
                "arch",
                b.arch(),
                "triple",
                b.triple(),
                "producer",
                b.offload_kind().name()
            ));
            i += 1;
        }
    }
    out
}

#[test]
fn reader_agrees_with_llvm_objdump() {
    let inputs = fixture_dir().join("inputs");
    for (file, listing) in [("pkg.out", "objdump-pkg.txt"), ("merged.o", "objdump-merged.txt")] {
        let expected = fs::read_to_string(fixture_dir().join("expected").join(listing)).unwrap();
        // Drop objdump's "\n<file>:\tfile format ...\n" header.
        let expected = match expected.find("\nOFFLOADING") {
            Some(i) => &expected[i..],
            None => "",
        };
        assert_eq!(objdump_blocks(&inputs.join(file)), expected, "{file}");
    }
}

#[test]
fn every_container_kind_yields_the_same_images() {
    let inputs = fixture_dir().join("inputs");
    let pkg = fs::read(inputs.join("pkg.out")).unwrap();
    let want: Vec<Vec<u8>> = OffloadBinary::parse_all(&pkg).unwrap().iter().map(|b| b.image().to_vec()).collect();
    assert_eq!(want, [b"hello".to_vec(), b"ABCDEFGHIJKLMNOP".to_vec()]);
    for file in ["host.o", "host.bc", "host.obj", "sub/pkg.out"] {
        let data = fs::read(inputs.join(file)).unwrap();
        let scan = container::scan(&data, file);
        assert!(scan.error.is_none(), "{file}: {:?}", scan.error);
        assert_eq!(scan.packages.len(), 1, "{file}");
        let got: Vec<Vec<u8>> =
            OffloadBinary::parse_all(&scan.packages[0].data).unwrap().iter().map(|b| b.image().to_vec()).collect();
        assert_eq!(got, want, "{file}");
    }
    // The archive: the host object's package, then the small raw one.
    let data = fs::read(inputs.join("lib.a")).unwrap();
    let scan = container::scan(&data, "lib.a");
    let ids: Vec<(&str, Vec<String>)> =
        scan.packages.iter().map(|p| (p.identifier.as_str(), p.members.clone())).collect();
    assert_eq!(ids, [("host.o", vec!["host.o".to_string()]), ("small.out", vec!["small.out".to_string()])]);
}

fn sha256(path: &Path) -> String {
    let out = common::run(Command::new("sha256sum").arg(path));
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or("").to_string()
}

/// LLVM 16 is not installed here: its record order is checked against the
/// hashes of LLVM 16's output recorded in packager-wrapper-spec (cases 1
/// and 2, given there as first 8 and last 4 hex digits).
#[test]
fn compat_16_reproduces_llvm_16_outputs() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture_dir().join("inputs"), dir.path());
    let cases: [(&[&str], &str, &str, &str); 2] = [
        (&["--image=file=a.bin,triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp"], "74cdd44b", "ae55", "55eef1c9"),
        (
            &[
                "--image=file=a.bin,triple=x86_64-unknown-linux-gnu,arch=generic,kind=openmp",
                "--image=file=b.o,triple=amdgcn-amd-amdhsa,arch=gfx90a,kind=hip,feature=+xnack,feature=-sramecc",
            ],
            "d7b2995b",
            "f84d",
            "f39f30f8",
        ),
    ];
    for (images, head16, tail16, head19) in cases {
        for (compat, head, tail) in [("--compat=16", head16, Some(tail16)), ("--compat=19", head19, None)] {
            let out = common::run(
                Command::new(env!("CARGO_BIN_EXE_clang-offload-packager"))
                    .current_dir(dir.path())
                    .args([compat, "-o", "p.out"])
                    .args(images),
            );
            assert!(out.status.success());
            let h = sha256(&dir.path().join("p.out"));
            assert!(h.starts_with(head) && tail.is_none_or(|t| h.ends_with(t)), "{compat} {images:?}: {h}");
        }
    }
    let out = common::run(
        Command::new(env!("CARGO_BIN_EXE_clang-offload-packager")).arg0("clang-offload-packager").arg("--compat=17"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "clang-offload-packager: for the --compat option: Cannot find option named '17'!\n"
    );
}
