use super::*;
use crate::commands::Sub;
use crate::commands::extract::Filter;
use crate::commands::prune::Mode;
use clap::CommandFactory;
use clap::error::ErrorKind;
use offload_inspect::select::Runtime;

fn p(args: &[&str]) -> Result<Sub, clap::Error> {
    parse(std::iter::once("offload").chain(args.iter().copied())).map(|(c, _)| c)
}

/// The message of a usage error (the test fails if `args` parse).
fn err(args: &[&str]) -> String {
    match p(args) {
        Ok(c) => panic!("{args:?} parsed: {c:?}"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
            e.to_string()
        }
    }
}

#[test]
fn the_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn commands_and_options() {
    let list = |args: &[&str]| match p(args).unwrap() {
        Sub::List(l) => l,
        other => panic!("{other:?}"),
    };
    let l = list(&["list", "a", "--json", "b"]);
    assert!(l.json && !l.uri && l.files == ["a", "b"]);
    let Sub::Select(s) = p(&["select", "--gpu=gfx90a:xnack+", "--kind", "openmp", "f"]).unwrap() else { panic!() };
    assert_eq!((s.gpu.target_id().as_str(), s.runtime()), ("gfx90a:xnack+", Runtime::OpenMp));
    let Sub::Extract(e) = p(&["extract", "--id", "x", "--index=3", "--all", "-o", "out", "f"]).unwrap() else {
        panic!()
    };
    assert_eq!(e.filters(), [Filter::All, Filter::Id("x".into()), Filter::Index(3)]);
    assert_eq!(e.output.as_deref(), Some("out"));
    let l = list(&["list", "--", "--json"]);
    assert!(!l.json && l.files == ["--json"]);
    assert_eq!(list(&["list", "-"]).files, ["-"]);
    let (_, g) = parse(["offload", "list", "--color", "never", "f"]).unwrap();
    assert_eq!((g.color, g.bytes), (ColorChoice::Never, false));
    let (_, g) = parse(["offload", "size", "f", "--bytes"]).unwrap();
    assert!(g.bytes);
}

#[test]
fn help_and_version_are_not_errors() {
    for args in [&["--help"][..], &["help"], &["list", "--help"], &["--version"]] {
        let e = p(args).unwrap_err();
        assert_eq!(e.exit_code(), 0, "{args:?}");
        assert!(matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion), "{args:?}");
    }
    assert!(p(&["--version"]).unwrap_err().to_string().contains("offload (offload-binutils) "));
}

#[test]
fn prune_options() {
    let Sub::Prune(a) =
        p(&["prune", "--keep", "gfx906,,gfx90a", "--keep=gfx942", "--mode", "cut", "--no-verify", "in", "-o", "out"])
            .unwrap()
    else {
        panic!()
    };
    let a = a.args();
    assert_eq!(a.keep, ["gfx906", "gfx90a", "gfx942"]);
    assert!(a.mode == Some(Mode::Cut) && !a.verify && !a.dry_run);
    assert_eq!((a.input.as_str(), a.output.as_deref()), ("in", Some("out")));
    let Sub::Prune(a) = p(&["prune", "--drop", "gfx906", "--dry-run", "in"]).unwrap() else { panic!() };
    let a = a.args();
    assert!(a.dry_run && a.verify && a.output.is_none());
    // No --mode: the smallest output the file allows, chosen per file.
    assert_eq!(a.mode, None);
    assert!(err(&["prune", "in", "-o", "x"]).contains("--keep"));
    err(&["prune", "--keep", "gfx906", "in"]);
    err(&["prune", "--keep", "gfx906", "--mode", "fast", "in", "-o", "x"]);
    err(&["prune", "--keep-gpu", "gfx9-generic", "in", "-o", "x"]);
    err(&["prune", "--keep", "gfx906", "a", "b", "-o", "x"]);
}

