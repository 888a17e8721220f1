//! Running LLVM's tool and ours side by side on the same command line.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A small deterministic generator (splitmix64), so failures reproduce.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

pub struct Run {
    pub code: Option<i32>,
    pub stderr: String,
    pub stdout: Vec<u8>,
}

pub fn run_tool(tool: &Path, args: &[String], dir: &Path) -> Run {
    run_tool_env(tool, args, &[], dir)
}

/// Runs `tool` with extra environment variables (and without any
/// OFFLOAD_BUNDLER_* or COMPRESSED_* variables inherited from the caller).
pub fn run_tool_env(tool: &Path, args: &[String], env: &[(&str, &str)], dir: &Path) -> Run {
    let mut cmd = Command::new(tool);
    for (k, _) in std::env::vars() {
        if k.starts_with("OFFLOAD_BUNDLER_") || k.starts_with("COMPRESSED_BUNDLE") {
            cmd.env_remove(k);
        }
    }
    let out = super::run(cmd.args(args).envs(env.iter().copied()).current_dir(dir));
    let argv0 = tool.to_string_lossy();
    Run {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).replace(argv0.as_ref(), "<argv0>"),
        stdout: out.stdout,
    }
}

/// Runs both tools in separate directories prepared by `setup`, returns
/// their results and directories.
pub fn both(
    llvm: &Path,
    ours: &Path,
    args: &[String],
    setup: &dyn Fn(&Path),
) -> (Run, Run, PathBuf, PathBuf, tempfile::TempDir) {
    both_env(llvm, ours, args, &[], setup)
}

/// [`both`] with extra environment variables for both tools.
pub fn both_env(
    llvm: &Path,
    ours: &Path,
    args: &[String],
    env: &[(&str, &str)],
    setup: &dyn Fn(&Path),
) -> (Run, Run, PathBuf, PathBuf, tempfile::TempDir) {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("llvm"), root.path().join("ours"));
    for d in [&a, &b] {
        fs::create_dir_all(d).unwrap();
        setup(d);
    }
    (run_tool_env(llvm, args, env, &a), run_tool_env(ours, args, env, &b), a, b, root)
}

pub fn assert_same_bytes(what: &str, llvm: &[u8], ours: &[u8]) {
    if llvm != ours {
        let at = llvm.iter().zip(ours).position(|(a, b)| a != b).unwrap_or(llvm.len().min(ours.len()));
        panic!(
            "{what}: bytes differ at offset {at} (LLVM {} bytes, ours {} bytes)\nLLVM: {:?}\nours: {:?}",
            llvm.len(),
            ours.len(),
            String::from_utf8_lossy(&llvm[at.saturating_sub(40)..llvm.len().min(at + 40)]),
            String::from_utf8_lossy(&ours[at.saturating_sub(40)..ours.len().min(at + 40)]),
        );
    }
}

pub fn assert_same_run(what: &str, l: &Run, o: &Run) {
    assert_eq!(l.code, o.code, "{what}: exit codes differ; LLVM said {:?}, we said {:?}", l.stderr, o.stderr);
    assert_eq!(l.stderr, o.stderr, "{what}: messages differ");
    assert_eq!(l.stdout, o.stdout, "{what}: standard output differs");
}
