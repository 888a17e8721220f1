//! kpack through the inspector, on the files AMD's own splitter made
//! (`crates/offload-format/tests/fixtures/kpack/`): every answer of AMD's
//! loader (`loader-answers.txt`) comes back from `select` and the bytes
//! from `Inventory::bytes` and `visit_objects`; archives list and verify;
//! damaged archives give diagnostics, not panics.

use md5::{Digest, Md5};
use offload_format::kpack::resolve::{Env, SearchOrder};
use offload_inspect::decode::visit_objects;
use offload_inspect::kpack::{self, attach};
use offload_inspect::select::{Gpu, Runtime, select};
use offload_inspect::{Format, Inventory, Options, Severity, scan};
use std::path::{Path, PathBuf};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-format/tests/fixtures/kpack")
}

/// The fixtures under their real names (`%3A` back to `:`).
fn installed_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["installed", "site"] {
        offload_testkit::copy_with_real_names(&fixtures().join(sub), &dir.path().join(sub));
    }
    dir
}

fn md5_hex(data: &[u8]) -> String {
    Md5::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// One `$ loader LIB GPU` block: binary, agent, and per record the md5 or
/// the error name.
struct Case {
    binary: String,
    agent: String,
    answers: Vec<Result<String, String>>,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("loader-answers.txt")).unwrap();
    let mut cases: Vec<Case> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with("$ loader ") {
            cases.push(Case { binary: String::new(), agent: words[3].into(), answers: Vec::new() });
        } else if let Some(rest) = line.strip_prefix("binary: ") {
            cases.last_mut().unwrap().binary = rest.to_string();
        } else if let Some(rest) = line.trim_start().strip_prefix("RESULT ") {
            let (_, answer) = rest.split_once(": ").unwrap();
            let a: Vec<&str> = answer.split_whitespace().collect();
            let case = cases.last_mut().unwrap();
            case.answers.push(if a[1] == "bytes" { Ok(a[3].to_string()) } else { Err(a[0].to_string()) });
        }
    }
    cases
}

fn scan_library<'a>(data: &'a [u8], library: &str, env: &Env, deep: bool) -> Inventory<'a> {
    let mut inv = scan(data, library, &Options { deep, ..Options::default() });
    attach(&mut inv, data, Path::new(library), env, deep);
    inv
}

#[test]
fn select_and_extract_give_every_loader_answer() {
    let dir = installed_copy();
    let env = Env { cwd: dir.path().to_path_buf(), ..Env::default() };
    let (mut served, mut refused, mut runs) = (0, 0, 0);
    for case in cases() {
        let what = format!("{} on {}", case.binary, case.agent);
        let data = std::fs::read(dir.path().join(&case.binary)).unwrap();
        let inv = scan_library(&data, &case.binary, &env, false);
        let gpu = Gpu::parse(&case.agent).unwrap();
        assert_eq!(gpu.target_id(), case.agent);
        let mut sel = select(&inv.objects, &gpu, Runtime::Hip);
        let answers = kpack::select(&inv, &mut sel, &gpu, SearchOrder::FallThrough);
        assert_eq!(answers.len(), case.answers.len(), "{what}");
        runs += 1;
        for (got, want) in answers.iter().zip(&case.answers) {
            match (&got.result, want) {
                (Ok(i), Ok(md5)) => {
                    let bytes = inv.bytes(&inv.objects[*i]).unwrap();
                    assert_eq!(&md5_hex(&bytes), md5, "{what}");
                    assert!(sel.chosen.contains(i), "{what}");
                    // extract's path: visit_objects.
                    let seen = std::sync::Mutex::new(None);
                    visit_objects(&inv, &[*i], 1, |_, b| -> Result<(), ()> {
                        *seen.lock().unwrap() = Some(md5_hex(b.unwrap()));
                        Ok(())
                    })
                    .unwrap_or_else(|_| panic!("{what}"));
                    assert_eq!(seen.into_inner().unwrap().as_ref(), Some(md5), "{what}");
                    served += 1;
                }
                (Err((name, _, _)), Err(want)) => {
                    assert_eq!(name, want, "{what}");
                    assert!(sel.failed_units.contains(&got.unit), "{what}");
                    assert!(sel.refusals.iter().any(|(u, m)| *u == got.unit && m.starts_with(want.as_str())), "{what}");
                    refused += 1;
                }
                (got, want) => panic!("{what}: inspector {got:?}, loader {want:?}"),
            }
        }
    }
    assert_eq!((runs, served, refused), (99, 47, 61));
}

