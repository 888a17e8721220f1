//! Drop-in replacement for LLVM 19's `clang-offload-bundler`.

use offload_cli::cl::{OptSpec, ToolSpec, ValueKind};
use offload_cli::diag;
use offload_cli::io::{Input, Outputs, error_text};
use offload_cli::report::{TimerGroup, with_commas};
use offload_format::bundle::FileType;
use offload_format::bundle::compressed::{CompressOptions, Method};
use offload_format::bundler::{self, Request, UnbundleOptions};
use offload_format::plan::Plan;
use std::borrow::Cow;
use std::io::Write;
use std::process::ExitCode;

const TYPE_HELP: &str = "Type of the files to be bundled or unbundled.
Supported types:
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
    OptSpec::flag("###", "Accepted for compatibility; no external command is ever run, so there is nothing to print."),
    OptSpec::flag(
        "allow-missing-bundles",
        "Create empty outputs for requested bundles that are missing when unbundling.",
    ),
    OptSpec::value("bundle-align", "", "Alignment of each payload in binary bundles (default 1)").kind(ValueKind::Uint),
    OptSpec::flag("check-input-archive", "Check that the archive's target IDs obey the target-ID rules."),
    OptSpec::flag("compress", "Compress the bundled output."),
    OptSpec::value("compression-level", "n", "Compression level (integer)").kind(ValueKind::Int),
    OptSpec::value("compression-method", "zstd|zlib", "Compression method (default zstd, as LLVM 19 writes)"),
    OptSpec::value(
        "compression-threads",
        "n",
        "zstd worker threads for -compress (default 0: single-threaded, byte-identical to LLVM 19)",
    )
    .kind(ValueKind::Uint),
    OptSpec::flag("hip-openmp-compatible", "Let hip and hipv4 code objects satisfy openmp targets, and the reverse."),
    OptSpec::value("input", "string", "Input file; repeat for several input files.").list(),
    OptSpec::value("inputs", "string", "[<input file>,...] (deprecated)").comma(),
    OptSpec::flag("list", "List the bundle IDs in the input."),
    OptSpec::value("output", "string", "Output file; repeat for several output files.").list(),
    OptSpec::value("outputs", "string", "[<output file>,...] (deprecated)").comma(),
    OptSpec::value("targets", "string", "[<offload kind>-<target triple>,...]").comma(),
    OptSpec::value("type", "string", TYPE_HELP).required(),
    OptSpec::flag("unbundle", "Unbundle the input into one output per target."),
    OptSpec::flag("verbose", "Print compression statistics."),
];

const SPEC: ToolSpec = ToolSpec {
    name: "clang-offload-bundler",
    overview: "Bundles input files of type <type> that come from the same source but target \n\
               different devices into one file, or with -unbundle splits such a file again. \n\
               offload-binutils' drop-in replacement for LLVM 19's tool.",
    category: "clang-offload-bundler options",
    options: OPTIONS,
    positional: None,
    version: concat!(
        "offload-binutils clang-offload-bundler version ",
        env!("CARGO_PKG_VERSION"),
        " (compatible with LLVM 19.1.7)"
    ),
    required_order: &[],
};

fn main() -> ExitCode {
    let argv0 = diag::argv0();
    let env = EnvSettings::read();
    let opts = match diag::parse_or_exit(&SPEC, &argv0) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let mut timers = TimerGroup::new("Timer group for clang offload bundler");
    let result = run(&argv0, &opts, &env, &mut timers);
    let verbose = if opts.occurred("verbose") { opts.flag("verbose") } else { env.verbose };
    if verbose && !timers.is_empty() {
        eprint!("{}", timers.report());
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => diag::error(&argv0, message),
    }
}

/// The environment switches LLVM 19 honours, read before the command line
/// (whose flags, when given, take precedence).
struct EnvSettings {
    verbose: bool,
    compress: bool,
    level: Option<i32>,
    /// `COMPRESSED_BUNDLE_FORMAT_VERSION` (read by newer LLVM; 2 or 3).
    format_version: u16,
}

