//! The command line, defined once with clap: `--help`, the shell
//! completions (`offload completions SHELL`) and the man page (`offload
//! man`) all come from [`Cli`]. [`parse`] turns it into a [`Command`], the
//! form the commands run from.

use clap::{ArgGroup, Args, CommandFactory, Parser, Subcommand, ValueEnum};
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
Exit status: 0 success; 1 nothing found, nothing loadable, verify found
errors, or a file could not be read; 2 bad command line.";

const GPU_SHORT: &str = "The GPU, as a target ID: gfx90a:xnack+, sm_80, ...";

const GPU_HELP: &str = "A target ID: gfx90a:xnack+, gfx950:sramecc+:xnack-, \
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
    /// Colour in text output
    ///
    /// auto colours only a terminal, and not when NO_COLOR is set (non-empty);
    /// JSON is never coloured.
    #[arg(long, value_enum, global = true, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
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
    fn runtime(self) -> Runtime {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Zero the dropped code objects in place (the file keeps its size)
    Zero,
    /// Cut them out: the file shrinks (GNU strip/objcopy must not run on it afterwards)
    Cut,
}

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// One row per code object (headers only)
    List {
        /// Machine-readable output (schema in docs/reference/json.md)
        #[arg(long)]
        json: bool,
        /// Add a URI column: each code object's ROCm code-object URI (always in --json)
        #[arg(long)]
        uri: bool,
        /// Files, packages or folders (- for standard input)
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
    },
    /// The code object a runtime loads on GPU, and why each other one is not loaded
    Select {
        #[arg(long, value_parser = parse_gpu, help = GPU_SHORT, long_help = GPU_HELP)]
        gpu: Gpu,
        /// The runtime that loads the code [default: cuda for an NVIDIA GPU, else hip]
        #[arg(long, value_enum)]
        kind: Option<Kind>,
        /// kpack-split binaries: the search order of AMD's kpack loader to follow
        #[arg(long, value_enum, default_value_t)]
        kpack_order: KpackOrder,
        /// Machine-readable output (schema in docs/reference/json.md)
        #[arg(long)]
        json: bool,
        /// Add a URI column: each code object's ROCm code-object URI (always in --json)
        #[arg(long)]
        uri: bool,
        /// Files, packages or folders (- for standard input)
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
    },
    /// Write code objects to files (filters combine with 'or')
    Extract(ExtractArgs),
    /// Deep structural check of every payload
    Verify {
        /// Machine-readable output (schema in docs/reference/json.md)
        #[arg(long)]
        json: bool,
        /// Files, packages or folders (- for standard input)
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
    },
    /// Drop the device code of other GPU targets (HIP, CUDA, OpenMP; binaries, objects, archives)
    Prune(PruneCli),
    /// One fat wheel into wheels per CUDA SM family or GPU target, each pruned and relabelled (+sm9x)
    Split(crate::split::SplitArgs),
    /// Put a new code object in place of one entry of a HIP, CUDA or OpenMP binary, bundle, .fatbin or archive
    Replace(ReplaceCli),
    /// The GPUs of this machine (KFD sysfs, NVML) and their target IDs
    Gpus {
        /// Read sysfs under DIR instead of / (default: $OFFLOAD_SYSFS_ROOT, read by the command)
        #[arg(long, value_name = "DIR")]
        sysfs_root: Option<std::path::PathBuf>,
        /// Machine-readable output (schema in docs/reference/json.md)
        #[arg(long)]
        json: bool,
    },
    /// Bytes per target and offload kind, and what prune --keep would save
    Size {
        /// Targets prune would keep (comma-separated, repeatable)
        #[arg(long, value_name = "T[,T...]", value_delimiter = ',')]
        keep: Vec<String>,
        /// Machine-readable output (schema in docs/reference/json.md)
        #[arg(long)]
        json: bool,
        /// Files, packages or folders
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<String>,
    },
    /// Code objects added, removed and changed from A to B (exit 0 identical, 1 different)
    Diff {
        /// Machine-readable output (schema in docs/reference/json.md)
        #[arg(long)]
        json: bool,
        /// The old file, package or folder
        a: String,
        /// The new one
        b: String,
    },
    /// Whether the GPUs load code from every program, library, folder or package given (exit 0 yes, 1 no)
    Check(CheckArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), or write one page per command to a folder
    Man {
        /// Write offload.1 and offload-COMMAND.1 into DIR
        #[arg(long, value_name = "DIR")]
        output_dir: Option<std::path::PathBuf>,
    },
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("filter").multiple(true)))]
pub struct ExtractArgs {
    /// Every code object (not the containers)
    #[arg(long, group = "filter")]
    all: bool,
    /// The code object with this ID (repeatable)
    #[arg(long, value_name = "ID", group = "filter")]
    id: Vec<String>,
    /// The code objects for this target ID (repeatable)
    #[arg(long, value_name = "TARGET-ID", group = "filter")]
    target_id: Vec<String>,
    /// The code object with this index, counted across a package (repeatable)
    #[arg(long, value_name = "N", group = "filter")]
    index: Vec<usize>,
    #[arg(long, value_parser = parse_gpu, group = "filter", help = GPU_SHORT, long_help = GPU_HELP)]
    gpu: Option<Gpu>,
    /// The runtime that loads the code, with --gpu [default: cuda for an NVIDIA GPU, else hip]
    #[arg(long, value_enum, requires = "gpu")]
    kind: Option<Kind>,
    /// kpack-split binaries, with --gpu: the search order of AMD's kpack loader to follow
    #[arg(long, value_enum, default_value_t)]
    kpack_order: KpackOrder,
    /// The file to write (exactly one match; - for standard output)
    #[arg(short, long, value_name = "FILE", conflicts_with = "output_dir")]
    output: Option<String>,
    /// Where to write [default: .]
    #[arg(long, value_name = "DIR")]
    output_dir: Option<String>,
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    json: bool,
    /// A file, package or folder (- for standard input) with filters; or,
    /// without filters, code-object URIs (file://PATH#offset=N&size=M)
    #[arg(value_name = "FILE|URI", required = true)]
    files: Vec<String>,
}

