//! clang-offload-wrapper without LLVM installed: our module, printed by our
//! `.ll` printer, equals what LLVM 14's `llvm-dis` prints for LLVM 14's
//! wrapper output (fixtures), and the command line behaves like LLVM 14's.

use crate::wrapper_common;

use offload_format::wrapper::{bitcode, module, text};
use std::fs;
use wrapper_common::*;

fn module_text(triple: &str, images: &[Vec<u8>], archs: &[&str]) -> String {
    let input = module::WrapperInput {
        triple,
        images: images.iter().map(Vec::as_slice).collect(),
        offload_archs: archs.to_vec(),
    };
    let m = module::build(&input).expect("build");
    text::to_text(&m, "<stdin>")
}

#[test]
fn printed_module_equals_llvm14_for_every_fixture() {
    let cases = cases();
    assert!(cases.len() >= 20, "expected at least 20 fixture cases");
    for c in cases {
        let images: Vec<Vec<u8>> = c.images.iter().map(|p| fs::read(p).unwrap()).collect();
        let ours = module_text(&c.triple, &images, &[]);
        assert_eq!(ours, expected(&c.name), "case {}", c.name);
    }
}

#[test]
fn extension_and_zero_image_fixtures() {
    let read = |n: &str| fs::read(dir().join("inputs").join(n)).unwrap();
    let two = module_text("x86_64-pc-linux-gnu", &[read("img1.bin"), read("img2.bin")], &["gfx906", "gfx90a:xnack+"]);
    assert_eq!(two, expected("offload-arch-two"));
    let three = module_text(
        "nvptx64-nvidia-cuda",
        &[read("img1.bin"), read("empty.bin"), read("img2.bin")],
        &["sm_70", "sm_80", "sm_90"],
    );
    assert_eq!(three, expected("offload-arch-nvptx64"));
    assert_eq!(module_text("x86_64-pc-linux-gnu", &[], &[]), expected("zero"));
}

#[test]
fn extension_records_follow_the_seed() {
    let t = expected("offload-arch-two");
    for line in [
        "%__tgt_image_info = type { i32, i32, i32, i8*, i8* }",
        "@__offload_arch = internal unnamed_addr constant [7 x i8] c\"gfx906\\00\", section \".offload_arch_list\"",
        "@__offload_arch.1 = internal unnamed_addr constant [14 x i8] c\"gfx90a:xnack+\\00\", section \".offload_arch_list\"",
        "@.offload_image_info = internal unnamed_addr constant %__tgt_image_info { i32 1, i32 0, i32 2, i8* getelementptr inbounds ([7 x i8], [7 x i8]* @__offload_arch, i64 0, i64 0), i8* null }",
        "@.offload_image_info.1 = internal unnamed_addr constant %__tgt_image_info { i32 1, i32 1, i32 2, i8* getelementptr inbounds ([14 x i8], [14 x i8]* @__offload_arch.1, i64 0, i64 0), i8* null }",
        "declare void @__tgt_register_image_info(%__tgt_image_info*)",
    ] {
        assert!(t.lines().any(|l| l == line), "missing: {line}");
    }
    let calls: Vec<&str> = t.lines().filter(|l| l.starts_with("  call ")).collect();
    assert_eq!(
        calls[..3],
        [
            "  call void @__tgt_register_image_info(%__tgt_image_info* @.offload_image_info)",
            "  call void @__tgt_register_image_info(%__tgt_image_info* @.offload_image_info.1)",
            "  call void @__tgt_register_lib(%__tgt_bin_desc* @.omp_offloading.descriptor)",
        ]
    );
}

#[test]
fn binary_writes_text_with_dash_s_and_the_library_bitcode_otherwise() {
    let tmp = tempfile::tempdir().unwrap();
    for c in cases() {
        let mut args = vec![format!("-target={}", c.triple)];
        args.extend(c.images.iter().map(|p| path_str(p).to_string()));
        let ll = tmp.path().join(format!("{}.ll", c.name));
        let bc = tmp.path().join(format!("{}.bc", c.name));
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["-S", "-o", path_str(&ll)]);
        let out = run_ours(&a);
        assert!(out.status.success(), "{}: {}", c.name, String::from_utf8_lossy(&out.stderr));
        let got = fs::read_to_string(&ll).unwrap();
        assert_eq!(got.lines().next(), Some("; ModuleID = 'offload.wrapper.object'"));
        assert_eq!(body(&got), body(&expected(&c.name)), "case {}", c.name);

        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["-o", path_str(&bc)]);
        assert!(run_ours(&a).status.success());
        let images: Vec<Vec<u8>> = c.images.iter().map(|p| fs::read(p).unwrap()).collect();
        let input = module::WrapperInput {
            triple: &c.triple,
            images: images.iter().map(Vec::as_slice).collect(),
            offload_archs: vec![],
        };
        let want = bitcode::to_vec(&module::build(&input).unwrap()).unwrap();
        let got = fs::read(&bc).unwrap();
        assert_eq!(&got[..4], b"BC\xC0\xDE");
        assert_eq!(got, want, "case {}", c.name);
    }
}

