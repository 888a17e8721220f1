//! Split, join and prune over the kpack fixtures (clang-built fat
//! libraries and AMD's split of the same libraries, in
//! offload-format's tests/fixtures/kpack).

use super::*;
use offload_format::kpack::Archive;
use offload_format::kpack::resolve::RealFiles;
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-format/tests/fixtures/kpack")
}

const FAT: [&str; 7] = ["generic", "multi", "plain", "xnack", "xnack2", "zstd", "zstd19"];

fn fat(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(format!("fat/libkp_{name}.so"))).unwrap()
}

fn split_all() -> (Vec<(String, Vec<u8>)>, TreeSplit) {
    let inputs: Vec<(String, Vec<u8>)> = FAT.iter().map(|n| (format!("lib/libkp_{n}.so"), fat(n))).collect();
    let files: Vec<(String, &[u8])> = inputs.iter().map(|(r, d)| (r.clone(), d.as_slice())).collect();
    let options = SplitOptions { group: "kpdemo_lib".into(), ..SplitOptions::default() };
    let out = split_tree(&files, &options).unwrap();
    (inputs, out)
}

fn fetch_from<'a>(out: &'a TreeSplit, rel: &'a str) -> impl FnMut(u32, &str) -> Option<Vec<u8>> + 'a {
    move |co, target| {
        let (_, bytes) = out.archives.iter().find(|(p, _)| *p == archive_path("kpdemo_lib", target))?;
        let a = Archive::parse(bytes).ok()?;
        let e = a.find(&format!("{rel}#{co}"), target)?;
        a.decompress(e, 1 << 30).ok()
    }
}

#[test]
fn a_tree_splits_into_one_archive_per_target_and_checks() {
    let (inputs, out) = split_all();
    let names: Vec<&str> = out.archives.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        names,
        [
            ".kpack/kpdemo_lib_gfx11-generic.kpack",
            ".kpack/kpdemo_lib_gfx1100.kpack",
            ".kpack/kpdemo_lib_gfx90a.kpack",
            ".kpack/kpdemo_lib_gfx90a:xnack+.kpack",
            ".kpack/kpdemo_lib_gfx90a:xnack-.kpack",
            ".kpack/kpdemo_lib_gfx942:sramecc+:xnack-.kpack",
        ]
    );
    assert_eq!(out.hosts.len(), 7);
    assert!(out.checked >= 20, "{}", out.checked);
    for ((rel, input), (orel, host)) in inputs.iter().zip(&out.hosts) {
        assert_eq!(rel, orel);
        assert!(host.len() < input.len() / 2, "{rel}: {} -> {}", input.len(), host.len());
        let hb = HostBinary::read(host).unwrap();
        assert!(hb.is_kpacked());
        assert!(hb.marker_section.is_some());
    }
}