/// `offload check`'s options (docs/guide/checking.md).
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct CheckArgs {
    /// A GPU to check for (repeatable) [default: every GPU of this machine]
    #[arg(long, value_parser = parse_gpu, long_help = GPU_HELP)]
    pub gpu: Vec<Gpu>,
    /// Read sysfs under DIR when finding this machine's GPUs (default: $OFFLOAD_SYSFS_ROOT)
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<std::path::PathBuf>,
    /// Look libraries up below DIR: its etc/ld.so.cache, system folders and absolute RPATH/RUNPATH folders
    #[arg(long, value_name = "DIR")]
    pub root: Option<std::path::PathBuf>,
    /// Check only the files given, not the libraries programs and libraries need
    #[arg(long)]
    pub no_deps: bool,
    /// List every file checked (fat, standalone and host-only), not only the failures
    #[arg(short, long)]
    pub verbose: bool,
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
    /// Programs, libraries, code objects, packages or folders
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<String>,
}

/// The output options of the commands that rewrite a file (`prune`,
/// `replace`).
#[derive(Args, Debug)]
pub struct RewriteOutput {
    /// Check and report what would change; write nothing
    #[arg(long)]
    dry_run: bool,
    /// Machine-readable report (schema in docs/guide/pruning.md)
    #[arg(long)]
    json: bool,
    /// Skip re-reading the output before it replaces anything
    #[arg(long)]
    no_verify: bool,
    /// The output file (- for standard output)
    #[arg(short, long, value_name = "OUT", required_unless_present = "dry_run")]
    output: Option<String>,
}

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("targets").required(true).multiple(true)))]
pub struct PruneCli {
    /// Targets to keep: gfx90a, sm_80 (cubin), compute_80 (PTX), lto_80, x86_64-pc-linux-gnu (an OpenMP image); comma-separated, repeatable
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', group = "targets")]
    keep: Vec<String>,
    /// Targets to drop (comma-separated, repeatable)
    #[arg(long, value_name = "T[,T...]", value_delimiter = ',', group = "targets")]
    drop: Vec<String>,
    /// Keep what the runtime would load on this GPU (repeatable)
    #[arg(long, value_name = "GPU", value_parser = parse_gpu, group = "targets")]
    keep_gpu: Vec<Gpu>,
    /// How dropped code objects are removed
    #[arg(long, value_enum, default_value_t = Mode::Zero)]
    mode: Mode,
    /// Allow dropping every device code object of a fat binary
    #[arg(long)]
    allow_empty: bool,
    /// Level for recompressed bundles: zstd 1-22, zlib 1-9 (default: zstd 3, zlib 6, as LLVM)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i32).range(1..=22))]
    compression_level: Option<i32>,
    /// Check and report what would change; write nothing
    #[arg(long)]
    dry_run: bool,
    /// Machine-readable report (schema in docs/guide/pruning.md)
    #[arg(long)]
    json: bool,
    /// Skip re-reading the output before it replaces anything
    #[arg(long)]
    no_verify: bool,
    /// Rewrite IN itself (a file, or every file of a folder, each replaced atomically)
    #[arg(long, conflicts_with = "output")]
    in_place: bool,
    /// The output file (- for standard output)
    #[arg(short, long, value_name = "OUT", required_unless_present_any = ["dry_run", "in_place"])]
    output: Option<String>,
    /// A host binary, object, static archive, bundle, fat object or .fatbin; a wheel or zip, a tarball (.tar, .tar.gz, .tar.zst, .tar.xz) or a folder (docs/guide/prune-trees.md)
    #[arg(value_name = "IN")]
    input: String,
}

