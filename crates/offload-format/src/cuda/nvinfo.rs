//! The kernels of a cubin and their resources, read from the `.nv.info`
//! and `.nv.info.<kernel>` sections (EIATTR records) and from the sizes of
//! the `.nv.shared.<kernel>`, `.nv.local.<kernel>` and
//! `.nv.constantN.<kernel>` sections. The record layout, the attribute
//! numbers used and how they map to `cuobjdump -res-usage` are described
//! in `docs/formats/kernels.md`.
//!
//! Hostile input: every record's size is checked against its section, a
//! record of an unknown format ends the walk with an error, and payloads
//! are read with bounds-checked accessors only.

use super::Cubin;
use crate::bytes::{ReadError, u16_le, u32_le};
use crate::elf::symbols::{STT_FUNC, symtab};
use crate::elf::{ElfError, ElfFile};

/// `EIFMT_NVAL`: no value (the two bytes after the attribute are ignored).
pub const EIFMT_NVAL: u8 = 1;
/// `EIFMT_BVAL`: a one-byte value in the two bytes after the attribute.
pub const EIFMT_BVAL: u8 = 2;
/// `EIFMT_HVAL`: a 16-bit value after the attribute.
pub const EIFMT_HVAL: u8 = 3;
/// `EIFMT_SVAL`: a 16-bit size, then that many bytes.
pub const EIFMT_SVAL: u8 = 4;

/// `EIATTR_MAX_THREADS`: the launch bound (x, y, z), 3 words.
pub const EIATTR_MAX_THREADS: u8 = 0x05;
/// `EIATTR_PARAM_CBANK`: constant bank symbol, parameter offset and size.
pub const EIATTR_PARAM_CBANK: u8 = 0x0a;
/// `EIATTR_FRAME_SIZE`: function symbol index, frame bytes.
pub const EIATTR_FRAME_SIZE: u8 = 0x11;
/// `EIATTR_MIN_STACK_SIZE`: function symbol index, stack bytes
/// (`0xffffffff`: not known statically, e.g. recursion).
pub const EIATTR_MIN_STACK_SIZE: u8 = 0x12;
/// `EIATTR_KPARAM_INFO`: one per kernel parameter.
pub const EIATTR_KPARAM_INFO: u8 = 0x17;
/// `EIATTR_CBANK_PARAM_SIZE`: parameter bytes in the constant bank.
pub const EIATTR_CBANK_PARAM_SIZE: u8 = 0x19;
/// `EIATTR_MAXREG_COUNT`: the register limit the compiler was given.
pub const EIATTR_MAXREG_COUNT: u8 = 0x1b;
/// `EIATTR_CRS_STACK_SIZE`: call/return stack bytes.
pub const EIATTR_CRS_STACK_SIZE: u8 = 0x1e;
/// `EIATTR_MAX_STACK_SIZE`: function symbol index, stack bytes.
pub const EIATTR_MAX_STACK_SIZE: u8 = 0x23;
/// `EIATTR_REGCOUNT`: function symbol index, registers per thread.
pub const EIATTR_REGCOUNT: u8 = 0x2f;

/// A stack size that cannot be determined statically.
pub const UNKNOWN_STACK: u32 = u32::MAX;

/// Why the `.nv.info` of a cubin cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NvInfoError {
    /// The cubin is not an ELF file the reader can take apart.
    #[error("{0}")]
    Elf(#[source] ElfError),
    /// The records of one `.nv.info` section (named) cannot be read.
    #[error("{section}: {source}")]
    Section {
        /// `.nv.info` or `.nv.info.<kernel>`.
        section: String,
        /// What is wrong with its records.
        #[source]
        source: Box<NvInfoError>,
    },
    /// The file is not a cubin (a little-endian ELF64 for `EM_CUDA`).
    #[error("not a cubin")]
    NotCubin,
    /// A record that cannot be read: what, at which offset of its section,
    /// and how.
    #[error("{0}")]
    Read(#[source] ReadError),
}

impl From<ElfError> for NvInfoError {
    fn from(e: ElfError) -> Self {
        NvInfoError::Elf(e)
    }
}

/// One EIATTR record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// `EIFMT_*`.
    pub format: u8,
    /// `EIATTR_*`.
    pub attribute: u8,
    /// The 16-bit value (`EIFMT_HVAL`, low byte for `EIFMT_BVAL`; the size
    /// for `EIFMT_SVAL`).
    pub value: u16,
    /// The payload of an `EIFMT_SVAL` record (empty otherwise).
    pub payload: &'a [u8],
}

