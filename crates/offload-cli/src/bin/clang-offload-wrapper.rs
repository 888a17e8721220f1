//! Drop-in replacement for LLVM 14's `clang-offload-wrapper`: wraps device
//! images into a host LLVM bitcode module that registers them with the
//! OpenMP offload runtime at program start.
//!
//! Same options and messages as LLVM 14, plus `--offload-arch` (the
//! image-info extension), `-S` (write the module as text) and zero inputs
//! (a module that registers no images).

use offload_cli::cl::{OptSpec, PositionalSpec, ToolSpec};
use offload_cli::diag;
use offload_format::llvm_release::LlvmRelease;
use offload_format::plan::Plan;
use offload_format::wrapper::{bitcode, module, omp_notes, text};
use offload_io::{Input, Outputs, error_text};
use std::process::ExitCode;

const OPTIONS: &[OptSpec] = &[
    OptSpec::value("o", "filename", "Output filename").required(),
    OptSpec::value("target", "triple", "Target triple for the output module").required(),
    OptSpec::value(
        "offload-arch",
        "target-id",
        "Target ID of the image at the same position; adds __tgt_image_info records",
    )
    .list(),
    OptSpec::flag("S", "Write the module as LLVM assembly text instead of bitcode"),
    OptSpec::flag("h", "Alias for -help").hidden(),
    OptSpec::flag("save-temps", "Save temporary files (the tool makes none)").hidden(),
    OptSpec::flag("add-omp-offload-notes", "Add LLVMOMPOFFLOAD ELF notes to ELF device images").hidden(),
];

const SPEC: ToolSpec = ToolSpec {
    name: "clang-offload-wrapper",
    overview: "A tool to create a wrapper bitcode for offload target binaries. Takes offload\n\
               target binaries as input and produces bitcode file containing target binaries packaged\n\
               as data and initialization code which registers target binaries in offload runtime.",
    category: "clang-offload-wrapper options",
    options: OPTIONS,
    positional: Some(PositionalSpec { value_name: "<input files>", min: 0, max: None }),
    version: concat!(
        "clang-offload-wrapper (offload-binutils) version ",
        env!("CARGO_PKG_VERSION"),
        ", compatible with LLVM 14"
    ),
    required_order: &["o", "target"],
};

fn main() -> ExitCode {
    // A run stopped by SIGINT/SIGTERM/SIGHUP removes its staging files.
    offload_io::remove_staging_on_signals();
    let argv0 = diag::argv0();
    let opts = match diag::parse_or_exit(&SPEC, &argv0) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if opts.flag("h") {
        print!("{}", SPEC.help_text(false, false));
        return ExitCode::SUCCESS;
    }
    let triple = opts.value("target").unwrap_or_default();
    let output = opts.value("o").unwrap_or_default();
    let archs = opts.values("offload-arch");

    // Command-line checks first, as LLVM checks the triple before reading.
    if let Err(e) = module::check(triple, opts.positionals.len(), &archs) {
        return diag::error(&argv0, e);
    }

    let mut inputs = Vec::with_capacity(opts.positionals.len());
    for path in &opts.positionals {
        match Input::open(path) {
            Ok(i) => inputs.push(i),
            Err(e) => return diag::error(&argv0, format!("'{path}': {}", error_text(&e))),
        }
    }
    // -add-omp-offload-notes: each ELF image gets LLVM 14's notes; others
    // are wrapped unchanged with LLVM 14's warning.
    let mut noted: Vec<Option<Vec<u8>>> = vec![None; inputs.len()];
    if opts.flag("add-omp-offload-notes") {
        let producer = LlvmRelease::Llvm14.facts().version;
        for (i, input) in inputs.iter().enumerate() {
            match omp_notes::add_notes(input.bytes(), producer) {
                Ok(bytes) => noted[i] = Some(bytes),
                Err(e @ omp_notes::NotesError::NotElf) => diag::warning(&argv0, format!("{} {e}", input.path)),
                Err(e) => diag::warning(&argv0, format!("{}: {e}; the image is wrapped unchanged", input.path)),
            }
        }
    }

    let input = module::WrapperInput {
        triple,
        images: inputs.iter().zip(&noted).map(|(i, n)| n.as_deref().unwrap_or(i.bytes())).collect(),
        offload_archs: archs,
    };
    let m = match module::build(&input) {
        Ok(m) => m,
        Err(e) => return diag::error(&argv0, e),
    };
    let plan = if opts.flag("S") {
        let mut p = Plan::new();
        p.own(text::to_text(&m, module::SOURCE_FILENAME).into_bytes());
        p
    } else {
        match bitcode::write(&m) {
            Ok(p) => p,
            Err(e) => return diag::error(&argv0, e),
        }
    };
    let refs: Vec<&Input> = inputs.iter().collect();
    let mut outs = Outputs::new();
    if let Err(e) = outs.stage(output, &plan, &refs) {
        return diag::error(&argv0, e);
    }
    if let Err(e) = outs.commit() {
        return diag::error(&argv0, e);
    }
    ExitCode::SUCCESS
}
