//! Helpers shared by the clang-offload-wrapper tests: the fixture cases and
//! running our binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One line of `fixtures/wrapper/cases.txt`.
pub struct Case {
    pub name: String,
    pub triple: String,
    pub images: Vec<PathBuf>,
}

pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wrapper")
}

pub fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("cases.txt")).expect("cases.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next().unwrap().to_string();
            let triple = f.next().unwrap().to_string();
            let images = f.map(|i| dir().join("inputs").join(i)).collect();
            Case { name, triple, images }
        })
        .collect()
}

/// The expected `llvm-dis` text of a fixture (first line `; ModuleID = '<stdin>'`).
pub fn expected(name: &str) -> String {
    std::fs::read_to_string(dir().join(format!("{name}.ll"))).unwrap_or_else(|e| panic!("{name}.ll: {e}"))
}

/// The text without its `; ModuleID` line (which names the file read).
pub fn body(ll: &str) -> &str {
    match ll.strip_prefix("; ModuleID = ") {
        Some(rest) => rest.split_once('\n').map_or("", |(_, b)| b),
        None => ll,
    }
}

pub fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_clang-offload-wrapper")
}

/// Runs our wrapper with `args`.
pub fn run_ours(args: &[&str]) -> Output {
    Command::new(ours()).args(args).output().expect("run clang-offload-wrapper")
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
