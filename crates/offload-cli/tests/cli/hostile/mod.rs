//! The hostile-input corpus: damaged versions of small valid files of every
//! format, run through every mode of every binary (the bundler's list,
//! unbundle and object bundling as LLVM 22 and listing as LLVM 19, the
//! packager's extraction, `llvm-offload-binary`, both wrappers, and the
//! `offload` inspector's list, verify, extract, select, kernels, size, diff
//! and check, and `offload prune`: `hostile/prune.rs`; kpack archives and
//! split libraries through `split --kpack` and `join`: `hostile/kpack.rs`).
//! LLVM 22's formats are bases too: OffloadBinary versions 2 and 3 (zstd
//! and zlib bodies), CCOB version 3, PE DLLs with `.nv_fatb` and
//! `.hip_fat`, COFF objects. Each run must end in
//! success (exit 0) or a clear error (exit 1 with `error:` on stderr;
//! `diff` and `check` answer "no" with exit 1, and an unreadable input is
//! their exit 2 with `error:`): never
//! a panic (exit 101), an abort or another signal, a hang, or an allocation
//! the input does not justify (the child runs under an address-space
//! limit). A failed run must leave every pre-existing output byte for byte
//! as it was and create no file; no run may leave temporary files behind.
//!
//! Mutations: every truncation of the small files (bundles, compressed
//! bundles, packages; of the larger objects and archives every truncation
//! in their first and last 128 bytes and every 16th elsewhere), each 64-bit
//! field of the first 128 bytes set to 0, all-ones, 2^40 and the file size
//! plus one, each 32-bit field between them to 0 and all-ones, random byte
//! damage with a fixed seed, and crafted lies:
//! entry counts of 2^40, overlapping and out-of-range payloads, CCOB blobs
//! with lying sizes and hashes and a decompression bomb, OffloadBinaries
//! with bad offsets and versions, nested and unterminated text markers.
//!
//! `OFFLOAD_HOSTILE_SCALE=n` multiplies the random mutations and makes every
//! truncation of every file run (for longer campaigns than CI's);
//! `OFFLOAD_HOSTILE_FILTER=text` runs only the files whose description
//! contains `text`.

// Tests set resource limits and signals through libc.
#![allow(unsafe_code)]

use crate::common;
use crate::package_support;
mod kpack;
mod prune;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BUNDLER: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");
const PACKAGER: &str = env!("CARGO_BIN_EXE_clang-offload-packager");
const WRAPPER: &str = env!("CARGO_BIN_EXE_clang-offload-wrapper");
const OFFLOAD: &str = env!("CARGO_BIN_EXE_offload");
const BINARY: &str = env!("CARGO_BIN_EXE_llvm-offload-binary");
const WRAPPER22: &str = env!("CARGO_BIN_EXE_llvm-offload-wrapper");

/// What a pre-existing output holds before each run.
const SENTINEL: &[u8] = b"pre-existing output: a failed run must leave this file as it is\n";

/// A run longer than this is a hang (debug binaries on a loaded 2-core
/// machine take milliseconds per case; the 200,000-entry bundle takes
/// seconds, and far longer when other builds share the cores).
const TIMEOUT: Duration = Duration::from_secs(90);

/// Address space for a child: a trivial run of a debug binary needs about
/// 16 MiB (measured with prlimit: 8 MiB aborts, 16 MiB runs); the limit
/// leaves ample room for the work a file justifies and none for an
/// allocation sized by a lying header.
fn address_space_limit(input_len: u64) -> u64 {
    (512 << 20) + 8 * input_len
}

/// Output file size limit, so that a lying alignment or size cannot fill
/// the disk; a write past it fails with EFBIG (SIGXFSZ is ignored).
fn file_size_limit(input_len: u64) -> u64 {
    (256 << 20) + 16 * input_len
}

const HOST: &str = "host-x86_64-unknown-linux-gnu-";
const G906: &str = "hip-amdgcn-amd-amdhsa--gfx906";
const G908: &str = "hip-amdgcn-amd-amdhsa--gfx908";
const G90A: &str = "hip-amdgcn-amd-amdhsa--gfx90a:xnack+";

