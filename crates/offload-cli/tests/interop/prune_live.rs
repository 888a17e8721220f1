//! `offload prune` on real HIP host programs, built by clang 19 without ROCm
//! (`-nogpulib -nogpuinc`, `prune_support/hip_min.h`) and linked with GNU
//! ld and lld as shared libraries, PIE and non-PIE executables, with RELA
//! and RELR, with and without `-fgpu-rdc` and `--offload-compress`; and by
//! Debian's `hipcc` 5.2.3 (clang 15, ROCm's headers, linked against the real
//! `-lamdhip64`) as a shared library and a PIE, with and without
//! `-fgpu-rdc`, with GNU ld and lld (builds: `prune_support/mod.rs`). Each
//! program runs against `prune_support/hip_stub.c`, a stand-in for
//! libamdhip64.so that reads every registered fat binary the way the HIP
//! runtime does and prints a trace; after pruning, the trace must be the
//! same except for the dropped entries. The output must also satisfy
//! `llvm-readelf -lS` (no warnings) and LLVM's bundler must list each
//! rewritten fat binary as holding exactly the kept entries.
//!
//! Every program is also pruned in cut mode (the file shrinks; one C++
//! exception is thrown and caught in `tu2.hip`, through the moved unwind
//! tables) and must then give the same trace, load with the real runtime,
//! read without warnings, list in LLVM's bundler, let Debian's comgr find
//! each kept target at its new offset (and nothing for dropped ones), and
//! still work after `llvm-strip-19`.

use crate::common;
use crate::prune_support;

use prune_support::{Layout, Linked, Programs, Recipe, check, comparable, p};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn pruned_programs_register_the_same_code_minus_the_dropped_entries() {
    let mut t = Programs::get();
    let so = Recipe::clang(Layout::Shared);
    let pie = Recipe::clang(Layout::Pie);
    let variants = [
        ("gnu-so-rela", so, "gfx90a:xnack+"),
        ("lld-so-rela", Recipe { ld: "lld", ..so }, "gfx906"),
        ("lld-so-relr", Recipe { ld: "lld", relr: true, ..so }, "gfx90a"),
        ("gnu-so-relr", Recipe { relr: true, ..so }, "gfx906,gfx90a:xnack-"),
        ("gnu-pie", pie, "gfx90a:xnack-"),
        ("lld-nopie", Recipe { ld: "lld", ..Recipe::clang(Layout::NoPie) }, "gfx906"),
        ("gnu-so-compress", Recipe { compress: true, ..so }, "gfx90a:xnack+"),
        ("gnu-so-rdc", Recipe { rdc: true, ..so }, "gfx906"),
        ("lld-so-rdc-compress", Recipe { ld: "lld", rdc: true, compress: true, ..so }, "gfx90a"),
        ("lld-pie-rdc-relr", Recipe { ld: "lld", rdc: true, relr: true, ..pie }, "gfx90a:xnack+"),
    ];
    for (name, recipe, keep) in variants {
        prune_and_check(&mut t, name, recipe, keep);
    }
}

/// The same checks on programs built the way HIP packages are: Debian's
/// hipcc (uncompressed bundles with 4096-aligned entries, GNU ld with RELA
/// by default) for gfx906, gfx90a:xnack+ and gfx1030.
#[test]
#[cfg_attr(
    not(all(has_llvm19, has_hipcc)),
    ignore = "needs LLVM 19 and hipcc: run scripts/install-reference-llvm.sh and scripts/install-test-deps.sh"
)]
fn hipcc_built_programs_register_the_same_code_minus_the_dropped_entries() {
    let mut t = Programs::with_hipcc();
    let so = Recipe::hipcc(Layout::Shared);
    let pie = Recipe::hipcc(Layout::Pie);
    let variants = [
        ("hipcc-so", so, "gfx90a:xnack+"),
        ("hipcc-pie", pie, "gfx1030"),
        ("hipcc-so-rdc", Recipe { rdc: true, ..so }, "gfx906,gfx1030"),
        ("hipcc-pie-rdc-lld-relr", Recipe { ld: "lld", rdc: true, relr: true, ..pie }, "gfx90a"),
    ];
    for (name, recipe, keep) in variants {
        prune_and_check(&mut t, name, recipe, keep);
    }
}

