//! `verify`: the registration records of a host binary are the list of
//! units a runtime loads. The HIP runtime registers what each
//! `.hipFatBinSegment` record points at (read through [`crate::layout`]),
//! the CUDA runtime what each `.nvFatBinSegment` record points at (read by
//! `scan/cuda.rs` while listing). A fat binary no record points at is dead
//! weight (a warning); a record that points at no fat binary's first byte
//! makes the runtime read garbage (an error).

use super::{Base, Scanner};
use crate::layout::{FileMap, LayoutError, Target};
use crate::{Location, Severity, Step};

/// How the warning about an unregistered CUDA fat binary starts (one
/// warning per fat binary, however deep the objects holding it nest).
const CUDA_UNREGISTERED: &str = "CUDA fat binary registered by no .nvFatBinSegment record";

impl Scanner<'_> {
    /// Checks an object's registration records against its fat binaries.
    pub(super) fn registration(&mut self, base: &Base, data: &[u8], loc: &Location) {
        let Some(object_at) = self.offset_of(base, data) else { return };
        self.hip_registration(data, object_at, loc);
        self.cuda_registration(object_at, data.len() as u64);
    }

    fn hip_registration(&mut self, data: &[u8], object_at: u64, loc: &Location) {
        if offload_format::coff::pe::is_pe(data) {
            return self.pe_hip_registration(data, object_at, loc);
        }
        let segment = loc.with(Step::Section(".hipFatBinSegment".into()));
        let map = match FileMap::read(data) {
            Ok(map) => map,
            Err(e) => {
                // Damage to .hip_fatbin itself, and files that are no x86-64
                // ELF, are the listing's business; these are the records'.
                let severity = match e {
                    LayoutError::Magic { .. }
                    | LayoutError::Version { .. }
                    | LayoutError::RecordSize(_)
                    | LayoutError::Pointer { .. }
                    | LayoutError::NotMapped { .. } => Severity::Error,
                    LayoutError::Kpack { .. } | LayoutError::SeveralFatbins(_) => Severity::Warning,
                    _ => return,
                };
                return self.diag(severity, Some(object_at), &segment, format!("registration records: {e}"));
            }
        };
        // Without any record there is nothing to be authoritative: such a
        // file's code is loaded by other means (hipModuleLoadData) or not at all.
        if map.wrappers.is_empty() {
            return;
        }
        let fatbin = loc.with(Step::Section(".hip_fatbin".into()));
        let several = map.units.len() > 1;
        for u in map.unreferenced() {
            let unit = &map.units[u];
            let uloc = if several { fatbin.with(Step::Index(u)) } else { fatbin.clone() };
            let msg = format!(
                "fat binary at section offset {:#x} is registered by no .hipFatBinSegment record: the HIP runtime never loads it (dead weight)",
                unit.section_offset
            );
            self.diag(Severity::Warning, Some(object_at + unit.offset), &uloc, msg);
        }
        for w in map.dangling() {
            let record = &map.wrappers[w];
            let whither = match record.target {
                Target::InsideFatbin(rel) => {
                    format!("into .hip_fatbin at section offset {rel:#x}, which is not the start of a fat binary")
                }
                _ => format!("at address {:#x}, outside .hip_fatbin", record.pointer),
            };
            let msg =
                format!("registration record {w} points {whither}: the HIP runtime would read no fat binary there");
            self.diag(Severity::Error, Some(object_at + record.offset), &segment, msg);
        }
    }

    /// `scan/cuda.rs` reported records that point at no fat binary and
    /// marked the fat binaries no record points at; each of those is
    /// reported once here.
    fn cuda_registration(&mut self, object_at: u64, len: u64) {
        let mut found: Vec<(u64, usize)> = Vec::new();
        for o in &self.inv.objects {
            if let Some(c) = &o.cuda
                && c.unregistered
                && let Some(at) = c.fatbin.filter(|&f| f >= object_at && f - object_at < len)
                && !found.iter().any(|&(f, _)| f == at)
            {
                found.push((at, o.unit));
            }
        }
        for (at, unit) in found {
            let told =
                self.inv.diagnostics.iter().any(|d| d.offset == Some(at) && d.message.starts_with(CUDA_UNREGISTERED));
            if told {
                continue;
            }
            let uloc = self.inv.units.get(unit).map(|u| u.location.clone()).unwrap_or_default();
            let msg = format!("{CUDA_UNREGISTERED}: the CUDA runtime never loads it (dead weight)");
            self.diag(Severity::Warning, Some(at), &uloc, msg);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::layout::FileMap;
    use crate::layout::tests::fixture;
    use crate::{Diagnostic, Options, Severity, scan};

    fn findings(data: &[u8]) -> Vec<Diagnostic> {
        let inv = scan(data, "x.so", &Options { deep: true, ..Default::default() });
        inv.diagnostics.into_iter().filter(|d| d.message.contains("regist")).collect()
    }

    /// `data` with wrapper record 1's pointer word (stored in place by
    /// these linkers) set to `pointer`.
    fn repoint(data: &[u8], pointer: impl Fn(&FileMap) -> u64) -> (Vec<u8>, FileMap) {
        let map = FileMap::read(data).unwrap();
        let mut out = data.to_vec();
        let at = map.wrappers[1].offset as usize + 8;
        out[at..at + 8].copy_from_slice(&pointer(&map).to_le_bytes());
        (out, map)
    }

    #[test]
    fn intact_binaries_have_no_findings() {
        for name in ["nopie_gnu", "lld_relr.so", "gnu_rela.so", "rdc_ccob_lld.so", "tu1.o"] {
            assert_eq!(findings(&fixture(name)), vec![], "{name}");
        }
    }

    #[test]
    fn a_fat_binary_no_record_points_at_is_a_warning() {
        for name in ["nopie_gnu", "lld_relr.so"] {
            // Both records now register the first fat binary.
            let (data, map) = repoint(&fixture(name), |m| m.wrappers[0].pointer);
            let found = findings(&data);
            assert_eq!(found.len(), 1, "{name}: {found:?}");
            assert_eq!(found[0].severity, Severity::Warning);
            assert_eq!(found[0].offset, Some(map.units[1].offset));
            assert_eq!(found[0].location, "section .hip_fatbin #1");
            assert!(found[0].message.contains("never loads it"), "{}", found[0].message);
        }
    }

    #[test]
    fn a_record_pointing_at_no_fat_binary_is_an_error() {
        let (data, map) = repoint(&fixture("nopie_gnu"), |m| m.wrappers[1].pointer + 16);
        let found = findings(&data);
        assert_eq!(found.len(), 2, "{found:?}");
        let error = found.iter().find(|d| d.severity == Severity::Error).unwrap();
        assert_eq!(error.offset, Some(map.wrappers[1].offset));
        assert_eq!(error.location, "section .hipFatBinSegment");
        let rel = map.units[1].section_offset + 16;
        assert!(
            error.message.contains(&format!("record 1 points into .hip_fatbin at section offset {rel:#x}")),
            "{}",
            error.message
        );
        assert!(found.iter().any(|d| d.severity == Severity::Warning && d.offset == Some(map.units[1].offset)));
        // Pointing outside the section altogether.
        let (data, _) = repoint(&fixture("nopie_gnu"), |_| 0x10);
        let found = findings(&data);
        assert!(
            found
                .iter()
                .any(|d| d.severity == Severity::Error && d.message.contains("at address 0x10, outside .hip_fatbin")),
            "{found:?}"
        );
    }

    #[test]
    fn a_record_with_another_magic_is_an_error() {
        let data = fixture("nopie_gnu");
        let map = FileMap::read(&data).unwrap();
        let mut bad = data.clone();
        bad[map.wrappers[0].offset as usize] ^= 0xff;
        let found = findings(&bad);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].severity, Severity::Error);
        assert!(found[0].message.contains("is not HIPF"), "{}", found[0].message);
    }
}
