//! The kernels of an AMDGPU code object and their resources, read from the
//! `NT_AMDGPU_METADATA` note (code object v4 to v6, a MessagePack map) and
//! cross-checked with each kernel's 64-byte descriptor (`<kernel>.kd`).
//! The keys and the descriptor fields used are described, with their
//! public sources, in `docs/formats/kernels.md`.
//!
//! Hostile input: the note walk checks every size against its section; the
//! metadata goes through the bounded [`crate::msgpack`] reader; a key of
//! the wrong type is an error naming it; nothing indexes unchecked.

use crate::bytes::ReadError;
use crate::elf::symbols::{symbol_bytes, symtab};
use crate::elf::{EM_AMDGPU, ElfError, ElfFile, SHT_NOTE};
use crate::msgpack::{self, Value};

/// The note type of the code object v3+ metadata.
pub const NT_AMDGPU_METADATA: u32 = 32;
/// Size of a kernel descriptor.
pub const KERNEL_DESCRIPTOR_SIZE: u64 = 64;

/// Why the kernels of a code object cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KernelError {
    /// The code object is not an ELF file the reader can take apart.
    #[error("{0}")]
    Elf(#[source] ElfError),
    /// The AMDGPU metadata note is not MessagePack.
    #[error("AMDGPU metadata: {0}")]
    Msgpack(#[source] msgpack::Error),
    /// The ELF file is not for AMDGPU (its `e_machine`).
    #[error("not an AMDGPU code object (e_machine {machine})")]
    NotAmdgpu {
        /// The file's `e_machine`.
        machine: u16,
    },
    /// A note or metadata value that cannot be read: what, at which file
    /// offset (the note, for metadata values), and how.
    #[error("{0}")]
    Read(#[source] ReadError),
}

impl From<ElfError> for KernelError {
    fn from(e: ElfError) -> Self {
        KernelError::Elf(e)
    }
}

fn invalid(offset: u64, what: &'static str, why: impl Into<String>) -> KernelError {
    KernelError::Read(ReadError::invalid(offset, what, why))
}

/// The fields of a kernel descriptor that the metadata also states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelDescriptor {
    /// Bytes 0-3: `group_segment_fixed_size` (LDS bytes).
    pub group_segment_fixed_size: u32,
    /// Bytes 4-7: `private_segment_fixed_size` (scratch bytes per work-item).
    pub private_segment_fixed_size: u32,
    /// Bytes 8-11: `kernarg_size`.
    pub kernarg_size: u32,
}

impl KernelDescriptor {
    /// Reads the first 12 bytes of a descriptor (little-endian).
    pub fn parse(bytes: &[u8]) -> Option<KernelDescriptor> {
        use crate::bytes::u32_le;
        Some(KernelDescriptor {
            group_segment_fixed_size: u32_le(bytes, 0)?,
            private_segment_fixed_size: u32_le(bytes, 4)?,
            kernarg_size: u32_le(bytes, 8)?,
        })
    }
}

/// One kernel of a code object: what its metadata map says (each field
/// `None` when the key is absent) and what its descriptor says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelInfo {
    /// `.name`: the source-level (mangled) name.
    pub name: String,
    /// `.symbol`: the descriptor's symbol, `<name>.kd`.
    pub symbol: String,
    /// `.vgpr_count`.
    pub vgpr_count: Option<u64>,
    /// `.agpr_count` (gfx908 and later CDNA).
    pub agpr_count: Option<u64>,
    /// `.sgpr_count`.
    pub sgpr_count: Option<u64>,
    /// `.group_segment_fixed_size`: static LDS bytes.
    pub group_segment_fixed_size: Option<u64>,
    /// `.private_segment_fixed_size`: scratch bytes per work-item.
    pub private_segment_fixed_size: Option<u64>,
    /// `.uses_dynamic_stack`.
    pub uses_dynamic_stack: Option<bool>,
    /// `.vgpr_spill_count`.
    pub vgpr_spill_count: Option<u64>,
    /// `.sgpr_spill_count`.
    pub sgpr_spill_count: Option<u64>,
    /// `.wavefront_size`: 32 or 64.
    pub wavefront_size: Option<u64>,
    /// `.max_flat_workgroup_size`.
    pub max_flat_workgroup_size: Option<u64>,
    /// `.kernarg_segment_size`.
    pub kernarg_segment_size: Option<u64>,
    /// `.uniform_work_group_size` (an integer 0/1 in the note; booleans accepted).
    pub uniform_work_group_size: Option<bool>,
    /// The descriptor found through `.symbol`, when there is one.
    pub descriptor: Option<KernelDescriptor>,
    /// Disagreements between metadata and descriptor, or a missing
    /// descriptor, in words.
    pub mismatches: Vec<String>,
}

