//! The AMDGPU processor tables of LLVM 19.1.7 (`AMDGPUTargetParser`).
//!
//! Clang's target IDs (`gfx90a:xnack+`) name an AMDGPU processor and some
//! on/off features. To compare a stored code object with a requested one,
//! the bundler canonicalises the processor name (`fiji` is `gfx803`) and
//! checks that every feature is one the processor supports. Only two
//! features are target-ID features: `xnack` and `sramecc`. This module holds
//! which processors LLVM 19.1.7 knows, their alternative names, and which of
//! the two features each supports.
//!
//! Checked against LLVM 19.1.7 (both its library and the bundler's
//! observable behaviour): see `tests/fixtures/llvm19/COMMANDS.md`.

use crate::triple::Triple;

/// One AMDGCN processor: its canonical name, the alternative names that
/// LLVM maps to it, and which target-ID features it supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Processor {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub xnack: bool,
    pub sramecc: bool,
}

const fn p(name: &'static str, aliases: &'static [&'static str], xnack: bool, sramecc: bool) -> Processor {
    Processor { name, aliases, xnack, sramecc }
}

const NONE: bool = false;
const X: bool = true;
const S: bool = true;

/// Every AMDGCN processor of LLVM 19.1.7, in LLVM's order (by GPU kind).
/// Newer names (gfx950, gfx1153, gfx12-5-generic, ...) are absent on
/// purpose: LLVM 19 rejects them.
static AMDGCN_PROCESSORS: [Processor; 50] = [
    // GFX6 (Southern Islands)
    p("gfx600", &["tahiti"], NONE, NONE),
    p("gfx601", &["pitcairn", "verde"], NONE, NONE),
    p("gfx602", &["hainan", "oland"], NONE, NONE),
    // GFX7 (Sea Islands)
    p("gfx700", &["kaveri"], NONE, NONE),
    p("gfx701", &["hawaii"], NONE, NONE),
    p("gfx702", &[], NONE, NONE),
    p("gfx703", &["kabini", "mullins"], NONE, NONE),
    p("gfx704", &["bonaire"], NONE, NONE),
    p("gfx705", &[], NONE, NONE),
    // GFX8 (Volcanic Islands); only the APUs have xnack
    p("gfx801", &["carrizo"], X, NONE),
    p("gfx802", &["iceland", "tonga"], NONE, NONE),
    p("gfx803", &["fiji", "polaris10", "polaris11"], NONE, NONE),
    p("gfx805", &["tongapro"], NONE, NONE),
    p("gfx810", &["stoney"], X, NONE),
    // GFX9
    p("gfx900", &[], X, NONE),
    p("gfx902", &[], X, NONE),
    p("gfx904", &[], X, NONE),
    p("gfx906", &[], X, S),
    p("gfx908", &[], X, S),
    p("gfx909", &[], X, NONE),
    p("gfx90a", &[], X, S),
    p("gfx90c", &[], X, NONE),
    p("gfx940", &[], X, S),
    p("gfx941", &[], X, S),
    p("gfx942", &[], X, S),
    // GFX10.1 has xnack, GFX10.3 and later have neither feature
    p("gfx1010", &[], X, NONE),
    p("gfx1011", &[], X, NONE),
    p("gfx1012", &[], X, NONE),
    p("gfx1013", &[], X, NONE),
    p("gfx1030", &[], NONE, NONE),
    p("gfx1031", &[], NONE, NONE),
    p("gfx1032", &[], NONE, NONE),
    p("gfx1033", &[], NONE, NONE),
    p("gfx1034", &[], NONE, NONE),
    p("gfx1035", &[], NONE, NONE),
    p("gfx1036", &[], NONE, NONE),
    // GFX11
    p("gfx1100", &[], NONE, NONE),
    p("gfx1101", &[], NONE, NONE),
    p("gfx1102", &[], NONE, NONE),
    p("gfx1103", &[], NONE, NONE),
    p("gfx1150", &[], NONE, NONE),
    p("gfx1151", &[], NONE, NONE),
    p("gfx1152", &[], NONE, NONE),
    // GFX12
    p("gfx1200", &[], NONE, NONE),
    p("gfx1201", &[], NONE, NONE),
    // Generic targets (code objects that run on a whole family)
    p("gfx9-generic", &[], X, NONE),
    p("gfx10-1-generic", &[], X, NONE),
    p("gfx10-3-generic", &[], NONE, NONE),
    p("gfx11-generic", &[], NONE, NONE),
    p("gfx12-generic", &[], NONE, NONE),
];

/// R600 processors of LLVM 19.1.7 (pre-GCN). They have no target-ID
/// features; only the name mapping matters.
static R600_PROCESSORS: [(&str, &[&str]); 16] = [
    ("r600", &["rv630", "rv635"]),
    ("r630", &[]),
    ("rs880", &["rs780", "rv610", "rv620"]),
    ("rv670", &[]),
    ("rv710", &[]),
    ("rv730", &[]),
    ("rv770", &["rv740"]),
    ("cedar", &["palm"]),
    ("cypress", &["hemlock"]),
    ("juniper", &[]),
    ("redwood", &[]),
    ("sumo", &["sumo2"]),
    ("barts", &[]),
    ("caicos", &[]),
    ("cayman", &["aruba"]),
    ("turks", &[]),
];

/// Every AMDGCN processor LLVM 19.1.7 knows, in LLVM's order.
pub fn amdgcn_processors() -> &'static [Processor] {
    &AMDGCN_PROCESSORS
}

