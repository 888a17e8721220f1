//! `verify` on a PE image's HIP registration records (`.hipFatB`,
//! docs/formats/pe.md §3): each record must point at the first byte of a
//! fat binary of `.hip_fat`, through an address a base relocation covers
//! when the image has a base relocation table (else the runtime reads
//! garbage once Windows loads the DLL elsewhere); a fat binary no record
//! points at is dead weight.

use super::Scanner;
use crate::layout::fatbin;
use crate::{Location, Severity, Step};
use offload_format::coff::pe::{DIR_BASERELOC, PeImage};

/// `__hipRegisterFatBinary`'s record magic (`HIPF`).
const HIPF: u32 = 0x4849_5046;

impl Scanner<'_> {
    /// Checks the `.hipFatB` records of the PE image `data` (at
    /// `object_at` in the input) against the fat binaries of `.hip_fat`.
    pub(super) fn pe_hip_registration(&mut self, data: &[u8], object_at: u64, loc: &Location) {
        let Ok(image) = PeImage::parse(data) else { return };
        let Some(fat) = image.sections.iter().find(|s| matches!(s.name(), b".hip_fat" | b".hip_fatbin")).copied()
        else {
            return;
        };
        let segment = loc.with(Step::Section(".hipFatB".into()));
        let records = match image.records(b".hipFatB", HIPF) {
            Ok(r) => r,
            Err(e) => {
                return self.diag(Severity::Error, Some(object_at), &segment, format!("registration records: {e}"));
            }
        };
        if records.is_empty() {
            return;
        }
        // The listing reports damage inside .hip_fat itself.
        let Ok(units) = fatbin::walk(image.section_data(&fat), 0) else { return };
        let relocated_image = image.directory(DIR_BASERELOC).is_some();
        let mut registered = vec![false; units.len()];
        for (i, r) in records.iter().enumerate() {
            let at = object_at + r.offset as u64;
            let rel = r.target.and_then(|t| t.checked_sub(fat.virtual_address)).filter(|&rel| rel < fat.virtual_size);
            let Some(rel) = rel else {
                let msg = format!(
                    "registration record {i} points at address {:#x}, outside .hip_fat: the HIP runtime would read no fat binary there",
                    r.address
                );
                self.diag(Severity::Error, Some(at), &segment, msg);
                continue;
            };
            match units.iter().position(|u| u.section_offset == u64::from(rel)) {
                Some(u) => registered[u] = true,
                None => {
                    let msg = format!(
                        "registration record {i} points into .hip_fat at section offset {rel:#x}, which is not the start of a fat binary: the HIP runtime would read no fat binary there"
                    );
                    self.diag(Severity::Error, Some(at), &segment, msg);
                }
            }
            if relocated_image && !r.relocated {
                let msg = format!(
                    "registration record {i}: no DIR64 base relocation covers its address, so it is wrong once Windows loads the image at another base"
                );
                self.diag(Severity::Error, Some(at + 8), &segment, msg);
            }
        }
        let fatloc = loc.with(Step::Section(".hip_fat".into()));
        for (u, unit) in units.iter().enumerate().filter(|(u, _)| !registered[*u]) {
            let msg = format!(
                "fat binary at section offset {:#x} is registered by no .hipFatB record: the HIP runtime never loads it (dead weight)",
                unit.section_offset
            );
            let uloc = if units.len() > 1 { fatloc.with(Step::Index(u)) } else { fatloc.clone() };
            self.diag(Severity::Warning, Some(object_at + u64::from(fat.raw_offset) + unit.offset), &uloc, msg);
        }
    }
}
