//! Packages and folders built here from the prune fixtures: a HIP library
//! (gfx906 + gfx90a), a CUDA library (sm_75, sm_90, compute_90), a cubin
//! (sm_80) and rocBLAS-style data files named by target.

use super::*;
use crate::prune::parse_target;
use offload_testkit::{cli_fixture, fixture};
use std::collections::HashMap;
use std::io::{Cursor, Read, Write};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

fn rules(keep: &[&str]) -> Rules {
    Rules { keep: keep.iter().map(|k| parse_target(k).unwrap()).collect(), ..Default::default() }
}

fn opts(keep: &[&str]) -> Options {
    Options { rules: rules(keep), dry_run: false, threads: 2 }
}

/// (path, contents, stored?) of the test package.
fn members() -> Vec<(&'static str, Vec<u8>, bool)> {
    vec![
        ("pkg/__init__.py", b"from . import lib\n".to_vec(), false),
        ("pkg/lib/libhip.so", fixture("prune/gnu_rela.so"), false),
        ("pkg/lib/libsmall.so", cli_fixture("cuda/libsmall.so"), false),
        ("pkg/lib/kern.cubin", cli_fixture("cuda/kern.cubin"), true),
        ("pkg/library/TensileLibrary_lazy_gfx906.dat", vec![7u8; 3000], false),
        ("pkg/library/TensileLibrary_lazy_gfx90a.dat", vec![9u8; 3000], false),
        ("pkg/data.bin", (0..=255u8).cycle().take(5000).collect(), true),
    ]
}

/// Object payloads for `target` found in `data` (the bytes a GPU loads).
fn payloads(data: &[u8], target: &str) -> Vec<Vec<u8>> {
    let inv = offload_inspect::scan(data, "x", &offload_inspect::Options::default());
    inv.objects
        .iter()
        .filter(|o| !o.container && o.target_id.split(':').next() == Some(target))
        .map(|o| inv.bytes(o).unwrap().into_owned())
        .collect()
}

fn wheel() -> Vec<u8> {
    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    let time = DateTime::from_date_and_time(2024, 5, 6, 7, 8, 10).unwrap();
    let mut record = String::new();
    for (i, (name, data, stored)) in members().into_iter().enumerate() {
        let method = if stored { CompressionMethod::Stored } else { CompressionMethod::Deflated };
        let mode = (if name.ends_with(".so") { 0o755 } else { 0o644 }) | ((i as u32 % 2) * 0o020);
        let o = SimpleFileOptions::default().compression_method(method).last_modified_time(time).unix_permissions(mode);
        w.start_file(name, o).unwrap();
        w.write_all(&data).unwrap();
        record.push_str(&format!("{name},{},{}\n", record::hash(&data), data.len()));
    }
    let meta = b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n\nDescription\nVersion: not a header\n";
    let wheel = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n";
    let o = SimpleFileOptions::default().last_modified_time(time);
    for (name, data) in [("pkg-1.0.dist-info/METADATA", &meta[..]), ("pkg-1.0.dist-info/WHEEL", &wheel[..])] {
        w.start_file(name, o).unwrap();
        w.write_all(data).unwrap();
        record.push_str(&format!("{name},{},{}\n", record::hash(data), data.len()));
    }
    record.push_str("pkg-1.0.dist-info/RECORD,,\n");
    w.start_file("pkg-1.0.dist-info/RECORD", o).unwrap();
    w.write_all(record.as_bytes()).unwrap();
    w.finish().unwrap().into_inner()
}

/// A zip member: name, bytes, method, time, mode.
type ZipMember = (String, Vec<u8>, CompressionMethod, Option<DateTime>, Option<u32>);

/// Every member of a zip, in order.
fn read_zip(data: &[u8]) -> Vec<ZipMember> {
    let mut a = ZipArchive::new(Cursor::new(data)).unwrap();
    (0..a.len())
        .map(|i| {
            let mut f = a.by_index(i).unwrap();
            let mut b = Vec::new();
            f.read_to_end(&mut b).unwrap();
            (f.name().to_string(), b, f.compression(), f.last_modified(), f.unix_mode())
        })
        .collect()
}

