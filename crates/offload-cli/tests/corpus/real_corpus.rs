//! `offload` on real ROCm libraries that other people built: Debian 12's
//! rocRAND (ROCm 5.3), JAX's ROCm 6.2 and ROCm 7.2 plugins, fastllm (ROCm
//! 6.3) and a ROCm 7 torch-cluster build from PyPI, fetched (pinned by sha256) by
//! `scripts/fetch-real-corpus.sh`. Each file is checked against references
//! that are not ours:
//!
//! * listing: every fat binary of `.hip_fatbin` (cut out with llvm-objcopy,
//!   split by its magic and size fields) is listed and unbundled by LLVM 19's
//!   clang-offload-bundler; CCOB v3, which LLVM 19 cannot read, is first
//!   decompressed by ROCm 7's own LLVM library (`librocmllvm.so`, through
//!   `real_corpus_helpers/rocmllvm_decompress.c`);
//! * selection: Debian's comgr (`amd_comgr_lookup_code_object`, through
//!   `real_corpus_helpers/comgr_lookup.c`) for the processors it knows, and
//!   the documented rule (docs/reference/selection-rules.md) for the newer ones;
//! * `offload verify` is clean.
//!
//! The corpus lives in `$OFFLOAD_CORPUS_DIR` (default
//! `~/.cache/offload-binutils/corpus`). Without it the tests are ignored
//! (build.rs); with `OFFLOAD_REQUIRE_REAL_CORPUS=1` (as `.ci/run` sets) a
//! missing corpus fails the build.

use crate::inspect_support;
use crate::real_corpus_support;

use inspect_support::{json, n, offload, s};
use real_corpus_support::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every fat binary of every corpus file: LLVM 19 lists the same entry IDs
/// as `offload list`, and each device code object's bytes (at `offset`, or
/// as `offload extract` writes them when compressed) equal what LLVM 19
/// unbundles.
#[test]
#[cfg_attr(
    not(all(has_llvm19, has_real_corpus)),
    ignore = "needs LLVM 19 and the real ROCm corpus: run scripts/install-reference-llvm.sh and scripts/fetch-real-corpus.sh"
)]
fn listing_matches_llvm19() {
    let corpus = Corpus::get();
    let refs = References::get(&corpus);
    let tmp = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for (i, file) in corpus.files().iter().enumerate() {
        let work = tmp.path().join(i.to_string());
        std::fs::create_dir_all(&work).unwrap();
        let fat_binaries = refs.fat_binaries(file, &work);
        let ours = inspect_support::list_json(file);
        let units: BTreeSet<u64> = ours.iter().map(|r| n(r, "unit")).collect();
        assert_eq!(units.len(), fat_binaries.len(), "{}: number of fat binaries", file.display());
        let extracted = extract_all(file, &work.join("extracted"));
        let data = std::fs::read(file).unwrap();
        for (unit, fb) in fat_binaries.iter().enumerate() {
            let records: Vec<&Value> = ours.iter().filter(|r| n(r, "unit") == unit as u64).collect();
            let our_ids: BTreeSet<&str> = records.iter().map(|r| s(r, "id")).collect();
            let llvm_ids = refs.llvm_list(&fb.llvm_input);
            let llvm_ids: BTreeSet<&str> = llvm_ids.iter().map(String::as_str).collect();
            assert_eq!(our_ids, llvm_ids, "{} fat binary {unit}: IDs", file.display());
            // LLVM 19 cannot unbundle entries for processors it does not
            // know (it reads `gfx950` as an invalid target ID); those are
            // compared with the bytes the bundle's entry table points at.
            let (device, newer): (Vec<&Value>, Vec<&Value>) = records
                .iter()
                .copied()
                .filter(|r| s(r, "offload_kind") != "host")
                .partition(|r| !NEEDS_NEW_TABLE.iter().any(|p| s(r, "id").ends_with(&format!("--{p}"))));
            let ids: Vec<&str> = device.iter().map(|r| s(r, "id")).collect();
            let mut expected_bytes = refs.llvm_unbundle(&fb.llvm_input, &ids, &work.join(format!("llvm{unit}")));
            for r in &newer {
                let e = fb.entries.iter().find(|e| e.id == s(r, "id")).unwrap();
                expected_bytes.push(fb.bundle[e.offset as usize..(e.offset + e.size) as usize].to_vec());
            }
            for (record, expected) in device.iter().chain(&newer).zip(&expected_bytes) {
                let what = format!("{} fat binary {unit} {}", file.display(), s(record, "id"));
                assert_eq!(n(record, "size"), expected.len() as u64, "{what}: size");
                assert_eq!(record["compressed"].as_bool(), Some(fb.ccob_version.is_some()), "{what}");
                let got = if fb.ccob_version.is_some() {
                    assert!(record["offset"].is_null(), "{what}: a compressed code object has no offset");
                    std::fs::read(&extracted[&(unit as u64, s(record, "id").to_string())]).unwrap()
                } else {
                    let offset = n(record, "offset");
                    assert!(
                        offset >= fb.start && offset + n(record, "size") <= fb.start + fb.stored_len,
                        "{what}: offset {offset:#x} outside the fat binary"
                    );
                    data[offset as usize..(offset + n(record, "size")) as usize].to_vec()
                };
                assert!(got == *expected, "{what}: bytes differ from LLVM 19's");
                compared += 1;
            }
        }
        eprintln!("real corpus: {}: {} fat binaries listed like LLVM 19", file.display(), fat_binaries.len());
    }
    // The corpus is pinned: 29 + 27 + 2 * 27 + 11 + 11 + 2 * 7 + 7 device
    // code objects.
    assert_eq!(compared, 153, "code objects compared");
}

