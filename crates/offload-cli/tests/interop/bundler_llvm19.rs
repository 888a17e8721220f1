//! Differential tests against LLVM 19's clang-offload-bundler: the same
//! command lines run through both tools must give the same exit code, the
//! same messages, the same output bytes and the same listings.

use crate::common;

use common::diff::{Rng, assert_same_bytes, assert_same_run, both};
use std::fs;
use std::path::Path;

const OURS: &str = env!("CARGO_BIN_EXE_clang-offload-bundler");

const HOSTS: &[&str] = &[
    "host-x86_64-unknown-linux-gnu",
    "host-x86_64-pc-linux-gnu",
    "host-aarch64-unknown-linux-gnu",
    "host-powerpc64le-unknown-linux-gnu",
    "host-x86_64-unknown-linux-gnu-",
];
const GPUS: &[&str] = &["gfx803", "gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100"];
const FEATURES: &[&str] = &["", ":xnack+", ":xnack-", ":sramecc+", ":sramecc-", ":sramecc+:xnack-", ":xnack+:sramecc+"];

fn device_target(rng: &mut Rng) -> String {
    match rng.below(10) {
        0 => "openmp-x86_64-pc-linux-gnu".into(),
        1 => format!("openmp-nvptx64-nvidia-cuda{}", rng.pick(&["", "--sm_70", "--sm_80", "-sm_90"])),
        2 => format!("hip-amdgcn-amd-amdhsa-{}", rng.pick(GPUS)),
        _ => {
            let kind = rng.pick(&["hip", "hip", "hipv4", "openmp"]);
            format!("{kind}-amdgcn-amd-amdhsa--{}{}", rng.pick(GPUS), rng.pick(FEATURES))
        }
    }
}

fn payload(rng: &mut Rng, text: bool) -> Vec<u8> {
    let len = if rng.chance(10) { 0 } else { rng.below(300) };
    (0..len).map(|_| if text { *rng.pick(b"abcdefghij {}();\n\n#//\t") } else { rng.next() as u8 }).collect()
}

