//! Probes for the external tools the integration tests use (LLVM 14, 19 and 22,
//! the OpenMP runtimes, NVIDIA's CUDA tools, comgr, hipcc, the real ROCm
//! corpus) and sets one `has_<tool>` cfg for each group found. The binaries
//! do not use these cfgs; a test that needs a tool carries
//! `#[cfg_attr(not(has_<tool>), ignore = "needs <tool>: run scripts/...")]`,
//! so a machine without it reports the test as ignored, never as passed.
//!
//! `OFFLOAD_REQUIRE_LLVM=1`, `OFFLOAD_REQUIRE_CUDA=1` and
//! `OFFLOAD_REQUIRE_REAL_CORPUS=1` (set by `.ci/run`) turn a missing group
//! into a build failure that names the missing paths and the script that
//! installs them. docs/development.md, section Tests, describes the groups.

use std::path::{Path, PathBuf};

/// One group of files that a set of tests needs.
struct Group {
    cfg: &'static str,
    /// Which `OFFLOAD_REQUIRE_*` variable makes the group mandatory.
    required_by: &'static [&'static str],
    install: &'static str,
    files: Vec<PathBuf>,
}

fn env_path(var: &str, default: &str) -> PathBuf {
    println!("cargo:rerun-if-env-changed={var}");
    std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from)
}

fn in_dir(dir: &Path, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| dir.join(n)).collect()
}

/// The standard library of the system Python 3 that has `venv` and
/// `ensurepip` (`pip install` of pruned wheels into a fresh venv), or where
/// it would be.
fn python_stdlib() -> PathBuf {
    if let Ok(p) = std::env::var("OFFLOAD_PYTHON_STDLIB") {
        return PathBuf::from(p);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("python3.")))
        .filter(|p| p.join("venv").is_dir() && p.join("ensurepip").is_dir())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| PathBuf::from("/usr/lib/python3"))
}

fn groups() -> Vec<Group> {
    let llvm19 = env_path("OFFLOAD_LLVM19_BIN", "/usr/lib/llvm-19/bin");
    let llvm14 = env_path("OFFLOAD_LLVM14_BIN", "/usr/lib/llvm-14/bin");
    let llvm22 = env_path("OFFLOAD_LLVM22_BIN", "/usr/lib/llvm-22/bin");
    let omp19 = env_path("OFFLOAD_OMP19_LIB", "/opt/omp19/lib");
    let omp22 = env_path("OFFLOAD_OMP22_LIB", "/opt/omp22/lib");
    let cuda_bin = env_path("OFFLOAD_CUDA_BIN", "/opt/cuda-wheels/nvidia/cu13/bin");
    let clang_cuda = env_path("OFFLOAD_CLANG_CUDA_ROOT", "/opt/cuda-wheels/clang-cuda-root");
    let hipcc = env_path("OFFLOAD_HIPCC", "/usr/bin/hipcc");
    println!("cargo:rerun-if-env-changed=HOME");
    let corpus = match std::env::var_os("OFFLOAD_CORPUS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/offload-binutils/corpus"),
    };
    println!("cargo:rerun-if-env-changed=OFFLOAD_CORPUS_DIR");
    let llvm = &["OFFLOAD_REQUIRE_LLVM"][..];
    let reference = "scripts/install-reference-llvm.sh";
    let mut llvm19_files = in_dir(
        &llvm19,
        &[
            "clang-offload-bundler",
            "clang-offload-packager",
            "clang",
            "clang++",
            "ld.lld",
            "llvm-ar",
            "llvm-dis",
            "llvm-mc",
            "llvm-nm",
            "llvm-objcopy",
            "llvm-objdump",
            "llvm-readelf",
            "llvm-strip",
            "llc",
            "yaml2obj",
            "opt",
        ],
    );
    // The builds of the prune and replace tests link with GNU ld and zstd.
    llvm19_files.extend(["/usr/bin/ld.bfd", "/usr/lib/x86_64-linux-gnu/libzstd.so.1"].map(PathBuf::from));
    vec![
        Group { cfg: "has_llvm19", required_by: llvm, install: reference, files: llvm19_files },
        Group {
            cfg: "has_llvm22",
            required_by: llvm,
            install: reference,
            files: in_dir(
                &llvm22,
                &[
                    "clang",
                    "clang-offload-bundler",
                    "llvm-offload-binary",
                    "llvm-offload-wrapper",
                    "llvm-dis",
                    "llvm-objdump",
                    "ld.lld",
                    "lld-link",
                    "llvm-lib",
                ],
            ),
        },
        Group {
            cfg: "has_llvm14",
            required_by: llvm,
            install: reference,
            files: in_dir(
                &llvm14,
                &["clang-offload-wrapper", "clang", "llvm-dis", "opt", "llvm-readelf", "llvm-objcopy"],
            ),
        },
        Group {
            cfg: "has_omp14",
            required_by: llvm,
            install: reference,
            files: in_dir(&llvm14.join("../lib"), &["libomptarget.so", "libomptarget.rtl.x86_64.so"]),
        },
        Group {
            cfg: "has_omp19",
            required_by: llvm,
            install: reference,
            files: in_dir(&omp19, &["libomp.so", "libomptarget.so", "libomptarget.devicertl.a"]),
        },
        Group {
            cfg: "has_omp22",
            required_by: llvm,
            install: "scripts/install-omp22.sh",
            files: in_dir(
                &omp22,
                &["libomp.so", "libomp.so.5", "libomptarget.so", "libomptarget.so.22.1", "libLLVMOffload.so.22.1"],
            ),
        },
        Group {
            cfg: "has_comgr",
            required_by: &["OFFLOAD_REQUIRE_LLVM", "OFFLOAD_REQUIRE_REAL_CORPUS"],
            install: "scripts/install-test-deps.sh",
            files: ["/usr/include/amd_comgr.h", "/usr/lib/x86_64-linux-gnu/libamd_comgr.so"].map(PathBuf::from).into(),
        },
        Group {
            cfg: "has_hipcc",
            required_by: llvm,
            install: "scripts/install-test-deps.sh",
            files: vec![hipcc, PathBuf::from("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")],
        },
        Group {
            cfg: "has_cuda",
            required_by: &["OFFLOAD_REQUIRE_CUDA"],
            install: "scripts/install-cuda-tools.sh",
            files: vec![cuda_bin.join("nvcc"), cuda_bin.join("cuobjdump"), cuda_bin.join("../nvvm/bin/cicc")],
        },
        Group {
            cfg: "has_clang_cuda",
            required_by: &["OFFLOAD_REQUIRE_CUDA"],
            install: "scripts/install-cuda-tools.sh",
            files: in_dir(&clang_cuda, &["bin/fatbinary", "bin/ptxas"]),
        },
        Group {
            cfg: "has_real_corpus",
            required_by: &["OFFLOAD_REQUIRE_REAL_CORPUS"],
            install: "scripts/fetch-real-corpus.sh",
            files: in_dir(&corpus, &["files", "packages", "tools/librocmllvm.so"]),
        },
        Group {
            cfg: "has_python_venv",
            required_by: &["OFFLOAD_REQUIRE_PYTHON"],
            install: "apt-get install python3-venv",
            files: vec![
                PathBuf::from("/usr/bin/python3"),
                python_stdlib().join("venv"),
                python_stdlib().join("ensurepip"),
            ],
        },
        Group {
            cfg: "has_curand_wheels",
            required_by: &["OFFLOAD_REQUIRE_REAL_CORPUS"],
            install: "scripts/fetch-real-corpus.sh",
            files: in_dir(
                &corpus,
                &["files/curand-win/curand64_10.dll", "packages/curand-win", "packages/curand-linux"],
            ),
        },
    ]
}

