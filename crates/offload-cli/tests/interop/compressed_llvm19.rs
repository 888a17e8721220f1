//! Compressed bundles against LLVM 19: the same bytes when compressing with
//! LLVM's settings, cross-unbundling in both directions, every header
//! version and method, and damaged bundles refused without output.

use crate::common;

use common::diff::{Rng, assert_same_bytes, assert_same_run, both, both_env, run_tool, run_tool_env};
use offload_format::bundle::compressed::{self, CompressOptions, Method};
use std::fs;
use std::path::Path;

const OURS: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");
const HOST: &str = "host-x86_64-unknown-linux-gnu";
const DEV: &str = "hip-amdgcn-amd-amdhsa--gfx906";
const DEV2: &str = "hip-amdgcn-amd-amdhsa--gfx90a:xnack+";

/// Partly compressible data, like code objects: runs, repeats and noise.
fn payload(rng: &mut Rng, len: usize, text: bool) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        match rng.below(3) {
            0 => v.extend(std::iter::repeat_n(b'a' + rng.below(20) as u8, rng.below(64))),
            1 if v.len() > 64 => {
                let start = rng.below(v.len() - 32);
                let chunk: Vec<u8> = v[start..start + 32].to_vec();
                v.extend(chunk);
            }
            _ => v.extend((0..16).map(|_| if text { b'a' + rng.below(26) as u8 } else { rng.next() as u8 })),
        }
    }
    v.truncate(len);
    v
}

fn write_inputs(dir: &Path, inputs: &[Vec<u8>]) {
    for (i, p) in inputs.iter().enumerate() {
        fs::write(dir.join(format!("in{i}")), p).unwrap();
    }
}

