//! Hostile input through the C entry points: every damaged variant of the
//! samples must give statuses, never OFFLOAD_ERROR_INTERNAL (a caught
//! panic), and every string and size read back must be usable.

use super::*;
use std::ffi::CStr;

fn repo_file(path: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)).expect("sample")
}

/// Scans `data` through the C API, reads every record, copies every code
/// object out and selects; returns how many objects copied out.
fn exercise(data: &[u8], flags: u32) -> usize {
    let mut inv = std::ptr::null_mut();
    // SAFETY: `data` outlives the inventory, freed at the end.
    let st = unsafe { offload_scan_buffer(data.as_ptr(), data.len(), flags, &mut inv) };
    assert_eq!(st, offload_status::OFFLOAD_OK);
    let mut copied = 0;
    // SAFETY: `inv` is live; the buffer is checked and freed at once.
    unsafe {
        let mut buf = std::ptr::null_mut();
        assert_eq!(offload_kernels_json(inv, &mut buf), offload_status::OFFLOAD_OK);
        let json = std::slice::from_raw_parts(offload_buffer_data(buf), offload_buffer_size(buf));
        assert!(serde_json::from_slice::<serde_json::Value>(json).is_ok_and(|v| v.is_array()));
        offload_buffer_free(buf);
    }
    // SAFETY: `inv` is the live inventory made above; each record is read
    // into a zeroed struct and its strings are read while `inv` lives.
    unsafe {
        for i in 0..offload_inventory_count(inv) {
            let mut co = std::mem::zeroed::<offload_code_object>();
            assert_eq!(offload_inventory_get(inv, i, &mut co), offload_status::OFFLOAD_OK);
            for s in [co.location, co.format, co.id, co.offload_kind, co.triple, co.target_id, co.stored_target] {
                assert!(!s.is_null());
                let _ = CStr::from_ptr(s).to_str().expect("UTF-8");
            }
            if co.has_offset {
                assert!(co.offset.checked_add(co.size).is_some_and(|end| end <= data.len() as u64));
            }
            let mut size = 0usize;
            assert_eq!(
                offload_code_object_copy(inv, i, std::ptr::null_mut(), 0, &mut size),
                offload_status::OFFLOAD_OK
            );
            if size > 1 << 24 {
                continue;
            }
            let mut buf = vec![0u8; size];
            let st = offload_code_object_copy(inv, i, buf.as_mut_ptr(), buf.len(), &mut size);
            assert!(
                matches!(st, offload_status::OFFLOAD_OK | offload_status::OFFLOAD_ERROR_FORMAT),
                "copy gave {st:?}: {:?}",
                CStr::from_ptr(offload_last_error())
            );
            if st == offload_status::OFFLOAD_OK {
                assert_eq!(size, buf.len());
                copied += 1;
            }
        }
        for d in 0..offload_inventory_diagnostic_count(inv) {
            let mut diag = std::mem::zeroed::<offload_diagnostic>();
            assert_eq!(offload_inventory_diagnostic(inv, d, &mut diag), offload_status::OFFLOAD_OK);
            let _ = CStr::from_ptr(diag.message).to_str().expect("UTF-8");
        }
        let mut chosen = [0usize; 64];
        let mut count = 0;
        let st = offload_select(inv, c"gfx906".as_ptr(), OFFLOAD_RUNTIME_HIP, chosen.as_mut_ptr(), 64, &mut count);
        assert_ne!(st, offload_status::OFFLOAD_ERROR_INTERNAL);
        let mut buf = std::ptr::null_mut();
        let st = offload_decompress(data.as_ptr(), data.len(), &mut buf);
        assert_ne!(st, offload_status::OFFLOAD_ERROR_INTERNAL);
        offload_buffer_free(buf);
        offload_inventory_free(inv);
    }
    copied
}

#[test]
fn samples_copy_out_every_code_object() {
    for path in ["samples/hip-gfx906-gfx90a.bc", "samples/hip-gfx906-gfx90a.compressed.bc"] {
        assert_eq!(exercise(&repo_file(path), 0), 3, "{path}");
        assert_eq!(exercise(&repo_file(path), OFFLOAD_SCAN_VERIFY), 3, "{path}");
    }
}

