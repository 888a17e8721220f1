//! The data-driven command-line cases in `tests/cli/cases/`: each
//! `<name>.case` file names one command line, its expected exit status and
//! its environment; `<name>.stdout` and `<name>.stderr` beside it hold the
//! expected output (a missing file: no output). `BLESS=1 cargo test -p
//! offload-cli --test cli cases` rewrites the expected files (and the
//! status) from what the binaries print; review the diff before committing.
//!
//! A `.case` file, one `key: value` per line, `#` starting a comment:
//!
//! ```text
//! # What the case shows.
//! run: offload size fixtures/inspect/libscale.so
//! status: 0
//! env: HSA_XNACK=1
//! ```
//!
//! `run` starts with one of the crate's binaries (`offload`,
//! `clang-offload-bundler`, `clang-offload-packager`,
//! `clang-offload-wrapper`); its arguments are split at white space (no
//! quoting). Commands run in `crates/offload-cli/tests`, so paths read
//! `fixtures/...` and output names files the same way on every machine.
//! `status` defaults to 0; `env` may repeat. docs/development.md, section
//! Tests, says when a case fits better than a Rust test.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn cases_dir() -> PathBuf {
    tests_dir().join("cli/cases")
}

fn binary(name: &str) -> Option<&'static str> {
    Some(match name {
        "offload" => env!("CARGO_BIN_EXE_offload"),
        "clang-offload-bundler" => env!("CARGO_BIN_EXE_clang-offload-bundler"),
        "clang-offload-packager" => env!("CARGO_BIN_EXE_clang-offload-packager"),
        "clang-offload-wrapper" => env!("CARGO_BIN_EXE_clang-offload-wrapper"),
        _ => return None,
    })
}

/// One parsed `.case` file.
struct Case {
    run: Vec<String>,
    status: i32,
    env: Vec<(String, String)>,
}

fn parse(path: &Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let (mut run, mut status, mut env) = (None, 0, Vec::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("line {}: expected `key: value`, found {line:?}", n + 1));
        };
        let value = value.trim();
        match key.trim() {
            "run" => run = Some(value.split_whitespace().map(String::from).collect::<Vec<_>>()),
            "status" => status = value.parse().map_err(|_| format!("line {}: status {value:?}", n + 1))?,
            "env" => {
                let (k, v) = value.split_once('=').ok_or_else(|| format!("line {}: env needs KEY=VALUE", n + 1))?;
                env.push((k.to_string(), v.to_string()));
            }
            other => return Err(format!("line {}: unknown key {other:?}", n + 1)),
        }
    }
    let run = run.filter(|r| !r.is_empty()).ok_or("no `run:` line")?;
    Ok(Case { run, status, env })
}

/// Rewrites the `status:` line of a case file (adds one when missing).
fn bless_status(path: &Path, status: i32) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    let mut done = false;
    for line in text.lines() {
        if line.trim_start().starts_with("status:") {
            writeln!(out, "status: {status}").unwrap();
            done = true;
        } else {
            writeln!(out, "{line}").unwrap();
        }
    }
    if !done {
        writeln!(out, "status: {status}").unwrap();
    }
    std::fs::write(path, out).unwrap();
}

/// Writes `got` as the expected output, or removes the file when empty.
fn bless_output(path: &Path, got: &str) {
    if got.is_empty() {
        let _ = std::fs::remove_file(path);
    } else {
        std::fs::write(path, got).unwrap();
    }
}

/// Where two texts first differ, for the failure message.
pub(crate) fn first_difference(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    for i in 0..w.len().max(g.len()) {
        let (a, b) = (w.get(i), g.get(i));
        if a != b {
            return format!("line {}:\n    expected: {a:?}\n    got:      {b:?}", i + 1);
        }
    }
    "same lines, different line endings".into()
}

#[test]
fn cases() {
    let bless = ["BLESS", "OFFLOAD_BLESS"].iter().any(|v| std::env::var_os(v).is_some_and(|v| v == "1"));
    let dir = cases_dir();
    let mut names = BTreeSet::new();
    let mut failures = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        match path.extension().and_then(|e| e.to_str()) {
            Some("case") => {
                names.insert(name);
            }
            Some("stdout" | "stderr") if !dir.join(format!("{name}.case")).is_file() => {
                failures.push(format!("{}: no {name}.case beside it", path.display()));
            }
            _ => {}
        }
    }
    assert!(names.len() >= 10, "only {} cases in {}", names.len(), dir.display());
    for name in &names {
        let case_file = dir.join(format!("{name}.case"));
        let case = match parse(&case_file) {
            Ok(c) => c,
            Err(e) => {
                failures.push(format!("{}: {e}", case_file.display()));
                continue;
            }
        };
        let Some(exe) = binary(&case.run[0]) else {
            failures.push(format!("{name}: {:?} is not one of the crate's binaries", case.run[0]));
            continue;
        };
        let mut cmd = Command::new(exe);
        // Named as a shell would run it from PATH: messages that start with
        // the program name read the same on every machine.
        cmd.arg0(&case.run[0]).args(&case.run[1..]).current_dir(tests_dir());
        for var in ["NO_COLOR", "CLICOLOR_FORCE", "OFFLOAD_SYSFS_ROOT", "HSA_XNACK", "HSA_OVERRIDE_GFX_VERSION"] {
            cmd.env_remove(var);
        }
        cmd.envs(case.env.iter().map(|(k, v)| (k, v)));
        let out = cmd.output().unwrap_or_else(|e| panic!("{name}: cannot run {exe}: {e}"));
        let status = out.status.code().unwrap_or(-1);
        let got =
            [String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned()];
        if bless {
            if status != case.status {
                bless_status(&case_file, status);
            }
            for (stream, text) in ["stdout", "stderr"].iter().zip(&got) {
                bless_output(&dir.join(format!("{name}.{stream}")), text);
            }
            continue;
        }
        if status != case.status {
            failures.push(format!("{name}: exit status {status}, expected {} (stderr: {})", case.status, got[1]));
        }
        for (stream, text) in ["stdout", "stderr"].iter().zip(&got) {
            let file = dir.join(format!("{name}.{stream}"));
            let want = std::fs::read_to_string(&file).unwrap_or_default();
            if &want != text {
                failures.push(format!(
                    "{name}: {stream} differs from {}, {}",
                    file.display(),
                    first_difference(&want, text)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed (BLESS=1 rewrites the expected files):\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}
