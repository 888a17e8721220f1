//! `offload split`: one fat wheel into per-target or per-family wheels
//! (`offload_rewrite::split`, docs/guide/split.md).

use clap::{Args, ValueEnum};
use offload_inspect::select::Gpu;
use offload_rewrite::split::{self, By};
use offload_rewrite::tree::Options;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SplitBy {
    /// One wheel per CUDA SM major version (sm8x, sm9x) and per AMD target
    Family,
    /// One wheel per GPU target (sm80, sm86, gfx90a, gfx942)
    Target,
}

/// `offload split`'s options.
#[derive(Args, Clone, Debug, PartialEq, Eq)]
pub struct SplitArgs {
    /// How to group the output wheels
    #[arg(long, value_enum, default_value_t = SplitBy::Family)]
    pub by: SplitBy,
    /// Only the wheels serving these GPUs (comma-separated: sm_90,gfx942)
    #[arg(long, value_name = "GPU[,GPU...]", value_delimiter = ',')]
    pub gpu: Vec<String>,
    /// Split into kpack form (a host wheel and per-target device wheels)
    #[arg(long)]
    pub kpack: bool,
    /// Show the wheels that would be written; write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// The folder for the new wheels (created if missing)
    #[arg(short, long, value_name = "DIR", required_unless_present = "dry_run")]
    pub output_dir: Option<String>,
    /// The wheel to split
    #[arg(value_name = "WHEEL")]
    pub input: String,
}

impl SplitArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        run(&ctx.argv0, self)
    }
}

/// Runs the command; returns the exit status.
pub fn run(argv0: &str, args: &SplitArgs) -> u8 {
    if args.kpack {
        eprintln!("{argv0}: error: --kpack: splitting into kpack form is not available yet");
        return 2;
    }
    let mut only = Vec::new();
    for g in &args.gpu {
        match Gpu::parse(g) {
            Ok(gpu) => only.push(gpu),
            Err(e) => {
                eprintln!("{argv0}: error: --gpu {g}: {e}");
                return 2;
            }
        }
    }
    let path = &args.input;
    let input = match offload_io::Input::open(path) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{argv0}: error: '{path}': {}", offload_io::error_text(&e));
            return 2;
        }
    };
    let by = match args.by {
        SplitBy::Family => By::Family,
        SplitBy::Target => By::Target,
    };
    let (amd, cuda) = match split::targets(input.bytes()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{argv0}: error: {path}: {e}");
            return 1;
        }
    };
    let groups = split::groups(&amd, &cuda, by, &only);
    if groups.is_empty() {
        eprintln!("{argv0}: error: {path}: no GPU code for the GPUs asked for: nothing to split");
        return 1;
    }
    let dir = std::path::PathBuf::from(args.output_dir.as_deref().unwrap_or("."));
    if !args.dry_run
        && let Err(e) = std::fs::create_dir_all(&dir)
    {
        eprintln!("{argv0}: error: '{}': {}", dir.display(), offload_io::error_text(&e));
        return 2;
    }
    let name = std::path::Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let opts = Options { dry_run: args.dry_run, ..Default::default() };
    match split::split_wheel(input.bytes(), &name, &groups, &dir, &opts) {
        Ok(done) => {
            let total = input.bytes().len() as u64;
            let rows: Vec<Vec<String>> = done
                .iter()
                .map(|d| {
                    let size = d.report.output_size;
                    vec![
                        d.file_name.clone(),
                        d.group.gpus.join(","),
                        size.to_string(),
                        format!("{:.0}%", 100.0 * size as f64 / total.max(1) as f64),
                    ]
                })
                .collect();
            print!("{}", crate::output::table(&["WHEEL", "GPUS", "SIZE", "OF INPUT"], &rows));
            let verb = if args.dry_run { "would write" } else { "wrote" };
            println!("{path}: {total} bytes; {verb} {} wheels in {}", done.len(), dir.display());
            0
        }
        Err(e) => {
            eprintln!("{argv0}: error: {path}: {e}");
            1
        }
    }
}
