//! Which LLVM release a drop-in tool follows, and what differs between the
//! releases, as data.
//!
//! The drop-in tools (`clang-offload-bundler`, `clang-offload-packager` /
//! `llvm-offload-binary`, `clang-offload-wrapper`) each copy one LLVM
//! release exactly. The releases differ in numbers written into files (the
//! OffloadBinary offload-kind numbering, the compressed bundle version), in
//! target names they accept and in the names and `--version` lines of the
//! tools. Every such difference is a field of [`ReleaseFacts`], one row per
//! release ([`LlvmRelease::facts`]); code asks the row instead of comparing
//! release numbers, so a new release is a new row. The sources of each fact
//! (LLVM pull requests, and what Debian's builds were observed to do) are
//! in `docs/llvm-releases.md`.
//!
//! [`follow`] decides which release a drop-in follows from its program name
//! and the `OFFLOAD_LLVM_VERSION` environment variable.

use crate::offload_binary::OffloadKind;
use std::fmt;

/// An LLVM release some drop-in tool follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LlvmRelease {
    /// LLVM 14 (Debian 14.0.6): `clang-offload-wrapper`.
    Llvm14,
    /// LLVM 19 (Debian 19.1.7): the bundler and packager the project first
    /// copied.
    Llvm19,
    /// LLVM 22 (Debian 22.1.8): today's release, the default.
    Llvm22,
}

/// How an OffloadBinary entry numbers its offload kind (`OffloadKind` in
/// LLVM).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KindNumbering {
    /// LLVM 15 to 20: consecutive numbers, OpenMP 1, CUDA 2, HIP 3; no SYCL.
    Sequential,
    /// LLVM 21 and later: one bit per kind, OpenMP 1, CUDA 2, HIP 4, SYCL 8.
    BitMask,
}

impl KindNumbering {
    /// The number stored for `kind`. SYCL has no number of its own in the
    /// sequential numbering; it is written as the bit mask's 8 (a value
    /// LLVM 15-20 read as an unnamed kind).
    pub fn value(self, kind: OffloadKind) -> u16 {
        match (self, kind) {
            (_, OffloadKind::None) => 0,
            (_, OffloadKind::OpenMp) => 1,
            (_, OffloadKind::Cuda) => 2,
            (KindNumbering::Sequential, OffloadKind::Hip) => 3,
            (KindNumbering::BitMask, OffloadKind::Hip) => 4,
            (_, OffloadKind::Sycl) => 8,
            (_, OffloadKind::Other(n)) => n,
        }
    }

    /// The kind a stored number means under this numbering alone (no
    /// guessing: see [`OffloadKind::from_stored`] for the reader's rule).
    pub fn kind(self, value: u16) -> OffloadKind {
        match (self, value) {
            (_, 0) => OffloadKind::None,
            (_, 1) => OffloadKind::OpenMp,
            (_, 2) => OffloadKind::Cuda,
            (KindNumbering::Sequential, 3) | (KindNumbering::BitMask, 4) => OffloadKind::Hip,
            (KindNumbering::BitMask, 8) => OffloadKind::Sycl,
            (_, n) => OffloadKind::Other(n),
        }
    }
}

/// A drop-in tool whose name or version line depends on the release.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `clang-offload-bundler`.
    Bundler,
    /// The OffloadBinary packager: `clang-offload-packager` (LLVM 15-21),
    /// `llvm-offload-binary` (LLVM 22 on).
    Packager,
    /// The wrapper: `clang-offload-wrapper` (up to LLVM 14),
    /// `llvm-offload-wrapper` (LLVM 22 on; a different tool with the same
    /// purpose).
    Wrapper,
}