/// For every GPU (each processor in the corpus, with each feature setting a
/// device can report) and every fat binary, `offload select` picks the code
/// object comgr picks, or none when comgr finds none. Only processors that
/// Debian's comgr 5.2 knows (up to gfx1036).
#[test]
#[cfg_attr(
    not(all(has_llvm19, has_comgr, has_real_corpus)),
    ignore = "needs LLVM 19, comgr and the real ROCm corpus: run scripts/install-reference-llvm.sh and scripts/install-test-deps.sh and scripts/fetch-real-corpus.sh"
)]
fn selection_matches_comgr() {
    let corpus = Corpus::get();
    let refs = References::get(&corpus);
    let comgr = refs.comgr();
    let gpus: Vec<Gpu> = corpus_gpus(&refs, &corpus).into_iter().filter(|g| comgr.knows(&g.processor)).collect();
    assert!(gpus.len() >= 20, "comgr knows too few corpus processors: {gpus:?}");
    let checked = compare_selection(&corpus, &refs, &gpus, |fb, gpus| {
        let answers = comgr.lookup(&fb.bundle, gpus);
        answers
            .into_iter()
            .map(|answer| {
                answer.map(|(offset, size)| {
                    let entry = fb.entries.iter().find(|e| e.offset == offset && e.size == size);
                    entry.unwrap_or_else(|| panic!("comgr chose {offset:#x}+{size}, no entry there")).clone()
                })
            })
            .collect()
    });
    // 9 fat binaries, 38 GPUs (17 processors, with their feature settings).
    assert_eq!(checked, 9 * 38, "selections compared");
}

/// The same for processors comgr 5.2 does not know (gfx940 and newer,
/// gfx11, gfx12): the documented rule (docs/reference/selection-rules.md)
/// applied to LLVM 19's view of the bundle. Leaves out [`NEEDS_NEW_TABLE`],
/// checked by the next test.
#[test]
#[cfg_attr(
    not(all(has_llvm19, has_comgr, has_real_corpus)),
    ignore = "needs LLVM 19, comgr and the real ROCm corpus: run scripts/install-reference-llvm.sh and scripts/install-test-deps.sh and scripts/fetch-real-corpus.sh"
)]
fn selection_follows_documented_rule() {
    let corpus = Corpus::get();
    let refs = References::get(&corpus);
    let comgr = refs.comgr();
    let gpus: Vec<Gpu> = corpus_gpus(&refs, &corpus)
        .into_iter()
        .filter(|g| !comgr.knows(&g.processor) && !NEEDS_NEW_TABLE.contains(&g.processor.as_str()))
        .collect();
    assert!(gpus.iter().any(|g| g.processor == "gfx1201"), "{gpus:?}");
    let checked = compare_selection(&corpus, &refs, &gpus, documented_choice);
    assert_eq!(checked, 9 * 24, "selections compared");
}

