//! Helpers for the `offload` inspector tests: running the binary, building
//! HIP files with clang 19, and extracting entries with LLVM's own tools to
//! compare with.
#![allow(dead_code)]

use crate::common;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// An ELF header for an AMDGPU code object with these `e_flags` (code
/// object v5), followed by a marker so payloads differ.
pub fn elf(flags: u32, marker: &str) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    h[6] = 1;
    h[7] = 64;
    h[8] = 3;
    h[18..20].copy_from_slice(&224u16.to_le_bytes());
    h[48..52].copy_from_slice(&flags.to_le_bytes());
    h.extend_from_slice(marker.as_bytes());
    h
}

pub fn offload(args: &[&str]) -> Output {
    common::run(Command::new(env!("CARGO_BIN_EXE_offload")).args(args))
}

pub fn json(out: &Output) -> Vec<Value> {
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
        .as_array()
        .cloned()
        .unwrap()
}

pub fn list_json(path: &Path) -> Vec<Value> {
    let out = offload(&["list", "--json", path.to_str().unwrap()]);
    assert!(out.status.success(), "list failed: {}", String::from_utf8_lossy(&out.stderr));
    json(&out)
}

pub fn s<'v>(v: &'v Value, key: &str) -> &'v str {
    v[key].as_str().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

