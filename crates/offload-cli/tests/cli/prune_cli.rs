//! `offload prune` on the clang-built HIP fixtures of the library crate
//! (`offload-testkit/fixtures/prune`): exit statuses, atomic output,
//! and that `list`/`verify` read the result. `prune_live.rs` builds and
//! runs programs.

use crate::prune_support;

use prune_support::{fixture, offload, p, stderr};
use serde_json::Value;

#[test]
fn prunes_and_the_result_lists_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pruned.so");
    let input = fixture("gnu_rela.so");
    let before = std::fs::read(&input).unwrap();
    // Zero mode asked for: the file keeps its size.
    let o = offload(&["prune", "--mode", "zero", "--keep", "gfx90a:xnack+,gfx906", p(&input), "-o", p(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&input).unwrap(), before, "the input is never modified");
    let after = std::fs::read(&out).unwrap();
    assert_eq!(after.len(), before.len());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o111, 0o111, "stays executable");
    let list = offload(&["list", "--json", p(&out)]);
    assert!(list.status.success(), "{}", stderr(&list));
    let rows: Vec<Value> = serde_json::from_slice(&list.stdout).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let unit =
        ["host-x86_64-unknown-linux--", "hipv4-amdgcn-amd-amdhsa--gfx906", "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"];
    assert_eq!(ids, [unit, unit].concat());
    let verify = offload(&["verify", p(&out)]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
}

#[test]
fn dry_run_reports_in_json_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let o = offload(&[
        "prune",
        "--keep-gpu",
        "gfx90a:sramecc+:xnack-",
        "--dry-run",
        "--json",
        p(&fixture("rdc_ccob_lld.so")),
        "-o",
        p(&out),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.exists());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["fat_binaries"], 1);
    assert_eq!(v["rewritten"], 1);
    let unit = &v["units"][0];
    assert_eq!(unit["format"], "compressed v2");
    assert_eq!(unit["dropped"].as_array().unwrap().len(), 2);
    assert_eq!(unit["kept"][1], "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-");
    assert!(v["dropped_bytes"].as_u64().unwrap() > 0);
    assert!(unit["new_size"].as_u64().unwrap() < unit["old_size"].as_u64().unwrap());
}

#[test]
fn failures_exit_1_and_leave_the_output_alone() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::write(&out, b"precious").unwrap();
    let text = dir.path().join("text");
    std::fs::write(&text, b"no ELF here").unwrap();
    let gnu = fixture("gnu_rela.so");
    // Cut mode's refusals (objects: prune_cut_objects.rs).
    let cases: [(&[&str], &str); 2] = [
        (&["--keep", "gfx942", p(&gnu)], "matches none of its device code"),
        (&["--keep", "gfx906", p(&text)], "malformed ELF"),
    ];
    for (args, says) in cases {
        let mut all = vec!["prune"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", p(&out)]);
        let o = offload(&all);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("error:") && stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    }
}

