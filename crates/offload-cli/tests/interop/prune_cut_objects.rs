//! `offload prune --mode cut` on relocatable objects and static archives,
//! checked with the reference tools: the cut output is smaller by the
//! dropped bytes (up to alignment), `llvm-readelf-19 -S -r` reads it
//! without a warning, a cut HIP object links with the rest of its program
//! and registers the same code with the stub HIP runtime as the zero-mode
//! output, `cuobjdump` lists exactly the kept CUDA entries (byte for byte)
//! and nvcc still links a cut CUDA object, and a cut archive has the same
//! members (`llvm-ar-19 t`) and a symbol table `llvm-nm-19` reads, each
//! member what cutting it alone gives. Missing tools make the tests ignored,
//! or fail the build under `OFFLOAD_REQUIRE_LLVM=1` / `OFFLOAD_REQUIRE_CUDA=1`.

use crate::common;
use crate::cuda_support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn offload(args: &[&str]) -> Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn prune_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/prune").join(name)
}

fn check(cmd: &mut Command) -> Output {
    let out = common::run(cmd);
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Prunes `input` to `out` in `mode` with `--json`; returns the report.
fn prune(mode: &str, keep: &str, input: &Path, out: &Path) -> Value {
    let o = offload(&["prune", "--mode", mode, "--json", "--keep", keep, p(input), "-o", p(out)]);
    assert!(o.status.success(), "{}: {}", input.display(), String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

/// `llvm-readelf-19 -S -r` reads `file` with no warning.
fn readelf_is_clean(readelf: &Path, file: &Path) {
    let o = check(Command::new(readelf).args(["-S", "-r"]).arg(file));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("warning") && !err.contains("error"), "{}: {err}", file.display());
}

#[test]
fn a_cut_hip_object_is_smaller_by_the_dropped_bytes_and_reads_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["tu1.o", "tu12_r.o"] {
        let out = dir.path().join(name);
        let v = prune("cut", "gfx90a:xnack-", &prune_fixture(name), &out);
        assert_eq!(v["mode"], "cut", "{name}");
        let (before, after) = (v["input_size"].as_u64().unwrap(), v["output_size"].as_u64().unwrap());
        assert_eq!(after, size(&out), "{name}: output_size is the file's size");
        assert_eq!(before, size(&prune_fixture(name)));
        // Fat binaries are packed at 4096 bytes in .hip_fatbin; later
        // sections move by a multiple of their alignment (8 here).
        let freed = v["freed_bytes"].as_u64().unwrap();
        let removed = before - after;
        assert!(removed > 0 && removed <= freed + 4096 && removed + 2 * 4096 > freed, "{name}: {removed} / {freed}");
        let listed = offload(&["list", p(&out)]);
        let text = String::from_utf8_lossy(&listed.stdout);
        assert!(!text.contains("gfx906") && !text.contains("xnack+") && text.contains("gfx90a"), "{name}: {text}");
        let verify = offload(&["verify", p(&out)]);
        assert!(verify.status.success(), "{name}: {}", String::from_utf8_lossy(&verify.stdout));
        if let Some(readelf) = common::llvm_tool_if_found(19, "llvm-readelf") {
            readelf_is_clean(&readelf, &out);
        }
    }
}

#[test]
fn what_cut_mode_cannot_rewrite_is_refused_and_leaves_the_output_alone() {
    let dir = tempfile::tempdir().unwrap();
    // nvcc's `fatbinData` symbol moved 8 bytes into the fat binary: zero
    // mode keeps every offset and prunes it; cut mode would have to move a
    // symbol that points at no fat binary's start.
    let mut data = std::fs::read(common::fixtures().join("cuda/obj_sm80.o")).unwrap();
    let at = data.windows(12).position(|w| w == b"\0fatbinData\0").unwrap() + 1;
    let file = offload_format::elf::ElfFile::parse(&data).unwrap();
    let symtab = (1..file.sections.len()).find(|&i| file.section_name(i).unwrap() == b".symtab").unwrap();
    let (strtab, table) = (file.sections[file.sections[symtab].link as usize], file.sections[symtab]);
    let name = (at as u64 - strtab.offset) as u32;
    let sym = (0..table.size / 24)
        .map(|i| (table.offset + i * 24) as usize)
        .find(|&s| u32::from_le_bytes(data[s..s + 4].try_into().unwrap()) == name)
        .unwrap();
    data[sym + 8..sym + 16].copy_from_slice(&8u64.to_le_bytes());
    let input = dir.path().join("moved.o");
    std::fs::write(&input, &data).unwrap();
    let out = dir.path().join("out.o");
    std::fs::write(&out, b"precious").unwrap();
    let o = offload(&["prune", "--mode", "cut", "--keep", "sm_80", p(&input), "-o", p(&out)]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot cut this file") && err.contains("at no fat binary's start"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    let o = offload(&["prune", "--keep", "sm_80", p(&input), "-o", p(&out)]);
    assert!(o.status.success(), "zero mode prunes it: {}", String::from_utf8_lossy(&o.stderr));
}

/// clang-19, ld.lld and the stub runtime.
struct Hip {
    clang: PathBuf,
    lld: PathBuf,
    dir: tempfile::TempDir,
    support: PathBuf,
}

impl Hip {
    fn get() -> Hip {
        let clang = common::llvm_tool(19, "clang");
        let lld = common::llvm_tool(19, "ld.lld");
        let zstd = Path::new("/usr/lib/x86_64-linux-gnu/libzstd.so.1");
        assert!(zstd.exists(), "needs {}; run scripts/install-reference-llvm.sh", zstd.display());
        let support = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/prune_support");
        let dir = tempfile::tempdir().unwrap();
        let stub = dir.path().join("libamdhip64.so");
        check(
            Command::new(&clang).args(["-shared", "-fPIC", "-o", p(&stub)]).arg(support.join("hip_stub.c")).arg(zstd),
        );
        Hip { clang, lld, dir, support }
    }

    /// Compiles a HIP source to an object. `--rocm-path` points nowhere:
    /// with Debian's hipcc installed clang would find a ROCm in /usr, and
    /// `tu2.hip`'s `<stdexcept>` then fails with `-nogpuinc`.
    fn compile(&self, tu: &str, extra: &[&str]) -> PathBuf {
        let o = self.dir.path().join(format!("{tu}{}.o", extra.join("").replace('-', "")));
        let archs = ["--offload-arch=gfx906", "--offload-arch=gfx90a:xnack+", "--offload-arch=gfx90a:xnack-"];
        check(
            Command::new(&self.clang)
                .args(["-x", "hip", "-c", "-fPIC", "-nogpulib", "-nogpuinc", "-O1", "--rocm-path=/nonexistent"])
                .args(archs)
                .args(extra)
                .arg(format!("-I{}", self.support.display()))
                .arg(self.support.join(format!("{tu}.hip")))
                .arg("-o")
                .arg(&o),
        );
        o
    }

    /// Links `objects` with main.c into a program and runs it against the
    /// stub runtime; returns its trace.
    fn run(&self, name: &str, objects: &[&Path]) -> String {
        let exe = self.dir.path().join(name);
        check(
            Command::new(&self.clang)
                .args(["-fuse-ld=lld", "-o", p(&exe)])
                .arg(self.support.join("main.c"))
                .args(objects)
                .arg(format!("-L{}", self.dir.path().display()))
                .args(["-lamdhip64", "-lstdc++"]),
        );
        let out = check(Command::new(&exe).env("LD_LIBRARY_PATH", self.dir.path()));
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn cut_hip_objects_link_and_register_what_zero_mode_registers() {
    let hip = Hip::get();
    let tu1 = hip.compile("tu1", &[]);
    let tu2 = hip.compile("tu2", &["--offload-compress"]);
    let d = |n: &str| hip.dir.path().join(n);
    let original = hip.run("original", &[&tu1, &tu2]);
    assert!(original.contains("host: 1 2") && original.contains("gfx906"), "{original}");
    for (obj, tag) in [(&tu1, "1"), (&tu2, "2")] {
        prune("zero", "gfx90a:xnack-", obj, &d(&format!("zero{tag}.o")));
        prune("cut", "gfx90a:xnack-", obj, &d(&format!("cut{tag}.o")));
        assert!(size(&d(&format!("cut{tag}.o"))) < size(obj), "tu{tag}: the cut object is smaller");
    }
    let zero = hip.run("zero", &[&d("zero1.o"), &d("zero2.o")]);
    let cut = hip.run("cut", &[&d("cut1.o"), &d("cut2.o")]);
    assert!(!zero.contains("gfx906") && zero.contains("gfx90a:xnack-") && zero.contains("host: 1 2"), "{zero}");
    assert_eq!(cut, zero, "the cut program registers exactly what the zero-mode one does");
    // Linked together first (`ld.lld -r`), then cut: the second fat
    // binary moves and its wrapper's relocation addend with it.
    check(Command::new(&hip.lld).args(["-r", "-o", p(&d("both.o")), p(&tu1), p(&tu2)]));
    let v = prune("cut", "gfx90a:xnack-", &d("both.o"), &d("both-cut.o"));
    let second = &v["units"][1];
    assert!(second["new_offset"].as_u64() < second["offset"].as_u64(), "the second fat binary moved: {v}");
    assert_eq!(hip.run("both-cut", &[&d("both-cut.o")]), zero);
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn a_cut_gpu_rdc_device_link_object_links_and_registers_what_zero_mode_registers() {
    let hip = Hip::get();
    let tu1 = hip.compile("tu1", &["-fgpu-rdc"]);
    let tu2 = hip.compile("tu2", &["-fgpu-rdc"]);
    let d = |n: &str| hip.dir.path().join(n);
    // The device link of `--hip-link -fgpu-rdc` leaves, with -save-temps,
    // the host objects and the object holding the one linked bundle in
    // .hip_fatbin, with `__hip_fatbin_<cuid>` symbols defined in it.
    let work = d("rdc");
    std::fs::create_dir_all(&work).unwrap();
    let archs = ["--offload-arch=gfx906", "--offload-arch=gfx90a:xnack+", "--offload-arch=gfx90a:xnack-"];
    check(
        Command::new(&hip.clang)
            .current_dir(&work)
            .args(["--hip-link", "-fgpu-rdc", "-save-temps", "-fuse-ld=lld", "-nogpulib", "--rocm-path=/nonexistent"])
            .args(archs)
            .args(["-o", "prog"])
            .arg(hip.support.join("main.c"))
            .args([&tu1, &tu2])
            .arg(format!("-L{}", hip.dir.path().display()))
            .args(["-lamdhip64", "-lstdc++", "-Wno-unused-command-line-argument"]),
    );
    let named = |suffix: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&work)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_str().unwrap().ends_with(suffix))
            .collect();
        v.sort();
        v
    };
    let device = named("-hip-amdgcn-amd-amdhsa.o");
    let hosts = named("-host-x86_64-pc-linux-gnu.o");
    assert_eq!((device.len(), hosts.len()), (1, 2), "{:?}", std::fs::read_dir(&work).unwrap().count());
    prune("zero", "gfx90a:xnack-", &device[0], &d("rdc-zero.o"));
    let v = prune("cut", "gfx90a:xnack-", &device[0], &d("rdc-cut.o"));
    assert!(v["output_size"].as_u64().unwrap() < v["input_size"].as_u64().unwrap());
    let (zero_o, cut_o) = (d("rdc-zero.o"), d("rdc-cut.o"));
    let with = |o: &'static str| -> Vec<&Path> {
        let last = if o == "zero" { zero_o.as_path() } else { cut_o.as_path() };
        hosts.iter().map(PathBuf::as_path).chain([last]).collect()
    };
    let zero = hip.run("rdc-zero", &with("zero"));
    assert!(zero.contains("host: 1 2") && zero.contains("gfx90a:xnack-") && !zero.contains("gfx906"), "{zero}");
    assert_eq!(hip.run("rdc-cut", &with("cut")), zero);
}

/// The archive tests' inputs: a GNU and a BSD archive of two HIP objects
/// and a text member, made by llvm-ar-19.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn cut_archives_keep_their_members_and_symbol_tables() {
    let (ar, nm) = (common::llvm_tool(19, "llvm-ar"), common::llvm_tool(19, "llvm-nm"));
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    std::fs::write(d("notes.txt"), b"odd-sized text\n").unwrap();
    std::fs::copy(prune_fixture("tu1.o"), d("tu1.o")).unwrap();
    std::fs::copy(prune_fixture("tu12_r.o"), d("a-long-member-name-tu12_r.o")).unwrap();
    let members = ["tu1.o", "notes.txt", "a-long-member-name-tu12_r.o"];
    // SYM64_THRESHOLD=0 makes LLVM's writer use 64-bit symbol tables
    // (`/SYM64/`, `__.SYMDEF_64`); darwin is BSD with 8-byte member padding.
    for (format, sym64) in [("gnu", false), ("bsd", false), ("gnu", true), ("darwin", true)] {
        let format = if sym64 { format!("{format}64") } else { format.to_string() };
        let archive = d(&format!("lib-{format}.a"));
        let mut make = Command::new(&ar);
        if sym64 {
            make.env("SYM64_THRESHOLD", "0");
        }
        let kind = format.trim_end_matches("64");
        check(make.arg(format!("--format={kind}")).arg("rcs").arg(&archive).args(members.map(d)));
        let out = d(&format!("cut-{format}.a"));
        let v = prune("cut", "gfx90a:xnack+", &archive, &out);
        assert_eq!(v["mode"], "cut");
        assert_eq!(v["output_size"].as_u64(), Some(size(&out)));
        assert!(size(&out) < size(&archive), "{format}: smaller");
        let t = |a: &Path| String::from_utf8(check(Command::new(&ar).arg("t").arg(a)).stdout).unwrap();
        assert_eq!(t(&out), t(&archive), "{format}: the same members");
        let map = |a: &Path| {
            let o = check(Command::new(&nm).arg("--print-armap").arg(a));
            assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", String::from_utf8_lossy(&o.stderr));
            String::from_utf8(o.stdout).unwrap()
        };
        let (before, after) = (map(&archive), map(&out));
        assert!(after.contains("tu1_value in tu1.o"), "{format}: {after}");
        assert_eq!(after, before, "{format}: llvm-nm reads the same symbols, members and code");
        if kind == "darwin" {
            // Members carry their 8-byte padding inside: not the files.
            continue;
        }
        // Each member is the member cut on its own.
        let x = d(&format!("x-{format}"));
        std::fs::create_dir_all(&x).unwrap();
        check(Command::new(&ar).current_dir(&x).arg("x").arg(&out));
        for m in members {
            let got = std::fs::read(x.join(m)).unwrap();
            if m.ends_with(".txt") {
                assert_eq!(got, std::fs::read(d(m)).unwrap());
                continue;
            }
            let alone = d(&format!("alone-{m}"));
            prune("cut", "gfx90a:xnack+", &d(m), &alone);
            assert_eq!(got, std::fs::read(&alone).unwrap(), "{format}: {m}");
        }
    }
}

