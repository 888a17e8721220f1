//! `offload join`: the reverse of `offload split --kpack` for one binary
//! (`kpack_split.rs` does the work).

use super::kpack_split;
use std::path::PathBuf;

const EXAMPLES: &str = "Examples:
  offload split --kpack libfoo.so -o split
  offload join split/libfoo.so -o libfoo.so       # the original library, byte for byte
  offload join lib/libfoo.so --archives /mnt/kpack -o libfoo.so";

/// `offload join`'s options.
#[derive(clap::Args, Debug)]
#[command(after_help = EXAMPLES)]
pub struct JoinArgs {
    /// Where the archives are [default: where the binary's search paths lead]
    #[arg(long, value_name = "DIR")]
    pub archives: Option<PathBuf>,
    /// The file to write (- for standard output)
    #[arg(short, long, value_name = "FILE")]
    pub output: String,
    /// A host binary split by offload split --kpack
    #[arg(value_name = "IN")]
    pub input: PathBuf,
}

impl JoinArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        kpack_split::join(&ctx.argv0, &self.input, &self.output, self.archives.as_deref())
    }
}
