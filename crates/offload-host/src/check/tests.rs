//! Tests of the loader's search (on small ELF files written here) and of
//! the per-file judgement (on the HIP fixtures of `tests/fixtures/prune`).

use super::deps::{Search, Via, closure};
use super::*;
use offload_format::elf::EM_X86_64;
use std::fs;
use std::path::Path;

/// A little-endian ELF shared object with a dynamic section holding the
/// given (tag, string) entries, and `DT_FLAGS_1` when `flags_1` is nonzero.
fn elf(is64: bool, machine: u16, entries: &[(u64, &str)], flags_1: u64) -> Vec<u8> {
    let mut dynstr = vec![0u8];
    let mut dynamic: Vec<(u64, u64)> = Vec::new();
    for (tag, s) in entries {
        dynamic.push((*tag, dynstr.len() as u64));
        dynstr.extend_from_slice(s.as_bytes());
        dynstr.push(0);
    }
    if flags_1 != 0 {
        dynamic.push((0x6fff_fffb, flags_1));
    }
    dynamic.push((0, 0));
    let shstr = b"\0.dynstr\0.dynamic\0.shstrtab\0".to_vec();
    let word = |out: &mut Vec<u8>, v: u64| {
        if is64 {
            out.extend_from_slice(&v.to_le_bytes());
        } else {
            out.extend_from_slice(&(v as u32).to_le_bytes());
        }
    };
    let eh = if is64 { 64 } else { 52 };
    let mut body = Vec::new();
    let dynstr_off = eh;
    body.extend_from_slice(&dynstr);
    let dyn_off = eh + body.len();
    for (t, v) in &dynamic {
        word(&mut body, *t);
        word(&mut body, *v);
    }
    let dyn_size = eh + body.len() - dyn_off;
    let shstr_off = eh + body.len();
    body.extend_from_slice(&shstr);
    while (eh + body.len()) % 8 != 0 {
        body.push(0);
    }
    let shoff = eh + body.len();
    // (name, type, offset, size, link)
    let sections = [
        (0, 0, 0, 0, 0),
        (1, 3, dynstr_off, dynstr.len(), 0),
        (9, 6, dyn_off, dyn_size, 1),
        (18, 3, shstr_off, shstr.len(), 0),
    ];
    let mut out = b"\x7fELF".to_vec();
    out.extend_from_slice(&[if is64 { 2 } else { 1 }, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&3u16.to_le_bytes());
    out.extend_from_slice(&machine.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    word(&mut out, 0); // entry
    word(&mut out, 0); // phoff
    word(&mut out, shoff as u64);
    out.extend_from_slice(&0u32.to_le_bytes()); // flags
    out.extend_from_slice(&(eh as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // phentsize
    out.extend_from_slice(&0u16.to_le_bytes()); // phnum
    out.extend_from_slice(&(if is64 { 64u16 } else { 40 }).to_le_bytes());
    out.extend_from_slice(&(sections.len() as u16).to_le_bytes());
    out.extend_from_slice(&3u16.to_le_bytes());
    out.extend_from_slice(&body);
    for (name, ty, off, size, link) in sections {
        out.extend_from_slice(&(name as u32).to_le_bytes());
        out.extend_from_slice(&(ty as u32).to_le_bytes());
        word(&mut out, 0); // flags
        word(&mut out, 0); // addr
        word(&mut out, off as u64);
        word(&mut out, size as u64);
        out.extend_from_slice(&(link as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        word(&mut out, 1);
        word(&mut out, if ty == 6 { if is64 { 16 } else { 8 } } else { 0 });
    }
    out
}

const NEEDED: u64 = 1;
const SONAME: u64 = 14;
const RPATH: u64 = 15;
const RUNPATH: u64 = 29;

fn lib(entries: &[(u64, &str)]) -> Vec<u8> {
    elf(true, EM_X86_64, entries, 0)
}

fn write(path: &Path, data: &[u8]) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, data).unwrap();
}

fn bare_search() -> Search {
    Search { lib: "lib64".into(), platform: "x86_64".into(), ..Default::default() }
}

#[test]
fn dynamic_sections_are_read_in_both_classes() {
    for is64 in [true, false] {
        let data = elf(is64, EM_X86_64, &[(NEEDED, "liba.so"), (SONAME, "libme.so.1"), (RUNPATH, "$ORIGIN")], 0x800);
        let d = dynamic::read(&data).unwrap();
        assert_eq!(d.needed, ["liba.so"]);
        assert_eq!(
            (d.soname.as_deref(), d.runpath.as_deref(), d.rpath, d.nodeflib),
            (Some("libme.so.1"), Some("$ORIGIN"), None, true)
        );
        assert_eq!(dynamic::abi(&data).unwrap().is64, is64);
    }
    // A string offset past the table is an error that says where.
    let mut data = lib(&[(NEEDED, "liba.so")]);
    // The dynamic section follows the header (64) and "\0liba.so\0" (9).
    let at = 64 + 9;
    assert_eq!(data[at], 1, "DT_NEEDED first");
    data[at + 8..at + 16].copy_from_slice(&0xffffu64.to_le_bytes());
    let e = dynamic::read(&data).unwrap_err().to_string();
    assert!(e.contains("string offset 0xffff"), "{e}");
    // Truncations never panic.
    let good = lib(&[(NEEDED, "liba.so"), (RPATH, "/x")]);
    for n in 0..good.len() {
        let _ = dynamic::read(&good[..n]);
    }
}

#[test]
fn rpath_of_loaders_ld_library_path_runpath_and_origin() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    // prog: RPATH $ORIGIN/rp, needs liba.so and libmissing.so.
    write(&r.join("bin/prog"), &lib(&[(NEEDED, "liba.so"), (NEEDED, "libmissing.so"), (RPATH, "$ORIGIN/rp")]));
    // liba (no RUNPATH) needs libb: found through prog's RPATH (the loader chain).
    write(&r.join("bin/rp/liba.so"), &lib(&[(NEEDED, "libb.so"), (NEEDED, "libc2.so")]));
    write(&r.join("bin/rp/libb.so"), &lib(&[(SONAME, "libb.so"), (NEEDED, "libd.so"), (RUNPATH, "$ORIGIN/../rn")]));
    // A 32-bit libc2.so first in LD_LIBRARY_PATH is passed over.
    write(&r.join("ld32/libc2.so"), &elf(false, 3, &[], 0));
    write(&r.join("ld/libc2.so"), &lib(&[(NEEDED, "libb.so")]));
    // libb has RUNPATH: libd is found there, and a libd in prog's RPATH is not used.
    write(&r.join("bin/rn/libd.so"), &lib(&[]));
    write(&r.join("bin/rp/libd.so"), &lib(&[]));
    let search = Search {
        ld_library_path: vec![r.join("ld32").display().to_string(), r.join("ld").display().to_string()],
        ..bare_search()
    };
    let c = closure(&r.join("bin/prog"), &search).unwrap();
    let found: Vec<(String, Via)> = c
        .objects
        .iter()
        .map(|o| {
            (
                fs::canonicalize(&o.path)
                    .unwrap()
                    .strip_prefix(fs::canonicalize(r).unwrap())
                    .unwrap()
                    .display()
                    .to_string(),
                o.via,
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("bin/prog".into(), Via::Given),
            ("bin/rp/liba.so".into(), Via::Rpath),
            ("bin/rp/libb.so".into(), Via::Rpath),
            ("ld/libc2.so".into(), Via::LdLibraryPath),
            ("bin/rn/libd.so".into(), Via::Runpath),
        ]
    );
    assert_eq!(c.missing.len(), 1);
    assert_eq!((c.missing[0].name.as_str(), c.missing[0].needed_by), ("libmissing.so", 0));
    assert_eq!(c.chain(4).last(), Some(&"libd.so"));
    assert_eq!(c.chain(4).len(), 4, "prog -> liba -> libb -> libd: {:?}", c.chain(4));
}

/// A dependency name that is a FIFO (found through `$ORIGIN`, or given
/// as an absolute name) is passed over, never opened: opening it would
/// wait for a writer forever.
#[test]
fn fifos_and_devices_among_dependencies_are_not_opened() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().to_path_buf();
    let fifo = r.join("bin/libfifo.so");
    write(
        &r.join("bin/prog"),
        &lib(&[(NEEDED, "libfifo.so"), (NEEDED, fifo.to_str().unwrap()), (NEEDED, "/dev/zero"), (RUNPATH, "$ORIGIN")]),
    );
    let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o644) }, 0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let c = closure(&r.join("bin/prog"), &bare_search()).unwrap();
        let _ = tx.send(c.missing.iter().map(|m| m.name.clone()).collect::<Vec<_>>());
    });
    let missing = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("check blocked on a FIFO");
    assert_eq!(missing.len(), 3, "{missing:?}");
}