impl EnvSettings {
    fn read() -> Self {
        let var = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        let mut s = EnvSettings { verbose: false, compress: false, level: None, format_version: 2 };
        match var("COMPRESSED_BUNDLE_FORMAT_VERSION").as_deref() {
            None | Some("2") => {}
            Some("3") => s.format_version = 3,
            Some(other) => {
                eprintln!("Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {other}. Using version 2.")
            }
        }
        if var("OFFLOAD_BUNDLER_IGNORE_ENV_VAR").as_deref() == Some("1") {
            return s;
        }
        if let Some(v) = var("OFFLOAD_BUNDLER_VERBOSE") {
            s.verbose = v == "1";
        }
        if let Some(v) = var("OFFLOAD_BUNDLER_COMPRESS") {
            s.compress = v == "1";
        }
        if let Some(v) = var("OFFLOAD_BUNDLER_COMPRESSION_LEVEL") {
            match v.parse::<i32>() {
                Ok(l) if !v.starts_with('+') => s.level = Some(l),
                _ => eprintln!("Warning: Invalid value for OFFLOAD_BUNDLER_COMPRESSION_LEVEL: {v}. Ignoring it."),
            }
        }
        s
    }
}

/// Decompresses the input if needed, printing LLVM's statistics under
/// `-verbose`, and checks the stored hash.
fn decompress<'a>(input: &'a Input, verbose: bool, timers: &mut TimerGroup) -> Result<Cow<'a, [u8]>, String> {
    let bytes = input.bytes();
    if !offload_format::bundle::compressed::is_compressed(bytes) {
        if verbose && bytes.len() >= 20 {
            eprintln!("Uncompressed bundle.");
        }
        return Ok(Cow::Borrowed(bytes));
    }
    let (result, wall) = timers.time("Decompression time", || bundler::decompress_input(bytes));
    let decompressed = result.map_err(|e| e.to_string())?;
    if let (true, Some(info)) = (verbose, decompressed.info) {
        let h = info.header;
        let rate = h.uncompressed_size as f64 / info.compressed_len as f64;
        let speed = (h.uncompressed_size as f64 / (1024.0 * 1024.0)) / wall.as_secs_f64();
        let mut msg = format!("Compressed bundle format version: {}\n", h.version);
        if let Some(total) = h.total_size {
            msg.push_str(&format!("Total file size (from header): {} bytes\n", with_commas(total)));
        }
        msg.push_str(&format!(
            "Decompression method: {}\nSize before decompression: {} bytes\nSize after decompression: {} bytes\n\
             Compression rate: {rate:.2}\nCompression ratio: {:.2}%\nDecompression speed: {speed:.2} MB/s\n\
             Stored hash: {:#018x}\nRecalculated hash: {:#018x}\nHashes match: {}",
            h.method.name(),
            with_commas(info.compressed_len as u64),
            with_commas(h.uncompressed_size),
            100.0 / rate,
            h.hash,
            info.computed_hash,
            if h.hash == info.computed_hash { "Yes" } else { "No" },
        ));
        eprintln!("{msg}");
    }
    decompressed.into_verified().map_err(|e| e.to_string())
}