/// One way of running a binary on the input file `in`.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// `clang-offload-bundler -list -type=T -input=in`.
    List(&'static str),
    /// `clang-offload-bundler -unbundle -type=T -targets=.. -output=o0 ..`.
    Unbundle(&'static str, &'static [&'static str]),
    /// `-unbundle -type=a` with `-check-input-archive`.
    UnbundleArchiveChecked(&'static [&'static str]),
    /// `-type=o` bundling with `in` as the host object.
    BundleObject,
    /// `clang-offload-packager in --image=file=x0,kind=openmp --image=file=x1,triple=amdgcn-amd-amdhsa`.
    Extract,
    /// `clang-offload-packager in --image=kind=openmp` (names from the input).
    ExtractDerived,
    /// `clang-offload-packager in --image=file=x.a --archive`.
    ExtractArchive,
    /// `clang-offload-wrapper -target=x86_64-pc-linux-gnu -o out.bc in`.
    Wrap,
    /// `offload list in` (the inspector, issue 7).
    InspectList,
    /// `offload verify in` (decompresses and checks everything).
    InspectVerify,
    /// `offload extract --index 0 -o x0 in`.
    InspectExtract,
    /// `offload select --gpu gfx906 in`.
    InspectSelect,
    /// `offload select --gpu sm_86 in` (the CUDA driver's rules).
    InspectSelectCuda,
    /// `offload kernels in` (metadata, .nv.info and PTX readers).
    InspectKernels,
    /// `offload prune --keep gfx90a --mode M in -o out`.
    Prune(&'static str),
    /// `offload split --kpack in -o out` (`hostile/kpack.rs`).
    SplitKpack,
    /// `offload size in`.
    InspectSize,
    /// `offload diff in orig`, `orig` being the undamaged file (exit 1:
    /// they differ; exit 2 with `error:`: an input could not be read).
    InspectDiff,
    /// `offload check --gpu gfx90a --no-deps in` (exit 1: a problem found).
    InspectCheck,
    /// `offload join --archives arch in -o out` (`arch`: AMD's archives).
    Join,
    /// `llvm-offload-binary in --image=kind=hip,file=x0 --image=kind=openmp`
    /// (LLVM 22's packager: versions 2 and 3 of OffloadBinary).
    ExtractLlvm22,
    /// `llvm-offload-wrapper --kind=hip -o out.bc in`.
    WrapLlvm22,
    /// `clang-offload-bundler -list -type=T -input=in` following LLVM 19
    /// (`OFFLOAD_LLVM_VERSION=19`; every other mode runs as LLVM 22).
    ListLlvm19(&'static str),
}

/// The inspector's modes and how often each runs on a file's damages (every
/// n-th: the inspector reads every format, so a sample keeps CI short).
const INSPECTOR_MODES: [(Mode, usize); 8] = [
    (Mode::InspectList, 4),
    (Mode::InspectVerify, 6),
    (Mode::InspectExtract, 8),
    (Mode::InspectSelect, 12),
    (Mode::InspectKernels, 6),
    (Mode::InspectSize, 8),
    (Mode::InspectDiff, 12),
    (Mode::InspectCheck, 12),
];

impl Mode {
    /// The LLVM release the drop-ins follow (`OFFLOAD_LLVM_VERSION`).
    fn release(self) -> &'static str {
        if matches!(self, Mode::ListLlvm19(_)) { "19" } else { "22" }
    }

    /// Whether exit 1 is an answer ("they differ", "a problem found") that
    /// need not come with `error:`, and exit 2 with `error:` an unreadable
    /// input rather than a usage error.
    fn answers(self) -> bool {
        matches!(self, Mode::InspectDiff | Mode::InspectCheck)
    }

    /// The binary, its arguments, and the outputs that exist before the run.
    fn command(self) -> (&'static str, Vec<String>, Vec<String>) {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        match self {
            Mode::List(t) => (BUNDLER, s(&["-list", &format!("-type={t}"), "-input=in"]), vec![]),
            Mode::Unbundle(t, targets) => {
                let outs: Vec<String> = (0..targets.len()).map(|i| format!("o{i}")).collect();
                let mut args = s(&["-unbundle", &format!("-type={t}"), "-input=in"]);
                args.push(format!("-targets={}", targets.join(",")));
                args.extend(outs.iter().map(|o| format!("-output={o}")));
                (BUNDLER, args, outs)
            }
            Mode::UnbundleArchiveChecked(targets) => {
                let outs: Vec<String> = (0..targets.len()).map(|i| format!("o{i}")).collect();
                let mut args =
                    s(&["-unbundle", "-type=a", "-check-input-archive", "-allow-missing-bundles", "-input=in"]);
                args.push(format!("-targets={}", targets.join(",")));
                args.extend(outs.iter().map(|o| format!("-output={o}")));
                (BUNDLER, args, outs)
            }
            Mode::BundleObject => (
                BUNDLER,
                s(&[
                    "-type=o",
                    &format!("-targets=host-x86_64-unknown-linux-gnu,{G906}"),
                    "-input=in",
                    "-input=dev",
                    "-output=fat.o",
                ]),
                s(&["fat.o"]),
            ),
            Mode::Extract => (
                PACKAGER,
                s(&["in", "--image=file=x0,kind=openmp", "--image=file=x1,triple=amdgcn-amd-amdhsa"]),
                s(&["x0", "x1"]),
            ),
            Mode::ExtractDerived => (PACKAGER, s(&["in", "--image=kind=openmp", "--image=kind=hip"]), vec![]),
            Mode::ExtractArchive => (PACKAGER, s(&["in", "--image=file=x.a", "--archive"]), s(&["x.a"])),
            Mode::Wrap => (WRAPPER, s(&["-target=x86_64-pc-linux-gnu", "-o", "out.bc", "in"]), s(&["out.bc"])),
            Mode::InspectList => (OFFLOAD, s(&["list", "in"]), vec![]),
            Mode::InspectVerify => (OFFLOAD, s(&["verify", "in"]), vec![]),
            Mode::InspectExtract => (OFFLOAD, s(&["extract", "--index", "0", "-o", "x0", "in"]), s(&["x0"])),
            Mode::InspectSelect => (OFFLOAD, s(&["select", "--gpu", "gfx906", "in"]), vec![]),
            Mode::InspectSelectCuda => (OFFLOAD, s(&["select", "--gpu", "sm_86", "in"]), vec![]),
            Mode::InspectKernels => (OFFLOAD, s(&["kernels", "in"]), vec![]),
            Mode::SplitKpack => (OFFLOAD, s(&["split", "--kpack", "in", "-o", "out"]), vec![]),
            Mode::InspectSize => (OFFLOAD, s(&["size", "in"]), vec![]),
            Mode::InspectDiff => (OFFLOAD, s(&["diff", "in", "orig"]), vec![]),
            Mode::InspectCheck => (OFFLOAD, s(&["check", "--gpu", "gfx90a", "--no-deps", "in"]), vec![]),
            Mode::Join => (OFFLOAD, s(&["join", "--archives", "arch", "in", "-o", "out"]), s(&["out"])),
            Mode::ExtractLlvm22 => (BINARY, s(&["in", "--image=kind=hip,file=x0", "--image=kind=openmp"]), s(&["x0"])),
            Mode::WrapLlvm22 => (WRAPPER22, s(&["--kind=hip", "-o", "out.bc", "in"]), s(&["out.bc"])),
            Mode::ListLlvm19(t) => (BUNDLER, s(&["-list", &format!("-type={t}"), "-input=in"]), vec![]),
            Mode::Prune(mode) => {
                (OFFLOAD, s(&["prune", "--keep", prune::KEEP, "--mode", mode, "in", "-o", "out"]), s(&["out"]))
            }
        }
    }
}

/// A small valid file and the modes to run its mutations through.
struct Base {
    name: &'static str,
    data: Vec<u8>,
    modes: Vec<Mode>,
    /// The inspector runs on every `thin`-th of its usual sample of the
    /// damages (packages: their damages mostly end in the same few errors).
    thin: usize,
}

fn fixture(path: &str) -> Vec<u8> {
    fs::read(common::fixtures().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn bases() -> Vec<Base> {
    let bundle_targets: &'static [&'static str] = &[HOST, G906, G908];
    let b = |name: &'static str, path: &str, modes: Vec<Mode>| Base { name, data: fixture(path), modes, thin: 1 };
    vec![
        b(
            "binary bundle",
            "bundler/spec-3-1.out",
            vec![Mode::List("bc"), Mode::Unbundle("bc", bundle_targets), Mode::ListLlvm19("bc")],
        ),
        b("text bundle //", "bundler/text-i.out", vec![Mode::List("i"), Mode::Unbundle("i", &[HOST, G906, G90A])]),
        b("text bundle #", "bundler/text-d.out", vec![Mode::List("d"), Mode::Unbundle("d", &[HOST, G906])]),
        b(
            "text bundle ;",
            "bundler/text-ll.out",
            vec![Mode::List("ll"), Mode::Unbundle("ll", &[HOST, "openmp-amdgcn-amd-amdhsa--gfx1030"])],
        ),
        b("text bundle # (s)", "bundler/text-s.out", vec![Mode::List("s"), Mode::Unbundle("s", &[G906, G90A])]),
        b("CCOB v2 zstd", "bundler/ccob-l3.out", vec![Mode::List("bc"), Mode::Unbundle("bc", &[G906, G90A, HOST])]),
        b("CCOB v1 zlib", "bundler/ccob-v1-zlib.ccob", vec![Mode::List("bc"), Mode::Unbundle("bc", bundle_targets)]),
        b(
            "CCOB v3 zstd",
            "bundler/ccob-v3-zstd.ccob",
            vec![Mode::List("bc"), Mode::Unbundle("bc", bundle_targets), Mode::ListLlvm19("bc")],
        ),
        b("CCOB v2 text", "bundler/ccob-l9-text.out", vec![Mode::List("hipi"), Mode::Unbundle("hipi", &[HOST, G906])]),
        b(
            "ELF32 fat object",
            "objects/fat-i386.o",
            vec![Mode::List("o"), Mode::Unbundle("o", &[HOST, G906, G908]), Mode::BundleObject],
        ),
        b(
            "COFF fat object",
            "objects/fat-coff.o",
            vec![Mode::List("o"), Mode::Unbundle("o", &[HOST, G906]), Mode::BundleObject],
        ),
        b(
            "device archive",
            "objects/lib-gfx908.a",
            vec![Mode::Unbundle("a", &[G908, HOST]), Mode::UnbundleArchiveChecked(&[G906, G908])],
        ),
        b(
            "OffloadBinary",
            "packager/inputs/pkg.out",
            vec![Mode::Extract, Mode::ExtractDerived, Mode::ExtractArchive, Mode::ExtractLlvm22],
        ),
        b("OffloadBinary (small)", "packager/inputs/small.out", vec![Mode::Extract, Mode::ExtractDerived]),
        b("ELF with .llvm.offloading", "packager/inputs/host.o", vec![Mode::Extract, Mode::ExtractArchive]),
        b("bitcode with embedded objects", "packager/inputs/host.bc", vec![Mode::Extract]),
        b("COFF with .llvm.offloading", "packager/inputs/host.obj", vec![Mode::Extract]),
        b("ar of packages", "packager/inputs/lib.a", vec![Mode::Extract, Mode::ExtractArchive]),
        b("CUDA fat binary (LZ4)", "cuda/kern_lz4.fatbin", vec![]),
        b("CUDA concatenated entry", "cuda/concat.fatbin", vec![Mode::InspectSelectCuda]),
        b("CUDA object", "cuda/obj_sm80.o", vec![]),
        b("PE DLL (CUDA, lld-link)", "pe/cuda_kernels.dll", vec![Mode::InspectSelectCuda]),
        b("PE EXE (delay-load imports)", "pe/app.exe", vec![]),
        Base { name: "PE DLL (HIP, .hip_fat)", data: fixture("pe/hip_kernels.dll"), modes: vec![], thin: 2 },
        b("COFF object (CUDA, .nv_fatb)", "pe/cuda.obj", vec![]),
        b("COFF object (HIP, .hip_fat)", "pe/hip.obj", vec![]),
        b(".lib of COFF objects (CUDA and HIP)", "pe/kernels.lib", vec![]),
        // Kernel metadata (`offload kernels`): the AMDGPU metadata note of
        // a code object and the `.nv.info` records of a cubin.
        b("AMDGPU code object (kernel metadata)", "objects/dev-gfx906.o", vec![]),
        b("CUDA cubin (.nv.info)", "cuda/kern.cubin", vec![]),
    ]
    .into_iter()
    .chain(llvm22_bases())
    .chain(package_bases())
    // The HIP host binaries `offload prune` reads, through the inspector
    // (pruning them has its own test below).
    .chain(prune::bases().into_iter().map(|(name, data)| Base { name, data, modes: vec![], thin: 8 }))
    .chain(kpack::bases().into_iter().map(|(name, data)| {
        let modes = if name.contains("split library") { vec![Mode::Join] } else { vec![] };
        Base { name, data, modes, thin: 4 }
    }))
    .collect()
}

/// LLVM 22's formats (docs/formats/offload-binary.md, the bundler's CCOB
/// version 3): OffloadBinary version 2 (several entries in one header, HIP
/// kind 4) and version 3 (the body compressed with zstd or zlib), LLVM 22's
/// own compressed bundle, package and HIP object, read by
/// `llvm-offload-binary`, the bundler and the inspector.
fn llvm22_bases() -> Vec<Base> {
    use offload_format::offload_binary::{Compression, Image, ImageKind, OffloadKind, write_v2, write_v3};
    let code = fixture("objects/dev-gfx906.o");
    let img = |arch: &'static [u8]| Image {
        image_kind: ImageKind::Object,
        offload_kind: OffloadKind::Hip,
        strings: vec![(&b"triple"[..], &b"amdgcn-amd-amdhsa"[..]), (&b"arch"[..], arch)],
        image: &code,
        ..Default::default()
    };
    let images = [img(b"gfx906"), img(b"gfx90a:xnack+"), img(b"gfx1100")];
    let extract = || vec![Mode::ExtractLlvm22, Mode::Extract];
    let llvm22 = |f: &str| {
        fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-format/tests/fixtures/llvm22").join(f))
            .unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let base = |name, data, modes| Base { name, data, modes, thin: 1 };
    let bundle22: &'static [&'static str] = &["host-x86_64-unknown-linux-gnu", "hip-amdgcn-amd-amdhsa--gfx90a"];
    vec![
        base("OffloadBinary v2 (3 HIP entries)", write_v2(&images).unwrap(), extract()),
        base("OffloadBinary v3 zstd", write_v3(&images, Some(Compression::Zstd(3))).unwrap(), extract()),
        base("OffloadBinary v3 zlib", write_v3(&images[..2], Some(Compression::Zlib(6))).unwrap(), extract()),
        base("OffloadBinary v3 uncompressed", write_v3(&images[..1], None).unwrap(), extract()),
        base("OffloadBinary v1 x4 (LLVM 22's llvm-offload-binary)", llvm22("pkg-all.out"), extract()),
        base("ELF with .llvm.offloading (clang 22 HIP)", llvm22("hip-rdc.o"), extract()),
        base(
            "CCOB v3 (LLVM 22's bundler)",
            llvm22("bundle-v3.ccob"),
            vec![Mode::List("o"), Mode::Unbundle("o", bundle22), Mode::ListLlvm19("o")],
        ),
    ]
}

/// Small packages of every kind `offload` opens (the inspector's modes
/// only), each holding a bundle and a compressed bundle.
fn package_bases() -> Vec<Base> {
    use package_support::*;
    let (bundle, ccob) = (fixture("bundler/align-16.out"), fixture("bundler/ccob-l3.out"));
    let files = [("./lib/a.bc", &bundle[..]), ("./lib/b.bc", &ccob[..])];
    let p = |name: &'static str, data: Vec<u8>| Base { name, data, modes: vec![], thin: 4 };
    vec![
        p("package: wheel", zip_of(&[("x/a.bc", &bundle, false), ("x/b.bc", &ccob, true)])),
        p("package: tar", tar_of(&files)),
        p("package: tar.gz", compress(Z::Gzip, &tar_of(&files))),
        p("package: deb", deb_of(&files)),
        p("package: conda", conda_of(&files)),
        // A win_amd64 wheel: a CUDA DLL and a `.lib` (the layout of
        // NVIDIA's Windows wheels, docs/guide).
        p(
            "package: win_amd64 wheel",
            zip_of(&[
                ("nvidia/bin/cuda_kernels.dll", &fixture("pe/cuda_kernels.dll"), true),
                ("nvidia/lib/kernels.lib", &fixture("pe/kernels.lib"), false),
            ]),
        ),
    ]
}

/// CUDA fat binaries whose headers lie (spec: docs/formats/cuda-fatbin.md §3-§6).
fn cuda_lies(v: &mut Vec<(&'static str, String, Vec<u8>, Vec<Mode>)>) {
    let modes = || vec![Mode::InspectSelectCuda];
    let lz4 = fixture("cuda/kern_lz4.fatbin");
    let put32 = |d: &mut [u8], at: usize, val: u32| d[at..at + 4].copy_from_slice(&val.to_le_bytes());
    for (what, at, val) in [
        ("fat size 2^63", 8usize, 1u64 << 63),
        ("payload size 2^64-1", 16 + 8, u64::MAX),
        ("uncompressed size 2^40 (LZ4 claim)", 16 + 0x38, 1 << 40),
        ("uncompressed size 0", 16 + 0x38, 0),
    ] {
        let mut d = lz4.clone();
        put64(&mut d, at, val);
        v.push(("CUDA fat binary", what.into(), d, modes()));
    }
    for (what, at, val) in [
        ("entry header size 0", 16 + 4, 0u32),
        ("entry header size 2^32-1", 16 + 4, u32::MAX),
        ("compressed size past the payload", 16 + 0x10, u32::MAX),
        ("identifier past the header", 16 + 0x20, 0xffff_fff0),
        ("options block past the header", 16 + 0x14, 0x7fff_ffff),
        ("kind 0x100 without a table", 16, 0x0101_0100),
    ] {
        let mut d = lz4.clone();
        put32(&mut d, at, val);
        v.push(("CUDA fat binary", what.into(), d, modes()));
    }
    // A header size past the end and no entries (found by fuzzing: it
    // sliced past the input).
    let mut d = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 0x00, 0x40];
    d.extend_from_slice(&0u64.to_le_bytes());
    v.push(("CUDA fat binary", "header size 0x4000, fat size 0".into(), d, modes()));
    // The concatenated entry is the second one of concat.fatbin.
    let concat = fixture("cuda/concat.fatbin");
    let first = 16 + u32::from_le_bytes(concat[20..24].try_into().unwrap()) as usize;
    let e = first + u64::from_le_bytes(concat[24..32].try_into().unwrap()) as usize;
    for (what, at, val) in [
        ("concat child count 2^32-1", e + 0x40, u32::MAX),
        ("concat child offset past the stream", e + 0x48 + 4, u32::MAX),
    ] {
        let mut d = concat.clone();
        put32(&mut d, at, val);
        v.push(("CUDA concatenated entry", what.into(), d, modes()));
    }
    let mut d = concat.clone();
    put64(&mut d, e + 0x48 + 8, u64::MAX);
    v.push(("CUDA concatenated entry", "concat child size 2^64-1".into(), d, modes()));
    // A zstd entry that inflates to 64 MiB where the header says 1 MiB.
    let bomb = zstd_bomb(64 << 20);
    let mut entry = vec![0u8; 64];
    entry[0..2].copy_from_slice(&2u16.to_le_bytes());
    put32(&mut entry, 4, 64);
    put64(&mut entry, 8, bomb.len().next_multiple_of(8) as u64);
    put32(&mut entry, 0x10, bomb.len() as u32);
    put32(&mut entry, 0x1c, 80);
    put64(&mut entry, 0x28, 0x8011);
    put64(&mut entry, 0x38, 1 << 20);
    entry.extend_from_slice(&bomb);
    entry.resize(entry.len().next_multiple_of(8), 0);
    let mut fat = vec![0x50, 0xed, 0x55, 0xba, 1, 0, 16, 0];
    fat.extend_from_slice(&(entry.len() as u64).to_le_bytes());
    fat.extend_from_slice(&entry);
    v.push(("CUDA fat binary", "zstd entry bomb larger than declared".into(), fat, modes()));
    // Cubins whose ELF tables lie.
    let cubin = fixture("cuda/kern.cubin");
    for (what, at, val) in [("e_shentsize 0", 58usize, 0u16), ("e_phnum 0xffff", 56, 0xffff), ("e_shnum 0", 60, 0)] {
        let mut d = cubin.clone();
        d[at..at + 2].copy_from_slice(&val.to_le_bytes());
        if what == "e_shnum 0" {
            // The real count then comes from section 0's size: 2^60.
            let shoff = u64::from_le_bytes(d[40..48].try_into().unwrap()) as usize;
            put64(&mut d, shoff + 32, 1 << 60);
        }
        v.push(("CUDA cubin", what.into(), d, modes()));
    }
}

/// splitmix64: deterministic damage, reproducible from the case name.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn scale() -> usize {
    std::env::var("OFFLOAD_HOSTILE_SCALE").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1)
}

