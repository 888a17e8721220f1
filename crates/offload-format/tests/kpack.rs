//! kpack support checked against files AMD's own tool made
//! (`tests/fixtures/kpack/README.md`): every archive and every split
//! library reads, the resolver gives every answer AMD's loader gave
//! (`loader-answers.txt`), the bytes served are the fat original's, and
//! damaged archives give errors, not panics.

use md5::{Digest, Md5};
use offload_format::bundle::{binary, compressed};
use offload_format::elf::ElfFile;
use offload_format::kpack::resolve::{Resolver, normalize};
use offload_format::kpack::verify::verify;
use offload_format::kpack::{
    Archive, ArchiveSource, Env, HostBinary, Marker, RealFiles, Request, SearchOrder, VerifyOptions, WrapperKind,
    clr_arch_list,
};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kpack")
}

/// The fixture folder, whose file names spell `:` as `%3A` (so that the
/// repository checks out on Windows); the loader sees the real names.
struct Fixtures;

fn on_disk(path: &Path) -> PathBuf {
    PathBuf::from(path.to_string_lossy().replace(':', "%3A"))
}

impl ArchiveSource for Fixtures {
    type Data = Vec<u8>;
    fn is_file(&self, path: &Path) -> bool {
        on_disk(path).is_file()
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        std::fs::read(on_disk(path))
    }
    fn canonical(&self, path: &Path) -> PathBuf {
        normalize(path)
    }
}

fn md5_hex(data: &[u8]) -> String {
    Md5::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// What the loader answered for one wrapper record.
#[derive(Debug, Default)]
struct Wrapper {
    index: usize,
    pointer: u64,
    reserved1: u64,
    kernel_name: String,
    search_path: String,
    key: String,
    /// (size, md5, code-object target) or (error name, code).
    served: Option<(usize, String, String)>,
    error: Option<(String, u32)>,
    /// (archive, toc key, toc target).
    from: Option<(String, String, String)>,
}

/// One `$ loader LIB GPU` block.
#[derive(Debug, Default)]
struct Case {
    binary: String,
    agent: String,
    arch_list: Vec<String>,
    fatbin: Option<(u64, u64)>,
    marker: Option<(u64, u64)>,
    no_segment: bool,
    wrappers: Vec<Wrapper>,
}

fn quoted(line: &str, after: &str) -> String {
    let rest = &line[line.find(after).unwrap() + after.len()..];
    let rest = rest.trim_start().strip_prefix('"').unwrap();
    rest[..rest.find('"').unwrap()].to_string()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(root().join("loader-answers.txt")).unwrap();
    let mut cases: Vec<Case> = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with("$ loader ") {
            cases.push(Case { agent: words[3].to_string(), ..Case::default() });
            continue;
        }
        let Some(case) = cases.last_mut() else { continue };
        if let Some(rest) = line.strip_prefix("binary: ") {
            case.binary = rest.to_string();
        } else if line.starts_with("agent: ") {
            assert_eq!(words[1], case.agent);
            case.arch_list = words[3..].iter().map(|s| s.to_string()).collect();
        } else if line.starts_with(".hip_fatbin: NOBITS") {
            case.fatbin = Some((hex(words[3]), hex(words[5])));
        } else if line.starts_with(".rocm_kpack_ref: ") {
            case.marker = Some((hex(words[2]), words[4].parse().unwrap()));
        } else if line.starts_with("no .hipFatBinSegment") {
            case.no_segment = true;
        } else if line.starts_with("wrapper ") {
            assert_eq!(words[3], "HIPK");
            let reserved = words.iter().position(|w| *w == "reserved1").unwrap();
            case.wrappers.push(Wrapper {
                index: words[1].trim_end_matches(':').parse().unwrap(),
                pointer: hex(words[9]),
                reserved1: words[reserved + 1].parse().unwrap(),
                ..Wrapper::default()
            });
        } else if line.trim_start().starts_with("marker: ") {
            let w = case.wrappers.last_mut().unwrap();
            w.kernel_name = quoted(line, "kernel_name");
            w.search_path = quoted(line, "search_paths");
        } else if line.trim_start().starts_with("RESULT ") {
            let w = case.wrappers.last_mut().unwrap();
            let (key, answer) = line.trim_start()["RESULT ".len()..].split_once(": ").unwrap();
            w.key = key.to_string();
            let a: Vec<&str> = answer.split_whitespace().collect();
            if a[1] == "bytes" {
                w.served = Some((a[0].parse().unwrap(), a[3].to_string(), a[5].to_string()));
            } else {
                let code = a[1].trim_matches(|c| c == '(' || c == ')').parse().unwrap();
                w.error = Some((a[0].to_string(), code));
            }
        } else if line.trim_start().starts_with("from: ") {
            let w = case.wrappers.last_mut().unwrap();
            let archive = words[1].to_string();
            let key = quoted(line, "[toc");
            let target = quoted(line, "->");
            w.from = Some((archive, key, target));
        }
    }
    cases
}

