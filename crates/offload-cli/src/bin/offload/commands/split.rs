//! `offload split`: one input into several outputs. Each kind of split is
//! a mode of the `mode` group (one required) with its own options below
//! it: `--by family|target` writes self-contained wheels, each pruned to
//! what its GPUs load (`offload_rewrite::split`, docs/guide/split.md);
//! `--kpack` moves HIP device code into ROCm kpack archives
//! (`kpack_split.rs`, docs/guide/kpack.md). A new mode is a new flag in the
//! group, its options, and a branch in [`SplitArgs::run`].

use super::kpack_split;
use clap::{ArgGroup, ValueEnum};
use offload_inspect::select::Gpu;
use offload_rewrite::split::{self, By};
use offload_rewrite::tree::Options;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "Examples:
  offload split --by family cupy_cuda12x-13.6.0-cp312-cp312-manylinux2014_x86_64.whl -o wheels   # +sm8x, +sm9x, ... wheels
  offload split --by target --gpu gfx942,gfx1100 jax_rocm7_pjrt-0.7.1-py3-none-manylinux_2_28_x86_64.whl -o wheels
  offload split --kpack libfoo.so -o split        # split/libfoo.so and split/.kpack/libfoo_<target>.kpack
  offload split --kpack /opt/rocm/lib -o split    # every HIP library of the folder, one archive per target
  offload split --kpack torch-2.9-cp312-cp312-linux_x86_64.whl -o wheels   # host wheel + device wheels
  pip install wheels/*.whl                         # the host wheel and the device wheels you want";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SplitBy {
    /// One wheel per CUDA SM major version (sm8x, sm9x) and per AMD target
    Family,
    /// One wheel per GPU target (sm80, sm86, gfx90a, gfx942)
    Target,
}

/// `offload split`'s options.
#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("mode").required(true)), after_help = EXAMPLES)]
pub struct SplitArgs {
    /// Self-contained wheels, each pruned to what its GPUs load and relabelled (+sm9x, +gfx942):
    /// one per CUDA SM family and AMD target, or one per GPU target
    #[arg(long, value_enum, group = "mode", value_name = "HOW")]
    pub by: Option<SplitBy>,
    /// --by: only the wheels serving these GPUs (comma-separated: sm_90,gfx942)
    #[arg(long, value_name = "GPU[,GPU...]", value_delimiter = ',', requires = "by")]
    pub gpu: Vec<String>,
    /// --by: show the wheels that would be written; write nothing
    #[arg(long, requires = "by")]
    pub dry_run: bool,
    /// Move HIP device code into ROCm kpack archives: each fat binary's code objects go to
    /// .kpack/<group>_<target>.kpack (one archive per target ID, generic and sramecc/xnack
    /// variants included), the binary keeps a marker AMD's runtime resolves. A wheel gives a
    /// host wheel plus one device wheel per processor (docs/formats/kpack.md)
    #[arg(long, group = "mode")]
    pub kpack: bool,
    /// --kpack: the archives' group name [default: a wheel's name, else the input's name up to its first '.']
    #[arg(long, value_name = "NAME", requires = "kpack")]
    pub group: Option<String>,
    /// --kpack: zstd level of the archives (AMD's splitters use 3)
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22), requires = "kpack")]
    pub level: i32,
    /// --kpack: threads compressing code objects [default: one per core]
    #[arg(short = 'j', long, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub jobs: usize,
    /// --kpack on a wheel: the device wheels' name prefix (<prefix>-<processor>) [default: <name>-device]
    #[arg(long, value_name = "PREFIX", requires = "kpack")]
    pub device_prefix: Option<String>,
    /// The folder to write (created if missing; with --kpack it must not exist or be empty)
    #[arg(short, long, visible_alias = "output-dir", value_name = "DIR", required_unless_present = "dry_run")]
    pub output: Option<PathBuf>,
    /// --by: the wheel to split; --kpack: a HIP library or executable, a folder, or a wheel (.whl)
    #[arg(value_name = "IN")]
    pub input: PathBuf,
}

impl SplitArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        let argv0 = &ctx.argv0;
        if self.kpack {
            let Some(output) = &self.output else {
                eprintln!("{argv0}: error: --kpack needs -o DIR");
                return 2;
            };
            let (group, prefix) = (self.group.as_deref(), self.device_prefix.as_deref());
            return kpack_split::split(argv0, &self.input, output, group, self.level, self.jobs, prefix);
        }
        match self.by {
            Some(by) => by_groups(argv0, by, &self.gpu, self.dry_run, self.output.as_deref(), &self.input),
            // clap requires one mode.
            None => 2,
        }
    }
}

/// `--by`: one wheel per group of GPUs; returns the exit status.
fn by_groups(argv0: &str, by: SplitBy, gpu: &[String], dry_run: bool, output: Option<&Path>, input: &Path) -> u8 {
    let mut only = Vec::new();
    for g in gpu {
        match Gpu::parse(g) {
            Ok(gpu) => only.push(gpu),
            Err(e) => {
                eprintln!("{argv0}: error: --gpu {g}: {e}");
                return 2;
            }
        }
    }
    let path = &input.to_string_lossy().into_owned();
    let input = match offload_io::Input::open(path) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("{argv0}: error: '{path}': {}", offload_io::error_text(&e));
            return 2;
        }
    };
    let by = match by {
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
    let dir = output.map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    if !dry_run && let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("{argv0}: error: '{}': {}", dir.display(), offload_io::error_text(&e));
        return 2;
    }
    let name = std::path::Path::new(path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let opts = Options { dry_run, ..Default::default() };
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
            let verb = if dry_run { "would write" } else { "wrote" };
            println!("{path}: {total} bytes; {verb} {} wheels in {}", done.len(), dir.display());
            0
        }
        Err(e) => {
            eprintln!("{argv0}: error: {path}: {e}");
            1
        }
    }
}
