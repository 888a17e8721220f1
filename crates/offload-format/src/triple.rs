//! Target triples as LLVM 19.1.7's `llvm::Triple` understands them: the
//! parts of it that clang-offload-bundler's behaviour depends on.
//!
//! The bundler of LLVM 19 parses the triple of every bundle entry ID, rejects
//! an ID whose architecture is unknown (`unknown target triple`), rebuilds the
//! triple from exactly four fields (always three dashes), and decides whether
//! a stored code object satisfies a requested one with
//! `Triple::isCompatibleWith`. That comparison works on *parsed* components,
//! so `x86_64-pc-linux-gnu` and `x86_64-pc-linux-gnu5` compare equal (OS
//! names are matched by prefix) while `amd` and `AMD` do not (vendor names
//! are matched exactly). To give the same answers we need LLVM's parsing
//! tables, which this module holds as data:
//!
//! * architecture names, including the ARM/AArch64/Thumb sub-architecture
//!   spellings (`armv7a`, `thumbv7em`, `arm64_32`, `aarch64_be`, ...), which
//!   LLVM validates with its ARM target parser;
//! * the sub-architecture (it takes part in compatibility: `armv7` and
//!   `armv7s` differ);
//! * vendors (exact names), operating systems and environments (prefix
//!   matches, so version suffixes are ignored), and the object format
//!   (an explicit suffix of the environment, else the default for the
//!   architecture and OS).
//!
//! Every table was checked against LLVM 19.1.7 itself; the test vectors
//! live in `tests/fixtures/llvm19/` (see its `COMMANDS.md`).

use std::fmt;

mod arm;