fn prune_to_vec(data: &[u8], o: &Options, relabel: Option<&wheel::Relabel>) -> (Vec<u8>, TreeReport) {
    let mut out = tempfile::tempfile().unwrap();
    let report = wheel::prune_zip(data, Some(&out), o, relabel).unwrap();
    let mut bytes = Vec::new();
    std::io::Seek::rewind(&mut out).unwrap();
    out.read_to_end(&mut bytes).unwrap();
    (bytes, report)
}

/// Checks every RECORD line of a wheel against its members.
fn check_record(members: &[ZipMember], dist: &str) {
    let record = &members.iter().find(|m| m.0 == format!("{dist}/RECORD")).unwrap().1;
    let lines: HashMap<String, String> = String::from_utf8_lossy(record)
        .lines()
        .map(|l| {
            let (p, rest) = l.split_once(',').unwrap();
            (p.to_string(), rest.to_string())
        })
        .collect();
    assert_eq!(lines.len(), members.len(), "one RECORD line per member");
    for (name, bytes, ..) in members {
        let want = if name.ends_with("/RECORD") {
            ",".to_string()
        } else {
            format!("{},{}", record::hash(bytes), bytes.len())
        };
        assert_eq!(lines.get(name), Some(&want), "{name}");
    }
}

#[test]
fn a_wheel_keeps_what_kept_gpus_load_and_a_valid_record() {
    let input = wheel();
    let before = read_zip(&input);
    let (output, report) = prune_to_vec(&input, &opts(&["gfx90a", "sm_90"]), None);
    let after = read_zip(&output);
    check_record(&after, "pkg-1.0.dist-info");
    let names: Vec<&str> = after.iter().map(|m| m.0.as_str()).collect();
    let want: Vec<&str> = before
        .iter()
        .map(|m| m.0.as_str())
        .filter(|n| !n.ends_with("gfx906.dat") && !n.ends_with("kern.cubin"))
        .collect();
    assert_eq!(names, want, "the removed members go, the order stays");
    let old: HashMap<_, _> = before.iter().map(|m| (m.0.clone(), m)).collect();
    for m in &after {
        let o = old[&m.0];
        assert_eq!((m.2, m.3, m.4), (o.2, o.3, o.4), "{}: method, time and mode kept", m.0);
        if !m.0.ends_with(".so") && !m.0.ends_with("RECORD") {
            assert_eq!(m.1, o.1, "{}: untouched bytes", m.0);
        }
    }
    let lib = |ms: &[ZipMember], n: &str| ms.iter().find(|m| m.0 == n).unwrap().1.clone();
    let (hip0, hip1) = (lib(&before, "pkg/lib/libhip.so"), lib(&after, "pkg/lib/libhip.so"));
    assert_ne!(hip0, hip1);
    assert!(!payloads(&hip0, "gfx90a").is_empty());
    assert_eq!(payloads(&hip0, "gfx90a"), payloads(&hip1, "gfx90a"), "gfx90a loads the same bytes");
    assert!(payloads(&hip1, "gfx906").is_empty());
    let (cu0, cu1) = (lib(&before, "pkg/lib/libsmall.so"), lib(&after, "pkg/lib/libsmall.so"));
    // `--keep sm_90` keeps the sm_90 cubin (nvprune's naming), not the PTX.
    let (p0, p1) = (payloads(&cu0, "sm_90"), payloads(&cu1, "sm_90"));
    assert!(p0.len() == 2 && p1.len() == 1 && p0[0] == p1[0], "{} {}", p0.len(), p1.len());
    assert!(payloads(&cu1, "sm_75").is_empty() && !payloads(&cu0, "sm_75").is_empty());
    assert!(output.len() < input.len());
    assert_eq!(report.output_size, output.len() as u64);
    let acts: HashMap<&str, Action> = report.files.iter().map(|f| (f.path.as_str(), f.action)).collect();
    assert_eq!(acts["pkg/lib/kern.cubin"], Action::Removed);
    assert_eq!(acts["pkg/library/TensileLibrary_lazy_gfx906.dat"], Action::Removed);
    assert_eq!(acts["pkg/library/TensileLibrary_lazy_gfx90a.dat"], Action::Kept);
    assert_eq!(acts["pkg/lib/libhip.so"], Action::Rewritten);
    let t = report.targets();
    assert!(t["gfx906"].dropped > 0 && t["gfx906"].kept == 0 && t["gfx90a"].kept > 0, "{t:?}");
}

