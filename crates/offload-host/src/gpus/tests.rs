//! Detection against KFD trees written by the tests from the recorded node
//! files in `tests/fixtures/kfd`.

use super::*;
use std::fs;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-testkit/fixtures/kfd");

/// A root with a CPU node 0 and one GPU node per model, and the amdgpu
/// `noretry` parameter when given.
fn tree(models: &[&str], noretry: Option<&str>) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let nodes = root.path().join("sys/class/kfd/kfd/topology/nodes");
    for (n, model) in std::iter::once("cpu").chain(models.iter().copied()).enumerate() {
        let dir = nodes.join(n.to_string());
        fs::create_dir_all(&dir).unwrap();
        fs::copy(format!("{FIXTURES}/{model}.properties"), dir.join("properties")).unwrap();
        let name = fs::read_to_string(format!("{FIXTURES}/{model}.name")).unwrap_or_default();
        fs::write(dir.join("name"), name).unwrap();
    }
    if let Some(value) = noretry {
        let params = root.path().join("sys/module/amdgpu/parameters");
        fs::create_dir_all(&params).unwrap();
        fs::write(params.join("noretry"), format!("{value}\n")).unwrap();
    }
    root
}

fn scan_with(root: &tempfile::TempDir, env: Environment) -> Scan {
    scan(&Probe { root: Some(root.path().to_path_buf()), env }).unwrap()
}

fn target_ids(scan: &Scan) -> Vec<String> {
    scan.gpus.iter().map(|g| g.gpu.target_id()).collect()
}

