//! `replace` in static archives made here from the HIP and CUDA fixtures:
//! the member is found by its entry or named, every other byte stays,
//! and ambiguity, unknown members and size changes are refused.

use super::super::{InputKind, ReplaceError, plan_in, verify};
use offload_format::bundle::archive::write_gnu_archive;

fn cuda_fixture(name: &str) -> Vec<u8> {
    offload_testkit::cli_fixture(&format!("cuda/{name}"))
}

fn hip_object() -> Vec<u8> {
    offload_testkit::fixture("prune/tu1.o")
}

fn archive(members: &[(&str, Vec<u8>)]) -> Vec<u8> {
    write_gnu_archive(members.iter().map(|(n, d)| (n.to_string(), d.clone())).collect()).unwrap()
}

/// kern.cubin with one byte of its kernel's code changed.
fn new_cubin() -> Vec<u8> {
    let mut c = cuda_fixture("kern.cubin");
    c[0x710] ^= 0xff;
    c
}

/// Replaces and checks; returns the output and the member's name.
fn replace_ok(data: &[u8], new: &[u8], wanted: &str, member: Option<&str>) -> (Vec<u8>, String) {
    let r = plan_in(data, new, wanted, None, member).unwrap();
    assert_eq!(r.input, InputKind::Archive);
    let out = r.output().to_vec();
    verify(&out, data, &r, new).unwrap();
    assert_eq!(out.len(), data.len());
    let m = r.member.clone().unwrap();
    // The member is what replacing in the member alone gives.
    let (start, end) = (m.offset as usize, (m.offset + m.size) as usize);
    let alone = plan_in(&data[start..end], new, wanted, None, None).unwrap().output().to_vec();
    assert!(out[start..end] == alone[..], "{}: the member is replaced as a file of its own", m.name);
    assert!(out[..start] == data[..start] && out[end..] == data[end..], "other members are untouched");
    (out, m.name)
}

#[test]
fn the_one_member_holding_the_entry_is_found_and_replaced() {
    let text = b"#not an object\n".to_vec();
    let data = archive(&[("kern.o", cuda_fixture("obj_sm80.o")), ("tu1.o", hip_object()), ("notes.txt", text)]);
    let (_, name) = replace_ok(&data, &new_cubin(), "sm_80", None);
    assert_eq!(name, "kern.o");
    // A HIP entry of the other member, by target ID.
    let hip = hip_object();
    let r = plan_in(&hip, &[], "gfx906", None, None).unwrap_err();
    assert!(!matches!(r, ReplaceError::NoEntry { .. }), "tu1.o holds gfx906: {r}");
    let map = offload_inspect::layout::FileMap::read(&hip).unwrap();
    let unit = map.units[0];
    let bundle = &hip[unit.offset as usize..][..unit.used as usize];
    let entries = offload_format::bundle::binary::read(bundle).unwrap().unwrap();
    let mut new = entries.iter().find(|e| e.id.ends_with(b"gfx906")).unwrap().payload.to_vec();
    new.extend_from_slice(b"rebuilt");
    let (_, name) = replace_ok(&data, &new, "gfx906", None);
    assert_eq!(name, "tu1.o");
}

#[test]
fn several_holders_need_a_member_name_and_unknown_names_are_refused() {
    let data = archive(&[("a.o", cuda_fixture("obj_sm80.o")), ("b.o", cuda_fixture("obj_sm80.o"))]);
    let e = plan_in(&data, &new_cubin(), "sm_80", None, None).unwrap_err().to_string();
    assert!(e.contains("a.o, b.o") && e.contains("--member"), "{e}");
    let (out, name) = replace_ok(&data, &new_cubin(), "sm_80", Some("b.o"));
    assert_eq!(name, "b.o");
    assert_ne!(out, data);
    let e = plan_in(&data, &new_cubin(), "sm_80", None, Some("c.o")).unwrap_err().to_string();
    assert!(e.contains("no member 'c.o'") && e.contains("a.o, b.o"), "{e}");
    let e = plan_in(&data, &new_cubin(), "sm_86", None, None).unwrap_err().to_string();
    assert!(e.contains("no archive member holds"), "{e}");
    // A refusal inside the member names the member.
    let e = plan_in(&data, b"junk", "sm_80", None, Some("a.o")).unwrap_err().to_string();
    assert!(e.starts_with("member a.o:") && e.contains("not an ELF cubin"), "{e}");
}

#[test]
fn a_member_that_would_change_size_is_refused_and_damage_is_an_error() {
    // A .fatbin member is rewritten back to back: a larger cubin grows it.
    let mut big = new_cubin();
    big.extend_from_slice(&[0u8; 64]);
    let phoff = u64::from_le_bytes(big[32..40].try_into().unwrap()) as usize;
    let table = big[phoff..phoff + 3 * 56].to_vec();
    let at = big.len();
    big.extend_from_slice(&table);
    big[32..40].copy_from_slice(&(at as u64).to_le_bytes());
    let data = archive(&[("k.fatbin", cuda_fixture("kern_nocompress.fatbin"))]);
    let e = plan_in(&data, &big, "sm_80", None, None).unwrap_err().to_string();
    assert!(e.contains("change size"), "{e}");
    for n in (0..data.len()).step_by(331) {
        assert!(plan_in(&data[..n], &new_cubin(), "sm_80", None, None).is_err());
    }
}
