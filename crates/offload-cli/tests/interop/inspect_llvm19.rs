//! `offload list`/`extract` on files built the way HIP and OpenMP build them
//! (clang 19, LLVM 19's bundler, packager, llvm-ar), checked against what
//! LLVM's own tools extract: every listed code object's bytes at `offset`
//! (or, when compressed, what `extract` writes) equal LLVM's output.

use crate::inspect_support;

use inspect_support::*;
use std::path::Path;

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// A `.so` compiled from real HIP code for two GPUs: one `.hip_fatbin`
/// section aligned to 4096 with a host entry and two hipv4 entries.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn hip_shared_library() {
    let llvm = Llvm::get();
    let d = tmp();
    let obj = llvm.hip_object(d.path(), "scale", &["gfx906", "gfx90a:xnack+"], &[]);
    let so = d.path().join("libscale.so");
    llvm.shared(&so, &[&obj]);
    let records = list_json(&so);
    let ids: Vec<&str> = records.iter().map(|r| s(r, "id")).collect();
    assert_eq!(
        ids,
        ["host-x86_64-unknown-linux--", "hipv4-amdgcn-amd-amdhsa--gfx906", "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+"]
    );
    assert!(records.iter().all(|r| s(r, "location") == "section .hip_fatbin" && s(r, "format") == "bundle"));
    assert_eq!(s(&records[0], "offload_kind"), "host");
    assert_eq!(s(&records[2], "target_id"), "gfx90a:xnack+");
    assert_eq!(s(&records[2], "triple"), "amdgcn-amd-amdhsa");
    assert_eq!(n(&records[1], "offset") % 4096, 0, "HIP aligns code objects to 4096");
    assert_eq!(check_section_against_llvm(&llvm, &so, ".hip_fatbin", &records, d.path()), 3);
    // The object before linking lists the same entries.
    let in_object = list_json(&obj);
    assert_eq!(in_object.len(), 3);
    assert_eq!(check_section_against_llvm(&llvm, &obj, ".hip_fatbin", &in_object, d.path()), 3);
    let out = offload(&["verify", so.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));

    // Damage the third entry record: verify names its absolute offset.
    let mut data = std::fs::read(&so).unwrap();
    let start = data.windows(24).position(|w| w == b"__CLANG_OFFLOAD_BUNDLE__").unwrap();
    let record = start + 32 + (24 + ids[0].len()) + (24 + ids[1].len());
    data[record..record + 8].copy_from_slice(&(1u64 << 45).to_le_bytes());
    let bad = d.path().join("libbad.so");
    std::fs::write(&bad, &data).unwrap();
    let out = offload(&["verify", "--json", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let diags = json(&out);
    assert_eq!(n(&diags[0], "offset"), record as u64, "{diags:?}");
    assert_eq!(s(&diags[0], "location"), "section .hip_fatbin");
    // select still judges the entries before the damage, and explains.
    let out = offload(&["select", "--gpu", "gfx1030", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("other processor: built for gfx906, the GPU is gfx1030"));
}

/// A code object bundled under another GPU's ID (the kind of mistake behind
/// "No compatible code objects found" reports) is caught by verify.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn verify_catches_mislabeled_code_objects() {
    let llvm = Llvm::get();
    let d = tmp();
    let co = llvm.code_object(d.path(), "gfx906", "");
    let b = d.path().join("wrong.hipfb");
    llvm.run(
        "clang-offload-bundler",
        &[
            "-type=bc",
            "-targets=hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            &format!("-input={}", co.display()),
            &format!("-output={}", b.display()),
        ],
    );
    let out = offload(&["verify", b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("names gfx90a but holds a code object for gfx906"), "{text}");
    let co = llvm.code_object(d.path(), "gfx90a", "-xnack");
    llvm.run(
        "clang-offload-bundler",
        &[
            "-type=bc",
            "-targets=hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
            &format!("-input={}", co.display()),
            &format!("-output={}", b.display()),
        ],
    );
    let text = String::from_utf8_lossy(&offload(&["verify", b.to_str().unwrap()]).stdout).into_owned();
    assert!(text.contains("says xnack+, but its code object was built with xnack off"), "{text}");
}

/// Two translation units compiled with `--offload-compress` and linked into
/// one library: two compressed bundles back to back in `.hip_fatbin`, as
/// ROCm libraries have them.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn compressed_bundles_back_to_back() {
    let llvm = Llvm::get();
    let d = tmp();
    let a = llvm.hip_object(d.path(), "first", &["gfx906", "gfx1030"], &["--offload-compress"]);
    let b = llvm.hip_object(d.path(), "second", &["gfx90a:xnack-", "gfx90a:xnack+"], &["--offload-compress"]);
    let so = d.path().join("libtwo.so");
    llvm.shared(&so, &[&a, &b]);
    let records = list_json(&so);
    assert_eq!(records.len(), 6);
    assert!(records.iter().all(|r| r["compressed"] == true && r["offset"].is_null()));
    assert!(records.iter().all(|r| s(r, "format") == "compressed-bundle"));
    let locations: Vec<&str> = records.iter().map(|r| s(r, "location")).collect();
    assert_eq!(locations.iter().filter(|l| **l == "section .hip_fatbin #1").count(), 3, "{locations:?}");
    assert_eq!(n(&records[0], "unit") + 1, n(&records[5], "unit"));
    assert_eq!(check_section_against_llvm(&llvm, &so, ".hip_fatbin", &records, d.path()), 6);
    let out = offload(&["verify", so.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Bundles made by LLVM's bundler from real code objects, embedded with
/// `.incbin` in `.hip_fatbin`: one with `-bundle-align=4096` as HIP makes
/// them, then three `-compress`ed ones in a row.
fn incbin_library(llvm: &Llvm, d: &Path) -> std::path::PathBuf {
    let host = d.join("host.empty");
    std::fs::write(&host, b"").unwrap();
    let cos = [
        llvm.code_object(d, "gfx906", ""),
        llvm.code_object(d, "gfx90a", "+xnack"),
        llvm.code_object(d, "gfx1100", ""),
    ];
    let ids = [
        "hipv4-amdgcn-amd-amdhsa--gfx906",
        "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "hipv4-amdgcn-amd-amdhsa--gfx1100",
    ];
    let mut bundles = Vec::new();
    for (k, extra) in
        [["-bundle-align=4096", ""], ["-compress", ""], ["-compress", "-compression-level=9"], ["-compress", ""]]
            .iter()
            .enumerate()
    {
        let out = d.join(format!("b{k}.hipfb"));
        let n = if k == 3 { 2 } else { 3 };
        let mut targets = vec!["host-x86_64-unknown-linux-gnu".to_string()];
        targets.extend(ids[..n].iter().map(|s| s.to_string()));
        let mut args = vec![
            "-type=bc".to_string(),
            format!("-targets={}", targets.join(",")),
            format!("-input={}", host.display()),
        ];
        args.extend(cos[..n].iter().map(|c| format!("-input={}", c.display())));
        args.push(format!("-output={}", out.display()));
        args.extend(extra.iter().filter(|e| !e.is_empty()).map(|e| e.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        llvm.run("clang-offload-bundler", &args);
        bundles.push(out);
    }
    let mut asm = String::from(".section .hip_fatbin,\"a\",@progbits\n");
    for b in &bundles {
        asm.push_str(&format!(".p2align 12\n.incbin \"{}\"\n", b.display()));
    }
    let s = d.join("fatbin.s");
    std::fs::write(&s, asm).unwrap();
    let o = d.join("fatbin.o");
    llvm.run("clang", &["-c", s.to_str().unwrap(), "-o", o.to_str().unwrap()]);
    let so = d.join("libincbin.so");
    llvm.shared(&so, &[&o]);
    so
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn llvm_bundles_in_a_library() {
    let llvm = Llvm::get();
    let d = tmp();
    let so = incbin_library(&llvm, d.path());
    let records = list_json(&so);
    assert_eq!(records.len(), 4 + 4 + 4 + 3);
    assert_eq!(records.iter().filter(|r| r["compressed"] == true).count(), 11);
    assert_eq!(check_section_against_llvm(&llvm, &so, ".hip_fatbin", &records, d.path()), 15);
    let out = offload(&["verify", so.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Packager output embedded with `-fembed-offload-object` (ELF and COFF),
/// and a HIP object from the new offload driver: `.llvm.offloading`.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn offload_binaries_in_objects() {
    let llvm = Llvm::get();
    let d = tmp();
    let p = d.path();
    let co = llvm.code_object(p, "gfx90a", "+xnack");
    let other = p.join("nv.bin");
    std::fs::write(&other, b"not really a cubin").unwrap();
    let pkg = p.join("pkg.out");
    llvm.run(
        "clang-offload-packager",
        &[
            "-o",
            pkg.to_str().unwrap(),
            &format!("--image=file={},triple=amdgcn-amd-amdhsa,arch=gfx90a:xnack+,kind=hip", co.display()),
            &format!("--image=file={},triple=nvptx64-nvidia-cuda,arch=sm_70,kind=openmp", other.display()),
        ],
    );
    let c = p.join("host.c");
    std::fs::write(&c, "int host(void) { return 1; }\n").unwrap();
    let embed = format!("-fembed-offload-object={}", pkg.display());
    for (target, name) in [("x86_64-unknown-linux-gnu", "host.o"), ("x86_64-pc-windows-msvc", "host.obj")] {
        let obj = p.join(name);
        llvm.run(
            "clang",
            &[&format!("--target={target}"), "-c", c.to_str().unwrap(), "-Xclang", &embed, "-o", obj.to_str().unwrap()],
        );
        let records = list_json(&obj);
        assert_eq!(records.len(), 2, "{records:?}");
        let data = std::fs::read(&obj).unwrap();
        for (r, triple, arch) in
            [(&records[0], "amdgcn-amd-amdhsa", "gfx90a:xnack+"), (&records[1], "nvptx64-nvidia-cuda", "sm_70")]
        {
            assert_eq!(s(r, "format"), "offload-binary");
            assert_eq!(s(r, "location").split(' ').take(2).collect::<Vec<_>>(), ["section", ".llvm.offloading"]);
            assert_eq!(s(r, "id"), format!("{triple}-{arch}"));
            let out = p.join(format!("{name}.{arch}.img"));
            llvm.run(
                "clang-offload-packager",
                &[obj.to_str().unwrap(), &format!("--image=file={},triple={triple},arch={arch}", out.display())],
            );
            let expected = std::fs::read(&out).unwrap();
            let off = n(r, "offset") as usize;
            assert_eq!(&data[off..off + expected.len()], &expected[..]);
            assert_eq!(n(r, "size"), expected.len() as u64);
        }
        assert_eq!(s(&records[0], "offload_kind"), "hip");
        assert_eq!(s(&records[1], "offload_kind"), "openmp");
        assert_eq!(s(&records[0], "target_id"), "gfx90a:xnack+");
    }
    // HIP with the new offload driver.
    let obj = llvm.hip_object(p, "newdrv", &["gfx906", "gfx1030"], &["--offload-new-driver", "-fgpu-rdc"]);
    let records = list_json(&obj);
    assert_eq!(records.len(), 2);
    let data = std::fs::read(&obj).unwrap();
    for r in &records {
        let arch = s(r, "target_id");
        let out = p.join(format!("newdrv.{arch}.bc"));
        llvm.run(
            "clang-offload-packager",
            &[obj.to_str().unwrap(), &format!("--image=file={},arch={arch}", out.display())],
        );
        let expected = std::fs::read(&out).unwrap();
        let off = n(r, "offset") as usize;
        assert_eq!(&data[off..off + expected.len()], &expected[..]);
    }
}

/// An archive of fat objects: a HIP object, a packager object and a
/// `-type=o` bundle (`__CLANG_OFFLOAD_BUNDLE__` sections); every record of
/// a member is at the member's record position plus the member's offset.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn archive_of_fat_objects() {
    let llvm = Llvm::get();
    let d = tmp();
    let p = d.path();
    let hip = llvm.hip_object(p, "member", &["gfx906", "gfx90a:xnack+"], &["--offload-compress"]);
    let plain = llvm.hip_object(p, "plain", &["gfx1100"], &[]);
    let co = llvm.code_object(p, "gfx906", "");
    let c = p.join("h.c");
    std::fs::write(&c, "int h(void) { return 2; }\n").unwrap();
    let host = p.join("h.o");
    llvm.run("clang", &["-c", c.to_str().unwrap(), "-o", host.to_str().unwrap()]);
    let fat = p.join("fat.o");
    llvm.run(
        "clang-offload-bundler",
        &[
            "-type=o",
            "-targets=host-x86_64-unknown-linux-gnu,hipv4-amdgcn-amd-amdhsa--gfx906",
            &format!("-input={}", host.display()),
            &format!("-input={}", co.display()),
            &format!("-output={}", fat.display()),
        ],
    );
    let lib = p.join("libfat.a");
    llvm.run(
        "llvm-ar",
        &["rc", lib.to_str().unwrap(), hip.to_str().unwrap(), plain.to_str().unwrap(), fat.to_str().unwrap()],
    );
    let records = list_json(&lib);
    let data = std::fs::read(&lib).unwrap();
    let mut total = 0;
    for member in [&hip, &plain, &fat] {
        let name = member.file_name().unwrap().to_str().unwrap();
        let prefix = format!("member libfat.a({name}) ");
        let alone = list_json(member);
        let member_data = std::fs::read(member).unwrap();
        let start = data.windows(member_data.len()).position(|w| w == member_data).unwrap();
        let in_lib: Vec<_> = records.iter().filter(|r| s(r, "location").starts_with(&prefix)).collect();
        assert_eq!(in_lib.len(), alone.len(), "{name}");
        for (r, a) in in_lib.iter().zip(&alone) {
            assert_eq!(s(r, "location").strip_prefix(&prefix), Some(s(a, "location")));
            assert_eq!((s(r, "id"), n(r, "size")), (s(a, "id"), n(a, "size")));
            if let Some(off) = a["offset"].as_u64() {
                assert_eq!(n(r, "offset"), start as u64 + off);
            }
            total += 1;
        }
    }
    assert_eq!(total, records.len());
    assert_eq!(total, 3 + 2 + 2);
    // The -type=o object against LLVM's bundler.
    let fat_records = list_json(&fat);
    let dev = &fat_records[1];
    assert_eq!(s(dev, "location"), "section __CLANG_OFFLOAD_BUNDLE__hipv4-amdgcn-amd-amdhsa--gfx906");
    let out = p.join("fat.gfx906");
    llvm.run(
        "clang-offload-bundler",
        &[
            "-type=o",
            "-unbundle",
            "-targets=hipv4-amdgcn-amd-amdhsa--gfx906",
            &format!("-input={}", fat.display()),
            &format!("-output={}", out.display()),
        ],
    );
    let expected = std::fs::read(out).unwrap();
    let fat_data = std::fs::read(&fat).unwrap();
    let off = n(dev, "offset") as usize;
    assert_eq!(&fat_data[off..off + expected.len()], &expected[..]);
    assert_eq!(check_section_against_llvm(&llvm, &plain, ".hip_fatbin", &list_json(&plain), p), 2);
}

/// `.hip_fatbin` in COFF (`.section .hip_fatbin,"dr"`) and Mach-O
/// (`__HIP,__hip_fatbin`) objects.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn coff_and_macho_objects() {
    let llvm = Llvm::get();
    let d = tmp();
    let p = d.path();
    let co = llvm.code_object(p, "gfx906", "");
    let bundle = p.join("b.hipfb");
    llvm.run(
        "clang-offload-bundler",
        &[
            "-type=bc",
            "-targets=hipv4-amdgcn-amd-amdhsa--gfx906",
            &format!("-input={}", co.display()),
            &format!("-output={}", bundle.display()),
            "-bundle-align=4096",
        ],
    );
    let expected = std::fs::read(&co).unwrap();
    for (target, section, location) in [
        ("x86_64-pc-windows-msvc", ".section .hip_fatbin,\"dr\"", "section .hip_fatbin"),
        ("x86_64-apple-macos", ".section __HIP,__hip_fatbin", "section __HIP,__hip_fatbin"),
    ] {
        let s_file = p.join(format!("{target}.s"));
        std::fs::write(&s_file, format!("{section}\n.p2align 12\n.incbin \"{}\"\n", bundle.display())).unwrap();
        let obj = p.join(format!("{target}.o"));
        llvm.run(
            "clang",
            &[&format!("--target={target}"), "-c", s_file.to_str().unwrap(), "-o", obj.to_str().unwrap()],
        );
        let records = list_json(&obj);
        assert_eq!(records.len(), 1, "{target}");
        assert_eq!(s(&records[0], "location"), location);
        let data = std::fs::read(&obj).unwrap();
        let off = n(&records[0], "offset") as usize;
        assert_eq!(&data[off..off + expected.len()], &expected[..], "{target}");
    }
}

/// Raw files: a text bundle, concatenated compressed bundles, a packager
/// file, the samples shipped in the repository.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn raw_files() {
    let llvm = Llvm::get();
    let d = tmp();
    let p = d.path();
    let (h, dv) = (p.join("h.i"), p.join("d.i"));
    std::fs::write(&h, "int host;\n").unwrap();
    std::fs::write(&dv, "int device;").unwrap();
    let text = p.join("t.i");
    llvm.run(
        "clang-offload-bundler",
        &[
            "-type=i",
            "-targets=host-x86_64-unknown-linux-gnu,hip-amdgcn-amd-amdhsa--gfx906",
            &format!("-input={}", h.display()),
            &format!("-input={}", dv.display()),
            &format!("-output={}", text.display()),
        ],
    );
    let records = list_json(&text);
    assert_eq!(records.len(), 2);
    let data = std::fs::read(&text).unwrap();
    for (r, want) in records.iter().zip(["int host;\n", "int device;"]) {
        assert_eq!(s(r, "format"), "text-bundle");
        let off = n(r, "offset") as usize;
        assert_eq!(&data[off..off + want.len()], want.as_bytes());
        assert_eq!(n(r, "size"), want.len() as u64);
    }
    let samples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
    let mut cat = std::fs::read(samples.join("hip-gfx906-gfx90a.compressed.bc")).unwrap();
    cat.extend(std::fs::read(samples.join("hip-gfx906-gfx90a.compressed.bc")).unwrap());
    let two = p.join("two.ccob");
    std::fs::write(&two, &cat).unwrap();
    let records = list_json(&two);
    assert_eq!(records.len(), 6);
    assert_eq!(s(&records[5], "location"), "file #1");
    let plain = list_json(&samples.join("hip-gfx906-gfx90a.bc"));
    let plain_data = std::fs::read(samples.join("hip-gfx906-gfx90a.bc")).unwrap();
    for i in 0..records.len() {
        let got = p.join(format!("o{i}"));
        let out = offload(&["extract", "--index", &i.to_string(), "-o", got.to_str().unwrap(), two.to_str().unwrap()]);
        assert!(out.status.success());
        let q = &plain[i % 3];
        let off = n(q, "offset") as usize;
        assert_eq!(std::fs::read(&got).unwrap(), &plain_data[off..off + n(q, "size") as usize]);
    }
    let sample = p.join("sample.bc");
    std::fs::copy(samples.join("hip-gfx906-gfx90a.bc"), &sample).unwrap();
    for r in &plain {
        let expected = llvm.unbundle(&sample, s(r, "id"));
        let off = n(r, "offset") as usize;
        assert_eq!(&plain_data[off..off + expected.len()], &expected[..]);
    }
}
