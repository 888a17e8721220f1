//! The command line: `offload <command> [options] FILE...`, with ordinary
//! `--long` options (`--opt=value` or `--opt value`).

use offload_format::inspect::select::{Gpu, Runtime};

pub const USAGE: &str = "\
usage: offload <command> [options] FILE...

Finds the GPU code objects in any file: raw bundles (binary, text,
compressed), OffloadBinary packages, ELF/COFF/Mach-O objects, executables
and shared libraries, archives, bitcode, and any nesting of these; also
inside packages (zip, wheel, tar[.gz|.xz|.zst|.bz2], deb, conda) and
folders, without unpacking them.

commands:
  list FILE...                       one row per code object (headers only)
  select --gpu GPU FILE...           the code object a runtime loads on GPU,
                                     and why each other one is not loaded
  extract FILTER... [-o FILE | --output-dir DIR] FILE
                                     write code objects to files
  verify FILE...                     deep structural check of every payload
  prune --keep T[,T...] IN -o OUT    drop the device code of other GPU targets
                                     from a HIP host binary (README: offload prune)
  size [--keep T[,T...]] PATH...     bytes per target and offload kind, and what
                                     prune --keep would save
  diff A B                           code objects added, removed and changed
                                     (exit 0 identical, 1 different)
  gpus [--sysfs-root DIR]            the GPUs of this machine, as the runtimes
                                     will ask for code (README: offload gpus)

options:
  --json               machine-readable output (schema in the README)
  --gpu GPU            a target ID: gfx90a:xnack+, gfx950:sramecc+:xnack-,
                       amdgcn-amd-amdhsa--gfx906, fiji, sm_80 (also
                       compute_80, 8.0); a gfx name missing from the
                       processor table is matched as given
  --kind hip|openmp|cuda
                       the runtime that loads the code (default hip; cuda
                       for an NVIDIA GPU)
  extract filters (any number, combined with 'or'):
    --all  --id ID  --target-id TARGET-ID  --index N  --gpu GPU
  -o, --output FILE    extract: the file to write (exactly one match)
  --output-dir DIR     extract: where to write (default .)
  -h, --help           this text;   --version   the version

exit status: 0 success; 1 nothing found, nothing loadable, verify found
errors, or a file could not be read; 2 bad command line.
";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    All,
    Id(String),
    TargetId(String),
    Index(usize),
    Gpu,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    List {
        json: bool,
        files: Vec<String>,
    },
    Select {
        gpu: Gpu,
        runtime: Runtime,
        json: bool,
        files: Vec<String>,
    },
    Extract {
        filters: Vec<Filter>,
        gpu: Option<Gpu>,
        runtime: Runtime,
        output: Option<String>,
        dir: Option<String>,
        json: bool,
        file: String,
    },
    Verify {
        json: bool,
        files: Vec<String>,
    },
    Prune(PruneArgs),
    Size {
        keep: Vec<String>,
        json: bool,
        paths: Vec<String>,
    },
    Diff {
        json: bool,
        a: String,
        b: String,
    },
    Gpus {
        sysfs_root: Option<String>,
        json: bool,
    },
    Help,
    Version,
}

/// `offload prune`'s options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneArgs {
    pub keep: Vec<String>,
    pub drop: Vec<String>,
    pub keep_gpu: Vec<Gpu>,
    pub allow_empty: bool,
    pub dry_run: bool,
    pub json: bool,
    pub verify: bool,
    /// `--mode cut`: parsed, refused by the command (not implemented yet).
    pub cut: bool,
    pub input: String,
    pub output: Option<String>,
}

/// Parses `prune`'s arguments; targets are checked by the command.
fn parse_prune(rest: &[String]) -> Result<Command, String> {
    let mut args = Args { items: rest.iter() };
    let mut p = PruneArgs { verify: true, ..Default::default() };
    let mut files = Vec::new();
    let list = |v: String| v.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect::<Vec<_>>();
    while let Some(arg) = args.items.next() {
        if arg == "-" || !arg.starts_with('-') {
            files.push(arg.clone());
            continue;
        }
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (arg.as_str(), None),
        };
        let flag = inline.is_none();
        match opt {
            "-h" | "--help" => return Ok(Command::Help),
            "--keep" => p.keep.extend(list(args.value(opt, inline)?)),
            "--drop" => p.drop.extend(list(args.value(opt, inline)?)),
            "--keep-gpu" => p.keep_gpu.push(parse_gpu(&args.value(opt, inline)?)?),
            "--mode" => match args.value(opt, inline)?.as_str() {
                "zero" => {}
                "cut" => p.cut = true,
                m => return Err(format!("--mode: '{m}' is not zero or cut")),
            },
            "--allow-empty" if flag => p.allow_empty = true,
            "--dry-run" if flag => p.dry_run = true,
            "--json" if flag => p.json = true,
            "--no-verify" if flag => p.verify = false,
            "-o" | "--output" => p.output = Some(args.value(opt, inline)?),
            _ => return Err(format!("unknown option '{arg}' for 'prune'")),
        }
    }
    if p.keep.is_empty() && p.drop.is_empty() && p.keep_gpu.is_empty() {
        return Err("'prune' needs --keep, --keep-gpu or --drop".into());
    }
    let [input] = files.as_slice() else { return Err("'prune' takes exactly one input file".into()) };
    p.input = input.clone();
    if p.output.is_none() && !p.dry_run {
        return Err("'prune' needs -o OUT (or --dry-run)".into());
    }
    Ok(Command::Prune(p))
}