/// One way to damage a file.
#[derive(Clone, Copy, Debug)]
enum Damage {
    None,
    Truncate(usize),
    U32(usize, u32),
    U64(usize, u64),
    /// Random damage from this seed.
    Random(u64),
}

impl Damage {
    fn describe(self) -> String {
        match self {
            Damage::None => "unchanged".into(),
            Damage::Truncate(n) => format!("truncated to {n} bytes"),
            Damage::U32(at, v) => format!("u32 at {at} set to {v:#x}"),
            Damage::U64(at, v) => format!("u64 at {at} set to {v:#x}"),
            Damage::Random(seed) => format!("random damage, seed {seed:#x}"),
        }
    }

    fn apply(self, data: &[u8]) -> Vec<u8> {
        let mut d = data.to_vec();
        let len = d.len();
        match self {
            Damage::None => {}
            Damage::Truncate(n) => d.truncate(n),
            Damage::U32(at, v) => d[at..at + 4].copy_from_slice(&v.to_le_bytes()),
            Damage::U64(at, v) => d[at..at + 8].copy_from_slice(&v.to_le_bytes()),
            Damage::Random(seed) => {
                let mut rng = Rng(seed);
                match rng.below(3) {
                    0 => {
                        for _ in 0..1 + rng.below(8) {
                            let at = rng.below(len);
                            d[at] ^= 1 << rng.below(8);
                        }
                    }
                    1 => {
                        let at = rng.below(len);
                        let n = (1 + rng.below(16)).min(len - at);
                        let byte = [0u8, 0xff, rng.next() as u8][rng.below(3)];
                        d[at..at + n].fill(byte);
                    }
                    _ => {
                        // A chunk of the file copied over another place.
                        let (a, b) = (rng.below(len), rng.below(len));
                        let n = (1 + rng.below(64)).min(len - a).min(len - b);
                        let chunk = d[a..a + n].to_vec();
                        d[b..b + n].copy_from_slice(&chunk);
                    }
                }
            }
        }
        d
    }
}

