//! The parts of LLVM 19's ARM target parser that triple parsing relies on.
//!
//! LLVM decides whether an `arm*`/`thumb*`/`aarch64*` architecture spelling
//! is valid, whether it is big-endian, and which sub-architecture it names,
//! by reducing the spelling to a "canonical" architecture name (`armv7a` →
//! `v7a`) and matching that against its ARM architecture table. The same
//! matcher is applied to *every* architecture spelling when computing the
//! sub-architecture, with the quirks that follow from suffix matching.

use super::{Arch, SubArch};

/// `ARM::ArchKind` of LLVM 19, in the order of `ARMTargetParser.def`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ArchKind {
    Invalid,
    V4,
    V4t,
    V5t,
    V5te,
    V5tej,
    V6,
    V6k,
    V6t2,
    V6kz,
    V6m,
    V7a,
    V7ve,
    V7r,
    V7m,
    V7em,
    V8a,
    V8_1a,
    V8_2a,
    V8_3a,
    V8_4a,
    V8_5a,
    V8_6a,
    V8_7a,
    V8_8a,
    V8_9a,
    V9a,
    V9_1a,
    V9_2a,
    V9_3a,
    V9_4a,
    V9_5a,
    V8r,
    V8mBaseline,
    V8mMainline,
    V8_1mMainline,
    Iwmmxt,
    Iwmmxt2,
    Xscale,
    V7s,
    V7k,
}

/// The architecture table, searched in this order for the first name that
/// *ends with* the synonym-resolved canonical name (so "invalid" comes
/// first and catches an empty name, and `v7-a` finds `armv7-a`).
const ARCH_TABLE: &[(&str, ArchKind)] = &[
    ("invalid", ArchKind::Invalid),
    ("armv4", ArchKind::V4),
    ("armv4t", ArchKind::V4t),
    ("armv5t", ArchKind::V5t),
    ("armv5te", ArchKind::V5te),
    ("armv5tej", ArchKind::V5tej),
    ("armv6", ArchKind::V6),
    ("armv6k", ArchKind::V6k),
    ("armv6t2", ArchKind::V6t2),
    ("armv6kz", ArchKind::V6kz),
    ("armv6-m", ArchKind::V6m),
    ("armv7-a", ArchKind::V7a),
    ("armv7ve", ArchKind::V7ve),
    ("armv7-r", ArchKind::V7r),
    ("armv7-m", ArchKind::V7m),
    ("armv7e-m", ArchKind::V7em),
    ("armv8-a", ArchKind::V8a),
    ("armv8.1-a", ArchKind::V8_1a),
    ("armv8.2-a", ArchKind::V8_2a),
    ("armv8.3-a", ArchKind::V8_3a),
    ("armv8.4-a", ArchKind::V8_4a),
    ("armv8.5-a", ArchKind::V8_5a),
    ("armv8.6-a", ArchKind::V8_6a),
    ("armv8.7-a", ArchKind::V8_7a),
    ("armv8.8-a", ArchKind::V8_8a),
    ("armv8.9-a", ArchKind::V8_9a),
    ("armv9-a", ArchKind::V9a),
    ("armv9.1-a", ArchKind::V9_1a),
    ("armv9.2-a", ArchKind::V9_2a),
    ("armv9.3-a", ArchKind::V9_3a),
    ("armv9.4-a", ArchKind::V9_4a),
    ("armv9.5-a", ArchKind::V9_5a),
    ("armv8-r", ArchKind::V8r),
    ("armv8-m.base", ArchKind::V8mBaseline),
    ("armv8-m.main", ArchKind::V8mMainline),
    ("armv8.1-m.main", ArchKind::V8_1mMainline),
    ("iwmmxt", ArchKind::Iwmmxt),
    ("iwmmxt2", ArchKind::Iwmmxt2),
    ("xscale", ArchKind::Xscale),
    ("armv7s", ArchKind::V7s),
    ("armv7k", ArchKind::V7k),
];

/// Alternative spellings of canonical names (`ARM::getArchSynonym`).
const SYNONYMS: &[(&str, &str)] = &[
    ("v5", "v5t"),
    ("v5e", "v5te"),
    ("v6j", "v6"),
    ("v6hl", "v6k"),
    ("v6m", "v6-m"),
    ("v6sm", "v6-m"),
    ("v6s-m", "v6-m"),
    ("v6z", "v6kz"),
    ("v6zk", "v6kz"),
    ("v7", "v7-a"),
    ("v7a", "v7-a"),
    ("v7hl", "v7-a"),
    ("v7l", "v7-a"),
    ("v7r", "v7-r"),
    ("v7m", "v7-m"),
    ("v7em", "v7e-m"),
    ("v8", "v8-a"),
    ("v8a", "v8-a"),
    ("v8l", "v8-a"),
    ("aarch64", "v8-a"),
    ("arm64", "v8-a"),
    ("v8.1a", "v8.1-a"),
    ("v8.2a", "v8.2-a"),
    ("v8.3a", "v8.3-a"),
    ("v8.4a", "v8.4-a"),
    ("v8.5a", "v8.5-a"),
    ("v8.6a", "v8.6-a"),
    ("v8.7a", "v8.7-a"),
    ("v8.8a", "v8.8-a"),
    ("v8.9a", "v8.9-a"),
    ("v8r", "v8-r"),
    ("v9", "v9-a"),
    ("v9a", "v9-a"),
    ("v9.1a", "v9.1-a"),
    ("v9.2a", "v9.2-a"),
    ("v9.3a", "v9.3-a"),
    ("v9.4a", "v9.4-a"),
    ("v9.5a", "v9.5-a"),
    ("v8m.base", "v8-m.base"),
    ("v8m.main", "v8-m.main"),
    ("v8.1m.main", "v8.1-m.main"),
];