/// Looks up an AMDGCN processor by canonical or alternative name, exactly
/// (case-sensitive), as LLVM 19's `parseArchAMDGCN` does: `fiji` gives the
/// `gfx803` entry, `gfx950` and `Gfx906` give `None`.
pub fn amdgcn_processor(name: &str) -> Option<&'static Processor> {
    AMDGCN_PROCESSORS.iter().find(|proc| proc.name == name || proc.aliases.contains(&name))
}

/// The canonical R600 processor name for a name or alias (`parseArchR600`
/// then `getArchNameR600`): `hemlock` gives `cypress`.
pub fn r600_canonical(name: &str) -> Option<&'static str> {
    R600_PROCESSORS.iter().find(|(canon, aliases)| *canon == name || aliases.contains(&name)).map(|&(canon, _)| canon)
}

/// Every R600 processor name (canonical names, then their aliases, in
/// table order), for listings and tests.
pub fn r600_processor_names() -> impl Iterator<Item = &'static str> {
    R600_PROCESSORS.iter().flat_map(|(canon, aliases)| std::iter::once(*canon).chain(aliases.iter().copied()))
}

/// LLVM 19 `AMDGPU::getCanonicalArchName(triple, name)`: the canonical
/// processor name for an AMDGCN or R600 triple, `None` when the name is not
/// a processor of that architecture or the triple is not AMDGPU at all.
/// (Clang's target-ID parser passes processor names through unchanged for
/// non-AMDGPU triples; that decision belongs to the caller.)
pub fn canonical_processor(triple: &Triple, name: &str) -> Option<&'static str> {
    if triple.is_amdgcn() {
        amdgcn_processor(name).map(|proc| proc.name)
    } else if triple.is_r600() {
        r600_canonical(name)
    } else {
        None
    }
}

/// The target-ID features a processor supports on this triple, in the order
/// clang lists them (`getAllPossibleAMDGPUTargetIDFeatures`): `sramecc`
/// before `xnack`. Empty for unknown processors, R600, and non-AMDGPU
/// triples.
pub fn target_id_features(triple: &Triple, name: &str) -> &'static [&'static str] {
    if !triple.is_amdgcn() {
        return &[];
    }
    match amdgcn_processor(name) {
        Some(Processor { xnack: true, sramecc: true, .. }) => &["sramecc", "xnack"],
        Some(Processor { xnack: true, .. }) => &["xnack"],
        Some(Processor { sramecc: true, .. }) => &["sramecc"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_to_canonical_names() {
        assert_eq!(amdgcn_processor("fiji").map(|p| p.name), Some("gfx803"));
        assert_eq!(amdgcn_processor("polaris11").map(|p| p.name), Some("gfx803"));
        assert_eq!(amdgcn_processor("tahiti").map(|p| p.name), Some("gfx600"));
        assert_eq!(amdgcn_processor("gfx90a").map(|p| p.name), Some("gfx90a"));
        assert_eq!(amdgcn_processor("gfx950"), None);
        assert_eq!(amdgcn_processor("GFX906"), None);
        assert_eq!(amdgcn_processor(""), None);
        assert_eq!(r600_canonical("hemlock"), Some("cypress"));
        assert_eq!(r600_canonical("r600"), Some("r600"));
        assert_eq!(r600_canonical("gfx906"), None);
        assert_eq!(amdgcn_processor("cypress"), None);
    }

    #[test]
    fn names_are_unique() {
        let mut all: Vec<&str> =
            amdgcn_processors().iter().flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied())).collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        let mut r: Vec<&str> = r600_processor_names().collect();
        let n = r.len();
        r.sort_unstable();
        r.dedup();
        assert_eq!(r.len(), n);
        assert_eq!(n, 26);
    }

    #[test]
    fn features() {
        let gcn = Triple::parse("amdgcn-amd-amdhsa");
        assert_eq!(target_id_features(&gcn, "gfx90a"), ["sramecc", "xnack"]);
        assert_eq!(target_id_features(&gcn, "carrizo"), ["xnack"]);
        assert!(target_id_features(&gcn, "gfx1030").is_empty());
        assert!(target_id_features(&gcn, "nope").is_empty());
        let r600 = Triple::parse("r600--");
        assert!(target_id_features(&r600, "gfx90a").is_empty());
        assert_eq!(canonical_processor(&r600, "aruba"), Some("cayman"));
        assert_eq!(canonical_processor(&gcn, "aruba"), None);
        assert_eq!(canonical_processor(&gcn, "kaveri"), Some("gfx700"));
        let nv = Triple::parse("nvptx64-nvidia-cuda");
        assert_eq!(canonical_processor(&nv, "gfx906"), None);
    }
}