#[derive(Args, Debug)]
pub struct ReplaceCli {
    /// The entry to replace: its bundle entry ID or target ID (gfx90a:xnack+)
    #[arg(long, value_name = "ID")]
    entry: String,
    /// The fat binary, where several hold the entry (0-based, in file order)
    #[arg(long, value_name = "N")]
    unit: Option<usize>,
    /// In a static archive, the member to replace in (default: the one
    /// member holding the entry)
    #[arg(long, value_name = "NAME")]
    member: Option<String>,
    /// The new code object (an AMDGPU ELF file, an NVIDIA cubin or PTX)
    #[arg(long = "with", value_name = "CODE-OBJECT")]
    with: String,
    #[command(flatten)]
    out: RewriteOutput,
    /// The HIP, CUDA or OpenMP host binary (executable, shared library or object),
    /// bundle, .fatbin file or static archive
    #[arg(value_name = "IN")]
    input: String,
}

fn parse_gpu(text: &str) -> Result<Gpu, String> {
    Gpu::parse(text).map_err(|e| e.to_string())
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Filter {
    All,
    Id(String),
    TargetId(String),
    Index(usize),
    Gpu,
}

/// What to run, with every default applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    List {
        json: bool,
        uri: bool,
        files: Vec<String>,
    },
    Select {
        gpu: Gpu,
        runtime: Runtime,
        kpack_order: KpackOrder,
        json: bool,
        uri: bool,
        files: Vec<String>,
    },
    Extract {
        filters: Vec<Filter>,
        gpu: Option<Gpu>,
        runtime: Runtime,
        kpack_order: KpackOrder,
        output: Option<String>,
        dir: Option<String>,
        json: bool,
        file: String,
    },
    /// `extract URI...`: the ranges code-object URIs name.
    ExtractUri {
        uris: Vec<String>,
        output: Option<String>,
        dir: Option<String>,
        json: bool,
    },
    Verify {
        json: bool,
        files: Vec<String>,
    },
    Prune(PruneArgs),
    Replace(ReplaceArgs),
    Split(crate::split::SplitArgs),
    Gpus {
        sysfs_root: Option<std::path::PathBuf>,
        json: bool,
    },
    Size {
        paths: Vec<String>,
        keep: Vec<String>,
        json: bool,
    },
    Diff {
        a: String,
        b: String,
        json: bool,
    },
    Check(CheckArgs),
    Completions(clap_complete::Shell),
    Man {
        output_dir: Option<std::path::PathBuf>,
    },
}

/// `offload prune`'s options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PruneArgs {
    pub keep: Vec<String>,
    pub drop: Vec<String>,
    pub keep_gpu: Vec<Gpu>,
    pub allow_empty: bool,
    pub compression_level: Option<i32>,
    pub dry_run: bool,
    pub json: bool,
    pub verify: bool,
    /// `--mode cut`: pack the fat binaries and cut the freed pages out.
    pub cut: bool,
    /// `--in-place`: the output is the input (a folder's files each).
    pub in_place: bool,
    pub input: String,
    pub output: Option<String>,
}

/// `offload replace`'s options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplaceArgs {
    pub entry: String,
    pub unit: Option<usize>,
    pub member: Option<String>,
    pub with: String,
    pub dry_run: bool,
    pub json: bool,
    pub verify: bool,
    pub input: String,
    pub output: Option<String>,
}

/// The runtime for `--kind`, or the default for the GPU: an NVIDIA GPU is
/// served by the CUDA driver unless `--kind` says otherwise.
fn runtime(kind: Option<Kind>, gpu: Option<&Gpu>) -> Runtime {
    kind.map(Kind::runtime).unwrap_or(if gpu.is_some_and(|g| g.arch == "nvptx64") {
        Runtime::Cuda
    } else {
        Runtime::Hip
    })
}

/// `--keep a,,b` names two targets: empty items are dropped.
fn targets(list: Vec<String>) -> Vec<String> {
    list.into_iter().filter(|t| !t.is_empty()).collect()
}

/// Whether a command-line argument is a code-object URI rather than a
/// path (`memory://` too, refused later with a message that says why).
pub fn is_uri(arg: &str) -> bool {
    let scheme = arg.split_once("://").map_or("", |(s, _)| s);
    scheme.eq_ignore_ascii_case("file") || scheme.eq_ignore_ascii_case("memory")
}

