//! `prune --mode cut` for the inputs `files::plan_file` reads other than
//! linked HIP binaries (those are `cut`'s): relocatable HIP and CUDA
//! objects (`cut_object`) and static archives (`cut_archive`). Raw
//! bundles, `.fatbin` files and fat objects already shrink in zero mode.

use super::cut_archive::{ArchiveCut, plan_archive_cut, verify_archive_cut};
use super::cut_object::{ObjectCut, plan_object_cut, verify_object_cut};
use super::files::Input;
use super::{PruneError, Pruned};
use offload_format::plan::Plan;

/// The cut of one input file.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileCut {
    /// A relocatable object.
    Object(ObjectCut),
    /// A static archive.
    Archive(ArchiveCut),
    /// A PE image (`super::pe`).
    Pe(super::pe::PeCut),
    /// A COFF object (`super::coff`).
    Coff(super::coff::CoffCut),
}

/// Whether `data` is a relocatable ELF object (`ET_REL`).
fn is_relocatable(data: &[u8]) -> bool {
    offload_format::elf::ElfFile::parse(data).is_ok_and(|f| f.header.e_type == offload_format::elf::ET_REL)
}

/// Plans the cut of `data`, read as `input` and pruned as `pruned`;
/// `None` when the input kind is not cut here (a linked binary).
pub fn plan_file_cut(data: &[u8], input: &Input, pruned: &Pruned) -> Result<Option<FileCut>, PruneError> {
    match input {
        Input::Hip(map) if map.relocatable => Ok(Some(FileCut::Object(plan_object_cut(data, 0, &pruned.units)?))),
        Input::Cuda if is_relocatable(data) => Ok(Some(FileCut::Object(plan_object_cut(data, 0, &pruned.units)?))),
        Input::Archive { .. } => Ok(Some(FileCut::Archive(plan_archive_cut(data, pruned)?))),
        Input::Pe(pe) => Ok(Some(FileCut::Pe(super::pe::plan_pe_cut(data, pe, pruned)?))),
        Input::Coff(_) => Ok(Some(FileCut::Coff(super::coff::plan_coff_cut(data, 0, &pruned.units)?))),
        _ => Ok(None),
    }
}

impl FileCut {
    /// The output file.
    pub fn output_plan<'a>(&self, data: &'a [u8], pruned: &Pruned<'a>) -> Plan<'a> {
        match self {
            FileCut::Object(cut) => cut.output_plan(data, 0, &pruned.units),
            FileCut::Archive(cut) => cut.output_plan(data, pruned),
            FileCut::Pe(cut) => cut.output_plan(data, pruned),
            FileCut::Coff(cut) => cut.output_plan(data, 0, &pruned.units),
        }
    }

    /// The new offset of pruned unit `k`.
    pub fn unit_offset(&self, k: usize) -> Option<u64> {
        match self {
            FileCut::Object(cut) => cut.unit_offset(k),
            FileCut::Archive(cut) => cut.unit_offset(k),
            FileCut::Pe(cut) => cut.unit_offsets.get(k).copied(),
            FileCut::Coff(cut) => cut.unit_offset(k),
        }
    }

    /// Checks the output read back from its bytes.
    pub fn verify(&self, output: &[u8], input: &[u8], pruned: &Pruned) -> Result<(), PruneError> {
        match self {
            FileCut::Object(cut) => verify_object_cut(output, 0, input, 0, &pruned.units, cut),
            FileCut::Archive(cut) => verify_archive_cut(output, input, pruned, cut),
            FileCut::Pe(cut) => cut.verify(output, input, pruned),
            FileCut::Coff(cut) => cut.verify(output, 0, input, 0, &pruned.units),
        }
    }
}