#[test]
fn first_compatible_order_is_the_july_2026_loader() {
    let dir = installed_copy();
    let env = Env { cwd: dir.path().to_path_buf(), ..Env::default() };
    let binary = "installed/stage/lib/libkp_plain.so";
    let data = std::fs::read(dir.path().join(binary)).unwrap();
    let inv = scan_library(&data, binary, &env, false);
    let gpu = Gpu::parse("gfx90a:xnack+").unwrap();
    let mut sel = select(&inv.objects, &gpu, Runtime::Hip);
    let answers = kpack::select(&inv, &mut sel, &gpu, SearchOrder::FirstCompatible);
    // The xnack+ archive, made for other libraries, hides the plain one.
    assert_eq!(answers[0].result.as_ref().unwrap_err().0, "KPACK_ERROR_KERNEL_NOT_FOUND");
    let mut sel = select(&inv.objects, &gpu, Runtime::Hip);
    let answers = kpack::select(&inv, &mut sel, &gpu, SearchOrder::FallThrough);
    assert!(answers[0].result.is_ok());
}

#[test]
fn a_split_library_lists_the_entries_its_search_paths_reach() {
    let dir = installed_copy();
    let env = Env { cwd: dir.path().to_path_buf(), ..Env::default() };
    let binary = "installed/stage/lib/libkp_xnack.so";
    let data = std::fs::read(dir.path().join(binary)).unwrap();
    let inv = scan_library(&data, binary, &env, false);
    assert!(inv.diagnostics.is_empty(), "{:?}", inv.diagnostics);
    let targets: Vec<&str> = inv.objects.iter().map(|o| o.target_id.as_str()).collect();
    assert_eq!(targets, ["gfx1100", "gfx90a:xnack+", "gfx90a:xnack-", "gfx942:sramecc+:xnack-"]);
    for o in &inv.objects {
        assert_eq!(o.format, Format::KpackArchive);
        assert!(o.compressed);
        let loc = o.location.to_string();
        assert!(
            loc.starts_with(&format!("kpack {}/installed/stage/.kpack/kpdemo_lib_", dir.path().display())),
            "{loc}"
        );
        assert!(loc.ends_with(&format!("key kpdemo/stage/lib/libkp_xnack.so#0 target {}", o.stored_target)), "{loc}");
        assert_eq!(inv.bytes(o).unwrap().len() as u64, o.size);
    }
    // The library moved away from its .kpack folder: nothing reachable,
    // said as a warning (an error for verify).
    let moved = dir.path().join("moved.so");
    std::fs::copy(dir.path().join(binary), &moved).unwrap();
    let inv = scan_library(&data, "moved.so", &env, false);
    assert!(inv.objects.is_empty());
    assert_eq!(inv.diagnostics.len(), 1);
    assert_eq!(inv.diagnostics[0].severity, Severity::Warning);
    assert!(inv.diagnostics[0].message.contains("no kpack archive found for kpdemo/stage/lib/libkp_xnack.so#0"));
    assert!(inv.diagnostics[0].message.contains(".kpack/kpdemo_lib_@GFXARCH@.kpack"), "{}", inv.diagnostics[0].message);
    let inv = scan_library(&data, "moved.so", &env, true);
    assert_eq!(inv.diagnostics[0].severity, Severity::Error);
    // ROCM_KPACK_PATH names the archives instead.
    let env = Env {
        kpack_path: Some("installed/stage/.kpack/kpdemo_lib_gfx1100.kpack".into()),
        cwd: dir.path().to_path_buf(),
        ..Env::default()
    };
    let inv = scan_library(&data, "moved.so", &env, false);
    assert_eq!(inv.objects.len(), 1);
    let gpu = Gpu::parse("gfx1100").unwrap();
    let mut sel = select(&inv.objects, &gpu, Runtime::Hip);
    let answers = kpack::select(&inv, &mut sel, &gpu, SearchOrder::FallThrough);
    assert_eq!(answers[0].result, Ok(0));
    // ROCM_KPACK_DISABLE: every load refused.
    let env = Env { disable: Some("1".into()), cwd: dir.path().to_path_buf(), ..Env::default() };
    let inv = scan_library(&data, binary, &env, false);
    let mut sel = select(&inv.objects, &gpu, Runtime::Hip);
    let answers = kpack::select(&inv, &mut sel, &gpu, SearchOrder::FallThrough);
    assert_eq!(answers[0].result.as_ref().unwrap_err().0, "KPACK_ERROR_NOT_IMPLEMENTED");
}