#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn random_bundles_lists_and_unbundles_match_llvm19() {
    let llvm = common::llvm_tool(19, "clang-offload-bundler");
    let types = ["i", "ii", "cui", "hipi", "d", "ll", "s", "bc", "gch", "ast", "o"];
    let aligns = [1u32, 1, 2, 3, 7, 8, 16, 64, 4096];
    let mut rng = Rng(0x5eed_0001);
    let (mut bundled, mut rejected, mut unbundled, mut same_target_refused) = (0, 0, 0, 0);
    for case in 0..250 {
        let ty = *rng.pick(&types);
        let text = !matches!(ty, "bc" | "gch" | "ast" | "o");
        let mut targets: Vec<String> = Vec::new();
        if rng.chance(80) {
            targets.push(rng.pick(HOSTS).to_string());
        }
        for _ in 0..1 + rng.below(5) {
            let t = device_target(&mut rng);
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
        let n = targets.len();
        targets.swap(0, rng.below(n));
        let payloads: Vec<Vec<u8>> = (0..n).map(|_| payload(&mut rng, text)).collect();
        let align = if rng.chance(20) { 1 + rng.below(4096) as u32 } else { *rng.pick(&aligns) };
        let mut args = vec![format!("-type={ty}"), format!("-targets={}", targets.join(","))];
        args.extend((0..n).map(|i| format!("-input=in{i}")));
        args.push("-output=bundle".into());
        if align != 1 || rng.chance(10) {
            args.push(format!("--bundle-align={align}"));
        }
        let setup = |d: &Path| {
            for (i, p) in payloads.iter().enumerate() {
                fs::write(d.join(format!("in{i}")), p).unwrap();
            }
        };
        let what = format!("case {case}: {}", args.join(" "));
        let (l, o, ldir, odir, _tmp) = both(&llvm, Path::new(OURS), &args, &setup);
        let standardized: Vec<String> = targets.iter().map(|t| offload_format::target_id::standardize(t)).collect();
        if l.code == Some(0) && (1..n).any(|i| standardized[..i].contains(&standardized[i])) {
            // Two spellings of one target: LLVM 19 writes a corrupt bundle, we refuse.
            assert!(o.code == Some(1) && o.stderr.contains("both stand for"), "{what}: {}", o.stderr);
            same_target_refused += 1;
            continue;
        }
        assert_same_run(&what, &l, &o);
        if l.code != Some(0) {
            rejected += 1;
            continue;
        }
        bundled += 1;
        let bytes = fs::read(ldir.join("bundle")).unwrap();
        assert_same_bytes(&what, &bytes, &fs::read(odir.join("bundle")).unwrap());

        let list_args = vec![format!("-type={ty}"), "-list".into(), "-input=bundle".into()];
        let copy = |d: &Path| fs::write(d.join("bundle"), &bytes).unwrap();
        let (l, o, _, _, _tmp) = both(&llvm, Path::new(OURS), &list_args, &copy);
        assert_same_run(&format!("{what} / list"), &l, &o);

        // Unbundle a random request: some stored targets (maybe respelled),
        // maybe others that are missing.
        for _ in 0..2 {
            let mut want: Vec<String> = Vec::new();
            for t in &targets {
                if rng.chance(60) {
                    let t = if rng.chance(20) { t.replacen("--", "-", 1) } else { t.clone() };
                    if !want.contains(&t) {
                        want.push(t);
                    }
                }
            }
            if want.is_empty() || rng.chance(30) {
                let t = device_target(&mut rng);
                if !want.contains(&t) {
                    want.push(t);
                }
            }
            let mut args = vec![
                format!("-type={ty}"),
                "-unbundle".into(),
                "-input=bundle".into(),
                format!("-targets={}", want.join(",")),
            ];
            args.extend((0..want.len()).map(|i| format!("-output=out{i}")));
            if rng.chance(50) {
                args.push("-allow-missing-bundles".into());
            }
            if rng.chance(15) {
                args.push("-hip-openmp-compatible".into());
            }
            let what = format!("{what} / {}", args.join(" "));
            let (l, o, ldir, odir, _tmp) = both(&llvm, Path::new(OURS), &args, &copy);
            let std_want: Vec<String> = want.iter().map(|t| offload_format::target_id::standardize(t)).collect();
            if l.code == Some(0) && (1..want.len()).any(|i| std_want[..i].contains(&std_want[i])) {
                assert!(o.code == Some(1) && o.stderr.contains("both stand for"), "{what}: {}", o.stderr);
                same_target_refused += 1;
                continue;
            }
            assert_same_run(&what, &l, &o);
            if l.code == Some(0) {
                unbundled += 1;
                for i in 0..want.len() {
                    let name = format!("out{i}");
                    let (lf, of) = (fs::read(ldir.join(&name)).ok(), fs::read(odir.join(&name)).ok());
                    assert_eq!(lf.is_some(), of.is_some(), "{what}: output {name} exists in one run only");
                    assert_same_bytes(&format!("{what}: {name}"), &lf.unwrap_or_default(), &of.unwrap_or_default());
                }
            }
        }
    }
    eprintln!(
        "compared {bundled} bundles, {rejected} rejected target sets, {unbundled} successful unbundles; \
         {same_target_refused} runs with two spellings of one target refused (LLVM writes a corrupt bundle)"
    );
    assert!(bundled > 100 && unbundled > 100, "too few successful cases to mean anything");
}

