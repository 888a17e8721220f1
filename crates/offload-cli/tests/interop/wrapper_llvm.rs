//! clang-offload-wrapper against LLVM: the fixtures still describe what LLVM
//! 14's wrapper writes, LLVM 14 and 19 read our bitcode as the same module
//! as LLVM's, `opt -verify` passes, clang 14 compiles it, the image-info
//! records reach the runtime, and the command line answers like LLVM 14's.

use crate::common;
use crate::wrapper_common;

use offload_format::wrapper::{bitcode, ir, module, text, triple};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use wrapper_common::*;

struct Llvm {
    wrapper14: PathBuf,
    dis14: PathBuf,
    dis19: PathBuf,
    opt14: PathBuf,
    opt19: PathBuf,
}

fn llvm() -> Llvm {
    Llvm {
        wrapper14: common::llvm_tool(14, "clang-offload-wrapper"),
        dis14: common::llvm_tool(14, "llvm-dis"),
        dis19: common::llvm_tool(19, "llvm-dis"),
        opt14: common::llvm_tool(14, "opt"),
        opt19: common::llvm_tool(19, "opt"),
    }
}

fn ok(out: Output, what: &str) -> Output {
    assert!(out.status.success(), "{what} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    out
}

impl Llvm {
    /// `llvm-dis` of a bitcode file read from standard input.
    fn dis(&self, tool: &Path, bc: &Path) -> String {
        let out = ok(common::run(Command::new(tool).stdin(File::open(bc).unwrap())), "llvm-dis");
        String::from_utf8(out.stdout).unwrap()
    }

    fn verify(&self, bc: &Path) {
        ok(common::run(Command::new(&self.opt14).args(["-verify", "-o", "/dev/null"]).arg(bc)), "opt 14 -verify");
        ok(common::run(Command::new(&self.opt19).args(["-passes=verify", "-o", "/dev/null"]).arg(bc)), "opt 19 verify");
    }

    fn wrap(&self, tool: &Path, triple: &str, images: &[PathBuf], extra: &[&str], out: &Path) {
        let mut c = Command::new(tool);
        c.arg(format!("-target={triple}")).arg("-o").arg(out).args(extra).args(images);
        ok(common::run(&mut c), &format!("{} -target={triple}", tool.display()));
    }

    /// Wraps `images` with LLVM 14 and with ours and checks that LLVM 14 and
    /// 19 print the two modules the same, that ours verifies, and that our
    /// `.ll` printer agrees with llvm-dis 14. Returns llvm-dis 14's text.
    fn compare(&self, tmp: &Path, triple: &str, images: &[PathBuf]) -> String {
        let theirs = tmp.join("theirs.bc");
        let ours_bc = tmp.join("ours.bc");
        self.wrap(&self.wrapper14, triple, images, &[], &theirs);
        self.wrap(Path::new(ours()), triple, images, &[], &ours_bc);
        let t14 = self.dis(&self.dis14, &theirs);
        assert_eq!(self.dis(&self.dis14, &ours_bc), t14, "llvm-dis 14, {triple} {images:?}");
        assert_eq!(self.dis(&self.dis19, &ours_bc), self.dis(&self.dis19, &theirs), "llvm-dis 19, {triple} {images:?}");
        self.verify(&ours_bc);
        let bytes: Vec<Vec<u8>> = images.iter().map(|p| fs::read(p).unwrap()).collect();
        let input =
            module::WrapperInput { triple, images: bytes.iter().map(Vec::as_slice).collect(), offload_archs: vec![] };
        assert_eq!(text::to_text(&module::build(&input).unwrap(), "<stdin>"), t14, "our printer, {triple} {images:?}");
        t14
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn every_fixture_is_what_llvm14_writes_and_what_ours_reads_back_as() {
    let l = llvm();
    let tmp = tempfile::tempdir().unwrap();
    let mut n = 0;
    for c in cases() {
        let t14 = l.compare(tmp.path(), &c.triple, &c.images);
        assert_eq!(t14, expected(&c.name), "fixture {} is stale; rerun make.sh", c.name);
        n += 1;
    }
    eprintln!("{n} fixture input sets: llvm-dis 14 and 19 of ours == of LLVM 14's; opt 14/19 verify");
    assert!(n >= 20);
}

/// A deterministic generator for test data.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn random_input_sets_read_back_like_llvm14s() {
    let l = llvm();
    let tmp = tempfile::tempdir().unwrap();
    let triples = [
        "x86_64-pc-linux-gnu",
        "i386-pc-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "powerpc64le-unknown-linux-gnu",
        "amdgcn-amd-amdhsa",
        "nvptx64-nvidia-cuda",
        "armv7a-linux-gnueabihf",
        "x86_64-pc-windows-msvc",
    ];
    let mut rng = Lcg(0x5eed);
    for set in 0..24 {
        let n = 1 + (rng.next() % 6) as usize;
        let mut images = Vec::new();
        for i in 0..n {
            let len = match rng.next() % 4 {
                0 => rng.next() % 8,
                1 => 500 + rng.next() % 100,
                _ => rng.next() % 3000,
            } as usize;
            let zeros = rng.next().is_multiple_of(5);
            let data: Vec<u8> = (0..len).map(|_| if zeros { 0 } else { rng.next() as u8 }).collect();
            let p = tmp.path().join(format!("r{set}-{i}.bin"));
            fs::write(&p, data).unwrap();
            images.push(p);
        }
        let t = triples[(rng.next() % triples.len() as u64) as usize];
        l.compare(tmp.path(), t, &images);
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn image_info_modules_verify_and_read_back() {
    let l = llvm();
    let tmp = tempfile::tempdir().unwrap();
    let inp = |n: &str| dir().join("inputs").join(n);
    let bc = tmp.path().join("info.bc");
    for (name, triple, images, archs) in [
        (
            "offload-arch-two",
            "x86_64-pc-linux-gnu",
            vec![inp("img1.bin"), inp("img2.bin")],
            vec!["gfx906", "gfx90a:xnack+"],
        ),
        (
            "offload-arch-nvptx64",
            "nvptx64-nvidia-cuda",
            vec![inp("img1.bin"), inp("empty.bin"), inp("img2.bin")],
            vec!["sm_70", "sm_80", "sm_90"],
        ),
    ] {
        let flags: Vec<String> = archs.iter().map(|a| format!("--offload-arch={a}")).collect();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        l.wrap(Path::new(ours()), triple, &images, &flags, &bc);
        assert_eq!(l.dis(&l.dis14, &bc), expected(name));
        let t19 = l.dis(&l.dis19, &bc);
        assert!(t19.contains("call void @__tgt_register_image_info(ptr @.offload_image_info)"), "{t19}");
        l.verify(&bc);
    }
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn zero_images_give_llvm14s_module_without_images() {
    let l = llvm();
    let tmp = tempfile::tempdir().unwrap();
    // LLVM 14 refuses zero inputs; derive what its module builder gives for
    // none from its one-image module.
    let one = l.compare(tmp.path(), "x86_64-pc-linux-gnu", &[dir().join("inputs/img1.bin")]);
    let mut want = String::new();
    for line in one.lines() {
        if line.starts_with("@.omp_offloading.device_image =") {
            continue;
        } else if line.starts_with("@.omp_offloading.device_images =") {
            want += "@.omp_offloading.device_images = internal unnamed_addr constant [0 x %__tgt_device_image] zeroinitializer";
        } else if line.starts_with("@.omp_offloading.descriptor =") {
            want += &line.replace("i32 1,", "i32 0,").replace("[1 x %__tgt_device_image]", "[0 x %__tgt_device_image]");
        } else {
            want += line;
        }
        want.push('\n');
    }
    let bc = tmp.path().join("zero.bc");
    l.wrap(Path::new(ours()), "x86_64-pc-linux-gnu", &[], &[], &bc);
    assert_eq!(l.dis(&l.dis14, &bc), want);
    assert_eq!(want, expected("zero"));
    l.verify(&bc);
}

/// `llvm-readelf -S` section lines by name: (type, size).
fn sections(readelf: &Path, obj: &Path) -> Vec<(String, String, u64)> {
    let out = ok(common::run(Command::new(readelf).args(["-S", "-W"]).arg(obj)), "llvm-readelf -S");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('[')?.split_once(']')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            let size = u64::from_str_radix(f.get(4)?, 16).ok()?;
            Some((f[0].to_string(), f[1].to_string(), size))
        })
        .collect()
}

fn undefined_symbols(readelf: &Path, obj: &Path) -> Vec<String> {
    let out = ok(common::run(Command::new(readelf).args(["-s", "-W"]).arg(obj)), "llvm-readelf -s");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(6) == Some("UND"))
        .filter_map(|l| l.split_whitespace().nth(7).map(str::to_string))
        .collect()
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn clang14_compiles_ours_into_the_registration_object() {
    let l = llvm();
    let (clang, readelf, objcopy) =
        (common::llvm_tool(14, "clang"), common::llvm_tool(14, "llvm-readelf"), common::llvm_tool(14, "llvm-objcopy"));
    let tmp = tempfile::tempdir().unwrap();
    let inp = |n: &str| dir().join("inputs").join(n);
    let bc = tmp.path().join("w.bc");
    let obj = tmp.path().join("w.o");
    l.wrap(Path::new(ours()), "x86_64-pc-linux-gnu", &[inp("img1.bin"), inp("img2.bin")], &[], &bc);
    ok(common::run(Command::new(&clang).arg("-c").arg(&bc).arg("-o").arg(&obj)), "clang -c");
    let secs = sections(&readelf, &obj);
    let find = |n: &str| secs.iter().find(|s| s.0 == n).unwrap_or_else(|| panic!("no section {n} in {secs:?}"));
    assert_eq!(find(".init_array.1").2, 8);
    assert_eq!(find(".fini_array.1").2, 8);
    assert!(find(".text.startup").2 > 0);
    assert_eq!(find("omp_offloading_entries").2, 0);
    let mut und = undefined_symbols(&readelf, &obj);
    und.sort();
    assert_eq!(
        und,
        [
            "__start_omp_offloading_entries",
            "__stop_omp_offloading_entries",
            "__tgt_register_lib",
            "__tgt_unregister_lib"
        ]
    );

    // The extension: the target IDs lie in .offload_arch_list, in order.
    l.wrap(
        Path::new(ours()),
        "x86_64-pc-linux-gnu",
        &[inp("img1.bin"), inp("img2.bin")],
        &["--offload-arch=gfx906", "--offload-arch=gfx90a:xnack+"],
        &bc,
    );
    ok(common::run(Command::new(&clang).arg("-c").arg(&bc).arg("-o").arg(&obj)), "clang -c");
    let list = tmp.path().join("list");
    ok(
        common::run(
            Command::new(&objcopy).args(["-O", "binary", "--only-section=.offload_arch_list"]).arg(&obj).arg(&list),
        ),
        "llvm-objcopy",
    );
    assert_eq!(fs::read(&list).unwrap(), b"gfx906\0gfx90a:xnack+\0");
    assert!(undefined_symbols(&readelf, &obj).contains(&"__tgt_register_image_info".to_string()));
}

const STUB_RUNTIME: &str = r#"#include <stdio.h>
#include <stdint.h>
struct entry { void *addr; char *name; size_t size; int32_t flags, reserved; };
struct image { const unsigned char *start, *end; struct entry *eb, *ee; };
struct desc { int32_t n; struct image *images; struct entry *hb, *he; };
struct info { int32_t version, number, count; const char *arch, *opts; };
void __tgt_register_image_info(struct info *i) {
  printf("info v%d %d/%d %s %s\n", i->version, i->number, i->count, i->arch, i->opts ? "opts" : "null");
}
void __tgt_register_lib(struct desc *d) {
  printf("register %d", d->n);
  for (int i = 0; i < d->n; ++i)
    printf(" [%.*s]", (int)(d->images[i].end - d->images[i].start), d->images[i].start);
  printf(" entries %s\n", d->images[0].eb == d->hb && d->images[0].ee == d->he ? "shared" : "differ");
}
void __tgt_unregister_lib(struct desc *d) { printf("unregister %d\n", d->n); }
int main(void) { printf("main\n"); return 0; }
"#;

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn image_info_records_reach_the_runtime_before_the_library() {
    let l = llvm();
    let clang = common::llvm_tool(14, "clang");
    let tmp = tempfile::tempdir().unwrap();
    let inp = |n: &str| dir().join("inputs").join(n);
    let bc = tmp.path().join("w.bc");
    l.wrap(
        Path::new(ours()),
        "x86_64-pc-linux-gnu",
        &[inp("img1.bin"), inp("img2.bin")],
        &["--offload-arch=gfx906", "--offload-arch=gfx90a:xnack+"],
        &bc,
    );
    let stub = tmp.path().join("stub.c");
    fs::write(&stub, STUB_RUNTIME).unwrap();
    let exe = tmp.path().join("prog");
    ok(common::run(Command::new(&clang).arg(&stub).arg(&bc).arg("-o").arg(&exe)), "clang link");
    let out = ok(common::run(&mut Command::new(&exe)), "prog");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "info v1 0/2 gfx906 null\n\
         info v1 1/2 gfx90a:xnack+ null\n\
         register 2 [IMAGE1] [SECOND-IMAGE] entries shared\n\
         main\n\
         unregister 2\n"
    );
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14, has_omp14)),
    ignore = "needs LLVM 19, LLVM 14 and LLVM 14's libomptarget: run scripts/install-reference-llvm.sh"
)]
fn a_module_without_images_registers_with_libomptarget14() {
    let l = llvm();
    let clang = common::llvm_tool(14, "clang");
    let lib = common::omp14_lib();
    let tmp = tempfile::tempdir().unwrap();
    let bc = tmp.path().join("w.bc");
    l.wrap(Path::new(ours()), "x86_64-pc-linux-gnu", &[], &[], &bc);
    let src = tmp.path().join("host.c");
    fs::write(&src, "#include <stdio.h>\nint main(void) { puts(\"host\"); return 0; }\n").unwrap();
    let exe = tmp.path().join("prog");
    ok(
        common::run(
            Command::new(&clang)
                .arg("-fopenmp")
                .arg(&src)
                .arg(&bc)
                .arg("-o")
                .arg(&exe)
                .arg(format!("-L{}", lib.display()))
                .arg(format!("-Wl,-rpath,{}", lib.display()))
                .arg("-lomptarget"),
        ),
        "clang link",
    );
    let out = ok(common::run(Command::new(&exe).env("LIBOMPTARGET_INFO", "-1")), "prog");
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "host\n");
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn triples_are_accepted_like_llvm14() {
    let l = llvm();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.bc");
    let img = dir().join("inputs/img1.bin");
    let archs = [
        "",
        "x86_64",
        "X86_64",
        "amd64",
        "x86_64h",
        "i386",
        "i486",
        "i686",
        "i986",
        "i1086",
        "x86",
        "powerpc",
        "powerpce",
        "ppc",
        "ppc32",
        "ppcle",
        "ppc32le",
        "powerpc64",
        "ppu",
        "ppc64",
        "ppc64le",
        "powerpc64le",
        "xscale",
        "xscaleeb",
        "aarch64",
        "aarch64_be",
        "aarch64_32",
        "arm64",
        "arm64e",
        "arm64_32",
        "arm",
        "armeb",
        "thumb",
        "thumbeb",
        "armv7",
        "armv7a",
        "armv7-a",
        "armv7eb",
        "armebv7",
        "armv8.1-a",
        "armv99",
        "arm7",
        "armv",
        "armfoo",
        "armxscale",
        "armv7ebx",
        "thumbv2",
        "thumbv3m",
        "thumbv4t",
        "thumbv6m",
        "thumbebv7",
        "armv6m",
        "aarch64v8",
        "aarch64_bev8",
        "aarch64eb",
        "aarch64_32v8",
        "arm64ev8",
        "arm64_32x",
        "arc",
        "avr",
        "m68k",
        "msp430",
        "mips",
        "mipseb",
        "mipsallegrex",
        "mipsisa32r6",
        "mipsr6",
        "mipsel",
        "mipsallegrexel",
        "mips64",
        "mipsn32",
        "mips64r6",
        "mips64el",
        "mipsn32r6el",
        "mipsx",
        "r600",
        "amdgcn",
        "amdgcnx",
        "riscv32",
        "riscv64",
        "riscv128",
        "hexagon",
        "s390x",
        "systemz",
        "sparc",
        "sparcel",
        "sparcv9",
        "sparc64",
        "tce",
        "tcele",
        "xcore",
        "nvptx",
        "nvptx64",
        "nvptx32",
        "le32",
        "le64",
        "amdil",
        "amdil64",
        "hsail",
        "hsail64",
        "spir",
        "spir64",
        "spirv32",
        "spirv64",
        "spirv",
        "kalimba",
        "kalimba4",
        "lanai",
        "renderscript32",
        "renderscript64",
        "shave",
        "ve",
        "wasm32",
        "wasm64",
        "csky",
        "bpf",
        "bpfel",
        "bpfeb",
        "bpf_le",
        "bpf_be",
        "bpfx",
        "loongarch64",
        "dxil",
    ];
    let mut disagree = Vec::new();
    for arch in archs {
        let t = format!("{arch}-unknown-linux");
        let theirs = common::run(Command::new(&l.wrapper14).arg(format!("-target={t}")).arg("-o").arg(&out).arg(&img));
        if triple::is_known(&t) != theirs.status.success() {
            disagree.push(t);
            continue;
        }
        let r = run_ours(&[&format!("-target={t}"), "-o", path_str(&out), path_str(&img)]);
        assert_eq!(r.status.success(), theirs.status.success(), "'{t}'");
        if !theirs.status.success() {
            let norm = |o: &Output, argv0: &str| String::from_utf8_lossy(&o.stderr).replace(argv0, "TOOL");
            assert_eq!(norm(&r, ours()), norm(&theirs, path_str(&l.wrapper14)));
        }
    }
    assert!(disagree.is_empty(), "LLVM 14 and we disagree on {disagree:?}");
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn command_line_errors_match_llvm14() {
    let l = llvm();
    let tmp = tempfile::tempdir().unwrap();
    let img = dir().join("inputs/img1.bin");
    let img = path_str(&img);
    let out = tmp.path().join("out.bc");
    let o = path_str(&out);
    let d = path_str(tmp.path());
    let cases: Vec<Vec<&str>> = vec![
        vec![img],
        vec!["-o", o, img],
        vec!["-target=x86_64", img],
        vec!["--target", "x86_64", "-o", o, "--foo", img],
        vec!["-targt=x86_64", "-o", o, img],
        vec!["-target=bogus-triple", "-o", o, img],
        vec!["-target=x86_64", "-o", o, img, "/nonexistent/in.bin"],
        vec!["-target=x86_64", "-o", o, d],
        vec!["-target=x86_64", "-o", "/nonexistent/dir/out.bc", img],
        vec!["-target=x86_64", "-o", d, img],
        vec!["-target", "x86_64", img, "-o"],
    ];
    for args in cases {
        let theirs = common::run(Command::new(&l.wrapper14).args(&args));
        let r = run_ours(&args);
        let norm = |o: &Output, argv0: &str| String::from_utf8_lossy(&o.stderr).replace(argv0, "TOOL");
        assert_eq!(r.status.code(), theirs.status.code(), "{args:?}");
        assert_eq!(norm(&r, ours()), norm(&theirs, path_str(&l.wrapper14)), "{args:?}");
        assert!(!out.exists(), "{args:?} left an output");
    }
    // Deliberate difference: no input is fine for us (a module without
    // images), an error for LLVM 14.
    let theirs = common::run(Command::new(&l.wrapper14).args(["-target=x86_64", "-o", o]));
    assert_eq!(theirs.status.code(), Some(1));
    assert!(run_ours(&["-target=x86_64", "-o", o]).status.success());
}

/// A module using more of the IR model than the wrapper does.
fn general_module() -> ir::Module<'static> {
    use ir::{Block, CastOp, Function, GlobalVar, Inst, Linkage, UnnamedAddr, Visibility};
    let mut m = ir::Module::new("general.c", "x86_64-unknown-linux-gnu");
    let i1 = m.int_type(1);
    let i8 = m.int_type(8);
    let i16 = m.int_type(16);
    let i32 = m.int_type(32);
    let i64 = m.int_type(64);
    let opaque = m.named_struct_type("opaque_t", None, false);
    let node = m.named_struct_type("node", None, false);
    let node_p = m.ptr_type(node);
    m.set_struct_body(node, &[i32, node_p], false).unwrap();
    let packed = m.named_struct_type("packed", Some(&[i8, i1, i16]), true);
    let ext = m.add_global(GlobalVar::new("ext", opaque));
    let ext = m.global_addr(ext).unwrap();
    let five = m.int(i32, 5);
    let null_node = m.null(node_p);
    let init = m.aggregate(node, &[five, null_node]);
    let head =
        m.add_global(GlobalVar { init: Some(init), align: Some(16), dso_local: true, ..GlobalVar::new("head", node) });
    let head = m.global_addr(head).unwrap();
    let zero = m.int(i64, 0);
    let one = m.int(i32, 1);
    let field = m.gep(false, node, head, &[zero, one]).unwrap();
    let fty = m.const_type(field).unwrap();
    m.add_global(GlobalVar {
        constant: true,
        init: Some(field),
        linkage: Linkage::Private,
        ..GlobalVar::new("next field", fty)
    });
    let i8p = m.ptr_type(i8);
    let cast = m.cast(CastOp::BitCast, ext, i8p);
    m.add_global(GlobalVar { init: Some(cast), linkage: Linkage::WeakAny, ..GlobalVar::new("ext_bytes", i8p) });
    let t = m.int(i1, 1);
    let minus = m.int(i16, 0xffff);
    let z8 = m.int(i8, 0);
    let p = m.aggregate(packed, &[z8, t, minus]);
    m.add_global(GlobalVar { init: Some(p), addrspace: 3, ..GlobalVar::new("p", packed) });
    let words = m.array_type(i16, 3);
    let w = m.aggregate(words, &[minus, minus, minus]);
    m.add_global(GlobalVar { init: Some(w), linkage: Linkage::Internal, ..GlobalVar::new("9words", words) });
    m.add_global(GlobalVar {
        linkage: Linkage::ExternWeak,
        visibility: Visibility::Hidden,
        ..GlobalVar::new("weak", i32)
    });
    let get_ty = m.function_type(i64, &[node_p, i32], false);
    let get = m.add_function(Function::new("get", get_ty));
    let get = m.function_addr(get).unwrap();
    let neg = m.int(i64, (-42i64) as u64);
    let main_ty = m.function_type(i64, &[i32], false);
    m.add_function(Function {
        visibility: Visibility::Protected,
        unnamed_addr: UnnamedAddr::Local,
        body: Some(Block {
            name: "start".into(),
            insts: vec![Inst::Call { fnty: get_ty, callee: get, args: vec![head, five] }, Inst::Ret(Some(neg))],
        }),
        ..Function::new("main", main_ty)
    });
    let void = m.void_type();
    let vty = m.function_type(void, &[i32], true);
    let printf = m.add_function(Function::new("printf", vty));
    let printf = m.function_addr(printf).unwrap();
    let v = m.function_type(void, &[], false);
    m.add_function(Function {
        linkage: Linkage::Internal,
        align: Some(16),
        body: Some(Block {
            name: String::new(),
            insts: vec![Inst::Call { fnty: vty, callee: printf, args: vec![five, zero, t] }, Inst::Ret(None)],
        }),
        ..Function::new("1st", v)
    });
    m
}

#[test]
#[cfg_attr(
    not(all(has_llvm19, has_llvm14)),
    ignore = "needs LLVM 19 and LLVM 14: run scripts/install-reference-llvm.sh"
)]
fn the_bitcode_writer_is_general() {
    let l = llvm();
    let tmp = tempfile::tempdir().unwrap();
    let m = general_module();
    let bc = tmp.path().join("general.bc");
    fs::write(&bc, bitcode::to_vec(&m).unwrap()).unwrap();
    l.verify(&bc);
    assert_eq!(l.dis(&l.dis14, &bc), text::to_text(&m, "<stdin>"));
    let t19 = l.dis(&l.dis19, &bc);
    assert!(t19.contains("%1 = call i64 @get(ptr @head, i32 5)"), "{t19}");
}