/// Parses `size [--keep T[,T...]] [--json] PATH...` and `diff [--json] A B`.
fn parse_size_diff(command: &str, rest: &[String]) -> Result<Command, String> {
    let mut args = Args { items: rest.iter() };
    let (mut json, mut keep, mut paths) = (false, Vec::new(), Vec::new());
    while let Some(arg) = args.items.next() {
        if arg == "-" || !arg.starts_with('-') {
            paths.push(arg.clone());
            continue;
        }
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (arg.as_str(), None),
        };
        match opt {
            "-h" | "--help" => return Ok(Command::Help),
            "--json" if inline.is_none() => json = true,
            "--keep" if command == "size" => {
                keep.extend(args.value(opt, inline)?.split(',').filter(|t| !t.is_empty()).map(str::to_string))
            }
            _ => return Err(format!("unknown option '{arg}' for '{command}'")),
        }
    }
    if command == "size" {
        if paths.is_empty() {
            return Err("'size' needs at least one path".into());
        }
        return Ok(Command::Size { keep, json, paths });
    }
    let [a, b] = paths.as_slice() else { return Err("'diff' takes exactly two paths, A and B".into()) };
    Ok(Command::Diff { json, a: a.clone(), b: b.clone() })
}

/// Parses `gpus [--sysfs-root DIR] [--json]`.
fn parse_gpus(rest: &[String]) -> Result<Command, String> {
    let mut args = Args { items: rest.iter() };
    let (mut sysfs_root, mut json) = (None, false);
    while let Some(arg) = args.items.next() {
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (arg.as_str(), None),
        };
        match opt {
            "-h" | "--help" => return Ok(Command::Help),
            "--json" if inline.is_none() => json = true,
            "--sysfs-root" => sysfs_root = Some(args.value(opt, inline)?),
            _ => return Err(format!("unknown argument '{arg}' for 'gpus'")),
        }
    }
    Ok(Command::Gpus { sysfs_root, json })
}

/// Splits `--opt=value`, and takes the value of `--opt value` from `rest`.
struct Args<'a> {
    items: std::slice::Iter<'a, String>,
}

impl<'a> Args<'a> {
    fn value(&mut self, opt: &str, inline: Option<&'a str>) -> Result<String, String> {
        match inline {
            Some(v) => Ok(v.to_string()),
            None => self.items.next().cloned().ok_or_else(|| format!("option '{opt}' needs a value")),
        }
    }
}

fn parse_gpu(text: &str) -> Result<Gpu, String> {
    Gpu::parse(text).map_err(|e| format!("--gpu: {e}"))
}

/// The warning to print before running `command`: its GPU's processor is
/// not in the processor table (the run goes on, matching it as given).
pub fn gpu_warning(command: &Command) -> Option<String> {
    match command {
        Command::Select { gpu, .. } | Command::Extract { gpu: Some(gpu), .. } => {
            gpu.warning().map(|w| format!("--gpu: {w}"))
        }
        _ => None,
    }
}