/// The code objects of a fat original's `.hip_fatbin`, in bundle order:
/// (target ID, bytes), decompressing compressed bundles.
fn fat_objects(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let elf = ElfFile::parse(data).unwrap();
    let index = (1..elf.sections.len()).find(|&i| elf.section_name(i).unwrap() == b".hip_fatbin").unwrap();
    let section = elf.section_data(index).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    let mut push = |bundle: &[u8]| -> usize {
        let entries = binary::read(bundle).unwrap().unwrap();
        for e in &entries {
            let id = String::from_utf8_lossy(e.id);
            if let Some((_, target)) = id.rsplit_once("--") {
                out.push((target.to_string(), e.payload.to_vec()));
            }
        }
        entries.iter().map(|e| (e.offset as usize) + e.payload.len()).max().unwrap()
    };
    while pos < section.len() {
        if section[pos] == 0 {
            pos += 1;
            continue;
        }
        let rest = &section[pos..];
        if compressed::is_compressed(rest) {
            let blob = compressed::read_blob(rest).unwrap();
            push(&compressed::decompress(&blob).unwrap());
            pos += blob.len;
        } else {
            pos += push(rest);
        }
    }
    out
}

/// The processor an AMDGPU code object names in `e_flags`.
fn processor_of(code_object: &[u8]) -> &'static str {
    let elf = ElfFile::parse(code_object).unwrap();
    assert_eq!(elf.header.machine, offload_format::elf::EM_AMDGPU);
    offload_format::amdgpu::processor_by_elf_mach(elf.header.flags as u8).unwrap().name
}