/// How the bundler reads a bundle entry ID (`<kind>-<triple>[-<target id>]`)
/// and which form of it it writes; `docs/llvm-releases.md` has examples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BundleIdStyle {
    /// LLVM 19: the text after the last `-` (before any `:`) starts the
    /// target ID when it is an offload-architecture name (the empty name
    /// included); the triple is written with four fields as given.
    LastPiece,
    /// LLVM 20 and later: the ID is split at its first five `-` into at
    /// most six fields and must have five or six; the sixth field is the
    /// target ID when its processor is a (non-empty) offload-architecture
    /// name. The triple is written normalised: three fields and an empty
    /// environment for the AMDHSA OS (`amdgcn-amd-amdhsa-`), four fields
    /// with `unknown` for empty ones otherwise.
    SixFields,
}

/// How a tool of the release prints `--version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionStyle {
    /// `<vendor> <tool> version <version>[ (<revision>)]`: the clang tools'
    /// own line.
    ClangTool,
    /// `<vendor> LLVM version <version>` and `  Optimized build.`: LLVM's
    /// generic version printer (tools under llvm/tools).
    Llvm,
}

/// Everything that differs between the releases the drop-ins follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseFacts {
    /// The release.
    pub release: LlvmRelease,
    /// The full version the facts were checked against (`22.1.8`).
    pub version: &'static str,
    /// Debian's package revision, printed by clang tools after the version
    /// (`1~deb12u1`); LLVM 14's tools print none.
    pub debian_revision: Option<&'static str>,
    /// How OffloadBinary offload kinds are numbered; `None` before
    /// OffloadBinary existed (LLVM 14).
    pub kind_numbering: Option<KindNumbering>,
    /// Whether `kind=sycl` names SYCL (otherwise it names no kind).
    pub sycl_kind_name: bool,
    /// The OffloadBinary version the packager and clang write.
    pub offload_binary_version: Option<u32>,
    /// The newest OffloadBinary version the tools read (LLVM 22 refuses 2).
    pub offload_binary_max_read: Option<u32>,
    /// The compressed bundle (CCOB) version `-compress` writes when
    /// `COMPRESSED_BUNDLE_FORMAT_VERSION` is not set; `None` before
    /// compressed bundles.
    pub ccob_default_version: Option<u16>,
    /// Whether `COMPRESSED_BUNDLE_FORMAT_VERSION` is read with this release's
    /// checks and warnings (`Valid values are 2 or 3. Using default version
    /// 3.`). LLVM 19 does not read it at all; our LLVM 19 drop-in reads it
    /// anyway (2 or 3) and warns in its own words.
    pub ccob_version_env_checked: bool,
    /// Whether the bundler's `-verbose` ends with LLVM's timer report
    /// (LLVM 19 prints one, LLVM 22 does not).
    pub bundler_verbose_timers: bool,
    /// Whether the bundler writes the `unknown` environment of an amdgcn
    /// triple as empty (`hip-amdgcn-amd-amdhsa-unknown-gfx90a` is written
    /// `hip-amdgcn-amd-amdhsa--gfx90a`).
    pub amdgcn_unknown_environment_empty: bool,
    /// Whether the bundler refuses a host target whose triple has three
    /// fields (`host-x86_64-unknown-linux`).
    pub refuses_three_field_host_triple: bool,
    /// How the bundler splits a bundle entry ID and writes it back.
    pub bundle_id_style: BundleIdStyle,
    /// Names of clang's offload-architecture table (`OffloadArch`) this
    /// release knows and LLVM 19 does not; the bundler takes the last part of
    /// an ID as a target ID only when it is a name of that table. Names
    /// LLVM 19 knows and this release does not are those of
    /// `amdgcn_processors_removed`.
    pub offload_archs_added: &'static [&'static str],
    /// AMDGCN processors this release knows and LLVM 19 does not.
    pub amdgcn_processors_added: &'static [&'static str],
    /// AMDGCN processors LLVM 19 knows and this release does not.
    pub amdgcn_processors_removed: &'static [&'static str],
    /// The packager's name; `None` when the release has none.
    pub packager_name: Option<&'static str>,
    /// An older packager name the release still installs (as a link), and
    /// the warning it prints on stderr when run under that name (not for
    /// `--version` or `--help`).
    pub packager_old_name: Option<(&'static str, &'static str)>,
    /// Whether the packager run without arguments prints its option list
    /// (LLVM 22) rather than doing nothing (LLVM 19).
    pub packager_no_args_prints_help: bool,
    /// Whether a packaging `--image` needs `triple` as well as `file`
    /// (LLVM 19: "'file' and 'triple' are required image arguments"; LLVM
    /// 22 needs only `file`).
    pub packager_requires_triple: bool,
    /// How the packager prints `--version`.
    pub packager_version_style: VersionStyle,
    /// The wrapper's name; `None` when the release has none.
    pub wrapper_name: Option<&'static str>,
}

