//! `offload diff`: a placeholder on this branch; the coordinator replaces
//! this file with the real command (same entry point).

pub fn run(argv0: &str, a: &str, b: &str, json: bool) -> u8 {
    let _ = a;
    let _ = b;
    let _ = json;
    eprintln!("{argv0}: error: 'diff' is not available yet");
    1
}
