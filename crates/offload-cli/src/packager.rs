//! The OffloadBinary packager shared by the `llvm-offload-binary` and
//! `clang-offload-packager` binaries: packs device images into OffloadBinary
//! packages (`-o`), or extracts them again (positional input). It follows
//! LLVM 22's `llvm-offload-binary` by default and LLVM 19's
//! `clang-offload-packager` under a `-19` name or with
//! `OFFLOAD_LLVM_VERSION=19` (`offload_format::llvm_release::follow`;
//! docs/llvm-releases.md and docs/tools/llvm-offload-binary.md).

use crate::cl::{OptSpec, Outcome, PositionalSpec, ToolSpec};
use crate::diag;
use offload_format::llvm_release::{self, LlvmRelease, Tool};
use offload_format::offload_binary::archive::write_gnu_archive;
use offload_format::offload_binary::container::{self, Package};
use offload_format::offload_binary::{
    Binaries, Image, ImageArgs, ImageKind, OffloadBinary, RecordOrder, write_plan_for,
};
use offload_format::plan::Plan;
use offload_io::{Input, Outputs, error_text};
use std::io::Write;
use std::process::ExitCode;

const OPTIONS: &[OptSpec] = &[
    OptSpec::flag("archive", "Write extracted files to a static archive"),
    OptSpec::value("compat", "16|19", "Write string records in the order of this LLVM release's packager (default 19)")
        .hidden(),
    OptSpec::flag("h", "Alias for -help").hidden(),
    OptSpec::value(
        "image",
        "<key>=<value>,...",
        "List of key and value arguments. Required keywords are 'file' and 'triple'.",
    )
    .list(),
    OptSpec::value("o", "file", "Write output to <file>."),
];

/// The tool as `release`'s, run as `argv0`: LLVM names the tool in its
/// messages and usage line by the program's file name, and its option
/// category by the release's own name for it.
fn spec(release: LlvmRelease, argv0: &str) -> ToolSpec {
    let tool_name = release.tool_name(Tool::Packager).unwrap_or("clang-offload-packager");
    let file_name = argv0.rsplit(['/', '\\']).next().filter(|n| !n.is_empty()).unwrap_or(tool_name);
    let version = if release == LlvmRelease::Llvm19 {
        // The line the LLVM 19 drop-in always printed.
        format!("clang-offload-packager version 19.1.7-compatible (offload-binutils {})", env!("CARGO_PKG_VERSION"))
    } else {
        release.compatible_version_line(Tool::Packager, env!("CARGO_PKG_VERSION")).unwrap_or_default()
    };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    ToolSpec {
        name: leak(file_name.to_string()),
        overview: "A utility for bundling several object files into a single binary.\n\
                   The output binary can then be embedded into the host section table\n\
                   to create a fatbinary containing offloading code.",
        category: leak(format!("{tool_name} options")),
        options: OPTIONS,
        positional: Some(PositionalSpec { value_name: "Extract from <file>.", min: 0, max: Some(1) }),
        version: leak(version),
        required_order: &[],
    }
}

/// Adjusts the shared parser's help to what LLVM prints: one-letter
/// options show their value after a space, and the flat list
/// (`--help-list`, `-h`) ends with `--version`.
fn llvm_help(text: &str) -> String {
    let mut text = text.replace("  -o=<file> ", "  -o <file> ");
    if !text.contains("Generic Options:") && !text.contains("  --version ") {
        let width = text.lines().find_map(|l| l.strip_prefix("  ")?.find(" - ")).unwrap_or(0);
        text.push_str(&format!("  {:<width$} - Display the version of this program\n", "--version"));
    }
    text
}

