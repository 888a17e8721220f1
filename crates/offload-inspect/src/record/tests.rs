use super::*;
use crate::select::select;
use crate::{Options, scan};
use std::num::NonZeroU64;

fn hip_bundle() -> Vec<u8> {
    let entries: [(&[u8], &[u8]); 3] = [
        (b"host-x86_64-unknown-linux--", b""),
        (b"hipv4-amdgcn-amd-amdhsa--gfx906", b"GFX906 CODE"),
        (b"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+", b"GFX90A XNACK CODE"),
    ];
    offload_format::bundle::binary::write(&entries, NonZeroU64::new(4096).unwrap()).to_vec()
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

#[test]
fn list_keys_in_schema_order_and_skipped_fields_kept() {
    let data = hip_bundle();
    let inv = scan(&data, "b.hipfb", &Options::default());
    let origin = Origin { prefix: "file:///d/b.hipfb", offset: 100 };
    let r = CodeObjectRecord::new(Some("b.hipfb"), 2, &inv.objects[2], &data, Some(&origin));
    assert_eq!(
        json(&r),
        r#"{"file":"b.hipfb","location":"file","format":"bundle","id":"hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+","offload_kind":"hipv4","triple":"amdgcn-amd-amdhsa","target_id":"gfx90a:xnack+","size":17,"offset":8192,"compressed":false,"unit":0,"image_kind":null,"uri":"file:///d/b.hipfb#offset=8292&size=17"}"#
    );
    assert_eq!((r.stored_target.as_str(), r.container, r.index), ("gfx90a:xnack+", false, 2));
    // Bytes: no file, no URI.
    let r = CodeObjectRecord::new(None, 1, &inv.objects[1], &data, None);
    assert!(json(&r).starts_with(r#"{"file":null,"location":"file","#), "{}", json(&r));
    assert!(json(&r).ends_with(r#""image_kind":null,"uri":null}"#), "{}", json(&r));
}

#[test]
fn select_and_extract_keys_come_before_the_uri() {
    let data = hip_bundle();
    let inv = scan(&data, "b.hipfb", &Options::default());
    let gpu = Gpu::parse("gfx906").unwrap();
    let sel = select(&inv.objects, &gpu, Runtime::Hip);
    let verdict = |i: usize| VerdictRecord::new(sel.verdicts[i].as_ref().unwrap(), &inv.objects, &gpu, Runtime::Hip);
    let mut chosen = CodeObjectRecord::new(Some("b"), 1, &inv.objects[1], &data, None);
    chosen.verdict = Some(verdict(1));
    assert!(
        json(&chosen).ends_with(r#""image_kind":null,"selected":true,"reason_code":null,"reason":null,"uri":null}"#)
    );
    let mut other = CodeObjectRecord::new(Some("b"), 2, &inv.objects[2], &data, None);
    other.verdict = Some(verdict(2));
    let v = other.verdict.as_ref().unwrap();
    assert!(!v.selected);
    assert_eq!(v.reason_code.as_deref(), Some("other-processor"), "{v:?}");
    let text = json(&other);
    assert!(text.contains(r#""selected":false,"reason_code":"other-processor","reason":""#), "{text}");
    let mut written = CodeObjectRecord::new(Some("b"), 1, &inv.objects[1], &data, None);
    written.path = Some("out/x.co".into());
    assert!(json(&written).ends_with(r#""image_kind":null,"path":"out/x.co","uri":null}"#));
}

#[test]
fn not_chosen_names_the_preferred_object_in_the_runtime_order() {
    let data = hip_bundle();
    let inv = scan(&data, "b.hipfb", &Options::default());
    let gpu = Gpu::parse("gfx90a:xnack+").unwrap();
    let v = Verdict::NotChosen { chosen: 2, tier: Tier::Native };
    let (code, text) = explain(&v, &inv.objects, &gpu, Runtime::Hip);
    assert_eq!(code, "not-chosen");
    assert_eq!(
        text,
        "also compatible, but 'hipv4-amdgcn-amd-amdhsa--gfx90a:xnack+' is preferred (native before generic, more fixed features, file order)"
    );
    assert!(
        explain(&v, &inv.objects, &gpu, Runtime::Cuda)
            .1
            .ends_with("(cubin before PTX, nearest architecture, file order)")
    );
    assert_eq!(explain(&Verdict::Selected(Tier::Native), &inv.objects, &gpu, Runtime::Hip).1, "built for gfx90a");
}

#[test]
fn diagnostics_print_the_severity_by_name() {
    let d = DiagnosticRecord::new(Some("x.so"), Severity::Warning, Some(16), "section .hip_fatbin", "odd");
    assert_eq!(
        json(&d),
        r#"{"file":"x.so","severity":"warning","offset":16,"location":"section .hip_fatbin","message":"odd"}"#
    );
    let d = DiagnosticRecord::new(None, Severity::Error, None, "file", "no offload code objects found");
    assert_eq!(
        json(&d),
        r#"{"file":null,"severity":"error","offset":null,"location":"file","message":"no offload code objects found"}"#
    );
}
