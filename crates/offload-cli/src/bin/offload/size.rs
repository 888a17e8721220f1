//! `offload size`: a placeholder on this branch; the coordinator replaces
//! this file with the real command (same entry point).

pub fn run(argv0: &str, paths: &[String], keep: &[String], json: bool) -> u8 {
    let _ = paths;
    let _ = keep;
    let _ = json;
    eprintln!("{argv0}: error: 'size' is not available yet");
    1
}