impl Record<'_> {
    /// The payload's 32-bit word `i`.
    pub fn word(&self, i: usize) -> Option<u32> {
        u32_le(self.payload, i.checked_mul(4)?)
    }
}

/// The records of one `.nv.info` section, in order.
pub fn records(data: &[u8]) -> Result<Vec<Record<'_>>, NvInfoError> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < data.len() {
        let (Some(&format), Some(&attribute), Some(value)) = (data.get(at), data.get(at + 1), u16_le(data, at + 2))
        else {
            return Err(NvInfoError::Read(ReadError::truncated(data, at as u64, 4, "EIATTR record")));
        };
        let mut payload: &[u8] = &[];
        match format {
            EIFMT_NVAL | EIFMT_BVAL | EIFMT_HVAL => at += 4,
            EIFMT_SVAL => {
                let end = at + 4 + usize::from(value);
                payload = data.get(at + 4..end).ok_or_else(|| {
                    NvInfoError::Read(ReadError::truncated(
                        data,
                        at as u64 + 4,
                        u64::from(value),
                        "EIATTR record payload",
                    ))
                })?;
                at = end;
            }
            _ => {
                let why = format!("unknown format {format:#x}");
                return Err(NvInfoError::Read(ReadError::invalid(at as u64, "EIATTR record", why)));
            }
        }
        out.push(Record { format, attribute, value, payload });
    }
    Ok(out)
}

/// One kernel (entry function) of a cubin and its resources. Each `Option`
/// is `None` when the cubin has no such record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CudaKernel {
    /// The (mangled) name.
    pub name: String,
    /// `EIATTR_REGCOUNT`: registers per thread (cuobjdump's `REG`).
    pub registers: Option<u32>,
    /// `EIATTR_FRAME_SIZE`: the kernel's own frame bytes.
    pub frame_size: Option<u32>,
    /// `EIATTR_MIN_STACK_SIZE` (cuobjdump's `STACK`; [`UNKNOWN_STACK`]
    /// when not statically known).
    pub min_stack_size: Option<u32>,
    /// `EIATTR_MAX_STACK_SIZE`.
    pub max_stack_size: Option<u32>,
    /// `EIATTR_CRS_STACK_SIZE`.
    pub crs_stack_size: Option<u32>,
    /// `EIATTR_MAX_THREADS`: the launch bound `(x, y, z)`.
    pub max_threads: Option<[u32; 3]>,
    /// `EIATTR_MAXREG_COUNT`: the register limit given to ptxas.
    pub max_reg_count: Option<u16>,
    /// `EIATTR_CBANK_PARAM_SIZE`: parameter bytes.
    pub param_size: Option<u16>,
    /// `EIATTR_KPARAM_INFO` records: the number of parameters.
    pub param_count: usize,
    /// Size of `.nv.shared.<kernel>`: static shared memory bytes
    /// (cuobjdump's `SHARED`).
    pub shared: u64,
    /// Size of `.nv.local.<kernel>` (cuobjdump's `LOCAL`).
    pub local: u64,
    /// `(bank, bytes)` of each `.nv.constantN.<kernel>` (cuobjdump's
    /// `CONSTANT[N]`), by bank.
    pub constant_banks: Vec<(u32, u64)>,
}

/// The kernels of one cubin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CubinKernels {
    /// The SM the cubin is for (e.g. 80).
    pub sm: u32,
    /// `(bank, bytes)` of each `.nv.constantN` shared by all kernels
    /// (cuobjdump's `Common: CONSTANT[N]`).
    pub constant_banks: Vec<(u32, u64)>,
    /// One record per `.nv.info.<kernel>` section, in section order.
    pub kernels: Vec<CudaKernel>,
}

