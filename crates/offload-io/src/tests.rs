//! The I/O policy's promises: outputs appear only on commit, failures
//! change nothing, links are followed, holes read as zeros.

use super::*;
use offload_format::plan::{Piece, Plan};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[test]
fn staged_outputs_appear_only_on_commit() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    fs::write(&a, b"old").unwrap();
    let mut outs = Outputs::new();
    outs.stage(a.to_str().unwrap(), &Plan::borrowed(b"new-a"), &[]).unwrap();
    outs.stage(b.to_str().unwrap(), &Plan::borrowed(b"new-b"), &[]).unwrap();
    assert_eq!(fs::read(&a).unwrap(), b"old");
    assert!(!b.exists());
    outs.commit().unwrap();
    assert_eq!(fs::read(&a).unwrap(), b"new-a");
    assert_eq!(fs::read(&b).unwrap(), b"new-b");
}

#[test]
fn long_zero_runs_become_holes_and_read_as_zeros() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sparse");
    // Zeros in the middle and at the end (the file must still reach
    // its full length), a short run written as bytes, other fills kept.
    let mut plan = Plan::borrowed(b"head");
    plan.zeros(8 << 20);
    plan.own(b"middle".to_vec());
    plan.zeros(100);
    plan.pieces.push(Piece::Fill { byte: 0xcc, len: 1 << 17 });
    plan.zeros(4 << 20);
    let mut outs = Outputs::new();
    outs.stage(out.to_str().unwrap(), &plan, &[]).unwrap();
    outs.commit().unwrap();
    let got = fs::read(&out).unwrap();
    assert_eq!(got, plan.to_vec());
    // Where the file system makes holes (ext4, xfs, tmpfs), the 12 MiB
    // of zeros take no blocks.
    let blocks = fs::metadata(&out).unwrap().blocks() * 512;
    assert!(blocks < 2 << 20, "{blocks} bytes allocated for a 12 MiB file of mostly zeros");
}

#[test]
fn filling_zeroed_ranges_gives_the_whole_plan() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("filled");
    // The plan: bytes, a fill of 0xcc and zeros straddling the two
    // ranges, so every piece kind is cut at a range edge.
    let mut plan = Plan::borrowed(b"0123456789");
    plan.fill(0xcc, 6);
    plan.own(b"abcdef".to_vec());
    plan.zeros(4);
    plan.own(b"tail".to_vec());
    let full = plan.to_vec();
    let ranges = [(8u64, 10u64), (22, 4)];
    let mut skeleton = full.clone();
    for &(o, l) in &ranges {
        skeleton[o as usize..(o + l) as usize].fill(0);
    }
    let mut outs = Outputs::new();
    outs.stage(out.to_str().unwrap(), &Plan::borrowed(&skeleton), &[]).unwrap();
    outs.fill_zeroed(0, &plan, &ranges, &[]).unwrap();
    outs.commit().unwrap();
    assert_eq!(fs::read(&out).unwrap(), full);
}

#[test]
fn dropped_outputs_leave_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let mut outs = Outputs::new();
    outs.stage(a.to_str().unwrap(), &Plan::borrowed(b"x"), &[]).unwrap();
    drop(outs);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// A rename that fails at commit (here: the last destination became a
/// directory after staging) puts back every output renamed before it.
#[test]
fn a_failed_commit_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    fs::write(p("a"), b"old-a").unwrap();
    fs::write(p("c"), b"old-c").unwrap();
    let mut outs = Outputs::new();
    for name in ["a", "b", "c", "d"] {
        outs.stage(&p(name), &Plan::borrowed(name.as_bytes()), &[]).unwrap();
    }
    fs::create_dir(p("d")).unwrap();
    fs::write(dir.path().join("d/keep"), b"").unwrap();
    let e = outs.commit().unwrap_err();
    assert!(e.path.ends_with("/d"), "{e}");
    assert_eq!(fs::read(p("a")).unwrap(), b"old-a");
    assert_eq!(fs::read(p("c")).unwrap(), b"old-c");
    assert!(!Path::new(&p("b")).exists());
    assert_eq!(names_in(dir.path()), ["a", "c", "d"]);
}

