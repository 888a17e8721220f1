//! The real corpus and its references for `real_corpus.rs`: where the files
//! are, how the reference tools cut them into fat binaries and read them
//! (LLVM 19, ROCm 7's LLVM library, Debian's comgr), and the documented
//! selection rule. Everything here reads the files independently of the
//! `offload-format` crate.
#![allow(dead_code)]

use crate::common;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The corpus files, relative to `<corpus>/files` (see
/// `scripts/fetch-real-corpus.sh` for where each comes from).
pub const CORPUS: &[&str] = &[
    "rocm7-torch-cluster/_fps_cuda.so",
    "rocm7-jax-plugin/_prng.so",
    "rocm7-jax-plugin/_solver.so",
    "rocm6-jax-plugin/_prng.so",
    "rocm6-jax-plugin/_solver.so",
    "rocm6-fastllm/libfastllm_tools.so",
    "debian-rocrand/librocrand.so.1.1",
];

/// Processors in the corpus that LLVM 19 (and so the inspector's processor
/// table on `main` before branch `tables`) does not know. Tests naming them
/// pass only once that table has them.
pub const NEEDS_NEW_TABLE: &[&str] = &["gfx950", "gfx1153", "gfx1250", "gfx1251"];

/// Target-ID features each corpus processor supports, which a real device
/// always reports as `+` or `-` (LLVM's AMDGPUUsage, "AMDGPU Processors";
/// for gfx1250 and gfx1251, newer than that table here, the corpus's own
/// code objects: their e_flags 0x549 and 0x55a say xnack "any" and sramecc
/// "any", which LLVM writes only for processors supporting both).
/// Processors not listed support neither.
const SRAMECC_AND_XNACK: &[&str] =
    &["gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950", "gfx1250", "gfx1251"];
const XNACK_ONLY: &[&str] =
    &["gfx801", "gfx810", "gfx900", "gfx902", "gfx904", "gfx909", "gfx90c", "gfx1010", "gfx1011", "gfx1012", "gfx1013"];

const BUNDLE_MAGIC: &[u8] = b"__CLANG_OFFLOAD_BUNDLE__";
const CCOB_MAGIC: &[u8] = b"CCOB";
/// HIP aligns each fat binary in `.hip_fatbin` to a page.
const FAT_BINARY_ALIGN: usize = 4096;

pub struct Corpus {
    dir: PathBuf,
}

impl Corpus {
    /// The corpus (its tests are ignored without `has_real_corpus`).
    pub fn get() -> Corpus {
        let dir = match std::env::var_os("OFFLOAD_CORPUS_DIR") {
            Some(d) => PathBuf::from(d),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/offload-binutils/corpus"),
        };
        assert!(
            dir.join("files").is_dir(),
            "needs the real corpus in {}; run scripts/fetch-real-corpus.sh",
            dir.display()
        );
        for f in CORPUS {
            let p = dir.join("files").join(f);
            assert!(p.is_file(), "incomplete corpus: {} is missing; rerun scripts/fetch-real-corpus.sh", p.display());
        }
        Corpus { dir }
    }

    pub fn files(&self) -> Vec<PathBuf> {
        CORPUS.iter().map(|f| self.dir.join("files").join(f)).collect()
    }

    /// Each downloaded package (wheel or .deb), with the corpus files that
    /// were unpacked from it.
    pub fn packages(&self) -> Vec<(PathBuf, Vec<PathBuf>)> {
        let mut out = Vec::new();
        let mut artifacts: Vec<&str> = CORPUS.iter().filter_map(|f| f.split('/').next()).collect();
        artifacts.dedup();
        for artifact in artifacts {
            let dir = self.dir.join("packages").join(artifact);
            let package =
                std::fs::read_dir(&dir).ok().and_then(|mut d| d.next()).and_then(|e| e.ok()).map(|e| e.path());
            let Some(package) = package else {
                panic!("incomplete corpus: no package in {}; rerun scripts/fetch-real-corpus.sh", dir.display())
            };
            let files = CORPUS
                .iter()
                .filter(|f| f.starts_with(&format!("{artifact}/")))
                .map(|f| self.dir.join("files").join(f))
                .collect();
            out.push((package, files));
        }
        out
    }
}

/// One fat binary of a `.hip_fatbin` section, as the references see it.
pub struct FatBinary {
    /// Absolute offset in the file.
    pub start: u64,
    /// Its length as stored (a bundle up to the next fat binary or the
    /// section's end, padding included; a CCOB's total size).
    pub stored_len: u64,
    /// `Some(version)` for a compressed bundle.
    pub ccob_version: Option<u16>,
    /// What LLVM 19 reads: the stored bytes, or for CCOB v3 the bundle that
    /// ROCm 7's LLVM decompressed.
    pub llvm_input: PathBuf,
    /// The uncompressed bundle and its entry table.
    pub bundle: Vec<u8>,
    pub entries: Vec<Entry>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub id: String,
    /// Offset within the uncompressed bundle.
    pub offset: u64,
    pub size: u64,
}

#[derive(Debug)]
pub struct Gpu {
    pub processor: String,
    /// `(feature, on)` as the device reports it.
    pub features: Vec<(&'static str, bool)>,
    /// The HSA ISA name: `amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`.
    pub isa: String,
}

/// The reference tools: LLVM 19's bundler and readelf, ROCm 7's LLVM
/// library, a C compiler for the helpers.
pub struct References {
    bundler: PathBuf,
    readelf: PathBuf,
    rocm_llvm: PathBuf,
    helpers: tempfile::TempDir,
    decompress: PathBuf,
}

impl References {
    pub fn get(corpus: &Corpus) -> References {
        let bundler = common::llvm_tool(19, "clang-offload-bundler");
        let readelf = common::llvm_tool(19, "llvm-readelf");
        let rocm_llvm = corpus.dir.join("tools/librocmllvm.so");
        assert!(rocm_llvm.is_file(), "incomplete corpus: {} is missing", rocm_llvm.display());
        let helpers = tempfile::tempdir().unwrap();
        let decompress = compile(helpers.path(), "rocmllvm_decompress", &["-ldl"]);
        References { bundler, readelf, rocm_llvm, helpers, decompress }
    }

    /// Debian's comgr behind `comgr_lookup.c` (its tests are ignored
    /// without `has_comgr`).
    pub fn comgr(&self) -> Comgr {
        assert!(
            Path::new("/usr/include/amd_comgr.h").is_file(),
            "needs comgr (Debian: libamd-comgr-dev); run scripts/install-test-deps.sh"
        );
        let tool = compile(self.helpers.path(), "comgr_lookup", &["-lamd_comgr"]);
        let out = common::run(Command::new(&tool).arg("isas"));
        assert!(out.status.success(), "comgr_lookup isas: {}", String::from_utf8_lossy(&out.stderr));
        let processors = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("amdgcn-amd-amdhsa--"))
            .map(|p| p.split(':').next().unwrap().to_string())
            .collect();
        Comgr { tool, processors, dir: self.helpers.path().to_path_buf() }
    }

    /// The fat binaries of `file`'s `.hip_fatbin`, in file order; scratch
    /// files go to `work`.
    pub fn fat_binaries(&self, file: &Path, work: &Path) -> Vec<FatBinary> {
        let (section_offset, section) = self.hip_fatbin(file);
        let mut found = Vec::new();
        let mut pos = 0;
        while pos < section.len() {
            let rest = &section[pos..];
            let (len, ccob_version) = if rest.starts_with(BUNDLE_MAGIC) {
                (next_fat_binary(&section, pos) - pos, None)
            } else if rest.starts_with(CCOB_MAGIC) {
                let version = u16::from_le_bytes([rest[4], rest[5]]);
                let len = match version {
                    2 => u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize,
                    3 => u64::from_le_bytes(rest[8..16].try_into().unwrap()) as usize,
                    _ => next_fat_binary(&section, pos) - pos,
                };
                (len, Some(version))
            } else {
                // Padding up to the next page.
                let pad = FAT_BINARY_ALIGN - pos % FAT_BINARY_ALIGN;
                assert!(rest.iter().take(pad).all(|&b| b == 0), "{}: unknown bytes at {pos:#x}", file.display());
                pos += pad;
                continue;
            };
            let stored = &section[pos..pos + len];
            let index = found.len();
            let stored_path = work.join(format!("fatbin{index}.stored"));
            std::fs::write(&stored_path, stored).unwrap();
            let (llvm_input, bundle) = match ccob_version {
                None => (stored_path, stored.to_vec()),
                Some(version) => {
                    let decoded = work.join(format!("fatbin{index}.bundle"));
                    let out = common::run(Command::new(&self.decompress).args([
                        self.rocm_llvm.as_os_str(),
                        stored_path.as_os_str(),
                        decoded.as_os_str(),
                    ]));
                    assert!(out.status.success(), "ROCm LLVM decompress: {}", String::from_utf8_lossy(&out.stderr));
                    let bundle = std::fs::read(&decoded).unwrap();
                    // LLVM 19 reads CCOB v1 and v2 itself; v3 only decoded.
                    (if version <= 2 { stored_path } else { decoded }, bundle)
                }
            };
            let entries = bundle_entries(&bundle);
            found.push(FatBinary {
                start: section_offset + pos as u64,
                stored_len: len as u64,
                ccob_version,
                llvm_input,
                bundle,
                entries,
            });
            pos += len;
        }
        assert!(!found.is_empty(), "{}: no fat binary in .hip_fatbin", file.display());
        found
    }

    /// The `.hip_fatbin` section's file offset and bytes, located by
    /// llvm-readelf.
    fn hip_fatbin(&self, file: &Path) -> (u64, Vec<u8>) {
        let out = common::run(Command::new(&self.readelf).args(["-S", "-W"]).arg(file));
        let text = String::from_utf8(out.stdout).unwrap();
        let fields: Vec<&str> = text
            .lines()
            .map(|l| l.split_once(']').map_or("", |(_, rest)| rest))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|f| f.first() == Some(&".hip_fatbin"))
            .unwrap_or_else(|| panic!("{}: no .hip_fatbin section:\n{text}", file.display()));
        let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
        let (offset, size) = (hex(fields[3]), hex(fields[4]));
        let data = std::fs::read(file).unwrap();
        (offset, data[offset as usize..(offset + size) as usize].to_vec())
    }

    /// `clang-offload-bundler -list`.
    pub fn llvm_list(&self, input: &Path) -> Vec<String> {
        let out = common::run(Command::new(&self.bundler).arg("-list").arg("-type=o").arg(arg("-input=", input)));
        assert!(out.status.success(), "LLVM 19 -list {}: {}", input.display(), String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
    }

    /// `clang-offload-bundler -unbundle` of `ids` (in one run), their bytes in
    /// that order. Host entries are left out: LLVM 19 cannot unbundle a
    /// host entry on its own ("Can't find bundles for").
    pub fn llvm_unbundle(&self, input: &Path, ids: &[&str], dir: &Path) -> Vec<Vec<u8>> {
        std::fs::create_dir_all(dir).unwrap();
        let outputs: Vec<PathBuf> = (0..ids.len()).map(|i| dir.join(format!("{i}.co"))).collect();
        let mut cmd = Command::new(&self.bundler);
        cmd.args(["-unbundle", "-type=o"]).arg(arg("-input=", input)).arg(format!("-targets={}", ids.join(",")));
        for o in &outputs {
            cmd.arg(arg("-output=", o));
        }
        let out = common::run(&mut cmd);
        assert!(
            out.status.success(),
            "LLVM 19 -unbundle {}: {}",
            input.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.iter().map(|o| std::fs::read(o).unwrap()).collect()
    }
}

fn arg(prefix: &str, path: &Path) -> String {
    format!("{prefix}{}", path.display())
}

/// Start of the next fat binary after the one at `pos`: the next page
/// boundary holding a bundle or CCOB magic, or the section's end.
fn next_fat_binary(section: &[u8], pos: usize) -> usize {
    let mut p = pos - pos % FAT_BINARY_ALIGN + FAT_BINARY_ALIGN;
    while p < section.len() {
        if section[p..].starts_with(BUNDLE_MAGIC) || section[p..].starts_with(CCOB_MAGIC) {
            return p;
        }
        p += FAT_BINARY_ALIGN;
    }
    section.len()
}

/// The entry table of an uncompressed bundle (magic, count, then offset,
/// size, ID length and ID per entry, little-endian u64s).
pub fn bundle_entries(bundle: &[u8]) -> Vec<Entry> {
    assert!(bundle.starts_with(BUNDLE_MAGIC), "not a bundle");
    let u64_at = |at: usize| u64::from_le_bytes(bundle[at..at + 8].try_into().unwrap());
    let count = u64_at(24);
    let mut at = 32;
    let mut entries = Vec::new();
    for _ in 0..count {
        let (offset, size, id_len) = (u64_at(at), u64_at(at + 8), u64_at(at + 16) as usize);
        let id = String::from_utf8(bundle[at + 24..at + 24 + id_len].to_vec()).unwrap();
        entries.push(Entry { id, offset, size });
        at += 24 + id_len;
    }
    entries
}

/// Compiles `real_corpus_helpers/<name>.c` with `cc`.
fn compile(dir: &Path, name: &str, libs: &[&str]) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/support/real_corpus_helpers/{name}.c"));
    let exe = dir.join(name);
    let out = common::run(Command::new("cc").args(["-O1", "-o"]).arg(&exe).arg(&src).args(libs));
    assert!(out.status.success(), "cc {}: {}", src.display(), String::from_utf8_lossy(&out.stderr));
    exe
}

/// Debian's comgr, asked through `comgr_lookup`.
pub struct Comgr {
    tool: PathBuf,
    processors: BTreeSet<String>,
    dir: PathBuf,
}

impl Comgr {
    pub fn knows(&self, processor: &str) -> bool {
        self.processors.contains(processor)
    }

    /// The (offset, size) comgr picks in `bundle` for each GPU, `None` where
    /// it finds none (one run for all GPUs).
    pub fn lookup(&self, bundle: &[u8], gpus: &[Gpu]) -> Vec<Option<(u64, u64)>> {
        let path = self.dir.join("lookup-input.bundle");
        std::fs::write(&path, bundle).unwrap();
        let out = common::run(Command::new(&self.tool).arg(&path).args(gpus.iter().map(|g| &g.isa)));
        assert!(out.status.success(), "comgr_lookup: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let answers: Vec<Option<(u64, u64)>> = text
            .lines()
            .zip(gpus)
            .map(|(line, gpu)| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                assert_eq!(fields.first(), Some(&gpu.isa.as_str()), "comgr_lookup printed {line:?}");
                match fields[1..] {
                    ["0", "0"] => None,
                    [offset, size] => Some((offset.parse().unwrap(), size.parse().unwrap())),
                    _ => panic!("comgr_lookup printed {line:?}"),
                }
            })
            .collect();
        assert_eq!(answers.len(), gpus.len(), "comgr_lookup printed {text:?}");
        answers
    }
}

/// Every GPU to ask about: each AMDGPU processor in the corpus, bare and with
/// every feature setting a device of that processor can report.
pub fn corpus_gpus(refs: &References, corpus: &Corpus) -> Vec<Gpu> {
    let tmp = tempfile::tempdir().unwrap();
    let mut processors = BTreeSet::new();
    for file in corpus.files() {
        for fb in refs.fat_binaries(&file, tmp.path()) {
            for e in &fb.entries {
                if let Some(target) = e.id.split_once("-amdgcn-amd-amdhsa--").map(|(_, t)| t) {
                    processors.insert(target.split(':').next().unwrap().to_string());
                }
            }
        }
    }
    let mut gpus = Vec::new();
    for p in processors {
        let settings: Vec<Vec<(&'static str, bool)>> = if SRAMECC_AND_XNACK.contains(&p.as_str()) {
            let mut v = vec![vec![]];
            for s in [true, false] {
                for x in [true, false] {
                    v.push(vec![("sramecc", s), ("xnack", x)]);
                }
            }
            v
        } else if XNACK_ONLY.contains(&p.as_str()) {
            vec![vec![], vec![("xnack", true)], vec![("xnack", false)]]
        } else {
            vec![vec![]]
        };
        for features in settings {
            let mut isa = format!("amdgcn-amd-amdhsa--{p}");
            for (f, on) in &features {
                isa.push_str(&format!(":{f}{}", if *on { '+' } else { '-' }));
            }
            gpus.push(Gpu { processor: p.clone(), features, isa });
        }
    }
    gpus
}

/// The rule of docs/reference/selection-rules.md, for HIP on a bundle with
/// no generic or SPIR-V entries: kinds hip/hipv4/hcc, triple
/// `amdgcn-amd-amdhsa` with an empty environment, the same processor, every
/// fixed feature set the same way on the GPU; among those the one fixing
/// most features, then the first.
pub fn documented_choice(fb: &FatBinary, gpus: &[Gpu]) -> Vec<Option<Entry>> {
    gpus.iter().map(|gpu| documented_choice_for(fb, gpu)).collect()
}

fn documented_choice_for(fb: &FatBinary, gpu: &Gpu) -> Option<Entry> {
    let mut best: Option<(usize, &Entry)> = None;
    for e in &fb.entries {
        assert!(!e.id.contains("generic") && !e.id.contains("spirv"), "the rule here lacks fallbacks: {}", e.id);
        let Some((kind, rest)) = e.id.split_once('-') else { continue };
        let Some(target) = rest.strip_prefix("amdgcn-amd-amdhsa--") else { continue };
        if !matches!(kind, "hip" | "hipv4" | "hcc") {
            continue;
        }
        let mut parts = target.split(':');
        if parts.next() != Some(gpu.processor.as_str()) {
            continue;
        }
        let fixed: Vec<&str> = parts.collect();
        let compatible = fixed.iter().all(|f| {
            let (name, on) = (&f[..f.len() - 1], f.ends_with('+'));
            gpu.features.iter().any(|&(g, g_on)| g == name && g_on == on)
        });
        if compatible && best.is_none_or(|(n, _)| fixed.len() > n) {
            best = Some((fixed.len(), e));
        }
    }
    best.map(|(_, e)| e.clone())
}
