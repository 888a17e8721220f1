use super::*;
use clap::CommandFactory;
use clap::error::ErrorKind;

fn p(args: &[&str]) -> Result<Command, clap::Error> {
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
    assert_eq!(
        p(&["list", "a", "--json", "b"]).unwrap(),
        Command::List { json: true, uri: false, files: vec!["a".into(), "b".into()] }
    );
    let Command::Select { gpu, runtime, .. } = p(&["select", "--gpu=gfx90a:xnack+", "--kind", "openmp", "f"]).unwrap()
    else {
        panic!()
    };
    assert_eq!((gpu.target_id().as_str(), runtime), ("gfx90a:xnack+", Runtime::OpenMp));
    let Command::Extract { filters, output, .. } =
        p(&["extract", "--id", "x", "--index=3", "--all", "-o", "out", "f"]).unwrap()
    else {
        panic!()
    };
    assert_eq!(filters, [Filter::All, Filter::Id("x".into()), Filter::Index(3)]);
    assert_eq!(output.as_deref(), Some("out"));
    assert_eq!(
        p(&["list", "--", "--json"]).unwrap(),
        Command::List { json: false, uri: false, files: vec!["--json".into()] }
    );
    assert_eq!(p(&["list", "-"]).unwrap(), Command::List { json: false, uri: false, files: vec!["-".into()] });
    let (_, color) = parse(["offload", "list", "--color", "never", "f"]).unwrap();
    assert_eq!(color, ColorChoice::Never);
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
    let Command::Prune(a) =
        p(&["prune", "--keep", "gfx906,,gfx90a", "--keep=gfx942", "--mode", "cut", "--no-verify", "in", "-o", "out"])
            .unwrap()
    else {
        panic!()
    };
    assert_eq!(a.keep, ["gfx906", "gfx90a", "gfx942"]);
    assert!(a.cut && !a.verify && !a.dry_run);
    assert_eq!((a.input.as_str(), a.output.as_deref()), ("in", Some("out")));
    let Command::Prune(a) = p(&["prune", "--drop", "gfx906", "--dry-run", "in"]).unwrap() else { panic!() };
    assert!(a.dry_run && a.verify && a.output.is_none());
    assert!(err(&["prune", "in", "-o", "x"]).contains("--keep"));
    err(&["prune", "--keep", "gfx906", "in"]);
    err(&["prune", "--keep", "gfx906", "--mode", "fast", "in", "-o", "x"]);
    err(&["prune", "--keep-gpu", "gfx9-generic", "in", "-o", "x"]);
    err(&["prune", "--keep", "gfx906", "a", "b", "-o", "x"]);
}

#[test]
fn new_commands_follow_the_contract() {
    assert_eq!(
        p(&["size", "--keep", "gfx906,gfx90a", "--json", "a", "b"]).unwrap(),
        Command::Size { paths: vec!["a".into(), "b".into()], keep: vec!["gfx906".into(), "gfx90a".into()], json: true }
    );
    assert_eq!(p(&["diff", "a", "b"]).unwrap(), Command::Diff { a: "a".into(), b: "b".into(), json: false });
    assert_eq!(
        p(&["gpus", "--sysfs-root", "/x", "--json"]).unwrap(),
        Command::Gpus { sysfs_root: Some("/x".into()), json: true }
    );
    err(&["diff", "a"]);
    err(&["size"]);
}

#[test]
fn gpus_missing_from_the_table_are_warnings() {
    let known = p(&["select", "--gpu", "gfx950:sramecc+:xnack-", "f"]).unwrap();
    assert_eq!(gpu_warning(&known), None);
    let unknown = p(&["select", "--gpu", "gfx9999:xnack+", "f"]).unwrap();
    let w = gpu_warning(&unknown).unwrap();
    assert!(w.starts_with("--gpu: processor 'gfx9999' is not in this tool's processor table"), "{w}");
    let extract = p(&["extract", "--gpu", "gfx9999", "f"]).unwrap();
    assert!(gpu_warning(&extract).is_some());
    assert_eq!(gpu_warning(&p(&["extract", "--all", "f"]).unwrap()), None);
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
        let Command::Select { runtime, .. } = p(&args).unwrap() else { panic!("{args:?}") };
        assert_eq!(runtime, want, "{args:?}");
    }
    assert!(err(&["select", "--gpu", "sm_90a", "f"]).contains("suffix"));
    assert!(err(&["select", "--gpu", "sm_80", "--kind", "opencl", "f"]).contains("cuda"));
}