/// The damages applied to a file of `len` bytes.
fn damages(len: usize) -> Vec<Damage> {
    let mut out = vec![Damage::None];
    let full = len <= 600 || scale() > 1;
    for cut in 0..len {
        if full || cut < 128 || cut + 128 >= len || cut % 16 == 0 {
            out.push(Damage::Truncate(cut));
        }
    }
    let size = len as u64;
    for at in (0..len.min(128)).step_by(4) {
        if at % 8 == 0 && at + 8 <= len {
            out.extend([0u64, u64::MAX, 1 << 40, size + 1].map(|v| Damage::U64(at, v)));
        } else if at + 4 <= len {
            out.extend([0u32, u32::MAX].map(|v| Damage::U32(at, v)));
        }
    }
    let mut rng = Rng(size ^ 0x5eed);
    for _ in 0..32 * scale() {
        out.push(Damage::Random(rng.next()));
    }
    out
}

fn put64(d: &mut [u8], at: usize, v: u64) {
    d[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn binary_bundle(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let e: Vec<(&[u8], &[u8])> = entries.iter().map(|(i, p)| (i.as_bytes(), *p)).collect();
    offload_format::bundle::binary::write(&e, std::num::NonZeroU64::new(1).unwrap()).to_vec()
}

/// A CCOB v3 blob around zstd `frame` with the given header fields.
fn ccob_v3(frame: &[u8], uncompressed: u64, hash: u64) -> Vec<u8> {
    let mut v = b"CCOB".to_vec();
    v.extend(3u16.to_le_bytes());
    v.extend(1u16.to_le_bytes());
    v.extend((32 + frame.len() as u64).to_le_bytes());
    v.extend(uncompressed.to_le_bytes());
    v.extend(hash.to_le_bytes());
    v.extend_from_slice(frame);
    v
}

/// A zstd frame of run-length blocks that inflates to `size` zero bytes
/// (a 4-byte block per 128 KiB): the decompression bomb.
fn zstd_bomb(size: u64) -> Vec<u8> {
    let mut f = vec![0x28, 0xb5, 0x2f, 0xfd, 0xc0, (17 - 10) << 3];
    f.extend(size.to_le_bytes());
    let block = 128u64 << 10;
    let blocks = size.div_ceil(block);
    for i in 0..blocks {
        let n = block.min(size - i * block);
        let last = u64::from(i + 1 == blocks);
        let header = (n << 3) | (1 << 1) | last;
        f.extend_from_slice(&header.to_le_bytes()[..3]);
        f.push(0);
    }
    f
}

/// Inputs crafted to lie in the ways LLVM 19 crashes on or mishandles.
fn crafted() -> Vec<(&'static str, String, Vec<u8>, Vec<Mode>)> {
    let mut v: Vec<(&'static str, String, Vec<u8>, Vec<Mode>)> = Vec::new();
    let bundle_modes = || vec![Mode::List("bc"), Mode::Unbundle("bc", &[HOST, G906, G908])];
    let good = binary_bundle(&[(HOST, b"HOSTDATA"), (G906, b"DEV1"), (G908, b"DEVICE22")]);
    // LLVM 19 segfaults on an entry count of 2^40 and on a cut at 200 bytes.
    let mut d = good.clone();
    put64(&mut d, 24, 1 << 40);
    v.push(("binary bundle", "entry count 2^40".into(), d, bundle_modes()));
    let mut d = good.clone();
    put64(&mut d, 32, 1 << 63);
    v.push(("binary bundle", "first offset 2^63".into(), d, bundle_modes()));
    let mut d = good.clone();
    put64(&mut d, 32, u64::MAX - 3);
    v.push(("binary bundle", "offset + size overflows".into(), d, bundle_modes()));
    // Overlapping payloads: every entry points at the first payload.
    let mut d = good.clone();
    let first = d[32..40].to_vec();
    for rec in [32 + 24 + 30, 32 + 2 * 24 + 30 + 29] {
        d[rec..rec + 8].copy_from_slice(&first);
    }
    v.push(("binary bundle", "overlapping payloads".into(), d, bundle_modes()));
    // Offsets into the header.
    let mut d = good.clone();
    put64(&mut d, 32, 1);
    v.push(("binary bundle", "payload inside the header".into(), d, bundle_modes()));
    // Many entries (linear time and memory): 200,000 distinct IDs.
    let ids: Vec<String> = (0..200_000).map(|i| format!("hip-amdgcn-amd-amdhsa--gfx{i}")).collect();
    let entries: Vec<(&str, &[u8])> = ids.iter().map(|i| (i.as_str(), &b""[..])).collect();
    v.push(("binary bundle", "200,000 entries".into(), binary_bundle(&entries), bundle_modes()));
    // The same ID many times.
    let entries: Vec<(&str, &[u8])> = (0..50_000).map(|_| (G906, &b"x"[..])).collect();
    v.push(("binary bundle", "one ID 50,000 times".into(), binary_bundle(&entries), bundle_modes()));

    // Compressed bundles.
    let ccob_modes = || vec![Mode::List("bc"), Mode::Unbundle("bc", &[HOST, G906, G908])];
    let ccob = fixture("bundler/ccob-l3.out");
    let mut d = ccob.clone();
    d[16..24].fill(0);
    v.push(("CCOB", "hash zeroed (LLVM 19 unbundles it)".into(), d, ccob_modes()));
    for (what, at, val) in [
        ("total size past the end", 8usize, u32::MAX),
        ("total size 0", 8, 0),
        ("uncompressed size 0", 12, 0),
        ("uncompressed size 2^32-1", 12, u32::MAX),
    ] {
        let mut d = ccob.clone();
        d[at..at + 4].copy_from_slice(&val.to_le_bytes());
        v.push(("CCOB", what.into(), d, ccob_modes()));
    }
    for (what, at, val) in
        [("version 0", 4usize, 0u16), ("version 4", 4, 4), ("method 7", 6, 7), ("zlib label on zstd", 6, 0)]
    {
        let mut d = ccob.clone();
        d[at..at + 2].copy_from_slice(&val.to_le_bytes());
        v.push(("CCOB", what.into(), d, ccob_modes()));
    }
    let mut d = ccob.clone();
    d.extend_from_slice(&ccob);
    v.push(("CCOB", "two blobs back to back".into(), d, ccob_modes()));
    let mut d = ccob.clone();
    d.extend_from_slice(b"trailing garbage");
    v.push(("CCOB", "trailing data".into(), d, ccob_modes()));
    // Decompression bombs: 16 KiB that inflate to 256 MiB (binary bundles
    // stream in constant memory; the hash check fails at the end) and to
    // 768 MiB read as a text bundle (in memory: the address-space limit
    // stops it with an error, not an abort).
    v.push(("CCOB", "256 MiB decompression bomb".into(), ccob_v3(&zstd_bomb(256 << 20), 256 << 20, 0), ccob_modes()));
    let text_bomb = ccob_v3(&zstd_bomb(768 << 20), 768 << 20, 0);
    v.push((
        "CCOB",
        "768 MiB decompression bomb".into(),
        text_bomb,
        vec![Mode::List("i"), Mode::Unbundle("i", &[HOST])],
    ));
    let small_bomb = zstd_bomb(64 << 20);
    v.push(("CCOB", "bomb larger than declared".into(), ccob_v3(&small_bomb, 1 << 20, 0), ccob_modes()));
    // A frame asking for a 2 GiB window with no content size.
    let frame = [0x28, 0xb5, 0x2f, 0xfd, 0x00, 21 << 3, 0x01, 0x00, 0x00];
    v.push(("CCOB", "2 GiB zstd window".into(), ccob_v3(&frame, 0, 0), ccob_modes()));

    // Text bundles: nested, unterminated and misplaced markers.
    let start = |c: &str, id: &str| format!("\n{c} __CLANG_OFFLOAD_BUNDLE____START__ {id}\n");
    let end = |c: &str, id: &str| format!("\n{c} __CLANG_OFFLOAD_BUNDLE____END__ {id}\n");
    let texts: Vec<(&str, String)> = vec![
        (
            "nested entries",
            format!("{}{}inner{}outer{}", start("//", HOST), start("//", G906), end("//", G906), end("//", HOST)),
        ),
        ("START without END", format!("{}no end", start("//", G906))),
        ("START without newline", format!("\n// __CLANG_OFFLOAD_BUNDLE____START__ {G906}")),
        ("END without START", end("//", G906)),
        ("END before START", format!("{}{}x{}", end("//", G906), start("//", G906), end("//", G906))),
        ("START at offset 0", format!("// __CLANG_OFFLOAD_BUNDLE____START__ {G906}\nx{}", end("//", G906))),
        ("CRLF markers", format!("{}x{}", start("//", G906), end("//", G906)).replace('\n', "\r\n")),
        ("other comment style", format!("{}x{}", start("#", G906), end("#", G906))),
        ("empty ID", format!("{}x{}", start("//", ""), end("//", ""))),
        ("START repeated 10,000 times", start("//", G906).repeat(10_000)),
        ("END repeated 10,000 times", format!("{}{}", start("//", G906), end("//", G906).repeat(10_000))),
    ];
    for (what, t) in texts {
        v.push(("text bundle", what.into(), t.into_bytes(), vec![Mode::List("i"), Mode::Unbundle("i", &[HOST, G906])]));
    }

    // OffloadBinaries.
    let pkg = fixture("packager/inputs/pkg.out");
    let pkg_modes = || vec![Mode::Extract, Mode::ExtractDerived, Mode::ExtractArchive];
    for (what, at, val) in [
        ("size past the end", 8usize, 1u64 << 40),
        ("entry offset past the end", 16, u64::MAX),
        ("image offset + size overflows", 0x38, u64::MAX - 7),
        ("image past the end", 0x40, 1 << 20),
        ("string records past the end", 0x30, u64::MAX / 16),
        ("key string past the end", 0x48, 1 << 30),
        ("string offset into the header", 0x28, 0),
    ] {
        let mut d = pkg.clone();
        put64(&mut d, at, val);
        v.push(("OffloadBinary", what.into(), d, pkg_modes()));
    }
    for version in [0u32, 2, 3, u32::MAX] {
        let mut d = pkg.clone();
        d[4..8].copy_from_slice(&version.to_le_bytes());
        v.push(("OffloadBinary", format!("version {version}"), d, pkg_modes()));
    }
    // Triple and arch that would steer a derived output name elsewhere.
    let img = offload_format::offload_binary::Image {
        offload_kind: offload_format::offload_binary::OffloadKind::OpenMp,
        strings: vec![(b"triple", b"../../escaped"), (b"arch", b"x/y")],
        image: b"payload",
        ..Default::default()
    };
    let d = offload_format::offload_binary::write(&img).unwrap();
    v.push(("OffloadBinary", "triple with '/'".into(), d, pkg_modes()));
    // Packages nested eight deep, ten images per level sharing the next
    // level: 3 KiB that listed 10^8 objects when every reference was opened.
    let mut nested = b"\x7fELF".to_vec();
    nested.resize(64, 0);
    for _ in 0..8 {
        nested = shared_image_binary(&nested, 10);
    }
    v.push(("OffloadBinary", "nested 8 deep, images sharing bytes".into(), nested, pkg_modes()));
    // 60,000 records pointing into one 1 MiB run without a NUL.
    v.push(("OffloadBinary", "60,000 strings in one long run".into(), long_run_package(), vec![Mode::Extract]));
    // COFF raw data the file lacks (uninitialized data, pointer 0) is
    // written out as llvm-objcopy does: an 89-byte object whose section
    // claims 0x7b000000 bytes (found by fuzzing) makes a 2 GiB fat object,
    // past the file-size limit (an error, nothing left behind); as the
    // host of a fat archive member it would have to be held in memory (an
    // error under the address-space limit).
    let mut coff = vec![0u8; 89];
    coff[..4].copy_from_slice(&[0x4c, 0x01, 0x01, 0x00]);
    coff[0x27] = 0x7b;
    coff[0x3c] = 0x58;
    coff[0x4c] = 0x01;
    coff[0x54] = 0x66;
    coff[0x58] = 0x22;
    let object_modes = vec![Mode::BundleObject, Mode::List("o"), Mode::Unbundle("o", &[HOST, G906])];
    v.push(("COFF object", "2 GiB of uninitialized data".into(), coff.clone(), object_modes));
    let mut small = coff.clone();
    small[0x24..0x28].copy_from_slice(&16u32.to_le_bytes());
    let entries: [(&[u8], &[u8]); 2] = [(HOST.as_bytes(), b""), (G906.as_bytes(), b"DEV1")];
    let format = offload_format::bundle::object::Format::Coff;
    let mut fat = offload_format::bundle::object::bundle(&small, format, &entries, 0).unwrap().to_vec();
    // The host section of the fat object: 2 GiB of raw data, pointer 0.
    fat[20 + 16..20 + 24].copy_from_slice(&[0, 0, 0, 0x7b, 0, 0, 0, 0]);
    let ar = offload_format::offload_binary::archive::write_gnu_archive(&[("fat.o", &fat)]).unwrap();
    let archive_modes = vec![Mode::Unbundle("a", &[HOST, G906]), Mode::UnbundleArchiveChecked(&[G906])];
    v.push(("device archive", "fat COFF member whose host has 2 GiB of uninitialized data".into(), ar, archive_modes));
    cuda_lies(&mut v);
    kpack::crafted(&mut v);
    pe_lies(&mut v);
    v
}

/// PE images whose headers and tables lie (docs/formats/pe.md): the HIP
/// DLL built here, damaged where the PE reader, `prune` and `check` look.
fn pe_lies(v: &mut Vec<(&'static str, String, Vec<u8>, Vec<Mode>)>) {
    use offload_format::coff::pe::{DIR_BASERELOC, DIR_IMPORT, PeImage};
    let dll = fixture("pe/hip_kernels.dll");
    let image = PeImage::parse(&dll).unwrap();
    let put32 = |d: &mut [u8], at: usize, val: u32| d[at..at + 4].copy_from_slice(&val.to_le_bytes());
    let modes = || vec![Mode::InspectList, Mode::InspectVerify, Mode::Prune("zero"), Mode::Prune("cut")];
    let fat = *image.section(b".hip_fat").unwrap();
    let relocs = image.rva_to_offset(image.directory(DIR_BASERELOC).unwrap().rva).unwrap();
    let imports = image.rva_to_offset(image.directory(DIR_IMPORT).unwrap().rva).unwrap();
    let mut lies: Vec<(&str, usize, u32)> = vec![
        ("e_lfanew past the end", 0x3c, u32::MAX),
        (".hip_fat raw data past the end", fat.header_offset + 20, u32::MAX - 0x1000),
        (".hip_fat raw size 2 GiB", fat.header_offset + 16, 0x8000_0000),
        (".hip_fat virtual size 0", fat.header_offset + 8, 0),
        ("relocation block size 9", relocs + 4, 9),
        ("relocation block size 4", relocs + 4, 4),
        ("relocation block size 2^31", relocs + 4, 1 << 31),
        ("import name RVA outside", imports + 12, 0x7fff_0000),
        ("import table RVA outside", image.directories_offset + 8 * DIR_IMPORT, 0x7fff_0000),
        ("file alignment 3", image.optional_offset + 36, 3),
        ("file alignment 0", image.optional_offset + 36, 0),
    ];
    let count_at = image.optional_offset - 20 + 2;
    lies.push(("65535 sections", count_at, 0xffff));
    for (what, at, val) in lies {
        let mut d = dll.clone();
        put32(&mut d, at, val);
        v.push(("PE DLL (HIP)", what.into(), d, modes()));
    }
    // The registration record points inside the bundle, or at nothing.
    let record = image.records(b".hipFatB", 0x4849_5046).unwrap()[0];
    for (what, delta) in [("record address inside the bundle", 16i64), ("record address before the image", -(1 << 40))]
    {
        let mut d = dll.clone();
        put64(&mut d, record.offset + 8, record.address.wrapping_add_signed(delta));
        v.push(("PE DLL (HIP)", what.into(), d, modes()));
    }
    // Import descriptors repeated to the end of the file.
    let mut d = dll.clone();
    let first = d[imports..imports + 20].to_vec();
    let mut at = imports;
    while at + 20 <= d.len() {
        d[at..at + 20].copy_from_slice(&first);
        at += 20;
    }
    v.push(("PE DLL (HIP)", "import descriptors repeated to the end".into(), d, modes()));
}

/// A version 2 OffloadBinary whose `n` entries all have `image` as their
/// image.
fn shared_image_binary(image: &[u8], n: u64) -> Vec<u8> {
    let image_at = (32 + 40 * n).next_multiple_of(8);
    let size = (image_at + image.len() as u64).next_multiple_of(8);
    let mut d = vec![0u8; size as usize];
    d[..4].copy_from_slice(&[0x10, 0xff, 0x10, 0xad]);
    d[4] = 2;
    put64(&mut d, 8, size);
    put64(&mut d, 16, 32);
    put64(&mut d, 24, n);
    for i in 0..n as usize {
        let e = 32 + 40 * i;
        d[e..e + 4].copy_from_slice(&[1, 0, 1, 0]);
        put64(&mut d, e + 24, image_at);
        put64(&mut d, e + 32, image.len() as u64);
    }
    d[image_at as usize..image_at as usize + image.len()].copy_from_slice(image);
    d
}

/// A version 1 OffloadBinary whose string records all point into one long
/// run of bytes without a NUL (quadratic string search before).
fn long_run_package() -> Vec<u8> {
    let n = 60_000u64;
    let records_at = 0x48u64;
    let run_at = records_at + 16 * n;
    let size = (run_at + (1 << 20)).next_multiple_of(8);
    let mut d = vec![b'x'; size as usize];
    d[..4].copy_from_slice(&[0x10, 0xff, 0x10, 0xad]);
    d[4..8].copy_from_slice(&1u32.to_le_bytes());
    put64(&mut d, 8, size);
    put64(&mut d, 16, 0x20);
    put64(&mut d, 24, 40);
    d[0x20..0x28].fill(0);
    d[0x22] = 1; // OpenMP
    put64(&mut d, 0x28, records_at);
    put64(&mut d, 0x30, n);
    put64(&mut d, 0x38, size);
    put64(&mut d, 0x40, 0);
    for i in 0..n {
        let r = (records_at + 16 * i) as usize;
        put64(&mut d, r, run_at + i * 7);
        put64(&mut d, r + 8, run_at + i * 5);
    }
    d
}

/// One run to make: a file, a damage, a mode.
struct Job {
    base: String,
    data: std::sync::Arc<Vec<u8>>,
    damage: Damage,
    /// For crafted inputs, what they are.
    what: Option<String>,
    mode: Mode,
}

/// How a run ended.
struct Ended {
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
    /// Whether standard output reports an error (`offload verify` prints
    /// its findings there, compiler-style: `file:offset: error: ...`).
    stdout_error: bool,
    timed_out: bool,
}

fn run_child(bin: &str, args: &[String], dir: &Path, logs: &Path, input_len: u64) -> Ended {
    run_child_as(bin, args, dir, logs, input_len, "22")
}

/// [`run_child`] with `OFFLOAD_LLVM_VERSION=release` (and none of the
/// bundler's other environment variables).
fn run_child_as(bin: &str, args: &[String], dir: &Path, logs: &Path, input_len: u64, release: &str) -> Ended {
    let out = fs::File::create(logs.join("stdout")).unwrap();
    let err = fs::File::create(logs.join("stderr")).unwrap();
    let (as_limit, fsize) = (address_space_limit(input_len), file_size_limit(input_len));
    ignore_sigxfsz();
    // The limits are set by util-linux's `prlimit`, which then executes the
    // tool, rather than in a `pre_exec` hook: with a hook the standard
    // library forks this process (copying the page tables of every corpus
    // file and of the tests running beside it, then freeing them at exec),
    // which was a fifth of the corpus's CPU time; without one it spawns the
    // child with `posix_spawn`, sharing the address space until exec.
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={as_limit}"))
        .arg(format!("--fsize={fsize}"))
        .arg("--core=0")
        .arg("--")
        .arg(bin)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    for var in ["COMPRESSED_BUNDLE_FORMAT_VERSION", "OFFLOAD_BUNDLER_COMPRESS", "OFFLOAD_BUNDLER_VERBOSE"] {
        cmd.env_remove(var);
    }
    cmd.env("OFFLOAD_LLVM_VERSION", release);
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {bin} under prlimit (util-linux): {e}"));
    let status = common::wait_with_timeout(&mut child, TIMEOUT);
    let stderr = String::from_utf8_lossy(&fs::read(logs.join("stderr")).unwrap_or_default()).into_owned();
    let stdout_error =
        String::from_utf8_lossy(&fs::read(logs.join("stdout")).unwrap_or_default()).contains(": error: ");
    match status {
        Some(s) => Ended { code: s.code(), signal: s.signal(), stderr, stdout_error, timed_out: false },
        None => Ended { code: None, signal: None, stderr, stdout_error, timed_out: true },
    }
}

/// Ignores `SIGXFSZ` in this process, once, so that every child inherits
/// it ignored across exec: a write past the `--fsize` limit then fails with
/// `EFBIG`, which the tools must report, instead of killing them.
fn ignore_sigxfsz() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: setting a signal's disposition to SIG_IGN has no handler to
    // race with; no test in this process relies on SIGXFSZ's default.
    ONCE.call_once(|| unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    });
}

fn listing(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = if e.file_type().unwrap().is_file() { fs::read(e.path()).unwrap() } else { Vec::new() };
            (name, bytes)
        })
        .collect()
}