#[test]
fn replace_options() {
    let args = ["replace", "--entry", "gfx90a:xnack+", "--unit", "1", "--with", "co", "--no-verify", "in", "-o", "out"];
    let Sub::Replace(a) = p(&args).unwrap() else { panic!() };
    let a = a.args();
    assert_eq!((a.entry.as_str(), a.unit, a.with.as_str()), ("gfx90a:xnack+", Some(1), "co"));
    assert!(!a.verify && !a.dry_run && !a.json);
    assert_eq!((a.input.as_str(), a.output.as_deref()), ("in", Some("out")));
    let Sub::Replace(a) = p(&["replace", "--entry=gfx906", "--with=co", "--dry-run", "--json", "in"]).unwrap() else {
        panic!()
    };
    let a = a.args();
    assert!(a.dry_run && a.json && a.verify && a.unit.is_none() && a.output.is_none());
    assert!(err(&["replace", "--with", "co", "in", "-o", "x"]).contains("--entry"));
    assert!(err(&["replace", "--entry", "gfx906", "in", "-o", "x"]).contains("--with"));
    err(&["replace", "--entry", "gfx906", "--with", "co", "in"]);
    err(&["replace", "--entry", "gfx906", "--unit", "-1", "--with", "co", "in", "-o", "x"]);
}

#[test]
fn new_commands_follow_the_contract() {
    let Sub::Size(s) = p(&["size", "--keep", "gfx906,gfx90a", "--json", "a", "b"]).unwrap() else { panic!() };
    assert!(s.json && s.paths == ["a", "b"] && s.keep == ["gfx906", "gfx90a"]);
    let Sub::Diff(d) = p(&["diff", "a", "b"]).unwrap() else { panic!() };
    assert!(!d.json && (d.a.as_str(), d.b.as_str()) == ("a", "b"));
    let Sub::Gpus(g) = p(&["gpus", "--sysfs-root", "/x", "--json"]).unwrap() else { panic!() };
    assert!(g.json && g.sysfs_root.as_deref() == Some(std::path::Path::new("/x")));
    err(&["diff", "a"]);
    err(&["size"]);
}

#[test]
fn gpus_missing_from_the_table_are_warnings() {
    let known = p(&["select", "--gpu", "gfx950:sramecc+:xnack-", "f"]).unwrap();
    assert_eq!(known.gpu_warning(), None);
    let unknown = p(&["select", "--gpu", "gfx9999:xnack+", "f"]).unwrap();
    let w = unknown.gpu_warning().unwrap();
    assert!(w.starts_with("--gpu: processor 'gfx9999' is not in this tool's processor table"), "{w}");
    let extract = p(&["extract", "--gpu", "gfx9999", "f"]).unwrap();
    assert!(extract.gpu_warning().is_some());
    assert_eq!(p(&["extract", "--all", "f"]).unwrap().gpu_warning(), None);
}

#[test]
fn mistakes_are_usage_errors() {
    err(&[]);
    assert!(err(&["lsit", "f"]).contains("'list'"), "a typo suggests the command");
    err(&["list"]);
    err(&["list", "--gpu", "gfx906", "f"]);
    assert!(err(&["select", "f"]).contains("--gpu"));
    assert!(err(&["select", "--gpu", "banana", "f"]).contains("--gpu"));
    assert!(err(&["select", "--gpu", "gfx90a:xnack", "f"]).contains("--gpu"));
    assert!(err(&["select", "--gpu", "gfx9-4-generic", "f"]).contains("generic"));
    err(&["select", "--gpu"]);
    assert!(err(&["extract", "f"]).contains("--all"));
    err(&["extract", "--all", "f", "g"]);
    err(&["extract", "--index", "x", "f"]);
    err(&["extract", "--all", "--kind", "hip", "f"]);
    err(&["extract", "--all", "-o", "x", "--output-dir", "d", "f"]);
    err(&["list", "--json=1", "f"]);
    err(&["list", "--color", "sometimes", "f"]);
}

#[test]
fn nvidia_gpus_default_to_the_cuda_runtime() {
    for (gpu, kind, want) in [
        ("sm_80", None, Runtime::Cuda),
        ("8.6", None, Runtime::Cuda),
        ("compute_90", None, Runtime::Cuda),
        ("sm_80", Some("openmp"), Runtime::OpenMp),
        ("gfx906", None, Runtime::Hip),
    ] {
        let mut args = vec!["select", "--gpu", gpu];
        if let Some(k) = kind {
            args.extend(["--kind", k]);
        }
        args.push("f");
        let Sub::Select(s) = p(&args).unwrap() else { panic!("{args:?}") };
        assert_eq!(s.runtime(), want, "{args:?}");
    }
    assert!(err(&["select", "--gpu", "sm_90a", "f"]).contains("suffix"));
    assert!(err(&["select", "--gpu", "sm_80", "--kind", "opencl", "f"]).contains("cuda"));
}
