//! The `offload` command line's conventions: completions and man pages
//! generated from the clap definition, and colour only where asked.

use std::path::PathBuf;
use std::process::{Command, Output};

const COMMANDS: [&str; 12] =
    ["list", "select", "extract", "verify", "prune", "split", "gpus", "size", "diff", "check", "completions", "man"];

fn offload(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_offload"));
    c.args(args).env_remove("NO_COLOR");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn libscale() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inspect/libscale.so");
    p.to_string_lossy().into_owned()
}

#[test]
fn completions_know_every_command() {
    let o = offload(&["completions", "bash"], &[]);
    assert!(o.status.success());
    let script = stdout(&o);
    assert!(script.contains("complete -F _offload"), "{script}");
    for command in COMMANDS {
        assert!(script.contains(&format!("offload__subcmd__{command}")), "bash completion lacks {command}");
    }
    assert!(script.contains("--target-id") && script.contains("--keep-gpu"), "options are completed");
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let o = offload(&["completions", shell], &[]);
        assert!(o.status.success() && stdout(&o).contains("extract"), "{shell}");
    }
    // An unknown shell (tcsh): cli/cases/completions-unknown-shell.case.
}

#[test]
fn the_man_page_renders_every_command() {
    let o = offload(&["man"], &[]);
    assert!(o.status.success());
    let page = stdout(&o);
    assert!(page.contains(".TH offload 1"), "{page}");
    for command in COMMANDS {
        assert!(page.contains(&format!("offload\\-{command}")), "offload.1 lacks {command}");
    }
    let dir = tempfile::tempdir().unwrap();
    let o = offload(&["man", "--output-dir", dir.path().to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for command in COMMANDS {
        let sub = std::fs::read_to_string(dir.path().join(format!("offload-{command}.1"))).unwrap();
        assert!(sub.contains(&format!(".TH offload-{command} 1  \"offload (offload-binutils) ")), "{command}: {sub}");
    }
    let extract = std::fs::read_to_string(dir.path().join("offload-extract.1")).unwrap();
    assert!(extract.contains("target\\-id"), "{extract}");
    // Every page has examples and says what its exit status means (issue 28).
    for name in COMMANDS.iter().map(|c| format!("offload-{c}.1")).chain(["offload.1".to_string()]) {
        let text = std::fs::read_to_string(dir.path().join(&name)).unwrap();
        assert!(text.contains("\n.SH EXAMPLES\n"), "{name} has no EXAMPLES section");
        assert!(text.contains("\n.SH \"EXIT STATUS\"\n"), "{name} has no EXIT STATUS section");
    }
    assert!(page.contains("\n.SH EXAMPLES\n") && page.contains("\n.SH \"EXIT STATUS\"\n"), "{page}");
    // A folder that does not exist: an I/O error (2), nothing half-written.
    let missing = dir.path().join("no/such/dir");
    assert_eq!(offload(&["man", "--output-dir", missing.to_str().unwrap()], &[]).status.code(), Some(2));
}

#[test]
fn colour_only_when_asked_and_never_in_json() {
    let f = libscale();
    let select = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["select", "--gpu", "gfx90a:sramecc+:xnack+"];
        args.extend_from_slice(extra);
        args.push(&f);
        let o = offload(&args, env);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        stdout(&o)
    };
    let plain = select(&[], &[]);
    assert!(!plain.contains('\x1b'), "not a terminal: no colour");
    let coloured = select(&["--color", "always"], &[]);
    assert!(coloured.contains("\x1b[32mselected\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[1;31mrejected\x1b[0m"), "{coloured}");
    assert_eq!(coloured.replace("\x1b[32m", "").replace("\x1b[1;31m", "").replace("\x1b[0m", ""), plain);
    // An explicit --color always wins over NO_COLOR; auto does not colour.
    assert!(select(&["--color", "always"], &[("NO_COLOR", "1")]).contains('\x1b'));
    assert!(!select(&["--color", "auto"], &[("NO_COLOR", "1")]).contains('\x1b'));
    assert!(!select(&["--color", "always", "--json"], &[]).contains('\x1b'));
    let o = offload(&["verify", "--color=always", &f], &[]);
    assert!(stdout(&o).contains("\x1b[32mOK\x1b[0m"), "{}", stdout(&o));
}

const SIGPIPE: i32 = 13; // Linux

/// `offload list FILE | head -1`: the reader goes away before `offload`
/// writes; the process must end the way `cat` does (SIGPIPE), not with a
/// panic message from a failed `println!`.
#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_offload"))
        .args(["list", &libscale()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(o.status.success() || o.status.signal() == Some(SIGPIPE), "{:?}: {err}", o.status);
}
