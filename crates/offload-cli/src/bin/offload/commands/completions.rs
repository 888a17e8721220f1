//! `offload completions SHELL`: a shell completion script, generated from
//! the one clap definition ([`crate::cli::Cli`]).

use crate::cli::{Cli, Context};
use clap::CommandFactory;
use offload_cli::diag;

/// `offload completions`'s options.
#[derive(clap::Args, Debug, PartialEq, Eq)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

impl CompletionsArgs {
    pub fn run(&self, _ctx: &Context) -> u8 {
        let mut text = Vec::new();
        clap_complete::generate(self.shell, &mut Cli::command(), "offload", &mut text);
        if let Err(e) = std::io::Write::write_all(&mut std::io::stdout(), &text) {
            diag::output_failed(&e)
        }
        0
    }
}
