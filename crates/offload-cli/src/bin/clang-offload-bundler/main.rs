//! Drop-in replacement for `clang-offload-bundler`: LLVM 22's by default,
//! LLVM 19's under the name `clang-offload-bundler-19` or with
//! `OFFLOAD_LLVM_VERSION=19` (`offload_format::llvm_release::follow`;
//! docs/llvm-releases.md lists what differs).

mod compression;
mod streaming;

use compression::{EnvSettings, compress, decompress};
use offload_cli::cl::{OptSpec, ToolSpec, ValueKind};
use offload_cli::diag;
use offload_cli::timers::TimerGroup;
use offload_format::bundle::FileType;
use offload_format::bundler::{self, Request, UnbundleOptions};
use offload_format::llvm_release::{self, LlvmRelease, Tool};
use offload_io::{Input, Outputs, error_text};
use std::io::Write;
use std::process::ExitCode;

// The option texts are LLVM's, word for word (LLVM 19 and 22 print the
// same help; its own regression test checks it, docs/llvm-tests.md). Our
// extensions are hidden: `--help-hidden` lists them.
const TYPE_HELP: &str = "Type of the files to be bundled/unbundled.
Current supported types are:
  i    - cpp-output
  ii   - c++-cpp-output
  cui  - cuda-cpp-output
  hipi - hip-cpp-output
  d    - dependency
  ll   - llvm
  bc   - llvm-bc
  s    - assembler
  o    - object
  a    - archive of objects
  gch  - precompiled-header
  ast  - clang AST file";

const OPTIONS: &[OptSpec] = &[
    OptSpec::flag(
        "###",
        "Print any external commands that are to be executed instead of actually executing them - for testing purposes.",
    ),
    OptSpec::flag("allow-missing-bundles", "Create empty files if bundles are missing when unbundling."),
    OptSpec::value("bundle-align", "", "Alignment of bundle for binary files").kind(ValueKind::Uint),
    OptSpec::flag("check-input-archive", "Check if input heterogeneous archive is valid in terms of TargetID rules."),
    OptSpec::flag("compress", "Compress output file when bundling."),
    OptSpec::value("compression-level", "n", "Specify the compression level (integer)").kind(ValueKind::Int),
    OptSpec::value("compression-method", "zstd|zlib", "Compression method (default zstd, as LLVM 19 writes)").hidden(),
    OptSpec::value(
        "compression-threads",
        "n",
        "zstd worker threads for -compress (default 0: single-threaded, byte-identical to LLVM 19)",
    )
    .kind(ValueKind::Uint)
    .hidden(),
    OptSpec::flag(
        "hip-openmp-compatible",
        "Treat hip and hipv4 offload kinds as compatible with openmp kind, and vice versa.",
    ),
    OptSpec::value("input", "string", "Input file. Can be specified multiple times for multiple input files.").list(),
    OptSpec::value("inputs", "string", "[<input file>,...] (deprecated)").comma(),
    OptSpec::flag("list", "List bundle IDs in the bundled file."),
    OptSpec::value("output", "string", "Output file. Can be specified multiple times for multiple output files.")
        .list(),
    OptSpec::value("outputs", "string", "[<output file>,...] (deprecated)").comma(),
    OptSpec::value("targets", "string", "[<offload kind>-<target triple>,...]").comma(),
    OptSpec::value("type", "string", TYPE_HELP).required(),
    OptSpec::flag("unbundle", "Unbundle bundled file into several output files."),
    OptSpec::flag("verbose", "Print debug information."),
];

/// The tool as `release`'s: its `--version` names the release.
fn spec(release: LlvmRelease) -> ToolSpec {
    let version = release
        .compatible_version_line(Tool::Bundler, env!("CARGO_PKG_VERSION"))
        .unwrap_or_else(|| format!("offload-binutils clang-offload-bundler version {}", env!("CARGO_PKG_VERSION")));
    // LLVM's overview, word for word (its lines end in a space).
    let overview = "A tool to bundle several input files of the specified type <type> \n\
                    referring to the same source file but different targets into a single \n\
                    one. The resulting file can also be unbundled into different files by \n\
                    this tool if -unbundle is provided.";
    ToolSpec {
        name: "clang-offload-bundler",
        // Built once per run; the parser keeps &'static texts.
        overview,
        category: "clang-offload-bundler options",
        options: OPTIONS,
        positional: None,
        version: Box::leak(version.into_boxed_str()),
        required_order: &[],
    }
}