/// Builds one variant, prunes it in zero mode and checks the output (trace,
/// real runtime, llvm-readelf, LLVM's bundler), then in cut mode.
fn prune_and_check(t: &mut Programs, name: &str, recipe: Recipe, keep: &str) {
    let real_runtime = t.real_runtime();
    let linked = t.link(name, recipe, &[]);
    let (target, dir) = (&linked.target, &linked.dir);
    let before = t.run(&linked.program, dir, None);
    assert!(before.contains("host: 1 2") && before.contains("register magic 48495046"), "{name}: {before}");
    std::fs::create_dir_all(dir.join("pruned")).unwrap();
    let pruned = dir.join("pruned").join(target.file_name().unwrap());
    let o = common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args([
        "prune",
        "--mode",
        "zero",
        "--json",
        "--keep",
        keep,
        p(target),
        "-o",
        p(&pruned),
    ]));
    assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let units = report["units"].as_array().unwrap();
    let dropped: Vec<String> = units
        .iter()
        .flat_map(|u| u["dropped"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()))
        .collect();
    assert!(!dropped.is_empty(), "{name}: nothing dropped");
    let after = t.run_with(&linked, recipe.layout, &pruned, None);
    // The same registrations and entries, minus the dropped ones.
    assert_eq!(comparable(&after, &[]), comparable(&before, &dropped), "{name}:\n{before}\n---\n{after}");
    assert!(!dropped.iter().any(|id| after.contains(&format!(" entry {id} "))), "{name}: {after}");

    if let Some(real) = &real_runtime {
        // Debian's libamdhip64.so.5 registers the pruned code (there is
        // no GPU here, so nothing is launched).
        let ran = t.run_with(&linked, recipe.layout, &pruned, Some(real));
        assert_eq!(ran, "host: 1 2\n", "{name} with the real runtime");
    }

    // The ELF structure reads without a warning.
    let re = check(Command::new(&t.readelf).args(["-lS", "--dyn-relocations", p(&pruned)]));
    assert!(re.stderr.is_empty(), "{name}: {}", String::from_utf8_lossy(&re.stderr));

    // LLVM's bundler lists exactly the kept entries of each rewritten unit.
    let bytes = std::fs::read(&pruned).unwrap();
    for (i, u) in units.iter().enumerate() {
        if u["dropped"].as_array().unwrap().is_empty() {
            continue;
        }
        let at = u["offset"].as_u64().unwrap() as usize;
        bundler_lists_the_kept_entries(t, &format!("{name}: unit {i}"), &bytes, at, u, &dir.join(format!("unit{i}")));
    }

    let run = Run { name, linked: &linked, layout: recipe.layout, keep };
    cut_and_check(t, &run, &before, real_runtime.as_deref());
}

/// One linked variant, as `cut_and_check` needs it.
struct Run<'r> {
    name: &'r str,
    linked: &'r Linked,
    layout: Layout,
    keep: &'r str,
}

/// Prunes the variant in cut mode and checks the result every way the
/// zero-mode output is checked, plus comgr and llvm-strip.
fn cut_and_check(t: &Programs, run: &Run, before: &str, real_runtime: Option<&Path>) {
    let name = run.name;
    let (target, dir) = (&run.linked.target, &run.linked.dir);
    let cut_dir = dir.join("cut");
    std::fs::create_dir_all(&cut_dir).unwrap();
    let cut = cut_dir.join(target.file_name().unwrap());
    let args = ["prune", "--mode", "cut", "--json", "--keep", run.keep, p(target), "-o", p(&cut)];
    let o = common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{name} (cut): {stderr}");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    // tu1.hip's 32 KiB of noise per target leave enough pages to cut.
    assert_eq!(report["mode"], "cut", "{name}: {stderr}");
    assert!(stderr.contains("do not run GNU strip or objcopy"), "{name}: {stderr}");
    let (input_size, output_size) = (report["input_size"].as_u64().unwrap(), report["output_size"].as_u64().unwrap());
    assert_eq!(std::fs::metadata(&cut).unwrap().len(), output_size, "{name}");
    assert_eq!(std::fs::metadata(target).unwrap().len(), input_size, "{name}");
    // Whole pages leave: about the bytes the kept bundles no longer use,
    // less the page that takes the program header table.
    let removed = input_size - output_size;
    eprintln!("{name}: cut {input_size} -> {output_size} bytes");
    let freed = report["freed_bytes"].as_u64().unwrap();
    assert!(removed % 4096 == 0 && removed >= 2 * 4096, "{name}: {removed}");
    assert!(removed <= freed + 4096 && removed + 3 * 4096 >= freed, "{name}: removed {removed}, freed {freed}");
    let units = report["units"].as_array().unwrap();
    let dropped: Vec<String> = units
        .iter()
        .flat_map(|u| u["dropped"].as_array().unwrap().iter().map(|d| d.as_str().unwrap().to_string()))
        .collect();

    // The stand-in runtime sees the same registrations minus the dropped
    // entries, and the exception in tu2 is still caught ("host: 1 2").
    let after = t.run_with(run.linked, run.layout, &cut, None);
    assert_eq!(comparable(&after, &[]), comparable(before, &dropped), "{name} (cut):\n{before}\n---\n{after}");
    if let Some(real) = real_runtime {
        let ran = t.run_with(run.linked, run.layout, &cut, Some(real));
        assert_eq!(ran, "host: 1 2\n", "{name} (cut) with the real runtime");
    }
    let re = check(Command::new(&t.readelf).args(["-lS", "--dyn-relocations", p(&cut)]));
    assert!(re.stderr.is_empty(), "{name} (cut): {}", String::from_utf8_lossy(&re.stderr));

    let bytes = std::fs::read(&cut).unwrap();
    for (i, u) in units.iter().enumerate() {
        let at = u["new_offset"].as_u64().unwrap() as usize;
        let piece = dir.join(format!("cut-unit{i}"));
        bundler_lists_the_kept_entries(t, &format!("{name} (cut): unit {i}"), &bytes, at, u, &piece);
        if u["format"] == "bundle" {
            comgr_finds_the_kept_entries(t, name, &bytes, at, u);
        }
    }

    // llvm-strip keeps a cut file working (GNU strip would not).
    let stripped_dir = dir.join("cut-stripped");
    std::fs::create_dir_all(&stripped_dir).unwrap();
    let stripped = stripped_dir.join(target.file_name().unwrap());
    check(Command::new(&t.strip).arg(p(&cut)).arg("-o").arg(&stripped));
    let again = t.run_with(run.linked, run.layout, &stripped, None);
    assert_eq!(again, after, "{name}: the llvm-stripped cut output runs differently");
}