#[test]
fn bad_command_lines_exit_2() {
    let gnu = fixture("gnu_rela.so");
    for args in [
        vec!["prune", p(&gnu), "-o", "x"],
        vec!["prune", "--keep", "gfx90a:xnack", p(&gnu), "-o", "x"],
        vec!["prune", "--keep", "gfx906", p(&gnu)],
        vec!["prune", "--keep", "gfx906", "--mode", "fast", p(&gnu), "-o", "x"],
        vec!["prune", "--keep-gpu", "gfx9-generic", p(&gnu), "-o", "x"],
    ] {
        let o = offload(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn prunes_to_standard_output_and_over_its_own_input() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("lib.so");
    std::fs::copy(fixture("lld_relr.so"), &copy).unwrap();
    let to_stdout = offload(&["prune", "--keep", "gfx906", p(&copy), "-o", "-"]);
    assert!(to_stdout.status.success(), "{}", stderr(&to_stdout));
    // The same path as input and output is refused (the input is never
    // modified unless asked), and the file is untouched.
    let o = offload(&["prune", "--keep", "gfx906", p(&copy), "-o", p(&copy)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--in-place"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&copy).unwrap(), std::fs::read(fixture("lld_relr.so")).unwrap());
    // With --in-place: the input is mapped while the output is staged,
    // then renamed over it.
    let o = offload(&["prune", "--keep", "gfx906", "--in-place", p(&copy)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&copy).unwrap(), to_stdout.stdout, "both runs write the same bytes");
    assert_ne!(std::fs::read(&copy).unwrap(), std::fs::read(fixture("lld_relr.so")).unwrap());
    let list = offload(&["list", p(&copy)]);
    assert!(!String::from_utf8_lossy(&list.stdout).contains("gfx90a"));
}

/// In zero mode a file output is staged from a copy of the input made
/// while the fat binaries are rebuilt, standard output from the plan
/// alone: the two must be the same bytes, for every layout, compressed
/// bundles and CUDA too.
#[test]
fn the_early_host_copy_writes_what_the_plan_says() {
    let dir = tempfile::tempdir().unwrap();
    let cuda = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cuda");
    let mut inputs: Vec<(std::path::PathBuf, &str)> = ["gnu_rela.so", "lld_relr.so", "rdc_ccob_lld.so", "tu1.o"]
        .iter()
        .map(|name| (fixture(name), "gfx906"))
        .collect();
    inputs.push((cuda.join("libsmall.so"), "sm_90"));
    let mut compared = 0;
    for (input, keep) in &inputs {
        let out = dir.path().join("out");
        let to_stdout = offload(&["prune", "--mode", "zero", "--allow-empty", "--keep", keep, p(input), "-o", "-"]);
        if !to_stdout.status.success() {
            // A fixture this target cannot prune is no evidence either way.
            assert!(stderr(&to_stdout).contains("error:"), "{input:?}: {}", stderr(&to_stdout));
            continue;
        }
        let o = offload(&["prune", "--mode", "zero", "--allow-empty", "--keep", keep, p(input), "-o", p(&out)]);
        assert!(o.status.success(), "{input:?}: {}", stderr(&o));
        let written = std::fs::read(&out).unwrap();
        assert_eq!(written, to_stdout.stdout, "{input:?}");
        assert_ne!(written, std::fs::read(input).unwrap(), "{input:?}: something was pruned");
        compared += 1;
    }
    assert!(compared >= 5, "only {compared} inputs could be compared");
}

/// `--compression-level` sets the level of the recompressed bundles (LLVM's
/// zstd 3 otherwise): other compressed bytes, the same code objects.
#[test]
fn the_compression_level_of_rebuilt_bundles_can_be_chosen() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("rdc_ccob_lld.so");
    let mut outputs = Vec::new();
    for level in [None, Some("1"), Some("19")] {
        let out = dir.path().join(format!("out{}", level.unwrap_or("")));
        let mut args = vec!["prune", "--keep", "gfx906"];
        args.extend(level.iter().flat_map(|l| ["--compression-level", l]));
        args.extend([p(&input), "-o", p(&out)]);
        let o = offload(&args);
        assert!(o.status.success(), "{level:?}: {}", stderr(&o));
        let extract = dir.path().join(format!("x{}", level.unwrap_or("")));
        let x = offload(&["extract", "--target-id", "gfx906", "-o", p(&extract), p(&out)]);
        assert!(x.status.success(), "{level:?}: {}", stderr(&x));
        outputs.push((std::fs::read(&out).unwrap(), std::fs::read(&extract).unwrap()));
    }
    assert_ne!(outputs[0].0, outputs[1].0, "level 1 compresses otherwise than level 3");
    assert_ne!(outputs[1].0, outputs[2].0, "level 19 compresses otherwise than level 1");
    assert!(outputs.iter().all(|(_, code)| *code == outputs[0].1), "the same gfx906 code object in all three");
    for bad in ["0", "23", "x"] {
        let o = offload(&["prune", "--keep", "gfx906", "--compression-level", bad, p(&input), "-o", "x"]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
    }
}

#[test]
fn cut_mode_shrinks_the_file_warns_and_reports_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cut.so");
    let input = fixture("gnu_rela.so");
    let o = offload(&["prune", "--mode", "cut", "--json", "--keep", "gfx906", p(&input), "-o", p(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("do not run GNU strip or objcopy") && stderr(&o).contains("llvm-strip"));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "cut");
    let (before, after) = (std::fs::metadata(&input).unwrap().len(), std::fs::metadata(&out).unwrap().len());
    assert_eq!((v["input_size"].as_u64(), v["output_size"].as_u64()), (Some(before), Some(after)));
    assert!(after + 2 * 4096 <= before && (before - after) % 4096 == 0, "{before} -> {after}");
    // The second fat binary moved down; the report says where to.
    let second = &v["units"][1];
    assert!(second["new_offset"].as_u64().unwrap() < second["offset"].as_u64().unwrap());
    let list = offload(&["list", "--json", p(&out)]);
    let rows: Vec<Value> = serde_json::from_slice(&list.stdout).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let unit = ["host-x86_64-unknown-linux--", "hipv4-amdgcn-amd-amdhsa--gfx906"];
    assert_eq!(ids, [unit, unit].concat());
    let verify = offload(&["verify", p(&out)]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));

    // Too little to gain: said, and written in zero mode (same size).
    let small = dir.path().join("small.so");
    let rdc = fixture("rdc_ccob_lld.so");
    let o = offload(&["prune", "--mode", "cut", "--json", "--keep", "gfx906", p(&rdc), "-o", p(&small)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("written in zero mode"), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "zero");
    assert_eq!(std::fs::metadata(&small).unwrap().len(), std::fs::metadata(&rdc).unwrap().len());
}

/// Without `--mode` the output is the smallest the file allows: cut where
/// cutting applies (the same bytes as `--mode cut`), zero where it saves
/// too little (the same bytes as `--mode zero`); the report says which,
/// why, and the bytes saved (issue 28).
#[test]
fn the_default_mode_is_the_smallest_output_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str], input: &std::path::Path, out: &std::path::Path| {
        let mut all = vec!["prune", "--keep", "gfx906"];
        all.extend_from_slice(args);
        all.extend([p(input), "-o", p(out)]);
        let o = offload(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        (std::fs::read(out).unwrap(), o)
    };
    // A linked library with enough to cut: cut, as --mode cut writes it.
    let gnu = fixture("gnu_rela.so");
    let (default, o) = run(&["--json"], &gnu, &dir.path().join("default.so"));
    let (cut, _) = run(&["--mode", "cut"], &gnu, &dir.path().join("cut.so"));
    let (zero, _) = run(&["--mode", "zero"], &gnu, &dir.path().join("zero.so"));
    assert_eq!(default, cut, "the default cuts what --mode cut cuts");
    assert!(default.len() < zero.len(), "{} < {}", default.len(), zero.len());
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "cut");
    assert!(v["mode_reason"].as_str().unwrap().starts_with("cut: a linked binary"), "{v}");
    let size = std::fs::metadata(&gnu).unwrap().len();
    assert_eq!(v["saved_bytes"].as_i64(), Some((size - default.len() as u64) as i64));
    assert!(stderr(&o).contains("do not run GNU strip"), "the cut warning: {}", stderr(&o));
    // Too little to cut: zero mode with the reason, no note on stderr.
    let rdc = fixture("rdc_ccob_lld.so");
    let (default, o) = run(&[], &rdc, &dir.path().join("rdc.so"));
    let (zero, _) = run(&["--mode", "zero"], &rdc, &dir.path().join("rdc.zero.so"));
    assert_eq!(default, zero);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("; zero: cutting would save only"), "{text}");
    assert!(text.contains(" 0 saved (") && text.contains("bytes zeroed"), "{text}");
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
    // A relocatable object: cut too.
    let (_, o) = run(&["--json"], &fixture("tu1.o"), &dir.path().join("tu1.o"));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["mode"], "cut", "{v}");
    assert!(v["saved_bytes"].as_i64().unwrap() > 0, "{v}");
}