/// Resolves every record of every case with `source` (paths relative to
/// `base`) and checks the answers; returns (served, errors) counts.
fn check_answers<S: ArchiveSource>(source: &S, base: &Path, order: SearchOrder) -> (usize, usize) {
    let env = Env { cwd: base.to_path_buf(), ..Env::default() };
    let resolver = Resolver { order, ..Resolver::new(source, &env) };
    let (mut served, mut errors) = (0, 0);
    let cases = cases();
    assert_eq!(cases.len(), 99);
    for case in &cases {
        let what = format!("{} on {}", case.binary, case.agent);
        let arch_list = clr_arch_list(&case.agent);
        assert_eq!(arch_list, case.arch_list, "{what}");
        let data = std::fs::read(root().join(&case.binary)).unwrap();
        let host = HostBinary::read(&data).unwrap();
        if case.no_segment {
            assert!(host.wrappers.is_empty() && !host.is_kpacked() && host.marker.is_none(), "{what}");
            continue;
        }
        let fatbin = host.fatbin.unwrap();
        assert_eq!((fatbin.nobits, fatbin.addr, fatbin.size), (true, case.fatbin.unwrap().0, case.fatbin.unwrap().1));
        let marker_section = host.marker_section.unwrap();
        assert_eq!((marker_section.addr, marker_section.size), case.marker.unwrap(), "{what}");
        assert_eq!(host.wrappers.len(), case.wrappers.len(), "{what}");
        for (w, want) in host.wrappers.iter().zip(&case.wrappers) {
            let what = format!("{what}, wrapper {}", want.index);
            assert_eq!(w.record.kind(), WrapperKind::Hipk, "{what}");
            assert_eq!((w.record.version, w.record.binary, w.relocated), (1, 0, true), "{what}");
            assert_eq!((w.pointer, w.record.reserved1), (want.pointer, want.reserved1), "{what}");
            let marker: &Marker = w.marker.as_ref().unwrap().as_ref().unwrap();
            assert_eq!(marker.kernel_name, want.kernel_name, "{what}");
            assert_eq!(marker.search_paths, [want.search_path.as_str()], "{what}");
            let request = Request {
                binary_path: Path::new(&case.binary),
                marker,
                co_index: w.record.co_index(),
                arch_list: &arch_list,
            };
            let result = resolver.load(&request).result;
            match (&result, &want.served, &want.error) {
                (Ok(loaded), Some((size, md5, co_target)), None) => {
                    let (archive, key, target) = want.from.as_ref().unwrap();
                    assert_eq!(loaded.archive, base.join(archive), "{what}");
                    assert_eq!((&loaded.key, &loaded.target), (key, target), "{what}");
                    assert_eq!(&loaded.key, &want.key, "{what}");
                    assert_eq!((loaded.bytes.len(), md5_hex(&loaded.bytes)), (*size, md5.clone()), "{what}");
                    assert_eq!(processor_of(&loaded.bytes), co_target.split(':').next().unwrap(), "{what}");
                    served += 1;
                }
                (Err(e), None, Some((name, code))) => {
                    assert_eq!((e.name(), e.code()), (name.as_str(), *code), "{what}: {e}");
                    errors += 1;
                }
                _ => panic!("{what}: resolver says {result:?}, the loader {want:?}"),
            }
        }
    }
    (served, errors)
}

#[test]
fn resolver_reproduces_every_loader_answer() {
    let (served, errors) = check_answers(&Fixtures, &root(), SearchOrder::FallThrough);
    // 47 code objects served and 61 errors (44 ARCHIVE_NOT_FOUND, 17
    // KERNEL_NOT_FOUND) over 99 runs; the hostonly runs register nothing.
    assert_eq!((served, errors), (47, 61));
}

#[test]
fn real_file_system_gives_the_same_answers() {
    // The fixtures under their real names (colons included), read through
    // RealFiles.
    let dir = tempfile::tempdir().unwrap();
    for sub in ["installed", "site"] {
        offload_testkit::copy_with_real_names(&root().join(sub), &dir.path().join(sub));
    }
    std::fs::copy(root().join("loader-answers.txt"), dir.path().join("loader-answers.txt")).unwrap();
    assert_eq!(check_answers(&RealFiles, dir.path(), SearchOrder::FallThrough), (47, 61));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out.sort();
    out
}