#[test]
fn a_successful_commit_leaves_no_backups() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    fs::write(p("a"), b"old-a").unwrap();
    let mut outs = Outputs::new();
    outs.stage(&p("a"), &Plan::borrowed(b"new-a"), &[]).unwrap();
    outs.stage(&p("b"), &Plan::borrowed(b"new-b"), &[]).unwrap();
    outs.commit().unwrap();
    assert_eq!(fs::read(p("a")).unwrap(), b"new-a");
    assert_eq!(names_in(dir.path()), ["a", "b"]);
}

/// Links are followed, dangling or not: the link stays, its target is
/// written.
#[test]
fn symbolic_links_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    fs::create_dir(&sub).unwrap();
    std::os::unix::fs::symlink("sub/target", dir.path().join("link")).unwrap();
    std::os::unix::fs::symlink("link", dir.path().join("link2")).unwrap();
    let mut outs = Outputs::new();
    outs.stage(dir.path().join("link2").to_str().unwrap(), &Plan::borrowed(b"one"), &[]).unwrap();
    outs.commit().unwrap();
    assert_eq!(fs::read(sub.join("target")).unwrap(), b"one");
    assert!(fs::symlink_metadata(dir.path().join("link")).unwrap().file_type().is_symlink());
    let mut outs = Outputs::new();
    outs.stage(dir.path().join("link").to_str().unwrap(), &Plan::borrowed(b"two"), &[]).unwrap();
    outs.commit().unwrap();
    assert_eq!(fs::read(sub.join("target")).unwrap(), b"two");
    assert_eq!(names_in(&sub), ["target"]);
    // A loop of links is an error, as for open(2).
    let looped = dir.path().join("loop");
    std::os::unix::fs::symlink("loop", &looped).unwrap();
    let e = Outputs::new().stage(looped.to_str().unwrap(), &Plan::borrowed(b"x"), &[]).unwrap_err();
    assert_eq!(e.error.raw_os_error(), Some(libc::ELOOP));
    assert!(fs::symlink_metadata(&looped).unwrap().file_type().is_symlink());
}

/// A link another user planted in a sticky world-writable folder is not
/// followed (the kernel's protected_symlinks rule): the output is refused
/// and the link's target keeps its bytes. Needs root to give the link to
/// another user; skipped otherwise (the rule itself is tested below).
#[test]
fn planted_links_in_sticky_folders_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = dir.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let link = shared.join("out.bin");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    if std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).is_err() {
        return;
    }
    let e = Outputs::new().stage(link.to_str().unwrap(), &Plan::borrowed(b"evil"), &[]).unwrap_err();
    assert_eq!(e.error.raw_os_error(), Some(libc::EACCES));
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    assert_eq!(names_in(&shared), ["out.bin"]);
    // The same link owned by us is followed, as anywhere else.
    std::os::unix::fs::lchown(&link, Some(0), Some(0)).unwrap();
    let mut outs = Outputs::new();
    outs.stage(link.to_str().unwrap(), &Plan::borrowed(b"mine"), &[]).unwrap();
    outs.commit().unwrap();
    assert_eq!(fs::read(&victim).unwrap(), b"mine");
}

#[test]
fn link_following_rule_matches_protected_symlinks() {
    use crate::outputs::may_follow;
    // An ordinary folder: any link is followed.
    assert!(may_follow(0o40755, 0, 1000, 0));
    assert!(may_follow(0o40777, 0, 1000, 0));
    // Sticky and world-writable: only our links or the folder owner's.
    assert!(!may_follow(0o41777, 0, 1000, 0));
    assert!(may_follow(0o41777, 0, 0, 0));
    assert!(may_follow(0o41777, 1000, 1000, 0));
    assert!(may_follow(0o41777, 0, 1000, 1000));
    // Sticky but not world-writable (group-shared): followed.
    assert!(may_follow(0o41770, 0, 1000, 0));
}

