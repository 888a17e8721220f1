//! `offload replace` on real HIP host programs built by clang 19 without
//! ROCm (as in `prune_live.rs`: `-nogpulib -nogpuinc`,
//! `prune_support/hip_min.h`), linked with GNU ld and lld as shared
//! libraries, PIE and non-PIE executables, with RELA and RELR, with and
//! without `-fgpu-rdc` and `--offload-compress`; and by Debian's `hipcc`
//! 5.2.3 as a shared library and a PIE, with and without `-fgpu-rdc`. In
//! each, one code object of unit 0 ([`replaced`]) is replaced twice: by a
//! rebuilt, instrumented object of about the same size (in place) and by one
//! with 80 KB more data (the fat binaries move to a new segment). Then:
//! * the program runs against `prune_support/hip_stub.c`, which reads each
//!   registered fat binary as the HIP runtime does: its trace must be the
//!   old one with the new object's size and hash in that entry's line;
//! * Debian's comgr (`amd_comgr_lookup_code_object`) picks the new object
//!   for its target in the rewritten bundle;
//! * Debian's real `libamdhip64.so.5` registers the code (no GPU here);
//! * `llvm-readelf -lS` reads the output without a warning, and the output
//!   still runs after `llvm-strip`.
//!
//! One library has 100 MiB of `.bss`: its new segment is placed above it
//! without padding the file (address no longer equal to offset, which only
//! executables need).

use crate::prune_support;

use prune_support::{Compiler, Layout, Programs, Recipe, check, comparable, fnv, list_index, offload, p};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target whose code object of unit 0 is replaced: for hipcc, whose
/// bundles align every entry to 4096 bytes, one before the last entry, so
/// that the instrumented rebuild (160 bytes bigger) fits into the padding
/// (the last one is followed by the next bundle after 8 bytes).
fn replaced(recipe: Recipe) -> &'static str {
    match recipe.compiler {
        Compiler::Clang => "gfx90a:xnack+",
        Compiler::Hipcc => "gfx906",
    }
}

/// The instrumented kernel that replaces `add_one` of `tu1.hip`: the rest
/// of that file (its device globals, `noise` included) stays, since a
/// replacement must define every global the old object defined. With
/// `-DBIG=N` it has N bytes more data.
const INSTRUMENTED_KERNEL: &str = r#"__device__ int calls;
#ifdef BIG
__device__ char padding[BIG] = {1};
#endif
__global__ void add_one(int *p) {
  calls += 1;
#ifdef BIG
  p[1] = padding[p[2]];
#endif
  p[0] += scale + (int)noise.v[p[1] & 8191];
}
"#;

/// `tu1.hip` with its kernel swapped for [`INSTRUMENTED_KERNEL`].
fn instrumented_source(support: &Path) -> String {
    let original = std::fs::read_to_string(support.join("tu1.hip")).unwrap();
    let kernel = original.lines().find(|l| l.starts_with("__global__ void add_one")).expect("tu1.hip's kernel");
    original.replacen(kernel, INSTRUMENTED_KERNEL.trim_end(), 1)
}

