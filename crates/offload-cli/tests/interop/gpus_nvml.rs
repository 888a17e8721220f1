//! `offload gpus`'s NVML path without an NVIDIA GPU: a stand-in
//! `libnvidia-ml.so.1` (built here with clang from the C below, found
//! through `LD_LIBRARY_PATH`) reports two GPUs and one that fails. Ignored
//! without clang 19; a failure under `OFFLOAD_REQUIRE_LLVM=1`.

use crate::common;

use serde_json::Value;
use std::process::Command;

/// The six NVML entry points `offload gpus` calls, with NVML's signatures.
const FAKE_NVML: &str = r#"
#include <stdio.h>
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 3; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { *d = (void *)(unsigned long)(i + 1); return 0; }
int nvmlDeviceGetName(void *d, char *buf, unsigned len) {
    snprintf(buf, len, "%s", d == (void *)1 ? "NVIDIA H100 80GB HBM3" : "NVIDIA GeForce RTX 4090");
    return 0;
}
int nvmlDeviceGetCudaComputeCapability(void *d, int *major, int *minor) {
    if (d == (void *)3) return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *major = d == (void *)1 ? 9 : 8;
    *minor = d == (void *)1 ? 0 : 9;
    return 0;
}
"#;

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn nvml_devices_become_sm_gpus() {
    if std::path::Path::new("/sys/class/kfd/kfd/topology/nodes").exists() {
        eprintln!("note: this machine has AMD GPUs too; only the NVIDIA rows are checked");
    }
    let clang = common::llvm_tool(19, "clang");
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("nvml.c");
    std::fs::write(&source, FAKE_NVML).unwrap();
    let lib = dir.path().join("libnvidia-ml.so.1");
    let built = common::run(Command::new(clang).args(["-shared", "-fPIC", "-o"]).arg(&lib).arg(&source));
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_offload"));
    cmd.args(["gpus", "--json"]).env("LD_LIBRARY_PATH", dir.path()).env_remove("OFFLOAD_SYSFS_ROOT");
    let o = common::run(&mut cmd);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let nvidia: Vec<&Value> = v["gpus"].as_array().unwrap().iter().filter(|g| g["vendor"] == "nvidia").collect();
    assert_eq!(nvidia.len(), 2, "{v}");
    assert_eq!(nvidia[0]["target_id"], "sm_90");
    assert_eq!(nvidia[0]["arch"], "nvptx64");
    assert_eq!(nvidia[0]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(nvidia[1]["target_id"], "sm_89");
    assert_eq!(nvidia[1]["name"], "NVIDIA GeForce RTX 4090");
    assert_eq!((&nvidia[0]["xnack"], &nvidia[0]["kfd_node"]), (&Value::Null, &Value::Null));
    assert!(stderr.contains("NVML: device 2: no valid compute capability"), "{stderr}");
}
