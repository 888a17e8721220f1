//! The xnack mode the AMD runtime runs a process in. xnack is not a
//! property of the device: `HSA_XNACK` decides when set, else the amdgpu
//! driver's `noretry` parameter (page-fault retry on = xnack on), whose
//! default (-1) the driver picks per chip.

use super::{Environment, Origin, Setting};
use offload_format::amdgpu::Processor;

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
/// 9.0.1 (gfx900), 9.4.0 (gfx906), 9.4.1 (gfx908), 9.4.2 (gfx90a),
/// 9.4.3/9.4.4 (gfx940, gfx941, gfx942), 9.5.0 (gfx950) and every GC
/// version from 10.3 on (no processor from 10.3 to 11.x has the xnack
/// feature, so those need no row). Every other GFX9/GFX10.1 chip defaults
/// to retry on, xnack on.
const NORETRY_BY_DEFAULT: &[&str] = &["gfx900", "gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950"];

/// Chips whose default depends on more than the chip, and why: such a
/// GPU's xnack is reported unknown rather than guessed.
const UNSETTLED: &[(&str, &str)] = &[
    // GC 9.3.0 (Renoir and its kin) was in the noretry list until a 2024
    // fix ("Fixes: 5f3854f1f4e2", backported to the stable kernels) took
    // it out: the default depends on the kernel version.
    (
        "gfx90c",
        "the driver's default for gfx90c changed in 2024 (xnack off before, on after) and depends on the kernel version",
    ),
    // GC 12.x has per-revision exceptions (GFX12.1 B0 defaults to retry on)
    // that the KFD properties do not say.
    ("gfx1250", "the driver's default for GFX12.5 depends on the chip revision"),
    ("gfx1251", "the driver's default for GFX12.5 depends on the chip revision"),
];

/// The driver's default xnack mode for the physical processor, or why it
/// cannot be told (before GFX9 the rule does not apply).
fn driver_default(physical: &Processor) -> Result<bool, &'static str> {
    if let Some((_, why)) = UNSETTLED.iter().find(|(name, _)| *name == physical.name) {
        return Err(why);
    }
    let (major, minor, _) = physical.isa_version;
    if NORETRY_BY_DEFAULT.contains(&physical.name) || (major, minor) >= (10, 3) {
        return Ok(false);
    }
    if major >= 9 { Ok(true) } else { Err("the driver's default for chips before GFX9 is not recorded here") }
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
        Some(Noretry::Default) => match physical.map(driver_default) {
            Some(Ok(on)) => (Setting { on: Some(on), origin: Origin::DriverDefault }, None),
            Some(Err(why)) => unknown(format!("noretry is -1 and {why}")),
            None => unknown("noretry is -1 and the chip is not in this tool's processor table".into()),
        },
        None => unknown("the amdgpu driver's noretry parameter is not readable (and HSA_XNACK is not set)".into()),
    }
}

/// The xnack mode a process would run in on a GPU of `processor` named
/// without its xnack setting (`--gpu gfx90a`): `HSA_XNACK` when set, else
/// the amdgpu driver's default for the chip (its `noretry` parameter at
/// -1, as shipped). `Ok((on, why))`, or why it cannot be told
/// (docs/reference/selection-rules.md, "A GPU named without its
/// settings").
pub fn default_for(processor: &str, env: &Environment) -> Result<(bool, String), String> {
    if let (Setting { on: Some(on), .. }, _) = resolve(env, None, None) {
        return Ok((on, format!("HSA_XNACK={} is set", if on { 1 } else { 0 })));
    }
    let Some(row) = offload_format::amdgpu::Table::Current.amdgcn_processor(processor) else {
        return Err(format!("{processor} is not in this tool's processor table"));
    };
    let on = driver_default(row).map_err(str::to_string)?;
    let other = if on { "HSA_XNACK=0 runs with xnack-" } else { "HSA_XNACK=1 runs with xnack+" };
    Ok((on, format!("the amdgpu driver's default for {processor} when HSA_XNACK is unset; {other}")))
}