/// Runs one job in a fresh folder; returns the exit code, or a
/// description of what went wrong.
fn run_job(job: &Job, work: &Path, logs: &Path, dev: &[u8]) -> Result<i32, String> {
    let (bin, args, outputs) = job.mode.command();
    let _ = fs::remove_dir_all(work);
    fs::create_dir_all(work).unwrap();
    let data = job.damage.apply(&job.data);
    fs::write(work.join("in"), &data).unwrap();
    if matches!(job.mode, Mode::BundleObject) {
        fs::write(work.join("dev"), dev).unwrap();
    }
    if matches!(job.mode, Mode::InspectDiff) {
        fs::write(work.join("orig"), &job.data[..]).unwrap();
    }
    if matches!(job.mode, Mode::Join) {
        kpack::place_archive(work);
    }
    for o in &outputs {
        fs::write(work.join(o), SENTINEL).unwrap();
    }
    let before = listing(work);
    let ended = run_child_as(bin, &args, work, logs, data.len() as u64, job.mode.release());
    let after = listing(work);
    let tool = Path::new(bin).file_name().unwrap().to_string_lossy();
    let what = job.what.clone().unwrap_or_else(|| job.damage.describe());
    let describe = |problem: String| format!("{} / {what} / {tool} {}: {problem}", job.base, args.join(" "));
    if ended.timed_out {
        return Err(describe(format!("no exit within {TIMEOUT:?} (hang)")));
    }
    if let Some(sig) = ended.signal {
        return Err(describe(format!("killed by signal {sig}; stderr: {}", ended.stderr.trim_end())));
    }
    let stray: Vec<&String> = after.keys().filter(|n| n.starts_with('.')).collect();
    if !stray.is_empty() {
        return Err(describe(format!("temporary files left behind: {stray:?}")));
    }
    match ended.code {
        Some(0) => Ok(0),
        Some(1) | Some(2) if job.mode.answers() => {
            if ended.code == Some(2) && !ended.stderr.contains("error:") {
                return Err(describe(format!("exit 2 without 'error:' on stderr: {:?}", ended.stderr)));
            }
            if after != before {
                return Err(describe("a run that writes nothing changed files".into()));
            }
            Ok(1)
        }
        Some(1) => {
            let verify = matches!(job.mode, Mode::InspectVerify);
            if !(ended.stderr.contains("error:") || (verify && ended.stdout_error)) {
                return Err(describe(format!("exit 1 without 'error:' on stderr: {:?}", ended.stderr)));
            }
            if after != before {
                let changed: Vec<&String> =
                    after.keys().chain(before.keys()).filter(|n| after.get(*n) != before.get(*n)).collect();
                return Err(describe(format!("a failed run changed or created files: {changed:?}")));
            }
            Ok(1)
        }
        Some(code) => Err(describe(format!("exit code {code}; stderr: {}", ended.stderr.trim_end()))),
        None => Err(describe("no exit code".into())),
    }
}