#[test]
fn a_dry_run_of_a_wheel_estimates_and_writes_nothing() {
    let input = wheel();
    let mut o = opts(&["gfx90a"]);
    o.dry_run = true;
    let report = wheel::prune_zip(&input, None, &o, None).unwrap();
    assert!(report.output_size < report.input_size);
    assert!(report.changed() >= 3);
}

#[test]
fn a_relabelled_wheel_renames_its_dist_info_and_version() {
    let input = wheel();
    let r = wheel::Relabel {
        old_dist_info: "pkg-1.0.dist-info".into(),
        new_dist_info: "pkg-1.0+gfx90a.dist-info".into(),
        version: "1.0+gfx90a".into(),
    };
    let (output, _) = prune_to_vec(&input, &opts(&["gfx90a"]), Some(&r));
    let after = read_zip(&output);
    check_record(&after, "pkg-1.0+gfx90a.dist-info");
    let meta = &after.iter().find(|m| m.0 == "pkg-1.0+gfx90a.dist-info/METADATA").unwrap().1;
    assert_eq!(
        String::from_utf8_lossy(meta),
        "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0+gfx90a\n\nDescription\nVersion: not a header\n"
    );
    assert!(after.iter().all(|m| !m.0.starts_with("pkg-1.0.dist-info")));
}

#[test]
fn a_folder_is_pruned_in_place_keeping_links_and_modes() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    for (name, data, _) in members() {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
    }
    let lib = dir.path().join("pkg/lib/libhip.so");
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o751)).unwrap();
    let link = dir.path().join("pkg/libhip.so.6");
    std::fs::hard_link(&lib, &link).unwrap();
    let py = dir.path().join("pkg/__init__.py");
    let py_ino = std::fs::metadata(&py).unwrap().ino();
    let before = std::fs::read(&lib).unwrap();

    let mut dry = opts(&["gfx90a"]);
    dry.dry_run = true;
    let r = dir::prune_dir(dir.path(), &dry).unwrap();
    assert!(r.changed() >= 2);
    assert_eq!(std::fs::read(&lib).unwrap(), before, "a dry run writes nothing");
    assert!(dir.path().join("pkg/library/TensileLibrary_lazy_gfx906.dat").exists());

    let r = dir::prune_dir(dir.path(), &opts(&["gfx90a"])).unwrap();
    assert!(r.output_size < r.input_size);
    let after = std::fs::read(&lib).unwrap();
    assert_eq!(payloads(&before, "gfx90a"), payloads(&after, "gfx90a"));
    assert!(payloads(&after, "gfx906").is_empty());
    let (m1, m2) = (std::fs::metadata(&lib).unwrap(), std::fs::metadata(&link).unwrap());
    assert_eq!(m1.ino(), m2.ino(), "the hard link follows the pruned file");
    assert_eq!(m1.nlink(), 2);
    assert_eq!(m1.permissions().mode() & 0o7777, 0o751);
    assert_eq!(std::fs::metadata(&py).unwrap().ino(), py_ino, "files without device code are not touched");
    assert!(!dir.path().join("pkg/library/TensileLibrary_lazy_gfx906.dat").exists());
    assert!(dir.path().join("pkg/library/TensileLibrary_lazy_gfx90a.dat").exists());
    let leftovers: Vec<_> = walk_names(dir.path()).into_iter().filter(|n| n.contains("offload")).collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

fn walk_names(root: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk_names(&e.path()));
        } else {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

fn tarball(kind: tarball::Compression) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let long = format!("opt/rocm/lib/rocblas/library/{}/TensileLibrary_lazy_gfx906.dat", "x".repeat(90));
    let mut all: Vec<(String, Vec<u8>)> = members().into_iter().map(|(n, d, _)| (n.to_string(), d)).collect();
    all.push((long, vec![1; 700]));
    for (i, (name, data)) in all.iter().enumerate() {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o640 + i as u32);
        h.set_mtime(1_700_000_000 + i as u64);
        h.set_uid(1000 + i as u64);
        b.append_data(&mut h, name, data.as_slice()).unwrap();
    }
    let plain = b.into_inner().unwrap();
    match kind {
        tarball::Compression::None => plain,
        tarball::Compression::Zstd => zstd::encode_all(plain.as_slice(), 3).unwrap(),
        tarball::Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&plain).unwrap();
            e.finish().unwrap()
        }
        tarball::Compression::Xz => {
            let mut e = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(1)).unwrap();
            e.write_all(&plain).unwrap();
            e.finish().unwrap()
        }
    }
}

