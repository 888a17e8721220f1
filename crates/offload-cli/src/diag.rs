//! Messages in LLVM's form: `<argv0>: error: <message>` and exit code 1.

use std::process::ExitCode;

/// `argv[0]` exactly as the tool was invoked (LLVM prints it verbatim).
pub fn argv0() -> String {
    std::env::args_os().next().map(|a| a.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The command-line arguments after `argv[0]`; arguments that are not valid
/// UTF-8 are converted lossily.
pub fn args() -> Vec<String> {
    std::env::args_os().skip(1).map(|a| a.to_string_lossy().into_owned()).collect()
}

/// Prints `<argv0>: error: <message>` and returns exit code 1.
pub fn error(argv0: &str, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("{argv0}: error: {message}");
    ExitCode::from(1)
}

/// Prints `<argv0>: warning: <message>`.
pub fn warning(argv0: &str, message: impl std::fmt::Display) {
    eprintln!("{argv0}: warning: {message}");
}

/// Runs the cl parser and handles help, version and command-line errors.
pub fn parse_or_exit(spec: &crate::cl::ToolSpec, argv0: &str) -> Result<crate::cl::Parsed, ExitCode> {
    use std::io::Write;
    match spec.parse(argv0, &args()) {
        crate::cl::Outcome::Run(p) => Ok(p),
        crate::cl::Outcome::Print(text) => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            Err(ExitCode::SUCCESS)
        }
        crate::cl::Outcome::Fail(text) => {
            let _ = std::io::stderr().write_all(text.as_bytes());
            Err(ExitCode::from(1))
        }
    }
}

/// Reports a failed write to standard output (`/dev/full`, a closed file,
/// a full disk) as `<argv0>: error: standard output: <reason>` and exits 2.
/// A pipe whose reader went away is not this case: SIGPIPE ends the
/// process first, as for `cat` (docs/reliability.md).
pub fn output_failed(e: &std::io::Error) -> ! {
    use std::io::Write;
    let text = e.to_string();
    let reason = text.split(" (os error ").next().unwrap_or_default();
    let _ = writeln!(std::io::stderr(), "{}: error: standard output: {reason}", argv0());
    std::process::exit(2)
}

/// Makes a failed `print!` to standard output or standard error an error
/// message and exit status 2 instead of a panic (exit 101): the standard
/// library panics with `failed printing to stdout: <reason>`.
pub fn report_output_errors() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text =
            payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied());
        match text.and_then(|t| t.strip_prefix("failed printing to std")) {
            Some(rest) => {
                use std::io::Write;
                let reason = rest.split_once(": ").map_or(rest, |(_, r)| r);
                let reason = reason.split(" (os error ").next().unwrap_or_default();
                let stream = if rest.starts_with("out") { "standard output" } else { "standard error" };
                let _ = writeln!(std::io::stderr(), "{}: error: {stream}: {reason}", argv0());
                std::process::exit(2)
            }
            None => default(info),
        }
    }));
}

/// Flushes standard output at the end of a run: a write that failed only
/// here (the last line had no newline) is reported like any other.
pub fn flush_stdout() {
    use std::io::Write;
    if let Err(e) = std::io::stdout().flush() {
        output_failed(&e)
    }
}