fn main() -> ExitCode {
    // A run stopped by SIGINT/SIGTERM/SIGHUP removes its staging files.
    offload_io::remove_staging_on_signals();
    let argv0 = diag::argv0();
    let release = llvm_release::follow(&argv0, std::env::var(llvm_release::ENV_VAR).ok().as_deref());
    let env = EnvSettings::read(release);
    let opts = match diag::parse_or_exit(&spec(release), &argv0) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut timers = TimerGroup::new("Timer group for clang offload bundler");
    let result = run(&argv0, release, &opts, &env, &mut timers);
    let verbose = if opts.occurred("verbose") { opts.flag("verbose") } else { env.verbose };
    if verbose && release.facts().bundler_verbose_timers && !timers.is_empty() {
        eprint!("{}", timers.report());
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => diag::error(&argv0, message),
    }
}

/// Merges `-x` with its deprecated comma-list twin `-xs`, as LLVM 19 does.
fn merged(argv0: &str, opts: &offload_cli::cl::Parsed, one: &str, many: &str) -> Result<Vec<String>, String> {
    if opts.occurred(one) && opts.occurred(many) {
        return Err(format!("-{many} and -{one} cannot be used together, use only -{one} instead"));
    }
    let mut v: Vec<String> = opts.values(one).into_iter().map(String::from).collect();
    if opts.occurred(many) {
        diag::warning(argv0, format!("-{many} is deprecated, use -{one} instead"));
        v.extend(opts.values(many).into_iter().map(String::from));
    }
    Ok(v)
}

fn open(path: &str) -> Result<Input, String> {
    Input::open(path).map_err(|e| format!("'{path}': {}", error_text(&e)))
}

