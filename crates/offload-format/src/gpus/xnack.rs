//! The xnack mode the AMD runtime runs a process in. xnack is not a
//! property of the device: `HSA_XNACK` decides when set, else the amdgpu
//! driver's `noretry` parameter (page-fault retry on = xnack on), whose
//! default (-1) the driver picks per chip.

use super::{Environment, Origin, Setting};
use crate::amdgpu::Processor;

/// The amdgpu driver's `noretry` module parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Noretry {
    /// `0`: retry enabled, xnack on.
    Off,
    /// `1`: no retry, xnack off.
    On,
    /// `-1`: the driver's default for the chip.
    Default,
}

/// The chips whose driver default is `noretry=1` (xnack off), named by
/// the processor they are. Source: Linux `drivers/gpu/drm/amd/amdgpu/
/// amdgpu_gmc.c`, `amdgpu_gmc_noretry_set()`, which lists GC IP versions
/// 9.0.1 (gfx900), 9.3.0 (gfx90c), 9.4.0 (gfx906), 9.4.1 (gfx908),
/// 9.4.2 (gfx90a), 9.4.3/9.4.4 (gfx940, gfx941, gfx942), 9.5.0 (gfx950)
/// and every GC version from 10.3 on (no processor from 10.3 on has the
/// xnack feature, so those need no row). Every other GFX9/GFX10.1 chip
/// defaults to retry on, xnack on.
const NORETRY_BY_DEFAULT: &[&str] =
    &["gfx900", "gfx90c", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"];

/// The driver's default xnack mode for the physical processor; `None`
/// where the driver's rule does not cover it (before GFX9).
fn driver_default(physical: &Processor) -> Option<bool> {
    let (major, minor, _) = physical.isa_version;
    if NORETRY_BY_DEFAULT.contains(&physical.name) || (major, minor) >= (10, 3) {
        return Some(false);
    }
    (major >= 9).then_some(true)
}

/// The xnack setting and, when it is unknown, why.
pub(super) fn resolve(
    env: &Environment,
    noretry: Option<Noretry>,
    physical: Option<&'static Processor>,
) -> (Setting, Option<String>) {
    let unknown = |why: String| (Setting { on: None, origin: Origin::Unknown }, Some(why));
    match env.hsa_xnack.as_deref().map(str::trim) {
        Some("1") => return (Setting { on: Some(true), origin: Origin::HsaXnack }, None),
        Some("0") => return (Setting { on: Some(false), origin: Origin::HsaXnack }, None),
        // The runtime ignores other values; so does this.
        _ => {}
    }
    match noretry {
        Some(Noretry::Off) => (Setting { on: Some(true), origin: Origin::Noretry }, None),
        Some(Noretry::On) => (Setting { on: Some(false), origin: Origin::Noretry }, None),
        Some(Noretry::Default) => match physical.and_then(driver_default) {
            Some(on) => (Setting { on: Some(on), origin: Origin::DriverDefault }, None),
            None => unknown("noretry is -1 and the driver's default for this chip is not known".into()),
        },
        None => unknown("the amdgpu driver's noretry parameter is not readable (and HSA_XNACK is not set)".into()),
    }
}
