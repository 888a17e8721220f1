//! The GPUs of this machine, found without any vendor runtime: AMD GPUs
//! from the kernel driver's KFD topology in sysfs, NVIDIA GPUs through
//! `libnvidia-ml` when that library is installed. Each one comes back as
//! the [`Gpu`] a runtime will ask code objects for, so `inspect::select`
//! can say which code object it loads.

pub(crate) mod kfd;
mod nvml;
mod xnack;

#[cfg(test)]
mod tests;

pub use nvml::gpu_from_compute_capability;
pub use xnack::default_for as default_xnack;

use offload_inspect::select::Gpu;
use std::path::{Path, PathBuf};

/// The environment variables that change what the AMD runtime asks for,
/// passed in so that callers (and tests) decide where they come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Environment {
    /// `HSA_XNACK`: `1` runs every process in xnack mode, `0` without.
    pub hsa_xnack: Option<String>,
    /// `HSA_OVERRIDE_GFX_VERSION` (`10.3.0`): the runtime reports this ISA
    /// for every AMD GPU instead of the real one.
    pub hsa_override_gfx_version: Option<String>,
}

impl Environment {
    /// The variables of this process.
    pub fn from_process() -> Environment {
        let var = |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        Environment { hsa_xnack: var("HSA_XNACK"), hsa_override_gfx_version: var("HSA_OVERRIDE_GFX_VERSION") }
    }
}

/// Who made a local GPU, which decides how it was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Vendor {
    /// An AMD GPU, found in the KFD topology.
    Amd,
    /// An NVIDIA GPU, found through NVML.
    Nvidia,
}

impl Vendor {
    /// The vendor's lowercase name as printed in listings: `amd` or
    /// `nvidia`.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Amd => "amd",
            Vendor::Nvidia => "nvidia",
        }
    }
}

/// Where a setting's value came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Origin {
    /// `HSA_XNACK`.
    HsaXnack,
    /// The amdgpu driver's `noretry` parameter, set explicitly (0 or 1).
    Noretry,
    /// `noretry` is -1 (or absent from the parameter file): the driver's
    /// default for the chip.
    DriverDefault,
    /// The KFD node's `capability` bits.
    Capability,
    /// Could not be told (the reason is in the scan's notes).
    Unknown,
}

impl Origin {
    /// A short name for the origin as printed in listings (`HSA_XNACK`,
    /// `noretry`, `driver-default`, `capability`, `unknown`).
    pub fn name(self) -> &'static str {
        match self {
            Origin::HsaXnack => "HSA_XNACK",
            Origin::Noretry => "noretry",
            Origin::DriverDefault => "driver-default",
            Origin::Capability => "capability",
            Origin::Unknown => "unknown",
        }
    }
}

/// A target-ID setting of a local GPU: its value (`None`: unknown) and
/// where that came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// Whether the feature is on (`+`) or off (`-`); `None` when it could
    /// not be told.
    pub on: Option<bool>,
    /// Where `on` was read from.
    pub origin: Origin,
}

/// One GPU of this machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalGpu {
    /// Position in the listing (AMD GPUs by KFD node, then NVIDIA ones).
    pub index: usize,
    /// Who made the GPU.
    pub vendor: Vendor,
    /// What the runtime asks code objects for (the processor after
    /// `HSA_OVERRIDE_GFX_VERSION`); unknown settings are left out.
    pub gpu: Gpu,
    /// The real processor, when `HSA_OVERRIDE_GFX_VERSION` replaced it.
    pub physical: Option<String>,
    /// The `xnack` setting; `None` when the processor has no such
    /// target-ID feature.
    pub xnack: Option<Setting>,
    /// The `sramecc` setting; `None` when the processor has no such
    /// target-ID feature.
    pub sramecc: Option<Setting>,
    /// The device's name: NVML's name, or the KFD node's `name` file.
    pub name: Option<String>,
    /// The PCI device ID (AMD: the node's `device_id`).
    pub device_id: Option<u32>,
    /// The KFD topology node (AMD only).
    pub node: Option<u32>,
}

/// What a scan found, and what it could not read (a malformed file is a
/// warning: the other GPUs are still listed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// The GPUs found, AMD ones first, numbered by their `index`.
    pub gpus: Vec<LocalGpu>,
    /// What could not be read or understood (a malformed file, NVML not
    /// answering); the GPUs not affected are still in `gpus`.
    pub warnings: Vec<String>,
    /// Facts the reader needs to trust the list: an override in force,
    /// why a setting is unknown.
    pub notes: Vec<String>,
}

/// Why the machine could not be scanned at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    /// A directory of the KFD topology exists but could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The directory that could not be read.
        path: PathBuf,
        /// The I/O error reading it.
        source: std::io::Error,
    },
}

/// Where to look and what the environment says.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// A directory laid out like `/` (`ROOT/sys/class/kfd/...`); `None`
    /// scans this machine. A recorded tree describes another machine, so
    /// NVML (which cannot be pointed at one) is not asked then.
    pub root: Option<PathBuf>,
    /// The environment variables the AMD runtime would see.
    pub env: Environment,
}

/// Finds the GPUs: AMD ones from the KFD topology under the root, then
/// NVIDIA ones through NVML (only when scanning this machine).
pub fn scan(probe: &Probe) -> Result<Scan, ScanError> {
    let root = probe.root.as_deref().unwrap_or(Path::new("/"));
    let mut scan = Scan::default();
    kfd::scan(root, &probe.env, &mut scan)?;
    if probe.root.is_none() {
        nvml::scan(&mut scan);
    }
    for (index, gpu) in scan.gpus.iter_mut().enumerate() {
        gpu.index = index;
    }
    Ok(scan)
}