#[test]
fn missing_directory_is_reported_like_llvm() {
    let mut outs = Outputs::new();
    let e = outs.stage("/nonexistent-dir/x", &Plan::new(), &[]).unwrap_err();
    assert_eq!(e.to_string(), "'/nonexistent-dir/x': No such file or directory");
}

/// A mapped input file of `len` patterned bytes in `dir`.
fn patterned_input(dir: &Path, len: u32) -> Input {
    let src = dir.join("src");
    let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(&src, &data).unwrap();
    Input::open(src.to_str().unwrap()).unwrap()
}

#[test]
fn filling_zeroed_ranges_copies_from_the_mapped_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = patterned_input(dir.path(), 300_000);
    let bytes = input.bytes();
    // The output: the input with 100,000 bytes at 50,000 zeroed, then
    // the first 60,000 of them filled back from the input.
    let mut plan = Plan::borrowed(&bytes[..110_000]);
    plan.zeros(40_000);
    plan.borrow(&bytes[150_000..]);
    let mut skeleton = Plan::borrowed(&bytes[..50_000]);
    skeleton.zeros(100_000);
    skeleton.borrow(&bytes[150_000..]);
    let out = dir.path().join("filled");
    let mut outs = Outputs::new();
    outs.stage(out.to_str().unwrap(), &skeleton, &[&input]).unwrap();
    outs.fill_zeroed(0, &plan, &[(50_000, 100_000)], &[&input]).unwrap();
    outs.commit().unwrap();
    assert_eq!(fs::read(&out).unwrap(), plan.to_vec());
}

#[test]
fn large_borrowed_pieces_are_copied_from_the_mapped_input() {
    let dir = tempfile::tempdir().unwrap();
    let input = patterned_input(dir.path(), 300_000);
    let mut plan = Plan::new();
    plan.own(b"head".to_vec());
    plan.borrow(&input.bytes()[1000..250_000]);
    plan.zeros(3);
    plan.borrow(&input.bytes()[5..9]);
    let out = dir.path().join("out");
    let mut outs = Outputs::new();
    outs.stage(out.to_str().unwrap(), &plan, &[&input]).unwrap();
    outs.commit().unwrap();
    assert_eq!(fs::read(&out).unwrap(), plan.to_vec());
}

/// `materialize` (compression's input) reads large pieces of a mapped
/// input with pread into spare capacity: the bytes are the plan's.
#[test]
fn materialized_plans_hold_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = patterned_input(dir.path(), 3_000_000);
    let mut plan = Plan::new();
    plan.own(b"head".to_vec());
    plan.borrow(&input.bytes()[1000..2_500_000]);
    plan.fill(0xcc, 5);
    plan.borrow(&input.bytes()[5..9]);
    plan.borrow(&input.bytes()[100_000..2_900_000]);
    assert_eq!(materialize(&plan, &[&input]).unwrap(), plan.to_vec());
}

#[test]
fn same_path_as_input_and_output() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("f");
    let data = vec![7u8; 200_000];
    fs::write(&p, &data).unwrap();
    let input = Input::open(p.to_str().unwrap()).unwrap();
    let mut plan = Plan::new();
    plan.own(b"prefix".to_vec());
    plan.borrow(input.bytes());
    let mut outs = Outputs::new();
    outs.stage(p.to_str().unwrap(), &plan, &[&input]).unwrap();
    outs.commit().unwrap();
    let got = fs::read(&p).unwrap();
    assert_eq!(&got[..6], b"prefix");
    assert_eq!(&got[6..], &data[..]);
    // The old mapping still shows the old content.
    assert_eq!(input.bytes(), &data[..]);
}

#[test]
fn new_files_get_umask_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("perm");
    let mut outs = Outputs::new();
    outs.stage(p.to_str().unwrap(), &Plan::borrowed(b"x"), &[]).unwrap();
    outs.commit().unwrap();
    let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o666 & !umask());
}