fn jobs() -> Vec<Job> {
    let mut jobs = Vec::new();
    for base in bases() {
        let data = std::sync::Arc::new(base.data);
        let all = damages(data.len());
        for (k, &damage) in all.iter().enumerate() {
            let inspector = INSPECTOR_MODES.iter().filter(|(_, every)| k % (every * base.thin) == 0).map(|(m, _)| *m);
            for mode in base.modes.iter().copied().chain(inspector) {
                jobs.push(Job { base: base.name.to_string(), data: data.clone(), damage, what: None, mode });
            }
        }
        // The wrapper does not parse its inputs: a sample is enough to show
        // odd bytes never trouble it.
        for &damage in all.iter().step_by(97) {
            jobs.push(Job { base: base.name.to_string(), data: data.clone(), damage, what: None, mode: Mode::Wrap });
        }
        for &damage in all.iter().skip(48).step_by(97) {
            let mode = Mode::WrapLlvm22;
            jobs.push(Job { base: base.name.to_string(), data: data.clone(), damage, what: None, mode });
        }
    }
    for (base, what, data, modes) in crafted() {
        let data = std::sync::Arc::new(data);
        // `verify` and `diff` decompress everything: for the bombs that is
        // minutes of debug-build work, not a finding.
        let inspector = INSPECTOR_MODES.map(|(m, _)| m);
        let inspector = inspector
            .iter()
            .copied()
            .filter(|m| !(what.contains("bomb") && matches!(m, Mode::InspectVerify | Mode::InspectDiff)));
        for mode in modes.into_iter().chain(inspector) {
            jobs.push(Job {
                base: base.to_string(),
                data: data.clone(),
                damage: Damage::None,
                what: Some(what.clone()),
                mode,
            });
        }
    }
    jobs
}