#[test]
fn output_is_deterministic_and_images_appear_verbatim() {
    let tmp = tempfile::tempdir().unwrap();
    let img: Vec<u8> = (0..5000u32).map(|i| (i * 31 % 251) as u8).collect();
    let p = tmp.path().join("img");
    fs::write(&p, &img).unwrap();
    let a = tmp.path().join("a.bc");
    let b = tmp.path().join("b.bc");
    for o in [&a, &b] {
        assert!(run_ours(&["-target", "x86_64-pc-linux-gnu", "-o", path_str(o), path_str(&p)]).status.success());
    }
    let (a, b) = (fs::read(a).unwrap(), fs::read(b).unwrap());
    assert_eq!(a, b);
    // The image is a blob: 32-bit aligned and unchanged in the file.
    let at = a.windows(img.len()).position(|w| w == img).expect("image bytes in the bitcode");
    assert_eq!(at % 4, 0);
}

#[test]
fn stdin_input_and_stdout_output() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(ours())
        .args(["-target=x86_64-pc-linux-gnu", "-S", "-o", "-", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"IMAGE1").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(body(&String::from_utf8(out.stdout).unwrap()), body(&expected("one")));
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn errors_are_llvm_14_messages_and_leave_no_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.bc");
    let o = path_str(&out);
    let img = dir().join("inputs/img1.bin");
    let img = path_str(&img);
    let argv0 = ours();

    let r = run_ours(&["-target=bogus-triple", "-o", o, img]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(stderr(&r), format!("{argv0}: error: 'bogus-triple': unsupported target triple\n"));

    let r = run_ours(&["-target=x86_64", "-o", o, img, "/nonexistent/image"]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(stderr(&r), format!("{argv0}: error: '/nonexistent/image': No such file or directory\n"));

    let d = path_str(tmp.path());
    let r = run_ours(&["-target=x86_64", "-o", o, d]);
    assert_eq!(stderr(&r), format!("{argv0}: error: '{d}': Is a directory\n"));
    assert!(!out.exists());

    let r = run_ours(&["-target=x86_64", "-o", "/nonexistent/dir/out.bc", img]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(stderr(&r), format!("{argv0}: error: '/nonexistent/dir/out.bc': No such file or directory\n"));

    let r = run_ours(&["-target=x86_64", "-o", o, "--offload-arch=gfx906", img, img]);
    assert_eq!(r.status.code(), Some(1));
    assert!(stderr(&r).contains("1 --offload-arch values for 2 images"), "{}", stderr(&r));

    // A failed run leaves an existing output untouched and no temporaries.
    fs::write(&out, b"old").unwrap();
    let r = run_ours(&["-target=x86_64", "-o", o, img, "/nonexistent/image"]);
    assert_eq!(r.status.code(), Some(1));
    assert_eq!(fs::read(&out).unwrap(), b"old");
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[test]
fn command_line_messages() {
    let argv0 = ours();
    let img = dir().join("inputs/img1.bin");
    let img = path_str(&img);
    let r = run_ours(&[img]);
    assert_eq!(
        stderr(&r),
        "clang-offload-wrapper: for the -o option: must be specified at least once!\n\
         clang-offload-wrapper: for the --target option: must be specified at least once!\n"
    );
    let r = run_ours(&["-o", "x.bc", img]);
    assert_eq!(stderr(&r), "clang-offload-wrapper: for the --target option: must be specified at least once!\n");
    let r = run_ours(&["-targt=x86_64", "-o", "x.bc", img]);
    assert_eq!(
        stderr(&r),
        format!(
            "clang-offload-wrapper: Unknown command line argument '-targt=x86_64'.  Try: '{argv0} --help'\n\
             clang-offload-wrapper: Did you mean '--target=x86_64'?\n\
             clang-offload-wrapper: for the --target option: must be specified at least once!\n"
        )
    );
    let r = run_ours(&["--help"]);
    let help = String::from_utf8(r.stdout).unwrap();
    assert!(help.starts_with(
        "OVERVIEW: A tool to create a wrapper bitcode for offload target binaries. Takes offload\n\
         target binaries as input and produces bitcode file containing target binaries packaged\n\
         as data and initialization code which registers target binaries in offload runtime.\n\n\
         USAGE: clang-offload-wrapper [options] <input files>\n"
    ));
    assert!(help.contains("  -o=<filename>") && help.contains("  --target=<triple>"));
    assert!(help.contains("  --offload-arch=<target-id>"));
    assert!(!help.contains("save-temps"));
}

#[test]
fn zero_images_make_a_module_that_registers_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let ll = tmp.path().join("z.ll");
    let r = run_ours(&["-target=x86_64-pc-linux-gnu", "-S", "-o", path_str(&ll)]);
    assert!(r.status.success(), "{}", stderr(&r));
    let t = fs::read_to_string(&ll).unwrap();
    assert_eq!(body(&t), body(&expected("zero")));
    assert!(t.contains("constant [0 x %__tgt_device_image] zeroinitializer"));
    assert!(t.contains("%__tgt_bin_desc { i32 0,"));
}
