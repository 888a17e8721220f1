//! `offload man`: the man pages, generated from the one clap definition
//! ([`crate::cli::Cli`]).

use crate::cli::Cli;
use clap::CommandFactory;
use offload_format::plan::Plan;
use std::path::Path;

/// The man page of `command` in roff.
fn page(command: clap::Command) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    // The footer names the tool and its version on every page (clap would
    // write the subcommand's name there).
    let source = format!("offload {}", crate::cli::VERSION);
    clap_mangen::Man::new(command).source(source).render(&mut out)?;
    Ok(out)
}

/// The pages: `offload.1`, then `offload-COMMAND.1` for each command.
pub fn pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    let mut pages = vec![("offload.1".to_string(), page(top.clone())?)];
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        // clap names a built subcommand's page after its display name
        // (`offload-list`); name the file the same way.
        let name = sub.get_display_name().unwrap_or_else(|| sub.get_name()).to_string();
        pages.push((format!("{name}.1"), page(sub.clone())?));
    }
    Ok(pages)
}

/// `offload man`'s options.
#[derive(clap::Args, Debug, PartialEq, Eq)]
pub struct ManArgs {
    /// Write offload.1 and offload-COMMAND.1 into DIR
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<std::path::PathBuf>,
}

impl ManArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        man(&ctx.argv0, self.output_dir.as_deref())
    }
}

/// `offload man`: `offload.1` on standard output, or every page written
/// into `dir` (all or none: staged, then committed).
fn man(argv0: &str, dir: Option<&Path>) -> u8 {
    let pages = match pages() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{argv0}: error: cannot render the man page: {e}");
            return 1;
        }
    };
    let Some(dir) = dir else {
        use std::io::Write;
        let top = pages.first().map(|(_, bytes)| bytes.as_slice()).unwrap_or_default();
        return match std::io::stdout().write_all(top) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{argv0}: error: standard output: {e}");
                1
            }
        };
    };
    let mut outputs = offload_io::Outputs::new();
    for (name, bytes) in &pages {
        let path = dir.join(name).to_string_lossy().into_owned();
        if let Err(e) = outputs.stage(&path, &Plan::borrowed(bytes), &[]) {
            eprintln!("{argv0}: error: {e}");
            return 1;
        }
    }
    if let Err(e) = outputs.commit() {
        eprintln!("{argv0}: error: {e}");
        return 1;
    }
    0
}