#[test]
fn several_outputs_are_written_together() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    fs::write(&src, &data).unwrap();
    let input = Input::open(src.to_str().unwrap()).unwrap();
    let plans: Vec<Plan> = (0..7).map(|i| Plan::borrowed(&input.bytes()[i * 1000..(i + 1) * 100_000])).collect();
    let paths: Vec<String> = (0..7).map(|i| dir.path().join(format!("o{i}")).display().to_string()).collect();
    let items: Vec<(&str, &Plan)> = paths.iter().map(String::as_str).zip(&plans).collect();
    let mut outs = Outputs::new();
    outs.stage_all(&items, &[&input]).unwrap();
    outs.commit().unwrap();
    for i in 0..7 {
        assert_eq!(fs::read(&paths[i]).unwrap(), &data[i * 1000..(i + 1) * 100_000]);
    }
    let bad = ["/nonexistent-dir/x".to_string(), paths[0].clone()];
    let items: Vec<(&str, &Plan)> = bad.iter().map(String::as_str).zip(&plans).collect();
    let e = Outputs::new().stage_all(&items, &[&input]).unwrap_err();
    assert_eq!(e.path, "/nonexistent-dir/x");
}

#[test]
fn outputs_can_be_filled_piecewise() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("piecewise");
    let mut outs = Outputs::new();
    let h = outs.stage_empty(p.to_str().unwrap()).unwrap();
    outs.write_at(h, 4, b"EFGH").unwrap();
    outs.write_at(h, 0, b"ABCD").unwrap();
    assert!(!p.exists());
    outs.commit().unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"ABCDEFGH");
}

#[test]
fn error_text_drops_the_os_error_suffix() {
    let e = io::Error::from_raw_os_error(libc::ENOENT);
    assert_eq!(error_text(&e), "No such file or directory");
}

/// A FIFO or device is refused by `Input::open_regular` without being
/// opened for a blocking read (a walk must never wait on a pipe).
#[test]
fn open_regular_refuses_fifos_and_devices_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    let path = fifo.to_str().unwrap().to_string();
    std::thread::spawn(move || {
        let _ = tx.send(Input::open_regular(&path).err().map(|e| e.to_string()));
    });
    let e = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("blocked on a FIFO");
    assert_eq!(e.as_deref(), Some("not a regular file"));
    assert!(Input::open_regular("/dev/zero").is_err());
    let file = dir.path().join("f");
    fs::write(&file, b"abc").unwrap();
    assert_eq!(Input::open_regular(file.to_str().unwrap()).unwrap().bytes(), b"abc");
}

/// Two outputs of one run at one path (also spelled differently) are
/// refused at commit, and nothing is written: before, both were reported
/// written and the first was lost.
#[test]
fn two_outputs_at_one_path_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("x.bc");
    let b = dir.path().join(".").join("x.bc");
    let mut outs = Outputs::new();
    outs.stage(a.to_str().unwrap(), &Plan::borrowed(b"first"), &[]).unwrap();
    outs.stage(b.to_str().unwrap(), &Plan::borrowed(b"second"), &[]).unwrap();
    let e = outs.commit().unwrap_err();
    assert!(e.to_string().contains("two outputs of this run have this name"), "{e}");
    assert_eq!(names_in(dir.path()), Vec::<String>::new());
}