#[test]
fn first_compatible_order_differs_only_where_an_archive_hides_another() {
    let env = Env { cwd: root(), ..Env::default() };
    let new = Resolver::new(&Fixtures, &env);
    let old = Resolver { order: SearchOrder::FirstCompatible, ..new };
    let mut differ = Vec::new();
    for case in cases().iter().filter(|c| !c.no_segment) {
        let data = std::fs::read(root().join(&case.binary)).unwrap();
        let host = HostBinary::read(&data).unwrap();
        let arch_list = clr_arch_list(&case.agent);
        for w in &host.wrappers {
            let marker = w.marker.as_ref().unwrap().as_ref().unwrap();
            let request = Request {
                binary_path: Path::new(&case.binary),
                marker,
                co_index: w.record.co_index(),
                arch_list: &arch_list,
            };
            let (a, b) = (new.load(&request).result, old.load(&request).result);
            if a != b {
                // Only "the newer loader found it further down the list,
                // the old one stopped at KERNEL_NOT_FOUND".
                assert!(a.is_ok(), "{} on {}: {a:?}", case.binary, case.agent);
                assert_eq!(b.as_ref().unwrap_err().code(), 5, "{} on {}", case.binary, case.agent);
                differ.push(format!("{} {} #{}", case.binary, case.agent, w.record.co_index()));
            }
        }
    }
    // The two cases of the spec: an xnack+ archive made for other libraries
    // hides the plain gfx90a one, and gfx1100.kpack hides gfx11-generic.
    assert!(differ.contains(&"installed/stage/lib/libkp_plain.so gfx90a:xnack+ #0".to_string()), "{differ:#?}");
    assert!(differ.contains(&"installed/stage/lib/libkp_generic.so gfx1100 #0".to_string()), "{differ:#?}");
    // And every other gfx90a device with xnack in its agent string for a
    // library outside the xnack archives: 19 records in all.
    assert_eq!(differ.len(), 19, "{differ:#?}");
}