/// What a run of the corpus gave: runs that exited 0 and 1, the problems
/// found, and how it ran.
struct Totals {
    ok: usize,
    errors: usize,
    failures: Vec<String>,
    threads: usize,
    elapsed: std::time::Duration,
}

/// Runs every job with `run(job, work, logs)` on up to four threads, each
/// with its own work and log folders.
fn run_all(jobs: &[Job], run: impl Fn(&Job, &Path, &Path) -> Result<i32, String> + Sync) -> Totals {
    let root = tempfile::tempdir().unwrap();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    // Runs that exited 0 and 1.
    let exits = Mutex::new([0usize; 2]);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (next, failures, exits, run) = (&next, &failures, &exits, &run);
            let work = root.path().join(format!("work{t}"));
            let logs = root.path().join(format!("logs{t}"));
            fs::create_dir_all(&logs).unwrap();
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    match run(job, &work, &logs) {
                        Ok(code) => exits.lock().unwrap()[code as usize] += 1,
                        Err(problem) => failures.lock().unwrap().push(problem),
                    }
                }
            });
        }
    });
    let [ok, errors] = exits.into_inner().unwrap();
    Totals { ok, errors, failures: failures.into_inner().unwrap(), threads, elapsed: started.elapsed() }
}

/// Fails with the first problems found, if any.
fn assert_no_problems(totals: &Totals, runs: usize) {
    let failures = &totals.failures;
    assert!(
        failures.is_empty(),
        "{} of {runs} runs went wrong:\n{}",
        failures.len(),
        failures[..failures.len().min(30)].join("\n")
    );
}