const LLVM14: ReleaseFacts = ReleaseFacts {
    release: LlvmRelease::Llvm14,
    version: "14.0.6",
    debian_revision: None,
    kind_numbering: None,
    sycl_kind_name: false,
    offload_binary_version: None,
    offload_binary_max_read: None,
    ccob_default_version: None,
    ccob_version_env_checked: false,
    bundler_verbose_timers: false,
    amdgcn_unknown_environment_empty: false,
    refuses_three_field_host_triple: false,
    bundle_id_style: BundleIdStyle::LastPiece,
    offload_archs_added: &[],
    amdgcn_processors_added: &[],
    amdgcn_processors_removed: &[],
    packager_name: None,
    packager_old_name: None,
    packager_no_args_prints_help: false,
    packager_requires_triple: false,
    packager_version_style: VersionStyle::ClangTool,
    wrapper_name: Some("clang-offload-wrapper"),
};

const LLVM19: ReleaseFacts = ReleaseFacts {
    release: LlvmRelease::Llvm19,
    version: "19.1.7",
    debian_revision: Some("3~deb12u1"),
    kind_numbering: Some(KindNumbering::Sequential),
    sycl_kind_name: false,
    offload_binary_version: Some(1),
    offload_binary_max_read: Some(1),
    ccob_default_version: Some(2),
    ccob_version_env_checked: false,
    bundler_verbose_timers: true,
    amdgcn_unknown_environment_empty: false,
    refuses_three_field_host_triple: false,
    bundle_id_style: BundleIdStyle::LastPiece,
    offload_archs_added: &[],
    amdgcn_processors_added: &[],
    amdgcn_processors_removed: &[],
    packager_name: Some("clang-offload-packager"),
    packager_old_name: None,
    packager_no_args_prints_help: false,
    packager_requires_triple: true,
    packager_version_style: VersionStyle::ClangTool,
    wrapper_name: None,
};

const LLVM22: ReleaseFacts = ReleaseFacts {
    release: LlvmRelease::Llvm22,
    version: "22.1.8",
    debian_revision: Some("1~deb12u1"),
    kind_numbering: Some(KindNumbering::BitMask),
    sycl_kind_name: true,
    offload_binary_version: Some(1),
    offload_binary_max_read: Some(1),
    ccob_default_version: Some(3),
    ccob_version_env_checked: true,
    bundler_verbose_timers: false,
    amdgcn_unknown_environment_empty: true,
    refuses_three_field_host_triple: true,
    bundle_id_style: BundleIdStyle::SixFields,
    offload_archs_added: &[
        "gfx950",
        "gfx1153",
        "gfx1250",
        "gfx1251",
        "gfx9-4-generic",
        "sm_88",
        "sm_100",
        "sm_100a",
        "sm_101",
        "sm_101a",
        "sm_103",
        "sm_103a",
        "sm_110",
        "sm_110a",
        "sm_120",
        "sm_120a",
        "sm_121",
        "sm_121a",
    ],
    amdgcn_processors_added: &["gfx950", "gfx1153", "gfx1250", "gfx1251", "gfx9-4-generic"],
    amdgcn_processors_removed: &["gfx940", "gfx941"],
    packager_name: Some("llvm-offload-binary"),
    packager_old_name: Some((
        "clang-offload-packager",
        "warning: 'clang-offload-packager' is deprecated. Use 'llvm-offload-binary' instead.\n",
    )),
    packager_no_args_prints_help: true,
    packager_requires_triple: false,
    packager_version_style: VersionStyle::Llvm,
    wrapper_name: Some("llvm-offload-wrapper"),
};