/// Command lines LLVM 19 rejects (docs/formats/bundle.md §10) are rejected by us with
/// the same message and exit code.
#[test]
#[cfg_attr(not(has_llvm19), ignore = "needs LLVM 19: run scripts/install-reference-llvm.sh")]
fn bad_invocations_match_llvm19() {
    let llvm = common::llvm_tool(19, "clang-offload-bundler");
    let h = "host-x86_64-unknown-linux-gnu";
    let g = "hip-amdgcn-amd-amdhsa--gfx906";
    let cases: Vec<Vec<String>> = [
        vec![],
        vec!["-type=bc".to_string()],
        vec!["-type=bc".into(), format!("-targets={h}"), "-input=a".into()],
        vec!["-type=bc".into(), "-output=o".into(), "-input=a".into()],
        vec!["-type=bc".into(), format!("-targets={h},{g}"), "-input=a".into(), "-output=o".into()],
        vec!["-type=bc".into(), format!("-targets={h},{h}"), "-input=a".into(), "-input=a".into(), "-output=o".into()],
        vec!["-type=zz".into(), format!("-targets={h}"), "-input=a".into(), "-output=o".into()],
        vec!["-type=zz".into(), format!("-targets={h}"), "-input=nonexist".into(), "-output=o".into()],
        vec!["-type=bc".into(), format!("-targets={g}"), "-input=nonexist.bin".into(), "-output=o".into()],
        vec![
            "-type=bc".into(),
            "-targets=openmp-amdgcn-amd-amdhsa--gfx906,hip-amdgcn-amd-amdhsa--gfx908".into(),
            "-input=a".into(),
            "-input=a".into(),
            "-output=o".into(),
        ],
        vec![
            "-type=bc".into(),
            format!("-targets={h},host-x86_64-pc-linux-gnu"),
            "-input=a".into(),
            "-input=a".into(),
            "-output=o".into(),
        ],
        vec!["-type=bc".into(), "-targets=foo-bar".into(), "-input=a".into(), "-output=o".into()],
        vec!["-type=bc".into(), "-targets=".into(), "-input=a".into(), "-output=o".into()],
        vec!["-type=bc".into(), "-targets=host".into(), "-input=a".into(), "-output=o".into()],
        vec![
            "-type=bc".into(),
            format!("-targets={h},cuda-nvptx64-nvidia-cuda"),
            "-input=a".into(),
            "-input=a".into(),
            "-output=o".into(),
        ],
        vec![
            "-type=bc".into(),
            "-targets=hip-amdgcn-amd-amdhsa--gfx90a,hip-amdgcn-amd-amdhsa--gfx90a:xnack+".into(),
            "-input=a".into(),
            "-input=a".into(),
            "-output=o".into(),
        ],
        vec!["-type=bc".into(), "-inputs=a".into(), "-input=a".into()],
        vec!["-type=bc".into(), "-outputs=a".into(), "-output=a".into()],
        vec!["-type=bc".into(), "-inputs=a,a".into(), "-outputs=o".into(), format!("-targets={h},{g}")],
        vec!["-type=bc".into(), "-list".into(), "-unbundle".into()],
        vec!["-type=bc".into(), "-list".into(), "-input=a".into(), "-input=a".into()],
        vec!["-type=bc".into(), "-list".into(), "-input=a".into(), "-output=o".into()],
        vec!["-type=bc".into(), "-list".into(), "-input=a".into(), format!("-targets={h}")],
        vec!["-type=zz".into(), "-list".into(), "-input=a".into()],
        vec!["-type=bc".into(), "-list".into(), "-input=nonexist".into()],
        vec!["-type=bc".into(), "-unbundle".into(), format!("-targets={h},{g}"), "-input=a".into(), "-output=o".into()],
        vec![
            "-type=bc".into(),
            "-unbundle".into(),
            format!("-targets={h}"),
            "-input=a".into(),
            "-input=a".into(),
            "-output=o".into(),
        ],
        vec!["-type=a".into(), format!("-targets={h}"), "-input=a".into(), "-output=o".into()],
        vec![
            "-type=bc".into(),
            "-check-input-archive".into(),
            format!("-targets={h}"),
            "-input=a".into(),
            "-output=o".into(),
        ],
        vec![
            "-type=bc".into(),
            "-unbundle".into(),
            "-check-input-archive".into(),
            format!("-targets={h}"),
            "-input=a".into(),
            "-output=o".into(),
        ],
        vec![
            "-type=bc".into(),
            "-unbundle".into(),
            format!("-targets={h},{g}"),
            "-input=a".into(),
            "-output=o1".into(),
            "-output=o2".into(),
        ],
        vec![
            "-type=bc".into(),
            "-unbundle".into(),
            format!("-targets={g}"),
            "-input=a".into(),
            "-output=/nonexistent-dir/o".into(),
            "-allow-missing-bundles".into(),
        ],
        vec!["-type=bc".into(), format!("-targets={h}"), "-input=a".into(), "-output=/nonexistent-dir/o".into()],
        vec!["-type=bc".into(), "-bundle-align=-1".into()],
        vec!["-type=bc".into(), "-compression-level=abc".into()],
        vec!["-type=bc".into(), "-list=maybe".into(), "-input=a".into()],
        vec!["-type=bc".into(), "-input".into()],
        vec!["foo".into(), "-type=bc".into()],
    ]
    .into();
    for args in &cases {
        let setup = |d: &Path| fs::write(d.join("a"), b"plain input\n").unwrap();
        let (l, o, ldir, odir, _tmp) = both(&llvm, Path::new(OURS), args, &setup);
        let strip = |s: &str| s.lines().filter(|l| !l.contains("Did you mean")).collect::<Vec<_>>().join("\n");
        let what = args.join(" ");
        assert_eq!(l.code, o.code, "{what}: exit codes differ; LLVM: {:?}; ours: {:?}", l.stderr, o.stderr);
        assert_eq!(strip(&l.stderr), strip(&o.stderr), "{what}: messages differ");
        if l.code == Some(0) {
            for name in ["o", "o1", "o2"] {
                assert_eq!(fs::read(ldir.join(name)).ok(), fs::read(odir.join(name)).ok(), "{what}: {name}");
            }
        } else {
            // A failed run of ours creates nothing.
            let created: Vec<_> = fs::read_dir(&odir).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(created, ["a"], "{what}: a failed run left files behind");
        }
    }
}