/// (path, mode, mtime, uid, bytes) of each file of a tarball.
fn read_tar(data: &[u8], kind: tarball::Compression) -> Vec<(String, u32, u64, u64, Vec<u8>)> {
    let plain: Vec<u8> = match kind {
        tarball::Compression::None => data.to_vec(),
        tarball::Compression::Zstd => zstd::decode_all(data).unwrap(),
        tarball::Compression::Gzip => {
            let mut v = Vec::new();
            flate2::read::GzDecoder::new(data).read_to_end(&mut v).unwrap();
            v
        }
        tarball::Compression::Xz => {
            let mut v = Vec::new();
            lzma_rust2::XzReader::new(data, true).read_to_end(&mut v).unwrap();
            v
        }
    };
    let mut a = tar::Archive::new(plain.as_slice());
    a.entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let h = e.header().clone();
            let mut b = Vec::new();
            e.read_to_end(&mut b).unwrap();
            (e.path().unwrap().display().to_string(), h.mode().unwrap(), h.mtime().unwrap(), h.uid().unwrap(), b)
        })
        .collect()
}

#[test]
fn tarballs_are_rewritten_with_their_headers_and_compression() {
    for kind in
        [tarball::Compression::None, tarball::Compression::Gzip, tarball::Compression::Zstd, tarball::Compression::Xz]
    {
        let input = tarball(kind);
        assert_eq!(tarball::detect(&input), Some(kind));
        let mut out = tempfile::tempfile().unwrap();
        let report = tarball::prune_tar(&input, kind, Some(&out), &opts(&["gfx90a"])).unwrap();
        let mut output = Vec::new();
        std::io::Seek::rewind(&mut out).unwrap();
        out.read_to_end(&mut output).unwrap();
        assert_eq!(tarball::detect(&output), Some(kind), "{kind:?}: compressed as the input");
        let (before, after) = (read_tar(&input, kind), read_tar(&output, kind));
        let kept: Vec<_> = before
            .iter()
            .filter(|e| !e.0.ends_with("gfx906.dat") && !e.0.ends_with("kern.cubin"))
            .map(|e| e.0.clone())
            .collect();
        assert_eq!(after.iter().map(|e| e.0.clone()).collect::<Vec<_>>(), kept, "{kind:?}");
        for a in &after {
            let b = before.iter().find(|b| b.0 == a.0).unwrap();
            assert_eq!((a.1, a.2, a.3), (b.1, b.2, b.3), "{}: mode, time, owner", a.0);
            if a.0.ends_with("libhip.so") {
                assert_eq!(payloads(&a.4, "gfx90a"), payloads(&b.4, "gfx90a"));
                assert!(payloads(&a.4, "gfx906").is_empty());
            } else {
                assert_eq!(a.4, b.4, "{}", a.0);
            }
        }
        assert_eq!(report.files.iter().filter(|f| f.action == Action::Removed).count(), 3, "{kind:?}");
    }
}

#[test]
fn debian_and_conda_packages_are_refused_with_a_reason() {
    let p = std::path::Path::new("x.deb");
    let k = package_kind(p, b"!<arch>\ndebian-binary   ").unwrap();
    assert!(refusal(k).unwrap().contains("dpkg-deb"));
    let k = package_kind(std::path::Path::new("x.conda"), b"PK\x03\x04").unwrap();
    assert!(refusal(k).unwrap().contains("paths.json"));
    assert_eq!(package_kind(std::path::Path::new("x.whl"), b"PK\x03\x04"), Some(PackageKind::Zip));
}

#[test]
fn a_damaged_kpack_archive_is_left_as_it_is_and_said_so() {
    match prune_file("lib/x.kpack", b"KPAK\x01\x00rest", &rules(&["gfx90a"])).unwrap() {
        Outcome::Untouched { reason } => assert!(reason.contains("kpack"), "{reason}"),
        o => panic!("{o:?}"),
    }
}