fn run(
    argv0: &str,
    release: LlvmRelease,
    opts: &offload_cli::cl::Parsed,
    env: &EnvSettings,
    timers: &mut TimerGroup,
) -> Result<(), String> {
    let verbose = if opts.occurred("verbose") { opts.flag("verbose") } else { env.verbose };
    let compress_output = if opts.occurred("compress") { opts.flag("compress") } else { env.compress };
    let inputs = merged(argv0, opts, "input", "inputs")?;
    let outputs = merged(argv0, opts, "output", "outputs")?;
    let request = Request {
        release,
        file_type: opts.value("type").unwrap_or_default().to_string(),
        targets: opts.values("targets").into_iter().map(String::from).collect(),
        input_count: inputs.len(),
        output_count: outputs.len(),
        unbundle: opts.flag("unbundle"),
        list: opts.flag("list"),
        check_input_archive: opts.flag("check-input-archive"),
    };
    let targets = bundler::validate(&request).map_err(|e| e.to_string())?;
    let Some(targets) = targets else {
        // -list
        let input = open(&inputs[0])?;
        let file_type = bundler::file_type(&request.file_type);
        let ids: Vec<Vec<u8>> = match file_type.as_ref().ok().map(|&t| streaming::streamable(input.bytes(), t)) {
            Some(Ok(Some(blob))) => streaming::list(&blob, verbose, timers)?,
            Some(Err(e)) => return Err(e),
            _ => {
                let bytes = decompress(&input, verbose, timers)?;
                let file_type = file_type.map_err(|e| e.to_string())?;
                bundler::list(file_type, &bytes).map_err(|e| e.to_string())?.into_iter().map(<[u8]>::to_vec).collect()
            }
        };
        // Buffered: stdout alone flushes at every newline, a system call
        // per ID on a bundle with many entries.
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for id in ids {
            out.write_all(&id).and_then(|_| out.write_all(b"\n")).map_err(|e| error_text(&e))?;
        }
        return out.flush().map_err(|e| error_text(&e));
    };
    let mut staged = Outputs::new();
    if request.unbundle {
        let input = open(&inputs[0])?;
        let options = UnbundleOptions {
            allow_missing_bundles: opts.flag("allow-missing-bundles"),
            hip_openmp_compatible: opts.flag("hip-openmp-compatible"),
        };
        if let Ok(file_type) = bundler::file_type(&request.file_type)
            && let Some(blob) = streaming::streamable(input.bytes(), file_type)?
        {
            streaming::unbundle(&blob, &targets, options, &outputs, &mut staged, verbose, timers)?;
            return staged.commit().map_err(|e| e.to_string());
        }
        let bytes = decompress(&input, verbose, timers)?;
        let file_type = bundler::file_type(&request.file_type).map_err(|e| e.to_string())?;
        let plans = if file_type == FileType::Archive {
            let thin = |name: &[u8]| offload_io::read_thin_member(&inputs[0], name);
            bundler::unbundle_archive(
                &targets,
                input.bytes(),
                &inputs[0],
                options,
                request.check_input_archive,
                Some(&thin),
            )
        } else {
            bundler::unbundle(file_type, &targets, &bytes, options)
        }
        .map_err(|e| e.to_string())?;
        let items: Vec<(&str, &_)> = outputs.iter().map(String::as_str).zip(&plans).collect();
        staged.stage_all(&items, &[&input]).map_err(|e| e.to_string())?;
        staged.commit().map_err(|e| e.to_string())
    } else {
        let opened = inputs.iter().map(|p| open(p)).collect::<Result<Vec<_>, _>>()?;
        let file_type = bundler::file_type(&request.file_type).map_err(|e| e.to_string())?;
        let bytes: Vec<&[u8]> = opened.iter().map(Input::bytes).collect();
        if opts.flag("###") && bundler::writes_object(file_type, &targets, &bytes).map_err(|e| e.to_string())? {
            // LLVM bundles objects by running llvm-objcopy; under -### it
            // prints that command and leaves the output empty. We print
            // the same and run nothing.
            let paths: Vec<&str> = inputs.iter().map(String::as_str).collect();
            let args = bundler::objcopy_arguments(&targets, &paths, &empty_temp_name(), &outputs[0]);
            let mut line = quoted(&find_objcopy());
            for a in &args {
                line.push(' ');
                line.push_str(&quoted(a));
            }
            eprintln!("{line}");
            staged.stage(&outputs[0], &offload_format::plan::Plan::new(), &[]).map_err(|e| e.to_string())?;
            return staged.commit().map_err(|e| e.to_string());
        }
        let align = opts.uint("bundle-align").unwrap_or(1);
        let mut plan = bundler::bundle(file_type, &targets, &bytes, align).map_err(|e| e.to_string())?;
        if compress_output && !bundler::writes_object(file_type, &targets, &bytes).map_err(|e| e.to_string())? {
            let refs: Vec<&Input> = opened.iter().collect();
            plan = compress(plan, &refs, opts, env, verbose, timers)?;
        }
        let refs: Vec<&Input> = opened.iter().collect();
        staged.stage(&outputs[0], &plan, &refs).map_err(|e| e.to_string())?;
        staged.commit().map_err(|e| e.to_string())
    }
}

/// `llvm-objcopy` as LLVM's bundler finds it: beside the running binary,
/// then on PATH; the bare name when neither has it (LLVM stops there with
/// an error; we print the command anyway, since nothing runs it).
fn find_objcopy() -> String {
    let beside = std::env::current_exe().ok().and_then(|p| p.parent().map(|d| d.join("llvm-objcopy")));
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("llvm-objcopy")).collect::<Vec<_>>())
        .unwrap_or_default();
    beside
        .into_iter()
        .chain(on_path)
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "llvm-objcopy".to_string())
}

/// A name like the temporary file LLVM makes for the host's empty section
/// (`clang-offload-bundler-XXXXXX.tmp` in the temporary folder); under
/// `-###` it is only printed, so no file is made.
fn empty_temp_name() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let tag = (nanos ^ std::process::id().rotate_left(12)) & 0xff_ffff;
    std::env::temp_dir().join(format!("clang-offload-bundler-{tag:06x}.tmp")).to_string_lossy().into_owned()
}

/// An argument in double quotes, `"`, `\` and `$` escaped, as LLVM prints
/// the commands it would run.
fn quoted(arg: &str) -> String {
    let mut out = String::with_capacity(arg.len() + 2);
    out.push('"');
    for c in arg.chars() {
        if matches!(c, '"' | '\\' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}