/// nvcc and cuobjdump.
fn cuda_tools() -> (PathBuf, PathBuf) {
    let bin = cuda_support::cuda_bin();
    let tools = [bin.join("nvcc"), bin.join("cuobjdump")];
    cuda_support::assert_tools("CUDA cut-mode tests", &tools);
    (tools[0].clone(), tools[1].clone())
}

#[test]
#[cfg_attr(not(has_cuda), ignore = "needs NVIDIA's CUDA tools: run scripts/install-cuda-tools.sh")]
fn cut_cuda_objects_and_archives_hold_exactly_the_kept_entries_and_link() {
    let (nvcc, _) = cuda_tools();
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    let script = r#"set -euo pipefail
cat > kern.cu <<'CU'
__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
void launch_scale(float *x, float a, int n) { scale<<<(n + 255) / 256, 256>>>(x, a, n); }
CU
cat > main.cu <<'CU'
void launch_scale(float *, float, int);
int main() { launch_scale(nullptr, 2.0f, 0); return 0; }
CU
G="-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]"
"$NVCC" -c kern.cu $G -o obj.o
"$NVCC" -c kern.cu -rdc=true $G -o rdc.o
"$NVCC" -c main.cu $G -o main.o
ar rcs libk.a obj.o rdc.o
"#;
    let o = common::run(Command::new("bash").arg("-c").arg(script).env("NVCC", &nvcc).current_dir(dir.path()));
    assert!(o.status.success(), "corpus: {}", String::from_utf8_lossy(&o.stderr));
    let devrt = cuda_support::cuda_bin().join("../lib/libcudadevrt.a");
    let mut inputs = vec![("obj.o", d("obj.o")), ("rdc.o", d("rdc.o")), ("libk.a", d("libk.a"))];
    if devrt.is_file() {
        inputs.push(("libcudadevrt.a", devrt));
    }
    for (name, input) in &inputs {
        let out = d(&format!("cut-{name}"));
        let keep = "sm_80,compute_90";
        let v = prune("cut", keep, input, &out);
        assert_eq!(v["mode"], "cut", "{name}");
        assert!(size(&out) < size(input), "{name}: {} -> {}", size(input), size(&out));
        let before = cuda_support::cuobjdump_dumped(input);
        let wanted: Vec<_> = before
            .iter()
            .filter(|(kind, arch, _)| (kind == "elf" && arch == "sm_80") || (kind == "ptx" && arch == "sm_90"))
            .cloned()
            .collect();
        assert!(!wanted.is_empty() && wanted.len() < before.len(), "{name}");
        assert_eq!(
            cuda_support::cuobjdump_dumped(&out),
            wanted,
            "{name}: cuobjdump lists exactly the kept entries, byte for byte"
        );
        let zero = d(&format!("zero-{name}"));
        prune("zero", keep, input, &zero);
        eprintln!("{name}: {} bytes, zero mode {}, cut {}", size(input), size(&zero), size(&out));
    }
    // The cut objects still link (whole-program and RDC, through nvlink).
    let o = common::run(Command::new(&nvcc).current_dir(dir.path()).args([
        p(&d("main.o")),
        p(&d("cut-obj.o")),
        "-gencode",
        "arch=compute_80,code=sm_80",
        "-o",
        "exe",
    ]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(cuda_support::cuobjdump_dumped(&d("exe")).iter().any(|(k, a, _)| k == "elf" && a == "sm_80"));
    let o = common::run(Command::new(&nvcc).current_dir(dir.path()).args([
        "-rdc=true",
        p(&d("main.o")),
        p(&d("cut-rdc.o")),
        "-arch=sm_80",
        "-o",
        "exe_rdc",
    ]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