/// Parses the arguments after the program name.
pub fn parse(argv: &[String]) -> Result<Command, String> {
    let Some((command, rest)) = argv.split_first() else {
        return Err("no command given".into());
    };
    match command.as_str() {
        "-h" | "--help" | "help" => return Ok(Command::Help),
        "--version" => return Ok(Command::Version),
        "list" | "select" | "extract" | "verify" => {}
        "prune" => return parse_prune(rest),
        "size" | "diff" => return parse_size_diff(command, rest),
        "gpus" => return parse_gpus(rest),
        other => return Err(format!("unknown command '{other}'")),
    }
    let mut args = Args { items: rest.iter() };
    let (mut json, mut files, mut filters) = (false, Vec::new(), Vec::new());
    let (mut gpu, mut runtime, mut output, mut dir) = (None, None, None, None);
    let mut only_files = false;
    while let Some(arg) = args.items.next() {
        if only_files || arg == "-" || !arg.starts_with('-') {
            files.push(arg.clone());
            continue;
        }
        let (opt, inline) = match arg.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o, Some(v)),
            _ => (arg.as_str(), None),
        };
        let extract = command == "extract";
        match opt {
            "--" => only_files = true,
            "-h" | "--help" => return Ok(Command::Help),
            "--json" if inline.is_none() => json = true,
            "--gpu" if command == "select" || extract => {
                gpu = Some(parse_gpu(&args.value(opt, inline)?)?);
                if extract {
                    filters.push(Filter::Gpu);
                }
            }
            "--kind" if command == "select" || extract => {
                let v = args.value(opt, inline)?;
                runtime = Some(Runtime::parse(&v).ok_or_else(|| format!("--kind: '{v}' is not hip, openmp or cuda"))?);
            }
            "--all" if extract && inline.is_none() => filters.push(Filter::All),
            "--id" if extract => filters.push(Filter::Id(args.value(opt, inline)?)),
            "--target-id" if extract => filters.push(Filter::TargetId(args.value(opt, inline)?)),
            "--index" if extract => {
                let v = args.value(opt, inline)?;
                filters.push(Filter::Index(v.parse().map_err(|_| format!("--index: '{v}' is not a number"))?));
            }
            "-o" | "--output" if extract => output = Some(args.value(opt, inline)?),
            "--output-dir" if extract => dir = Some(args.value(opt, inline)?),
            _ => return Err(format!("unknown option '{arg}' for '{command}'")),
        }
    }
    if files.is_empty() {
        return Err(format!("'{command}' needs at least one file"));
    }
    let runtime_given = runtime.is_some();
    // An NVIDIA GPU is served by the CUDA driver unless --kind says otherwise.
    let runtime =
        runtime.unwrap_or(if gpu.as_ref().is_some_and(|g| g.arch == "nvptx64") { Runtime::Cuda } else { Runtime::Hip });
    Ok(match command.as_str() {
        "list" => Command::List { json, files },
        "verify" => Command::Verify { json, files },
        "select" => {
            let gpu = gpu.ok_or("'select' needs --gpu")?;
            Command::Select { gpu, runtime, json, files }
        }
        _ => {
            if files.len() != 1 {
                return Err("'extract' takes exactly one file".into());
            }
            if filters.is_empty() {
                return Err("'extract' needs a filter: --all, --id, --target-id, --index or --gpu".into());
            }
            if output.is_some() && dir.is_some() {
                return Err("--output and --output-dir cannot be used together".into());
            }
            if runtime_given && gpu.is_none() {
                return Err("--kind only applies with --gpu".into());
            }
            Command::Extract { filters, gpu, runtime, output, dir, json, file: files.remove(0) }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Command, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn commands_and_options() {
        assert_eq!(
            p(&["list", "a", "--json", "b"]).unwrap(),
            Command::List { json: true, files: vec!["a".into(), "b".into()] }
        );
        let Command::Select { gpu, runtime, .. } =
            p(&["select", "--gpu=gfx90a:xnack+", "--kind", "openmp", "f"]).unwrap()
        else {
            panic!()
        };
        assert_eq!((gpu.target_id().as_str(), runtime), ("gfx90a:xnack+", Runtime::OpenMp));
        let Command::Extract { filters, output, .. } =
            p(&["extract", "--id", "x", "--index=3", "--all", "-o", "out", "f"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(filters, [Filter::Id("x".into()), Filter::Index(3), Filter::All]);
        assert_eq!(output.as_deref(), Some("out"));
        assert_eq!(p(&["--help"]).unwrap(), Command::Help);
        assert_eq!(p(&["list", "--", "--json"]).unwrap(), Command::List { json: false, files: vec!["--json".into()] });
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
        assert!(p(&[]).is_err());
        assert!(p(&["lsit", "f"]).is_err());
        assert!(p(&["list"]).is_err());
        assert!(p(&["list", "--gpu", "gfx906", "f"]).is_err());
        assert!(p(&["select", "f"]).unwrap_err().contains("--gpu"));
        assert!(p(&["select", "--gpu", "banana", "f"]).unwrap_err().contains("--gpu"));
        assert!(p(&["select", "--gpu", "gfx90a:xnack", "f"]).unwrap_err().contains("--gpu"));
        assert!(p(&["select", "--gpu", "gfx9-4-generic", "f"]).unwrap_err().contains("generic"));
        assert!(p(&["select", "--gpu"]).is_err());
        assert!(p(&["extract", "f"]).unwrap_err().contains("filter"));
        assert!(p(&["extract", "--all", "f", "g"]).is_err());
        assert!(p(&["extract", "--index", "x", "f"]).is_err());
        assert!(p(&["extract", "--all", "--kind", "hip", "f"]).is_err());
        assert!(p(&["list", "--json=1", "f"]).is_err());
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
        assert!(p(&["select", "--gpu", "sm_90a", "f"]).unwrap_err().contains("suffix"));
        assert!(p(&["select", "--gpu", "sm_80", "--kind", "opencl", "f"]).unwrap_err().contains("cuda"));
    }
}