#[test]
fn every_model_maps_to_its_processor() {
    let models = ["mi300x", "mi250x", "mi50", "rx6800", "rx7900xtx", "strixhalo", "mi355x", "renoir"];
    let root = tree(&models, Some("1"));
    let found = scan_with(&root, Environment::default());
    assert_eq!(found.warnings, Vec::<String>::new());
    assert_eq!(
        target_ids(&found),
        [
            "gfx942:sramecc+:xnack-",
            "gfx90a:sramecc+:xnack-",
            "gfx906:sramecc+:xnack-",
            "gfx1030",
            "gfx1100",
            "gfx1151",
            "gfx950:sramecc+:xnack-",
            "gfx90c:xnack-",
        ]
    );
    // The CPU node 0 is skipped; GPUs keep their node numbers.
    assert_eq!(found.gpus.iter().map(|g| g.node).collect::<Vec<_>>(), (1..=8).map(Some).collect::<Vec<_>>());
    assert_eq!(found.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    let mi300x = &found.gpus[0];
    assert_eq!((mi300x.device_id, mi300x.name.as_deref()), (Some(0x74a1), None), "'ip discovery' names nothing");
    assert_eq!(found.gpus[1].name.as_deref(), Some("aldebaran"));
    assert_eq!(mi300x.sramecc, Some(Setting { on: Some(true), origin: Origin::Capability }));
    assert_eq!(mi300x.xnack, Some(Setting { on: Some(false), origin: Origin::Noretry }));
    assert_eq!(found.gpus[3].xnack, None, "gfx1030 has no xnack feature");
    assert!(found.gpus.iter().all(|g| g.vendor == Vendor::Amd && g.physical.is_none()));
}

#[test]
fn eight_mi300x_nodes() {
    let root = tree(&["mi300x"; 8], None);
    let found = scan_with(&root, Environment { hsa_xnack: Some("1".into()), ..Default::default() });
    assert_eq!(target_ids(&found), vec!["gfx942:sramecc+:xnack+"; 8]);
    assert!(found.gpus.iter().all(|g| g.xnack == Some(Setting { on: Some(true), origin: Origin::HsaXnack })));
}

#[test]
fn sramecc_off_when_the_capability_bit_is_clear() {
    let root = tree(&["mi250x"], Some("0"));
    let path = root.path().join("sys/class/kfd/kfd/topology/nodes/1/properties");
    let text = fs::read_to_string(&path).unwrap().replace("capability 746594944", "capability 679486080");
    fs::write(&path, text).unwrap();
    assert_eq!(target_ids(&scan_with(&root, Environment::default())), ["gfx90a:sramecc-:xnack+"]);
}

#[test]
fn xnack_from_hsa_xnack_then_noretry_then_driver_default() {
    let env = |v: Option<&str>| Environment { hsa_xnack: v.map(String::from), ..Default::default() };
    let xnack = |noretry, hsa: Option<&str>| {
        let root = tree(&["mi250x", "renoir"], noretry);
        scan_with(&root, env(hsa)).gpus.iter().map(|g| g.xnack.unwrap()).collect::<Vec<_>>()
    };
    let s = |on, origin| Setting { on, origin };
    // HSA_XNACK wins over the driver.
    assert_eq!(xnack(Some("1"), Some("1")), [s(Some(true), Origin::HsaXnack); 2]);
    assert_eq!(xnack(Some("0"), Some("0")), [s(Some(false), Origin::HsaXnack); 2]);
    // An explicit noretry.
    assert_eq!(xnack(Some("0"), None), [s(Some(true), Origin::Noretry); 2]);
    assert_eq!(xnack(Some("1"), Some("yes")), [s(Some(false), Origin::Noretry); 2]);
    let root = tree(&["mi250x"], Some("1"));
    let warned = scan_with(&root, env(Some("yes"))).warnings;
    assert_eq!(warned, ["HSA_XNACK='yes' is not 0 or 1; ignored"]);
    // -1: the driver's default per chip: off for gfx90a; gfx90c's default
    // changed with the kernel version, so unknown, and the note says why.
    assert_eq!(xnack(Some("-1"), None), [s(Some(false), Origin::DriverDefault), s(None, Origin::Unknown)]);
    let root = tree(&["renoir"], Some("-1"));
    let notes = scan_with(&root, env(None)).notes.join("\n");
    assert!(notes.contains("depends on the kernel version"), "{notes}");
    // No parameter file: unknown, and said why.
    let root = tree(&["mi250x"], None);
    let found = scan_with(&root, env(None));
    assert_eq!(found.gpus[0].xnack, Some(s(None, Origin::Unknown)));
    assert_eq!(found.gpus[0].gpu.target_id(), "gfx90a:sramecc+");
    assert!(found.notes.iter().any(|n| n.contains("noretry")), "{:?}", found.notes);
    // Eight GPUs with the same unknown setting: one note.
    let root = tree(&["mi300x"; 8], None);
    assert_eq!(scan_with(&root, env(None)).notes.len(), 1);
}

#[test]
fn driver_default_is_xnack_on_for_chips_outside_the_noretry_list() {
    let root = tree(&["mi50"], Some("-1"));
    let path = root.path().join("sys/class/kfd/kfd/topology/nodes/1/properties");
    // gfx909 (Raven 2, GC 9.2.2) is not in the driver's noretry list.
    let text = fs::read_to_string(&path).unwrap().replace("gfx_target_version 90006", "gfx_target_version 90009");
    fs::write(&path, text).unwrap();
    let found = scan_with(&root, Environment::default());
    assert_eq!(found.gpus[0].xnack, Some(Setting { on: Some(true), origin: Origin::DriverDefault }));
    assert_eq!(target_ids(&found), ["gfx909:xnack+"]);
}

#[test]
fn hsa_override_gfx_version_replaces_the_processor_and_says_so() {
    let root = tree(&["strixhalo", "rx6800"], Some("-1"));
    let env = Environment { hsa_override_gfx_version: Some("10.3.0".into()), ..Default::default() };
    let found = scan_with(&root, env);
    assert_eq!(target_ids(&found), ["gfx1030", "gfx1030"]);
    assert_eq!(found.gpus[0].physical.as_deref(), Some("gfx1151"));
    assert_eq!(found.gpus[1].physical, None, "already a gfx1030");
    assert!(found.notes.iter().any(|n| n.contains("HSA_OVERRIDE_GFX_VERSION=10.3.0")), "{:?}", found.notes);

    // Stepping above 9 and features of the effective processor.
    let root = tree(&["mi300x"], Some("1"));
    let env = Environment { hsa_override_gfx_version: Some("9.0.10".into()), ..Default::default() };
    assert_eq!(target_ids(&scan_with(&root, env)), ["gfx90a:sramecc+:xnack-"]);

    for bad in ["10.3", "x.y.z", "10.300.0", "99999999.0.0", ""] {
        let env = Environment { hsa_override_gfx_version: Some(bad.into()), ..Default::default() };
        let found = scan_with(&root, env);
        assert_eq!(target_ids(&found), ["gfx942:sramecc+:xnack-"], "{bad}");
        assert!(found.warnings.iter().any(|w| w.contains("ignored")), "{bad}: {:?}", found.warnings);
    }
}

#[test]
fn unknown_version_is_named_and_warned() {
    let root = tree(&["rx6800"], None);
    let path = root.path().join("sys/class/kfd/kfd/topology/nodes/1/properties");
    let text = fs::read_to_string(&path).unwrap().replace("gfx_target_version 100300", "gfx_target_version 130015");
    fs::write(&path, text).unwrap();
    let found = scan_with(&root, Environment::default());
    assert_eq!(target_ids(&found), ["gfx130f"]);
    assert!(found.warnings.iter().any(|w| w.contains("not in this tool's processor table")));
}

#[test]
fn malformed_files_are_warnings() {
    let root = tree(&["mi250x", "rx6800", "mi50"], Some("banana"));
    let nodes = root.path().join("sys/class/kfd/kfd/topology/nodes");
    // Node 1: garbage lines around good ones; node 2: binary junk with no
    // version; node 3: no properties file; a non-numeric node directory.
    let good = fs::read_to_string(nodes.join("1/properties")).unwrap();
    fs::write(nodes.join("1/properties"), format!("junk\nkey 1 2\nneg -5\n{good}")).unwrap();
    fs::write(nodes.join("2/properties"), b"\xff\xfe\x00 gfx_target_version\n\n").unwrap();
    fs::remove_file(nodes.join("3/properties")).unwrap();
    fs::create_dir_all(nodes.join("not-a-node")).unwrap();
    let found = scan_with(&root, Environment::default());
    assert_eq!(target_ids(&found), ["gfx90a:sramecc+"]);
    let all = found.warnings.join("\n");
    for expected in [
        "1/properties:1: not a 'key value' line",
        "1/properties:3:",
        "node 2 skipped",
        "node 3 skipped",
        "'banana' is not 0, 1 or -1",
    ] {
        assert!(all.contains(expected), "missing '{expected}' in:\n{all}");
    }
}

#[test]
fn huge_values_and_no_topology() {
    let root = tree(&["mi50"], None);
    let path = root.path().join("sys/class/kfd/kfd/topology/nodes/1/properties");
    fs::write(&path, "gfx_target_version 18446744073709551615\nsimd_count 1\n").unwrap();
    let found = scan_with(&root, Environment::default());
    assert!(found.gpus.is_empty());
    assert!(found.warnings[0].contains("no valid gfx_target_version"), "{:?}", found.warnings);

    let empty = tempfile::tempdir().unwrap();
    let found = scan_with(&empty, Environment::default());
    assert_eq!(found, Scan::default(), "no KFD: no AMD GPUs, not an error");
}

#[test]
fn properties_parser() {
    let mut bad = Vec::new();
    let p = kfd::Properties::parse("a 1\n\n b  2 \nc\nd 3 4\ne 0x10\n", &mut bad);
    assert_eq!((p.get("a"), p.get("b"), p.get("c"), p.get("e")), (Some(1), Some(2), None, None));
    assert_eq!(bad.iter().map(|(n, _)| *n).collect::<Vec<_>>(), [4, 5, 6]);
}

#[test]
fn compute_capability_to_gpu() {
    let gpu = gpu_from_compute_capability(9, 0).unwrap();
    assert_eq!((gpu.arch, gpu.target_id()), ("nvptx64", "sm_90".to_string()));
    assert_eq!(gpu_from_compute_capability(12, 0).unwrap().processor, "sm_120");
    assert_eq!(gpu, offload_inspect::select::Gpu::parse("sm_90").unwrap());
    for (major, minor) in [(0, 0), (-1, 5), (8, 10), (100, 0)] {
        assert_eq!(gpu_from_compute_capability(major, minor), None, "{major}.{minor}");
    }
}

#[test]
fn a_root_scan_never_asks_nvml_and_a_local_scan_does_not_fail_without_it() {
    // This machine has no NVIDIA driver: the local scan lists no NVIDIA GPU
    // and reports no error either way.
    let local = scan(&Probe::default()).unwrap();
    if std::path::Path::new("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1").exists() {
        eprintln!("libnvidia-ml present: the absent path is not exercised here");
    } else {
        assert!(local.gpus.iter().all(|g| g.vendor != Vendor::Nvidia));
        assert!(local.warnings.iter().all(|w| !w.contains("libnvidia-ml")), "{:?}", local.warnings);
    }
}

#[test]
fn local_gpus_are_what_select_takes() {
    // Each GPU must be the canonical `Gpu` that `--gpu TARGET-ID` parses
    // to, so `offload check` can hand it to `select` unchanged.
    let root = tree(&["mi300x", "mi250x", "rx7900xtx", "renoir"], Some("0"));
    for local in scan_with(&root, Environment::default()).gpus {
        assert_eq!(offload_inspect::select::Gpu::parse(&local.gpu.target_id()).unwrap(), local.gpu);
        assert_eq!(local.gpu.warning(), None, "{}", local.gpu);
    }
}

#[test]
fn special_files_are_refused_not_read() {
    let root = tree(&["mi50", "rx6800"], None);
    let nodes = root.path().join("sys/class/kfd/kfd/topology/nodes");
    // A FIFO would block a reader forever; a device would never end.
    fs::remove_file(nodes.join("1/properties")).unwrap();
    let fifo = std::ffi::CString::new(nodes.join("1/properties").to_str().unwrap()).unwrap();
    // SAFETY: a valid C path string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    fs::remove_file(nodes.join("2/properties")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", nodes.join("2/properties")).unwrap();
    let found = scan_with(&root, Environment::default());
    assert!(found.gpus.is_empty());
    assert_eq!(found.warnings.iter().filter(|w| w.contains("not a regular file")).count(), 2, "{:?}", found.warnings);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Any bytes in a properties file or `noretry`: a scan that lists at
    /// most one GPU, with every line it could not parse warned about.
    #[test]
    fn any_bytes_scan_without_panicking(
        properties in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
        noretry in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..16),
        version in proptest::prelude::any::<u32>(),
    ) {
        let root = tree(&["mi50"], None);
        let node = root.path().join("sys/class/kfd/kfd/topology/nodes/1/properties");
        let mut bytes = format!("gfx_target_version {version}\nsimd_count 4\n").into_bytes();
        bytes.extend_from_slice(&properties);
        fs::write(&node, &bytes).unwrap();
        let params = root.path().join("sys/module/amdgpu/parameters");
        fs::create_dir_all(&params).unwrap();
        fs::write(params.join("noretry"), &noretry).unwrap();
        let found = scan_with(&root, Environment::default());
        proptest::prop_assert!(found.gpus.len() <= 1);
        let mut bad = Vec::new();
        kfd::Properties::parse(&String::from_utf8_lossy(&bytes), &mut bad);
        let warned = found.warnings.iter().filter(|w| w.contains("not a 'key value' line")).count();
        proptest::prop_assert_eq!(warned, bad.len());
    }
}

#[test]
fn default_xnack_for_a_gpu_named_without_it() {
    let env = |v: Option<&str>| Environment { hsa_xnack: v.map(str::to_string), ..Default::default() };
    let (on, why) = default_xnack("gfx90a", &env(None)).unwrap();
    assert!(!on && why.contains("driver's default for gfx90a"), "{why}");
    assert!(default_xnack("gfx908", &env(Some("1"))).unwrap().0);
    assert!(default_xnack("gfx902", &env(None)).unwrap().0, "GFX9 APUs default to retry on");
    assert!(default_xnack("gfx90c", &env(None)).unwrap_err().contains("kernel version"));
    assert!(default_xnack("gfx90c", &env(Some("0"))).is_ok_and(|(on, _)| !on));
    assert!(default_xnack("gfx9999", &env(None)).unwrap_err().contains("processor table"));
}
