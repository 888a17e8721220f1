//! PE images built here (issue 29): the HIP and CUDA DLLs, the EXE and the
//! stub runtime DLLs of `fixtures/pe` (`scripts/make-pe-fixtures.sh`:
//! clang 22 for `x86_64-pc-windows-msvc`, `lld-link /dll /noentry
//! /nodefaultlib`), next to their ELF twins built from the same sources.
//! `list`, `select`, `extract` and `verify` must treat a DLL as its twin
//! (same entries, same bytes); `prune` keeps what it is asked to in both
//! modes; `check` follows the imports with the Windows search
//! (docs/guide/windows.md). The cuRAND tests use NVIDIA's real DLL and
//! `win_amd64` wheel (`scripts/fetch-real-corpus.sh`).

use crate::common;
use crate::inspect_support::{json, list_json, offload, s};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn pe(name: &str) -> PathBuf {
    common::fixtures().join("pe").join(name)
}

/// (id, size) of each code object, in file order.
fn entries(records: &[Value]) -> Vec<(String, u64)> {
    records.iter().map(|r| (s(r, "id").to_string(), r["size"].as_u64().unwrap())).collect()
}

/// Every code object `extract --all` writes, by name without the input's
/// file name, with its bytes.
fn extracted(path: &Path, dir: &Path) -> Vec<(String, Vec<u8>)> {
    std::fs::create_dir_all(dir).unwrap();
    let out = offload(&["extract", "--all", "--output-dir", dir.to_str().unwrap(), path.to_str().unwrap()]);
    assert!(out.status.success(), "extract: {}", String::from_utf8_lossy(&out.stderr));
    let prefix = format!("{}-", path.file_name().unwrap().to_str().unwrap());
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            (name.strip_prefix(&prefix).unwrap_or(&name).to_string(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

fn selected(path: &Path, gpu: &str) -> Vec<String> {
    let out = offload(&["select", "--gpu", gpu, "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "select: {}", String::from_utf8_lossy(&out.stderr));
    json(&out).iter().filter(|r| r["selected"] == true).map(|r| s(r, "id").to_string()).collect()
}

#[test]
fn built_dlls_list_select_and_extract_like_their_elf_twins() {
    let tmp = tempfile::tempdir().unwrap();
    for (dll, so, gpu) in
        [("hip_kernels.dll", "hip_kernels.so", "gfx90a"), ("cuda_kernels.dll", "cuda_kernels.so", "sm_89")]
    {
        let (dll, so) = (pe(dll), pe(so));
        let listed = entries(&list_json(&dll));
        assert_eq!(listed.len(), if gpu == "gfx90a" { 3 } else { 2 }, "{listed:?}");
        assert_eq!(listed, entries(&list_json(&so)));
        assert_eq!(selected(&dll, gpu), selected(&so, gpu));
        assert_eq!(selected(&dll, gpu).len(), 1);
        let from_dll = extracted(&dll, &tmp.path().join(format!("{gpu}-dll")));
        assert_eq!(from_dll.len(), listed.len());
        let from_so = extracted(&so, &tmp.path().join(format!("{gpu}-so")));
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, b)| (n.clone(), b.len())).collect::<Vec<_>>();
        assert_eq!(names(&from_dll), names(&from_so));
        assert_eq!(from_dll, from_so, "{gpu}: the same code object bytes");
        let out = offload(&["verify", dll.to_str().unwrap()]);
        assert!(out.status.success(), "verify {}: {}", dll.display(), String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
#[cfg_attr(not(has_llvm22), ignore = "needs LLVM 22 (clang, lld-link): scripts/install-reference-llvm.sh")]
#[cfg_attr(not(has_clang_cuda), ignore = "needs ptxas for clang's CUDA: scripts/install-cuda-tools.sh")]
fn the_fixtures_rebuild_from_source_with_clang_22_and_lld_link() {
    let tmp = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/make-pe-fixtures.sh");
    let out = std::process::Command::new("sh").arg(script).arg(tmp.path()).output().unwrap();
    assert!(out.status.success(), "make-pe-fixtures.sh: {}", String::from_utf8_lossy(&out.stderr));
    for name in ["hip_kernels.dll", "cuda_kernels.dll", "hip_kernels.so", "cuda_kernels.so"] {
        let rebuilt = entries(&list_json(&tmp.path().join(name)));
        assert_eq!(rebuilt, entries(&list_json(&pe(name))), "{name}");
        let dir = tmp.path().join(format!("x-{name}"));
        let fixture_dir = tmp.path().join(format!("f-{name}"));
        assert_eq!(extracted(&tmp.path().join(name), &dir), extracted(&pe(name), &fixture_dir), "{name}");
    }
}

/// Device entry IDs of a pruned output (the host entry aside).
fn device_ids(path: &Path) -> Vec<String> {
    list_json(path).iter().map(|r| s(r, "id").to_string()).filter(|id| !id.starts_with("host-")).collect()
}

#[test]
fn prune_keeps_the_target_of_built_dlls_in_both_modes() {
    let tmp = tempfile::tempdir().unwrap();
    for (dll, keep, kept) in [
        ("hip_kernels.dll", "gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx90a"),
        ("cuda_kernels.dll", "sm_89", "cuda-elf-sm_89"),
    ] {
        let input = pe(dll);
        let size = std::fs::metadata(&input).unwrap().len();
        for mode in ["zero", "cut"] {
            let output = tmp.path().join(format!("{mode}-{dll}"));
            let out = offload(&[
                "prune",
                "--keep",
                keep,
                "--mode",
                mode,
                input.to_str().unwrap(),
                "-o",
                output.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "prune {mode} {dll}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(device_ids(&output), [kept], "{mode} {dll}");
            let new_size = std::fs::metadata(&output).unwrap().len();
            if mode == "zero" {
                assert_eq!(new_size, size, "{dll}");
            } else {
                assert!(new_size < size, "{dll}: {size} -> {new_size}");
            }
            let out = offload(&["verify", output.to_str().unwrap()]);
            assert!(out.status.success(), "verify {mode} {dll}: {}", String::from_utf8_lossy(&out.stdout));
            // The checksum lld-link /release wrote is recomputed; the DLL
            // linked without it keeps a zero one.
            let data = std::fs::read(&output).unwrap();
            let image = offload_format::coff::pe::PeImage::parse(&data).unwrap();
            let expected = if dll.starts_with("hip") {
                offload_format::coff::pe::checksum(&data, image.checksum_offset)
            } else {
                0
            };
            assert_eq!(image.checksum, expected, "{mode} {dll}");
        }
    }
}

/// `offload check --json` on `args`: (exit code, report).
fn check(args: &[&str]) -> (i32, Value) {
    let mut all = vec!["check", "--json"];
    all.extend_from_slice(args);
    let out = offload(&all);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code().unwrap(), report)
}

fn missing(report: &Value) -> Vec<String> {
    report["missing"].as_array().unwrap().iter().map(|m| s(m, "name").to_string()).collect()
}

#[test]
fn check_follows_windows_imports_with_the_app_folder_and_path_stand_ins() {
    let app = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    for f in ["app.exe", "hip_kernels.dll"] {
        std::fs::copy(pe(f), app.path().join(f)).unwrap();
    }
    std::fs::copy(pe("amdhip64_6.dll"), runtime.path().join("amdhip64_6.dll")).unwrap();
    let exe = app.path().join("app.exe");
    let exe = exe.to_str().unwrap();
    // The runtime is nowhere: the answer is no, and it says which DLL.
    let (code, report) = check(&["--gpu", "gfx90a", exe]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(missing(&report), ["amdhip64_6.dll"]);
    let libs: Vec<(&str, &str)> =
        report["libraries"].as_array().unwrap().iter().map(|l| (s(l, "name"), s(l, "via"))).collect();
    assert_eq!(libs, [("hip_kernels.dll", "app_folder")]);
    // The DLL found in the app folder is judged for the GPU as on ELF.
    let files = report["files"].as_array().unwrap();
    assert!(files.iter().any(|f| s(f, "file").ends_with("hip_kernels.dll") && f["loads"][0]["ok"] == true), "{report}");
    // A folder given with --path stands in for PATH.
    let (code, report) = check(&["--gpu", "gfx90a", "--path", runtime.path().to_str().unwrap(), exe]);
    assert_eq!(code, 0, "{report}");
    assert!(missing(&report).is_empty());
    // A GPU none of the code is for: the answer is no for that reason.
    let (code, report) = check(&["--gpu", "gfx1030", "--path", runtime.path().to_str().unwrap(), exe]);
    assert_eq!(code, 1, "{report}");
    assert!(missing(&report).is_empty());
    // The whole folder, as an unpacked install: the same missing DLL.
    let (code, report) = check(&["--gpu", "gfx90a", app.path().to_str().unwrap()]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(missing(&report), ["amdhip64_6.dll"]);
}

fn corpus() -> Option<(PathBuf, PathBuf)> {
    let dir = match std::env::var_os("OFFLOAD_CORPUS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/offload-binutils/corpus"),
    };
    let dll = dir.join("files/curand-win/curand64_10.dll");
    let wheel =
        std::fs::read_dir(dir.join("packages/curand-win")).ok()?.filter_map(Result::ok).map(|e| e.path()).next();
    match (dll.is_file(), wheel) {
        (true, Some(wheel)) => Some((dll, wheel)),
        _ => {
            let required = std::env::var("OFFLOAD_REQUIRE_REAL_CORPUS").is_ok_and(|v| v == "1");
            assert!(!required, "OFFLOAD_REQUIRE_REAL_CORPUS=1 but no cuRAND wheels in {}", dir.display());
            eprintln!("\n*** SKIPPING real-corpus test: no cuRAND wheels; run scripts/fetch-real-corpus.sh ***\n");
            None
        }
    }
}

#[test]
#[cfg_attr(not(has_curand_wheels), ignore = "needs the cuRAND wheels: run scripts/fetch-real-corpus.sh")]
fn curand_dll_prunes_to_exactly_the_sm_89_cubins() {
    let Some((dll, _)) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // What the CUDA driver would load on an sm_89 GPU: one sm_89 cubin per
    // fat binary, 11.
    let picked = selected(&dll, "sm_89");
    assert_eq!(picked.len(), 11);
    let size = std::fs::metadata(&dll).unwrap().len();
    for mode in ["zero", "cut"] {
        let output = tmp.path().join(format!("{mode}.dll"));
        let out = offload(&[
            "prune",
            "--keep",
            "sm_89",
            "--mode",
            mode,
            dll.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "prune {mode}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(device_ids(&output), picked, "{mode}");
        let new_size = std::fs::metadata(&output).unwrap().len();
        if mode == "cut" {
            // 79.2 MB -> 45.6 MB: the dropped cubins leave the file.
            assert!(new_size < size * 6 / 10, "{size} -> {new_size}");
        } else {
            assert_eq!(new_size, size);
        }
        let out = offload(&["verify", output.to_str().unwrap()]);
        assert!(out.status.success(), "verify {mode}: {}", String::from_utf8_lossy(&out.stdout));
    }
}

#[test]
#[cfg_attr(not(has_curand_wheels), ignore = "needs the cuRAND wheels: run scripts/fetch-real-corpus.sh")]
fn check_on_the_unpacked_win_amd64_wheel() {
    let Some((_, wheel)) = corpus() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let unpacked = tmp.path().join("wheel");
    let file = std::fs::File::open(&wheel).unwrap();
    zip::ZipArchive::new(file).unwrap().extract(&unpacked).unwrap();
    // cuRAND imports only KERNEL32.dll, a system DLL: nothing is missing,
    // and every fat binary has an sm_89 cubin.
    let (code, report) = check(&["--gpu", "sm_89", unpacked.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");
    assert!(missing(&report).is_empty());
    let libs: Vec<(&str, &str)> =
        report["libraries"].as_array().unwrap().iter().map(|l| (s(l, "name"), s(l, "via"))).collect();
    assert!(libs.contains(&("KERNEL32.dll", "system")), "{libs:?}");
    // Without KERNEL32 among the system DLLs it would be missing: a copy
    // of the DLL that imports a DLL nobody ships is reported.
    let mut data = std::fs::read(unpacked.join("nvidia/curand/bin/curand64_10.dll")).unwrap();
    let at = {
        use offload_format::coff::pe::{DIR_IMPORT, PeImage};
        let image = PeImage::parse(&data).unwrap();
        let table = image.rva_to_offset(image.directory(DIR_IMPORT).unwrap().rva).unwrap();
        let name = u32::from_le_bytes(data[table + 12..table + 16].try_into().unwrap());
        image.rva_to_offset(name).unwrap()
    };
    assert_eq!(&data[at..at + 13], b"KERNEL32.dll\0");
    data[at..at + 12].copy_from_slice(b"NOTHERE1.dll");
    std::fs::write(unpacked.join("nvidia/curand/bin/curand64_10.dll"), &data).unwrap();
    let (code, report) = check(&["--gpu", "sm_89", unpacked.to_str().unwrap()]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(missing(&report), ["NOTHERE1.dll"]);
}

#[test]
fn verify_checks_the_hip_registration_records_of_a_dll() {
    use offload_format::coff::pe::PeImage;
    let tmp = tempfile::tempdir().unwrap();
    let good = std::fs::read(pe("hip_kernels.dll")).unwrap();
    let record = PeImage::parse(&good).unwrap().records(b".hipFatB", 0x4849_5046).unwrap()[0];
    assert!(record.relocated);
    let verify = |data: &[u8], name: &str| {
        let path = tmp.path().join(name);
        std::fs::write(&path, data).unwrap();
        let out = offload(&["verify", path.to_str().unwrap()]);
        (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).into_owned())
    };
    assert_eq!(verify(&good, "good.dll").0, 0);
    // The record points 16 bytes into the bundle.
    let mut inside = good.clone();
    inside[record.offset + 8..record.offset + 16].copy_from_slice(&(record.address + 16).to_le_bytes());
    let (code, text) = verify(&inside, "inside.dll");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("not the start of a fat binary"), "{text}");
    // A record of another magic is no record: without any, the bundle's
    // code may be loaded by other means (hipModuleLoadData), so it is no
    // error, as on ELF.
    let mut other = good.clone();
    other[record.offset..record.offset + 4].copy_from_slice(b"XXXX");
    let (code, text) = verify(&other, "other.dll");
    assert_eq!(code, 0, "{text}");
}

/// Prunes `input` keeping `keep` in `mode` into `dir`; the output path.
fn pruned(dir: &Path, input: &Path, keep: &[&str], mode: &str) -> PathBuf {
    let output = dir.join(format!("{mode}-{}", input.file_name().unwrap().to_str().unwrap()));
    let mut args = vec!["prune"];
    for k in keep {
        args.extend(["--keep", k]);
    }
    args.extend(["--mode", mode, input.to_str().unwrap(), "-o", output.to_str().unwrap()]);
    let out = offload(&args);
    assert!(out.status.success(), "prune {mode} {input:?}: {}", String::from_utf8_lossy(&out.stderr));
    output
}

/// COFF objects (issue 29): `prune` keeps exactly the target asked for in
/// both modes, zero mode keeps the size, cut mode shrinks the object; a
/// `.lib` archive of two objects prunes member by member in zero mode.
#[test]
fn prune_keeps_the_target_of_built_coff_objects_in_both_modes() {
    let tmp = tempfile::tempdir().unwrap();
    for (obj, keep, kept) in [
        ("hip.obj", "gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx90a"),
        ("cuda.obj", "sm_89", "cuda-elf-sm_89"),
        ("cuda_rdc.obj", "sm_89", "cuda-elf-sm_89"),
    ] {
        let size = std::fs::metadata(pe(obj)).unwrap().len();
        for mode in ["zero", "cut"] {
            let output = pruned(tmp.path(), &pe(obj), &[keep], mode);
            assert_eq!(device_ids(&output), [kept], "{mode} {obj}");
            let new_size = std::fs::metadata(&output).unwrap().len();
            if mode == "zero" {
                assert_eq!(new_size, size, "{obj}");
            } else {
                assert!(new_size < size, "{obj}: {size} -> {new_size}");
            }
            let out = offload(&["verify", output.to_str().unwrap()]);
            assert!(out.status.success(), "verify {mode} {obj}: {}", String::from_utf8_lossy(&out.stdout));
        }
    }
    let lib = pruned(tmp.path(), &pe("kernels.lib"), &["sm_89", "gfx90a"], "zero");
    assert_eq!(device_ids(&lib), ["cuda-elf-sm_89", "hipv4-amdgcn-amd-amdhsa--gfx90a"]);
    assert_eq!(std::fs::metadata(&lib).unwrap().len(), std::fs::metadata(pe("kernels.lib")).unwrap().len());
}

/// A pruned object still links: `lld-link` makes a DLL of each output
/// (zero and cut mode), which holds exactly the kept code object.
#[test]
#[cfg_attr(
    not(has_llvm22),
    ignore = "needs LLVM 22 (clang, lld-link, llvm-lib): run scripts/install-reference-llvm.sh"
)]
fn pruned_coff_objects_link_into_dlls_that_hold_the_kept_code() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = Path::new("/usr/lib/llvm-22/bin");
    let run = |tool: &str, args: &[&str]| {
        let out = std::process::Command::new(bin.join(tool)).args(args).current_dir(tmp.path()).output().unwrap();
        assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    std::fs::write(tmp.path().join("crt.c"), "int _fltused = 0;\nint atexit(void (*f)(void)) { (void)f; return 0; }\n")
        .unwrap();
    run("clang", &["--target=x86_64-pc-windows-msvc", "-c", "crt.c", "-o", "crt.obj"]);
    for (dll, exports) in [
        (
            "amdhip64_6",
            "__hipPopCallConfiguration __hipRegisterFatBinary __hipRegisterFunction __hipUnregisterFatBinary hipLaunchKernel",
        ),
        (
            "cudart64_12",
            "__cudaPopCallConfiguration __cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaRegisterFunction __cudaUnregisterFatBinary cudaLaunchKernel",
        ),
    ] {
        let def = format!("LIBRARY {dll}.dll\nEXPORTS\n{}\n", exports.replace(' ', "\n"));
        std::fs::write(tmp.path().join(format!("{dll}.def")), def).unwrap();
        run("llvm-lib", &[&format!("/def:{dll}.def"), "/machine:x64", &format!("/out:{dll}.lib")]);
    }
    for (obj, keep, kept, runtime) in [
        ("hip.obj", "gfx90a", "hipv4-amdgcn-amd-amdhsa--gfx90a", "amdhip64_6.lib"),
        ("cuda.obj", "sm_80", "cuda-elf-sm_80", "cudart64_12.lib"),
    ] {
        for mode in ["zero", "cut"] {
            let output = pruned(tmp.path(), &pe(obj), &[keep], mode);
            let dll = format!("{mode}-{obj}.dll");
            run(
                "lld-link",
                &[
                    "/dll",
                    "/noentry",
                    "/nodefaultlib",
                    output.to_str().unwrap(),
                    "crt.obj",
                    runtime,
                    &format!("/out:{dll}"),
                ],
            );
            assert_eq!(device_ids(&tmp.path().join(&dll)), [kept], "{mode} {obj}");
        }
    }
}

/// A signed DLL (a certificate table appended, as signing tools do) loses
/// its signature in both modes, with a warning on stderr: the signature
/// covered bytes prune changed (docs/guide/windows.md#signed-images).
#[test]
fn pruning_a_signed_dll_drops_its_certificate_table_and_warns() {
    use offload_format::coff::pe::{self as pe_format, PeImage};
    let tmp = tempfile::tempdir().unwrap();
    let mut data = std::fs::read(pe("hip_kernels.dll")).unwrap();
    let image = PeImage::parse(&data).unwrap();
    let (dir, sum_at) = (image.directories_offset + 8 * pe_format::DIR_SECURITY, image.checksum_offset);
    let at = data.len();
    let cert = [&64u32.to_le_bytes()[..], &0x0200u16.to_le_bytes(), &2u16.to_le_bytes(), &[0xab; 56]].concat();
    data.extend_from_slice(&cert);
    data[dir..dir + 4].copy_from_slice(&(at as u32).to_le_bytes());
    data[dir + 4..dir + 8].copy_from_slice(&64u32.to_le_bytes());
    let sum = pe_format::checksum(&data, sum_at);
    data[sum_at..sum_at + 4].copy_from_slice(&sum.to_le_bytes());
    let signed = tmp.path().join("signed.dll");
    std::fs::write(&signed, &data).unwrap();
    for mode in ["zero", "cut"] {
        let output = tmp.path().join(format!("{mode}.dll"));
        let out = offload(&[
            "prune",
            "--keep",
            "gfx90a",
            "--mode",
            mode,
            signed.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{mode}: {}", String::from_utf8_lossy(&out.stderr));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Authenticode signature") && stderr.contains("64 bytes"), "{mode}: {stderr}");
        let written = std::fs::read(&output).unwrap();
        let image = PeImage::parse(&written).unwrap();
        let d = image.directories[pe_format::DIR_SECURITY];
        assert_eq!((d.rva, d.size), (0, 0), "{mode}");
        assert!(!written.windows(8).any(|w| w == [0xab; 8]), "{mode}: the certificate bytes are gone");
        assert_eq!(image.checksum, pe_format::checksum(&written, image.checksum_offset), "{mode}");
        if mode == "zero" {
            assert_eq!(written.len(), at);
        }
        assert_eq!(device_ids(&output), ["hipv4-amdgcn-amd-amdhsa--gfx90a"]);
    }
}

/// OpenMP offload images in COFF (issue 29): the object's
/// `.llvm.offloading` and the linked DLL's `.llvm` section list the two
/// OpenMP images; extract writes them, kernels reads their kernel; prune
/// refuses the DLL with its reason, not "no device code".
#[test]
fn openmp_images_in_an_object_and_a_dll_are_read() {
    for name in ["omp_kernel.obj", "omp_kernel.dll"] {
        let records = list_json(&pe(name));
        let mut targets: Vec<(String, String)> =
            records.iter().map(|r| (s(r, "offload_kind").to_string(), s(r, "target_id").to_string())).collect();
        targets.sort();
        assert_eq!(targets, [("openmp".into(), "gfx1100".into()), ("openmp".into(), "gfx90a".into())], "{name}");
        let out = offload(&["verify", pe(name).to_str().unwrap()]);
        assert!(out.status.success(), "verify {name}: {}", String::from_utf8_lossy(&out.stdout));
        let tmp = tempfile::tempdir().unwrap();
        let files = extracted(&pe(name), tmp.path());
        assert_eq!(files.len(), 2, "{name}");
        // Objects carry bitcode for the device link; the DLL code objects.
        let magic: &[u8] = if name.ends_with(".obj") { b"BC\xc0\xde" } else { b"\x7fELF" };
        assert!(files.iter().all(|(_, bytes)| bytes.starts_with(magic)), "{name}");
    }
    let out = offload(&["kernels", pe("omp_kernel.dll").to_str().unwrap()]);
    assert!(out.status.success(), "kernels: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).matches("_scale_").count(), 2);
    let tmp = tempfile::tempdir().unwrap();
    let out = offload(&[
        "prune",
        "--keep",
        "gfx90a",
        pe("omp_kernel.dll").to_str().unwrap(),
        "-o",
        tmp.path().join("o.dll").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("OpenMP offload images"), "{:?}", out);
}

/// Writes a zip (a wheel) of `files` ((name in the wheel, fixture)).
fn wheel(path: &Path, files: &[(&str, &str)]) {
    use std::io::Write;
    let mut zip = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    for (name, fixture) in files {
        zip.start_file(*name, zip::write::SimpleFileOptions::default()).unwrap();
        zip.write_all(&std::fs::read(pe(fixture)).unwrap()).unwrap();
    }
    zip.finish().unwrap();
}

/// `check` on a wheel given as it is (issue 29): the imports of its DLLs
/// are looked up in the wheel's own tree, each in its importer's folder,
/// then in the `--path` folders; what is nowhere is missing (exit 1).
#[test]
fn check_follows_imports_inside_a_wheel_without_unpacking_it() {
    let tmp = tempfile::tempdir().unwrap();
    let whl = tmp.path().join("demo-1.0-py3-none-win_amd64.whl");
    wheel(&whl, &[("demo/app.exe", "app.exe"), ("demo/HIP_Kernels.dll", "hip_kernels.dll")]);
    let (code, report) = check(&["--gpu", "gfx90a", whl.to_str().unwrap()]);
    assert_eq!(code, 1, "{report}");
    assert_eq!(missing(&report), ["amdhip64_6.dll"]);
    let needed_by: Vec<&str> =
        report["missing"][0]["needed_by"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(needed_by, ["demo-1.0-py3-none-win_amd64.whl", "demo/HIP_Kernels.dll"]);
    let libs: Vec<(&str, &str, &str)> =
        report["libraries"].as_array().unwrap().iter().map(|l| (s(l, "name"), s(l, "path"), s(l, "via"))).collect();
    assert!(libs.contains(&("hip_kernels.dll", "demo/HIP_Kernels.dll", "app_folder")), "{libs:?}");
    // The runtime given through --path (standing in for PATH) is found.
    let (code, report) = check(&["--gpu", "gfx90a", "--path", pe("").to_str().unwrap(), whl.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");
    // In another folder of the wheel the DLL is not the app folder's.
    let split = tmp.path().join("split-1.0-py3-none-win_amd64.whl");
    wheel(&split, &[("demo/app.exe", "app.exe"), ("other/hip_kernels.dll", "hip_kernels.dll")]);
    let (code, report) = check(&["--gpu", "gfx90a", split.to_str().unwrap()]);
    assert_eq!(code, 1);
    let mut names = missing(&report);
    names.sort();
    assert_eq!(names, ["amdhip64_6.dll", "hip_kernels.dll"]);
    // --no-deps checks the code only.
    let (code, report) = check(&["--gpu", "gfx90a", "--no-deps", whl.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");
}

/// NVIDIA's cuRAND wheels, win_amd64 and Linux, checked as downloaded:
/// every import resolves (KERNEL32.dll is a system DLL; the Linux
/// library's DT_NEEDED are this system's glibc and libgcc).
#[test]
fn check_on_the_curand_wheels_as_downloaded() {
    let Some((_, win)) = corpus() else { return };
    let linux_dir = win.parent().unwrap().parent().unwrap().join("curand-linux");
    let linux = std::fs::read_dir(&linux_dir).unwrap().filter_map(Result::ok).map(|e| e.path()).next().unwrap();
    let (code, report) = check(&["--gpu", "sm_89", win.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");
    let libs: Vec<(&str, &str)> =
        report["libraries"].as_array().unwrap().iter().map(|l| (s(l, "name"), s(l, "via"))).collect();
    assert_eq!(libs, [("KERNEL32.dll", "system")]);
    let (code, report) = check(&["--gpu", "sm_89", linux.to_str().unwrap()]);
    assert_eq!(code, 0, "{report}");
    let names: Vec<&str> = report["libraries"].as_array().unwrap().iter().map(|l| s(l, "name")).collect();
    assert!(names.contains(&"libc.so.6"), "{names:?}");
}

/// `replace` refuses Windows files (a DLL, an object, a `.lib` of
/// objects) with its reason (exit status 1, as for any refused input)
/// and nothing written; `prune`
/// says why an OpenMP object is not pruned.
#[test]
fn replace_refuses_pe_images_coff_objects_and_lib_archives_with_a_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dll = pe("hip_kernels.dll");
    let files = extracted(&dll, tmp.path());
    let (_, code) = files.iter().find(|(name, _)| name.contains("gfx90a")).expect("a gfx90a code object");
    let with = tmp.path().join("new.co");
    std::fs::write(&with, code).unwrap();
    for (name, what) in
        [("hip_kernels.dll", "a PE image"), ("hip.obj", "a COFF object"), ("kernels.lib", "an archive of COFF objects")]
    {
        let out_path = tmp.path().join(format!("out.{name}"));
        let out = offload(&[
            "replace",
            "--entry",
            "gfx90a",
            "--with",
            with.to_str().unwrap(),
            pe(name).to_str().unwrap(),
            "-o",
            out_path.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(err.contains(what) && err.contains("only prune does"), "{name}: {err}");
        assert!(!out_path.exists(), "{name}: an output was written");
    }
    let out_path = tmp.path().join("o.obj");
    let out = offload(&[
        "prune",
        "--keep",
        "gfx90a",
        pe("omp_kernel.obj").to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(".llvm.offloading is not pruned in COFF objects"), "{err}");
    assert!(!out_path.exists());
}