/// A rebuilt [`replaced`] object for unit 0 of a program built by
/// `recipe`: the instrumented source, by the same compiler, for separately
/// compiled code; for -fgpu-rdc (one object linked from both files) the
/// old object with a new non-allocated section, as a debug-info-only
/// rebuild would be.
fn new_object(t: &Programs, recipe: Recipe, dir: &Path, old: &Path, big: bool) -> Vec<u8> {
    let out = dir.join(if big { "big.co" } else { "small.co" });
    if recipe.rdc {
        let pad = dir.join("pad");
        // Incompressible, so that a compressed bundle must grow too.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let bytes: Vec<u8> = (0..if big { 80_000 } else { 64 })
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        std::fs::write(&pad, bytes).unwrap();
        check(Command::new(&t.objcopy).arg(format!("--add-section=.pad={}", p(&pad))).arg(old).arg(&out));
    } else {
        let src = dir.join("instrumented.hip");
        std::fs::write(&src, instrumented_source(&t.support)).unwrap();
        let mut c = t.driver(Recipe { compress: false, ..recipe });
        c.args(["-x", "hip", "--cuda-device-only", "--no-gpu-bundle-output", "-c"]);
        c.arg(format!("--offload-arch={}", replaced(recipe)));
        if big {
            c.arg("-DBIG=80000");
        }
        check(c.arg(&src).arg("-o").arg(&out));
    }
    std::fs::read(&out).unwrap()
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn replaced_code_objects_are_what_the_runtime_reads() {
    let mut t = Programs::get();
    let so = Recipe::clang(Layout::Shared);
    let variants = [
        ("gnu-so-rela", so),
        ("lld-so-relr", Recipe { ld: "lld", relr: true, ..so }),
        ("gnu-pie", Recipe::clang(Layout::Pie)),
        ("lld-nopie", Recipe { ld: "lld", ..Recipe::clang(Layout::NoPie) }),
        ("gnu-so-compress", Recipe { compress: true, ..so }),
        ("gnu-so-rdc", Recipe { rdc: true, ..so }),
        ("lld-so-rdc-compress", Recipe { ld: "lld", rdc: true, compress: true, ..so }),
        ("lld-so-bigbss", Recipe { ld: "lld", ..so }),
    ];
    for (name, recipe) in variants {
        replace_and_check(&mut t, name, recipe);
    }
}

/// The same checks on programs built by Debian's hipcc (see `prune_live.rs`).
#[test]
#[cfg_attr(
    not(all(has_llvm19, has_hipcc)),
    ignore = "needs LLVM 19 and hipcc: run scripts/install-reference-llvm.sh and scripts/install-test-deps.sh"
)]
fn hipcc_built_code_objects_are_replaced_as_the_runtime_reads_them() {
    let mut t = Programs::with_hipcc();
    let so = Recipe::hipcc(Layout::Shared);
    let pie = Recipe::hipcc(Layout::Pie);
    let variants = [
        ("hipcc-so", so),
        ("hipcc-pie", pie),
        ("hipcc-so-rdc", Recipe { rdc: true, ..so }),
        ("hipcc-pie-rdc-lld-relr", Recipe { ld: "lld", rdc: true, relr: true, ..pie }),
    ];
    for (name, recipe) in variants {
        replace_and_check(&mut t, name, recipe);
    }
}

