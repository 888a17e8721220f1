//! Code-object URIs: the `uri` key of `list`/`select`/`extract --json`, the
//! `--uri` column, and `offload extract URI...` (docs/reference/uris.md).
//! Runs on the checked-in fixtures, without LLVM.

use crate::common;
use crate::inspect_support;
use crate::uri_support;

use inspect_support::{json, n, offload, s};
use offload_inspect::uri::{encode_path, file_uri};
use std::path::{Path, PathBuf};
use uri_support::{printed_keys, round_trip};

fn inspect(name: &str) -> PathBuf {
    common::fixtures().join("inspect").join(name)
}

fn text(out: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn every_uri_extracts_to_the_bytes_extract_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files: Vec<PathBuf> =
        ["libscale.so", "libtwo.so", "newdrv.o", "libfat.a"].iter().map(|f| inspect(f)).collect();
    files.push(root.join("samples/hip-gfx906-gfx90a.bc"));
    files.push(root.join("samples/hip-gfx906-gfx90a.compressed.bc"));
    for f in ["libsmall.so", "kern_nocompress.fatbin", "kern.cubin", "obj_sm80.o", "clang_nd_sm90.o"] {
        files.push(common::fixtures().join("cuda").join(f));
    }
    for f in ["gnu_rela.so", "lld_relr.so", "nopie_gnu", "rdc_ccob_lld.so", "tu1.o"] {
        files.push(root.join("crates/offload-testkit/fixtures/prune").join(f));
    }
    let (mut same, mut compressed) = (0, 0);
    for (i, file) in files.iter().enumerate() {
        let trip = round_trip(file, &tmp.path().join(i.to_string()));
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(trip.same > 0, "{name}: {trip:?}");
        // Only compressed CUDA entries have no range of their own.
        let cuda = file.parent().unwrap().ends_with("cuda");
        let cuda_compressed = if cuda {
            inspect_support::list_json(file)
                .iter()
                .filter(|r| r["compressed"] == true && s(r, "format") == "cuda-fatbin")
                .count()
        } else {
            0
        };
        assert_eq!(trip.without, cuda_compressed, "{name}: {trip:?}");
        same += trip.same;
        compressed += trip.compressed;
    }
    assert!(compressed >= 6, "the compressed fixtures were compared: {compressed}");
    assert!(same > 40, "{same}");
}

#[test]
fn uri_is_the_last_key_and_names_the_absolute_path() {
    let lib = inspect("libscale.so");
    let here = encode_path(lib.parent().unwrap().to_str().unwrap().as_bytes());
    let out = common::run(
        std::process::Command::new(env!("CARGO_BIN_EXE_offload"))
            .args(["list", "--json", "libscale.so"])
            .current_dir(lib.parent().unwrap()),
    );
    let records = json(&out);
    for r in &records {
        let want = format!("file://{here}/libscale.so#offset={}&size={}", n(r, "offset"), n(r, "size"));
        assert_eq!(s(r, "uri"), want);
        assert_eq!(s(r, "file"), "libscale.so", "the file key stays as given");
    }
    for keys in printed_keys(&out.stdout) {
        assert_eq!(keys.last().map(String::as_str), Some("uri"));
        assert_eq!(keys[keys.len() - 2], "image_kind");
    }
    let out = offload(&["select", "--json", "--gpu", "gfx906", lib.to_str().unwrap()]);
    for keys in printed_keys(&out.stdout) {
        assert_eq!(&keys[keys.len() - 2..], ["reason", "uri"]);
    }
    let tmp = tempfile::tempdir().unwrap();
    let out =
        offload(&["extract", "--json", "--all", "--output-dir", tmp.path().to_str().unwrap(), lib.to_str().unwrap()]);
    for keys in printed_keys(&out.stdout) {
        assert_eq!(&keys[keys.len() - 2..], ["path", "uri"]);
    }
    // Inside a compressed bundle: the bundle's range, shared by its objects.
    let two = list_of(&inspect("libtwo.so"));
    let data = std::fs::read(inspect("libtwo.so")).unwrap();
    for r in &two {
        let uri = s(r, "uri");
        let range = uri.split_once("#offset=").unwrap().1;
        let (offset, size) = range.split_once("&size=").unwrap();
        let (offset, size): (usize, usize) = (offset.parse().unwrap(), size.parse().unwrap());
        assert!(data[offset..].starts_with(b"CCOB"), "{uri}");
        assert_eq!(offload_format::bundle::compressed::read_blob(&data[offset..]).unwrap().len, size);
    }
}

fn list_of(file: &Path) -> Vec<serde_json::Value> {
    inspect_support::list_json(file)
}

