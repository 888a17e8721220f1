//! Drop-in replacement for LLVM 22's `llvm-offload-wrapper`: wraps device
//! images into a host LLVM bitcode module that registers them with the
//! OpenMP, CUDA or HIP runtime at program start
//! (docs/tools/llvm-offload-wrapper.md).

use offload_cli::cl::{OptSpec, Outcome, PositionalSpec, ToolSpec};
use offload_cli::diag;
use offload_format::wrapper::{bitcode, module22};
use offload_io::{Input, Outputs, error_text};
use std::process::ExitCode;

const OPTIONS: &[OptSpec] = &[
    OptSpec::value("kind", "value", "Wrap for offload kind:").required(),
    OptSpec::value("o", "file", "Write output to <file>."),
    OptSpec::value("triple", "string", "Target triple for the wrapper module"),
];

const SPEC: ToolSpec = ToolSpec {
    name: "llvm-offload-wrapper",
    overview: "Generate runtime registration code for a device binary image",
    category: "llvm-offload-wrapper options",
    options: OPTIONS,
    positional: Some(PositionalSpec { value_name: "Wrap input from <file>", min: 1, max: None }),
    version: concat!(
        "llvm-offload-wrapper (offload-binutils) version ",
        env!("CARGO_PKG_VERSION"),
        ", compatible with LLVM 22"
    ),
    required_order: &["kind"],
};

fn main() -> ExitCode {
    // A run stopped by SIGINT/SIGTERM/SIGHUP removes its staging files.
    offload_io::remove_staging_on_signals();
    let argv0 = diag::argv0();
    let opts = match SPEC.parse(&argv0, &diag::args()) {
        Outcome::Run(p) => p,
        Outcome::Print(text) => {
            print!("{}", llvm_help(&text));
            return ExitCode::SUCCESS;
        }
        Outcome::Fail(text) => {
            eprint!("{text}");
            return ExitCode::from(1);
        }
    };
    let kind_name = opts.value("kind").unwrap_or_default();
    let Some(kind) = module22::Kind::from_name(kind_name) else {
        eprintln!("llvm-offload-wrapper: for the --kind option: Cannot find option named '{kind_name}'!");
        return ExitCode::from(1);
    };
    let triple = opts.value("triple").unwrap_or(module22::DEFAULT_TRIPLE);
    // LLVM 22's tool writes `-o -` to a file named `-`, not to stdout, and
    // without `-o` fails to create the file "" (docs/tools/llvm-offload-wrapper.md).
    let output = match opts.value("o").unwrap_or_default() {
        "-" => "./-",
        o => o,
    };

    let mut inputs = Vec::with_capacity(opts.positionals.len());
    for path in &opts.positionals {
        match Input::open(path) {
            Ok(i) => inputs.push(i),
            Err(e) => return diag::error(&argv0, format!("'{path}': {}", error_text(&e))),
        }
    }
    let images: Vec<&[u8]> = inputs.iter().map(Input::bytes).collect();
    let m = match module22::build(kind, triple, &images) {
        Ok(m) => m,
        Err(e) => return diag::error(&argv0, e),
    };
    let plan = match bitcode::write(&m) {
        Ok(p) => p,
        Err(e) => return diag::error(&argv0, e),
    };
    let refs: Vec<&Input> = inputs.iter().collect();
    let mut outs = Outputs::new();
    // LLVM names no file in an output error.
    if let Err(e) = outs.stage(output, &plan, &refs).and_then(|()| outs.commit()) {
        return diag::error(&argv0, error_text(&e.error));
    }
    ExitCode::SUCCESS
}

/// `--help` as LLVM 22 shows it: the values of `--kind` listed under it
/// (an enumerated option), and `-o <file>` with a space.
fn llvm_help(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 200);
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("-o=<file>") {
            out.push_str(&line[..line.len() - trimmed.len()]);
            out.push_str("-o <file>");
            out.push_str(rest);
        } else if trimmed.starts_with("--kind=<value>") {
            out.push_str(line);
            let width = line.find(" - ").unwrap_or(0);
            for (value, what) in [("openmp", "OpenMP"), ("cuda", "CUDA"), ("hip", "HIP")] {
                let name = format!("    ={value}");
                out.push_str(&format!("{name:<width$} -   Wrap {what} binaries\n"));
            }
        } else {
            out.push_str(line);
        }
    }
    // `--help-list` of this tool lists `--version` among its options.
    if !text.contains("Generic Options:") && !text.contains("  --version ") {
        let width = text.lines().find_map(|l| l.find(" - ")).unwrap_or(0);
        out.push_str(&format!("{:<width$} - Display the version of this program\n", "  --version"));
    }
    out
}