/// Defines a plain enum plus `name()`, the spelling LLVM's
/// `get*TypeName` gives for each value (used in messages and fixtures).
macro_rules! named_enum {
    ($(#[$meta:meta])* $vis:vis enum $ty:ident { $($variant:ident => $name:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        // Each variant is LLVM's value of the same name, and `name()`
        // spells it: a doc line per variant would repeat the table.
        #[allow(missing_docs)]
        $vis enum $ty { $($variant,)* }

        impl $ty {
            /// LLVM 19's name for this value.
            pub fn name(self) -> &'static str {
                match self { $($ty::$variant => $name,)* }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named_enum! {
    /// `Triple::ArchType` of LLVM 19 (which still has `le32`/`le64`).
    #[non_exhaustive]
    pub enum Arch {
        Unknown => "unknown",
        Arm => "arm",
        Armeb => "armeb",
        Aarch64 => "aarch64",
        Aarch64Be => "aarch64_be",
        Aarch64_32 => "aarch64_32",
        Arc => "arc",
        Avr => "avr",
        Bpfel => "bpfel",
        Bpfeb => "bpfeb",
        Csky => "csky",
        Dxil => "dxil",
        Hexagon => "hexagon",
        Loongarch32 => "loongarch32",
        Loongarch64 => "loongarch64",
        M68k => "m68k",
        Mips => "mips",
        Mipsel => "mipsel",
        Mips64 => "mips64",
        Mips64el => "mips64el",
        Msp430 => "msp430",
        Ppc => "powerpc",
        Ppcle => "powerpcle",
        Ppc64 => "powerpc64",
        Ppc64le => "powerpc64le",
        R600 => "r600",
        Amdgcn => "amdgcn",
        Riscv32 => "riscv32",
        Riscv64 => "riscv64",
        Sparc => "sparc",
        Sparcv9 => "sparcv9",
        Sparcel => "sparcel",
        Systemz => "s390x",
        Tce => "tce",
        Tcele => "tcele",
        Thumb => "thumb",
        Thumbeb => "thumbeb",
        X86 => "i386",
        X86_64 => "x86_64",
        Xcore => "xcore",
        Xtensa => "xtensa",
        Nvptx => "nvptx",
        Nvptx64 => "nvptx64",
        Le32 => "le32",
        Le64 => "le64",
        Amdil => "amdil",
        Amdil64 => "amdil64",
        Hsail => "hsail",
        Hsail64 => "hsail64",
        Spir => "spir",
        Spir64 => "spir64",
        Spirv => "spirv",
        Spirv32 => "spirv32",
        Spirv64 => "spirv64",
        Kalimba => "kalimba",
        Shave => "shave",
        Lanai => "lanai",
        Wasm32 => "wasm32",
        Wasm64 => "wasm64",
        Renderscript32 => "renderscript32",
        Renderscript64 => "renderscript64",
        Ve => "ve",
    }
}

named_enum! {
    /// `Triple::SubArchType` of LLVM 19. The names are ours (LLVM has no
    /// name function for sub-architectures); the fixtures use them.
    #[non_exhaustive]
    pub enum SubArch {
        None => "none",
        ArmV9_5a => "arm_v9_5a",
        ArmV9_4a => "arm_v9_4a",
        ArmV9_3a => "arm_v9_3a",
        ArmV9_2a => "arm_v9_2a",
        ArmV9_1a => "arm_v9_1a",
        ArmV9 => "arm_v9",
        ArmV8_9a => "arm_v8_9a",
        ArmV8_8a => "arm_v8_8a",
        ArmV8_7a => "arm_v8_7a",
        ArmV8_6a => "arm_v8_6a",
        ArmV8_5a => "arm_v8_5a",
        ArmV8_4a => "arm_v8_4a",
        ArmV8_3a => "arm_v8_3a",
        ArmV8_2a => "arm_v8_2a",
        ArmV8_1a => "arm_v8_1a",
        ArmV8 => "arm_v8",
        ArmV8r => "arm_v8r",
        ArmV8mBaseline => "arm_v8m_baseline",
        ArmV8mMainline => "arm_v8m_mainline",
        ArmV8_1mMainline => "arm_v8_1m_mainline",
        ArmV7 => "arm_v7",
        ArmV7em => "arm_v7em",
        ArmV7m => "arm_v7m",
        ArmV7s => "arm_v7s",
        ArmV7k => "arm_v7k",
        ArmV7ve => "arm_v7ve",
        ArmV6 => "arm_v6",
        ArmV6m => "arm_v6m",
        ArmV6k => "arm_v6k",
        ArmV6t2 => "arm_v6t2",
        ArmV5 => "arm_v5",
        ArmV5te => "arm_v5te",
        ArmV4t => "arm_v4t",
        Arm64e => "arm64e",
        Arm64ec => "arm64ec",
        KalimbaV3 => "kalimba_v3",
        KalimbaV4 => "kalimba_v4",
        KalimbaV5 => "kalimba_v5",
        MipsR6 => "mips_r6",
        PpcSpe => "ppc_spe",
        SpirvV10 => "spirv_v10",
        SpirvV11 => "spirv_v11",
        SpirvV12 => "spirv_v12",
        SpirvV13 => "spirv_v13",
        SpirvV14 => "spirv_v14",
        SpirvV15 => "spirv_v15",
        SpirvV16 => "spirv_v16",
        DxilV1_0 => "dxil_v1_0",
        DxilV1_1 => "dxil_v1_1",
        DxilV1_2 => "dxil_v1_2",
        DxilV1_3 => "dxil_v1_3",
        DxilV1_4 => "dxil_v1_4",
        DxilV1_5 => "dxil_v1_5",
        DxilV1_6 => "dxil_v1_6",
        DxilV1_7 => "dxil_v1_7",
        DxilV1_8 => "dxil_v1_8",
    }
}

named_enum! {
    /// `Triple::VendorType` of LLVM 19.
    #[non_exhaustive]
    pub enum Vendor {
        Unknown => "unknown",
        Apple => "apple",
        Pc => "pc",
        Scei => "scei",
        Freescale => "fsl",
        Ibm => "ibm",
        ImaginationTechnologies => "img",
        MipsTechnologies => "mti",
        Nvidia => "nvidia",
        Csr => "csr",
        Amd => "amd",
        Mesa => "mesa",
        Suse => "suse",
        OpenEmbedded => "oe",
    }
}

named_enum! {
    /// `Triple::OSType` of LLVM 19.
    #[non_exhaustive]
    pub enum Os {
        Unknown => "unknown",
        Darwin => "darwin",
        DragonFly => "dragonfly",
        FreeBsd => "freebsd",
        Fuchsia => "fuchsia",
        Ios => "ios",
        KFreeBsd => "kfreebsd",
        Linux => "linux",
        Lv2 => "lv2",
        MacOsx => "macosx",
        NetBsd => "netbsd",
        OpenBsd => "openbsd",
        Solaris => "solaris",
        Uefi => "uefi",
        Win32 => "windows",
        Zos => "zos",
        Haiku => "haiku",
        Rtems => "rtems",
        NaCl => "nacl",
        Aix => "aix",
        Cuda => "cuda",
        Nvcl => "nvcl",
        AmdHsa => "amdhsa",
        Ps4 => "ps4",
        Ps5 => "ps5",
        ElfIamcu => "elfiamcu",
        TvOs => "tvos",
        WatchOs => "watchos",
        BridgeOs => "bridgeos",
        DriverKit => "driverkit",
        XrOs => "xros",
        Mesa3d => "mesa3d",
        AmdPal => "amdpal",
        HermitCore => "hermit",
        Hurd => "hurd",
        Wasi => "wasi",
        Emscripten => "emscripten",
        ShaderModel => "shadermodel",
        LiteOs => "liteos",
        Serenity => "serenity",
        Vulkan => "vulkan",
    }
}

named_enum! {
    /// `Triple::EnvironmentType` of LLVM 19.
    #[non_exhaustive]
    pub enum Environment {
        Unknown => "unknown",
        Gnu => "gnu",
        GnuAbiN32 => "gnuabin32",
        GnuAbi64 => "gnuabi64",
        GnuEabi => "gnueabi",
        GnuEabiHf => "gnueabihf",
        GnuF32 => "gnuf32",
        GnuF64 => "gnuf64",
        GnuSf => "gnusf",
        GnuX32 => "gnux32",
        GnuIlp32 => "gnu_ilp32",
        Code16 => "code16",
        Eabi => "eabi",
        EabiHf => "eabihf",
        Android => "android",
        Musl => "musl",
        MuslEabi => "musleabi",
        MuslEabiHf => "musleabihf",
        MuslX32 => "muslx32",
        Msvc => "msvc",
        Itanium => "itanium",
        Cygnus => "cygnus",
        CoreClr => "coreclr",
        Simulator => "simulator",
        MacAbi => "macabi",
        Pixel => "pixel",
        Vertex => "vertex",
        Geometry => "geometry",
        Hull => "hull",
        Domain => "domain",
        Compute => "compute",
        Library => "library",
        RayGeneration => "raygeneration",
        Intersection => "intersection",
        AnyHit => "anyhit",
        ClosestHit => "closesthit",
        Miss => "miss",
        Callable => "callable",
        Mesh => "mesh",
        Amplification => "amplification",
        OpenCl => "opencl",
        OpenHos => "ohos",
        PAuthTest => "pauthtest",
        GnuT64 => "gnut64",
        GnuEabiT64 => "gnueabit64",
        GnuEabiHfT64 => "gnueabihft64",
    }
}

named_enum! {
    /// `Triple::ObjectFormatType` of LLVM 19. `name()` of `Unknown` is
    /// "unknown" here (LLVM prints an empty string).
    #[non_exhaustive]
    pub enum ObjectFormat {
        Unknown => "unknown",
        Coff => "coff",
        DxContainer => "dxcontainer",
        Elf => "elf",
        Goff => "goff",
        MachO => "macho",
        Spirv => "spirv",
        Wasm => "wasm",
        Xcoff => "xcoff",
    }
}

// ---------------------------------------------------------------------------
// Parsing tables (LLVM 19.1.7, lib/TargetParser/Triple.cpp)
// ---------------------------------------------------------------------------

/// Architecture spellings matched exactly, before the ARM and BPF rules.
const ARCH_NAMES: &[(&str, Arch)] = &[
    ("i386", Arch::X86),
    ("i486", Arch::X86),
    ("i586", Arch::X86),
    ("i686", Arch::X86),
    ("i786", Arch::X86),
    ("i886", Arch::X86),
    ("i986", Arch::X86),
    ("amd64", Arch::X86_64),
    ("x86_64", Arch::X86_64),
    ("x86_64h", Arch::X86_64),
    ("powerpc", Arch::Ppc),
    ("powerpcspe", Arch::Ppc),
    ("ppc", Arch::Ppc),
    ("ppc32", Arch::Ppc),
    ("powerpcle", Arch::Ppcle),
    ("ppcle", Arch::Ppcle),
    ("ppc32le", Arch::Ppcle),
    ("powerpc64", Arch::Ppc64),
    ("ppu", Arch::Ppc64),
    ("ppc64", Arch::Ppc64),
    ("powerpc64le", Arch::Ppc64le),
    ("ppc64le", Arch::Ppc64le),
    ("xscale", Arch::Arm),
    ("xscaleeb", Arch::Armeb),
    ("aarch64", Arch::Aarch64),
    ("aarch64_be", Arch::Aarch64Be),
    ("aarch64_32", Arch::Aarch64_32),
    ("arc", Arch::Arc),
    ("arm64", Arch::Aarch64),
    ("arm64_32", Arch::Aarch64_32),
    ("arm64e", Arch::Aarch64),
    ("arm64ec", Arch::Aarch64),
    ("arm", Arch::Arm),
    ("armeb", Arch::Armeb),
    ("thumb", Arch::Thumb),
    ("thumbeb", Arch::Thumbeb),
    ("avr", Arch::Avr),
    ("m68k", Arch::M68k),
    ("msp430", Arch::Msp430),
    ("mips", Arch::Mips),
    ("mipseb", Arch::Mips),
    ("mipsallegrex", Arch::Mips),
    ("mipsisa32r6", Arch::Mips),
    ("mipsr6", Arch::Mips),
    ("mipsel", Arch::Mipsel),
    ("mipsallegrexel", Arch::Mipsel),
    ("mipsisa32r6el", Arch::Mipsel),
    ("mipsr6el", Arch::Mipsel),
    ("mips64", Arch::Mips64),
    ("mips64eb", Arch::Mips64),
    ("mipsn32", Arch::Mips64),
    ("mipsisa64r6", Arch::Mips64),
    ("mips64r6", Arch::Mips64),
    ("mipsn32r6", Arch::Mips64),
    ("mips64el", Arch::Mips64el),
    ("mipsn32el", Arch::Mips64el),
    ("mipsisa64r6el", Arch::Mips64el),
    ("mips64r6el", Arch::Mips64el),
    ("mipsn32r6el", Arch::Mips64el),
    ("r600", Arch::R600),
    ("amdgcn", Arch::Amdgcn),
    ("riscv32", Arch::Riscv32),
    ("riscv64", Arch::Riscv64),
    ("hexagon", Arch::Hexagon),
    ("s390x", Arch::Systemz),
    ("systemz", Arch::Systemz),
    ("sparc", Arch::Sparc),
    ("sparcel", Arch::Sparcel),
    ("sparcv9", Arch::Sparcv9),
    ("sparc64", Arch::Sparcv9),
    ("tce", Arch::Tce),
    ("tcele", Arch::Tcele),
    ("xcore", Arch::Xcore),
    ("nvptx", Arch::Nvptx),
    ("nvptx64", Arch::Nvptx64),
    ("le32", Arch::Le32),
    ("le64", Arch::Le64),
    ("amdil", Arch::Amdil),
    ("amdil64", Arch::Amdil64),
    ("hsail", Arch::Hsail),
    ("hsail64", Arch::Hsail64),
    ("spir", Arch::Spir),
    ("spir64", Arch::Spir64),
    ("spirv", Arch::Spirv),
    ("spirv1.5", Arch::Spirv),
    ("spirv1.6", Arch::Spirv),
    ("spirv32", Arch::Spirv32),
    ("spirv32v1.0", Arch::Spirv32),
    ("spirv32v1.1", Arch::Spirv32),
    ("spirv32v1.2", Arch::Spirv32),
    ("spirv32v1.3", Arch::Spirv32),
    ("spirv32v1.4", Arch::Spirv32),
    ("spirv32v1.5", Arch::Spirv32),
    ("spirv32v1.6", Arch::Spirv32),
    ("spirv64", Arch::Spirv64),
    ("spirv64v1.0", Arch::Spirv64),
    ("spirv64v1.1", Arch::Spirv64),
    ("spirv64v1.2", Arch::Spirv64),
    ("spirv64v1.3", Arch::Spirv64),
    ("spirv64v1.4", Arch::Spirv64),
    ("spirv64v1.5", Arch::Spirv64),
    ("spirv64v1.6", Arch::Spirv64),
    ("lanai", Arch::Lanai),
    ("renderscript32", Arch::Renderscript32),
    ("renderscript64", Arch::Renderscript64),
    ("shave", Arch::Shave),
    ("ve", Arch::Ve),
    ("wasm32", Arch::Wasm32),
    ("wasm64", Arch::Wasm64),
    ("csky", Arch::Csky),
    ("loongarch32", Arch::Loongarch32),
    ("loongarch64", Arch::Loongarch64),
    ("dxil", Arch::Dxil),
    ("dxilv1.0", Arch::Dxil),
    ("dxilv1.1", Arch::Dxil),
    ("dxilv1.2", Arch::Dxil),
    ("dxilv1.3", Arch::Dxil),
    ("dxilv1.4", Arch::Dxil),
    ("dxilv1.5", Arch::Dxil),
    ("dxilv1.6", Arch::Dxil),
    ("dxilv1.7", Arch::Dxil),
    ("dxilv1.8", Arch::Dxil),
    ("xtensa", Arch::Xtensa),
];

/// Vendor names: exact matches only.
const VENDOR_NAMES: &[(&str, Vendor)] = &[
    ("apple", Vendor::Apple),
    ("pc", Vendor::Pc),
    ("scei", Vendor::Scei),
    ("sie", Vendor::Scei),
    ("fsl", Vendor::Freescale),
    ("ibm", Vendor::Ibm),
    ("img", Vendor::ImaginationTechnologies),
    ("mti", Vendor::MipsTechnologies),
    ("nvidia", Vendor::Nvidia),
    ("csr", Vendor::Csr),
    ("amd", Vendor::Amd),
    ("mesa", Vendor::Mesa),
    ("suse", Vendor::Suse),
    ("oe", Vendor::OpenEmbedded),
];

/// OS names, matched as prefixes in this order (so `linux5`, `amdhsa5`,
/// `macos10.15` and `darwin23` all count), the first match wins.
const OS_PREFIXES: &[(&str, Os)] = &[
    ("darwin", Os::Darwin),
    ("dragonfly", Os::DragonFly),
    ("freebsd", Os::FreeBsd),
    ("fuchsia", Os::Fuchsia),
    ("ios", Os::Ios),
    ("kfreebsd", Os::KFreeBsd),
    ("linux", Os::Linux),
    ("lv2", Os::Lv2),
    ("macos", Os::MacOsx),
    ("netbsd", Os::NetBsd),
    ("openbsd", Os::OpenBsd),
    ("solaris", Os::Solaris),
    ("uefi", Os::Uefi),
    ("win32", Os::Win32),
    ("windows", Os::Win32),
    ("zos", Os::Zos),
    ("haiku", Os::Haiku),
    ("rtems", Os::Rtems),
    ("nacl", Os::NaCl),
    ("aix", Os::Aix),
    ("cuda", Os::Cuda),
    ("nvcl", Os::Nvcl),
    ("amdhsa", Os::AmdHsa),
    ("ps4", Os::Ps4),
    ("ps5", Os::Ps5),
    ("elfiamcu", Os::ElfIamcu),
    ("tvos", Os::TvOs),
    ("watchos", Os::WatchOs),
    ("bridgeos", Os::BridgeOs),
    ("driverkit", Os::DriverKit),
    ("xros", Os::XrOs),
    ("visionos", Os::XrOs),
    ("mesa3d", Os::Mesa3d),
    ("amdpal", Os::AmdPal),
    ("hermit", Os::HermitCore),
    ("hurd", Os::Hurd),
    ("wasi", Os::Wasi),
    ("emscripten", Os::Emscripten),
    ("shadermodel", Os::ShaderModel),
    ("liteos", Os::LiteOs),
    ("serenity", Os::Serenity),
    ("vulkan", Os::Vulkan),
];

/// Environment names, matched as prefixes in this order; longer names come
/// before their own prefixes (`gnueabihf` before `gnueabi` before `gnu`).
const ENVIRONMENT_PREFIXES: &[(&str, Environment)] = &[
    ("eabihf", Environment::EabiHf),
    ("eabi", Environment::Eabi),
    ("gnuabin32", Environment::GnuAbiN32),
    ("gnuabi64", Environment::GnuAbi64),
    ("gnueabihft64", Environment::GnuEabiHfT64),
    ("gnueabihf", Environment::GnuEabiHf),
    ("gnueabit64", Environment::GnuEabiT64),
    ("gnueabi", Environment::GnuEabi),
    ("gnuf32", Environment::GnuF32),
    ("gnuf64", Environment::GnuF64),
    ("gnusf", Environment::GnuSf),
    ("gnux32", Environment::GnuX32),
    ("gnu_ilp32", Environment::GnuIlp32),
    ("code16", Environment::Code16),
    ("gnut64", Environment::GnuT64),
    ("gnu", Environment::Gnu),
    ("android", Environment::Android),
    ("musleabihf", Environment::MuslEabiHf),
    ("musleabi", Environment::MuslEabi),
    ("muslx32", Environment::MuslX32),
    ("musl", Environment::Musl),
    ("msvc", Environment::Msvc),
    ("itanium", Environment::Itanium),
    ("cygnus", Environment::Cygnus),
    ("coreclr", Environment::CoreClr),
    ("simulator", Environment::Simulator),
    ("macabi", Environment::MacAbi),
    ("pixel", Environment::Pixel),
    ("vertex", Environment::Vertex),
    ("geometry", Environment::Geometry),
    ("hull", Environment::Hull),
    ("domain", Environment::Domain),
    ("compute", Environment::Compute),
    ("library", Environment::Library),
    ("raygeneration", Environment::RayGeneration),
    ("intersection", Environment::Intersection),
    ("anyhit", Environment::AnyHit),
    ("closesthit", Environment::ClosestHit),
    ("miss", Environment::Miss),
    ("callable", Environment::Callable),
    ("mesh", Environment::Mesh),
    ("amplification", Environment::Amplification),
    ("opencl", Environment::OpenCl),
    ("ohos", Environment::OpenHos),
    ("pauthtest", Environment::PAuthTest),
];

/// Object format named by the *end* of the environment component
/// (`gnu-elf`, `msvc-coff`, plain `macho`); `xcoff` is tested before `coff`.
const OBJECT_FORMAT_SUFFIXES: &[(&str, ObjectFormat)] = &[
    ("xcoff", ObjectFormat::Xcoff),
    ("coff", ObjectFormat::Coff),
    ("elf", ObjectFormat::Elf),
    ("goff", ObjectFormat::Goff),
    ("macho", ObjectFormat::MachO),
    ("wasm", ObjectFormat::Wasm),
    ("spirv", ObjectFormat::Spirv),
];

/// Environment implied by a triple that is a lone MIPS architecture name
/// (`Triple("mips64")` is a GNU/N64 target). Prefix rules first, then exact
/// names, as LLVM 19 tests them.
const MIPS_ONLY_ENV_PREFIXES: &[(&str, Environment)] = &[
    ("mipsn32", Environment::GnuAbiN32),
    ("mips64", Environment::GnuAbi64),
    ("mipsisa64", Environment::GnuAbi64),
    ("mipsisa32", Environment::Gnu),
];
const MIPS_ONLY_ENV_EXACT: &[&str] = &["mips", "mipsel", "mipsr6", "mipsr6el"];

/// SPIR-V and DXIL sub-architectures named by a version suffix.
const SPIRV_VERSION_SUFFIXES: &[(&str, SubArch)] = &[
    ("v1.0", SubArch::SpirvV10),
    ("v1.1", SubArch::SpirvV11),
    ("v1.2", SubArch::SpirvV12),
    ("v1.3", SubArch::SpirvV13),
    ("v1.4", SubArch::SpirvV14),
    ("v1.5", SubArch::SpirvV15),
    ("v1.6", SubArch::SpirvV16),
];
const DXIL_VERSION_SUFFIXES: &[(&str, SubArch)] = &[
    ("v1.0", SubArch::DxilV1_0),
    ("v1.1", SubArch::DxilV1_1),
    ("v1.2", SubArch::DxilV1_2),
    ("v1.3", SubArch::DxilV1_3),
    ("v1.4", SubArch::DxilV1_4),
    ("v1.5", SubArch::DxilV1_5),
    ("v1.6", SubArch::DxilV1_6),
    ("v1.7", SubArch::DxilV1_7),
    ("v1.8", SubArch::DxilV1_8),
];
const KALIMBA_SUFFIXES: &[(&str, SubArch)] =
    &[("kalimba3", SubArch::KalimbaV3), ("kalimba4", SubArch::KalimbaV4), ("kalimba5", SubArch::KalimbaV5)];

fn lookup_exact<T: Copy>(table: &[(&str, T)], s: &str) -> Option<T> {
    table.iter().find(|(k, _)| *k == s).map(|&(_, v)| v)
}

fn lookup_prefix<T: Copy>(table: &[(&str, T)], s: &str) -> Option<T> {
    table.iter().find(|(k, _)| s.starts_with(k)).map(|&(_, v)| v)
}

fn lookup_suffix<T: Copy>(table: &[(&str, T)], s: &str) -> Option<T> {
    table.iter().find(|(k, _)| s.ends_with(k)).map(|&(_, v)| v)
}

/// LLVM 19 `parseArch`: an exact spelling, else `kalimba*`, else the ARM
/// family rules for names starting with arm/thumb/aarch64, else the BPF
/// rules for names starting with bpf.
pub fn parse_arch(name: &str) -> Arch {
    if let Some(arch) = lookup_exact(ARCH_NAMES, name) {
        return arch;
    }
    if name.starts_with("kalimba") {
        return Arch::Kalimba;
    }
    if name.starts_with("arm") || name.starts_with("thumb") || name.starts_with("aarch64") {
        return arm::triple_arch(name);
    }
    if name.starts_with("bpf") {
        return parse_bpf_arch(name);
    }
    Arch::Unknown
}

/// `bpf` means the host's byte order. LLVM 19 as shipped for x86-64 (the
/// reference) is little-endian, so `bpf` is `bpfel` here.
fn parse_bpf_arch(name: &str) -> Arch {
    match name {
        "bpf" | "bpf_le" | "bpfel" => Arch::Bpfel,
        "bpf_be" | "bpfeb" => Arch::Bpfeb,
        _ => Arch::Unknown,
    }
}

/// LLVM 19 `parseSubArch`. Note the quirk that any architecture spelling is
/// run through the ARM architecture matcher, which accepts suffixes: `ve`
/// gets the ARMv7VE sub-architecture. That is harmless (equal spellings get
/// equal sub-architectures) but must be reproduced for compatibility checks
/// between different spellings.
pub fn parse_sub_arch(name: &str) -> SubArch {
    if name.starts_with("mips") && (name.ends_with("r6el") || name.ends_with("r6")) {
        return SubArch::MipsR6;
    }
    match name {
        "powerpcspe" => return SubArch::PpcSpe,
        "arm64e" => return SubArch::Arm64e,
        "arm64ec" => return SubArch::Arm64ec,
        _ => {}
    }
    if name.starts_with("spirv") {
        return lookup_suffix(SPIRV_VERSION_SUFFIXES, name).unwrap_or(SubArch::None);
    }
    if name.starts_with("dxil") {
        return lookup_suffix(DXIL_VERSION_SUFFIXES, name).unwrap_or(SubArch::None);
    }
    let canonical = arm::canonical_arch_name(name);
    if canonical.is_empty() {
        return lookup_suffix(KALIMBA_SUFFIXES, name).unwrap_or(SubArch::None);
    }
    arm::sub_arch(arm::parse_arch_kind(canonical))
}

/// LLVM 19 `parseVendor`: exact names only.
pub fn parse_vendor(name: &str) -> Vendor {
    lookup_exact(VENDOR_NAMES, name).unwrap_or(Vendor::Unknown)
}

/// LLVM 19 `parseOS`: first matching prefix.
pub fn parse_os(name: &str) -> Os {
    lookup_prefix(OS_PREFIXES, name).unwrap_or(Os::Unknown)
}

/// LLVM 19 `parseEnvironment`: first matching prefix.
pub fn parse_environment(name: &str) -> Environment {
    lookup_prefix(ENVIRONMENT_PREFIXES, name).unwrap_or(Environment::Unknown)
}

/// LLVM 19 `parseFormat`: first matching suffix of the environment text.
pub fn parse_object_format(environment: &str) -> ObjectFormat {
    lookup_suffix(OBJECT_FORMAT_SUFFIXES, environment).unwrap_or(ObjectFormat::Unknown)
}

fn is_os_darwin(os: Os) -> bool {
    matches!(os, Os::Darwin | Os::MacOsx | Os::Ios | Os::TvOs | Os::WatchOs | Os::DriverKit | Os::XrOs)
}

/// LLVM 19 `getDefaultFormat`: the object format when the environment does
/// not name one.
fn default_object_format(arch: Arch, os: Os) -> ObjectFormat {
    match arch {
        Arch::Unknown | Arch::Aarch64 | Arch::Aarch64_32 | Arch::Arm | Arch::Thumb | Arch::X86 | Arch::X86_64 => {
            match os {
                Os::Win32 | Os::Uefi => ObjectFormat::Coff,
                _ if is_os_darwin(os) => ObjectFormat::MachO,
                _ => ObjectFormat::Elf,
            }
        }
        Arch::Ppc | Arch::Ppc64 => match os {
            Os::Aix => ObjectFormat::Xcoff,
            _ if is_os_darwin(os) => ObjectFormat::MachO,
            _ => ObjectFormat::Elf,
        },
        Arch::Systemz if os == Os::Zos => ObjectFormat::Goff,
        Arch::Wasm32 | Arch::Wasm64 => ObjectFormat::Wasm,
        Arch::Spirv | Arch::Spirv32 | Arch::Spirv64 => ObjectFormat::Spirv,
        Arch::Dxil => ObjectFormat::DxContainer,
        _ => ObjectFormat::Elf,
    }
}

/// A target triple: the text, plus the components LLVM 19 parses from it.
///
/// `==` (and `Hash`) compare the text and the parsed components: two values
/// are equal when they are the same triple spelled the same way. That is
/// *not* LLVM's `Triple::operator==`, which ignores the text; for "the same
/// target" as LLVM and the bundler see it, use
/// [`Triple::is_compatible_with`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Triple {
    text: String,
    arch: Arch,
    sub_arch: SubArch,
    vendor: Vendor,
    os: Os,
    environment: Environment,
    object_format: ObjectFormat,
}

impl Triple {
    /// What LLVM 19's `Triple(Arch, Vendor, OS, Environment)` constructor
    /// builds: the text is the four parts joined by `-` (always three
    /// dashes, even when parts are empty), and each part is parsed on its
    /// own. This is how the 19 bundler standardises the triple of an ID.
    pub fn from_parts(arch: &str, vendor: &str, os: &str, env: &str) -> Triple {
        let arch_kind = parse_arch(arch);
        let os_kind = parse_os(os);
        let mut object_format = parse_object_format(env);
        if object_format == ObjectFormat::Unknown {
            object_format = default_object_format(arch_kind, os_kind);
        }
        Triple {
            text: format!("{arch}-{vendor}-{os}-{env}"),
            arch: arch_kind,
            sub_arch: parse_sub_arch(arch),
            vendor: parse_vendor(vendor),
            os: os_kind,
            environment: parse_environment(env),
            object_format,
        }
    }

    /// LLVM 19's `Triple(string)` constructor: the text is kept as given and
    /// the components are the pieces between the first three dashes (the
    /// fourth piece, the environment, may contain more dashes). Missing
    /// components stay unknown; a lone MIPS architecture name implies a GNU
    /// environment, as in LLVM.
    pub fn parse(text: &str) -> Triple {
        let mut parts = text.splitn(4, '-');
        let arch_name = parts.next().unwrap_or("");
        let vendor_name = parts.next();
        let os_name = parts.next();
        let env_name = parts.next();

        let arch = parse_arch(arch_name);
        let os = os_name.map_or(Os::Unknown, parse_os);
        let environment = match (vendor_name, env_name) {
            (_, Some(env)) => parse_environment(env),
            (None, None) => mips_only_environment(arch_name),
            (Some(_), None) => Environment::Unknown,
        };
        let mut object_format = env_name.map_or(ObjectFormat::Unknown, parse_object_format);
        if object_format == ObjectFormat::Unknown {
            object_format = default_object_format(arch, os);
        }
        Triple {
            text: text.to_owned(),
            arch,
            sub_arch: parse_sub_arch(arch_name),
            vendor: vendor_name.map_or(Vendor::Unknown, parse_vendor),
            os,
            environment,
            object_format,
        }
    }

    /// The triple's text (for [`Triple::from_parts`], always with three dashes).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Text before the first dash (LLVM `getArchName`).
    pub fn arch_name(&self) -> &str {
        split_dash(&self.text).0
    }

    /// Text between the first and second dash (LLVM `getVendorName`).
    pub fn vendor_name(&self) -> &str {
        split_dash(split_dash(&self.text).1).0
    }

    /// Text between the second and third dash (LLVM `getOSName`).
    pub fn os_name(&self) -> &str {
        split_dash(self.os_and_environment_name()).0
    }

    /// Everything after the third dash, dashes included (LLVM
    /// `getEnvironmentName`).
    pub fn environment_name(&self) -> &str {
        split_dash(self.os_and_environment_name()).1
    }

    fn os_and_environment_name(&self) -> &str {
        split_dash(split_dash(&self.text).1).1
    }

    /// The parsed architecture (`Unknown` when LLVM does not know it).
    pub fn arch(&self) -> Arch {
        self.arch
    }
    /// The parsed sub-architecture (`armv7`'s `V7`, ...).
    pub fn sub_arch(&self) -> SubArch {
        self.sub_arch
    }
    /// The parsed vendor.
    pub fn vendor(&self) -> Vendor {
        self.vendor
    }
    /// The parsed operating system.
    pub fn os(&self) -> Os {
        self.os
    }
    /// The parsed environment.
    pub fn environment(&self) -> Environment {
        self.environment
    }
    /// The object format, given or implied by the other components.
    pub fn object_format(&self) -> ObjectFormat {
        self.object_format
    }

    /// Whether LLVM knows the architecture (`getArch() != UnknownArch`); the
    /// bundler rejects IDs whose triple fails this.
    pub fn is_known_arch(&self) -> bool {
        self.arch != Arch::Unknown
    }

    /// LLVM 19 `Triple::isCompatibleWith`, which the bundler uses to match a
    /// requested ID against a stored one:
    ///
    /// * arm ↔ thumb (and armeb ↔ thumbeb) are compatible when sub-arch,
    ///   vendor and OS agree, and — unless this triple's vendor is Apple —
    ///   environment and object format too;
    /// * if this triple's vendor is Apple, environment and object format are
    ///   ignored;
    /// * otherwise every parsed component must be equal. Unknown spellings
    ///   all parse to "unknown", so `foo` and `bar` vendors are equal, and
    ///   an empty environment equals `unknown`.
    ///
    /// (Every branch requires equal vendors, so the Apple rule applies to
    /// both sides at once and the relation is symmetric.)
    pub fn is_compatible_with(&self, other: &Triple) -> bool {
        let arm_thumb_pair = matches!(
            (self.arch, other.arch),
            (Arch::Thumb, Arch::Arm)
                | (Arch::Arm, Arch::Thumb)
                | (Arch::Thumbeb, Arch::Armeb)
                | (Arch::Armeb, Arch::Thumbeb)
        );
        let same_arch = arm_thumb_pair || self.arch == other.arch;
        let core = same_arch && self.sub_arch == other.sub_arch && self.vendor == other.vendor && self.os == other.os;
        if self.vendor == Vendor::Apple {
            return core;
        }
        core && self.environment == other.environment && self.object_format == other.object_format
    }

    /// Whether the architecture is `amdgcn`.
    pub fn is_amdgcn(&self) -> bool {
        self.arch == Arch::Amdgcn
    }
    /// Whether the architecture is `r600`.
    pub fn is_r600(&self) -> bool {
        self.arch == Arch::R600
    }
    /// `amdgcn` or `r600`.
    pub fn is_amdgpu(&self) -> bool {
        self.is_amdgcn() || self.is_r600()
    }
    /// `nvptx` or `nvptx64`.
    pub fn is_nvptx(&self) -> bool {
        matches!(self.arch, Arch::Nvptx | Arch::Nvptx64)
    }
}

impl fmt::Display for Triple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// LLVM `StringRef::split('-')`: before and after the first dash, or the
/// whole text and "" when there is none.
fn split_dash(s: &str) -> (&str, &str) {
    s.split_once('-').unwrap_or((s, ""))
}

fn mips_only_environment(arch_name: &str) -> Environment {
    if let Some(env) = lookup_prefix(MIPS_ONLY_ENV_PREFIXES, arch_name) {
        return env;
    }
    if MIPS_ONLY_ENV_EXACT.contains(&arch_name) {
        return Environment::Gnu;
    }
    Environment::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_part_constructor_always_has_three_dashes() {
        let t = Triple::from_parts("amdgcn", "amd", "amdhsa", "");
        assert_eq!(t.as_str(), "amdgcn-amd-amdhsa-");
        assert_eq!(t.environment_name(), "");
        let t = Triple::from_parts("x86_64", "", "", "");
        assert_eq!(t.as_str(), "x86_64---");
        assert!(t.is_known_arch());
    }

    #[test]
    fn component_names_split_at_first_three_dashes() {
        let t = Triple::parse("amdgcn-amd-amdhsa--gfx9-generic");
        assert_eq!(t.arch_name(), "amdgcn");
        assert_eq!(t.vendor_name(), "amd");
        assert_eq!(t.os_name(), "amdhsa");
        assert_eq!(t.environment_name(), "-gfx9-generic");
        let t = Triple::parse("x86_64-linux-gnu");
        assert_eq!((t.arch_name(), t.vendor_name(), t.os_name(), t.environment_name()), ("x86_64", "linux", "gnu", ""));
        assert_eq!(t.vendor(), Vendor::Unknown);
        assert_eq!(t.os(), Os::Unknown);
        let t = Triple::parse("");
        assert_eq!(t.arch(), Arch::Unknown);
        assert_eq!(t.environment_name(), "");
    }

    #[test]
    fn arch_aliases() {
        for (name, arch) in [
            ("arm64", Arch::Aarch64),
            ("arm64_32", Arch::Aarch64_32),
            ("aarch64_be", Arch::Aarch64Be),
            ("armv7a", Arch::Arm),
            ("armebv7", Arch::Armeb),
            ("armv7eb", Arch::Armeb),
            ("thumbv7em", Arch::Thumb),
            ("armv6m", Arch::Thumb),
            ("thumbv3", Arch::Unknown),
            ("x86_64h", Arch::X86_64),
            ("i686", Arch::X86),
            ("amd64", Arch::X86_64),
            ("powerpc64le", Arch::Ppc64le),
            ("ppc64", Arch::Ppc64),
            ("nvptx64", Arch::Nvptx64),
            ("amdgcn", Arch::Amdgcn),
            ("r600", Arch::R600),
            ("spirv64", Arch::Spirv64),
            ("wasm32", Arch::Wasm32),
            ("kalimba7", Arch::Kalimba),
            ("bpf", Arch::Bpfel),
            ("armfoo", Arch::Unknown),
            ("AMDGCN", Arch::Unknown),
            ("", Arch::Unknown),
        ] {
            assert_eq!(parse_arch(name), arch, "{name}");
        }
    }

    #[test]
    fn sub_arch_quirks() {
        assert_eq!(parse_sub_arch("armv7s"), SubArch::ArmV7s);
        assert_eq!(parse_sub_arch("armv7"), SubArch::ArmV7);
        assert_eq!(parse_sub_arch("aarch64"), SubArch::ArmV8);
        assert_eq!(parse_sub_arch("arm64e"), SubArch::Arm64e);
        assert_eq!(parse_sub_arch("mips64r6"), SubArch::MipsR6);
        assert_eq!(parse_sub_arch("ve"), SubArch::ArmV7ve);
        assert_eq!(parse_sub_arch("x86_64"), SubArch::None);
        assert_eq!(parse_sub_arch("spirv64v1.3"), SubArch::SpirvV13);
    }

    #[test]
    fn os_and_environment_are_prefix_matches() {
        assert_eq!(parse_os("amdhsa5"), Os::AmdHsa);
        assert_eq!(parse_os("linux-gnu"), Os::Linux);
        assert_eq!(parse_os("Linux"), Os::Unknown);
        assert_eq!(parse_environment("gnueabihf"), Environment::GnuEabiHf);
        assert_eq!(parse_environment("gnu-foo"), Environment::Gnu);
        assert_eq!(parse_environment(""), Environment::Unknown);
        assert_eq!(parse_object_format("gnu-elf"), ObjectFormat::Elf);
        assert_eq!(parse_object_format("xcoff"), ObjectFormat::Xcoff);
    }

    #[test]
    fn default_object_formats() {
        let f = |s: &str| Triple::parse(s).object_format();
        assert_eq!(f("x86_64-pc-windows-msvc"), ObjectFormat::Coff);
        assert_eq!(f("x86_64-apple-macosx"), ObjectFormat::MachO);
        assert_eq!(f("powerpc64-ibm-aix"), ObjectFormat::Xcoff);
        assert_eq!(f("s390x-ibm-zos"), ObjectFormat::Goff);
        assert_eq!(f("wasm32-unknown-wasi"), ObjectFormat::Wasm);
        assert_eq!(f("amdgcn-amd-amdhsa"), ObjectFormat::Elf);
        assert_eq!(f("x86_64-pc-linux-gnu-coff"), ObjectFormat::Coff);
    }

    #[test]
    fn lone_mips_name_implies_gnu_environment() {
        assert_eq!(Triple::parse("mips64").environment(), Environment::GnuAbi64);
        assert_eq!(Triple::parse("mipsel").environment(), Environment::Gnu);
        assert_eq!(Triple::parse("mips64-").environment(), Environment::Unknown);
    }

    fn std4(s: &str) -> Triple {
        let t = Triple::parse(s);
        Triple::from_parts(t.arch_name(), t.vendor_name(), t.os_name(), t.environment_name())
    }

    #[test]
    fn compatibility_rules() {
        let c = |a: &str, b: &str| std4(a).is_compatible_with(&std4(b));
        // Unknown vendor spellings are all "unknown".
        assert!(c("amdgcn-foo-amdhsa", "amdgcn-bar-amdhsa"));
        assert!(!c("amdgcn-amd-amdhsa", "amdgcn-pc-amdhsa"));
        // Empty environment equals "unknown".
        assert!(c("amdgcn-amd-amdhsa-", "amdgcn-amd-amdhsa-unknown"));
        assert!(!c("amdgcn-amd-amdhsa-gnu", "amdgcn-amd-amdhsa-"));
        // OS versions are ignored.
        assert!(c("amdgcn-amd-amdhsa5", "amdgcn-amd-amdhsa"));
        // arm/thumb with the same sub-architecture.
        assert!(c("armv7-unknown-linux-gnueabihf", "thumbv7-unknown-linux-gnueabihf"));
        assert!(!c("armv7-unknown-linux-gnueabihf", "thumbv7s-unknown-linux-gnueabihf"));
        // Apple on the left ignores environment; not on the right.
        assert!(c("x86_64-apple-macosx-foo", "x86_64-apple-macosx-gnu"));
        assert!(c("arm64-apple-ios", "aarch64-apple-ios-simulator"));
    }

    proptest::proptest! {
        #[test]
        fn parsing_keeps_text_and_rebuilds_four_field_triples(text in "[a-z0-9_.-]{0,24}|\\PC{0,24}") {
            let t = Triple::parse(&text);
            proptest::prop_assert_eq!(t.as_str(), text.as_str());
            let rebuilt =
                Triple::from_parts(t.arch_name(), t.vendor_name(), t.os_name(), t.environment_name());
            proptest::prop_assert_eq!(rebuilt.arch(), t.arch());
            proptest::prop_assert_eq!(rebuilt.vendor(), t.vendor());
            proptest::prop_assert_eq!(rebuilt.os(), t.os());
            proptest::prop_assert!(rebuilt.is_compatible_with(&rebuilt));
            if text.matches('-').count() >= 3 {
                proptest::prop_assert_eq!(rebuilt.as_str(), text.as_str());
                proptest::prop_assert!(rebuilt.is_compatible_with(&t));
            }
        }
    }

    #[test]
    fn gpu_predicates() {
        assert!(Triple::parse("amdgcn-amd-amdhsa").is_amdgcn());
        assert!(Triple::parse("r600--").is_amdgpu());
        assert!(!Triple::parse("r600").is_amdgcn());
        assert!(Triple::parse("nvptx-nvidia-cuda").is_nvptx());
        assert!(!Triple::parse("x86_64").is_amdgpu());
    }
}
