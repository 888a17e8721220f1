//! `offload gpus` against KFD trees the tests write from the recorded node
//! files in `offload-testkit/fixtures/kfd`: the table, `--json`,
//! `--sysfs-root` versus `OFFLOAD_SYSFS_ROOT`, the override note, and the
//! exit statuses.

use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../offload-testkit/fixtures/kfd").join(name)
}

/// A root with a CPU node 0, one node per model, and `noretry`.
pub(crate) fn tree(models: &[&str], noretry: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let nodes = root.path().join("sys/class/kfd/kfd/topology/nodes");
    for (n, model) in std::iter::once("cpu").chain(models.iter().copied()).enumerate() {
        let dir = nodes.join(n.to_string());
        fs::create_dir_all(&dir).unwrap();
        fs::copy(fixture(&format!("{model}.properties")), dir.join("properties")).unwrap();
        if let Ok(name) = fs::read(fixture(&format!("{model}.name"))) {
            fs::write(dir.join("name"), name).unwrap();
        }
    }
    let params = root.path().join("sys/module/amdgpu/parameters");
    fs::create_dir_all(&params).unwrap();
    fs::write(params.join("noretry"), format!("{noretry}\n")).unwrap();
    root
}

/// Runs `offload ARGS` with a clean GPU environment plus `env`.
fn offload(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_offload"));
    cmd.args(args);
    for var in ["HSA_XNACK", "HSA_OVERRIDE_GFX_VERSION", "OFFLOAD_SYSFS_ROOT"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn table_lists_every_gpu_with_its_settings() {
    let root = tree(&["mi300x", "mi300x", "rx7900xtx", "renoir"], "0");
    let o = offload(&["gpus", "--sysfs-root", p(root.path())], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    assert_eq!(
        stdout(&o),
        "\
INDEX  VENDOR  TARGET ID               PHYSICAL  XNACK         SRAMECC          NAME    DEVICE  NODE
0      amd     gfx942:sramecc+:xnack+  -         on (noretry)  on (capability)  -       0x74a1  1
1      amd     gfx942:sramecc+:xnack+  -         on (noretry)  on (capability)  -       0x74a1  2
2      amd     gfx1100                 -         -             -                -       0x744c  3
3      amd     gfx90c:xnack+           -         on (noretry)  -                renoir  0x1636  4
"
    );
}

#[test]
fn json_has_the_documented_schema() {
    let root = tree(&["mi250x", "rx6800"], "-1");
    let o = offload(&["gpus", "--json", "--sysfs-root", p(root.path())], &[("HSA_XNACK", "1")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    let mi250x = &gpus[0];
    assert_eq!(mi250x["index"], 0);
    assert_eq!(mi250x["vendor"], "amd");
    assert_eq!(mi250x["arch"], "amdgcn");
    assert_eq!(mi250x["processor"], "gfx90a");
    assert_eq!(mi250x["target_id"], "gfx90a:sramecc+:xnack+");
    assert_eq!(mi250x["physical_processor"], Value::Null);
    assert_eq!(mi250x["xnack"], serde_json::json!({"on": true, "source": "HSA_XNACK"}));
    assert_eq!(mi250x["sramecc"], serde_json::json!({"on": true, "source": "capability"}));
    assert_eq!(mi250x["name"], "aldebaran");
    assert_eq!(gpus[1]["name"], "sienna_cichlid");
    assert_eq!(mi250x["device_id"], 0x740c);
    assert_eq!(mi250x["kfd_node"], 1);
    assert_eq!(gpus[1]["target_id"], "gfx1030");
    assert_eq!(gpus[1]["xnack"], Value::Null, "gfx1030 has no xnack feature");
    assert_eq!(v["notes"], serde_json::json!([]));
    assert_eq!(v["warnings"], serde_json::json!([]));
}

#[test]
fn override_reports_both_processors_and_says_so() {
    let root = tree(&["strixhalo"], "-1");
    let o = offload(&["gpus", "--sysfs-root", p(root.path())], &[("HSA_OVERRIDE_GFX_VERSION", "10.3.0")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("0      amd     gfx1030    gfx1151"), "{out}");
    assert!(
        out.contains("note: HSA_OVERRIDE_GFX_VERSION=10.3.0: the runtime reports every AMD GPU as gfx1030"),
        "{out}"
    );
}

#[test]
fn sysfs_root_option_wins_over_the_environment() {
    let (a, b) = (tree(&["mi50"], "1"), tree(&["mi355x"], "1"));
    let env = [("OFFLOAD_SYSFS_ROOT", p(a.path()))];
    let from_env = offload(&["gpus", "--json"], &env);
    let v: Value = serde_json::from_str(&stdout(&from_env)).unwrap();
    assert_eq!(v["gpus"][0]["target_id"], "gfx906:sramecc+:xnack-");
    let from_option = offload(&["gpus", "--json", "--sysfs-root", p(b.path())], &env);
    let v: Value = serde_json::from_str(&stdout(&from_option)).unwrap();
    assert_eq!(v["gpus"][0]["target_id"], "gfx950:sramecc+:xnack-");
    assert_eq!(v["gpus"].as_array().unwrap().len(), 1);
}

#[test]
fn no_gpus_is_success_and_says_so() {
    let empty = tempfile::tempdir().unwrap();
    let o = offload(&["gpus", "--sysfs-root", p(empty.path())], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "no GPUs found\n");
    let cpu_only = tree(&[], "1");
    let o = offload(&["gpus", "--json"], &[("OFFLOAD_SYSFS_ROOT", p(cpu_only.path()))]);
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["gpus"], serde_json::json!([]));
}

#[test]
fn malformed_tree_warns_and_lists_the_rest() {
    let root = tree(&["mi250x", "rx6800"], "2");
    let props = root.path().join("sys/class/kfd/kfd/topology/nodes/2/properties");
    fs::write(&props, b"\x00\x01garbage\ngfx_target_version many\n").unwrap();
    let o = offload(&["gpus", "--sysfs-root", p(root.path())], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("warning: ") && err.contains("node 2 skipped"), "{err}");
    assert!(err.contains("'2' is not 0, 1 or -1"), "{err}");
    assert!(stdout(&o).contains("gfx90a:sramecc+ "), "xnack unknown is left out of the target ID");
    assert!(stdout(&o).contains("note: xnack unknown: "), "{}", stdout(&o));
}

#[test]
fn errors_and_usage() {
    let missing = tempfile::tempdir().unwrap().path().join("nope");
    let o = offload(&["gpus", "--sysfs-root", p(&missing)], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("is not a directory"), "{}", stderr(&o));
    let o = offload(&["gpus", "--frobnicate"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unexpected argument '--frobnicate' found"), "{}", stderr(&o));
    let o = offload(&["gpus", "--sysfs-root"], &[]);
    assert_eq!(o.status.code(), Some(2));
}