/// Processors newer than LLVM 19 that the corpus holds: gfx950, gfx1153,
/// gfx1250, gfx1251. DEPENDS ON THE NEW PROCESSOR TABLE (branch `tables`):
/// fails with "unknown processor" until that is merged.
#[test]
#[cfg_attr(
    not(all(has_llvm19, has_real_corpus)),
    ignore = "needs LLVM 19 and the real ROCm corpus: run scripts/install-reference-llvm.sh and scripts/fetch-real-corpus.sh"
)]
fn selection_for_processors_newer_than_llvm19() {
    let corpus = Corpus::get();
    let refs = References::get(&corpus);
    let gpus: Vec<Gpu> =
        corpus_gpus(&refs, &corpus).into_iter().filter(|g| NEEDS_NEW_TABLE.contains(&g.processor.as_str())).collect();
    let processors: BTreeSet<&str> = gpus.iter().map(|g| g.processor.as_str()).collect();
    assert_eq!(processors, NEEDS_NEW_TABLE.iter().copied().collect(), "the corpus holds all of them");
    // gfx950, gfx1250, gfx1251 bare and with their four sramecc/xnack
    // settings; gfx1153 bare.
    assert_eq!(compare_selection(&corpus, &refs, &gpus, documented_choice), 9 * 16, "selections compared");
}

/// `offload verify` finds nothing wrong in any corpus file. DEPENDS ON THE
/// NEW PROCESSOR TABLE (branch `tables`): until it is merged, verify reports
/// gfx950, gfx1153, gfx1250 and gfx1251 entries as unknown processors.
#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn verify_is_clean() {
    let corpus = Corpus::get();
    for file in corpus.files() {
        let out = offload(&["verify", "--json", file.to_str().unwrap()]);
        let findings = json(&out);
        assert!(findings.is_empty(), "{}: {findings:#?}", file.display());
        assert!(out.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    }
}

/// The wheels and the .deb themselves, read without unpacking: every code
/// object of each unpacked corpus file appears in the package's listing,
/// under the member that holds it, with the same ID, target, size and
/// (decompressed) bytes; `verify` is clean on the package.
#[test]
#[cfg_attr(not(has_real_corpus), ignore = "needs the real ROCm corpus: run scripts/fetch-real-corpus.sh")]
fn packages_list_what_their_files_hold() {
    let corpus = Corpus::get();
    let tmp = tempfile::tempdir().unwrap();
    for (package, files) in corpus.packages() {
        let pkg = package.to_str().unwrap();
        let listed = json(&offload(&["list", "--json", pkg]));
        for file in files {
            let name = file.file_name().unwrap().to_str().unwrap();
            let mut compared = 0;
            for (i, r) in json(&offload(&["list", "--json", file.to_str().unwrap()])).iter().enumerate() {
                let location = s(r, "location");
                let found = listed.iter().position(|p| {
                    let at = s(p, "location");
                    s(p, "id") == s(r, "id")
                        && (at.ends_with(&format!("/{name} {location}"))
                            || at.ends_with(&format!("member {name} {location}")))
                });
                let Some(found) = found else { panic!("{pkg}: no '{}' at ... {name} {location}", s(r, "id")) };
                let p = &listed[found];
                for key in ["id", "target_id", "offload_kind", "format"] {
                    assert_eq!(s(p, key), s(r, key), "{pkg}: {name} {location}: {key}");
                }
                assert_eq!(n(p, "size"), n(r, "size"), "{pkg}: {name} {location}");
                // A compressed package member has no offset; the bytes come
                // from `extract --index`, counted across the package.
                assert!(p["offset"].is_null(), "{pkg}: a deflated/xz member has no offset in the package");
                if i % 7 == 0 && s(r, "offload_kind") != "host" {
                    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
                    let from_pkg = offload(&["extract", "--index", &found.to_string(), "-o", a.to_str().unwrap(), pkg]);
                    assert!(from_pkg.status.success(), "{}", String::from_utf8_lossy(&from_pkg.stderr));
                    let from_file = offload(&[
                        "extract",
                        "--index",
                        &i.to_string(),
                        "-o",
                        b.to_str().unwrap(),
                        file.to_str().unwrap(),
                    ]);
                    assert!(from_file.status.success(), "{}", String::from_utf8_lossy(&from_file.stderr));
                    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "{pkg}: {name} {location}");
                }
                compared += 1;
            }
            assert!(compared > 0, "{}: no code objects", file.display());
        }
        let out = offload(&["verify", "--json", pkg]);
        assert!(json(&out).is_empty() && out.status.success(), "{pkg}: {}", String::from_utf8_lossy(&out.stdout));
    }
}