/// Runs the packager (the `main` of both binaries).
pub fn main() -> ExitCode {
    // A run stopped by SIGINT/SIGTERM/SIGHUP removes its staging files.
    offload_io::remove_staging_on_signals();
    let argv0 = diag::argv0();
    let release = llvm_release::follow(&argv0, std::env::var(llvm_release::ENV_VAR).ok().as_deref());
    let facts = release.facts();
    let spec = spec(release, &argv0);
    let args = diag::args();
    let parsed = match spec.parse(&argv0, &args) {
        Outcome::Run(p) => p,
        Outcome::Print(text) => {
            // Help texts get LLVM's layout; the version line is as it is.
            let text = if text.starts_with("OVERVIEW:") { llvm_help(&text) } else { text };
            let _ = std::io::stdout().write_all(text.as_bytes());
            return ExitCode::SUCCESS;
        }
        Outcome::Fail(text) => {
            let _ = std::io::stderr().write_all(text.as_bytes());
            return ExitCode::from(1);
        }
    };
    // Run under the release's old name (exactly: `clang-offload-packager-22`
    // does not warn), LLVM 22 warns before doing anything else.
    if let Some((old, warning)) = facts.packager_old_name
        && spec.name == old
    {
        eprint!("{warning}");
    }
    if parsed.flag("h") || (args.is_empty() && facts.packager_no_args_prints_help) {
        let _ = std::io::stdout().write_all(llvm_help(&spec.help_text(false, true)).as_bytes());
        return ExitCode::SUCCESS;
    }
    let order = match parsed.value("compat") {
        None | Some("19") => RecordOrder::Llvm19,
        Some("16") => RecordOrder::Llvm16,
        Some(other) => {
            eprintln!("{}: for the --compat option: Cannot find option named '{other}'!", spec.name);
            return ExitCode::from(1);
        }
    };
    // LLVM treats an empty file name as no file name.
    let output = parsed.value("o").filter(|o| !o.is_empty());
    let input = parsed.positionals.first().map(String::as_str).filter(|i| !i.is_empty());
    let images = parsed.values("image");
    let result = match (output, input) {
        (Some(_), Some(_)) => {
            Err("Packaging to an output file and extracting from an input file are mutually exclusive.".to_string())
        }
        (Some(out), None) => bundle(release, out, &images, order),
        (None, Some(inp)) => unbundle(release, &argv0, inp, &images, parsed.flag("archive")),
        (None, None) => Ok(()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => diag::error(&argv0, message),
    }
}

/// Packs every `--image` into `output`.
fn bundle(release: LlvmRelease, output: &str, specs: &[&str], order: RecordOrder) -> Result<(), String> {
    // Check and open everything first, in LLVM's order, so the first
    // problem is the one reported and nothing is written on failure.
    let mut parsed = Vec::new();
    let mut inputs = Vec::new();
    for spec in specs {
        let args = ImageArgs::parse(spec);
        if release.facts().packager_requires_triple {
            if !args.contains("triple") || !args.contains("file") {
                return Err("'file' and 'triple' are required image arguments".into());
            }
        } else if !args.contains("file") {
            return Err("'file' is a required image arguments".into());
        }
        for file in args.files() {
            inputs.push(Input::open(file).map_err(|e| error_text(&e))?);
        }
        parsed.push(args);
    }
    let mut images = Vec::new();
    let mut next_input = inputs.iter();
    for args in &parsed {
        let records: Vec<(&[u8], &[u8])> =
            args.string_records(order).into_iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        for file in args.files() {
            let Some(input) = next_input.next() else { break };
            images.push(Image {
                image_kind: ImageKind::infer(file, input.bytes()),
                offload_kind: args.offload_kind_in(release),
                flags: 0,
                strings: records.clone(),
                image: input.bytes(),
            });
        }
    }
    let plan = write_plan_for(release, &images).map_err(|e| e.to_string())?;
    let refs: Vec<&Input> = inputs.iter().collect();
    let mut outs = Outputs::new();
    outs.stage(output, &plan, &refs).map_err(|e| error_text(&e.error))?;
    outs.commit().map_err(|e| error_text(&e.error))
}

/// Whether `binary` matches every key of an extraction `--image`; `kind`
/// compares the stored number with the one `release` gives the name (LLVM
/// 22 does not take LLVM 19's HIP images, 3, for `kind=hip`).
fn matches(release: LlvmRelease, args: &ImageArgs, binary: &OffloadBinary<'_>) -> bool {
    args.pairs().all(|(key, value)| match key {
        "file" => true,
        "kind" => release.kind_filter_matches(binary.entry().offload_kind, value),
        _ => binary.get(key.as_bytes()).unwrap_or(b"") == value.as_bytes(),
    })
}

/// Extracts the images selected by each `--image` from `path`.
fn unbundle(release: LlvmRelease, argv0: &str, path: &str, specs: &[&str], archive: bool) -> Result<(), String> {
    let input = Input::open(path).map_err(|e| format!("'{path}': {}", error_text(&e)))?;
    let identifier = if path == "-" { "<stdin>" } else { path };
    let scan = container::scan(input.bytes(), identifier);
    let mut binaries: Vec<(OffloadBinary<'_>, &Package<'_>)> = Vec::new();
    for package in &scan.packages {
        for binary in Binaries::new(&package.data) {
            binaries.push((binary.map_err(|e| e.to_string())?, package));
        }
    }
    if let Some(e) = scan.error {
        return Err(e.to_string());
    }
    let stem = offload_format::offload_binary::path_stem(path);
    let mut outs = Outputs::new();
    for spec in specs {
        let args = ImageArgs::parse(spec);
        let selected: Vec<&(OffloadBinary<'_>, &Package<'_>)> =
            binaries.iter().filter(|(b, _)| matches(release, &args, b)).collect();
        let Some((last, _)) = selected.last() else { continue };
        if archive {
            let Some(file) = args.get("file") else {
                return Err("Image must have a 'file' argument.".into());
            };
            let members: Vec<(&str, &[u8])> =
                selected.iter().map(|(b, p)| (p.identifier.as_str(), b.image())).collect();
            let bytes = write_gnu_archive(&members).map_err(|e| e.to_string())?;
            outs.stage(file, &Plan::borrowed(&bytes), &[&input]).map_err(|e| error_text(&e.error))?;
        } else if let Some(file) = args.get("file") {
            if selected.len() > 1 {
                diag::warning(argv0, format!("Multiple inputs match to a single file, '{file}'"));
            }
            outs.stage(file, &Plan::borrowed(last.image()), &[&input]).map_err(|e| error_text(&e.error))?;
        } else {
            for (index, (binary, _)) in selected.iter().enumerate() {
                let (triple, arch) = (binary.triple(), binary.arch());
                let name = format!("{stem}-{triple}-{arch}.{index}.{}", binary.image_kind().name());
                // The triple and arch come from the input file: they must not
                // steer the output into another directory (LLVM 19 would
                // follow them).
                if triple.contains(['/', '\0']) || arch.contains(['/', '\0']) {
                    return Err(format!(
                        "'{}': refusing to write an output whose name comes from an image's triple or arch \
                         containing '/' or NUL; select the image with a 'file=' argument instead",
                        name.escape_debug()
                    ));
                }
                outs.stage(&name, &Plan::borrowed(binary.image()), &[&input]).map_err(|e| error_text(&e.error))?;
            }
        }
    }
    outs.commit().map_err(|e| error_text(&e.error))
}