/// Compresses a bundled output with LLVM 19's settings unless told
/// otherwise, printing LLVM's statistics under `-verbose`.
fn compress(
    plan: Plan,
    opts: &offload_cli::cl::Parsed,
    env: &EnvSettings,
    verbose: bool,
    timers: &mut TimerGroup,
) -> Result<Plan<'static>, String> {
    let method = match opts.value("compression-method") {
        None | Some("zstd") => Method::Zstd,
        Some("zlib") => Method::Zlib,
        Some(other) => return Err(format!("'{other}': unknown compression method (use zstd or zlib)")),
    };
    let default_level = if method == Method::Zstd { 3 } else { 6 };
    let level = opts.int("compression-level").or(env.level).unwrap_or(default_level);
    let options = CompressOptions {
        method,
        level,
        version: env.format_version,
        threads: opts.uint("compression-threads").unwrap_or(0),
    };
    let bundle = plan.to_vec();
    let (result, wall) = timers.time("Compression time", || bundler::compress(&bundle, &options));
    let c = result.map_err(|e| e.to_string())?;
    if verbose {
        let rate = bundle.len() as f64 / c.compressed_len as f64;
        let speed = (bundle.len() as f64 / (1024.0 * 1024.0)) / wall.as_secs_f64();
        eprintln!(
            "Compressed bundle format version: {}\nTotal file size (including headers): {} bytes\n\
             Compression method used: {}\nCompression level: {level}\nBinary size before compression: {} bytes\n\
             Binary size after compression: {} bytes\nCompression rate: {rate:.2}\nCompression ratio: {:.2}%\n\
             Compression speed: {speed:.2} MB/s\nTruncated MD5 hash: {:#018x}",
            c.version,
            with_commas(c.bytes.len() as u64),
            method.name(),
            with_commas(bundle.len() as u64),
            with_commas(c.compressed_len as u64),
            100.0 / rate,
            c.hash,
        );
    }
    let mut out = Plan::new();
    out.own(c.bytes);
    Ok(out)
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

fn run(argv0: &str, opts: &offload_cli::cl::Parsed, env: &EnvSettings, timers: &mut TimerGroup) -> Result<(), String> {
    let verbose = if opts.occurred("verbose") { opts.flag("verbose") } else { env.verbose };
    let compress_output = if opts.occurred("compress") { opts.flag("compress") } else { env.compress };
    let inputs = merged(argv0, opts, "input", "inputs")?;
    let outputs = merged(argv0, opts, "output", "outputs")?;
    let request = Request {
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
        let bytes = decompress(&input, verbose, timers)?;
        let file_type = bundler::file_type(&request.file_type).map_err(|e| e.to_string())?;
        let ids = bundler::list(file_type, &bytes).map_err(|e| e.to_string())?;
        // Buffered: stdout alone flushes at every newline, a system call
        // per ID on a bundle with many entries.
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for id in ids {
            out.write_all(id).and_then(|_| out.write_all(b"\n")).map_err(|e| error_text(&e))?;
        }
        return out.flush().map_err(|e| error_text(&e));
    };
    let mut staged = Outputs::new();
    if request.unbundle {
        let input = open(&inputs[0])?;
        let bytes = decompress(&input, verbose, timers)?;
        let file_type = bundler::file_type(&request.file_type).map_err(|e| e.to_string())?;
        let options = UnbundleOptions {
            allow_missing_bundles: opts.flag("allow-missing-bundles"),
            hip_openmp_compatible: opts.flag("hip-openmp-compatible"),
        };
        let plans = if file_type == FileType::Archive {
            bundler::unbundle_archive(&targets, input.bytes(), &inputs[0], options, request.check_input_archive)
        } else {
            bundler::unbundle(file_type, &targets, &bytes, options)
        }
        .map_err(|e| e.to_string())?;
        for (path, plan) in outputs.iter().zip(&plans) {
            staged.stage(path, plan, &[&input]).map_err(|e| e.to_string())?;
        }
        staged.commit().map_err(|e| e.to_string())
    } else {
        let opened = inputs.iter().map(|p| open(p)).collect::<Result<Vec<_>, _>>()?;
        let file_type = bundler::file_type(&request.file_type).map_err(|e| e.to_string())?;
        let bytes: Vec<&[u8]> = opened.iter().map(Input::bytes).collect();
        let align = opts.uint("bundle-align").unwrap_or(1);
        let mut plan = bundler::bundle(file_type, &targets, &bytes, align).map_err(|e| e.to_string())?;
        if compress_output && !bundler::writes_object(file_type, &targets, &bytes).map_err(|e| e.to_string())? {
            plan = compress(plan, opts, env, verbose, timers)?;
        }
        let refs: Vec<&Input> = opened.iter().collect();
        staged.stage(&outputs[0], &plan, &refs).map_err(|e| e.to_string())?;
        staged.commit().map_err(|e| e.to_string())
    }
}
