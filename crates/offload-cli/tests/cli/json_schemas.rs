//! Every `--json` output conforms to its JSON Schema file in
//! `docs/reference/schemas/`: each command runs on shipped fixtures (HIP,
//! compressed, CUDA, OpenMP, a package, a recorded GPU tree) and its output
//! is checked with `offload_testkit::schema`. Each schema file must be used
//! by a case here, so a schema cannot go unchecked.

use offload_testkit::schema::{assert_conforms, violations};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn schema(name: &str) -> Value {
    let path = root().join(format!("docs/reference/schemas/{name}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `offload ARGS` in the repository root; its standard output as JSON.
fn json_of(args: &[&str], want_status: i32) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_offload"))
        .args(args)
        .current_dir(root())
        .env_remove("HSA_XNACK")
        .env_remove("HSA_OVERRIDE_GFX_VERSION")
        .env_remove("OFFLOAD_SYSFS_ROOT")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(want_status),
        "offload {}: stderr: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("offload {}: not JSON ({e}): {}", args.join(" "), String::from_utf8_lossy(&out.stdout))
    })
}

const INSPECT: &str = "crates/offload-cli/tests/fixtures/inspect";
const CUDA: &str = "crates/offload-cli/tests/fixtures/cuda";
const PRUNE: &str = "crates/offload-testkit/fixtures/prune";

/// (schema, arguments, exit status) of every case.
fn cases(tmp: &Path, gpu_root: &Path) -> Vec<(&'static str, Vec<String>, i32)> {
    let t = |name: &str| tmp.join(name).to_string_lossy().into_owned();
    let f = |dir: &str, name: &str| format!("{dir}/{name}");
    let v = |args: &[&str]| args.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let mut out = vec![
        ("list", v(&["list", "--json", "samples/hip-gfx906-gfx90a.compressed.bc"]), 0),
        ("list", v(&["list", "--json", &f(INSPECT, "libtwo.so"), &f(INSPECT, "libfat.a"), &f(INSPECT, "newdrv.o")]), 0),
        ("list", v(&["list", "--json", &f(CUDA, "concat.fatbin"), &f(CUDA, "obj_lto.o")]), 0),
        ("list", v(&["list", "--json", "crates/offload-cli/tests/fixtures/packages/hip-sample_1.0_amd64.deb"]), 0),
        ("select", v(&["select", "--json", "--gpu", "gfx90a:xnack-", &f(INSPECT, "libtwo.so")]), 1),
        ("select", v(&["select", "--json", "--gpu", "gfx1100", "samples/hip-gfx906-gfx90a.bc"]), 1),
        ("select", v(&["select", "--json", "--gpu", "sm_89", &f(CUDA, "concat.fatbin")]), 0),
        ("extract", v(&["extract", "--json", "--gpu", "gfx906", "--output-dir", &t(""), &f(INSPECT, "libtwo.so")]), 0),
        ("verify", v(&["verify", "--json", &f(INSPECT, "libtwo.so"), &t("cut.bc")]), 1),
        ("size", v(&["size", "--json", &f(INSPECT, "libtwo.so"), &f(CUDA, "concat.fatbin")]), 0),
        ("size", v(&["size", "--json", "--keep", "gfx906", &f(INSPECT, "libtwo.so")]), 0),
        ("diff", v(&["diff", "--json", &f(INSPECT, "libtwo.so"), &f(INSPECT, "libscale.so")]), 1),
        ("check", v(&["check", "--json", "--gpu", "gfx90a:xnack+", "--gpu", "gfx906", &f(INSPECT, "libtwo.so")]), 1),
        ("check", v(&["check", "--json", "--gpu", "gfx906", &f(INSPECT, "libscale.so")]), 0),
        ("gpus", v(&["gpus", "--json", "--sysfs-root", &gpu_root.to_string_lossy()]), 0),
        ("prune", v(&["prune", "--json", "--dry-run", "--keep", "gfx90a", &f(PRUNE, "gnu_rela.so")]), 0),
        ("prune", v(&["prune", "--json", "--keep", "gfx90a", &f(PRUNE, "gnu_rela.so"), "-o", &t("p.so")]), 0),
        (
            "prune",
            v(&["prune", "--json", "--dry-run", "--keep", "x86_64-pc-linux-gnu", &f(PRUNE, "omp/lld_relr.so")]),
            0,
        ),
        (
            "replace",
            v(&[
                "replace",
                "--json",
                "--dry-run",
                "--entry",
                "x86_64-pc-linux-gnu",
                "--with",
                &f(PRUNE, "omp/x86_image_small.so"),
                &f(PRUNE, "omp/lld_relr.so"),
            ]),
            0,
        ),
    ];
    out.push((
        "extract",
        v(&["extract", "--json", "--gpu", "sm_80", "--output-dir", &t(""), &f(CUDA, "obj_sm80.o")]),
        0,
    ));
    out
}

#[test]
fn every_json_output_conforms_to_its_schema() {
    let tmp = tempfile::tempdir().unwrap();
    // A compressed bundle cut short, for verify's findings.
    let whole = std::fs::read(root().join("samples/hip-gfx906-gfx90a.compressed.bc")).unwrap();
    std::fs::write(tmp.path().join("cut.bc"), &whole[..whole.len() - 64]).unwrap();
    let gpu_root = crate::gpus_cli::tree(&["mi300x", "rx7900xtx"], "0");
    let mut used = BTreeSet::new();
    for (name, args, status) in cases(tmp.path(), gpu_root.path()) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let value = json_of(&args, status);
        if let Value::Array(items) = &value {
            assert!(!items.is_empty(), "offload {}: an empty array checks nothing", args.join(" "));
        }
        assert_conforms(&schema(name), &value, &format!("offload {}", args.join(" ")));
        used.insert(name.to_string());
    }
    let files: BTreeSet<String> = std::fs::read_dir(root().join("docs/reference/schemas"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str()?.strip_suffix(".schema.json").map(str::to_string))
        .collect();
    assert_eq!(files, used, "every schema file is checked by a case here, and every case has its schema");
}

/// The schemas say something: a record with a key missing, a key added or
/// a value of the wrong type is caught.
#[test]
fn the_schemas_refuse_wrong_outputs() {
    let good = json_of(&["list", "--json", "samples/hip-gfx906-gfx90a.bc"], 0);
    let list = schema("list");
    assert!(violations(&list, &good).is_empty());
    let mut missing = good.clone();
    missing[0].as_object_mut().unwrap().remove("unit");
    let mut extra = good.clone();
    extra[0]["colour"] = Value::from("red");
    let mut wrong = good.clone();
    wrong[0]["size"] = Value::from("2200");
    for bad in [missing, extra, wrong] {
        assert!(!violations(&list, &bad).is_empty(), "{bad}");
    }
}