#[test]
fn the_uri_column_is_asked_for() {
    let lib = inspect("libscale.so");
    let plain = String::from_utf8(offload(&["list", lib.to_str().unwrap()]).stdout).unwrap();
    assert!(!plain.contains("URI") && !plain.contains("file://"), "{plain}");
    let with = String::from_utf8(offload(&["list", "--uri", lib.to_str().unwrap()]).stdout).unwrap();
    let lines: Vec<&str> = with.lines().collect();
    assert!(lines[0].ends_with("COMPRESSED  URI"), "{with}");
    assert!(lines[3].ends_with("libscale.so#offset=20480&size=4072"), "{with}");
    let sel =
        String::from_utf8(offload(&["select", "--uri", "--gpu", "gfx906", lib.to_str().unwrap()]).stdout).unwrap();
    assert!(
        sel.lines().next().unwrap().ends_with("WHY  URI")
            || sel.lines().next().unwrap().contains("WHY") && sel.lines().next().unwrap().ends_with("URI"),
        "{sel}"
    );
    assert!(sel.lines().nth(1).unwrap().ends_with("#offset=16384&size=3040"), "{sel}");
}

#[test]
fn paths_are_percent_encoded_both_ways() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a b%c#d");
    std::fs::create_dir(&dir).unwrap();
    let lib = dir.join("lib scale.so");
    std::fs::copy(inspect("libscale.so"), &lib).unwrap();
    let records = list_of(&lib);
    let uri = s(&records[2], "uri");
    assert!(uri.contains("/a%20b%25c%23d/lib%20scale.so#offset=20480&size=4072"), "{uri}");
    let dest = tmp.path().join("out.co");
    let out = offload(&["extract", "-o", dest.to_str().unwrap(), uri]);
    assert!(out.status.success(), "{}", text(&out));
    let data = std::fs::read(&lib).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), data[20480..20480 + 4072]);
    // Hexadecimal numbers and the `?` form, as ROCm's grammar allows.
    let other = uri.replace("#offset=20480&size=4072", "?offset=0x5000&size=0xfe8");
    let out = offload(&["extract", "-o", dest.to_str().unwrap(), &other]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&dest).unwrap(), data[20480..20480 + 4072]);
}

#[test]
fn a_compressed_bundle_gives_its_code_objects() {
    let tmp = tempfile::tempdir().unwrap();
    let two = inspect("libtwo.so");
    let records = list_of(&two);
    let uri = s(&records[4], "uri");
    let out = offload(&["extract", "--json", "--output-dir", tmp.path().to_str().unwrap(), uri]);
    assert!(out.status.success(), "{}", text(&out));
    let written = json(&out);
    let ids: Vec<&str> = written.iter().map(|w| s(w, "id")).collect();
    let want: Vec<&str> = records.iter().filter(|r| s(r, "uri") == uri).map(|r| s(r, "id")).collect();
    assert_eq!(ids, want);
    assert_eq!(ids.len(), 3);
    // One file only with -o: three code objects are too many, and nothing is written.
    let dest = tmp.path().join("one.co");
    let out = offload(&["extract", "-o", dest.to_str().unwrap(), uri]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("3 code objects"), "{}", text(&out));
    assert!(!dest.exists());
}

#[test]
fn bad_uris_fail_and_write_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let lib = inspect("libscale.so");
    let good = file_uri(lib.to_str().unwrap().as_bytes(), 20480, 4072);
    let len = std::fs::metadata(&lib).unwrap().len();
    let cases = [
        ("memory://1234#offset=0x20000&size=3000".to_string(), "running process"),
        (file_uri(lib.to_str().unwrap().as_bytes(), 20481, 40), "are not a code object (they start 454c46"),
        (file_uri(lib.to_str().unwrap().as_bytes(), len - 4, 5), "reach past the end"),
        (format!("file://{}/missing.so", tmp.path().display()), "No such file"),
        (format!("{good}&size=1"), "unexpected 'size=1'"),
        ("file:///x%2".to_string(), "bad percent escape"),
    ];
    for (bad, want) in cases {
        let out = offload(&["extract", "--output-dir", tmp.path().to_str().unwrap(), &good, &bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert!(text(&out).contains(want), "{bad}: {}", text(&out));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0, "{bad}: something was written");
    }
    // Usage errors (exit 2): URIs with filters or files, a FILE without filters.
    for args in [
        vec!["extract", "--all", good.as_str()],
        vec!["extract", good.as_str(), lib.to_str().unwrap()],
        vec!["extract", lib.to_str().unwrap()],
    ] {
        let out = offload(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
}