/// The runs per command and per file, for the campaign's record
/// (docs/development.md).
fn print_counts(jobs: &[Job]) {
    let mut by_mode: BTreeMap<String, usize> = BTreeMap::new();
    let mut by_base: BTreeMap<&str, usize> = BTreeMap::new();
    for j in jobs {
        let (bin, args, _) = j.mode.command();
        let tool = Path::new(bin).file_name().unwrap_or_default().to_string_lossy().into_owned();
        let first = args.first().map(String::as_str).unwrap_or_default();
        let verb = if tool == "offload" || first.starts_with('-') { format!("{tool} {first}") } else { tool };
        *by_mode.entry(format!("{verb} (LLVM {})", j.mode.release())).or_default() += 1;
        *by_base.entry(j.base.as_str()).or_default() += 1;
    }
    for (what, n) in by_mode {
        eprintln!("runs by command: {n:>7}  {what}");
    }
    for (what, n) in by_base {
        eprintln!("runs by file: {n:>7}  {what}");
    }
}

#[test]
fn hostile_inputs_end_in_success_or_a_clear_error() {
    // OFFLOAD_HOSTILE_FILTER=<text> runs only the files whose description
    // contains <text> (to reproduce one failure quickly).
    let filter = std::env::var("OFFLOAD_HOSTILE_FILTER").unwrap_or_default();
    let jobs: Vec<Job> = jobs().into_iter().filter(|j| j.base.contains(&filter)).collect();
    print_counts(&jobs);
    let dev = fixture("objects/dev-gfx906.o");
    let t = run_all(&jobs, |job, work, logs| run_job(job, work, logs, &dev));
    let (ok, errors, threads) = (t.ok, t.errors, t.threads);
    eprintln!(
        "hostile corpus: {} runs in {:.1?} on {threads} threads: {ok} succeeded, {errors} failed cleanly, {} problems",
        jobs.len(),
        t.elapsed,
        t.failures.len()
    );
    assert_no_problems(&t, jobs.len());
    // Both outcomes occur: the damage is neither all ignored nor all fatal.
    assert!(ok > 0 && errors > 0, "{ok} successes, {errors} errors");
}

#[test]
fn hostile_inputs_prune_cleanly() {
    let filter = std::env::var("OFFLOAD_HOSTILE_FILTER").unwrap_or_default();
    let jobs: Vec<Job> = prune::jobs().into_iter().filter(|j| j.base.contains(&filter)).collect();
    let t = run_all(&jobs, prune::run);
    let (ok, errors, threads) = (t.ok, t.errors, t.threads);
    eprintln!(
        "hostile prune corpus: {} runs in {:.1?} on {threads} threads: {ok} pruned, {errors} refused cleanly, {} problems",
        jobs.len(),
        t.elapsed,
        t.failures.len()
    );
    assert_no_problems(&t, jobs.len());
    // Both outcomes occur: damage outside the fat binaries prunes, damage
    // to their headers and records is refused.
    assert!(ok > 0 && errors > 0, "{ok} pruned, {errors} refused");
}

/// The detector itself: a panic, a signal and a hang are each caught.
#[test]
fn the_checks_catch_panics_signals_and_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    fs::create_dir_all(&logs).unwrap();
    let sh = |script: &str| run_child("/bin/sh", &["-c".to_string(), script.to_string()], dir.path(), &logs, 0);
    let e = sh("echo 'thread main panicked' >&2; exit 101");
    assert_eq!((e.code, e.signal), (Some(101), None));
    let e = sh("kill -SEGV $$");
    assert_eq!(e.signal, Some(libc::SIGSEGV));
    // Asking for more address space than the limit allows fails.
    let e = sh("exec head -c 1000000000 /dev/zero | tail -c 1 >/dev/null; exit 0");
    assert!(!e.timed_out);
}

/// The crafted cases whose outcome is known: errors where LLVM 19 crashes
/// or silently succeeds with wrong data, with our message.
#[test]
fn llvm_crashers_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let run = |bin: &str, args: &[&str], input: &[u8]| {
        fs::write(dir.path().join("in"), input).unwrap();
        let out = Command::new(bin).args(args).current_dir(dir.path()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let list = ["-list", "-type=bc", "-input=in"];
    let good = binary_bundle(&[(HOST, b"HOSTDATA"), (G906, b"DEV1"), (G908, b"DEVICE22")]);
    // Entry count 2^40 and a cut at 200 bytes: SIGSEGV in LLVM 19.
    let mut d = good.clone();
    put64(&mut d, 24, 1 << 40);
    let (code, err) = run(BUNDLER, &list, &d);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("error: malformed bundle"), "{err}");
    let (code, err) = run(BUNDLER, &list, &good[..200]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("error: malformed bundle"), "{err}");
    // First offset 2^63: LLVM 19 lists nothing and exits 0.
    let mut d = good.clone();
    put64(&mut d, 32, 1 << 63);
    let (code, err) = run(BUNDLER, &list, &d);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("claims 8 bytes at offset 9223372036854775808"), "{err}");
    // A zeroed hash: LLVM 19 unbundles the data unchecked.
    let mut ccob = fixture("bundler/ccob-l3.out");
    ccob[16..24].fill(0);
    let (code, err) = run(BUNDLER, &list, &ccob);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("compressed bundle is corrupt: stored hash 0x0000000000000000"), "{err}");
    // A bomb read in memory stops at the address-space limit with an
    // error, not an abort.
    let bomb = ccob_v3(&zstd_bomb(768 << 20), 768 << 20, 0);
    let (logs, work) = (dir.path().join("logs"), dir.path().join("work"));
    fs::create_dir_all(&logs).unwrap();
    fs::create_dir_all(&work).unwrap();
    fs::write(work.join("in"), &bomb).unwrap();
    let args: Vec<String> = ["-list", "-type=i", "-input=in"].iter().map(|s| s.to_string()).collect();
    let ended = run_child(BUNDLER, &args, &work, &logs, bomb.len() as u64);
    assert_eq!((ended.code, ended.signal, ended.timed_out), (Some(1), None, false), "{}", ended.stderr);
    assert!(ended.stderr.contains("error: Failed to decompress input: Could not decompress"), "{}", ended.stderr);
    // Output names derived from the input may not leave the folder.
    let img = offload_format::offload_binary::Image {
        offload_kind: offload_format::offload_binary::OffloadKind::OpenMp,
        strings: vec![(b"triple", b"../../escaped"), (b"arch", b"a")],
        image: b"payload",
        ..Default::default()
    };
    let pkg = offload_format::offload_binary::write(&img).unwrap();
    let (code, err) = run(PACKAGER, &["in", "--image=kind=openmp"], &pkg);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("refusing to write an output whose name comes from an image's triple or arch"), "{err}");
}
