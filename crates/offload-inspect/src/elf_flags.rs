//! What an AMDGPU code object says about itself in its ELF header: the
//! processor (`EF_AMDGPU_MACH`, the low byte of `e_flags`) and the xnack and
//! sramecc settings it was built for. `verify` compares these with the
//! bundle entry ID, because runtimes choose by the ID and then load the ELF.
//!
//! The processor numbers come from the current processor table
//! ([`offload_format::amdgpu`]), so code objects for GPUs newer than LLVM 19
//! (gfx950, gfx1250, ...) are recognised.

use offload_format::bytes::{u16_endian, u32_endian};
use offload_format::elf::ELFOSABI_AMDGPU_HSA;
pub use offload_format::elf::EM_AMDGPU;

/// How a code object was built with respect to one feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// The processor lacks the feature, or the header cannot say.
    Unknown,
    Any,
    Off,
    On,
}

/// The target an AMDGPU ELF code object was built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElfTarget {
    pub machine: u16,
    pub flags: u32,
    /// `None` when the processor number is not in the processor table.
    pub processor: Option<&'static str>,
    pub xnack: Setting,
    pub sramecc: Setting,
}

/// Reads the ELF header of `data`; `None` when it is not an ELF file.
pub fn read(data: &[u8]) -> Option<ElfTarget> {
    if !data.starts_with(b"\x7fELF") || data.len() < 52 {
        return None;
    }
    let big = data[5] == 2;
    let flags_at = if data[4] == 2 { 48 } else { 36 };
    let flags = u32_endian(data, flags_at, big)?;
    let machine = u16_endian(data, 18, big)?;
    let mach = (flags & 0xff) as u8;
    let processor = offload_format::amdgpu::processor_by_elf_mach(mach).map(|p| p.name);
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
    fn newer_processors_are_recognised() {
        // gfx950 (0x4f) with sramecc+ and xnack any, as ROCm 7 builds it.
        let t = read(&header(EM_AMDGPU, 64, 4, 0xd4f)).unwrap();
        assert_eq!(t.processor, Some("gfx950"));
        assert_eq!((t.xnack, t.sramecc), (Setting::Any, Setting::On));
        assert_eq!(read(&header(EM_AMDGPU, 64, 4, 0x49)).unwrap().processor, Some("gfx1250"));
        assert_eq!(read(&header(EM_AMDGPU, 64, 4, 0xff)).unwrap().processor, None);
    }
}