#[test]
fn cache_system_dirs_root_and_nodeflib() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path();
    write(&root.join("opt/x/libcached.so.1"), &lib(&[]));
    write(&root.join("usr/lib/libsys.so"), &lib(&[]));
    let cache = ldcache::tests_support::build(&[("libcached.so.1", "/opt/x/libcached.so.1", 0x303)], false);
    write(&root.join("etc/ld.so.cache"), &cache);
    write(&root.join("prog"), &lib(&[(NEEDED, "libcached.so.1"), (NEEDED, "libsys.so")]));
    let search = Search::system(Some(root.to_path_buf()), None);
    assert!(search.cache.is_some());
    let c = closure(&root.join("prog"), &search).unwrap();
    let via: Vec<Via> = c.objects.iter().map(|o| o.via).collect();
    assert_eq!(via, [Via::Given, Via::Cache, Via::System]);
    assert!(c.missing.is_empty());
    // -z nodefaultlib: neither cache nor system folders.
    write(&root.join("prog2"), &elf(true, EM_X86_64, &[(NEEDED, "libcached.so.1"), (NEEDED, "libsys.so")], 0x800));
    let c = closure(&root.join("prog2"), &search).unwrap();
    assert_eq!(c.missing.len(), 2);
}

fn fixture(name: &str) -> Vec<u8> {
    offload_testkit::fixture(&format!("prune/{name}"))
}