/// AMD-split archives: one a kept GPU loads stays, one for another
/// processor goes, and `--keep gfx90a` keeps both xnack settings' archives
/// (as one-file prune keeps both), decided by the table of contents.
#[test]
fn kpack_archives_are_pruned_by_their_table_of_contents() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../offload-format/tests/fixtures/kpack/installed/stage/.kpack");
    let read = |name: &str| std::fs::read(dir.join(name)).expect("kpack fixture");
    let kept = |name: &str, keep: &[&str]| match prune_file(name, &read(name), &rules(keep)).unwrap() {
        Outcome::AllKept { .. } => true,
        Outcome::Removed { reason, .. } => {
            assert!(reason.contains("table of contents"), "{reason}");
            false
        }
        o => panic!("{name}: {o:?}"),
    };
    assert!(kept("kpdemo_lib_gfx90a%3Axnack+.kpack", &["gfx90a"]));
    assert!(kept("kpdemo_lib_gfx90a%3Axnack-.kpack", &["gfx90a"]));
    assert!(kept("kpdemo_lib_gfx11-generic.kpack", &["gfx1101"]), "a generic archive serves gfx1101");
    assert!(!kept("kpdemo_lib_gfx1100.kpack", &["gfx90a"]));
    assert!(!kept("kpdemo_lib_gfx90a%3Axnack+.kpack", &["gfx90a:xnack-"]));
    assert!(!kept("kpdemo_lib_gfx942%3Asramecc+%3Axnack-.kpack", &["gfx90a", "sm_90"]));
}

#[test]
fn a_wheel_splits_into_family_wheels_with_local_versions() {
    use crate::split;
    let input = wheel();
    let (amd, cuda) = split::targets(&input).unwrap();
    assert_eq!(amd.iter().map(String::as_str).collect::<Vec<_>>(), ["gfx906", "gfx90a"]);
    assert_eq!(cuda.iter().copied().collect::<Vec<_>>(), [75, 80, 90]);
    let groups = split::groups(&amd, &cuda, split::By::Family, &[]);
    let dir = tempfile::tempdir().unwrap();
    let o = Options { threads: 2, ..Default::default() };
    let done = split::split_wheel(&input, "pkg-1.0-py3-none-linux_x86_64.whl", &groups, dir.path(), &o).unwrap();
    let names: Vec<&str> = done.iter().map(|d| d.file_name.as_str()).collect();
    assert_eq!(
        names,
        [
            "pkg-1.0+sm7x-py3-none-linux_x86_64.whl",
            "pkg-1.0+sm8x-py3-none-linux_x86_64.whl",
            "pkg-1.0+sm9x-py3-none-linux_x86_64.whl",
            "pkg-1.0+gfx906-py3-none-linux_x86_64.whl",
            "pkg-1.0+gfx90a-py3-none-linux_x86_64.whl"
        ]
    );
    for d in &done {
        let bytes = std::fs::read(dir.path().join(&d.file_name)).unwrap();
        assert!(bytes.len() < input.len(), "{}", d.file_name);
        let version = d.file_name.split('-').nth(1).unwrap();
        check_record(&read_zip(&bytes), &format!("pkg-{version}.dist-info"));
    }
    // sm_80's wheel keeps the sm_80 cubin (run by sm_8x GPUs) and drops sm_75/sm_90 code.
    let sm8 = read_zip(&std::fs::read(dir.path().join(names[1])).unwrap());
    assert!(sm8.iter().any(|m| m.0 == "pkg/lib/kern.cubin"));
    let gfx = read_zip(&std::fs::read(dir.path().join(names[4])).unwrap());
    assert!(!gfx.iter().any(|m| m.0 == "pkg/lib/kern.cubin" || m.0.ends_with("gfx906.dat")));
    let hip = &gfx.iter().find(|m| m.0 == "pkg/lib/libhip.so").unwrap().1;
    assert!(payloads(hip, "gfx906").is_empty() && !payloads(hip, "gfx90a").is_empty());
}