fn payload_words<const N: usize>(r: &Record<'_>) -> Option<[u32; N]> {
    let mut out = [0u32; N];
    for (i, w) in out.iter_mut().enumerate() {
        *w = r.word(i)?;
    }
    Some(out)
}

/// Reads the kernels of a cubin (a little-endian ELF64 with `e_machine`
/// EM_CUDA).
pub fn read(data: &[u8]) -> Result<CubinKernels, NvInfoError> {
    let cubin = Cubin::parse(data).ok_or(NvInfoError::NotCubin)?;
    let elf = ElfFile::parse(data)?;
    let symbols = symtab(&elf)?;
    let mut out = CubinKernels { sm: cubin.sm(), ..CubinKernels::default() };
    let mut global = Vec::new();
    let mut sizes: Vec<(&[u8], u64)> = Vec::new();
    for i in 0..elf.sections.len() {
        let name = elf.section_name(i)?;
        let size = elf.sections.get(i).map_or(0, |s| s.size);
        if name == b".nv.info" {
            let data = elf.section_data(i)?;
            global.extend(
                records(data).map_err(|e| NvInfoError::Section { section: ".nv.info".into(), source: Box::new(e) })?,
            );
        } else if let Some(kernel) = name.strip_prefix(b".nv.info.") {
            let data = elf.section_data(i)?;
            let recs = records(data).map_err(|e| NvInfoError::Section {
                section: String::from_utf8_lossy(name).into_owned(),
                source: Box::new(e),
            })?;
            out.kernels.push(kernel_from(kernel, &recs));
        } else if let Some((bank, b"")) = constant_bank(name) {
            out.constant_banks.push((bank, size));
        }
        sizes.push((name, size));
    }
    for k in &mut out.kernels {
        let name = k.name.as_bytes();
        let index = symbols.iter().position(|s| s.name == name && s.kind() == STT_FUNC);
        for r in &global {
            if r.format != EIFMT_SVAL || index.is_none() || r.word(0).map(|w| w as usize) != index {
                continue;
            }
            let v = r.word(1);
            match r.attribute {
                EIATTR_REGCOUNT => k.registers = v,
                EIATTR_FRAME_SIZE => k.frame_size = v,
                EIATTR_MIN_STACK_SIZE => k.min_stack_size = v,
                EIATTR_MAX_STACK_SIZE => k.max_stack_size = v,
                _ => {}
            }
        }
        for (section, size) in &sizes {
            if section.strip_prefix(b".nv.shared.") == Some(name) {
                k.shared = *size;
            } else if section.strip_prefix(b".nv.local.") == Some(name) {
                k.local = *size;
            } else if let Some((bank, rest)) = constant_bank(section)
                && rest.strip_prefix(b".") == Some(name)
            {
                k.constant_banks.push((bank, *size));
            }
        }
        k.constant_banks.sort_unstable();
    }
    out.constant_banks.sort_unstable();
    Ok(out)
}

/// `.nv.constantN[rest]` -> `(N, rest)`.
fn constant_bank(name: &[u8]) -> Option<(u32, &[u8])> {
    let rest = name.strip_prefix(b".nv.constant")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    let (n, rest) = rest.split_at(digits);
    let bank = std::str::from_utf8(n).ok()?.parse().ok()?;
    Some((bank, rest))
}

fn kernel_from(name: &[u8], recs: &[Record<'_>]) -> CudaKernel {
    let mut k = CudaKernel { name: String::from_utf8_lossy(name).into_owned(), ..CudaKernel::default() };
    for r in recs {
        match (r.format, r.attribute) {
            (EIFMT_SVAL, EIATTR_MAX_THREADS) => k.max_threads = payload_words::<3>(r),
            (EIFMT_SVAL, EIATTR_CRS_STACK_SIZE) => k.crs_stack_size = r.word(0),
            (EIFMT_SVAL, EIATTR_KPARAM_INFO) => k.param_count += 1,
            (EIFMT_HVAL, EIATTR_MAXREG_COUNT) => k.max_reg_count = Some(r.value),
            (EIFMT_HVAL, EIATTR_CBANK_PARAM_SIZE) => k.param_size = Some(r.value),
            _ => {}
        }
    }
    k
}

#[cfg(test)]
#[path = "nvinfo_tests.rs"]
mod tests;