/// `extract`: one FILE with filters, or URIs without any; clap's usage
/// errors (exit 2) otherwise.
fn extract_command(e: ExtractArgs) -> Result<Command, clap::Error> {
    use clap::error::ErrorKind;
    let usage = |kind: ErrorKind, msg: &str| {
        let mut cli = Cli::command();
        cli.build();
        match cli.find_subcommand_mut("extract") {
            Some(sub) => sub.error(kind, msg),
            None => cli.error(kind, msg),
        }
    };
    let filtered = e.all || !e.id.is_empty() || !e.target_id.is_empty() || !e.index.is_empty() || e.gpu.is_some();
    let uris = e.files.iter().filter(|f| is_uri(f)).count();
    if uris > 0 {
        if uris != e.files.len() {
            return Err(usage(ErrorKind::ArgumentConflict, "URIs and files cannot be mixed: give URIs, or one FILE"));
        }
        if filtered {
            return Err(usage(ErrorKind::ArgumentConflict, "a URI names its code objects: filters do not apply"));
        }
        return Ok(Command::ExtractUri { uris: e.files, output: e.output, dir: e.output_dir, json: e.json });
    }
    if !filtered {
        let msg = "one of --all, --id, --target-id, --index, --gpu is required with a FILE";
        return Err(usage(ErrorKind::MissingRequiredArgument, msg));
    }
    if e.files.len() != 1 {
        return Err(usage(ErrorKind::TooManyValues, "one FILE at a time (several URIs may be given)"));
    }
    Ok(Sub::Extract(e).into())
}

impl From<Sub> for Command {
    fn from(sub: Sub) -> Command {
        match sub {
            Sub::List { json, uri, files } => Command::List { json, uri, files },
            Sub::Verify { json, files } => Command::Verify { json, files },
            Sub::Select { gpu, kind, kpack_order, json, uri, files } => {
                Command::Select { runtime: runtime(kind, Some(&gpu)), gpu, kpack_order, json, uri, files }
            }
            Sub::Extract(e) => {
                let mut filters = Vec::new();
                if e.all {
                    filters.push(Filter::All);
                }
                filters.extend(e.id.into_iter().map(Filter::Id));
                filters.extend(e.target_id.into_iter().map(Filter::TargetId));
                filters.extend(e.index.into_iter().map(Filter::Index));
                if e.gpu.is_some() {
                    filters.push(Filter::Gpu);
                }
                Command::Extract {
                    filters,
                    runtime: runtime(e.kind, e.gpu.as_ref()),
                    kpack_order: e.kpack_order,
                    gpu: e.gpu,
                    output: e.output,
                    dir: e.output_dir,
                    json: e.json,
                    file: e.files.into_iter().next().unwrap_or_default(),
                }
            }
            Sub::Prune(p) => Command::Prune(PruneArgs {
                keep: targets(p.keep),
                drop: targets(p.drop),
                keep_gpu: p.keep_gpu,
                allow_empty: p.allow_empty,
                compression_level: p.compression_level,
                dry_run: p.dry_run,
                json: p.json,
                verify: !p.no_verify,
                cut: p.mode == Mode::Cut,
                in_place: p.in_place,
                input: p.input,
                output: p.output,
            }),
            Sub::Split(s) => Command::Split(s),
            Sub::Replace(r) => Command::Replace(ReplaceArgs {
                entry: r.entry,
                unit: r.unit,
                member: r.member,
                with: r.with,
                dry_run: r.out.dry_run,
                json: r.out.json,
                verify: !r.out.no_verify,
                input: r.input,
                output: r.out.output,
            }),
            Sub::Gpus { sysfs_root, json } => Command::Gpus { sysfs_root, json },
            Sub::Size { keep, json, paths } => Command::Size { paths, keep: targets(keep), json },
            Sub::Diff { json, a, b } => Command::Diff { a, b, json },
            Sub::Check(c) => Command::Check(c),
            Sub::Completions { shell } => Command::Completions(shell),
            Sub::Man { output_dir } => Command::Man { output_dir },
        }
    }
}

/// Parses the whole command line (program name first); help, version and
/// usage errors come back as clap's error, which prints itself and knows
/// its exit status (0 for help and version, 2 for a bad command line).
pub fn parse<I, T>(argv: I) -> Result<(Command, ColorChoice), clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::try_parse_from(argv)?;
    let command = match cli.command {
        Sub::Extract(e) => extract_command(e)?,
        other => other.into(),
    };
    Ok((command, cli.color))
}

/// The warning to print before running `command`: its GPU's processor is
/// not in the processor table (the run goes on, matching it as given).
pub fn gpu_warning(command: &Command) -> Option<String> {
    match command {
        Command::Select { gpu, .. } | Command::Extract { gpu: Some(gpu), .. } => {
            gpu.warning().map(|w| format!("--gpu: {w}"))
        }
        Command::Check(c) => c.gpu.iter().find_map(Gpu::warning).map(|w| format!("--gpu: {w}")),
        _ => None,
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