#[test]
fn our_split_serves_what_amds_split_serves() {
    // For every library and GPU, our archives and AMD's give the same bytes.
    let (_, out) = split_all();
    let ours = tempfile::tempdir().unwrap();
    for (rel, bytes) in out.hosts.iter().chain(&out.archives) {
        let p = ours.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    // AMD's tree, with the colons the repository's file names spell %3A.
    let amd_tree = tempfile::tempdir().unwrap();
    offload_testkit::copy_with_real_names(&fixtures().join("installed/stage"), amd_tree.path());
    let env = Env { cwd: PathBuf::from("/"), ..Env::default() };
    let resolver = Resolver::new(&RealFiles, &env);
    let mut compared = 0;
    for name in FAT {
        let amd_path = amd_tree.path().join(format!("lib/libkp_{name}.so"));
        let amd = std::fs::read(&amd_path).unwrap();
        let our_path = ours.path().join(format!("lib/libkp_{name}.so"));
        let our = std::fs::read(&our_path).unwrap();
        let (amd_hb, our_hb) = (HostBinary::read(&amd).unwrap(), HostBinary::read(&our).unwrap());
        for gpu in
            ["gfx90a", "gfx90a:xnack+", "gfx90a:xnack-", "gfx1100", "gfx1101", "gfx942:sramecc+:xnack-", "gfx1201"]
        {
            let list = clr_arch_list(gpu);
            let a = resolver.load_host(&amd_path, &amd_hb, &list);
            let o = resolver.load_host(&our_path, &our_hb, &list);
            assert_eq!(a.len(), o.len(), "{name} {gpu}");
            for ((_, ra), (_, ro)) in a.iter().zip(&o) {
                match (&ra.result, &ro.result) {
                    (Ok(x), Ok(y)) => {
                        assert_eq!(x.bytes, y.bytes, "{name} {gpu}");
                        assert_eq!(x.target, y.target, "{name} {gpu}");
                        compared += 1;
                    }
                    (Err(x), Err(y)) => assert_eq!(x.code(), y.code(), "{name} {gpu}"),
                    (x, y) => panic!("{name} {gpu}: AMD {x:?}, ours {y:?}"),
                }
            }
        }
    }
    assert!(compared >= 25, "{compared}");
}

#[test]
fn our_split_joins_back_byte_for_byte() {
    let (inputs, out) = split_all();
    for ((rel, input), (_, host)) in inputs.iter().zip(&out.hosts) {
        let joined = join_binary(host, fetch_from(&out, rel));
        if rel.contains("zstd") {
            // Compressed bundles cannot be remade exactly: no join record.
            assert!(matches!(joined, Err(KpackError::Join(_))), "{rel}");
        } else {
            assert!(joined.unwrap() == *input, "{rel}");
        }
    }
    // A missing or different code object is an error, never a wrong byte.
    let (rel, host) = &out.hosts[2];
    assert!(join_binary(host, |_, _| None).is_err());
    let mut fetch = fetch_from(&out, rel);
    assert!(
        join_binary(host, |co, t| fetch(co, t).map(|mut b| {
            b.pop();
            b
        }))
        .is_err()
    );
}

#[test]
fn amd_split_binaries_are_not_joined_but_refused() {
    let amd = std::fs::read(fixtures().join("installed/stage/lib/libkp_plain.so")).unwrap();
    let err = join_binary(&amd, |_, _| Some(Vec::new())).unwrap_err();
    assert!(err.to_string().contains("not split by offload"), "{err}");
}

#[test]
fn host_only_and_non_elf_files_are_not_split() {
    let host_only = std::fs::read(fixtures().join("installed/stage/lib/libkp_hostonly.so")).unwrap();
    assert!(split_binary(&host_only, "x", &["y".into()]).unwrap().is_none());
    assert!(split_binary(b"hello", "x", &["y".into()]).unwrap().is_none());
}

#[test]
fn damaged_fat_binaries_are_refused_not_split() {
    let mut data = fat("plain");
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let i = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == b".hip_fatbin").unwrap();
    let off = file.sections[i].offset as usize;
    // Break the bundle's entry count.
    data[off + 24..off + 32].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(split_binary(&data, "x", &["y".into()]).is_err());
}

#[test]
fn prune_keeps_every_kept_gpus_answer() {
    let dir = fixtures().join("installed/stage/.kpack");
    let mut archives = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().replace("%3A", ":");
        archives.push((name, std::fs::read(&p).unwrap()));
    }
    archives.sort();
    let keep = vec!["gfx1101".to_string(), "gfx90a:xnack+".to_string()];
    let views: Vec<(String, &[u8])> = archives.iter().map(|(n, d)| (n.clone(), d.as_slice())).collect();
    let plan = plan_prune(&views, &keep).unwrap();
    let kept: Vec<&str> = plan.iter().filter(|(_, a)| *a != PruneAction::Remove).map(|(n, _)| n.as_str()).collect();
    assert_eq!(kept, ["kpdemo_lib_gfx11-generic.kpack", "kpdemo_lib_gfx90a.kpack", "kpdemo_lib_gfx90a:xnack+.kpack"]);

    // A mixed archive loses only the entries no kept GPU loads.
    let mut entries = Vec::new();
    for (t, code) in [("gfx1100", b"one".as_slice()), ("gfx942", b"two"), ("gfx11-generic", b"three")] {
        entries.push(NewEntry {
            key: "lib/a.so#0".into(),
            target: t.into(),
            original_size: code.len() as u64,
            frame: Cow::Owned(write::compress(code, 3).unwrap()),
            source_id: None,
        });
    }
    let mixed = write::archive("g", &["gfx1100", "gfx942", "gfx11-generic"], &entries).unwrap();
    let PruneAction::Rewrite(pruned) = prune_archive(&mixed, &["gfx1101".into()]).unwrap() else { panic!() };
    let a = Archive::parse(&pruned).unwrap();
    assert_eq!(a.gfx_arches, ["gfx11-generic"]);
    assert_eq!(a.decompress(a.find("lib/a.so#0", "gfx11-generic").unwrap(), 100).unwrap(), b"three");
    assert!(a.find("lib/a.so#0", "gfx1100").is_none());
    assert_eq!(prune_archive(&mixed, &["gfx1100".into(), "gfx942".into()]).unwrap(), PruneAction::Keep);
    assert_eq!(prune_archive(&mixed, &["gfx1201".into()]).unwrap(), PruneAction::Remove);
    assert!(prune_archive(b"KPAK garbage", &keep).is_err());
}

