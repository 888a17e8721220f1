//! Damaged objects, archives and bitcode never make the readers and the
//! ELF rewriter panic, hang or ask for absurd amounts of memory: every
//! mutation of real files (from the CLI's fixtures) either works or gives
//! an error.

use offload_format::bitcode;
use offload_format::bundle::archive::{self, ArchiveOptions};
use offload_format::bundle::object::{self as object_bundle};
use offload_format::coff;
use offload_format::elf::{self, NewSection};

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/objects/", $name))
    };
}

/// splitmix64, so a failure reproduces from its case number.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A random damage: flipped bytes, a field overwritten with an extreme
/// value, or truncation.
fn mutate(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let mut d = data.to_vec();
    match rng.below(4) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(d.len());
                d[at] ^= 1 << rng.below(8);
            }
        }
        1 => {
            let at = rng.below(d.len().saturating_sub(8));
            let v: u64 = [0, 1, 0xff00, 0xffff, u32::MAX as u64, u64::MAX, rng.next()][rng.below(7)];
            let n = [1, 2, 4, 8][rng.below(4)];
            d[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
        }
        2 => d.truncate(rng.below(d.len())),
        _ => {
            // Damage the section header table area of an ELF file.
            let at = d.len().saturating_sub(1 + rng.below(512));
            d[at] = rng.next() as u8;
        }
    }
    d
}

fn exercise_object(data: &[u8]) {
    let Ok(Some(format)) = object_bundle::detect(data) else { return };
    if let Ok(bundles) = object_bundle::bundles(data, format) {
        for b in &bundles {
            let _ = b.is_host_marker();
        }
    }
    if let Ok(plan) = object_bundle::host_object(data, format) {
        assert!(plan.len() < (data.len() as u64) + (2 << 30));
    }
    let add = vec![NewSection { name: b"__CLANG_OFFLOAD_BUNDLE__x".to_vec(), data: b"payload" }];
    let plan = match format {
        object_bundle::Format::Elf => elf::rewrite(data, &|n| n.starts_with(b".rela"), add).ok(),
        object_bundle::Format::Coff => coff::rewrite(data, &|n| n.starts_with(b".data"), add).ok(),
        object_bundle::Format::MachO => None,
    };
    if let Some(plan) = plan {
        assert!(plan.len() < (data.len() as u64) + (2 << 30));
    }
}

#[test]
fn mutated_objects_do_not_panic() {
    let files: [&[u8]; 7] = [
        fixture!("fat-x86_64.o"),
        fixture!("fat-i386.o"),
        fixture!("fat-ppc64.o"),
        fixture!("fat-cxx-gcc.o"),
        fixture!("mid.o"),
        fixture!("fat-coff.o"),
        fixture!("host-macho.o"),
    ];
    let mut rng = Rng(0x000b_1ec7);
    for case in 0..4000 {
        let base = files[case % files.len()];
        let data = mutate(&mut rng, base);
        exercise_object(&data);
    }
}

#[test]
fn mutated_archives_and_bitcode_do_not_panic() {
    let lib = fixture!("lib.a");
    let bc = fixture!("dev-gfx906.bc");
    let targets = ["hip-amdgcn-amd-amdhsa--gfx906".to_string(), "host-x86_64-unknown-linux-gnu-".to_string()];
    let mut rng = Rng(0xa7c4_1b0c);
    for _ in 0..600 {
        let data = mutate(&mut rng, lib);
        let options = ArchiveOptions {
            allow_missing_bundles: true,
            check_input_archive: rng.below(2) == 0,
            ..Default::default()
        };
        let _ = archive::unbundle(&targets, &data, "lib.a", options, None);
    }
    for _ in 0..3000 {
        let data = mutate(&mut rng, bc);
        let _ = bitcode::archive_symbols(&data);
    }
}

#[test]
fn bitcode_symbols_are_the_defined_globals_in_ir_order() {
    let names = bitcode::archive_symbols(fixture!("dev-gfx906.bc")).expect("clang writes an IR symbol table");
    let names: Vec<&str> = names.iter().map(|n| std::str::from_utf8(n).unwrap()).collect();
    // Functions first, then variables, as LLVM's module symbol table lists them.
    assert_eq!(names, ["devfn", "dev_global", "__oclc_ABI_version"]);
}