fn judge_file(data: &[u8], gpus: &[&str]) -> FileCheck {
    let gpus: Vec<Gpu> = gpus.iter().map(|g| Gpu::parse(g).unwrap()).collect();
    let inv = offload_inspect::scan(data, "f", &offload_inspect::Options::default());
    judge(&inv, data, &gpus)
}

#[test]
fn fat_libraries_are_judged_per_unit_and_gpu() {
    let data = fixture("gnu_rela.so");
    let f = judge_file(&data, &["gfx906", "gfx1030", "gfx90a:xnack+", "gfx90a"]);
    assert_eq!(f.role, Role::Fat);
    assert_eq!(f.targets(), ["gfx906", "gfx90a:xnack+", "gfx90a:xnack-"]);
    assert!(f.loads_on(0) && !f.loads_on(1) && f.loads_on(2) && !f.loads_on(3));
    assert!(f.fails());
    let u = &f.units[0];
    assert_eq!(u.loads[0].as_deref(), Ok("hipv4-amdgcn-amd-amdhsa--gfx906"));
    let why = u.loads[1].as_ref().unwrap_err();
    assert_eq!(why, "no code object for gfx1030 (holds gfx906, gfx90a:xnack+, gfx90a:xnack-)");
    let why = u.loads[3].as_ref().unwrap_err();
    assert!(why.contains("xnack"), "{why}");
    let mut s = Summary::new(4);
    s.add(&f);
    s.add(&judge_file(&fixture("rdc_ccob_lld.so"), &["gfx906", "gfx1030", "gfx90a:xnack+", "gfx90a"]));
    assert_eq!((s.fat_files, s.units), (2, f.units.len() + 1));
    assert_eq!(s.failing[0], (0, 0));
    assert_eq!(s.failing[1], (2, s.units));
}

#[test]
fn an_openmp_cpu_image_is_named_by_its_triple() {
    let f = judge_file(&fixture("omp/omp_x86.o"), &["gfx90a"]);
    assert_eq!(f.targets(), ["x86_64-pc-linux-gnu"]);
    let why = f.units[0].loads[0].as_ref().unwrap_err();
    assert_eq!(why, "no code object for gfx90a (holds x86_64-pc-linux-gnu)");
}

#[test]
fn host_files_and_standalone_code_objects() {
    let host = lib(&[(NEEDED, "libc.so.6")]);
    assert_eq!(judge_file(&host, &["gfx1030"]).role, Role::Host);
    // An AMDGPU code object (gfx90a, xnack+, sramecc-; code object v5).
    let mut co = vec![0u8; 64];
    co[..4].copy_from_slice(b"\x7fELF");
    co[4] = 2;
    co[5] = 1;
    co[7] = 64;
    co[8] = 3;
    co[18..20].copy_from_slice(&224u16.to_le_bytes());
    co[48..52].copy_from_slice(&0xb3fu32.to_le_bytes());
    let f = judge_file(&co, &["gfx1030", "gfx90a:sramecc-:xnack+", "gfx90a:xnack-"]);
    assert_eq!(f.role, Role::Standalone);
    assert_eq!(f.targets(), ["gfx90a:sramecc-:xnack+"]);
    assert_eq!((f.loads_on(0), f.loads_on(1), f.loads_on(2)), (false, true, false));
    assert!(!f.fails(), "standalone code objects are never failures");
    // A raw bundle file is standalone too.
    let entries: Vec<(&[u8], &[u8])> = vec![(b"hipv4-amdgcn-amd-amdhsa--gfx1030", b"x")];
    let b = offload_format::bundle::binary::write(&entries, std::num::NonZeroU64::new(8).unwrap()).to_vec();
    let f = judge_file(&b, &["gfx1030"]);
    assert_eq!((f.role, f.loads_on(0)), (Role::Standalone, true));
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any bytes, and any corruption of a valid file: an answer or an
        /// error, never a panic.
        #[test]
        fn readers_never_panic(junk in proptest::collection::vec(any::<u8>(), 0..512), at in 0usize..400, byte in any::<u8>()) {
            let _ = ldcache::LdCache::parse(&junk);
            let _ = dynamic::read(&junk);
            let mut elf = lib(&[(NEEDED, "liba.so"), (SONAME, "libme.so"), (RPATH, "$ORIGIN/x")]);
            let i = at % elf.len();
            elf[i] = byte;
            let _ = dynamic::read(&elf);
            let mut cache = ldcache::tests_support::build(&[("libfoo.so.1", "/x/libfoo.so.1", 0x303)], at % 2 == 0);
            let j = at % cache.len();
            cache[j] = byte;
            let _ = ldcache::LdCache::parse(&cache);
            let _ = judge_file(&elf, &["gfx1030"]);
        }
    }
}