#[test]
fn pruned_trees_resolve_the_same_for_kept_gpus() {
    let (_, out) = split_all();
    for keep in [vec!["gfx1100".to_string()], vec!["gfx90a:xnack-".to_string(), "gfx942:sramecc+:xnack-".into()]] {
        let views: Vec<(String, &[u8])> = out.archives.iter().map(|(n, d)| (n.clone(), d.as_slice())).collect();
        let plan = plan_prune(&views, &keep).unwrap();
        let mut pruned = out.clone();
        pruned.archives = plan
            .into_iter()
            .zip(&out.archives)
            .filter_map(|((n, a), (_, old))| match a {
                PruneAction::Keep => Some((n, old.clone())),
                PruneAction::Rewrite(b) => Some((n, b)),
                PruneAction::Remove => None,
            })
            .collect();
        assert!(pruned.archives.len() < out.archives.len());
        let resolve = |t: &TreeSplit, gpu: &str| {
            let root = PathBuf::from("/tree");
            let files =
                t.hosts.iter().chain(&t.archives).map(|(r, b)| (normalize(&root.join(r)), b.as_slice())).collect();
            let source = MemFiles { files };
            let env = Env { cwd: root.clone(), ..Env::default() };
            let r = Resolver::new(&source, &env);
            let mut answers = Vec::new();
            for (rel, host) in &t.hosts {
                let hb = HostBinary::read(host).unwrap();
                for (_, res) in r.load_host(&root.join(rel), &hb, &clr_arch_list(gpu)) {
                    answers.push(res.result.map(|l| l.bytes).map_err(|e| e.code()));
                }
            }
            answers
        };
        for gpu in &keep {
            let before = resolve(&out, gpu);
            assert!(before.iter().any(|a| a.is_ok()));
            assert_eq!(before, resolve(&pruned, gpu), "{gpu}");
        }
    }
}

fn unzip(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    (0..z.len())
        .map(|i| {
            let mut f = z.by_index(i).unwrap();
            let mut b = Vec::new();
            f.read_to_end(&mut b).unwrap();
            (f.name().to_string(), b)
        })
        .collect()
}

#[test]
fn wheels_split_into_host_and_device_wheels_that_install_together() {
    let name = "kpdemo-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl";
    let data = std::fs::read(fixtures().join("fat-wheel").join(name)).unwrap();
    let split = split_wheel(name, &data, None, &SplitOptions::default()).unwrap();
    assert_eq!(split.host.0, name);
    let names: Vec<&str> = split.devices.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "kpdemo_device_gfx1100-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl",
            "kpdemo_device_gfx90a-1.0+rocm7.1-cp311-cp311-linux_x86_64.whl"
        ]
    );
    // Every RECORD lists every other file with its urlsafe base64 SHA-256
    // and size, and itself on a line of its own.
    let mut site: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (_, wheel) in std::iter::once(&split.host).chain(&split.devices) {
        let files = unzip(wheel);
        let (rpath, rec) = files.iter().find(|(p, _)| p.ends_with(".dist-info/RECORD")).unwrap();
        let rec = String::from_utf8(rec.clone()).unwrap();
        let lines: Vec<&str> = rec.lines().collect();
        assert_eq!(lines.len(), files.len());
        assert_eq!(*lines.last().unwrap(), format!("{rpath},,"));
        for (p, b) in &files {
            if p == rpath {
                continue;
            }
            use sha2::Digest;
            let want = format!("{p},sha256={},{}", wheel::urlsafe_b64(&sha2::Sha256::digest(b)), b.len());
            assert!(lines.contains(&want.as_str()), "{want}");
            assert!(!want.contains('='.to_string().repeat(2).as_str()));
            assert!(site.insert(p.clone(), b.clone()).is_none(), "{p} in two wheels");
        }
    }
    let meta = String::from_utf8(site["kpdemo-1.0+rocm7.1.dist-info/METADATA"].clone()).unwrap();
    assert!(meta.contains("Requires-Dist: kpdemo-device-gfx90a == 1.0+rocm7.1; extra == \"device-gfx90a\""), "{meta}");
    assert!(meta.ends_with("body text\n") || meta.ends_with("body text"), "{meta}");
    // The installed tree serves every library what the fat one did.
    let root = PathBuf::from("/site");
    let source = MemFiles { files: site.iter().map(|(p, b)| (root.join(p), b.as_slice())).collect() };
    let env = Env { cwd: root.clone(), ..Env::default() };
    let r = Resolver::new(&source, &env);
    let mut served = 0;
    for lib in ["libkp_plain", "libkp_multi", "libkp_xnack2"] {
        let host = &site[&format!("kpdemo/lib/{lib}.so")];
        let hb = HostBinary::read(host).unwrap();
        assert!(hb.is_kpacked());
        for gpu in ["gfx90a", "gfx90a:xnack+", "gfx1100"] {
            for (_, res) in r.load_host(&root.join(format!("kpdemo/lib/{lib}.so")), &hb, &clr_arch_list(gpu)) {
                if res.result.is_ok() {
                    served += 1;
                }
            }
        }
    }
    assert!(served >= 6, "{served}");
    assert_eq!(wheel::urlsafe_b64(b"\xfb\xff"), "-_8");
}