/// LLVM's bundler lists exactly the kept entries of `unit` (a report row)
/// in the `new_size` bytes at `at` of `file` (written to `piece` for it).
fn bundler_lists_the_kept_entries(t: &Programs, what: &str, file: &[u8], at: usize, unit: &Value, piece: &Path) {
    let len = unit["new_size"].as_u64().unwrap() as usize;
    std::fs::write(piece, &file[at..at + len]).unwrap();
    let list = check(Command::new(&t.bundler).args(["-list", "-type=o", &format!("-input={}", p(piece))]));
    let mut listed: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(String::from).collect();
    let mut kept: Vec<String> =
        unit["kept"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_string()).collect();
    listed.sort();
    kept.sort();
    assert_eq!(listed, kept, "{what}");
}

/// Debian's comgr, given the 4096-byte window the HIP runtime gives it at
/// the bundle's new offset, finds each kept target there (at the entry's
/// offset and size in the rewritten bundle) and nothing for dropped ones.
fn comgr_finds_the_kept_entries(t: &Programs, name: &str, file: &[u8], at: usize, unit: &Value) {
    let Some(comgr) = &t.comgr else { return };
    let window = &file[at..(at + 4096).min(file.len())];
    let path = t.dir.path().join("comgr-window");
    std::fs::write(&path, window).unwrap();
    let isa = |id: &str| id.split_once("--").map(|(_, target)| format!("amdgcn-amd-amdhsa--{target}"));
    let ids = |key: &str| -> Vec<String> {
        unit[key].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
    };
    // The bundle's own table: id -> (offset, size).
    let count = u64::from_le_bytes(window[24..32].try_into().unwrap()) as usize;
    let mut table = HashMap::new();
    let mut pos = 32;
    for _ in 0..count {
        let word = |k: usize| u64::from_le_bytes(window[pos + k * 8..pos + k * 8 + 8].try_into().unwrap());
        let (off, size, len) = (word(0), word(1), word(2) as usize);
        table.insert(String::from_utf8_lossy(&window[pos + 24..pos + 24 + len]).into_owned(), (off, size));
        pos += 24 + len;
    }
    for (id, kept) in ids("kept").into_iter().map(|i| (i, true)).chain(ids("dropped").into_iter().map(|i| (i, false))) {
        let Some(isa) = isa(&id).filter(|_| id.starts_with("hip")) else { continue };
        let o = check(Command::new(comgr).arg(&path).arg(&isa));
        let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let fields: Vec<u64> = line.split(' ').skip(1).map(|f| f.parse().unwrap()).collect();
        if kept {
            let (off, size) = table[&id];
            assert_eq!(fields, [off, size], "{name}: comgr on {isa}");
        } else {
            assert_eq!(fields, [0, 0], "{name}: comgr found the dropped {isa}");
        }
    }
}