/// The rows, oldest first.
pub const RELEASES: [ReleaseFacts; 3] = [LLVM14, LLVM19, LLVM22];

/// The name of the environment variable that picks the release.
pub const ENV_VAR: &str = "OFFLOAD_LLVM_VERSION";

impl LlvmRelease {
    /// The release a drop-in follows when nothing says otherwise.
    pub const DEFAULT: LlvmRelease = LlvmRelease::Llvm22;

    /// The release's row.
    pub fn facts(self) -> &'static ReleaseFacts {
        match self {
            LlvmRelease::Llvm14 => &RELEASES[0],
            LlvmRelease::Llvm19 => &RELEASES[1],
            LlvmRelease::Llvm22 => &RELEASES[2],
        }
    }

    /// The major version number.
    pub fn major(self) -> u32 {
        match self {
            LlvmRelease::Llvm14 => 14,
            LlvmRelease::Llvm19 => 19,
            LlvmRelease::Llvm22 => 22,
        }
    }

    /// The release with this major version.
    pub fn from_major(major: u32) -> Option<Self> {
        RELEASES.iter().map(|r| r.release).find(|r| r.major() == major)
    }

    /// The release named by a version string: `19`, `19.1` or `19.1.7`
    /// (surrounding blanks ignored); `None` for anything else.
    pub fn from_version_str(s: &str) -> Option<Self> {
        let s = s.trim();
        let major = s.split('.').next().unwrap_or("");
        if major.is_empty() || !major.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if !s.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) {
            return None;
        }
        major.parse().ok().and_then(Self::from_major)
    }

    /// The number stored for an offload kind in the OffloadBinaries this
    /// release writes (`None`: the release has no OffloadBinary).
    pub fn offload_kind_value(self, kind: OffloadKind) -> Option<u16> {
        self.facts().kind_numbering.map(|n| n.value(kind))
    }

    /// The offload kind a packager `kind=` value names in this release:
    /// exact names; `sycl` only where the release knows it; anything else
    /// (`OpenMP`, `openmp,cuda`) names no kind.
    pub fn offload_kind_from_name(self, name: &str) -> OffloadKind {
        match name {
            "sycl" if self.facts().sycl_kind_name => OffloadKind::Sycl,
            _ => OffloadKind::from_name(name),
        }
    }

    /// Whether the packager of this release extracts a binary whose stored
    /// offload kind is `stored` for `--image=kind=<name>`: the release
    /// compares the stored number with the number it gives the name, so
    /// LLVM 22 does not extract an LLVM 19 HIP image (3) for `kind=hip`.
    pub fn kind_filter_matches(self, stored: u16, name: &str) -> bool {
        self.offload_kind_value(self.offload_kind_from_name(name)) == Some(stored)
    }

    /// Whether the release's AMDGCN processor table has `name` (canonical
    /// name; LLVM 14 is answered with LLVM 19's table, which the wrapper
    /// never consults).
    pub fn knows_amdgcn_processor(self, name: &str) -> bool {
        let f = self.facts();
        if f.amdgcn_processors_removed.contains(&name) {
            return false;
        }
        f.amdgcn_processors_added.contains(&name)
            || crate::amdgpu::Table::Llvm19.amdgcn_processors().iter().any(|p| p.name == name)
    }

    /// Whether the release's offload-architecture table (clang's
    /// `OffloadArch` names, which decide where a bundle entry ID's target ID
    /// starts) has `name`. Exact, case-sensitive; LLVM 19's table has the
    /// empty name.
    pub fn knows_offload_arch(self, name: &str) -> bool {
        let f = self.facts();
        if f.amdgcn_processors_removed.contains(&name) {
            return false;
        }
        f.offload_archs_added.contains(&name) || crate::offload_arch::is_llvm19_offload_arch(name)
    }

    /// The tool's name in this release (`None`: the release has no such
    /// tool).
    pub fn tool_name(self, tool: Tool) -> Option<&'static str> {
        let f = self.facts();
        match tool {
            Tool::Bundler => Some("clang-offload-bundler"),
            Tool::Packager => f.packager_name,
            Tool::Wrapper => f.wrapper_name,
        }
    }

    /// What the release's tool prints for `--version` (stdout, with the
    /// final newline) in Debian's build, `vendor` being `Debian` there.
    /// `None` when the release has no such tool.
    pub fn upstream_version_text(self, tool: Tool, vendor: &str) -> Option<String> {
        let f = self.facts();
        let name = self.tool_name(tool)?;
        let style = match tool {
            Tool::Packager => f.packager_version_style,
            Tool::Wrapper if self >= LlvmRelease::Llvm22 => VersionStyle::Llvm,
            _ => VersionStyle::ClangTool,
        };
        Some(match (style, f.debian_revision) {
            (VersionStyle::Llvm, _) => format!("{vendor} LLVM version {}\n  Optimized build.\n", f.version),
            (VersionStyle::ClangTool, Some(rev)) => format!("{vendor} {name} version {} ({rev})\n", f.version),
            (VersionStyle::ClangTool, None) => format!("{vendor} {name} version {}\n", f.version),
        })
    }

    /// The project's own `--version` line for a drop-in: which tool, our
    /// version, and the LLVM release it copies.
    pub fn compatible_version_line(self, tool: Tool, our_version: &str) -> Option<String> {
        let name = self.tool_name(tool)?;
        Some(format!("offload-binutils {name} version {our_version} (compatible with LLVM {})", self.facts().version))
    }
}

