//! Every example of README.md and docs/**/*.md is run: a ```` ```console ````
//! block holds command lines starting with `$ ` and, below each, what it
//! prints: its standard output, then its standard error (a terminal
//! shows a table before the error that follows it; through a pipe the
//! order of the two streams would depend on buffering). The commands run with `sh`
//! in the repository root, with this build's binaries first on `PATH`, so
//! an example reads exactly as a user pastes it.
//!
//! An example that needs files the repository does not ship says so in
//! its info string, ```` ```console skip: needs the real corpus ````; the
//! test lists those it skipped, with the reason, and a block that runs a
//! tool of this project outside a `console` block is an error, so no
//! example escapes the test by its fence.
//!
//! `BLESS=1 cargo test -p offload-cli --test cli docs_examples` rewrites the
//! outputs in the Markdown files from what the commands print; review the
//! diff before committing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// README.md and every Markdown file under docs/, sorted.
fn pages(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut out);
    out
}

/// The project's commands: a `$ ` line starting with one of these outside
/// a console block is an example nobody runs.
const TOOLS: [&str; 5] =
    ["offload ", "clang-offload-bundler ", "clang-offload-packager ", "llvm-offload-binary ", "clang-offload-wrapper "];

/// One command of a console block and the output lines below it.
struct Step {
    /// Line number (from 1) of the `$ ` line.
    line: usize,
    command: String,
    /// Index of the first output line in the page's lines, and how many.
    output: (usize, usize),
}

struct Block {
    line: usize,
    skip: Option<String>,
    steps: Vec<Step>,
}

/// The console blocks of a page, and the misplaced examples found.
fn blocks(lines: &[&str], page: &str, problems: &mut Vec<String>) -> Vec<Block> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(info) = lines[i].trim_start().strip_prefix("```") else {
            i += 1;
            continue;
        };
        let info = info.trim();
        let start = i;
        let mut end = i + 1;
        while end < lines.len() && !lines[end].trim_start().starts_with("```") {
            end += 1;
        }
        let body = start + 1..end;
        if let Some(rest) = info.strip_prefix("console") {
            let rest = rest.trim();
            let skip = match rest.strip_prefix("skip:") {
                Some(reason) if !reason.trim().is_empty() => Some(reason.trim().to_string()),
                _ if rest.is_empty() => None,
                _ => {
                    problems.push(format!(
                        "{page}:{}: console block info {info:?}: expected `console` or `console skip: REASON`",
                        start + 1
                    ));
                    None
                }
            };
            let mut steps: Vec<Step> = Vec::new();
            for j in body {
                if let Some(cmd) = lines[j].strip_prefix("$ ") {
                    steps.push(Step { line: j + 1, command: cmd.to_string(), output: (j + 1, 0) });
                } else if let Some(s) = steps.last_mut() {
                    s.output.1 += 1;
                } else {
                    problems.push(format!("{page}:{}: console block output before its first `$ ` line", j + 1));
                }
            }
            out.push(Block { line: start + 1, skip, steps });
        } else {
            for j in body {
                if let Some(cmd) = lines[j].strip_prefix("$ ")
                    && TOOLS.iter().any(|t| cmd.starts_with(t))
                {
                    problems.push(format!(
                        "{page}:{}: `$ {cmd}` is in a ```{info} block: write examples in ```console blocks (the tests run them)",
                        j + 1
                    ));
                }
            }
        }
        i = end + 1;
    }
    out
}

/// Runs one command line as a user would: its standard output, then its
/// standard error.
fn run(root: &Path, bin_dir: &Path, command: &str) -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin_dir.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(root);
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    for var in ["NO_COLOR", "CLICOLOR_FORCE", "OFFLOAD_SYSFS_ROOT", "HSA_XNACK", "HSA_OVERRIDE_GFX_VERSION", "COLUMNS"]
    {
        cmd.env_remove(var);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run sh: {e}"));
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    text
}

#[test]
fn docs_examples() {
    let bless = ["BLESS", "OFFLOAD_BLESS"].iter().any(|v| std::env::var_os(v).is_some_and(|v| v == "1"));
    let root = repo_root();
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_offload")).parent().unwrap().to_path_buf();
    let (mut problems, mut skipped, mut ran) = (Vec::new(), Vec::new(), 0);
    for page in pages(&root) {
        let name = page.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(&page).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Replacements of output line ranges, for BLESS.
        let mut fresh: Vec<((usize, usize), String)> = Vec::new();
        for block in blocks(&lines, &name, &mut problems) {
            if let Some(reason) = &block.skip {
                skipped.push(format!("{name}:{}: {reason}", block.line));
                continue;
            }
            if block.steps.is_empty() {
                problems.push(format!("{name}:{}: console block without a `$ ` line", block.line));
            }
            for step in &block.steps {
                ran += 1;
                let got = run(&root, &bin_dir, &step.command);
                let want: String =
                    lines[step.output.0..step.output.0 + step.output.1].iter().fold(String::new(), |mut s, l| {
                        let _ = writeln!(s, "{l}");
                        s
                    });
                if got != want {
                    if bless {
                        fresh.push((step.output, got));
                    } else {
                        problems.push(format!(
                            "{name}:{}: `{}` printed something else, {}",
                            step.line,
                            step.command,
                            crate::cases::first_difference(&want, &got)
                        ));
                    }
                }
            }
        }
        if bless && !fresh.is_empty() {
            let mut out = String::new();
            let mut i = 0;
            for ((start, len), got) in fresh {
                for l in &lines[i..start] {
                    let _ = writeln!(out, "{l}");
                }
                out.push_str(&got);
                if !got.is_empty() && !got.ends_with('\n') {
                    out.push('\n');
                }
                i = start + len;
            }
            for l in &lines[i..] {
                let _ = writeln!(out, "{l}");
            }
            std::fs::write(&page, out).unwrap();
        }
    }
    for s in &skipped {
        eprintln!("docs example skipped: {s}");
    }
    eprintln!("docs examples: {ran} commands run, {} blocks skipped", skipped.len());
    assert!(ran >= 5, "only {ran} documented commands found");
    assert!(
        problems.is_empty(),
        "{} documented examples fail (BLESS=1 rewrites the outputs):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
