//! Golden fixtures made by LLVM's own bundler (see
//! `tests/fixtures/bundler/COMMANDS.md`): byte compatibility checked
//! without LLVM installed.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const OURS: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");

struct Case {
    name: String,
    llvm: u32,
    args: Vec<String>,
}

fn dir() -> PathBuf {
    common::fixtures().join("bundler")
}

fn cases() -> Vec<Case> {
    let text = fs::read_to_string(dir().join("cases.tsv")).unwrap();
    text.lines()
        .map(|l| {
            let mut f = l.split('\t');
            let name = f.next().unwrap().to_string();
            let llvm = f.next().unwrap().parse().unwrap();
            let args = f.next().unwrap().split(' ').map(String::from).collect();
            Case { name, llvm, args }
        })
        .collect()
}

fn ours(args: &[String], cwd: &Path) -> (bool, Vec<u8>, String) {
    let out = common::run(Command::new(OURS).args(args).current_dir(cwd));
    (out.status.success(), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn arg(args: &[String], key: &str) -> String {
    args.iter().find_map(|a| a.strip_prefix(key)).unwrap_or_default().to_string()
}

/// Targets and input files of a case, whichever option spelling it used.
fn targets_and_inputs(c: &Case) -> (Vec<String>, Vec<String>) {
    let targets = arg(&c.args, "-targets=").split(',').map(String::from).collect();
    let mut inputs: Vec<String> = c.args.iter().filter_map(|a| a.strip_prefix("-input=")).map(String::from).collect();
    if inputs.is_empty() {
        inputs = arg(&c.args, "-inputs=").split(',').map(String::from).collect();
    }
    (targets, inputs)
}

#[test]
fn our_bundles_equal_llvm19s() {
    let work = tempfile::tempdir().unwrap();
    let mut n = 0;
    for c in cases().iter().filter(|c| c.llvm == 19) {
        let mut args = c.args.clone();
        args.push(format!("-output={}", work.path().join(&c.name).display()));
        let (ok, _, err) = ours(&args, &dir());
        assert!(ok, "{}: {err}", c.name);
        let want = fs::read(dir().join(format!("{}.out", c.name))).unwrap();
        assert_eq!(fs::read(work.path().join(&c.name)).unwrap(), want, "{}: bytes differ", c.name);
        n += 1;
    }
    assert!(n >= 10);
}

#[test]
fn listings_equal_llvm19s() {
    for c in cases() {
        let ty = arg(&c.args, "-type=");
        let args = vec![format!("-type={ty}"), "-list".into(), format!("-input={}.out", c.name)];
        let (ok, stdout, err) = ours(&args, &dir());
        assert!(ok, "{}: {err}", c.name);
        let want = fs::read(dir().join(format!("{}.list", c.name))).unwrap();
        assert_eq!(String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&want), "{}", c.name);
    }
}

/// Every entry comes back out, including the host of bundles LLVM 14 wrote
/// (requested with the ID LLVM 14 wrote; LLVM 19 cannot do this).
#[test]
fn every_entry_unbundles_to_its_input() {
    let work = tempfile::tempdir().unwrap();
    for c in cases() {
        let (targets, inputs) = targets_and_inputs(&c);
        let ty = arg(&c.args, "-type=");
        let mut args = vec![
            format!("-type={ty}"),
            "-unbundle".into(),
            format!("-input={}.out", c.name),
            format!("-targets={}", targets.join(",")),
        ];
        let outs: Vec<PathBuf> = (0..targets.len()).map(|i| work.path().join(format!("{}.u{i}", c.name))).collect();
        args.extend(outs.iter().map(|o| format!("-output={}", o.display())));
        let (ok, _, err) = ours(&args, &dir());
        assert!(ok, "{}: {err}", c.name);
        for (o, input) in outs.iter().zip(&inputs) {
            assert_eq!(fs::read(o).unwrap(), fs::read(dir().join(input)).unwrap(), "{}: {}", c.name, o.display());
        }
    }
}

#[test]
fn hand_made_compressed_headers_are_read() {
    let work = tempfile::tempdir().unwrap();
    let spec = cases().into_iter().find(|c| c.name == "spec-3-1").unwrap();
    let (targets, inputs) = targets_and_inputs(&spec);
    for name in ["ccob-v1-zstd", "ccob-v1-zlib", "ccob-v2-zlib", "ccob-v3-zstd"] {
        let mut args = vec![
            "-type=bc".to_string(),
            "-unbundle".into(),
            format!("-input={name}.ccob"),
            format!("-targets={}", targets.join(",")),
        ];
        let outs: Vec<PathBuf> = (0..targets.len()).map(|i| work.path().join(format!("{name}.u{i}"))).collect();
        args.extend(outs.iter().map(|o| format!("-output={}", o.display())));
        let (ok, _, err) = ours(&args, &dir());
        assert!(ok, "{name}: {err}");
        for (o, input) in outs.iter().zip(&inputs) {
            assert_eq!(fs::read(o).unwrap(), fs::read(dir().join(input)).unwrap(), "{name}");
        }
        let (ok, stdout, _) = ours(&["-type=bc".into(), "-list".into(), format!("-input={name}.ccob")], &dir());
        assert!(ok);
        assert_eq!(stdout, fs::read(dir().join("spec-3-1.list")).unwrap(), "{name}");
    }
}