#[test]
fn an_archive_lists_every_entry_and_verifies() {
    let path = fixtures().join("installed/stage/.kpack/kpdemo_lib_gfx90a.kpack");
    let data = std::fs::read(&path).unwrap();
    let inv = scan(&data, "kpdemo_lib_gfx90a.kpack", &Options::default());
    assert!(inv.diagnostics.is_empty());
    // Five libraries with gfx90a code (multi has two fat binaries): one
    // unit per key.
    assert_eq!(inv.objects.len(), 6);
    assert_eq!(inv.units.len(), 6);
    for o in &inv.objects {
        assert_eq!((o.format.name(), o.target_id.as_str(), o.compressed), ("kpack-archive", "gfx90a", true));
        assert!(o.id.ends_with("--gfx90a"), "{}", o.id);
        assert!(o.location.to_string().starts_with("file key kpdemo/stage/lib/libkp_"), "{}", o.location);
        let bytes = inv.bytes(o).unwrap();
        assert_eq!(bytes.len() as u64, o.size);
        assert_eq!(&bytes[..4], b"\x7fELF");
        // The URI is the stored frame's range, as for a compressed bundle.
        let (start, len) = offload_inspect::uri::range(o, &data).unwrap();
        assert!(start >= 64 && start + len <= data.len() as u64);
    }
    let deep = scan(&data, "a.kpack", &Options { deep: true, ..Options::default() });
    assert!(deep.diagnostics.is_empty(), "{:?}", deep.diagnostics);
    // Generic selection per key on the archive itself.
    let sel = select(&inv.objects, &Gpu::parse("gfx90a").unwrap(), Runtime::Hip);
    assert_eq!(sel.chosen.len(), 6);
}

#[test]
fn damaged_archives_give_diagnostics_with_offsets_not_panics() {
    let data = std::fs::read(fixtures().join("installed/stage/.kpack/kpdemo_lib_gfx1100.kpack")).unwrap();
    let toc = u64::from_le_bytes(data[8..16].try_into().unwrap()) as usize;
    // A truncated TOC.
    let cut = &data[..toc + (data.len() - toc) / 2];
    let inv = scan(cut, "a.kpack", &Options { deep: true, ..Options::default() });
    assert!(inv.objects.is_empty());
    assert!(inv.has_errors());
    assert!(inv.diagnostics[0].offset.unwrap() >= toc as u64, "{:?}", inv.diagnostics);
    // A TOC offset past the end of the file.
    let mut bad = data.clone();
    bad[8..16].copy_from_slice(&(data.len() as u64 + 10).to_le_bytes());
    let inv = scan(&bad, "a.kpack", &Options { deep: true, ..Options::default() });
    assert!(inv.has_errors());
    assert_eq!(inv.diagnostics[0].offset, Some(8));
    // A frame's length prefix pointing past the blob.
    let mut bad = data.clone();
    let first_len = 64 + 4;
    bad[first_len..first_len + 4].copy_from_slice(&0x00ff_ffffu32.to_le_bytes());
    let inv = scan(&bad, "a.kpack", &Options { deep: true, ..Options::default() });
    assert!(inv.has_errors(), "{:?}", inv.diagnostics);
    // Every byte of the frame table and TOC damaged in turn, and random
    // damage: list, verify and bytes never panic; damage to frames is
    // found by verify.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut errors = 0;
    for round in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let mut bad = data.clone();
        let at = if round % 2 == 0 { toc + (x as usize) % (data.len() - toc) } else { (x as usize) % data.len() };
        bad[at] ^= (x >> 32) as u8 | 1;
        let inv = scan(&bad, "a.kpack", &Options { deep: true, ..Options::default() });
        for o in &inv.objects {
            let _ = inv.bytes(o);
        }
        errors += usize::from(inv.has_errors());
    }
    // One flipped byte: what is not noticed lands in strings the reader
    // does not interpret (keys, metadata) or in zstd literals of frames
    // without a checksum, which decode to other bytes of the same size
    // (71 of 300 noticed when written).
    assert!(errors >= 50, "{errors}");
}