/// `offload extract --all` into `dir`: the written file of each (unit, id).
fn extract_all(file: &Path, dir: &Path) -> BTreeMap<(u64, String), std::path::PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let out = offload(&["extract", "--all", "--json", "--output-dir", dir.to_str().unwrap(), file.to_str().unwrap()]);
    assert!(out.status.success(), "extract {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    json(&out).iter().map(|r| ((n(r, "unit"), s(r, "id").to_string()), s(r, "path").into())).collect()
}

/// Runs `offload select --json` for each GPU on each file and compares the
/// chosen code object of every fat binary with `expected`. Returns the number
/// of (file, fat binary, GPU) triples compared.
fn compare_selection(
    corpus: &Corpus,
    refs: &References,
    gpus: &[Gpu],
    expected: impl Fn(&FatBinary, &[Gpu]) -> Vec<Option<Entry>>,
) -> usize {
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (i, file) in corpus.files().iter().enumerate() {
        let work = tmp.path().join(i.to_string());
        std::fs::create_dir_all(&work).unwrap();
        let fat_binaries = refs.fat_binaries(file, &work);
        let answers: Vec<Vec<Option<Entry>>> = fat_binaries.iter().map(|fb| expected(fb, gpus)).collect();
        for (g, gpu) in gpus.iter().enumerate() {
            let out = offload(&["select", "--json", "--gpu", &gpu.isa, file.to_str().unwrap()]);
            assert!(
                matches!(out.status.code(), Some(0 | 1)),
                "select --gpu {} {}: {}",
                gpu.isa,
                file.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let records = json(&out);
            for (unit, fb) in fat_binaries.iter().enumerate() {
                let chosen: Vec<&Value> = records
                    .iter()
                    .filter(|r| n(r, "unit") == unit as u64 && r["selected"].as_bool() == Some(true))
                    .collect();
                assert!(chosen.len() <= 1, "{chosen:?}");
                let what = format!("{} fat binary {unit}, GPU {}", file.display(), gpu.isa);
                match (answers[unit][g].clone(), chosen.first()) {
                    (None, None) => {}
                    (Some(want), Some(got)) => {
                        assert_eq!(s(got, "id"), want.id, "{what}");
                        assert_eq!(n(got, "size"), want.size, "{what}");
                        if fb.ccob_version.is_none() {
                            assert_eq!(n(got, "offset"), fb.start + want.offset, "{what}");
                        }
                    }
                    (want, got) => panic!("{what}: expected {want:?}, offload chose {got:?}"),
                }
                checked += 1;
            }
        }
    }
    eprintln!("real corpus: {checked} selections compared for {} GPUs", gpus.len());
    checked
}
