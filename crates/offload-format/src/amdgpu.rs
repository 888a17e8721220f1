//! TEMPORARY stand-in until the `triples` branch lands with LLVM 19's tables.
pub struct Processor {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub xnack: bool,
    pub sramecc: bool,
}
const P: &[Processor] = &[
    Processor { name: "gfx803", aliases: &["fiji", "polaris10", "polaris11"], xnack: false, sramecc: false },
    Processor { name: "gfx900", aliases: &[], xnack: true, sramecc: false },
    Processor { name: "gfx906", aliases: &[], xnack: true, sramecc: true },
    Processor { name: "gfx908", aliases: &[], xnack: true, sramecc: true },
    Processor { name: "gfx90a", aliases: &[], xnack: true, sramecc: true },
    Processor { name: "gfx942", aliases: &[], xnack: true, sramecc: true },
    Processor { name: "gfx1030", aliases: &[], xnack: false, sramecc: false },
    Processor { name: "gfx1100", aliases: &[], xnack: false, sramecc: false },
];
pub fn amdgcn_processors() -> &'static [Processor] {
    P
}
pub fn amdgcn_processor(name: &str) -> Option<&'static Processor> {
    P.iter().find(|p| p.name == name || p.aliases.contains(&name))
}
pub fn r600_canonical(name: &str) -> Option<&'static str> {
    ["r600", "cypress"].into_iter().find(|n| *n == name)
}