/// Where cargo should look for a change that could make `path` appear or
/// vanish. An existing path is watched itself. For a missing one, cargo
/// would rerun this script (and rebuild the crate) on every build, so the
/// nearest existing folder is watched instead, unless that folder is a large
/// system one (cargo scans a watched folder recursively): there Debian's
/// package database stands in, since apt installs the system tools. After
/// installing into such a folder by other means, `touch build.rs`.
fn watch(path: &Path) -> Option<PathBuf> {
    if path.exists() {
        return Some(path.to_path_buf());
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let large = |p: &Path| {
        ["/", "/usr", "/usr/lib", "/usr/include", "/var", "/home"].iter().any(|l| p == Path::new(l))
            || home.as_deref() == Some(p)
    };
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d.is_dir() {
            if large(d) {
                let dpkg = Path::new("/var/lib/dpkg/status");
                return dpkg.is_file().then(|| dpkg.to_path_buf());
            }
            return Some(d.to_path_buf());
        }
        dir = d.parent();
    }
    None
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let required = |var: &str| {
        println!("cargo:rerun-if-env-changed={var}");
        std::env::var(var).is_ok_and(|v| v == "1")
    };
    let mut failures = Vec::new();
    let mut watched = std::collections::BTreeSet::new();
    for g in groups() {
        println!("cargo::rustc-check-cfg=cfg({})", g.cfg);
        let missing: Vec<&PathBuf> = g.files.iter().filter(|f| !f.exists()).collect();
        for f in &g.files {
            if let Some(w) = watch(f) {
                watched.insert(w);
            }
        }
        if missing.is_empty() {
            println!("cargo:rustc-cfg={}", g.cfg);
            continue;
        }
        let list = missing.iter().map(|m| m.display().to_string()).collect::<Vec<_>>().join(", ");
        let by: Vec<&&str> = g.required_by.iter().filter(|v| required(v)).collect();
        if let Some(var) = by.first() {
            failures.push(format!("{var}=1 but {} is missing ({list}); run {}", g.cfg, g.install));
        }
    }
    for w in watched {
        println!("cargo:rerun-if-changed={}", w.display());
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}
