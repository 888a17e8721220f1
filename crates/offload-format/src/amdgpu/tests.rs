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
    let current = Table::Current;
    assert_eq!(current.amdgcn_processor("fiji").map(|p| p.name), Some("gfx803"));
    assert_eq!(current.amdgcn_processor("stoney").map(|p| p.name), Some("gfx810"));
    assert_eq!(current.amdgcn_processor("gfx950").map(|p| p.name), Some("gfx950"));
    assert_eq!(current.amdgcn_processor("Gfx950"), None);
}

#[test]
fn names_are_unique() {
    for table in [Table::Llvm19, Table::Current] {
        let mut all: Vec<&str> = table
            .amdgcn_processors()
            .iter()
            .flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()))
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "{table:?}");
    }
    let mut r: Vec<&str> = r600_processor_names().collect();
    let n = r.len();
    r.sort_unstable();
    r.dedup();
    assert_eq!(r.len(), n);
    assert_eq!(n, 26);
}

#[test]
fn llvm19_view_is_llvm19s_table() {
    let names: Vec<&str> = amdgcn_processors().iter().map(|p| p.name).collect();
    assert_eq!(names.len(), 50);
    // LLVM 19's order: by GPU kind, generic targets last.
    assert_eq!(names[..3], ["gfx600", "gfx601", "gfx602"]);
    assert_eq!(names[22..25], ["gfx940", "gfx941", "gfx942"]);
    assert_eq!(names[25], "gfx1010");
    assert_eq!(names[45..], ["gfx9-generic", "gfx10-1-generic", "gfx10-3-generic", "gfx11-generic", "gfx12-generic"]);
    for newer in ["gfx950", "gfx1153", "gfx1250", "gfx1251", "gfx9-4-generic", "gfx12-5-generic"] {
        assert!(!names.contains(&newer), "{newer}");
    }
    // Every LLVM 19 row is also a current row.
    for p in amdgcn_processors() {
        assert_eq!(Table::Current.amdgcn_processor(p.name), Some(p));
    }
}

#[test]
fn features() {
    let gcn = Triple::parse("amdgcn-amd-amdhsa");
    assert_eq!(target_id_features(&gcn, "gfx90a"), ["sramecc", "xnack"]);
    assert_eq!(target_id_features(&gcn, "carrizo"), ["xnack"]);
    assert!(target_id_features(&gcn, "gfx1030").is_empty());
    assert!(target_id_features(&gcn, "nope").is_empty());
    assert!(target_id_features(&gcn, "gfx950").is_empty());
    let r600 = Triple::parse("r600--");
    assert!(target_id_features(&r600, "gfx90a").is_empty());
    assert_eq!(canonical_processor(&r600, "aruba"), Some("cayman"));
    assert_eq!(canonical_processor(&gcn, "aruba"), None);
    assert_eq!(canonical_processor(&gcn, "kaveri"), Some("gfx700"));
    let nv = Triple::parse("nvptx64-nvidia-cuda");
    assert_eq!(canonical_processor(&nv, "gfx906"), None);
}

/// What `AMDGPUTargetParser.def` says of the processors ROCm 7 ships code
/// for (`FEATURE_XNACK_ON_OFF_MODES` and `FEATURE_SRAMECC`).
#[test]
fn current_features_follow_the_source() {
    let gcn = Triple::parse("amdgcn-amd-amdhsa");
    let f = |name| Table::Current.target_id_features(&gcn, name);
    assert_eq!(f("gfx950"), ["sramecc", "xnack"]);
    assert_eq!(f("gfx942"), ["sramecc", "xnack"]);
    assert_eq!(f("gfx9-4-generic"), ["sramecc", "xnack"]);
    // gfx125x: xnack as ROCm 7.x writes it in e_flags (see table.rs).
    assert_eq!(f("gfx1250"), ["sramecc", "xnack"]);
    assert_eq!(f("gfx1251"), ["sramecc", "xnack"]);
    assert!(f("gfx12-5-generic").is_empty());
    assert!(f("gfx1153").is_empty());
    assert!(f("gfx1201").is_empty());
    assert_eq!(f("gfx1010"), ["xnack"]);
    assert!(f("gfx9999").is_empty());
}