/// Builds one variant and replaces unit 0's [`replaced`] object with a
/// small and a big rebuild, checking each output.
fn replace_and_check(t: &mut Programs, name: &str, recipe: Recipe) {
    let (comgr, real) = (t.comgr.clone(), t.real_runtime());
    let (rdc, compress) = (recipe.rdc, recipe.compress);
    let mut extra: Vec<PathBuf> = Vec::new();
    if name.contains("bigbss") {
        // 100 MiB of .bss: the new segment goes above it without padding.
        let bss = t.dir.path().join("bss.c");
        std::fs::write(&bss, "char big_bss[100 << 20];\nchar *touch_bss(void) { return big_bss; }\n").unwrap();
        let object = t.dir.path().join("bss.o");
        check(Command::new(&t.clang).args(["-c", "-fPIC", "-o", p(&object), p(&bss)]));
        extra.push(object);
    }
    let linked = t.link(name, recipe, &extra);
    let t: &Programs = t;
    let (target, dir) = (&linked.target, &linked.dir);
    let run = |file: &Path, hip: Option<&Path>| t.run_with(&linked, recipe.layout, file, hip);
    let before = run(target, None);
    assert!(before.contains("host: 1 2"), "{name}: {before}");
    let entry = replaced(recipe);
    let index = list_index(target, 0, entry);
    let old_path = dir.join("old.co");
    check(Command::new(env!("CARGO_BIN_EXE_offload")).args([
        "extract",
        "--index",
        &index,
        p(target),
        "-o",
        p(&old_path),
    ]));
    let old = std::fs::read(&old_path).unwrap();
    for big in [false, true] {
        let new = new_object(t, recipe, dir, &old_path, big);
        let tag = if big { "big" } else { "small" };
        let out_dir = dir.join(tag);
        std::fs::create_dir_all(&out_dir).unwrap();
        let out = out_dir.join(target.file_name().unwrap());
        let with = dir.join(format!("{tag}.co"));
        let o = offload(&[
            "replace",
            "--json",
            "--entry",
            entry,
            "--unit",
            "0",
            "--with",
            p(&with),
            p(target),
            "-o",
            p(&out),
        ]);
        assert!(o.status.success(), "{name} {tag}: {}", String::from_utf8_lossy(&o.stderr));
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        let placement = report["placement"].as_str().unwrap().to_string();
        // The instrumented object's extra data is zeros, which
        // compress away: a compressed bundle may still fit in place.
        if big && (rdc || !compress) {
            assert_eq!(placement, "new-segment", "{name}: {report}");
        } else if !big && !compress {
            assert_eq!(placement, "in-place", "{name}: {report}");
        }
        let what = format!("{name} {tag} ({placement})");

        // The stub runtime sees the new object in that entry, all else the same.
        let after = run(&out, None);
        let old_line = format!("size {} fnv {:016x}", old.len(), fnv(&old));
        let new_line = format!("size {} fnv {:016x}", new.len(), fnv(&new));
        assert_eq!(before.matches(&old_line).count(), 1, "{what}: {before}");
        let expected = before.replace(&old_line, &new_line);
        assert_eq!(comparable(&after, &[]), comparable(&expected, &[]), "{what}:\n{before}\n---\n{after}");

        // Debian's real runtime registers the code.
        if let Some(real) = &real {
            let ran = run(&out, Some(real));
            assert_eq!(ran, "host: 1 2\n", "{what} with the real runtime");
        }

        // comgr picks the new object for its target.
        let bytes = std::fs::read(&out).unwrap();
        let map = offload_inspect::layout::FileMap::read(&bytes).unwrap();
        let unit = map.units[0];
        if let (Some(comgr), false) = (&comgr, compress) {
            let bundle = &bytes[unit.offset as usize..(unit.offset + unit.used) as usize];
            let file = out_dir.join("unit0.bundle");
            std::fs::write(&file, bundle).unwrap();
            let o = check(Command::new(comgr).arg(&file).arg(format!("amdgcn-amd-amdhsa--{entry}")));
            let answer = String::from_utf8_lossy(&o.stdout).to_string();
            let fields: Vec<usize> = answer.split_whitespace().skip(1).map(|f| f.parse().unwrap()).collect();
            let [offset, size] = fields[..] else { panic!("{what}: comgr said {answer}") };
            assert_eq!(&bundle[offset..offset + size], new.as_slice(), "{what}: comgr's choice");
        }

        // The ELF structure reads without a warning.
        let re = check(Command::new(&t.readelf).args(["-lS", "--dyn-relocations", p(&out)]));
        assert!(re.stderr.is_empty(), "{what}: {}", String::from_utf8_lossy(&re.stderr));

        // llvm-strip keeps the output working.
        let stripped_dir = out_dir.join("stripped");
        std::fs::create_dir_all(&stripped_dir).unwrap();
        let stripped = stripped_dir.join(target.file_name().unwrap());
        check(Command::new(&t.strip).arg(&out).arg("-o").arg(&stripped));
        let again = run(&stripped, None);
        assert_eq!(comparable(&again, &[]), comparable(&expected, &[]), "{what} after llvm-strip");
        eprintln!("{what}: file {} -> {} bytes", std::fs::metadata(target).unwrap().len(), bytes.len());
    }
}
