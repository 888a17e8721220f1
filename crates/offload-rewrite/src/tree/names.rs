//! The GPU target a file is named for: the per-GPU data files of
//! rocBLAS, hipBLASLt, MIOpen and libraries like them carry a `gfxNNN` in
//! their file name (docs/guide/prune-trees.md, "Files named by target").

use offload_format::amdgpu::amdgcn_processors;

/// The AMDGPU processors (or generic targets) `base`, a file name without
/// folders, is named for: each `gfx` that starts the name or follows a
/// character other than a letter or digit, followed by the longest known
/// processor name, which must end the name or be followed by a character
/// other than a letter or digit, or by hexadecimal digits alone up to
/// such a character (MIOpen appends the compute-unit count: `gfx90a68`).
/// Shared libraries and Python sources are never named data files (they
/// are loaded or imported by name, whatever their name says): empty.
///
/// ```
/// use offload_rewrite::tree::names::targets_in_name;
/// assert_eq!(targets_in_name("TensileLibrary_lazy_gfx942.dat"), ["gfx942"]);
/// assert_eq!(targets_in_name("Kernels.so-000-gfx90a-xnack-.hsaco"), ["gfx90a"]);
/// assert_eq!(targets_in_name("gfx90878.HIP.fdb.txt"), ["gfx908"]);
/// assert_eq!(targets_in_name("gfx9-generic.co"), ["gfx9-generic"]);
/// assert!(targets_in_name("libamdhip64.so.6").is_empty());
/// assert!(targets_in_name("mygfx90a.dat").is_empty());
/// ```
pub fn targets_in_name(base: &str) -> Vec<String> {
    if is_loaded_by_name(base) {
        return Vec::new();
    }
    let bytes = base.as_bytes();
    let mut found: Vec<String> = Vec::new();
    let mut from = 0;
    while let Some(pos) = base.get(from..).and_then(|s| s.find("gfx")).map(|p| p + from) {
        from = pos + 3;
        if pos > 0 && bytes.get(pos - 1).is_some_and(u8::is_ascii_alphanumeric) {
            continue;
        }
        let rest = &base[pos..];
        let best = amdgcn_processors()
            .iter()
            .map(|p| p.name)
            .chain(amdgcn_processors().iter().filter_map(|p| p.generic))
            .filter(|name| rest.starts_with(name) && ends_well(&rest[name.len()..]))
            .max_by_key(|name| name.len());
        if let Some(name) = best
            && !found.iter().any(|f| f == name)
        {
            found.push(name.to_string());
        }
    }
    found
}

/// What follows a processor name in a file name named for it.
fn ends_well(after: &str) -> bool {
    let word = after.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or("");
    word.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Shared libraries (`x.so`, `x.so.6.4`) and Python files.
fn is_loaded_by_name(base: &str) -> bool {
    if base.ends_with(".so") || [".py", ".pyc", ".pyi", ".pyd", ".dll"].iter().any(|e| base.ends_with(e)) {
        return true;
    }
    match base.find(".so.") {
        Some(i) => base[i + 4..].bytes().all(|b| b.is_ascii_digit() || b == b'.'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_data_files_of_rocm_are_named_for_their_target() {
        let cases: &[(&str, &[&str])] = &[
            ("TensileLibrary_Type_HH_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx90a.co", &["gfx90a"]),
            ("TensileLibrary_lazy_gfx1100.dat", &["gfx1100"]),
            ("extop_gfx942.co", &["gfx942"]),
            ("Kernels.so-000-gfx90a-xnack+.hsaco", &["gfx90a"]),
            ("gfx90a68.kdb", &["gfx90a"]),
            ("gfx1030_36.HIP.fdb.txt", &["gfx1030"]),
            ("gfx942130.kdb", &["gfx942"]),
            ("both_gfx90a_gfx942.co", &["gfx90a", "gfx942"]),
            ("gfx10-3-generic.hsaco", &["gfx10-3-generic"]),
        ];
        for (name, want) in cases {
            assert_eq!(targets_in_name(name), *want, "{name}");
        }
        for name in [
            "libhipblaslt.so",
            "libMIOpen.so.1.0.60400",
            "gfx90a_tune.py",
            "TensileLibrary.dat",
            "gfx99.co",
            "gfx90azz.co",
            "agfx90a.co",
        ] {
            assert!(targets_in_name(name).is_empty(), "{name}");
        }
    }
}
