//! `offload gpus`: a placeholder on this branch; the coordinator replaces
//! this file with the real command (same entry point).

pub fn run(argv0: &str, sysfs_root: Option<&std::path::Path>, json: bool) -> u8 {
    let _ = sysfs_root;
    let _ = json;
    eprintln!("{argv0}: error: 'gpus' is not available yet");
    1
}
