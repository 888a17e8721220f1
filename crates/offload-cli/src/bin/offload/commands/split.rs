//! `offload split`: one input into several outputs. Each kind of split is
//! a mode flag of the `mode` group (one required) with its own options
//! below it; `--kpack` moves HIP device code into ROCm kpack archives
//! (`kpack_split.rs`). A new mode is a new flag in the group, its options,
//! and a branch in [`SplitArgs::run`].

use super::kpack_split;
use clap::ArgGroup;
use std::path::PathBuf;

const EXAMPLES: &str = "Examples:
  offload split --kpack libfoo.so -o split        # split/libfoo.so and split/.kpack/libfoo_<target>.kpack
  offload split --kpack /opt/rocm/lib -o split    # every HIP library of the folder, one archive per target
  offload split --kpack torch-2.9-cp312-cp312-linux_x86_64.whl -o wheels   # host wheel + device wheels
  pip install wheels/*.whl                         # the host wheel and the device wheels you want";

/// `offload split`'s options.
#[derive(clap::Args, Debug)]
#[command(group(ArgGroup::new("mode").required(true)), after_help = EXAMPLES)]
pub struct SplitArgs {
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
    /// The folder to write (created; it must not exist or be empty)
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// A HIP library or executable, a folder, or a wheel (.whl)
    #[arg(value_name = "IN")]
    pub input: PathBuf,
}

impl SplitArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        if self.kpack {
            let (group, prefix) = (self.group.as_deref(), self.device_prefix.as_deref());
            return kpack_split::split(&ctx.argv0, &self.input, &self.output, group, self.level, self.jobs, prefix);
        }
        // clap requires one mode.
        2
    }
}
