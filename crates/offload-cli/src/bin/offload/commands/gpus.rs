//! `offload gpus`: the GPUs of this machine as the runtimes will see them
//! (detection lives in `offload_host::gpus`; this file only prints).

use crate::output;
use offload_host::gpus::{self, Environment, LocalGpu, Probe, Setting};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The environment variable that names a sysfs tree when `--sysfs-root`
/// does not.
const ROOT_VAR: &str = "OFFLOAD_SYSFS_ROOT";

/// `--json`'s output (docs/guide/gpus.md).
#[derive(Serialize)]
struct Report<'a> {
    gpus: Vec<GpuRecord<'a>>,
    notes: &'a [String],
    warnings: &'a [String],
}

#[derive(Serialize)]
struct GpuRecord<'a> {
    index: usize,
    vendor: &'static str,
    arch: &'static str,
    /// The processor the runtime asks code objects for.
    processor: &'a str,
    /// What `offload select --gpu` takes for this GPU.
    target_id: String,
    /// The real processor when `HSA_OVERRIDE_GFX_VERSION` replaced it.
    physical_processor: Option<&'a str>,
    xnack: Option<SettingRecord>,
    sramecc: Option<SettingRecord>,
    name: Option<&'a str>,
    device_id: Option<u32>,
    kfd_node: Option<u32>,
}

#[derive(Serialize)]
struct SettingRecord {
    /// `null`: could not be told.
    on: Option<bool>,
    source: &'static str,
}

fn setting_record(s: Option<Setting>) -> Option<SettingRecord> {
    s.map(|s| SettingRecord { on: s.on, source: s.origin.name() })
}

fn record(g: &LocalGpu) -> GpuRecord<'_> {
    GpuRecord {
        index: g.index,
        vendor: g.vendor.name(),
        arch: g.gpu.arch,
        processor: &g.gpu.processor,
        target_id: g.gpu.target_id(),
        physical_processor: g.physical.as_deref(),
        xnack: setting_record(g.xnack),
        sramecc: setting_record(g.sramecc),
        name: g.name.as_deref(),
        device_id: g.device_id,
        kfd_node: g.node,
    }
}

/// `on (noretry)`, `unknown`, or `-` for a processor without the feature.
fn setting_text(s: Option<Setting>) -> String {
    match s {
        None => "-".into(),
        Some(Setting { on: None, .. }) => "unknown".into(),
        Some(Setting { on: Some(on), origin }) => format!("{} ({})", if on { "on" } else { "off" }, origin.name()),
    }
}

/// `offload gpus`'s options.
#[derive(clap::Args, Debug, PartialEq, Eq)]
pub struct GpusArgs {
    /// Read sysfs under DIR instead of / (default: $OFFLOAD_SYSFS_ROOT, read by the command)
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<std::path::PathBuf>,
    /// Machine-readable output (schema in docs/reference/json.md)
    #[arg(long)]
    pub json: bool,
}

impl GpusArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        run(&ctx.argv0, self.sysfs_root.as_deref(), self.json)
    }
}

fn run(argv0: &str, sysfs_root: Option<&Path>, json: bool) -> u8 {
    let root: Option<PathBuf> = sysfs_root
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(ROOT_VAR).filter(|v| !v.is_empty()).map(PathBuf::from));
    if let Some(root) = &root
        && !root.is_dir()
    {
        eprintln!("{argv0}: error: sysfs root '{}' is not a directory", root.display());
        return 1;
    }
    let scan = match gpus::scan(&Probe { root, env: Environment::from_process() }) {
        Ok(scan) => scan,
        Err(e) => {
            eprintln!("{argv0}: error: {e}");
            return 1;
        }
    };
    for w in &scan.warnings {
        eprintln!("{argv0}: warning: {w}");
    }
    if json {
        let report =
            Report { gpus: scan.gpus.iter().map(record).collect(), notes: &scan.notes, warnings: &scan.warnings };
        if let Err(code) = crate::output::print_pretty(argv0, &report) {
            return code;
        }
        return 0;
    }
    if scan.gpus.is_empty() {
        println!("no GPUs found");
    } else {
        let header = ["INDEX", "VENDOR", "TARGET ID", "PHYSICAL", "XNACK", "SRAMECC", "NAME", "DEVICE", "NODE"];
        let rows: Vec<Vec<String>> = scan
            .gpus
            .iter()
            .map(|g| {
                vec![
                    g.index.to_string(),
                    g.vendor.name().to_string(),
                    g.gpu.target_id(),
                    g.physical.clone().unwrap_or_else(|| "-".into()),
                    setting_text(g.xnack),
                    setting_text(g.sramecc),
                    g.name.clone().unwrap_or_else(|| "-".into()),
                    g.device_id.map_or_else(|| "-".into(), |d| format!("{d:#06x}")),
                    g.node.map_or_else(|| "-".into(), |n| n.to_string()),
                ]
            })
            .collect();
        print!("{}", output::table(&header, &rows));
    }
    for note in &scan.notes {
        println!("note: {note}");
    }
    0
}