/// Staging files carry the writer's pid in a name of a pattern that is
/// ours alone; names of other tools do not match it.
#[test]
fn staging_names_carry_the_pid() {
    use crate::signals::staging_pid;
    use std::ffi::OsStr;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.bc");
    let mut outs = Outputs::new();
    outs.stage(out.to_str().unwrap(), &Plan::borrowed(b"data"), &[]).unwrap();
    let names = names_in(dir.path());
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with(".x.bc.ofl"), "{names:?}");
    assert_eq!(staging_pid(OsStr::new(&names[0])), Some(std::process::id()));
    drop(outs);
    assert_eq!(names_in(dir.path()), Vec::<String>::new());
    assert_eq!(staging_pid(OsStr::new(".a.ofl42-abc123.tmp")), Some(42));
    for other in [
        ".a.tmp",
        ".a.XYZ123.tmp",
        ".a.ofl42-abc.tmp",
        "a.ofl42-abc123.tmp",
        ".ofl42-abc123.tmp",
        ".a.ofl-abc123.tmp",
        ".a.ofl42-ABC123.tmp",
        ".a.12.0.bak",
        ".a.ofl42-abc123.tmp.x",
    ] {
        assert_eq!(staging_pid(OsStr::new(other)), None, "{other}");
    }
}

/// The next run removes the staging files of dead runs in an output's
/// folder, and only those: not a live process's (pid alive, or lock held
/// as by a writer in another pid namespace), not another tool's.
#[test]
fn stale_staging_files_of_dead_runs_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let dead_file = format!(".old.bin.ofl{dead}-abc123.tmp");
    let locked = format!(".old.bin.ofl{dead}-def456.tmp");
    let keep = [
        format!(".old.bin.ofl{}-abc123.tmp", std::process::id()),
        ".old.bin.ofl1-abc123.tmp".to_string(),
        ".old.bin.Ab12Cd.tmp".to_string(),
        format!(".old.bin.{dead}.0.bak"),
        locked.clone(),
    ];
    for name in keep.iter().chain([&dead_file]) {
        fs::write(dir.path().join(name), b"stale").unwrap();
    }
    let holder = fs::File::open(dir.path().join(&locked)).unwrap();
    // SAFETY: flock only reads its arguments; the descriptor is open.
    assert_eq!(unsafe { libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&holder), libc::LOCK_EX) }, 0);
    let out = dir.path().join("new.bin");
    let mut outs = Outputs::new();
    outs.stage(out.to_str().unwrap(), &Plan::borrowed(b"data"), &[]).unwrap();
    outs.commit().unwrap();
    let mut expected: Vec<String> = keep.to_vec();
    expected.push("new.bin".into());
    expected.sort();
    assert_eq!(names_in(dir.path()), expected);
    drop(holder);
    assert_eq!(remove_stale_staging(dir.path()), 1);
    assert!(!dir.path().join(&locked).exists());
}

/// Replacing an existing file takes the other path of `fill`: the new
/// file is written back while it is written (pieces of more than one
/// writeback step, copied and written from memory) and the old file's
/// pages leave the cache meanwhile. The bytes are the plan's, the old
/// file's other name keeps the old bytes, and an input that is also the
/// output is still read whole.
#[test]
fn replacing_large_files_writes_the_whole_plan() {
    let dir = tempfile::tempdir().unwrap();
    let input = patterned_input(dir.path(), 40 << 20);
    let old = vec![9u8; 1 << 20];
    let (a, b, linked) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("b-link"));
    fs::write(&a, &old).unwrap();
    fs::write(&b, &old).unwrap();
    fs::hard_link(&b, &linked).unwrap();
    let mut plan = Plan::new();
    plan.own(b"head".to_vec());
    plan.borrow(&input.bytes()[3..input.bytes().len() - 5]);
    plan.own((0..(20u32 << 20)).map(|i| (i % 253) as u8).collect());
    let mut outs = Outputs::new();
    outs.stage(a.to_str().unwrap(), &plan, &[&input]).unwrap();
    outs.stage(b.to_str().unwrap(), &plan, &[&input]).unwrap();
    // The input itself replaced.
    outs.stage(input.path.as_str(), &plan, &[&input]).unwrap();
    outs.commit().unwrap();
    let want = plan.to_vec();
    for p in [&a, &b, &dir.path().join("src")] {
        assert!(fs::read(p).unwrap() == want, "{}", p.display());
    }
    assert_eq!(fs::read(&linked).unwrap(), old);
}
