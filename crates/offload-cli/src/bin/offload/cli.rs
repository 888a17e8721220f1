//! The command line, defined once with clap: `--help`, the shell
//! completions (`offload completions SHELL`) and the man page (`offload
//! man`) all come from [`Cli`]. The options every command shares live
//! here; each command's own options and its `run` live in its file under
//! `commands/`.

use crate::commands::Sub;
use crate::output::Colors;
use clap::{Parser, ValueEnum};
use offload_inspect::select::{Gpu, Runtime};

/// `offload --version` prints `offload (offload-binutils) VERSION`.
pub const VERSION: &str = concat!("(offload-binutils) ", env!("CARGO_PKG_VERSION"));

const ABOUT: &str = "Lists, selects, extracts and verifies the GPU code objects in any file";

const LONG_ABOUT: &str = "\
Finds the GPU code objects in any file: raw bundles (binary, text,
compressed), OffloadBinary packages, CUDA fat binaries, ELF/COFF/Mach-O
objects, executables and shared libraries, archives, bitcode, and any
nesting of these; also inside packages (zip, wheel, tar[.gz|.xz|.zst|.bz2],
deb, conda) and folders, without unpacking them.";

const EXIT_STATUS: &str = "\
Exit status: 0 success (yes); 1 the answer is no or problems were found
(nothing loadable, errors found, inputs differ); 2 a usage error, or a file
could not be read or written.";

pub const GPU_SHORT: &str = "The GPU, as a target ID: gfx90a:xnack+, sm_80, ...";

pub const GPU_HELP: &str = "A target ID: gfx90a:xnack+, gfx950:sramecc+:xnack-, \
amdgcn-amd-amdhsa--gfx906, fiji, sm_80 (also compute_80, 8.0); a gfx name \
missing from the processor table is matched as given, with a warning";

#[derive(Parser, Debug)]
#[command(
    name = "offload",
    version = VERSION,
    about = ABOUT,
    long_about = LONG_ABOUT,
    after_help = EXIT_STATUS,
    subcommand_required = true,
    arg_required_else_help = true
)]
pub struct Cli {
    /// Colour in text output: auto (a terminal without NO_COLOR), always or never
    // One line, under its own heading after each command's options, so
    // that `offload COMMAND --help` starts with what the command takes.
    #[arg(
        long,
        value_enum,
        global = true,
        default_value_t = ColorChoice::Auto,
        value_name = "WHEN",
        help_heading = "Global options",
        hide_default_value = true,
        hide_possible_values = true
    )]
    pub color: ColorChoice,
    /// Sizes in tables as exact byte counts (a terminal shows 1.5 MiB)
    #[arg(long, global = true, help_heading = "Global options")]
    pub bytes: bool,
    #[command(subcommand)]
    pub command: Sub,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// `--kind`: the runtime that loads the code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    Hip,
    Openmp,
    Cuda,
}

impl Kind {
    pub fn runtime(self) -> Runtime {
        match self {
            Kind::Hip => Runtime::Hip,
            Kind::Openmp => Runtime::OpenMp,
            Kind::Cuda => Runtime::Cuda,
        }
    }
}

/// `--kpack-order`: which search order of AMD's kpack loader to follow
/// for kpack-split binaries (docs/formats/kpack.md, "The loader").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum KpackOrder {
    /// A failing compatible archive falls through to the next one (the newer loader)
    #[default]
    FallThrough,
    /// The first compatible archive decides (the loader of July 2026)
    First,
}

impl KpackOrder {
    pub fn order(self) -> offload_format::kpack::SearchOrder {
        match self {
            KpackOrder::FallThrough => offload_format::kpack::SearchOrder::FallThrough,
            KpackOrder::First => offload_format::kpack::SearchOrder::FirstCompatible,
        }
    }
}

/// `--gpu`: a target ID; a name no table knows gets the advice of
/// `offload_format::gpu_names` (`GFX90A`: did you mean gfx90a?; `MI300X`
/// is gfx942; docs/reference/gpu-names.md).
pub fn parse_gpu(text: &str) -> Result<Gpu, String> {
    Gpu::parse(text).map_err(|e| match offload_format::gpu_names::advice(text) {
        Some(advice) => format!("{e}; {advice}"),
        None => e.to_string(),
    })
}

/// The warning for a GPU that parsed but that no table knows: a gfx name
/// missing from the processor table (matched as given) or a CUDA
/// architecture NVIDIA never shipped (`sm_999`), with advice.
pub fn gpu_warning(option: &str, g: &Gpu) -> Option<String> {
    let name = &g.processor;
    let advice = || offload_format::gpu_names::advice(name).map(|a| format!("; {a}")).unwrap_or_default();
    if let Some(w) = g.warning() {
        return Some(format!("{option}: {w}{}", advice()));
    }
    (g.arch == "nvptx64" && !offload_format::gpu_names::is_known(name)).then(|| {
        let advice = offload_format::gpu_names::advice(name).unwrap_or_default();
        format!("{option}: '{name}': {advice}")
    })
}