#[test]
fn every_archive_and_marker_reads_and_verifies() {
    let mut archives = 0;
    let mut objects = 0;
    for path in walk(&root()) {
        let name = path.to_string_lossy().into_owned();
        let data = std::fs::read(&path).unwrap();
        if name.ends_with(".kpack") {
            let archive = Archive::parse(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
            let problems = verify(&archive, &VerifyOptions::default());
            assert!(problems.is_empty(), "{name}: {problems:?}");
            // One archive per target ID, named by it.
            assert_eq!(archive.gfx_arches.len(), 1, "{name}");
            let target = archive.gfx_arches[0];
            assert!(name.ends_with(&format!("_{}.kpack", target.replace(':', "%3A"))), "{name}");
            assert_eq!(archive.gfx_arch_family, Some(target));
            assert_eq!(archive.format_version, Some(1));
            assert_eq!(archive.blob.unwrap().offset, 64);
            assert_eq!(archive.blob.unwrap().end(), archive.toc_offset);
            for (key, entry) in archive.entries() {
                assert!(key.rsplit_once('#').unwrap().1.parse::<u32>().is_ok(), "{name}: {key}");
                assert_eq!(entry.target, target);
                assert!(
                    archive.frame_header(entry.ordinal).unwrap().unwrap().content_size == Some(entry.original_size)
                );
                if let Some(id) = entry.source_id {
                    assert!(id.ends_with(&format!("--{target}")), "{name}: {id}");
                }
                objects += 1;
            }
            archives += 1;
        } else if name.contains("/lib/") && name.ends_with(".so") {
            let host = HostBinary::read(&data).unwrap_or_else(|e| panic!("{name}: {e}"));
            if name.ends_with("hostonly.so") {
                assert!(!host.is_kpacked());
                continue;
            }
            assert!(host.is_kpacked(), "{name}");
            let marker = host.marker.unwrap().unwrap();
            let stem = name.rsplit('/').next().unwrap();
            assert!(marker.kernel_name.ends_with(&format!("lib/{stem}")), "{name}");
            assert!(marker.search_paths[0].starts_with("../.kpack/"), "{name}");
            assert!(marker.search_paths[0].ends_with("_@GFXARCH@.kpack"), "{name}");
            assert_eq!(marker.len as u64, host.marker_section.unwrap().size);
        }
    }
    assert_eq!((archives, objects), (10, 28));
}

#[test]
fn served_bytes_equal_the_fat_originals() {
    // Every served answer of loader-answers.txt comes from the fat
    // original's co_index-th bundle entry of that target.
    let env = Env { cwd: root(), ..Env::default() };
    let resolver = Resolver::new(&Fixtures, &env);
    let mut compared = 0;
    for case in cases().iter().filter(|c| !c.no_segment) {
        let lib = case.binary.rsplit('/').next().unwrap();
        let fat = fat_objects(&std::fs::read(root().join("fat").join(lib)).unwrap());
        let data = std::fs::read(root().join(&case.binary)).unwrap();
        let host = HostBinary::read(&data).unwrap();
        let arch_list = clr_arch_list(&case.agent);
        for (index, resolution) in resolver.load_host(Path::new(&case.binary), &host, &arch_list) {
            let co_index = host.wrappers[index].record.co_index();
            let Ok(loaded) = resolution.result else { continue };
            let original = fat.iter().filter(|(t, _)| *t == loaded.target).nth(co_index as usize).unwrap();
            assert!(original.1 == loaded.bytes, "{} on {} #{co_index}", case.binary, case.agent);
            compared += 1;
        }
    }
    assert_eq!(compared, 47);
}

#[test]
fn damaged_real_archives_give_errors_not_panics() {
    let data = std::fs::read(root().join("installed/stage/.kpack/kpdemo_lib_gfx1100.kpack")).unwrap();
    let good = Archive::parse(&data).unwrap();
    let toc = good.toc_offset as usize;
    // Every cut inside the TOC fails, and so does every cut of the blob.
    for cut in (0..data.len()).step_by(97).chain(toc..data.len()) {
        assert!(Archive::parse(&data[..cut]).is_err(), "cut at {cut}");
    }
    // Random damage anywhere: parse, verify and decode never panic.
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let options = VerifyOptions { decompress: true, limit: 1 << 20 };
    let mut failed = 0;
    for round in 0..400 {
        let mut bad = data.clone();
        // Half the rounds hit the TOC, half anywhere.
        let (lo, span) = if round % 2 == 0 { (toc, data.len() - toc) } else { (0, data.len()) };
        for _ in 0..1 + round % 3 {
            let at = lo + (next() as usize) % span;
            bad[at] ^= (next() as u8) | 1;
        }
        match Archive::parse(&bad) {
            Err(_) => failed += 1,
            Ok(a) => {
                if !verify(&a, &options).is_empty() {
                    failed += 1;
                }
            }
        }
    }
    // Much damage is noticed; what is not lands in strings the reader does
    // not interpret (keys, group_name, metadata) or in zstd literals of
    // frames without a checksum, which decode to other bytes of the same
    // size.
    assert!(failed >= 100, "{failed}");
    // Damage to the magic or the version always is.
    for at in 0..8 {
        let mut bad = data.clone();
        bad[at] ^= 0x40;
        assert!(Archive::parse(&bad).is_err(), "byte {at}");
    }
}

#[test]
fn damaged_host_binaries_give_errors_not_panics() {
    let data = std::fs::read(root().join("installed/stage/lib/libkp_multi.so")).unwrap();
    let good = HostBinary::read(&data).unwrap();
    assert_eq!(good.wrappers.len(), 2);
    let mut x = 0x0bad_5eed_0bad_5eedu64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut errors, mut markers) = (0, 0);
    for round in 0..600 {
        let mut bad = data.clone();
        for _ in 0..1 + round % 4 {
            let at = (next() as usize) % bad.len();
            bad[at] = next() as u8;
        }
        match HostBinary::read(&bad) {
            Err(e) => {
                assert!(!e.to_string().is_empty());
                errors += 1;
            }
            Ok(host) => markers += host.wrappers.iter().filter(|w| matches!(w.marker, Some(Ok(_)))).count(),
        }
    }
    assert!(errors > 0 && markers > 0, "{errors} {markers}");
    // Every cut of the real marker is an error.
    let marker = good.marker_section.unwrap();
    let section = offload_format::elf::ElfFile::parse(&data).unwrap().sections[marker.index];
    for cut in 0..marker.size as usize {
        let bytes = &data[section.offset as usize..section.offset as usize + cut];
        assert!(Marker::parse(bytes).is_err(), "cut at {cut}");
    }
}
