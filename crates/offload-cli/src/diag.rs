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
