//! AMD GPUs from the kernel driver's KFD topology:
//! `sys/class/kfd/kfd/topology/nodes/N/properties` holds one `key value`
//! line per property (decimal integers); CPU nodes have `simd_count 0`.

use super::xnack::{self, Noretry};
use super::{Environment, LocalGpu, Origin, Scan, ScanError, Setting, Vendor};
use offload_format::amdgpu::{self, Processor};
use offload_inspect::select::Gpu;
use std::io::Read;
use std::path::Path;

const NODES: &str = "sys/class/kfd/kfd/topology/nodes";
const NORETRY: &str = "sys/module/amdgpu/parameters/noretry";

/// `HSA_CAP_SRAM_EDCSUPPORTED` in the node's `capability` (the kernel's
/// `kfd_topology.h`): the GPU runs with SRAM ECC on.
const CAP_SRAM_EDC: u64 = 0x0400_0000;

/// Sysfs files are a page; anything larger is not a KFD file.
const MAX_FILE: u64 = 64 * 1024;
/// More nodes than any machine has; bounds the work on a hostile tree.
const MAX_NODES: usize = 4096;

/// One parsed `properties` file, in file order.
pub(super) struct Properties(Vec<(String, u64)>);

impl Properties {
    /// Parses `key value` lines; a line that is not one is reported in
    /// `bad` (line number, text) and skipped.
    pub(super) fn parse(text: &str, bad: &mut Vec<(usize, String)>) -> Properties {
        let mut props = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut words = line.split_whitespace();
            match (words.next(), words.next().map(str::parse::<u64>), words.next()) {
                (Some(key), Some(Ok(value)), None) => props.push((key.to_string(), value)),
                _ => bad.push((n + 1, line.chars().take(80).collect())),
            }
        }
        Properties(props)
    }

    pub(super) fn get(&self, key: &str) -> Option<u64> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// Reads a small text file; `Ok(None)` when it does not exist. Sysfs
/// attributes are regular files: anything else (a FIFO, a device) is
/// refused before opening, since reading one could block or never end.
fn read_small(path: &Path) -> std::io::Result<Option<String>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
        Ok(m) if !m.is_file() => {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a regular file"));
        }
        Ok(_) => {}
    }
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE).read_to_end(&mut bytes)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

pub(super) fn scan(root: &Path, env: &Environment, scan: &mut Scan) -> Result<(), ScanError> {
    let dir = root.join(NODES);
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        other => other.map_err(|source| ScanError::Read { path: dir.clone(), source })?,
    };
    let mut nodes: Vec<u32> = Vec::new();
    for (count, entry) in entries.enumerate() {
        if count == MAX_NODES {
            scan.warnings.push(format!("{}: more than {MAX_NODES} entries; the rest are not read", dir.display()));
            break;
        }
        let entry = entry.map_err(|source| ScanError::Read { path: dir.clone(), source })?;
        if let Some(n) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
            nodes.push(n);
        }
    }
    nodes.sort_unstable();
    if let Some(v) = env.hsa_xnack.as_deref().filter(|v| !matches!(v.trim(), "0" | "1")) {
        scan.warnings.push(format!("HSA_XNACK='{v}' is not 0 or 1; ignored"));
    }
    let override_processor = gfx_override(env, scan);
    let noretry = read_noretry(root, scan);
    for node in nodes {
        let node_dir = dir.join(node.to_string());
        let path = node_dir.join("properties");
        let text = match read_small(&path) {
            Ok(Some(text)) => text,
            Ok(None) => {
                scan.warnings.push(format!("{}: missing; node {node} skipped", path.display()));
                continue;
            }
            Err(e) => {
                scan.warnings.push(format!("{}: {e}; node {node} skipped", path.display()));
                continue;
            }
        };
        let mut bad = Vec::new();
        let props = Properties::parse(&text, &mut bad);
        for (line, text) in bad {
            scan.warnings.push(format!("{}:{line}: not a 'key value' line: '{text}'", path.display()));
        }
        // The kernel writes its ASIC name here: a code name (`vega20`) for
        // older chips, the placeholder `ip discovery` for newer ones, which
        // names nothing.
        let name = read_small(&node_dir.join("name"))
            .ok()
            .flatten()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty() && s != "ip discovery");
        let gpu = Node { node, props: &props, name, override_processor: &override_processor, noretry, env };
        if let Some(gpu) = gpu.local_gpu(&path.display().to_string(), scan) {
            scan.gpus.push(gpu);
        }
    }
    Ok(())
}