#[test]
fn damaged_samples_give_statuses_not_panics() {
    for path in [
        "samples/hip-gfx906-gfx90a.bc",
        "samples/hip-gfx906-gfx90a.compressed.bc",
        "crates/offload-cli/tests/fixtures/inspect/libtwo.so",
    ] {
        let original = repo_file(path);
        // Larger files: every 13th byte, to keep the test short.
        let stride = if original.len() > 8192 { 13 } else { 1 };
        for at in (0..original.len()).step_by(stride) {
            let mut data = original.clone();
            data[at] ^= 0xFF;
            exercise(&data, if at % 2 == 0 { 0 } else { OFFLOAD_SCAN_VERIFY });
        }
        for len in (0..original.len()).step_by(stride * 7) {
            exercise(&original[..len], OFFLOAD_SCAN_VERIFY);
        }
    }
}

#[test]
fn kernels_json_of_a_hip_library() {
    let data = repo_file("crates/offload-cli/tests/fixtures/inspect/libscale.so");
    let mut inv = std::ptr::null_mut();
    // SAFETY: `data` outlives the inventory; the buffer is read while live
    // and both are freed at the end.
    unsafe {
        assert_eq!(offload_scan_buffer(data.as_ptr(), data.len(), 0, &mut inv), offload_status::OFFLOAD_OK);
        let mut buf = std::ptr::null_mut();
        assert_eq!(offload_kernels_json(inv, &mut buf), offload_status::OFFLOAD_OK);
        let json = std::slice::from_raw_parts(offload_buffer_data(buf), offload_buffer_size(buf));
        let rows: serde_json::Value = serde_json::from_slice(json).expect("JSON");
        let rows = rows.as_array().expect("an array");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["name"], "_Z5scalePff");
        assert_eq!(rows[0]["demangled"], "scale(float*, float)");
        assert_eq!(rows[0]["target"], "gfx906");
        assert_eq!(rows[0]["resources"]["kernarg_size"], 12);
        assert_eq!(rows[0]["occupancy"]["unit"], "simd");
        offload_buffer_free(buf);
        assert_eq!(offload_kernels_json(std::ptr::null(), &mut buf), offload_status::OFFLOAD_ERROR_INVALID_ARGUMENT);
        assert!(buf.is_null());
        offload_inventory_free(inv);
    }
}

/// A package lists its members' code objects; selecting and copying from
/// it are refused with a status and a message, never a wrong answer.
#[test]
fn packages_list_their_members_and_refuse_select_and_copy() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../offload-cli/tests/fixtures/packages/hip-sample_1.0_amd64.deb");
    let path = std::ffi::CString::new(path.to_str().expect("UTF-8 path")).expect("no NUL");
    let mut inv = std::ptr::null_mut();
    // SAFETY: a C string and a writable handle; the inventory is freed below.
    unsafe {
        assert_eq!(offload_scan_file(path.as_ptr(), 0, &mut inv), offload_status::OFFLOAD_OK);
        let n = offload_inventory_count(inv);
        assert!(n >= 2, "the .deb holds a fat binary");
        assert!(offload_inventory_unit_count(inv) >= 1);
        let mut co = std::mem::zeroed::<offload_code_object>();
        assert_eq!(offload_inventory_get(inv, n - 1, &mut co), offload_status::OFFLOAD_OK);
        let location = CStr::from_ptr(co.location).to_str().expect("UTF-8");
        assert!(location.starts_with("member "), "{location}");
        let (mut size, mut count) = (0usize, 0usize);
        let mut buf = [0u8; 16];
        assert_eq!(
            offload_code_object_copy(inv, n - 1, buf.as_mut_ptr(), buf.len(), &mut size),
            offload_status::OFFLOAD_ERROR_INVALID_ARGUMENT
        );
        let gpu = c"gfx906";
        assert_eq!(
            offload_select(inv, gpu.as_ptr(), 0, std::ptr::null_mut(), 0, &mut count),
            offload_status::OFFLOAD_ERROR_INVALID_ARGUMENT
        );
        assert!(CStr::from_ptr(offload_last_error()).to_str().expect("UTF-8").contains("package"));
        offload_inventory_free(inv);
    }
}