/// A tarball pruned by several workers comes out byte for byte as with
/// one, and its report lists the files in the input's order: fat files
/// among small and large plain ones (a large one waits for the files being
/// pruned before it), and a hard link to a file that is removed.
#[test]
fn a_tarball_pruned_by_several_workers_is_the_same_as_by_one() {
    let mut b = tar::Builder::new(Vec::new());
    let big = vec![3u8; 3 << 20];
    for dir in ["a", "b", "c", "d"] {
        for (name, data, _) in members() {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_uid(0);
            h.set_mtime(0);
            b.append_data(&mut h, format!("{dir}/{name}"), data.as_slice()).unwrap();
        }
        if dir == "b" {
            let mut h = tar::Header::new_gnu();
            h.set_size(big.len() as u64);
            h.set_mode(0o644);
            h.set_uid(0);
            h.set_mtime(0);
            b.append_data(&mut h, "b/big.bin", big.as_slice()).unwrap();
        }
    }
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Link);
    h.set_size(0);
    h.set_uid(0);
    h.set_mtime(0);
    h.set_mode(0o644);
    b.append_link(&mut h, "e/link.cubin", "c/pkg/lib/kern.cubin").unwrap();
    let input = b.into_inner().unwrap();
    let run = |threads: usize| {
        let o = Options { threads, ..opts(&["gfx90a"]) };
        let mut out = tempfile::tempfile().unwrap();
        let report = tarball::prune_tar(&input, tarball::Compression::None, Some(&out), &o).unwrap();
        let mut output = Vec::new();
        std::io::Seek::rewind(&mut out).unwrap();
        out.read_to_end(&mut output).unwrap();
        let files: Vec<_> = report.files.iter().map(|f| (f.path.clone(), f.action, f.new_size)).collect();
        (output, files)
    };
    let (one, files) = run(1);
    let names: Vec<String> = read_tar(&one, tarball::Compression::None).into_iter().map(|e| e.0).collect();
    assert!(names.contains(&"b/big.bin".to_string()) && !names.iter().any(|n| n.ends_with("kern.cubin")), "{names:?}");
    assert!(!names.contains(&"e/link.cubin".to_string()), "the link to a removed file goes too: {names:?}");
    let order: Vec<String> = read_tar(&input, tarball::Compression::None).into_iter().map(|e| e.0).collect();
    let at: Vec<usize> = files.iter().map(|f| order.iter().position(|n| *n == f.0).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "the report is in the input's order: {files:?}");
    assert!(files.iter().filter(|f| f.1 == Action::Rewritten).count() >= 4, "{files:?}");
    for threads in [2, 4, 8] {
        assert!(run(threads) == (one.clone(), files.clone()), "{threads} workers");
    }
}

/// A wheel pruned by several workers (members decoded, pruned and
/// recompressed in parallel) is the same, byte for byte, as by one worker.
#[test]
fn a_wheel_pruned_by_several_workers_is_the_same_as_by_one() {
    let input = wheel();
    let run = |threads: usize| {
        let o = Options { threads, ..opts(&["gfx90a", "sm_90"]) };
        let (bytes, report) = prune_to_vec(&input, &o, None);
        let files: Vec<_> = report.files.iter().map(|f| (f.path.clone(), f.action, f.new_size)).collect();
        (bytes, files)
    };
    let (one, files) = run(1);
    assert!(files.iter().filter(|f| f.1 == Action::Rewritten).count() >= 2, "{files:?}");
    assert!(one.len() < input.len());
    for threads in [2, 3, 8] {
        assert!(run(threads) == (one.clone(), files.clone()), "{threads} workers");
    }
}

/// A wheel in which nothing changes (a CUDA library when an AMD GPU is
/// kept) comes out as it went in, byte for byte: its RECORD, compressed
/// here at another level than the writer's default, is not recompressed.
#[test]
fn an_unchanged_wheel_is_copied_byte_for_byte() {
    let mut w = ZipWriter::new(Cursor::new(Vec::new()));
    let time = DateTime::from_date_and_time(2024, 5, 6, 7, 8, 10).unwrap();
    let mut record = String::new();
    let cuda = cli_fixture("cuda/libsmall.so");
    for (name, data) in [("pkg/__init__.py", &b"x = 1\n"[..]), ("pkg/libsmall.so", &cuda[..])] {
        w.start_file(name, SimpleFileOptions::default().last_modified_time(time)).unwrap();
        w.write_all(data).unwrap();
        record.push_str(&format!("{name},{},{}\n", record::hash(data), data.len()));
    }
    for i in 0..200 {
        record.push_str(&format!("pkg/data/file{i}.txt,{},{i}\n", record::hash(&[i as u8])));
    }
    record.push_str("pkg-1.0.dist-info/RECORD,,\n");
    let fast = SimpleFileOptions::default().last_modified_time(time).compression_level(Some(1));
    w.start_file("pkg-1.0.dist-info/RECORD", fast).unwrap();
    w.write_all(record.as_bytes()).unwrap();
    w.set_comment("a comment").unwrap();
    let input = w.finish().unwrap().into_inner();
    // The writer's default level would give RECORD other bytes.
    let mut again = ZipWriter::new(Cursor::new(Vec::new()));
    again.start_file("r", SimpleFileOptions::default()).unwrap();
    again.write_all(record.as_bytes()).unwrap();
    let again = again.finish().unwrap().into_inner();
    let stored = |z: &[u8]| {
        let mut a = ZipArchive::new(Cursor::new(z)).unwrap();
        let n = a.len() - 1;
        a.by_index_raw(n).unwrap().compressed_size()
    };
    assert_ne!(stored(&input), stored(&again), "the test needs a RECORD the default level compresses otherwise");

    let (output, report) = prune_to_vec(&input, &opts(&["gfx90a"]), None);
    assert!(report.files.iter().all(|f| f.action != Action::Rewritten && f.action != Action::Removed));
    assert_eq!(report.output_size, input.len() as u64);
    assert!(output == input, "an unchanged wheel is copied as it is");
}