#[test]
fn generic_targets_cover_known_processors_only() {
    let current = Table::Current.amdgcn_processors();
    let mut generics = 0;
    for p in current {
        if let Some(g) = p.generic {
            let generic = Table::Current.amdgcn_processor(g).unwrap_or_else(|| panic!("{}: {g} unknown", p.name));
            assert!(generic.is_generic(), "{g}");
            assert!(!p.is_generic(), "{} is generic and covered", p.name);
            // A generic target belongs to its processors' family.
            assert_eq!(generic.isa_version.0, p.isa_version.0, "{} in {g}", p.name);
            // Features a generic code object may fix are ones its
            // processors have.
            assert!(!generic.xnack || p.xnack, "{} in {g}", p.name);
            assert!(!generic.sramecc || p.sramecc, "{} in {g}", p.name);
        }
        if p.is_generic() {
            generics += 1;
            assert_eq!(p.gfx_target_version(), None);
        }
    }
    assert_eq!(generics, 9);
    let covered = |g| generic_coverage(g).map(|p| p.name).collect::<Vec<_>>();
    assert_eq!(covered("gfx9-generic"), ["gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"]);
    assert_eq!(covered("gfx9-4-generic"), ["gfx940", "gfx941", "gfx942", "gfx950"]);
    assert_eq!(covered("gfx10-1-generic"), ["gfx1010", "gfx1011", "gfx1012", "gfx1013"]);
    assert_eq!(covered("gfx10-3-generic").len(), 7);
    assert_eq!(
        covered("gfx11-generic"),
        ["gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153", "gfx1154"]
    );
    assert_eq!(covered("gfx12-generic"), ["gfx1200", "gfx1201"]);
    assert_eq!(covered("gfx12-5-generic"), ["gfx1250", "gfx1251"]);
    assert!(covered("gfx90a").is_empty());
    assert_eq!(generic_target("gfx1151"), Some("gfx11-generic"));
    assert_eq!(generic_target("gfx950"), Some("gfx9-4-generic"));
    assert_eq!(generic_target("gfx90a"), None);
    assert_eq!(generic_target("gfx9-generic"), None);
    // Canonical names only: the runtime looks up the agent's name.
    assert_eq!(generic_target("fiji"), None);
    assert_eq!(generic_target("gfx9999"), None);
}

#[test]
fn elf_numbers_and_target_versions() {
    let current = Table::Current.amdgcn_processors();
    let mut machs: Vec<u8> = current.iter().map(|p| p.elf_mach).collect();
    machs.sort_unstable();
    machs.dedup();
    assert_eq!(machs.len(), current.len(), "EF_AMDGPU_MACH numbers are unique");
    assert!(machs.iter().all(|&m| m >= 0x20), "AMDGCN numbers start at 0x20");
    assert_eq!(processor_by_elf_mach(0x4f).map(|p| p.name), Some("gfx950"));
    assert_eq!(processor_by_elf_mach(0x3f).map(|p| p.name), Some("gfx90a"));
    assert_eq!(processor_by_elf_mach(0x5a).map(|p| p.name), Some("gfx1251"));
    assert_eq!(processor_by_elf_mach(0x00), None);
    let version = |name| Table::Current.amdgcn_processor(name).and_then(Processor::gfx_target_version);
    assert_eq!(version("gfx90a"), Some(90010));
    assert_eq!(version("gfx90c"), Some(90012));
    assert_eq!(version("gfx942"), Some(90402));
    assert_eq!(version("gfx950"), Some(90500));
    assert_eq!(version("gfx1100"), Some(110000));
    assert_eq!(version("gfx1151"), Some(110501));
    assert_eq!(version("gfx1250"), Some(120500));
    assert_eq!(version("fiji"), Some(80003));
    let by_version = |v| processor_by_gfx_target_version(v).map(|p| p.name);
    assert_eq!(by_version(90010), Some("gfx90a"));
    assert_eq!(by_version(120501), Some("gfx1251"));
    assert_eq!(by_version(90400), Some("gfx940"));
    assert_eq!(by_version(90000), Some("gfx900"));
    assert_eq!(by_version(0), None);
    // Every processor's version is spelled by its name (gfx<major><minor
    // digit><stepping as one hex digit>), except the alternative names.
    for p in current.iter().filter(|p| !p.is_generic()) {
        let (major, minor, stepping) = p.isa_version;
        assert_eq!(p.name, format!("gfx{major}{minor}{stepping:x}"));
    }
}

#[test]
fn processor_shapes() {
    for name in ["gfx950", "gfx9999", "gfx90a", "gfx12-5-generic", "gfx1250"] {
        assert!(looks_like_amdgcn_processor(name), "{name}");
    }
    for name in ["gfx", "fiji", "sm_80", "GFX950", "gfx95 0", "gfx950:xnack+", ""] {
        assert!(!looks_like_amdgcn_processor(name), "{name}");
    }
}