pub fn n(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// The LLVM 19 tools the live tests need (ignored without `has_llvm19`).
pub struct Llvm {
    dir: PathBuf,
}

impl Llvm {
    pub fn get() -> Llvm {
        for t in
            ["clang", "clang-offload-bundler", "clang-offload-packager", "llvm-objcopy", "llvm-ar", "llc", "ld.lld"]
        {
            common::llvm_tool(19, t);
        }
        Llvm { dir: common::llvm_bin_dir(19) }
    }

    pub fn tool(&self, name: &str) -> Command {
        Command::new(self.dir.join(name))
    }

    /// Runs a tool and asserts it succeeded.
    pub fn run(&self, name: &str, args: &[&str]) -> Output {
        let out = common::run(self.tool(name).args(args));
        assert!(out.status.success(), "{name} {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
        out
    }

    /// A real AMDGPU code object for `cpu` with `attrs` (e.g. `+xnack`).
    pub fn code_object(&self, dir: &Path, cpu: &str, attrs: &str) -> PathBuf {
        let ll = dir.join("k.ll");
        std::fs::write(&ll, "define amdgpu_kernel void @k(ptr %p) {\n  store i32 1, ptr %p\n  ret void\n}\n").unwrap();
        let out = dir.join(format!("{cpu}{}.co", attrs.replace([',', '+', '-'], "_")));
        let mut args = vec!["-mtriple=amdgcn-amd-amdhsa", "-filetype=obj"];
        let mcpu = format!("-mcpu={cpu}");
        let mattr = format!("-mattr={attrs}");
        args.push(&mcpu);
        if !attrs.is_empty() {
            args.push(&mattr);
        }
        let o = dir.join("k.o.tmp");
        args.extend([ll.to_str().unwrap(), "-o", o.to_str().unwrap()]);
        self.run("llc", &args);
        self.run("ld.lld", &["-shared", o.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        out
    }

    /// Compiles HIP source for `archs` into a host object with `.hip_fatbin`.
    pub fn hip_object(&self, dir: &Path, name: &str, archs: &[&str], extra: &[&str]) -> PathBuf {
        let src = dir.join(format!("{name}.hip"));
        std::fs::write(
            &src,
            format!(
                "#define __global__ __attribute__((global))\n\
                 struct dim3 {{ unsigned x, y, z; }};\n\
                 typedef struct ihipStream_t *hipStream_t;\n\
                 extern \"C\" int hipLaunchKernel(const void *f, dim3 g, dim3 b, void **a, unsigned long s, hipStream_t t);\n\
                 __global__ void {name}_kernel(float *x, float a) {{ x[__builtin_amdgcn_workitem_id_x()] *= a; }}\n\
                 extern \"C\" int {name}_host(void) {{ return 42; }}\n"
            ),
        )
        .unwrap();
        let obj = dir.join(format!("{name}.o"));
        let offload_archs: Vec<String> = archs.iter().map(|a| format!("--offload-arch={a}")).collect();
        let mut args: Vec<&str> = vec!["-x", "hip", "-nogpulib", "-nogpuinc", "-fPIC", "-c"];
        args.extend(offload_archs.iter().map(String::as_str));
        args.extend(extra);
        args.extend([src.to_str().unwrap(), "-o", obj.to_str().unwrap()]);
        self.run("clang", &args);
        obj
    }

    pub fn shared(&self, out: &Path, objects: &[&Path]) {
        let mut args = vec!["-shared", "-o", out.to_str().unwrap()];
        args.extend(objects.iter().map(|p| p.to_str().unwrap()));
        self.run("clang", &args);
    }

    /// The contents of a section (via llvm-objcopy).
    pub fn section(&self, file: &Path, name: &str) -> Vec<u8> {
        let out = file.with_extension(format!("{}.section", name.replace([',', '.'], "_")));
        let spec = format!("{name}={}", out.display());
        self.run("llvm-objcopy", &["--dump-section", &spec, file.to_str().unwrap(), "/dev/null"]);
        std::fs::read(out).unwrap()
    }

    /// What LLVM's bundler lists for a bundle file.
    pub fn bundle_ids(&self, bundle: &Path) -> Vec<String> {
        let input = format!("-input={}", bundle.display());
        let out = self.run("clang-offload-bundler", &["-list", "-type=bc", &input]);
        String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect()
    }

    /// What LLVM's bundler extracts for `id` from a bundle file. Host IDs
    /// are requested without their trailing dashes: LLVM 19 standardizes a
    /// requested ID that ends in `-` into one it cannot find.
    pub fn unbundle(&self, bundle: &Path, id: &str) -> Vec<u8> {
        let id = if id.starts_with("host-") { id.trim_end_matches('-') } else { id };
        let out = bundle.with_extension(format!("{}.out", id.replace(':', "_")));
        let args = [
            "-unbundle".to_string(),
            "-type=bc".into(),
            format!("-targets={id}"),
            format!("-input={}", bundle.display()),
            format!("-output={}", out.display()),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run("clang-offload-bundler", &args);
        std::fs::read(out).unwrap()
    }
}

fn u64_at(d: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(d[at..at + 8].try_into().unwrap())
}

/// Splits a `.hip_fatbin` section into its bundles and compressed bundles,
/// by their headers alone (a deliberately independent walk).
pub fn split_payloads(section: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < section.len() {
        if section[pos] == 0 {
            pos += 1;
            continue;
        }
        let rest = &section[pos..];
        let len = if rest.starts_with(b"CCOB") {
            match u16::from_le_bytes([rest[4], rest[5]]) {
                2 => u32::from_le_bytes(rest[8..12].try_into().unwrap()) as usize,
                3 => u64_at(rest, 8) as usize,
                v => panic!("CCOB version {v}"),
            }
        } else {
            assert!(rest.starts_with(b"__CLANG_OFFLOAD_BUNDLE__"), "unknown data at {pos}");
            let mut p = 32;
            let mut end = 0;
            for _ in 0..u64_at(rest, 24) {
                let (off, size, id) = (u64_at(rest, p), u64_at(rest, p + 8), u64_at(rest, p + 16));
                end = end.max(off + size);
                p += 24 + id as usize;
            }
            end.max(p as u64) as usize
        };
        out.push(rest[..len].to_vec());
        pos += len;
    }
    out
}

/// The payload index a location names (`... #2` is 2, no index is 0).
pub fn payload_index(location: &str) -> usize {
    location.rsplit(' ').next().and_then(|t| t.strip_prefix('#')).map_or(0, |k| k.parse().unwrap())
}

/// Checks every bundle record of `records` found in section `section` of
/// `file` against LLVM's bundler: the IDs it lists, the bytes it extracts,
/// and (when not compressed) the bytes at the record's offset. Returns the
/// number of code objects compared.
pub fn check_section_against_llvm(llvm: &Llvm, file: &Path, section: &str, records: &[Value], work: &Path) -> usize {
    let data = std::fs::read(file).unwrap();
    let pieces = split_payloads(&llvm.section(file, section));
    let mut compared = 0;
    for (k, piece) in pieces.iter().enumerate() {
        let piece_path = work.join(format!("piece{k}.bin"));
        std::fs::write(&piece_path, piece).unwrap();
        let mut llvm_ids = llvm.bundle_ids(&piece_path);
        let mine: Vec<(usize, &Value)> = records
            .iter()
            .enumerate()
            .filter(|(_, r)| s(r, "location").starts_with(&format!("section {section}")))
            .filter(|(_, r)| payload_index(s(r, "location")) == k)
            .collect();
        let mut my_ids: Vec<String> = mine.iter().map(|(_, r)| s(r, "id").to_string()).collect();
        llvm_ids.sort();
        my_ids.sort();
        assert_eq!(my_ids, llvm_ids, "IDs of payload {k} in {section}");
        for (index, r) in mine {
            let expected = llvm.unbundle(&piece_path, s(r, "id"));
            assert_eq!(n(r, "size"), expected.len() as u64, "size of {r}");
            assert_eq!(r["compressed"].as_bool().unwrap(), piece.starts_with(b"CCOB"));
            match r["offset"].as_u64() {
                Some(off) => assert_eq!(&data[off as usize..off as usize + expected.len()], &expected[..], "{r}"),
                None => {
                    assert!(piece.starts_with(b"CCOB"));
                    let got = work.join(format!("x{index}"));
                    let out = offload(&[
                        "extract",
                        "--index",
                        &index.to_string(),
                        "-o",
                        got.to_str().unwrap(),
                        file.to_str().unwrap(),
                    ]);
                    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                    assert_eq!(std::fs::read(&got).unwrap(), expected, "{r}");
                }
            }
            compared += 1;
        }
    }
    compared
}