/// The notes of GPUs whose xnack mode was settled (`Sub::settle_gpus`):
/// the settled GPU's target ID, the note, and whether it was printed.
/// A note is printed once, when a scanned file holds code for the GPU's
/// processor that fixes xnack, the only case where the mode changes an
/// answer (`--gpu gfx906` on a library without `:xnack±` code stays quiet).
static SETTLED: std::sync::Mutex<Vec<(String, String, bool)>> = std::sync::Mutex::new(Vec::new());

/// Records the note of a settled GPU (from `main`).
pub fn remember_settled(gpu: &Gpu, note: String) {
    if let Ok(mut notes) = SETTLED.lock() {
        notes.push((gpu.target_id(), note, false));
    }
}

/// Prints the settled note of `gpu` (once) if one of `targets` (target
/// IDs of code found) is for its processor and fixes xnack.
pub fn note_settled<'a>(gpu: &Gpu, targets: impl IntoIterator<Item = &'a str>) {
    let Ok(mut notes) = SETTLED.lock() else { return };
    let id = gpu.target_id();
    let Some(entry) = notes.iter_mut().find(|(g, _, shown)| *g == id && !shown) else { return };
    let fixes_xnack = |t: &str| {
        let mut parts = t.split(':');
        parts.next() == Some(gpu.processor.as_str()) && parts.any(|f| f.starts_with("xnack"))
    };
    if targets.into_iter().any(fixes_xnack) {
        entry.2 = true;
        eprintln!("{}: note: {}", offload_cli::diag::argv0(), entry.1);
    }
}

/// The runtime for `--kind`, or the default for the GPU: an NVIDIA GPU is
/// served by the CUDA driver unless `--kind` says otherwise.
pub fn runtime(kind: Option<Kind>, gpu: Option<&Gpu>) -> Runtime {
    kind.map(Kind::runtime).unwrap_or(if gpu.is_some_and(|g| g.arch == "nvptx64") {
        Runtime::Cuda
    } else {
        Runtime::Hip
    })
}

/// Warnings for `--keep` targets that name a GPU no table knows
/// (`gfx9000`, `sm_999`), with advice; triples and `amdgcnspirv` pass.
pub fn keep_warnings(keep: &[String]) -> Vec<String> {
    keep.iter()
        .filter_map(|t| {
            let tid = t.rsplit_once("--").map_or(t.as_str(), |(_, tid)| tid);
            let gpu_like = tid.starts_with("gfx") || tid.starts_with("sm_") || tid.starts_with("compute_");
            let advice = offload_format::gpu_names::advice(tid).filter(|_| gpu_like)?;
            Some(format!("--keep: '{t}' is not a GPU these tools know; {advice}"))
        })
        .collect()
}

/// `--keep a,,b` names two targets: empty items are dropped.
pub fn targets(list: Vec<String>) -> Vec<String> {
    list.into_iter().filter(|t| !t.is_empty()).collect()
}

/// Whether a command-line argument is a code-object URI rather than a
/// path (`memory://` too, refused later with a message that says why).
pub fn is_uri(arg: &str) -> bool {
    let scheme = arg.split_once("://").map_or("", |(s, _)| s);
    scheme.eq_ignore_ascii_case("file") || scheme.eq_ignore_ascii_case("memory")
}

/// The output options of the commands that rewrite a file (`prune`,
/// `replace`).
#[derive(clap::Args, Debug)]
pub struct RewriteOutput {
    /// Check and report what would change; write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Machine-readable report (schema in docs/guide/pruning.md)
    #[arg(long)]
    pub json: bool,
    /// Skip re-reading the output before it replaces anything
    #[arg(long)]
    pub no_verify: bool,
    /// The output file (- for standard output)
    #[arg(short, long, value_name = "OUT", required_unless_present = "dry_run")]
    pub output: Option<String>,
}

/// What every command runs with: the name to prefix messages with, and
/// the `--color` choice.
pub struct Context {
    pub argv0: String,
    pub color: ColorChoice,
}

impl Context {
    /// The colours of a command's text output (none for JSON).
    pub fn colors(&self, json: bool) -> Colors {
        Colors::new(self.color, json)
    }
}

/// Parses the whole command line (program name first); help, version and
/// usage errors come back as clap's error, which prints itself and knows
/// its exit status (0 for help and version, 2 for a bad command line).
pub fn parse<I, T>(argv: I) -> Result<(Sub, Globals), clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(argv)?;
    let command = cli.command.validated()?;
    Ok((command, Globals { color: cli.color, bytes: cli.bytes }))
}

/// The options every command takes (`--color`, `--bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Globals {
    pub color: ColorChoice,
    pub bytes: bool,
}

/// A clap usage error (exit 2) reported for subcommand `name`, for the
/// rules clap's derive cannot state.
pub fn usage_error(name: &str, kind: clap::error::ErrorKind, msg: &str) -> clap::Error {
    use clap::CommandFactory;
    let mut cli = Cli::command();
    cli.build();
    match cli.find_subcommand_mut(name) {
        Some(sub) => sub.error(kind, msg),
        None => cli.error(kind, msg),
    }
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