impl fmt::Display for LlvmRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LLVM {}", self.major())
    }
}

/// Which release a drop-in follows, from its program name (`argv[0]`) and
/// the value of `OFFLOAD_LLVM_VERSION` (`None` when unset):
///
/// 1. a program name ending in `-<major>` of a known release (after its
///    directory and any `.exe`): `clang-offload-bundler-19` follows 19,
///    `llvm-offload-binary-22` 22; the name is the more specific choice and
///    wins over the environment;
/// 2. otherwise the environment's release (`19`, `19.1.7`, ...);
/// 3. otherwise [`LlvmRelease::DEFAULT`] (22). Unknown values (`18`, `x`)
///    count as unset; [`LlvmRelease::from_version_str`] tells a caller that
///    wants to warn about them.
///
/// ```
/// use offload_format::llvm_release::{LlvmRelease, follow};
///
/// assert_eq!(follow("/usr/bin/clang-offload-bundler-19", None), LlvmRelease::Llvm19);
/// assert_eq!(follow("clang-offload-bundler", Some("19")), LlvmRelease::Llvm19);
/// assert_eq!(follow("clang-offload-bundler", None), LlvmRelease::Llvm22);
/// assert_eq!(follow("llvm-offload-binary-22", Some("19")), LlvmRelease::Llvm22);
/// ```
pub fn follow(argv0: &str, env: Option<&str>) -> LlvmRelease {
    let file = argv0.rsplit(['/', '\\']).next().unwrap_or(argv0);
    let stem = match file.len().checked_sub(4) {
        Some(i) if file.get(i..).is_some_and(|e| e.eq_ignore_ascii_case(".exe")) => &file[..i],
        _ => file,
    };
    let from_name = stem
        .rsplit_once('-')
        .filter(|(_, v)| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|(_, v)| v.parse().ok())
        .and_then(LlvmRelease::from_major)
        // LLVM 14 has no drop-in other than the wrapper, which has no
        // release choice; a `-14` name falls through.
        .filter(|&r| r != LlvmRelease::Llvm14);
    from_name
        .or_else(|| env.and_then(LlvmRelease::from_version_str).filter(|&r| r != LlvmRelease::Llvm14))
        .unwrap_or(LlvmRelease::DEFAULT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_in_order_and_found_by_major() {
        for (i, r) in RELEASES.iter().enumerate() {
            assert_eq!(r.release.facts(), r);
            assert_eq!(LlvmRelease::from_major(r.release.major()), Some(r.release));
            assert!(r.version.starts_with(&format!("{}.", r.release.major())));
            if i > 0 {
                assert!(RELEASES[i - 1].release < r.release);
            }
        }
        assert_eq!(LlvmRelease::from_major(20), None);
    }

    #[test]
    fn kind_numbers_per_release() {
        use OffloadKind::*;
        let v19: Vec<_> = [None, OpenMp, Cuda, Hip, Sycl].map(|k| LlvmRelease::Llvm19.offload_kind_value(k)).into();
        let v22: Vec<_> = [None, OpenMp, Cuda, Hip, Sycl].map(|k| LlvmRelease::Llvm22.offload_kind_value(k)).into();
        assert_eq!(v19, [Some(0), Some(1), Some(2), Some(3), Some(8)]);
        assert_eq!(v22, [Some(0), Some(1), Some(2), Some(4), Some(8)]);
        assert_eq!(LlvmRelease::Llvm14.offload_kind_value(Hip), Option::None);
        assert_eq!(KindNumbering::BitMask.kind(3), Other(3));
        assert_eq!(KindNumbering::Sequential.kind(4), Other(4));
        assert_eq!(KindNumbering::Sequential.kind(8), Other(8));
        for n in [KindNumbering::Sequential, KindNumbering::BitMask] {
            for k in [None, OpenMp, Cuda, Hip, Other(5), Other(300)] {
                assert_eq!(n.kind(n.value(k)), k, "{n:?} {k:?}");
            }
        }
    }

    #[test]
    fn kind_names_and_filters() {
        assert_eq!(LlvmRelease::Llvm19.offload_kind_from_name("sycl"), OffloadKind::None);
        assert_eq!(LlvmRelease::Llvm22.offload_kind_from_name("sycl"), OffloadKind::Sycl);
        assert_eq!(LlvmRelease::Llvm22.offload_kind_from_name("SYCL"), OffloadKind::None);
        assert!(LlvmRelease::Llvm19.kind_filter_matches(3, "hip"));
        assert!(!LlvmRelease::Llvm19.kind_filter_matches(4, "hip"));
        assert!(LlvmRelease::Llvm22.kind_filter_matches(4, "hip"));
        assert!(!LlvmRelease::Llvm22.kind_filter_matches(3, "hip"));
        // An unknown name is the kind None, which matches stored 0.
        assert!(LlvmRelease::Llvm19.kind_filter_matches(0, "sycl"));
        assert!(LlvmRelease::Llvm22.kind_filter_matches(8, "sycl"));
        assert!(!LlvmRelease::Llvm14.kind_filter_matches(0, "openmp"));
    }

    #[test]
    fn processors_of_llvm_22() {
        let r22 = LlvmRelease::Llvm22;
        for p in ["gfx950", "gfx1250", "gfx1251", "gfx1153", "gfx9-4-generic", "gfx90a", "gfx942"] {
            assert!(r22.knows_amdgcn_processor(p), "{p}");
        }
        assert!(!r22.knows_amdgcn_processor("gfx940"));
        assert!(!r22.knows_amdgcn_processor("gfx941"));
        assert!(LlvmRelease::Llvm19.knows_amdgcn_processor("gfx940"));
        assert!(!LlvmRelease::Llvm19.knows_amdgcn_processor("gfx950"));
        // The added names are all in the crate's newest table.
        for p in r22.facts().amdgcn_processors_added {
            assert!(crate::amdgpu::Table::Current.amdgcn_processor(p).is_some(), "{p}");
        }
    }

    /// Probed with `clang-offload-bundler-22`: a name is in the table when
    /// `hip-amdgcn-amd-amdhsa--<name>` keeps it in the written ID.
    #[test]
    fn offload_archs_of_llvm_22() {
        let r22 = LlvmRelease::Llvm22;
        for n in
            ["gfx950", "gfx1250", "gfx9-4-generic", "sm_120a", "sm_88", "gfx90a", "sm_70", "generic", "amdgcnspirv"]
        {
            assert!(r22.knows_offload_arch(n), "{n}");
        }
        for n in ["gfx940", "gfx941", "gfx12-5-generic", "gfx1154", "sm_100f", "fiji", "unknown"] {
            assert!(!r22.knows_offload_arch(n), "{n}");
        }
        assert!(LlvmRelease::Llvm19.knows_offload_arch("gfx940"));
        assert!(!LlvmRelease::Llvm19.knows_offload_arch("sm_100"));
    }

    #[test]
    fn names_and_version_texts_as_debian_prints_them() {
        use LlvmRelease::*;
        assert_eq!(Llvm19.tool_name(Tool::Packager), Some("clang-offload-packager"));
        assert_eq!(Llvm22.tool_name(Tool::Packager), Some("llvm-offload-binary"));
        assert_eq!(Llvm14.tool_name(Tool::Packager), None);
        assert_eq!(
            Llvm22.upstream_version_text(Tool::Packager, "Debian").unwrap(),
            "Debian LLVM version 22.1.8\n  Optimized build.\n"
        );
        assert_eq!(
            Llvm22.upstream_version_text(Tool::Bundler, "Debian").unwrap(),
            "Debian clang-offload-bundler version 22.1.8 (1~deb12u1)\n"
        );
        assert_eq!(
            Llvm19.upstream_version_text(Tool::Packager, "Debian").unwrap(),
            "Debian clang-offload-packager version 19.1.7 (3~deb12u1)\n"
        );
        assert_eq!(
            Llvm14.upstream_version_text(Tool::Wrapper, "Debian").unwrap(),
            "Debian clang-offload-wrapper version 14.0.6\n"
        );
        assert_eq!(
            Llvm22.upstream_version_text(Tool::Wrapper, "Debian").unwrap(),
            "Debian LLVM version 22.1.8\n  Optimized build.\n"
        );
        assert_eq!(
            Llvm22.compatible_version_line(Tool::Packager, "0.9.0").unwrap(),
            "offload-binutils llvm-offload-binary version 0.9.0 (compatible with LLVM 22.1.8)"
        );
        assert_eq!(Llvm19.facts().ccob_default_version, Some(2));
        assert_eq!(Llvm22.facts().ccob_default_version, Some(3));
    }

    #[test]
    fn which_release_a_drop_in_follows() {
        use LlvmRelease::*;
        let cases: &[(&str, Option<&str>, LlvmRelease)] = &[
            ("clang-offload-bundler", None, Llvm22),
            ("clang-offload-bundler-19", None, Llvm19),
            ("/opt/x/bin/clang-offload-packager-19", None, Llvm19),
            ("C:\\x\\clang-offload-bundler-19.exe", None, Llvm19),
            ("clang-offload-bundler-19.EXE", None, Llvm19),
            ("clang-offload-bundler", Some("19"), Llvm19),
            ("clang-offload-bundler", Some(" 19.1.7 "), Llvm19),
            ("clang-offload-bundler", Some("22"), Llvm22),
            ("clang-offload-bundler", Some("18"), Llvm22),
            ("clang-offload-bundler", Some("14"), Llvm22),
            ("clang-offload-bundler", Some("19x"), Llvm22),
            ("clang-offload-bundler", Some(""), Llvm22),
            ("clang-offload-bundler-22", Some("19"), Llvm22),
            ("clang-offload-bundler-19", Some("22"), Llvm19),
            ("clang-offload-bundler-20", None, Llvm22),
            ("clang-offload-bundler-14", Some("19"), Llvm19),
            ("llvm-offload-binary", None, Llvm22),
            ("bundler19", None, Llvm22),
            ("", None, Llvm22),
            ("-19", None, Llvm19),
            ("x-", None, Llvm22),
            ("dir-19/clang-offload-bundler", None, Llvm22),
        ];
        for &(argv0, env, want) in cases {
            assert_eq!(follow(argv0, env), want, "{argv0:?} {env:?}");
        }
        assert_eq!(LlvmRelease::from_version_str("19."), Option::None);
        assert_eq!(LlvmRelease::from_version_str("22.1"), Some(Llvm22));
    }
}