#[test]
fn a_split_library_with_a_damaged_archive_or_marker_reports_it() {
    let dir = installed_copy();
    let env = Env { cwd: dir.path().to_path_buf(), ..Env::default() };
    let binary = "installed/stage/lib/libkp_plain.so";
    // Damage the gfx1100 archive's first frame: verify of the archive says
    // so, and the loader refuses with DECOMPRESSION_FAILED.
    let archive = dir.path().join("installed/stage/.kpack/kpdemo_lib_gfx1100.kpack");
    let mut bytes = std::fs::read(&archive).unwrap();
    for b in &mut bytes[80..200] {
        *b ^= 0x55;
    }
    std::fs::write(&archive, &bytes).unwrap();
    let deep = scan(&bytes, "a.kpack", &Options { deep: true, ..Options::default() });
    assert!(deep.has_errors());
    let data = std::fs::read(dir.path().join(binary)).unwrap();
    let inv = scan_library(&data, binary, &env, false);
    let gpu = Gpu::parse("gfx1100").unwrap();
    let mut sel = select(&inv.objects, &gpu, Runtime::Hip);
    let answers = kpack::select(&inv, &mut sel, &gpu, SearchOrder::FallThrough);
    let refused = answers.iter().filter(|a| a.result.is_err()).count();
    assert!(refused > 0 || inv.objects.iter().all(|o| inv.bytes(o).is_ok()));
    // A library whose marker section is zeroed: the record's marker is
    // unreadable, an error.
    let elf = offload_format::elf::ElfFile::parse(&data).unwrap();
    let index = (1..elf.sections.len()).find(|&i| elf.section_name(i).unwrap() == b".rocm_kpack_ref").unwrap();
    let s = elf.sections[index];
    let mut bad = data.clone();
    for b in &mut bad[s.offset as usize..(s.offset + s.size) as usize] {
        *b = 0;
    }
    let inv = scan_library(&bad, binary, &env, false);
    assert!(inv.has_errors());
    assert!(
        inv.diagnostics.iter().any(|d| d.message.contains("KPACK_ERROR_INVALID_METADATA")),
        "{:?}",
        inv.diagnostics
    );
}

/// Wheel members land where `pip` installs them: `.data/purelib/` and
/// `.data/platlib/` members in `site-packages` itself, others as they are.
#[test]
fn package_tree_places_wheel_members_where_pip_installs_them() {
    use offload_inspect::kpack::{PackageTree, install_path};
    assert_eq!(install_path("kpdemo/.kpack/a.kpack"), "kpdemo/.kpack/a.kpack");
    assert_eq!(install_path("dev-1.0.data/platlib/kpdemo/.kpack/a.kpack"), "kpdemo/.kpack/a.kpack");
    assert_eq!(install_path("dev-1.0.data/purelib/kpdemo/lib/x.so"), "kpdemo/lib/x.so");
    assert_eq!(install_path("dev-1.0.data/scripts/tool"), "dev-1.0.data/scripts/tool");
    assert_eq!(install_path("dev-1.0.data/platlib"), "dev-1.0.data/platlib");
    assert_eq!(install_path("pkg/dev-1.0.data/platlib/x"), "pkg/dev-1.0.data/platlib/x");
    assert_eq!(
        PackageTree::path_of("dev-1.0.data/platlib/kpdemo/.kpack/a.kpack"),
        PackageTree::path_of("kpdemo/.kpack/a.kpack")
    );
    let mut tree = PackageTree::default();
    tree.add("dev-1.0.data/platlib/kpdemo/.kpack/a.kpack", std::sync::Arc::from(&b"KPAK"[..]));
    assert!(tree.files.contains_key(&PackageTree::path_of("kpdemo/.kpack/a.kpack")));
}