/// The kernels of one code object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CodeObjectKernels {
    /// `amdhsa.version`: `[1, 1]` is code object v4, `[1, 2]` v5, `[1, 3]` v6.
    pub metadata_version: Option<(u64, u64)>,
    /// `amdhsa.target`, e.g. `amdgcn-amd-amdhsa--gfx90a:xnack+`.
    pub target: Option<String>,
    /// `EI_ABIVERSION` as a code object version (1 is v3 ... 4 is v6).
    pub code_object_version: Option<u8>,
    /// One record per entry of `amdhsa.kernels`, in file order.
    pub kernels: Vec<KernelInfo>,
}

/// The descriptors of every `NT_AMDGPU_METADATA` note of the file's
/// `SHT_NOTE` sections, in order. Checks each note header against its section.
pub fn metadata_notes<'a>(elf: &ElfFile<'a>) -> Result<Vec<&'a [u8]>, KernelError> {
    let mut out = Vec::new();
    for (i, sh) in elf.sections.iter().enumerate() {
        if sh.sh_type != SHT_NOTE {
            continue;
        }
        let data = elf.section_data(i)?;
        let mut at = 0usize;
        while at < data.len() {
            let field = |o: usize| crate::bytes::u32_le(data, at + o);
            let (Some(namesz), Some(descsz), Some(kind)) = (field(0), field(4), field(8)) else {
                let at = sh.offset.saturating_add(at as u64);
                return Err(KernelError::Read(ReadError::truncated(elf.data, at, 12, "note header")));
            };
            let name_at = at + 12;
            let desc_at = (name_at as u64) + align4(u64::from(namesz));
            let next = desc_at + align4(u64::from(descsz));
            if desc_at + u64::from(descsz) > data.len() as u64 {
                let why = format!(
                    "note section {i}: the note (name {namesz} bytes, descriptor {descsz} bytes) runs past the section ({} bytes)",
                    data.len()
                );
                return Err(invalid(sh.offset.saturating_add(at as u64), "note", why));
            }
            // In bounds: checked just above.
            let name = &data[name_at..name_at + namesz as usize];
            let desc = &data[desc_at as usize..desc_at as usize + descsz as usize];
            if kind == NT_AMDGPU_METADATA && name.strip_suffix(b"\0").unwrap_or(name) == b"AMDGPU" {
                out.push(desc);
            }
            at = usize::try_from(next).unwrap_or(usize::MAX);
        }
    }
    Ok(out)
}

fn align4(v: u64) -> u64 {
    v.div_ceil(4) * 4
}