fn bundle_args(ty: &str, extra: &[&str]) -> Vec<String> {
    let mut a = vec![format!("-type={ty}"), format!("-targets={HOST},{DEV},{DEV2}")];
    a.extend((0..3).map(|i| format!("-input=in{i}")));
    a.push("-output=out".into());
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn unbundle_args(ty: &str, input: &str) -> Vec<String> {
    let mut a = vec![format!("-type={ty}"), "-unbundle".into(), format!("-input={input}")];
    a.push(format!("-targets={DEV2},{HOST},{DEV}"));
    a.extend(["-output=u0", "-output=u1", "-output=u2"].map(String::from));
    a
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn compression_levels_and_switches_match_llvm19_byte_for_byte() {
    let llvm = common::llvm_tool(19, "clang-offload-bundler");
    let ours = Path::new(OURS);
    let mut rng = Rng(0xcc0b);
    let mut compared = 0;
    for level in 1..=19 {
        for ty in ["bc", "ll", "s", "hipi"] {
            let text = ty != "bc";
            let inputs: Vec<Vec<u8>> = (0..3)
                .map(|_| {
                    let len = 200 + rng.below(20_000);
                    payload(&mut rng, len, text)
                })
                .collect();
            let setup = |d: &Path| write_inputs(d, &inputs);
            // Flag form on odd levels, environment form on even ones.
            let (args, env): (Vec<String>, Vec<(&str, String)>) = if level % 2 == 1 {
                (bundle_args(ty, &["-compress", &format!("-compression-level={level}")]), vec![])
            } else {
                (
                    bundle_args(ty, &[]),
                    vec![
                        ("OFFLOAD_BUNDLER_COMPRESS", "1".into()),
                        ("OFFLOAD_BUNDLER_COMPRESSION_LEVEL", level.to_string()),
                    ],
                )
            };
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            let what = format!("level {level} type {ty} env {env:?}");
            let (l, o, ldir, odir, _tmp) = both_env(&llvm, ours, &args, &env, &setup);
            assert_same_run(&what, &l, &o);
            let bytes = fs::read(ldir.join("out")).unwrap();
            assert!(compressed::is_compressed(&bytes), "{what}: LLVM did not compress");
            assert_same_bytes(&what, &bytes, &fs::read(odir.join("out")).unwrap());
            compared += 1;
        }
    }
    // Switches: IGNORE_ENV_VAR disables the environment; a flag beats it.
    let inputs: Vec<Vec<u8>> = (0..3).map(|_| payload(&mut rng, 3000, false)).collect();
    let setup = |d: &Path| write_inputs(d, &inputs);
    for (extra, env) in [
        (vec![], vec![("OFFLOAD_BUNDLER_COMPRESS", "1"), ("OFFLOAD_BUNDLER_IGNORE_ENV_VAR", "1")]),
        (vec!["-compress=0"], vec![("OFFLOAD_BUNDLER_COMPRESS", "1")]),
        (vec!["-compress"], vec![("OFFLOAD_BUNDLER_COMPRESSION_LEVEL", "x7")]),
        (vec!["-compress"], vec![("OFFLOAD_BUNDLER_COMPRESS", "0")]),
        (vec![], vec![("OFFLOAD_BUNDLER_COMPRESS", "yes")]),
        (vec!["-compress", "-compression-level=22"], vec![]),
    ] {
        let what = format!("{extra:?} {env:?}");
        let (l, o, ldir, odir, _tmp) = both_env(&llvm, ours, &bundle_args("bc", &extra), &env, &setup);
        assert_same_run(&what, &l, &o);
        assert_same_bytes(&what, &fs::read(ldir.join("out")).unwrap(), &fs::read(odir.join("out")).unwrap());
        compared += 1;
    }
    eprintln!("{compared} compressed bundles byte-identical with LLVM 19");
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn each_tool_unbundles_the_others_compressed_bundles() {
    let llvm = common::llvm_tool(19, "clang-offload-bundler");
    let ours = Path::new(OURS);
    let mut rng = Rng(0xdec0);
    let mut checked = 0;
    for ty in ["i", "ii", "cui", "hipi", "d", "ll", "s", "bc", "gch", "ast"] {
        let inputs: Vec<Vec<u8>> = (0..3).map(|i| payload(&mut rng, i * 5000, ty.len() < 3 && ty != "bc")).collect();
        for (maker, method) in [(&llvm as &Path, "zstd"), (ours, "zstd"), (ours, "zlib")] {
            let dir = tempfile::tempdir().unwrap();
            write_inputs(dir.path(), &inputs);
            let mut extra = vec!["-compress".to_string()];
            if maker == ours {
                extra.push(format!("--compression-method={method}"));
            }
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            let made = run_tool(maker, &bundle_args(ty, &extra), dir.path());
            assert_eq!(made.code, Some(0), "{ty} {method}: {}", made.stderr);
            let bytes = fs::read(dir.path().join("out")).unwrap();
            let setup = |d: &Path| fs::write(d.join("c"), &bytes).unwrap();
            let what = format!("type {ty}, made by {} with {method}", maker.display());
            let (l, o, ldir, odir, _tmp) = both(&llvm, ours, &unbundle_args(ty, "c"), &setup);
            assert_same_run(&what, &l, &o);
            for (i, want) in [2usize, 0, 1].into_iter().enumerate() {
                let name = format!("u{i}");
                assert_eq!(fs::read(odir.join(&name)).unwrap(), inputs[want], "{what}: ours {name}");
                assert_eq!(fs::read(ldir.join(&name)).unwrap(), inputs[want], "{what}: LLVM {name}");
            }
            let list = vec![format!("-type={ty}"), "-list".into(), "-input=c".into()];
            let (l, o, _, _, _tmp) = both(&llvm, ours, &list, &setup);
            assert_same_run(&format!("{what} list"), &l, &o);
            checked += 1;
        }
    }
    eprintln!("{checked} compressed bundles unbundled identically by both tools");
}

/// Hand-made version 1 headers (zstd and zlib) and version 2 zlib: LLVM 19
/// reads them, so must we. Version 3: only we read it (LLVM 19 fails).
#[test]
fn every_header_version_is_read() {
    let llvm = common::llvm_tool_if_found(19, "clang-offload-bundler");
    let ours = Path::new(OURS);
    let bundle = {
        let dir = tempfile::tempdir().unwrap();
        write_inputs(dir.path(), &[b"HOSTDATA".to_vec(), b"DEV1".to_vec(), b"DEVICE22".to_vec()]);
        assert_eq!(run_tool(ours, &bundle_args("bc", &[]), dir.path()).code, Some(0));
        fs::read(dir.path().join("out")).unwrap()
    };
    for (version, method) in
        [(1u16, Method::Zstd), (1, Method::Zlib), (2, Method::Zlib), (2, Method::Zstd), (3, Method::Zstd)]
    {
        let data = compressed::compress_data(&bundle, &CompressOptions { method, ..Default::default() }).unwrap();
        let mut blob = if version == 1 {
            let mut h = b"CCOB".to_vec();
            h.extend_from_slice(&1u16.to_le_bytes());
            h.extend_from_slice(&method.code().to_le_bytes());
            h.extend_from_slice(&(bundle.len() as u32).to_le_bytes());
            h.extend_from_slice(&compressed::truncated_md5(&bundle).to_le_bytes());
            h
        } else {
            compressed::header_bytes(method, version, &bundle, data.len())
        };
        blob.extend_from_slice(&data);
        let setup = |d: &Path| fs::write(d.join("c"), &blob).unwrap();
        let what = format!("v{version} {method:?}");
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path());
        let o = run_tool(ours, &unbundle_args("bc", "c"), dir.path());
        assert_eq!(o.code, Some(0), "{what}: {}", o.stderr);
        assert_eq!(fs::read(dir.path().join("u0")).unwrap(), b"DEVICE22", "{what}");
        assert_eq!(fs::read(dir.path().join("u1")).unwrap(), b"HOSTDATA", "{what}");
        if let (Some(llvm), true) = (&llvm, version < 3) {
            let (l, o, ldir, odir, _tmp) = both(llvm, ours, &unbundle_args("bc", "c"), &setup);
            assert_same_run(&what, &l, &o);
            for n in ["u0", "u1", "u2"] {
                assert_eq!(fs::read(ldir.join(n)).unwrap(), fs::read(odir.join(n)).unwrap(), "{what} {n}");
            }
        }
    }
}

/// `COMPRESSED_BUNDLE_FORMAT_VERSION=3` writes version 3 (as newer LLVM
/// does); our reader takes it back.
#[test]
fn version_3_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = vec![b"H".repeat(100), b"D".repeat(1000), b"E".repeat(10)];
    write_inputs(dir.path(), &inputs);
    let r = run_tool_env(
        Path::new(OURS),
        &bundle_args("bc", &["-compress"]),
        &[("COMPRESSED_BUNDLE_FORMAT_VERSION", "3")],
        dir.path(),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let bytes = fs::read(dir.path().join("out")).unwrap();
    assert_eq!(&bytes[..6], b"CCOB\x03\x00");
    assert_eq!(u64::from_le_bytes(bytes[8..16].try_into().unwrap()), bytes.len() as u64);
    let r = run_tool(Path::new(OURS), &unbundle_args("bc", "out"), dir.path());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(fs::read(dir.path().join("u1")).unwrap(), inputs[0]);
}

/// Truncated, bit-flipped and size-lying compressed bundles are refused with
/// a message, and no output is created or changed.
#[test]
fn damaged_compressed_bundles_are_refused_without_output() {
    let ours = Path::new(OURS);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(7);
    write_inputs(dir.path(), &(0..3).map(|_| payload(&mut rng, 4000, false)).collect::<Vec<_>>());
    assert_eq!(run_tool(ours, &bundle_args("bc", &["-compress"]), dir.path()).code, Some(0));
    let good = fs::read(dir.path().join("out")).unwrap();
    let mut damaged: Vec<(String, Vec<u8>)> = Vec::new();
    for cut in [20, 23, 24, 30, good.len() / 2, good.len() - 1] {
        damaged.push((format!("cut at {cut}"), good[..cut].to_vec()));
    }
    for at in [8, 12, 16, 20, 24, 40, good.len() / 2, good.len() - 2] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        damaged.push((format!("bit flip at {at}"), b));
    }
    for size in [0u32, 100, u32::MAX] {
        let mut b = good.clone();
        b[12..16].copy_from_slice(&size.to_le_bytes());
        damaged.push((format!("uncompressed size {size}"), b));
    }
    let mut b = good.clone();
    b.extend_from_slice(b"garbage");
    damaged.push(("trailing garbage".into(), b));
    for (what, bytes) in damaged {
        fs::write(dir.path().join("c"), &bytes).unwrap();
        for name in ["u0", "u1", "u2"] {
            fs::write(dir.path().join(name), b"previous").unwrap();
        }
        let r = run_tool(ours, &unbundle_args("bc", "c"), dir.path());
        assert_eq!(r.code, Some(1), "{what}: accepted; stderr {}", r.stderr);
        assert!(r.stderr.contains("error: "), "{what}: {}", r.stderr);
        for name in ["u0", "u1", "u2"] {
            assert_eq!(fs::read(dir.path().join(name)).unwrap(), b"previous", "{what}: {name} was touched");
        }
    }
}

/// `-verbose` prints LLVM's statistics lines (speeds and the timer table
/// aside, which depend on the machine).
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn verbose_statistics_match_llvm19() {
    let llvm = common::llvm_tool(19, "clang-offload-bundler");
    let ours = Path::new(OURS);
    let mut rng = Rng(99);
    let inputs: Vec<Vec<u8>> = (0..3).map(|_| payload(&mut rng, 30_000, false)).collect();
    let setup = |d: &Path| write_inputs(d, &inputs);
    let stable = |s: &str| {
        s.lines()
            .take_while(|l| !l.starts_with("===---"))
            .filter(|l| !l.contains("speed"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (l, o, ldir, _, _tmp) = both(&llvm, ours, &bundle_args("bc", &["-compress", "-verbose"]), &setup);
    assert_eq!(l.code, o.code);
    assert_eq!(stable(&l.stderr), stable(&o.stderr));
    assert!(o.stderr.contains("Timer group for clang offload bundler"));
    let bytes = fs::read(ldir.join("out")).unwrap();
    let setup = |d: &Path| fs::write(d.join("c"), &bytes).unwrap();
    let mut args = unbundle_args("bc", "c");
    args.push("-verbose".into());
    let (l, o, _, _, _tmp) = both(&llvm, ours, &args, &setup);
    assert_eq!(l.code, o.code);
    assert_eq!(stable(&l.stderr), stable(&o.stderr));
    assert!(o.stderr.contains("Hashes match: Yes"));
}

/// Long-distance matching only shows on inputs larger than zstd's normal
/// window: a 12 MiB bundle whose second half repeats the first.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn large_inputs_with_long_distance_matches_are_byte_identical() {
    let llvm = common::llvm_tool(19, "clang-offload-bundler");
    let mut rng = Rng(0x10ad);
    let half = payload(&mut rng, 6 << 20, false);
    let mut big = half.clone();
    big.extend_from_slice(&half);
    let inputs = vec![b"host".to_vec(), big, payload(&mut rng, 100_000, false)];
    let setup = |d: &Path| write_inputs(d, &inputs);
    for level in ["3", "9"] {
        let args = bundle_args("bc", &["-compress", &format!("-compression-level={level}")]);
        let (l, o, ldir, odir, _tmp) = both(&llvm, Path::new(OURS), &args, &setup);
        assert_same_run(level, &l, &o);
        let bytes = fs::read(ldir.join("out")).unwrap();
        assert!(bytes.len() < 8 << 20, "long-distance matching did not find the repeat");
        assert_same_bytes(level, &bytes, &fs::read(odir.join("out")).unwrap());
    }
}

/// Multithreaded zstd (opt-in) gives different bytes, which LLVM 19 and we
/// both unbundle to the original payloads.
#[test]
fn multithreaded_compression_round_trips() {
    let llvm = common::llvm_tool_if_found(19, "clang-offload-bundler");
    let mut rng = Rng(0x3333);
    let inputs = vec![payload(&mut rng, 1000, false), payload(&mut rng, 3 << 20, false), payload(&mut rng, 10, false)];
    let dir = tempfile::tempdir().unwrap();
    write_inputs(dir.path(), &inputs);
    let r = run_tool(Path::new(OURS), &bundle_args("bc", &["-compress", "--compression-threads=2"]), dir.path());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let mut tools = vec![Path::new(OURS).to_path_buf()];
    tools.extend(llvm);
    for tool in tools {
        let r = run_tool(&tool, &unbundle_args("bc", "out"), dir.path());
        assert_eq!(r.code, Some(0), "{}: {}", tool.display(), r.stderr);
        assert_eq!(fs::read(dir.path().join("u0")).unwrap(), inputs[2]);
        assert_eq!(fs::read(dir.path().join("u1")).unwrap(), inputs[0]);
        assert_eq!(fs::read(dir.path().join("u2")).unwrap(), inputs[1]);
    }
}

/// Archive members that are compressed bundles are decompressed (and their
/// hash checked) before their bundles are matched, as LLVM 19 does.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn compressed_archive_members_unbundle_like_llvm19() {
    let (llvm, ar) = (common::llvm_tool(19, "clang-offload-bundler"), common::llvm_tool(19, "llvm-ar"));
    let ours = Path::new(OURS);
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xa4c);
    for (i, compress) in [(1, true), (2, false), (3, true)] {
        let inputs: Vec<Vec<u8>> = (0..3).map(|_| payload(&mut rng, 2000, false)).collect();
        write_inputs(dir.path(), &inputs);
        let mut args = vec![
            "-type=bc".to_string(),
            format!("-targets={HOST},{DEV},{DEV2}"),
            "-input=in0".into(),
            "-input=in1".into(),
            "-input=in2".into(),
            format!("-output=m{i}.bc"),
        ];
        if compress {
            args.push("-compress".into());
        }
        assert_eq!(run_tool(&llvm, &args, dir.path()).code, Some(0));
    }
    let made = common::run(
        std::process::Command::new(&ar).args(["rcs", "lib.a", "m1.bc", "m2.bc", "m3.bc"]).current_dir(dir.path()),
    );
    assert!(made.status.success());
    let lib = fs::read(dir.path().join("lib.a")).unwrap();
    let setup = |d: &Path| fs::write(d.join("lib.a"), &lib).unwrap();
    let args: Vec<String> = [
        "-type=a",
        "-unbundle",
        "-input=lib.a",
        "-targets=hip-amdgcn-amd-amdhsa--gfx906:xnack+,hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "-output=a906.a",
        "-output=a90a.a",
    ]
    .map(String::from)
    .into();
    let (l, o, ldir, odir, _tmp) = both(&llvm, ours, &args, &setup);
    assert_same_run("archive of compressed members", &l, &o);
    for name in ["a906.a", "a90a.a"] {
        assert_same_bytes(name, &fs::read(ldir.join(name)).unwrap(), &fs::read(odir.join(name)).unwrap());
    }
}

/// A compressed input that holds no bundle is the host's (with
/// `-allow-missing-bundles`), and a compressed bundle shorter than its own
/// table is an error: the streamed path decides like the in-memory one.
#[test]
fn compressed_plain_data_and_short_tables() {
    let llvm = common::llvm_tool_if_found(19, "clang-offload-bundler");
    let ours = Path::new(OURS);
    let plain = b"just some host data, no bundle here\n".repeat(1000);
    let ccob = compressed::compress(&plain, &CompressOptions::default()).unwrap().bytes;
    let setup = |d: &Path| fs::write(d.join("c"), &ccob).unwrap();
    let mut args = unbundle_args("bc", "c");
    args.push("-allow-missing-bundles".into());
    if let Some(llvm) = &llvm {
        let (l, o, ldir, odir, _tmp) = both(llvm, ours, &args, &setup);
        assert_same_run("plain", &l, &o);
        for n in ["u0", "u1", "u2"] {
            assert_eq!(fs::read(ldir.join(n)).unwrap(), fs::read(odir.join(n)).unwrap(), "{n}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    assert_eq!(run_tool(ours, &args, dir.path()).code, Some(0));
    assert_eq!(fs::read(dir.path().join("u1")).unwrap(), plain);
    // A bundle whose table claims a second entry that the data does not hold.
    let entries: [(&[u8], &[u8]); 1] = [(DEV.as_bytes(), b"X")];
    let mut bundle = offload_format::bundle::binary::write(&entries, std::num::NonZeroU64::new(1).unwrap()).to_vec();
    bundle[24] = 2;
    let ccob = compressed::compress(&bundle, &CompressOptions::default()).unwrap().bytes;
    fs::write(dir.path().join("short"), &ccob).unwrap();
    let r = run_tool(ours, &unbundle_args("bc", "short"), dir.path());
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stderr.contains("malformed bundle"), "{}", r.stderr);
    let r = run_tool(ours, &["-type=bc".into(), "-list".into(), "-input=short".into()], dir.path());
    assert_eq!(r.code, Some(1), "{}", r.stderr);
}