/// Family prefixes stripped by [`canonical_arch_name`], longest first.
const FAMILY_PREFIXES: &[&str] = &["arm64_32", "arm64e", "arm64", "aarch64_32", "arm", "thumb"];

fn synonym(name: &str) -> &str {
    SYNONYMS.iter().find(|(k, _)| *k == name).map_or(name, |&(_, v)| v)
}

/// `ARM::getCanonicalArchName`: strips the family prefix (`arm`, `thumb`,
/// `arm64`, `aarch64_be`, ...) and an `eb` marker, leaving `vN...` or a
/// marketing name such as `xscale`. Returns the whole input when nothing is
/// left after the prefix, and "" when the rest is malformed.
pub(super) fn canonical_arch_name(arch: &str) -> &str {
    let bytes = arch.as_bytes();
    let mut offset = FAMILY_PREFIXES.iter().find(|p| arch.starts_with(*p)).map(|p| p.len());
    if offset.is_none() && arch.starts_with("aarch64") {
        // AArch64 spells big-endian "_be", never "eb".
        if arch.contains("eb") {
            return "";
        }
        offset = Some(if bytes.get(7..10) == Some(b"_be") { 10 } else { 7 });
    }

    let mut rest = arch;
    match offset {
        // "armebv7": step over the "eb" after the prefix ...
        Some(off) if bytes.get(off..off + 2) == Some(b"eb") => offset = Some(off + 2),
        // ... or drop a trailing one ("armv7eb").
        _ => {
            if let Some(stripped) = rest.strip_suffix("eb") {
                rest = stripped;
            }
        }
    }
    if let Some(off) = offset {
        rest = rest.get(off.min(rest.len())..).unwrap_or("");
    }

    if rest.is_empty() {
        return arch;
    }
    if offset.is_some() {
        let r = rest.as_bytes();
        if r.len() >= 2 && (r[0] != b'v' || !r[1].is_ascii_digit()) {
            return "";
        }
        if rest.contains("eb") {
            return "";
        }
    }
    rest
}

/// `ARM::parseArch`: canonicalise, resolve synonyms, then take the first
/// table entry whose name ends with the result.
pub(super) fn parse_arch_kind(arch: &str) -> ArchKind {
    let syn = synonym(canonical_arch_name(arch));
    ARCH_TABLE.iter().find(|(name, _)| name.ends_with(syn)).map_or(ArchKind::Invalid, |&(_, kind)| kind)
}

