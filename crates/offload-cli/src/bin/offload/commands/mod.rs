//! The `offload` subcommands: one file (or folder) per command, each
//! owning its clap options and its `run`. A new command is a new file here
//! and one variant of [`Sub`].

pub mod check;
pub mod completions;
pub mod diff;
pub mod extract;
pub mod gpus;
pub mod join;
pub mod kernels;
mod kpack_split;
pub mod list;
pub mod man;
pub mod prune;
pub mod replace;
pub mod select;
pub mod size;
pub mod split;
pub mod verify;

use crate::cli::Context;
use clap::Subcommand;
use offload_inspect::select::Gpu;

#[derive(Subcommand, Debug)]
pub enum Sub {
    /// One row per code object (headers only)
    List(list::ListArgs),
    /// The code object a runtime loads on GPU, and why each other one is not loaded
    Select(select::SelectArgs),
    /// Write code objects to files (filters combine with 'or')
    Extract(extract::ExtractArgs),
    /// Deep structural check of every payload
    Verify(verify::VerifyArgs),
    /// One row per kernel: registers, LDS/shared memory, scratch, spills, limits and an occupancy estimate
    Kernels(kernels::KernelsArgs),
    /// Drop the device code of other GPU targets (HIP, CUDA, OpenMP; binaries, objects, archives)
    Prune(prune::PruneCli),
    /// Split a wheel per GPU family or target (--by), or fat binaries, folders and wheels into ROCm kpack form (--kpack)
    Split(split::SplitArgs),
    /// Join a binary split by 'offload split --kpack' with its archives: the fat original again
    Join(join::JoinArgs),
    /// Put a new code object in place of one entry of a HIP, CUDA or OpenMP binary, bundle, .fatbin or archive
    Replace(replace::ReplaceCli),
    /// The GPUs of this machine (KFD sysfs, NVML) and their target IDs
    Gpus(gpus::GpusArgs),
    /// Bytes per target and offload kind, and what prune --keep would save
    Size(size::SizeArgs),
    /// Code objects added, removed and changed from A to B (exit 0 identical, 1 different)
    Diff(diff::DiffArgs),
    /// Whether the GPUs load code from every program, library, folder or package given (exit 0 yes, 1 no)
    Check(check::CheckArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    Completions(completions::CompletionsArgs),
    /// Print the man page (roff), or write one page per command to a folder
    Man(man::ManArgs),
}

impl Sub {
    /// The command, once the rules clap's derive cannot state hold
    /// (usage errors, exit 2, otherwise).
    pub fn validated(self) -> Result<Sub, clap::Error> {
        if let Sub::Extract(e) = &self {
            e.validate()?;
        }
        Ok(self)
    }

    /// The warning to print before running: a GPU whose processor is not
    /// in the processor table (the run goes on, matching it as given).
    pub fn gpu_warning(&self) -> Option<String> {
        let warn = |g: &Gpu| crate::cli::gpu_warning("--gpu", g);
        match self {
            Sub::Select(s) => warn(&s.gpu),
            Sub::Extract(e) => e.gpu.as_ref().and_then(warn),
            Sub::Check(c) => c.gpu.iter().find_map(warn),
            Sub::Kernels(k) => k.gpu.as_ref().and_then(warn),
            _ => None,
        }
    }

    /// Makes the xnack mode of each `--gpu` that leaves it out explicit when
    /// `HSA_XNACK` sets it for every process (`Gpu::settle`). Without it a
    /// GPU named without its mode is matched as comgr and AMD's kpack
    /// loader match such an ISA name (code fixing xnack matches neither
    /// setting), and the note says so and how to name the mode; the driver's
    /// default is not guessed, since the oracles answer otherwise. Notes are
    /// printed where they matter (`cli::note_settled`;
    /// docs/reference/selection-rules.md).
    pub fn settle_gpus(&mut self) {
        let env = offload_host::gpus::Environment::from_process();
        let forced = std::env::var_os("HSA_XNACK").is_some();
        let mut settle = |g: &mut Gpu| {
            let (settled, note) = g.settle(|p| {
                if forced { offload_host::gpus::default_xnack(p, &env) } else { Err("HSA_XNACK is not set".into()) }
            });
            *g = settled;
            if let Some(note) = note {
                crate::cli::remember_settled(g, format!("--gpu {note}"));
            }
        };
        match self {
            Sub::Select(s) => settle(&mut s.gpu),
            Sub::Extract(e) => e.gpu.iter_mut().for_each(&mut settle),
            Sub::Check(c) => c.gpu.iter_mut().for_each(&mut settle),
            Sub::Kernels(k) => k.gpu.iter_mut().for_each(&mut settle),
            _ => {}
        }
    }

    /// Runs the command; returns its exit status.
    pub fn run(&self, ctx: &Context) -> u8 {
        match self {
            Sub::List(c) => c.run(ctx),
            Sub::Select(c) => c.run(ctx),
            Sub::Extract(c) => c.run(ctx),
            Sub::Verify(c) => c.run(ctx),
            Sub::Kernels(c) => c.run(ctx),
            Sub::Prune(c) => c.run(ctx),
            Sub::Replace(c) => c.run(ctx),
            Sub::Gpus(c) => c.run(ctx),
            Sub::Size(c) => c.run(ctx),
            Sub::Diff(c) => c.run(ctx),
            Sub::Check(c) => c.run(ctx),
            Sub::Split(c) => c.run(ctx),
            Sub::Join(c) => c.run(ctx),
            Sub::Completions(c) => c.run(ctx),
            Sub::Man(c) => c.run(ctx),
        }
    }
}
