//! What an AMDGPU code object says about itself in its ELF header: the
//! processor (`EF_AMDGPU_MACH`, the low byte of `e_flags`) and the xnack and
//! sramecc settings it was built for. `verify` compares these with the
//! bundle entry ID, because runtimes choose by the ID and then load the ELF.
//!
//! The processor numbers are LLVM 19's; they were read back from objects
//! that `llc -mtriple=amdgcn-amd-amdhsa -mcpu=<processor>` wrote for every
//! processor LLVM 19 knows.

/// `EM_AMDGPU`.
pub(crate) const EM_AMDGPU: u16 = 224;
/// `ELFOSABI_AMDGPU_HSA`.
const ELFOSABI_AMDGPU_HSA: u8 = 64;

static MACH: [(u8, &str); 50] = [
    (0x20, "gfx600"),
    (0x21, "gfx601"),
    (0x22, "gfx700"),
    (0x23, "gfx701"),
    (0x24, "gfx702"),
    (0x25, "gfx703"),
    (0x26, "gfx704"),
    (0x28, "gfx801"),
    (0x29, "gfx802"),
    (0x2a, "gfx803"),
    (0x2b, "gfx810"),
    (0x2c, "gfx900"),
    (0x2d, "gfx902"),
    (0x2e, "gfx904"),
    (0x2f, "gfx906"),
    (0x30, "gfx908"),
    (0x31, "gfx909"),
    (0x32, "gfx90c"),
    (0x33, "gfx1010"),
    (0x34, "gfx1011"),
    (0x35, "gfx1012"),
    (0x36, "gfx1030"),
    (0x37, "gfx1031"),
    (0x38, "gfx1032"),
    (0x39, "gfx1033"),
    (0x3a, "gfx602"),
    (0x3b, "gfx705"),
    (0x3c, "gfx805"),
    (0x3d, "gfx1035"),
    (0x3e, "gfx1034"),
    (0x3f, "gfx90a"),
    (0x40, "gfx940"),
    (0x41, "gfx1100"),
    (0x42, "gfx1013"),
    (0x43, "gfx1150"),
    (0x44, "gfx1103"),
    (0x45, "gfx1036"),
    (0x46, "gfx1101"),
    (0x47, "gfx1102"),
    (0x48, "gfx1200"),
    (0x4a, "gfx1151"),
    (0x4b, "gfx941"),
    (0x4c, "gfx942"),
    (0x4e, "gfx1201"),
    (0x51, "gfx9-generic"),
    (0x52, "gfx10-1-generic"),
    (0x53, "gfx10-3-generic"),
    (0x54, "gfx11-generic"),
    (0x55, "gfx1152"),
    (0x59, "gfx12-generic"),
];

/// How a code object was built with respect to one feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Setting {
    /// The processor lacks the feature, or the header cannot say.
    Unknown,
    Any,
    Off,
    On,
}

/// The target an AMDGPU ELF code object was built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ElfTarget {
    pub machine: u16,
    pub flags: u32,
    /// `None` when the processor number is not one LLVM 19 knows.
    pub processor: Option<&'static str>,
    pub xnack: Setting,
    pub sramecc: Setting,
}

/// Reads the ELF header of `data`; `None` when it is not an ELF file.
pub(crate) fn read(data: &[u8]) -> Option<ElfTarget> {
    if !data.starts_with(b"\x7fELF") || data.len() < 52 {
        return None;
    }
    let little = data[5] != 2;
    let u16_at = |at: usize| {
        let b = [data[at], data[at + 1]];
        if little { u16::from_le_bytes(b) } else { u16::from_be_bytes(b) }
    };
    let flags_at = if data[4] == 2 { 48 } else { 36 };
    if data.len() < flags_at + 4 {
        return None;
    }
    let b = [data[flags_at], data[flags_at + 1], data[flags_at + 2], data[flags_at + 3]];
    let flags = if little { u32::from_le_bytes(b) } else { u32::from_be_bytes(b) };
    let machine = u16_at(18);
    let mach = (flags & 0xff) as u8;
    let processor = MACH.iter().find(|(m, _)| *m == mach).map(|(_, p)| *p);
    let (xnack, sramecc) = match (data[7], data[8]) {
        // Code object v3: one bit each, no "any".
        (ELFOSABI_AMDGPU_HSA, 1) => (on_off(flags & 0x100 != 0), on_off(flags & 0x200 != 0)),
        // v4 and later: two bits each.
        (ELFOSABI_AMDGPU_HSA, v) if v >= 2 => (two_bits(flags >> 8), two_bits(flags >> 10)),
        _ => (Setting::Unknown, Setting::Unknown),
    };
    Some(ElfTarget { machine, flags, processor, xnack, sramecc })
}

fn on_off(on: bool) -> Setting {
    if on { Setting::On } else { Setting::Off }
}

fn two_bits(v: u32) -> Setting {
    match v & 3 {
        1 => Setting::Any,
        2 => Setting::Off,
        3 => Setting::On,
        _ => Setting::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(machine: u16, osabi: u8, abi: u8, flags: u32) -> Vec<u8> {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[7] = osabi;
        h[8] = abi;
        h[18..20].copy_from_slice(&machine.to_le_bytes());
        h[48..52].copy_from_slice(&flags.to_le_bytes());
        h
    }

    /// Values read from `llc-19 -mcpu=gfx90a -mattr=+xnack,-sramecc` (0xb3f)
    /// and the defaults for gfx906 (0x52f).
    #[test]
    fn decodes_llvm19_headers() {
        let t = read(&header(EM_AMDGPU, 64, 3, 0xb3f)).unwrap();
        assert_eq!(t.processor, Some("gfx90a"));
        assert_eq!((t.xnack, t.sramecc), (Setting::On, Setting::Off));
        let t = read(&header(EM_AMDGPU, 64, 3, 0x52f)).unwrap();
        assert_eq!(t.processor, Some("gfx906"));
        assert_eq!((t.xnack, t.sramecc), (Setting::Any, Setting::Any));
        let t = read(&header(EM_AMDGPU, 64, 1, 0x12c)).unwrap();
        assert_eq!((t.xnack, t.sramecc), (Setting::On, Setting::Off));
        assert_eq!(read(&header(62, 0, 0, 0)).unwrap().processor, None);
        assert_eq!(read(b"\x7fELF"), None);
        assert_eq!(read(b"BC\xc0\xde"), None);
    }

    #[test]
    fn table_covers_every_llvm19_processor() {
        for p in crate::amdgpu::amdgcn_processors() {
            assert!(MACH.iter().any(|(_, name)| *name == p.name), "{} missing", p.name);
        }
    }
}