/// The processor `HSA_OVERRIDE_GFX_VERSION` makes the runtime report, as
/// a name and its table row; notes that it is in force.
fn gfx_override(env: &Environment, scan: &mut Scan) -> Option<(String, Option<&'static Processor>)> {
    let text = env.hsa_override_gfx_version.as_deref()?.trim();
    let parts: Vec<u32> = text.split('.').filter_map(|p| p.parse().ok()).collect();
    let version = match parts.as_slice() {
        [major, minor, stepping] if text.split('.').count() == 3 && *minor < 100 && *stepping < 100 => {
            major.checked_mul(10000).map(|m| m + minor * 100 + stepping)
        }
        _ => None,
    };
    let Some(version) = version else {
        scan.warnings
            .push(format!("HSA_OVERRIDE_GFX_VERSION='{text}' is not MAJOR.MINOR.STEPPING (e.g. 10.3.0); ignored"));
        return None;
    };
    let (name, row) = processor_for(version);
    scan.notes.push(format!(
        "HSA_OVERRIDE_GFX_VERSION={text}: the runtime reports every AMD GPU as {name}, not as what it is"
    ));
    if row.is_none() {
        scan.warnings.push(format!("HSA_OVERRIDE_GFX_VERSION={text}: {name} is not in this tool's processor table"));
    }
    Some((name, row))
}

/// The processor for a `gfx_target_version`; a version missing from the
/// table is named the way the runtime names it (stepping as a hex digit).
fn processor_for(version: u32) -> (String, Option<&'static Processor>) {
    match amdgpu::processor_by_gfx_target_version(version) {
        Some(p) => (p.name.to_string(), Some(p)),
        None => {
            let (major, minor, stepping) = (version / 10000, version / 100 % 100, version % 100);
            let stepping = char::from_digit(stepping, 16).map_or_else(|| format!("_{stepping}"), String::from);
            (format!("gfx{major}{minor}{stepping}"), None)
        }
    }
}

fn read_noretry(root: &Path, scan: &mut Scan) -> Option<Noretry> {
    let path = root.join(NORETRY);
    match read_small(&path) {
        Ok(Some(text)) => match text.trim().parse::<i64>() {
            Ok(0) => Some(Noretry::Off),
            Ok(1) => Some(Noretry::On),
            Ok(-1) => Some(Noretry::Default),
            _ => {
                scan.warnings.push(format!("{}: '{}' is not 0, 1 or -1", path.display(), text.trim()));
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            scan.warnings.push(format!("{}: {e}", path.display()));
            None
        }
    }
}

/// Adds a note unless it is there already: eight GPUs with the same
/// unknown setting need one line, not eight.
fn note_once(scan: &mut Scan, note: String) {
    if !scan.notes.contains(&note) {
        scan.notes.push(note);
    }
}

struct Node<'a> {
    node: u32,
    props: &'a Properties,
    name: Option<String>,
    override_processor: &'a Option<(String, Option<&'static Processor>)>,
    noretry: Option<Noretry>,
    env: &'a Environment,
}

impl Node<'_> {
    /// The node as a GPU; `None` for a CPU node or one without a usable
    /// `gfx_target_version` (warned).
    fn local_gpu(&self, path: &str, scan: &mut Scan) -> Option<LocalGpu> {
        let version = self.props.get("gfx_target_version");
        if self.props.get("simd_count") == Some(0) || version == Some(0) {
            return None;
        }
        let Some(version) = version.and_then(|v| u32::try_from(v).ok()) else {
            scan.warnings.push(format!("{path}: no valid gfx_target_version; node {} skipped", self.node));
            return None;
        };
        let (physical, physical_row) = processor_for(version);
        if physical_row.is_none() {
            scan.warnings.push(format!(
                "{path}: gfx_target_version {version} ({physical}) is not in this tool's processor table"
            ));
        }
        let (processor, row) = match self.override_processor {
            Some((name, row)) => (name.clone(), *row),
            None => (physical.clone(), physical_row),
        };
        let sramecc = row.filter(|p| p.sramecc).map(|_| match self.props.get("capability") {
            Some(bits) => Setting { on: Some(bits & CAP_SRAM_EDC != 0), origin: Origin::Capability },
            None => {
                note_once(scan, "sramecc unknown: a KFD node has no 'capability' property".into());
                Setting { on: None, origin: Origin::Unknown }
            }
        });
        let xnack = row.filter(|p| p.xnack).map(|_| {
            let (setting, why) = xnack::resolve(self.env, self.noretry, physical_row);
            if let Some(why) = why {
                note_once(scan, format!("xnack unknown: {why}"));
            }
            setting
        });
        let gpu = Gpu {
            arch: "amdgcn",
            processor: processor.clone(),
            xnack: xnack.and_then(|s| s.on),
            sramecc: sramecc.and_then(|s| s.on),
        };
        Some(LocalGpu {
            index: 0,
            vendor: Vendor::Amd,
            gpu,
            physical: (processor != physical).then_some(physical),
            xnack,
            sramecc,
            name: self.name.clone(),
            device_id: self.props.get("device_id").and_then(|v| u32::try_from(v).ok()),
            node: Some(self.node),
        })
    }
}