/// Reads the kernels of an AMDGPU code object (an ELF with `e_machine`
/// EM_AMDGPU). An object without a metadata note gives no kernels and no
/// version (code object v2 and older keep theirs elsewhere).
pub fn read(data: &[u8]) -> Result<CodeObjectKernels, KernelError> {
    let elf = ElfFile::parse(data)?;
    if elf.header.machine != EM_AMDGPU {
        return Err(KernelError::NotAmdgpu { machine: elf.header.machine });
    }
    let mut out = CodeObjectKernels {
        code_object_version: match elf.header.abi_version {
            v @ 1..=4 => Some(v + 2),
            _ => None,
        },
        ..CodeObjectKernels::default()
    };
    let notes = metadata_notes(&elf)?;
    let Some(note) = notes.first() else {
        return Ok(out);
    };
    let (root, _) = msgpack::read(note).map_err(KernelError::Msgpack)?;
    // Metadata values have no offset of their own: errors name the note's.
    let note_at = (note.as_ptr() as usize).wrapping_sub(data.as_ptr() as usize) as u64;
    let err = |why: String| invalid(note_at, "AMDGPU metadata", why);
    if root.as_map().is_none() {
        return Err(err(format!("the root is a {}, not a map", root.type_name())));
    }
    if let Some(v) = root.get("amdhsa.version") {
        let pair = v.as_array().and_then(|a| match a {
            [major, minor] => Some((major.as_u64()?, minor.as_u64()?)),
            _ => None,
        });
        out.metadata_version = Some(pair.ok_or_else(|| err("amdhsa.version is not two integers".into()))?);
    }
    if let Some(v) = root.get("amdhsa.target") {
        out.target = Some(v.as_str().ok_or_else(|| err("amdhsa.target is not a string".into()))?.to_owned());
    }
    let Some(list) = root.get("amdhsa.kernels") else {
        return Ok(out);
    };
    let list = list.as_array().ok_or_else(|| err("amdhsa.kernels is not an array".into()))?;
    let symbols = symtab(&elf)?;
    for (i, entry) in list.iter().enumerate() {
        let mut k = kernel(entry).map_err(|e| err(format!("kernel {i}: {e}")))?;
        let sym = symbols.iter().find(|s| s.name == k.symbol.as_bytes() && s.shndx != 0);
        match sym.and_then(|s| symbol_bytes(&elf, s, KERNEL_DESCRIPTOR_SIZE)) {
            Some(bytes) => k.descriptor = KernelDescriptor::parse(bytes),
            None => {
                k.mismatches.push(format!("no {KERNEL_DESCRIPTOR_SIZE}-byte kernel descriptor symbol {}", k.symbol))
            }
        }
        if let Some(d) = k.descriptor {
            let checks = [
                ("group_segment_fixed_size", k.group_segment_fixed_size, d.group_segment_fixed_size),
                ("private_segment_fixed_size", k.private_segment_fixed_size, d.private_segment_fixed_size),
                ("kernarg_segment_size", k.kernarg_segment_size, d.kernarg_size),
            ];
            for (key, meta, desc) in checks {
                if let Some(meta) = meta.filter(|m| *m != u64::from(desc)) {
                    k.mismatches.push(format!(".{key} is {meta} in the metadata but {desc} in the kernel descriptor"));
                }
            }
        }
        out.kernels.push(k);
    }
    Ok(out)
}

fn kernel(entry: &Value<'_>) -> Result<KernelInfo, String> {
    if entry.as_map().is_none() {
        return Err(format!("a {}, not a map", entry.type_name()));
    }
    let string = |key: &str| -> Result<String, String> {
        match entry.get(key) {
            None => Err(format!("no {key}")),
            Some(v) => v.as_str().map(str::to_owned).ok_or_else(|| format!("{key} is not a UTF-8 string")),
        }
    };
    let uint = |key: &str| -> Result<Option<u64>, String> {
        match entry.get(key) {
            None => Ok(None),
            Some(v) => {
                v.as_u64().map(Some).ok_or_else(|| format!("{key} is a {}, not an unsigned integer", v.type_name()))
            }
        }
    };
    let flag = |key: &str| -> Result<Option<bool>, String> {
        match entry.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::UInt(v @ 0..=1)) => Ok(Some(*v == 1)),
            Some(v) => Err(format!("{key} is a {}, not a boolean", v.type_name())),
        }
    };
    Ok(KernelInfo {
        name: string(".name")?,
        symbol: string(".symbol")?,
        vgpr_count: uint(".vgpr_count")?,
        agpr_count: uint(".agpr_count")?,
        sgpr_count: uint(".sgpr_count")?,
        group_segment_fixed_size: uint(".group_segment_fixed_size")?,
        private_segment_fixed_size: uint(".private_segment_fixed_size")?,
        uses_dynamic_stack: flag(".uses_dynamic_stack")?,
        vgpr_spill_count: uint(".vgpr_spill_count")?,
        sgpr_spill_count: uint(".sgpr_spill_count")?,
        wavefront_size: uint(".wavefront_size")?,
        max_flat_workgroup_size: uint(".max_flat_workgroup_size")?,
        kernarg_segment_size: uint(".kernarg_segment_size")?,
        uniform_work_group_size: flag(".uniform_work_group_size")?,
        descriptor: None,
        mismatches: Vec::new(),
    })
}

#[cfg(test)]
#[path = "kernels_tests.rs"]
mod tests;