/// A library linked by lld with `.hip_fatbin` after `.bss`
/// (`lld-after-bss/`, as in lld-linked ROCm libraries): the PT_LOAD holding
/// it maps its bytes 0xa000 above their offset, the first PT_LOAD at its
/// offset. The longer program header table cannot sit where its address
/// minus its offset is the first PT_LOAD's; in a shared library it goes at
/// the end of the first half of the split segment, congruent, and the
/// split must still load and join back.
#[test]
fn a_library_whose_fatbin_segment_lies_elsewhere_splits_and_joins_back() {
    use offload_format::elf::segments::{self, PT_LOAD, PT_PHDR};
    let input = std::fs::read(fixtures().join("lld-after-bss/libkp_after_bss.so")).unwrap();
    let (_, before) = segments::read(&input).unwrap();
    let loads: Vec<_> = before.iter().filter(|p| p.kind == PT_LOAD).collect();
    let bias = |p: &segments::Segment| p.vaddr.wrapping_sub(p.offset);
    assert_ne!(bias(loads[0]), bias(loads.last().unwrap()), "the premise: the fat binary's segment lies elsewhere");

    let split = split_binary(&input, "lib/libkp_after_bss.so", &["x_@GFXARCH@.kpack".into()]).unwrap().unwrap();
    assert!(split.cut && split.joinable);
    assert!(split.host.len() + 8 * 4096 < input.len(), "{} -> {}", input.len(), split.host.len());
    let (phoff, after) = segments::read(&split.host).unwrap();
    segments::check_loads(&after, split.host.len() as u64).unwrap();
    assert_eq!(after.len(), before.len() + 1);
    // PT_PHDR first, describing the table e_phoff points at, inside a
    // PT_LOAD that maps it at PT_PHDR's address.
    let phdr = after[0];
    assert_eq!(phdr.kind, PT_PHDR);
    assert_eq!((phdr.offset, phdr.filesz), (phoff, after.len() as u64 * 56));
    assert_eq!(segments::file_offset(&after, phdr.vaddr, phdr.filesz), Some(phdr.offset));
    assert_eq!(phdr.vaddr.wrapping_sub(phdr.offset) % 4096, 0);
    assert!(after.iter().skip(1).all(|p| p.kind != PT_PHDR));
    // Every address the input mapped from its file keeps its bytes,
    // except in the fat binary's segment, whose first bytes are the marker.
    let fat_seg = loads.last().unwrap();
    for p in &loads[..loads.len() - 1] {
        let at = segments::file_offset(&after, p.vaddr, p.filesz).unwrap();
        let (a, b, len) = (p.offset as usize, at as usize, p.filesz as usize);
        // The first segment (ELF header, relocation addends) and the one
        // holding the 24-byte wrapper record are edited; the rest is kept.
        if p.offset == 0 || p.filesz == 24 {
            continue;
        }
        assert_eq!(&input[a..a + len], &split.host[b..b + len]);
    }
    assert!(segments::file_offset(&after, fat_seg.vaddr, 16).is_some());

    let objects: Vec<(u32, String, Vec<u8>)> =
        split.objects.iter().map(|o| (o.co_index, o.target.to_string(), o.bytes.to_vec())).collect();
    let joined = join_binary(&split.host, |co, target| {
        objects.iter().find(|(c, t, _)| *c == co && t == target).map(|(_, _, b)| b.clone())
    })
    .unwrap();
    assert!(joined == input, "the join does not give back the input");

    // The same layout in an executable is still refused: old kernels put
    // AT_PHDR at the first PT_LOAD's bias plus e_phoff.
    let mut exe = input.clone();
    exe[16] = 2;
    let err = split_binary(&exe, "bin/x", &["x_@GFXARCH@.kpack".into()]).err().map(|e| e.to_string());
    assert!(err.as_deref().is_some_and(|e| e.contains("executable")), "{err:?}");
}