/// `Triple::parseSubArch`'s mapping from ARM architecture to sub-arch.
pub(super) fn sub_arch(kind: ArchKind) -> SubArch {
    use ArchKind as K;
    match kind {
        K::Invalid | K::V4 => SubArch::None,
        K::V4t => SubArch::ArmV4t,
        K::V5t => SubArch::ArmV5,
        K::V5te | K::V5tej | K::Iwmmxt | K::Iwmmxt2 | K::Xscale => SubArch::ArmV5te,
        K::V6 => SubArch::ArmV6,
        K::V6k | K::V6kz => SubArch::ArmV6k,
        K::V6t2 => SubArch::ArmV6t2,
        K::V6m => SubArch::ArmV6m,
        K::V7a | K::V7r => SubArch::ArmV7,
        K::V7ve => SubArch::ArmV7ve,
        K::V7k => SubArch::ArmV7k,
        K::V7m => SubArch::ArmV7m,
        K::V7s => SubArch::ArmV7s,
        K::V7em => SubArch::ArmV7em,
        K::V8a => SubArch::ArmV8,
        K::V8_1a => SubArch::ArmV8_1a,
        K::V8_2a => SubArch::ArmV8_2a,
        K::V8_3a => SubArch::ArmV8_3a,
        K::V8_4a => SubArch::ArmV8_4a,
        K::V8_5a => SubArch::ArmV8_5a,
        K::V8_6a => SubArch::ArmV8_6a,
        K::V8_7a => SubArch::ArmV8_7a,
        K::V8_8a => SubArch::ArmV8_8a,
        K::V8_9a => SubArch::ArmV8_9a,
        K::V9a => SubArch::ArmV9,
        K::V9_1a => SubArch::ArmV9_1a,
        K::V9_2a => SubArch::ArmV9_2a,
        K::V9_3a => SubArch::ArmV9_3a,
        K::V9_4a => SubArch::ArmV9_4a,
        K::V9_5a => SubArch::ArmV9_5a,
        K::V8r => SubArch::ArmV8r,
        K::V8mBaseline => SubArch::ArmV8mBaseline,
        K::V8mMainline => SubArch::ArmV8mMainline,
        K::V8_1mMainline => SubArch::ArmV8_1mMainline,
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Isa {
    Invalid,
    Arm,
    Thumb,
    Aarch64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Endian {
    Invalid,
    Little,
    Big,
}

fn parse_isa(arch: &str) -> Isa {
    if arch.starts_with("aarch64") || arch.starts_with("arm64") {
        Isa::Aarch64
    } else if arch.starts_with("thumb") {
        Isa::Thumb
    } else if arch.starts_with("arm") {
        Isa::Arm
    } else {
        Isa::Invalid
    }
}

fn parse_endian(arch: &str) -> Endian {
    if arch.starts_with("armeb") || arch.starts_with("thumbeb") || arch.starts_with("aarch64_be") {
        Endian::Big
    } else if arch.starts_with("arm") || arch.starts_with("thumb") {
        if arch.ends_with("eb") { Endian::Big } else { Endian::Little }
    } else if arch.starts_with("aarch64") {
        Endian::Little
    } else {
        Endian::Invalid
    }
}

/// `Triple`'s `parseARMArch`, used for `arm*`/`thumb*`/`aarch64*` spellings
/// that are not in the exact-name table.
pub(super) fn triple_arch(name: &str) -> Arch {
    let isa = parse_isa(name);
    let endian = parse_endian(name);
    let arch = match (endian, isa) {
        (Endian::Little, Isa::Arm) => Arch::Arm,
        (Endian::Little, Isa::Thumb) => Arch::Thumb,
        (Endian::Little, Isa::Aarch64) => Arch::Aarch64,
        (Endian::Big, Isa::Arm) => Arch::Armeb,
        (Endian::Big, Isa::Thumb) => Arch::Thumbeb,
        (Endian::Big, Isa::Aarch64) => Arch::Aarch64Be,
        _ => Arch::Unknown,
    };

    let canonical = canonical_arch_name(name);
    if canonical.is_empty() {
        return Arch::Unknown;
    }
    // Thumb exists only from ARMv4 on.
    if isa == Isa::Thumb && (canonical.starts_with("v2") || canonical.starts_with("v3")) {
        return Arch::Unknown;
    }
    // ARMv6-M (the only M-profile architecture of version 6) is Thumb-only,
    // whatever the spelling says.
    if parse_arch_kind(canonical) == ArchKind::V6m {
        return if endian == Endian::Big { Arch::Thumbeb } else { Arch::Thumb };
    }
    arch
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        assert_eq!(canonical_arch_name("armv7a"), "v7a");
        assert_eq!(canonical_arch_name("armebv7"), "v7");
        assert_eq!(canonical_arch_name("armv7eb"), "v7");
        assert_eq!(canonical_arch_name("thumbv6m"), "v6m");
        assert_eq!(canonical_arch_name("aarch64_be"), "aarch64_be");
        assert_eq!(canonical_arch_name("aarch64_bev8"), "v8");
        assert_eq!(canonical_arch_name("aarch64eb"), "");
        assert_eq!(canonical_arch_name("arm64"), "arm64");
        assert_eq!(canonical_arch_name("armfoo"), "");
        assert_eq!(canonical_arch_name("armv"), "v");
        assert_eq!(canonical_arch_name("arm64eb"), "arm64eb");
        assert_eq!(canonical_arch_name("xscaleeb"), "xscale");
        assert_eq!(canonical_arch_name(""), "");
    }

    #[test]
    fn arch_kinds_by_suffix() {
        assert_eq!(parse_arch_kind("v7a"), ArchKind::V7a);
        assert_eq!(parse_arch_kind("armv7s"), ArchKind::V7s);
        assert_eq!(parse_arch_kind("arm64"), ArchKind::V8a);
        assert_eq!(parse_arch_kind("v8.1m.main"), ArchKind::V8_1mMainline);
        assert_eq!(parse_arch_kind("ve"), ArchKind::V7ve);
        assert_eq!(parse_arch_kind(""), ArchKind::Invalid);
        assert_eq!(parse_arch_kind("v9.6a"), ArchKind::Invalid);
    }

    #[test]
    fn triple_arches() {
        assert_eq!(triple_arch("armv6m"), Arch::Thumb);
        assert_eq!(triple_arch("armebv6m"), Arch::Thumbeb);
        assert_eq!(triple_arch("thumbv2"), Arch::Unknown);
        assert_eq!(triple_arch("armv2"), Arch::Arm);
        assert_eq!(triple_arch("aarch64_bev8"), Arch::Aarch64Be);
    }
}
