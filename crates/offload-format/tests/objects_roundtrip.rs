//! Object bundles in the library: LLVM 19's bytes for the golden fixtures,
//! and round trips (bundle, list, unbundle) on random entries.

use offload_format::bundle::object::{self as object_bundle, Format};
use offload_format::elf;
use proptest::prelude::*;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../offload-cli/tests/fixtures/objects/", $name)).as_slice()
    };
}

const IDS: [&[u8]; 3] =
    [b"host-x86_64-unknown-linux-gnu-", b"hip-amdgcn-amd-amdhsa--gfx906", b"hip-amdgcn-amd-amdhsa--gfx908"];

#[test]
fn golden_fat_objects_and_host_extractions() {
    type Case<'a> = (&'a [u8], &'a [u8], &'a [u8], Format);
    let cases: [Case; 3] = [
        (fixture!("host-ppc64.o"), fixture!("fat-ppc64.o"), fixture!("fat-ppc64.host.o"), Format::Elf),
        (fixture!("host-cxx-gcc.o"), fixture!("fat-cxx-gcc.o"), fixture!("fat-cxx-gcc.host.o"), Format::Elf),
        (fixture!("host-coff.o"), fixture!("fat-coff.o"), fixture!("fat-coff.host.o"), Format::Coff),
    ];
    let dev = fixture!("dev-gfx906.o");
    let txt = fixture!("payload.txt");
    for (host, fat, stripped, format) in cases {
        assert_eq!(object_bundle::detect(host).unwrap(), Some(format));
        let entries = [(IDS[0], host), (IDS[1], dev), (IDS[2], txt)];
        assert_eq!(object_bundle::bundle(host, format, &entries, 0).unwrap().to_vec(), fat);
        let found = object_bundle::bundles(fat, format).unwrap();
        assert_eq!(found.iter().map(|b| b.id).collect::<Vec<_>>(), IDS);
        assert!(found[0].is_host_marker());
        assert_eq!(found[1].contents, dev);
        assert_eq!(object_bundle::host_object(fat, format).unwrap().to_vec(), stripped);
    }
    // The middle of the section table: renumbering.
    assert_eq!(object_bundle::host_object(fixture!("mid.o"), Format::Elf).unwrap().to_vec(), fixture!("mid.host.o"));
}

#[test]
fn non_objects_are_left_to_the_binary_format() {
    for data in [
        &b""[..],
        b"plain text",
        b"BC\xc0\xde\x35\x14",
        b"!<arch>\n",
        fixture!("payload.txt"),
        fixture!("dev-gfx906.bc"),
    ] {
        assert_eq!(object_bundle::detect(data).unwrap(), None, "{data:?}");
    }
    assert!(object_bundle::detect(&fixture!("fat-x86_64.o")[..200]).is_err());
    assert_eq!(object_bundle::detect(fixture!("host-macho.o")).unwrap(), Some(Format::MachO));
    assert!(object_bundle::bundles(fixture!("host-macho.o"), Format::MachO).unwrap().is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Bundling then reading gives the entries back in order, and taking
    /// the host back out gives the host as llvm-objcopy would copy it.
    #[test]
    fn bundles_round_trip(
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..6),
        host_at in 0usize..6,
        pick in 0usize..4,
    ) {
        let hosts = [fixture!("host-x86_64.o"), fixture!("host-i386.o"), fixture!("host-ppc64.o"), fixture!("host-coff.o")];
        let host = hosts[pick];
        let format = object_bundle::detect(host).unwrap().unwrap();
        let host_at = host_at % payloads.len();
        let ids: Vec<Vec<u8>> = (0..payloads.len())
            .map(|i| if i == host_at { IDS[0].to_vec() } else { format!("hip-amdgcn-amd-amdhsa--gfx90{i}").into_bytes() })
            .collect();
        let entries: Vec<(&[u8], &[u8])> = ids.iter().zip(&payloads).map(|(i, p)| (i.as_slice(), p.as_slice())).collect();
        let fat = object_bundle::bundle(host, format, &entries, host_at).unwrap().to_vec();
        let found = object_bundle::bundles(&fat, format).unwrap();
        prop_assert_eq!(found.len(), payloads.len());
        for (i, b) in found.iter().enumerate() {
            prop_assert_eq!(b.id, ids[i].as_slice());
            if i == host_at {
                prop_assert!(b.is_host_marker());
            } else {
                prop_assert_eq!(b.contents, payloads[i].as_slice());
            }
        }
        let copied = match format {
            Format::Elf => elf::rewrite(host, &|_| false, Vec::new()).unwrap().to_vec(),
            _ => offload_format::coff::rewrite(host, &|_| false, Vec::new()).unwrap().to_vec(),
        };
        prop_assert_eq!(object_bundle::host_object(&fat, format).unwrap().to_vec(), copied);
    }
}
