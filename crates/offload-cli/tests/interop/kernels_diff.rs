//! `offload kernels` and `offload diff --kernels` on code objects clang
//! builds from one HIP source (tests/fixtures/kernels/pressure.hip) with
//! different register pressure: a smaller `amdgpu_flat_work_group_size`
//! (clang 19), and clang 22 with a second kernel, where `heavy` spills.

use crate::common::llvm_tool;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const OFFLOAD: &str = env!("CARGO_BIN_EXE_offload");

fn build(version: u32, dir: &Path, name: &str, defines: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels/pressure.hip");
    let out = dir.join(name);
    let status = Command::new(llvm_tool(version, "clang++"))
        .args(["-x", "hip", "--offload-arch=gfx90a", "-nogpulib", "-nogpuinc", "-O2", "--offload-device-only"])
        .args(defines)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "clang-{version} failed");
    out
}

fn offload(args: &[&str]) -> (i32, String) {
    let out = Command::new(OFFLOAD).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
#[cfg_attr(not(all(has_llvm19, has_llvm22)), ignore = "needs LLVM 19 and 22: run scripts/install-reference-llvm.sh")]
fn register_pressure_between_builds() {
    let d = tempfile::tempdir().unwrap();
    let small = build(19, d.path(), "b256.co", &["-DBOUND=256"]);
    let big = build(19, d.path(), "b1024.co", &["-DBOUND=1024"]);
    let newer = build(22, d.path(), "c22.co", &["-DBOUND=1024", "-DEXTRA"]);
    let (s, text) = offload(&["kernels", "--json", small.to_str().unwrap()]);
    assert_eq!(s, 0);
    let doc: Value = serde_json::from_str(&text).unwrap();
    let k = &doc["kernels"][0];
    assert_eq!(k["demangled"], "heavy(float*, float const*, int)");
    assert_eq!(k["resources"]["max_flat_workgroup_size"], 256);
    assert!(k["resources"]["vgprs"].as_u64().unwrap() > 0);

    // Same compiler, different launch bound: only the bound differs here.
    let (s, text) = offload(&["diff", "--kernels", "--json", small.to_str().unwrap(), big.to_str().unwrap()]);
    assert_eq!(s, 1, "{text}");
    let d1: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(d1["changed"][0]["name"], "_Z5heavyPfPKfi");
    let changed: Vec<&str> =
        d1["changed"][0]["changes"].as_array().unwrap().iter().map(|c| c["resource"].as_str().unwrap()).collect();
    assert!(changed.contains(&"max_flat_workgroup_size"), "{changed:?}");

    // clang 22: a kernel added; `heavy` spills VGPRs where clang 19 did not.
    let (s, text) = offload(&["diff", "--kernels", "--json", big.to_str().unwrap(), newer.to_str().unwrap()]);
    assert_eq!(s, 1, "{text}");
    let d2: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(d2["added"][0]["name"], "_Z5extraPf");
    assert_eq!(d2["removed"].as_array().unwrap().len(), 0);
    let heavy = &d2["changed"][0];
    assert_eq!(heavy["name"], "_Z5heavyPfPKfi");
    assert_eq!(heavy["spills_grew"], true, "{heavy}");
    let (_, text) = offload(&["diff", "--kernels", big.to_str().unwrap(), newer.to_str().unwrap()]);
    assert!(text.contains("1 kernels added, 0 removed, 1 changed (1 with more spills)"), "{text}");
}