/// An installed environment: the `RECORD` of each installed distribution
/// gets the new hash and size of every file it lists that was rewritten
/// (paths relative to the folder holding the `.dist-info`, `..` included)
/// and loses the lines of removed ones; other lines and RECORDs that list
/// nothing pruned stay byte for byte; a dry run writes no RECORD.
#[test]
fn an_installed_record_gets_the_new_hashes_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let site = dir.path().join("lib/site-packages");
    let mut record = String::new();
    for (name, data, _) in members() {
        let p = site.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, &data).unwrap();
        record.push_str(&format!("{name},{},{}\n", record::hash(&data), data.len()));
    }
    // A file outside site-packages, as pip records scripts.
    let tool = dir.path().join("bin/tool");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::write(&tool, b"#!/bin/sh\n").unwrap();
    record.push_str(&format!("../../bin/tool,{},10\n", record::hash(b"#!/bin/sh\n")));
    record.push_str("pkg-1.0.dist-info/RECORD,,\n");
    let rec = site.join("pkg-1.0.dist-info/RECORD");
    std::fs::create_dir_all(rec.parent().unwrap()).unwrap();
    std::fs::write(&rec, &record).unwrap();
    let other = site.join("other-2.0.dist-info/RECORD");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::write(&other, "other/__init__.py,sha256=x,1\nother-2.0.dist-info/RECORD,,\n").unwrap();

    let mut dry = opts(&["gfx90a", "sm_90"]);
    dry.dry_run = true;
    dir::prune_dir(dir.path(), &dry).unwrap();
    assert_eq!(std::fs::read_to_string(&rec).unwrap(), record, "a dry run writes nothing");

    let r = dir::prune_dir(dir.path(), &opts(&["gfx90a", "sm_90"])).unwrap();
    assert!(r.notes.iter().any(|n| n.contains("pkg-1.0.dist-info/RECORD")), "{:?}", r.notes);
    assert!(!r.notes.iter().any(|n| n.contains("other-2.0")), "{:?}", r.notes);
    assert_eq!(
        std::fs::read_to_string(&other).unwrap(),
        "other/__init__.py,sha256=x,1\nother-2.0.dist-info/RECORD,,\n"
    );
    let new = std::fs::read_to_string(&rec).unwrap();
    let lines: HashMap<&str, &str> = new.lines().map(|l| l.split_once(',').unwrap()).collect();
    let mut rewritten = 0;
    for (name, old, _) in members() {
        let p = site.join(name);
        match std::fs::read(&p) {
            Err(_) => assert!(!lines.contains_key(name), "{name}: removed, still recorded"),
            Ok(now) => {
                assert_eq!(
                    lines.get(name).copied(),
                    Some(format!("{},{}", record::hash(&now), now.len()).as_str()),
                    "{name}: {new}"
                );
                rewritten += usize::from(now != old);
            }
        }
    }
    assert!(rewritten >= 2, "{new}");
    // The sm_80 cubin goes by its ELF header (it was reported removed and
    // left in place before), the gfx906 data file by its name.
    assert!(!site.join("pkg/lib/kern.cubin").exists());
    assert!(!site.join("pkg/library/TensileLibrary_lazy_gfx906.dat").exists());
    assert!(lines.len() < members().len() + 2, "removed files leave RECORD: {new}");
    assert_eq!(lines.get("../../bin/tool").copied(), Some(format!("{},10", record::hash(b"#!/bin/sh\n")).as_str()));
    assert_eq!(lines.get("pkg-1.0.dist-info/RECORD").copied(), Some(","));
}
