//! `offload`: one inspector for every container of GPU code. Lists the code
//! objects of any file, says which one a runtime loads on a given GPU (and
//! why the others are not loaded), extracts them, and verifies structure.

mod cli;
mod commands;
mod inputs;
mod output;
mod progress;

use offload_cli::diag;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Like `cat` and `ls`: a reader that goes away (`offload list | head`)
    // ends the process quietly. Rust ignores SIGPIPE, which turns the
    // failed write into a panic inside `println!`.
    // SAFETY: setting a signal disposition to its default before any
    // thread starts has no memory-safety preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // SIGINT, SIGTERM and SIGHUP remove the staging files of outputs not
    // yet committed, then end the process by the signal.
    offload_io::remove_staging_on_signals();
    diag::report_output_errors();
    let argv0 = diag::argv0();
    let (mut command, globals) = match cli::parse(std::env::args_os()) {
        Ok(parsed) => parsed,
        // Help and version (exit 0, standard output) and usage errors
        // (exit 2, standard error): clap prints them.
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    if let Some(warning) = command.gpu_warning() {
        eprintln!("{argv0}: warning: {warning}");
    }
    command.settle_gpus();
    output::set_layout(output::Layout::for_stdout(globals.bytes));
    let code = command.run(&cli::Context { argv0, color: globals.color });
    diag::flush_stdout();
    ExitCode::from(code)
}
