//! Fuzz harnesses for offload-format (and the CLI's option parser).
//!
//! Every target in `fuzz_targets/` is one line that calls a function of this
//! library, so a harness can be reused (and a new target added) without
//! touching the others. Each harness feeds the input to a reader and then
//! checks what the reader promises beyond "does not panic": every slice it
//! returns lies inside the input, sizes agree with the data, decompressed
//! data matches its declared size and hash, and writers' output reads back
//! as what was written, identically on a second run.
//!
//! Allocation is bounded by the input: libFuzzer's `-rss_limit_mb` and
//! `-malloc_limit_mb` (2 GiB by default) turn any allocation a small input
//! does not justify into a finding. The only exception is legitimately
//! decompressed data, which can be large for a small input (a zstd frame of
//! run-length blocks); the harnesses decompress only blobs that declare at
//! most [`MAX_DECLARED`] bytes, which is exactly the bound the reader
//! enforces (it stops at the declared size).

use arbitrary::Arbitrary;
use offload_format::bundle::compressed::{self, CompressOptions, Method};
use offload_format::bundle::{FileType, binary, text};
use offload_format::bundler::{self, Request, UnbundleOptions};
use offload_format::offload_binary::{self, Binaries, Image, ImageArgs, ImageKind, OffloadKind, RecordOrder};
use offload_format::plan::{Piece, Plan};
use offload_format::target_id::{self, BundleEntryId, TargetId};
use offload_format::triple::Triple;
use std::num::NonZeroU64;

/// The largest declared uncompressed size the harnesses decompress.
pub const MAX_DECLARED: u64 = 64 << 20;

/// Whether `inner` is a subslice of `outer` (by address).
pub fn within(outer: &[u8], inner: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    inner.is_empty() || (i >= o && i + inner.len() <= o + outer.len())
}

/// Every `-type` value the bundler accepts, with its file type.
pub const TYPES: [&str; 12] = ["i", "ii", "cui", "hipi", "d", "s", "ll", "bc", "gch", "ast", "o", "a"];

/// The three comment styles of text bundles.
pub const COMMENTS: [&str; 3] = ["//", "#", ";"];

fn plan_within(plan: &Plan, input: &[u8]) {
    for p in &plan.pieces {
        if let Piece::Bytes(b) = p {
            assert!(within(input, b), "an output piece is not part of the input");
        }
    }
}

// ---------------------------------------------------------------- readers

/// `bundle::binary::read` and `-list` on arbitrary bytes.
pub fn bundle_binary(data: &[u8]) {
    if let Ok(Some(entries)) = binary::read(data) {
        for e in &entries {
            assert!(within(data, e.id) && within(data, e.payload));
            let at = usize::try_from(e.offset).expect("offset fits");
            assert_eq!(&data[at..at + e.payload.len()], e.payload, "payload is not at its offset");
            assert_ne!(e.offset, 0);
        }
    }
    if let Ok(ids) = bundler::list(FileType::Binary, data) {
        for id in ids {
            assert!(within(data, id));
        }
    }
}

/// `bundle::text::TextReader` for every comment style, reading payloads
/// and skipping entries, and `-list`.
pub fn bundle_text(data: &[u8]) {
    for comment in COMMENTS {
        for read_payloads in [true, false] {
            let mut r = text::TextReader::new(data, comment);
            let mut steps = 0usize;
            while let Some(id) = r.next_id() {
                assert!(within(data, id) && !id.contains(&b'\n'));
                steps += 1;
                assert!(steps <= data.len(), "more entries than bytes");
                let result = if read_payloads { r.payload().map(Some) } else { r.skip_entry().map(|_| None) };
                match result {
                    Ok(Some(p)) => assert!(within(data, p)),
                    Ok(None) => {}
                    Err(e) => {
                        let _ = e.to_string();
                        break;
                    }
                }
            }
        }
        if let Ok(ids) = bundler::list(FileType::Text { comment }, data) {
            assert!(ids.iter().all(|id| within(data, id)));
        }
    }
}

/// CCOB headers, blob walking and decompression (size and hash checked).
pub fn bundle_compressed(data: &[u8]) {
    let _ = compressed::is_compressed(data);
    if let Ok(h) = compressed::parse_header(data) {
        assert!(h.header_len <= data.len());
    }
    let mut end = 0usize;
    for item in compressed::blobs(data) {
        let Ok((at, blob)) = item else { break };
        assert!(at >= end, "blobs overlap or go backwards");
        assert!(within(data, blob.data) && at + blob.len <= data.len());
        end = at + blob.len;
        if blob.header.uncompressed_size <= MAX_DECLARED {
            match compressed::decompress(&blob) {
                Ok(out) => {
                    assert_eq!(out.len() as u64, blob.header.uncompressed_size);
                    assert_eq!(compressed::truncated_md5(&out), blob.header.hash);
                }
                Err(e) => {
                    let _ = e.to_string();
                }
            }
        }
    }
    // The bundler's whole-input path (trailing data, hash check).
    let declared = compressed::parse_header(data).map(|h| h.uncompressed_size).unwrap_or(0);
    if declared <= MAX_DECLARED {
        match bundler::decompress_input(data).and_then(|d| d.into_verified()) {
            Ok(bytes) => {
                if compressed::is_compressed(data) {
                    assert_eq!(bytes.len() as u64, declared);
                } else {
                    assert_eq!(&bytes[..], data);
                }
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
}

/// Well-formed bundle entry IDs, no two of which are compatible with each
/// other unless they are equal (so the round trips are exact).
pub const KNOWN_TARGETS: [&str; 12] = [
    "host-x86_64-unknown-linux-gnu",
    "host-x86_64-unknown-linux-gnu-",
    "hip-amdgcn-amd-amdhsa--gfx906",
    "hip-amdgcn-amd-amdhsa--gfx908",
    "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
    "hipv4-amdgcn-amd-amdhsa--gfx1030",
    "hip-amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",
    "openmp-x86_64-pc-linux-gnu",
    "openmp-nvptx64-nvidia-cuda--sm_70",
    "openmp-amdgcn-amd-amdhsa--gfx1100",
    "hip-spirv64-amd-amdhsa--amdgcnspirv",
    "openmp-aarch64-unknown-linux-gnu",
];

/// IDs that overlap the known ones or are odd (three-field triples,
/// compatible kinds, features, nothing after the kind).
pub const ODD_TARGETS: [&str; 10] = [
    "hip-amdgcn-amd-amdhsa-gfx906",
    "hipv4-amdgcn-amd-amdhsa--gfx906",
    "hip-amdgcn-amd-amdhsa--gfx90a",
    "hip-amdgcn-amd-amdhsa--gfx90a:xnack-",
    "openmp-amdgcn-amd-amdhsa--gfx906",
    "host-",
    "hip--",
    "openmp-x86_64",
    "hip-amdgcn-amd-amdhsa--gfx906:sramecc+",
    "cuda-nvptx64-nvidia-cuda--sm_80",
];

/// The bundler's target for a selector byte.
pub fn target_for(b: u8) -> &'static str {
    let all = KNOWN_TARGETS.len() + ODD_TARGETS.len();
    let i = usize::from(b) % all;
    KNOWN_TARGETS.get(i).copied().unwrap_or_else(|| ODD_TARGETS[i - KNOWN_TARGETS.len()])
}

/// The bundler's `-list` and `-unbundle` as the CLI runs them, over
/// arbitrary input. Layout of the fuzz input: byte 0 picks the `-type`,
/// byte 1 the options (bit 0 `-allow-missing-bundles`, bit 1
/// `-hip-openmp-compatible`, bit 2 `-check-input-archive`), byte 2 the number of targets (mod 9), then one
/// selector byte per target ([`target_for`]); the rest is the input file.
/// Seeds are therefore real bundles behind a short prefix.
pub fn bundler_ops(data: &[u8]) {
    let [type_byte, flags, count, rest @ ..] = data else { return };
    let count = usize::from(*count % 9).min(rest.len());
    let (selectors, input) = rest.split_at(count);
    let type_name = TYPES[usize::from(*type_byte) % TYPES.len()];
    let file_type = bundler::file_type(type_name).expect("known type");
    let declared = compressed::parse_header(input).map(|h| h.uncompressed_size).unwrap_or(0);
    if declared > MAX_DECLARED {
        return;
    }
    let Ok(bytes) = bundler::decompress_input(input).and_then(|d| d.into_verified()) else { return };
    if let Ok(ids) = bundler::list(file_type, &bytes) {
        assert!(ids.iter().all(|id| within(&bytes, id)));
    }
    let targets: Vec<String> = selectors.iter().map(|&b| target_for(b).to_string()).collect();
    let request = Request {
        file_type: type_name.to_string(),
        output_count: targets.len(),
        targets,
        input_count: 1,
        unbundle: true,
        ..Request::default()
    };
    let Ok(Some(t)) = bundler::validate(&request) else { return };
    let options = UnbundleOptions { allow_missing_bundles: flags & 1 != 0, hip_openmp_compatible: flags & 2 != 0 };
    if file_type == FileType::Archive {
        // Archives are read uncompressed; outputs are new archives.
        // Thin archives: a member "file" is its own name, or unreadable.
        let thin = |name: &[u8]| if name.len() % 2 == 0 { Ok(name.to_vec()) } else { Err("unreadable".to_string()) };
        match bundler::unbundle_archive(&t, input, "fuzz.a", options, flags & 4 != 0, Some(&thin)) {
            Ok(plans) => assert_eq!(plans.len(), t.standardized.len()),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        return;
    }
    match bundler::unbundle(file_type, &t, &bytes, options) {
        Ok(plans) => {
            assert_eq!(plans.len(), t.standardized.len());
            if file_type != FileType::Object {
                for p in &plans {
                    plan_within(p, &bytes);
                }
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// OffloadBinary packages: every binary, every accessor.
pub fn offload_binary(data: &[u8]) {
    let mut last_end = 0u64;
    for item in Binaries::new(data) {
        match item {
            Ok(b) => {
                assert!(within(data, b.data()) && within(data, b.image()));
                assert!(b.offset() >= last_end || b.entry_index() > 0);
                last_end = b.offset() + b.data().len() as u64;
                for (k, v) in b.strings() {
                    assert!(within(b.data(), k) && within(b.data(), v));
                }
                let _ = (b.triple(), b.arch(), b.image_kind().name(), b.offload_kind().name(), b.flags());
                let _ = (b.header(), b.entry(), b.version());
            }
            Err(e) => {
                assert!(e.offset() <= data.len() as u64);
                let _ = (e.to_string(), e.detail());
            }
        }
    }
}

/// OffloadBinary versions 2 and 3, compressed bodies included. The first
/// byte picks how the rest is used: as is (0); as the inflated body of a
/// version 3 binary compressed here with zstd (1) or zlib (2), so that
/// the fuzzer reaches what lies behind the decompression; as the body of a
/// version 2 binary (3). The second byte is then the entry count. Every
/// buffer goes through [`offload_binary`] and `read::inflate_all`, whose
/// output stays within the input plus the inflation limit.
pub fn offload_binary_v3(data: &[u8]) {
    use offload_format::offload_binary::{MAGIC, read};
    const LIMIT: u64 = 1 << 24;
    let Some((&mode, rest)) = data.split_first() else { return };
    let (count, body) = rest.split_first().map_or((0, &[][..]), |(&c, b)| (u64::from(c % 8), b));
    let header = |version: u32, size: u64, inflated: Option<u64>| {
        let mut h = MAGIC.to_vec();
        h.extend(version.to_le_bytes());
        h.extend(size.to_le_bytes());
        h.extend(if inflated.is_some() { 40u64 } else { 32 }.to_le_bytes());
        h.extend(count.to_le_bytes());
        if let Some(i) = inflated {
            h.extend(i.to_le_bytes());
        }
        h
    };
    let input = match mode % 4 {
        1 | 2 => {
            // The crate's CCOB compressor gives plain zstd and zlib streams.
            let method = if mode % 4 == 1 { Method::Zstd } else { Method::Zlib };
            let opts = CompressOptions { method, level: 1, version: 3, threads: 0 };
            let packed = compressed::compress_data(body, &opts).expect("in memory");
            let mut d = header(3, 40 + packed.len() as u64, Some(40 + body.len() as u64));
            d.extend(packed);
            d.resize(d.len().next_multiple_of(8), 0);
            d
        }
        3 => {
            let mut d = header(2, (32 + body.len() as u64).next_multiple_of(8), None);
            d.extend(body);
            d.resize(d.len().next_multiple_of(8), 0);
            d
        }
        _ => rest.to_vec(),
    };
    offload_binary(&input);
    match read::inflate_all(&input, LIMIT) {
        Ok(buf) => {
            let chunks = input.len() as u64 / 40 + 1;
            assert!(buf.len() as u64 <= input.len() as u64 + LIMIT + 8 * chunks);
            offload_binary(&buf);
            for b in Binaries::new(&buf).flatten() {
                assert!(!b.header().is_compressed());
                let _ = (b.offload_kind().name(), b.is_metadata_only(), b.header().entry_count());
            }
        }
        Err(e) => {
            assert!(e.offset() <= input.len() as u64);
            let _ = (e.to_string(), e.detail());
        }
    }
}

/// The container scan (raw, ELF, COFF, bitcode, archives) and the
/// packages it finds.
pub fn container_scan(data: &[u8]) {
    let scan = offload_binary::container::scan(data, "fuzz-input");
    for p in &scan.packages {
        if matches!(p.data, std::borrow::Cow::Borrowed(_)) {
            assert!(within(data, &p.data));
        } else {
            // Decoded from bitcode, where an array element takes at least
            // one bit: never more than eight bytes per input byte.
            assert!(p.data.len() <= 8 * data.len());
        }
        offload_binary(&p.data);
    }
    if let Some(e) = scan.error {
        let _ = (e.to_string(), e.detail());
    }
    let _ = offload_binary::container::file_kind(data);
}

/// The packager's `--image=key=value,...` syntax and record orders.
pub fn image_args(spec: &str) {
    let args = ImageArgs::parse(spec);
    let pairs: Vec<(&str, &str)> = args.pairs().collect();
    let mut dense = args.dense_map_order();
    assert_eq!(dense.len(), pairs.len());
    let mut sorted = pairs.clone();
    sorted.sort_unstable();
    dense.sort_unstable();
    assert_eq!(dense, sorted, "dense-map order is not a permutation");
    for order in [RecordOrder::Llvm19, RecordOrder::Llvm16] {
        let mut records = args.string_records(order);
        records.sort_unstable();
        let mut expected: Vec<_> = sorted.iter().copied().filter(|(k, _)| *k != "file" && *k != "kind").collect();
        expected.sort_unstable();
        assert_eq!(records, expected);
    }
    let _ = (args.files(), args.offload_kind(), args.get("triple"), args.contains("file"));
}

const TRIPLES: [&str; 6] = [
    "amdgcn-amd-amdhsa",
    "nvptx64-nvidia-cuda",
    "r600-unknown-unknown",
    "x86_64-unknown-linux-gnu",
    "spirv64-amd-amdhsa",
    "",
];

/// Target IDs, bundle entry IDs, triples and the compatibility rules.
pub fn target_ids(text: &str) {
    let (a, b) = text.split_once('\n').unwrap_or((text, ""));
    let _ = target_id::parse_format(a).map_err(|e| e.to_string());
    for t in TRIPLES.iter().copied().chain([b]) {
        let triple = Triple::parse(t);
        if let Ok(id) = TargetId::parse(&triple, a) {
            let canonical = id.canonical();
            assert_eq!(TargetId::parse(&triple, &canonical).as_ref(), Ok(&id), "canonical form does not re-parse");
        }
    }
    let ea = BundleEntryId::parse(a);
    let eb = BundleEntryId::parse(b);
    let sa = ea.standardized();
    let _ = (ea.kind_and_triple(), ea.meaningful_target_id(), ea.is_kind_valid(), ea.is_triple_valid());
    for hip_openmp in [false, true] {
        let _ = target_id::is_compatible(&ea, &eb, &eb.standardized(), hip_openmp);
        // An ID always matches its own standardized request.
        assert!(target_id::is_compatible(&ea, &BundleEntryId::parse(&sa), &sa, hip_openmp));
    }
    let _ = target_id::find_conflicting_targets(&[ea, eb]);
    let t = Triple::parse(a);
    let _ = (t.arch(), t.vendor(), t.os(), t.environment(), t.object_format(), t.is_known_arch());
}

/// An option set like the bundler's, for the option parser.
const CL_OPTIONS: &[offload_cli::cl::OptSpec] = {
    use offload_cli::cl::{OptSpec, ValueKind};
    &[
        OptSpec::flag("allow-missing-bundles", "h"),
        OptSpec::value("bundle-align", "", "h").kind(ValueKind::Uint),
        OptSpec::value("compression-level", "n", "h").kind(ValueKind::Int),
        OptSpec::value("input", "string", "h").list(),
        OptSpec::value("inputs", "string", "h").comma(),
        OptSpec::flag("list", "h"),
        OptSpec::value("o", "file", "h"),
        OptSpec::value("targets", "string", "h").comma(),
        OptSpec::value("type", "string", "h").required(),
        OptSpec::flag("hidden", "h").hidden(),
    ]
};

const CL_SPEC: offload_cli::cl::ToolSpec = offload_cli::cl::ToolSpec {
    name: "fuzz-tool",
    overview: "fuzzing the option parser",
    category: "fuzz options",
    options: CL_OPTIONS,
    positional: Some(offload_cli::cl::PositionalSpec { value_name: "<files>", min: 0, max: Some(3) }),
    version: "fuzz 0",
    required_order: &["type"],
};

/// The LLVM-style option parser over arbitrary argument vectors. Response
/// files (`@path`) are left out: they read the file system.
pub fn cl_parse(args: Vec<String>) {
    let args: Vec<String> = args.into_iter().filter(|a| !a.starts_with('@')).take(64).collect();
    match CL_SPEC.parse("fuzz-tool", &args) {
        offload_cli::cl::Outcome::Run(p) => {
            let _ =
                (p.values("input"), p.value("o"), p.flag("list"), p.uint("bundle-align"), p.int("compression-level"));
            assert!(p.positionals.len() <= 3);
        }
        offload_cli::cl::Outcome::Print(t) | offload_cli::cl::Outcome::Fail(t) => assert!(!t.is_empty()),
    }
    let _ = offload_cli::cl::tokenize_gnu(&args.join(" "));
}

// ------------------------------------------------------------ round trips

/// Entries for the bundle writers.
#[derive(Arbitrary, Debug)]
pub struct BundleCase<'a> {
    pub entries: Vec<(&'a [u8], &'a [u8])>,
    pub align: u16,
    pub comment: u8,
    /// Bundler-level round trip: targets and the type to use.
    pub targets: Vec<u8>,
    pub file_type: u8,
}

/// Binary and text bundles: write → read gives the entries back, and
/// writing twice gives the same bytes. Then the bundler's own bundle →
/// list → unbundle over well-formed targets.
pub fn rt_bundle(case: BundleCase) {
    let entries: Vec<(&[u8], &[u8])> = case.entries.iter().take(32).copied().collect();
    let align = NonZeroU64::new(u64::from(case.align.max(1))).expect("nonzero");
    let bytes = binary::write(&entries, align).to_vec();
    assert_eq!(bytes, binary::write(&entries, align).to_vec(), "binary writer is not deterministic");
    let back = binary::read(&bytes).expect("own bundle reads").expect("has the magic");
    assert_eq!(back.len(), entries.len());
    for (e, (id, payload)) in back.iter().zip(&entries) {
        assert_eq!((e.id, e.payload), (*id, *payload));
        assert_eq!(e.offset % align.get(), 0);
    }

    let comment = COMMENTS[usize::from(case.comment) % COMMENTS.len()];
    let markers = text::Markers::new(comment);
    let end_marker = format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____END__ ");
    let readable = entries
        .iter()
        .all(|(id, p)| !id.contains(&b'\n') && !contains(p, end_marker.as_bytes()) && !contains(id, b"\r"));
    let bytes = text::write(&markers, &entries).to_vec();
    assert_eq!(bytes, text::write(&markers, &entries).to_vec(), "text writer is not deterministic");
    if readable {
        let mut r = text::TextReader::new(&bytes, comment);
        for (id, payload) in &entries {
            assert_eq!(r.next_id(), Some(*id));
            assert_eq!(r.payload().expect("own text bundle reads"), *payload);
        }
        assert_eq!(r.next_id(), None);
    }

    // The bundler: distinct well-formed targets, one payload each.
    let mut targets: Vec<&str> = Vec::new();
    for &t in case.targets.iter().take(KNOWN_TARGETS.len()) {
        let t = KNOWN_TARGETS[usize::from(t) % KNOWN_TARGETS.len()];
        // Two spellings of the host are one target after standardizing.
        if !targets.iter().any(|x| bundler_key(x) == bundler_key(t)) {
            targets.push(t);
        }
    }
    if targets.is_empty() || entries.len() < targets.len() {
        return;
    }
    let type_name = ["bc", "i", "s", "ll", "o"][usize::from(case.file_type) % 5];
    let file_type = bundler::file_type(type_name).expect("known type");
    let req = |unbundle: bool| Request {
        file_type: type_name.into(),
        targets: targets.iter().map(|s| s.to_string()).collect(),
        input_count: if unbundle { 1 } else { targets.len() },
        output_count: if unbundle { targets.len() } else { 1 },
        unbundle,
        ..Request::default()
    };
    let Ok(Some(bt)) = bundler::validate(&req(false)) else { return };
    let inputs: Vec<&[u8]> = entries.iter().take(targets.len()).map(|(_, p)| *p).collect();
    // A host input that is an object makes a fat object, whose host entry
    // is that object without bundle sections: not a byte round trip.
    if file_type == FileType::Object
        && inputs.iter().any(|p| offload_format::bundle::object::detect(p).map_or(true, |f| f.is_some()))
    {
        return;
    }
    if let FileType::Text { comment } = file_type {
        let end = format!("\n{comment} __CLANG_OFFLOAD_BUNDLE____END__ ");
        if inputs.iter().any(|p| contains(p, end.as_bytes())) {
            return;
        }
    }
    let bundled = bundler::bundle(file_type, &bt, &inputs, u32::from(case.align.max(1))).expect("bundles").to_vec();
    let listed = bundler::list(file_type, &bundled).expect("own bundle lists");
    assert_eq!(listed.len(), targets.len());
    let ut = bundler::validate(&req(true)).expect("valid").expect("not -list");
    let outs = bundler::unbundle(file_type, &ut, &bundled, UnbundleOptions::default()).expect("own bundle unbundles");
    for (out, input) in outs.iter().zip(&inputs) {
        assert_eq!(&out.to_vec(), input, "unbundled payload differs");
    }
}

fn bundler_key(t: &str) -> String {
    target_id::standardize(t)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[derive(Arbitrary, Debug)]
pub struct CompressCase<'a> {
    pub zlib: bool,
    pub level: u8,
    pub v3: bool,
    pub data: &'a [u8],
    pub second: &'a [u8],
}

/// CCOB: compress → read → decompress gives the data back, with the
/// declared size and hash; compressing twice gives the same bytes; two
/// blobs back to back are walked by size.
pub fn rt_compressed(case: CompressCase) {
    let method = if case.zlib { Method::Zlib } else { Method::Zstd };
    let level = if case.zlib { i32::from(case.level % 10) } else { i32::from(case.level % 9) + 1 };
    let opts = CompressOptions { method, level, version: if case.v3 { 3 } else { 2 }, threads: 0 };
    let a = compressed::compress(case.data, &opts).expect("compresses");
    assert_eq!(a, compressed::compress(case.data, &opts).expect("compresses"), "not deterministic");
    let blob = compressed::read_blob(&a.bytes).expect("own blob reads");
    assert_eq!(blob.len, a.bytes.len());
    assert_eq!(compressed::decompress(&blob).expect("own blob decompresses"), case.data);
    let b = compressed::compress(case.second, &opts).expect("compresses");
    let mut both = a.bytes.clone();
    both.extend_from_slice(&[0; 3]);
    both.extend_from_slice(&b.bytes);
    let found: Vec<_> = compressed::blobs(&both).collect::<Result<_, _>>().expect("both blobs read");
    assert_eq!(found.len(), 2);
    assert_eq!(compressed::decompress(&found[1].1).expect("second decompresses"), case.second);
    // The bundler accepts one blob, with zero padding after it.
    let mut padded = a.bytes.clone();
    padded.extend_from_slice(&[0; 5]);
    let d = bundler::decompress_input(&padded).and_then(|d| d.into_verified());
    assert_eq!(d.expect("padded blob reads").as_ref(), case.data);
}

#[derive(Arbitrary, Debug)]
pub struct PackageImage<'a> {
    pub image_kind: u16,
    pub offload_kind: u16,
    pub flags: u32,
    pub strings: Vec<(&'a [u8], &'a [u8])>,
    pub image: &'a [u8],
}

/// OffloadBinary: write → read gives every image, kind, flag and record
/// back, in order; the writer is deterministic.
pub fn rt_offload_binary(images: Vec<PackageImage>) {
    let images: Vec<Image> = images
        .iter()
        .take(16)
        .map(|i| Image {
            image_kind: ImageKind::from_u16(i.image_kind),
            offload_kind: OffloadKind::from_u16(i.offload_kind),
            flags: i.flags,
            strings: i.strings.iter().take(16).copied().collect(),
            image: i.image,
        })
        .collect();
    // Version 2 and 3 hold values with NULs, which version 1 refuses.
    rt_offload_binary_v2_v3(&images);
    let plan = match offload_binary::write_plan(&images) {
        Ok(p) => p,
        Err(e) => {
            // Only a NUL inside a string is refused at these sizes.
            let has_nul = images.iter().any(|i| i.strings.iter().any(|(k, v)| k.contains(&0) || v.contains(&0)));
            assert!(has_nul, "write failed without a NUL: {e}");
            return;
        }
    };
    let bytes = plan.to_vec();
    assert_eq!(bytes, offload_binary::write_plan(&images).expect("writes again").to_vec(), "not deterministic");
    assert_eq!(bytes.len() % 8, 0);
    let back = offload_binary::OffloadBinary::parse_all(&bytes).expect("own package reads");
    assert_eq!(back.len(), images.len());
    for (b, i) in back.iter().zip(&images) {
        assert_eq!(b.image(), i.image);
        assert_eq!(b.image_kind(), i.image_kind);
        assert_eq!(b.offload_kind(), i.offload_kind);
        assert_eq!(b.flags(), i.flags);
        assert_eq!(b.strings(), &i.strings[..]);
    }
    let scan = offload_binary::container::scan(&bytes, "p");
    assert!(scan.error.is_none() && (images.is_empty() || scan.packages.len() == 1));
}

/// The version 2 and 3 writers (one binary, every image an entry; version
/// 3 also compressed with zstd and zlib): read back (inflated where
/// compressed), every entry comes back, kinds in the bit numbering.
fn rt_offload_binary_v2_v3(images: &[Image]) {
    use offload_format::offload_binary::{Compression, read, write_v2, write_v3};
    if images.is_empty() || images.iter().any(|i| i.strings.iter().any(|(k, _)| k.contains(&0))) {
        assert!(write_v2(images).is_err());
        return;
    }
    let check = |bytes: &[u8], version: u32| {
        assert_eq!(bytes.len() % 8, 0);
        let back = offload_binary::OffloadBinary::parse_all(bytes).expect("own v2/v3 reads");
        assert_eq!(back.len(), images.len());
        for (b, i) in back.iter().zip(images) {
            assert_eq!((b.version(), b.image(), b.image_kind(), b.flags()), (version, i.image, i.image_kind, i.flags));
            assert_eq!(b.strings(), &i.strings[..]);
            // Written in the bit numbering (HIP 4) and read back the same.
            assert_eq!(b.offload_kind(), i.offload_kind);
        }
    };
    check(&write_v2(images).expect("v2 writes"), 2);
    let plain = write_v3(images, None).expect("v3 writes");
    check(&plain, 3);
    for c in [Compression::Zstd(1), Compression::Zlib(1)] {
        let packed = write_v3(images, Some(c)).expect("v3 compresses");
        let inflated = read::inflate(&packed, 0, plain.len() as u64).expect("own v3 inflates");
        assert_eq!(inflated, plain);
        assert!(read::inflate(&packed, 0, plain.len() as u64 - 1).is_err());
    }
}

/// The name and bytes of every member of an archive we wrote, which must
/// read back.
fn archive_members(bytes: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let archive = object::read::archive::ArchiveFile::parse(bytes).expect("own archive reads");
    archive
        .members()
        .map(|m| {
            let m = m.expect("member reads");
            (m.name().to_vec(), m.data(bytes).expect("member data").to_vec())
        })
        .collect()
}

/// GNU archives as `--archive` and `-type=a` unbundling write them:
/// members come back by name and content, and every member's bytes are
/// what was given.
pub fn rt_archive(members: Vec<(String, &[u8])>) {
    let members: Vec<(String, &[u8])> = members
        .into_iter()
        .take(16)
        .map(|(n, d)| (n.chars().filter(|c| *c != '/' && *c != '\0' && *c != '\n').take(40).collect(), d))
        .filter(|(n, _): &(String, &[u8])| !n.is_empty())
        .collect();
    let refs: Vec<(&str, &[u8])> = members.iter().map(|(n, d)| (n.as_str(), *d)).collect();
    let bytes = match offload_binary::archive::write_gnu_archive(&refs) {
        Ok(b) => b,
        Err(e) => {
            // Only members that look like objects but do not read are refused.
            let _ = e.to_string();
            return;
        }
    };
    assert_eq!(bytes, offload_binary::archive::write_gnu_archive(&refs).expect("writes again"), "not deterministic");
    let read = archive_members(&bytes);
    assert_eq!(read.len(), refs.len());
    for ((name, data), (n, d)) in read.iter().zip(&refs) {
        assert_eq!(name.as_slice(), n.as_bytes());
        assert_eq!(data.as_slice(), *d);
    }
    let _ = offload_binary::container::scan(&bytes, "a");
    // The device archives of `-type=a` unbundling come from a second writer.
    let owned: Vec<(String, Vec<u8>)> = refs.iter().map(|(n, d)| (n.to_string(), d.to_vec())).collect();
    if let Ok(device) = offload_format::bundle::archive::write_gnu_archive(owned.clone()) {
        let read = archive_members(&device);
        let want: Vec<(Vec<u8>, Vec<u8>)> = owned.into_iter().map(|(n, d)| (n.into_bytes(), d)).collect();
        assert_eq!(read, want, "device archive members differ");
    }
}

#[derive(Arbitrary, Debug)]
pub struct WrapperCase<'a> {
    pub triple: TripleChoice,
    pub images: Vec<&'a [u8]>,
    pub archs: Option<Vec<String>>,
}

#[derive(Arbitrary, Debug)]
pub enum TripleChoice {
    Known(u8),
    Raw(String),
}

const WRAPPER_TRIPLES: [&str; 6] = [
    "x86_64-pc-linux-gnu",
    "aarch64-unknown-linux-gnu",
    "nvptx64-nvidia-cuda",
    "i386-pc-linux-gnu",
    "powerpc64le-unknown-linux-gnu",
    "amdgcn-amd-amdhsa",
];

/// The wrapper module: build → bitcode, decoded by the independent
/// `llvm-bitcode` reader, with every image present verbatim as a string
/// constant; the text printer runs; output is deterministic.
pub fn rt_wrapper(case: WrapperCase) {
    use offload_format::wrapper::{bitcode, module, text as ll};
    let triple = match &case.triple {
        TripleChoice::Known(i) => WRAPPER_TRIPLES[usize::from(*i) % WRAPPER_TRIPLES.len()].to_string(),
        TripleChoice::Raw(s) => s.clone(),
    };
    let images: Vec<&[u8]> = case.images.iter().take(12).copied().collect();
    let archs: Vec<&str> = case.archs.iter().flatten().take(12).map(String::as_str).collect();
    let input = module::WrapperInput { triple: &triple, images: images.clone(), offload_archs: archs };
    let Ok(m) = module::build(&input) else { return };
    let bytes = match bitcode::to_vec(&m) {
        Ok(b) => b,
        Err(e) => panic!("a module that builds must write: {e}"),
    };
    assert_eq!(bytes, bitcode::to_vec(&m).expect("writes again"), "bitcode writer is not deterministic");
    let _ = ll::to_text(&m, module::SOURCE_FILENAME);
    let decoded = llvm_bitcode::Bitcode::new(&bytes).expect("our bitcode decodes");
    let mut blobs: Vec<Vec<u8>> = Vec::new();
    collect_strings(&decoded.elements, &mut blobs);
    for img in images.iter().filter(|i| !i.is_empty()) {
        let found =
            blobs.iter().any(|b| b == img || (b.len() + 1 == img.len() && img.ends_with(&[0]) && img.starts_with(b)));
        // All-zero images are written as zeroinitializer, not as a string.
        assert!(found || img.iter().all(|&b| b == 0), "image of {} bytes missing from the bitcode", img.len());
    }
}

fn collect_strings(elements: &[llvm_bitcode::bitcode::BitcodeElement], out: &mut Vec<Vec<u8>>) {
    use llvm_bitcode::bitcode::{BitcodeElement, Payload};
    for e in elements {
        match e {
            BitcodeElement::Block(b) => collect_strings(&b.elements, out),
            BitcodeElement::Record(r) => {
                if let Some(Payload::Blob(b)) = r.clone().take_payload() {
                    out.push(b);
                }
            }
        }
    }
}

// ------------------------------------------------ objects and archives

/// Fat objects (`-type=o`): detection, the bundle sections, host
/// extraction (the in-process llvm-objcopy), adding sections and reading
/// them back. Output grows only by what is added plus bounded alignment
/// padding.
pub fn bundle_object(data: &[u8]) {
    use offload_format::bundle::object as obj;
    let Ok(Some(format)) = obj::detect(data) else { return };
    if let Ok(sections) = obj::bundles(data, format) {
        for s in &sections {
            assert!(within(data, s.id) && within(data, s.contents));
        }
    }
    // ELF padding is bounded by the input; COFF raw data the input lacks
    // (uninitialized data) is written out as llvm-objcopy does, up to the
    // format's 4 GiB, as fill pieces that take no memory.
    let bound = match format {
        obj::Format::Coff => u64::from(u32::MAX),
        _ => data.len() as u64 + (1 << 30) + 4096,
    };
    let held = |plan: &offload_format::plan::Plan| {
        plan.pieces.iter().filter(|p| matches!(p, offload_format::plan::Piece::Bytes(_))).map(|p| p.len()).sum::<u64>()
    };
    if let Ok(plan) = obj::host_object(data, format) {
        assert!(plan.len() <= bound, "host object of {} bytes", plan.len());
        assert!(held(&plan) <= 2 * data.len() as u64 + (1 << 20), "host object holds {} bytes", held(&plan));
    }
    let entries: [(&[u8], &[u8]); 2] =
        [(b"host-x86_64-unknown-linux-gnu-", b""), (b"hip-amdgcn-amd-amdhsa--gfx906", b"device code")];
    if let Ok(plan) = obj::bundle(data, format, &entries, 0) {
        assert!(plan.len() <= bound + 4096, "fat object of {} bytes", plan.len());
        if plan.len() <= 1 << 24 {
            let out = plan.to_vec();
            let sections = obj::bundles(&out, format).expect("our fat object reads back");
            let ids: Vec<&[u8]> = sections.iter().map(|s| s.id).collect();
            assert!(ids.ends_with(&[entries[0].0, entries[1].0]), "added sections missing: {ids:?}");
            let last = sections.last().expect("two sections");
            assert_eq!(last.contents, entries[1].1);
            assert!(sections[sections.len() - 2].is_host_marker());
        }
    }
}

/// Heterogeneous device archives (`-type=a`): unbundling for a fixed set
/// of targets, with and without the archive check.
pub fn bundle_archive(data: &[u8]) {
    use offload_format::bundle::archive::{self, ArchiveOptions};
    let Some((&flags, input)) = data.split_first() else { return };
    let targets: Vec<String> = [
        "hip-amdgcn-amd-amdhsa--gfx906",
        "hip-amdgcn-amd-amdhsa--gfx90a:xnack+",
        "openmp-x86_64-pc-linux-gnu-",
        "host-x86_64-unknown-linux-gnu-",
    ]
    .iter()
    .take(1 + usize::from(flags >> 6))
    .map(|s| s.to_string())
    .collect();
    let options = ArchiveOptions {
        allow_missing_bundles: flags & 1 != 0,
        hip_openmp_compatible: flags & 2 != 0,
        check_input_archive: flags & 4 != 0,
        ..Default::default()
    };
    match archive::unbundle(&targets, input, "fuzz.a", options, None) {
        Ok(outs) => {
            assert_eq!(outs.len(), targets.len());
            for o in &outs {
                assert!(o.starts_with(b"!<arch>\n"));
                let _ = object::read::archive::ArchiveFile::parse(&o[..]).expect("our archive reads back");
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
}

/// The IR symbol table reader used for archive symbol indexes.
pub fn bitcode_symbols(data: &[u8]) {
    if let Some(names) = offload_format::bitcode::archive_symbols(data) {
        for n in names {
            assert!(within(data, n));
        }
    }
}

// ------------------------------------------------------------ inspector

/// Whether every compressed-bundle header in `data` declares at most
/// [`MAX_DECLARED`] bytes (deep scans decompress them all).
fn small_declarations(data: &[u8]) -> bool {
    let mut at = 0;
    while let Some(i) = data.get(at..).and_then(|d| d.windows(4).position(|w| w == compressed::MAGIC)) {
        if let Ok(h) = compressed::parse_header(&data[at + i..])
            && h.uncompressed_size > MAX_DECLARED
        {
            return false;
        }
        at += i + 1;
    }
    true
}

/// The `offload` inspector's scanner (issue 7) over any file, shallow as
/// `list` runs it and deep as `verify` does, then selection for a few GPUs
/// and the bytes of every code object (what `extract` writes).
pub fn inspect_scan(data: &[u8]) {
    use offload_inspect::{Options, select};
    for deep in [false, true] {
        if deep && !small_declarations(data) {
            continue;
        }
        let inv = offload_inspect::scan(data, "fuzz-input", &Options { deep, ..Options::default() });
        for d in &inv.diagnostics {
            assert!(!d.message.is_empty());
            if let Some(o) = d.offset {
                assert!(o <= data.len() as u64, "diagnostic offset {o:#x} past the end");
            }
        }
        for o in &inv.objects {
            assert!(o.unit < inv.units.len().max(1));
            if let Some(off) = o.offset {
                assert!(off.checked_add(o.size).is_some_and(|end| end <= data.len() as u64), "object outside the file");
            }
            let _ = o.location.to_string();
            if deep {
                match inv.bytes(o) {
                    Ok(b) => assert_eq!(b.len() as u64, o.size, "object bytes differ from its size"),
                    Err(e) => assert!(!e.to_string().is_empty()),
                }
            }
        }
        for gpu in ["gfx906", "gfx90a:xnack+", "sm_80", "gfx1100", "sm_86", "sm_100"] {
            let gpu = select::Gpu::parse(gpu).expect("known GPU");
            for runtime in [select::Runtime::Hip, select::Runtime::OpenMp, select::Runtime::Cuda] {
                let s = select::select(&inv.objects, &gpu, runtime);
                assert!(s.chosen.iter().all(|&i| i < inv.objects.len()));
            }
        }
    }
}

/// `offload prune`'s library side (the file map and zero mode): any input
/// is refused with an error or pruned into an output that passes the
/// check the CLI runs before committing.
pub fn prune_zero(data: &[u8]) {
    use offload_inspect::layout::FileMap;
    use offload_rewrite::prune;
    let Ok(map) = FileMap::read(data) else { return };
    let _ = (map.unreferenced(), map.dangling());
    for targets in [&["gfx90a"][..], &["gfx906", "gfx942:xnack-"]] {
        let keep = targets.iter().map(|t| prune::parse_target(t).expect("a valid target")).collect();
        let rules = prune::Rules { keep, ..Default::default() };
        let pruned = match prune::plan(data, &map, &rules) {
            Ok(p) => p,
            // The round trip of a recompressed unit failed: a bug, not a
            // refusal of the input.
            Err(prune::PruneError::Verify(e)) => panic!("a recompressed unit fails its round trip: {e}"),
            Err(_) => continue,
        };
        let Some(out) = pruned.output_plan(data).try_to_vec() else { continue };
        if let Err(e) = prune::verify(&out, data, &map, &pruned) {
            panic!("a pruned output fails its check: {e}");
        }
        kept_entries_are_the_inputs(data, &out, &pruned);
    }
}

/// The check the CLI runs trusts the round trip made when a unit was
/// recompressed; here every rewritten unit is decoded again from the output
/// and from the input, independently, and must hold exactly the kept
/// entries, byte for byte.
fn kept_entries_are_the_inputs(input: &[u8], output: &[u8], pruned: &offload_rewrite::prune::Pruned) {
    use offload_format::bundle::{binary, compressed};
    use offload_inspect::layout::UnitKind;
    fn decode(bytes: &[u8], kind: UnitKind) -> Vec<u8> {
        match kind {
            UnitKind::Bundle => bytes.to_vec(),
            UnitKind::Compressed { .. } => {
                let blob = compressed::read_blob(bytes).expect("a unit that was read once reads again");
                compressed::decompress(&blob).expect("a unit that was decompressed once decompresses again")
            }
            // A HIP host binary's map holds neither (CUDA and fat-object
            // units came with the cudaprune merge).
            UnitKind::Cuda | UnitKind::Object => unreachable!("not a unit of a HIP map"),
        }
    }
    for change in pruned.units.iter().filter(|c| c.changed()) {
        let at = change.unit.offset as usize;
        let old = decode(&input[at..at + change.unit.used as usize], change.unit.kind);
        let new = decode(&output[at..at + change.new_used as usize], change.unit.kind);
        let (old, new) =
            (binary::read(&old).unwrap().unwrap_or_default(), binary::read(&new).unwrap().unwrap_or_default());
        let kept: Vec<_> =
            old.iter().zip(&change.entries).filter(|(_, f)| f.kept).map(|(e, _)| (e.id, e.payload)).collect();
        let held: Vec<_> = new.iter().map(|e| (e.id, e.payload)).collect();
        assert_eq!(held, kept, "the unit at {at:#x} does not hold exactly the kept entries");
    }
}

/// `offload replace`'s library side: the first AMDGPU code object of any
/// input, grown a little (in place) and a lot (a new segment), and the
/// first CUDA cubin or PTX (changed in place, and grown), and the first
/// OpenMP image (changed, and one byte shorter), put back in
/// their entry's place are refused or give an output that passes the
/// check the CLI runs before committing. Archives go through the same
/// calls (the member is picked by its entry).
pub fn replace(data: &[u8]) {
    use offload_rewrite::replace;
    let inv = offload_inspect::scan(data, "fuzz", &Default::default());
    let check = |new: &[u8], id: &str| {
        for unit in [None, Some(0), Some(1)] {
            let Ok(replaced) = replace::plan(data, new, id, unit) else { continue };
            let Some(out) = replaced.output().try_to_vec() else { continue };
            if let Err(e) = replace::verify(&out, data, &replaced, new) {
                panic!("a replaced output fails its check: {e}");
            }
        }
    };
    if let Some(object) = inv.objects.iter().find(|o| o.target_id.starts_with("gfx"))
        && let Ok(old) = inv.bytes(object)
        && old.len() <= 1 << 20
    {
        for extra in [16usize, 70_000] {
            let mut new = old.to_vec();
            new.resize(new.len() + extra, 0x5a);
            check(&new, &object.id);
        }
    }
    if let Some(object) = inv.objects.iter().find(|o| o.cuda.is_some() && !o.id.contains("concat"))
        && let Ok(old) = inv.bytes(object)
        && old.len() <= 1 << 20
    {
        // The same code with its last byte changed, and with more bytes:
        // text after PTX, zeros after a cubin's tables.
        let mut changed = old.to_vec();
        if let Some(last) = changed.last_mut() {
            *last ^= 1;
        }
        check(&changed, &object.id);
        let mut grown = old.to_vec();
        grown.extend_from_slice(if grown.starts_with(b"\x7fELF") { &[0; 64] } else { b"\n// more\n" });
        check(&grown, &object.id);
    }
    // An OpenMP image (x86_64 host-offload or AMDGPU) with its last byte
    // changed, and one byte shorter (ImageEnd moves; most such ELF files
    // are refused as truncated, which is the point of checking).
    if let Some(object) = inv.objects.iter().find(|o| o.image_kind.is_some() && o.offload_kind == "openmp")
        && let Ok(old) = inv.bytes(object)
        && old.len() <= 1 << 20
    {
        let mut changed = old.to_vec();
        if let Some(last) = changed.last_mut() {
            *last ^= 1;
        }
        check(&changed, &object.id);
        check(&old[..old.len().saturating_sub(1)], &object.id);
    }
}

/// Cut-mode pruning over any bytes: a clean error, a fall-back to zero
/// mode, or an output that passes the cut check. HIP (`.hip_fatbin`),
/// linked CUDA (`.nv_fatbin`) and OpenMP (`.llvm.offloading`) inputs.
pub fn prune_cut(data: &[u8]) {
    use offload_inspect::layout::FileMap;
    use offload_rewrite::prune;
    prune_cut_cuda(data);
    prune_cut_openmp(data);
    prune_cut_files(data);
    let Ok(map) = FileMap::read(data) else { return };
    for targets in [&["gfx906"][..], &["gfx90a:xnack-"]] {
        let keep = targets.iter().map(|t| prune::parse_target(t).expect("a valid target")).collect();
        let rules = prune::Rules { keep, ..Default::default() };
        let Ok(pruned) = prune::plan(data, &map, &rules) else { continue };
        let Ok(prune::Cut::Planned(cut)) = prune::plan_cut(data, &map, &pruned) else { continue };
        let plan = cut.output_plan(data, &pruned);
        assert_eq!(plan.len(), cut.output_len(data.len() as u64), "the planned size");
        let Some(out) = plan.try_to_vec() else { continue };
        if let Err(e) = prune::verify_cut(&out, data, &map, &pruned, &cut) {
            panic!("a cut output fails its check: {e}");
        }
    }
}

/// The CUDA side of [`prune_cut`]: the zero-mode plan, the linked map,
/// then the same cutter and check.
fn prune_cut_cuda(data: &[u8]) {
    use offload_rewrite::prune::{self, files};
    let rules =
        prune::Rules { keep: vec![prune::parse_target("sm_80").expect("a valid target")], ..Default::default() };
    let Ok((files::Input::Cuda, pruned)) = files::plan_file(data, &rules) else { return };
    let Ok(map) = prune::cuda::linked_map(data, &pruned) else { return };
    let Ok(prune::Cut::Planned(cut)) = prune::plan_cut(data, &map, &pruned) else { return };
    let plan = cut.output_plan(data, &pruned);
    assert_eq!(plan.len(), cut.output_len(data.len() as u64), "the planned size");
    let Some(out) = plan.try_to_vec() else { return };
    if let Err(e) = prune::verify_cut(&out, data, &map, &pruned, &cut) {
        panic!("a cut CUDA output fails its check: {e}");
    }
}

/// The OpenMP side of [`prune_cut`].
fn prune_cut_openmp(data: &[u8]) {
    use offload_inspect::layout::openmp::OpenMpMap;
    use offload_rewrite::prune::{self, openmp};
    let Ok(map) = OpenMpMap::read(data) else { return };
    for keep in ["gfx90a", "x86_64-pc-linux-gnu"] {
        let rules =
            prune::Rules { keep: vec![prune::parse_target(keep).expect("a valid target")], ..Default::default() };
        let Ok(planned) = openmp::plan_cut(data, &map, &rules) else { continue };
        let prune::Cut::Planned(cut) = &planned.cut else { continue };
        let plan = openmp::cut_output_plan(cut, data, &planned.pruned);
        assert_eq!(plan.len(), cut.output_len(data.len() as u64), "the planned size");
        let Some(out) = plan.try_to_vec() else { continue };
        if let Err(e) = openmp::verify_cut(&out, data, &map, &planned.pruned, cut) {
            panic!("a cut OpenMP output fails its check: {e}");
        }
    }
}

/// Cut mode on relocatable objects and archives (`prune::cut_file`):
/// whatever plans must write exactly the planned size and pass its own
/// check.
fn prune_cut_files(data: &[u8]) {
    use offload_rewrite::prune::{self, cut_file, files};
    for targets in [&["gfx906", "sm_80"][..], &["gfx90a:xnack-", "compute_90"]] {
        let keep = targets.iter().map(|t| prune::parse_target(t).expect("a valid target")).collect();
        let rules = prune::Rules { keep, allow_empty: true, ..Default::default() };
        let Ok((input, pruned)) = files::plan_file(data, &rules) else { continue };
        let Ok(Some(cut)) = cut_file::plan_file_cut(data, &input, &pruned) else { continue };
        let plan = cut.output_plan(data, &pruned);
        let Some(out) = plan.try_to_vec() else { continue };
        if let Err(e) = cut.verify(&out, data, &pruned) {
            panic!("a cut object or archive fails its check: {e}");
        }
    }
}

// ------------------------------------------------------------ CUDA

/// The CUDA fat binary reader over any bytes: every fat binary, entry,
/// string, child and code object, with the invariants the scan relies on.
pub fn cuda_fatbin(data: &[u8]) {
    use offload_format::cuda;
    for item in cuda::fat_binaries(data) {
        let Ok((at, fat)) = item else { break };
        assert!(within(data, fat.data) && at + fat.data.len() <= data.len());
        for entry in fat.entries() {
            let Ok(entry) = entry else { break };
            assert!(within(fat.data, entry.raw_header) && within(fat.data, entry.stored));
            assert!(entry.raw_header.len() >= cuda::ENTRY_HEADER_SIZE);
            for s in [entry.identifier(), entry.options()].into_iter().flatten().flatten() {
                assert!(within(entry.raw_header, s));
            }
            if let Ok(stream) = entry.stream() {
                assert!(within(entry.stored, stream));
            }
            if entry.header.kind() == cuda::EntryKind::Concat
                && let Ok(children) = entry.children()
            {
                assert!(children.len() * cuda::ENTRY_HEADER_SIZE <= entry.raw_header.len());
            }
            // Decoding is bounded by MAX_DECLARED: a fuzz input may declare
            // anything, and zstd really produces what a frame asks for.
            if entry.header.uncompressed_size <= MAX_DECLARED
                && let Ok(bytes) = cuda::code_object_bytes(&entry)
            {
                if entry.header.codec().is_some() {
                    assert!(bytes.len() as u64 <= entry.header.uncompressed_size);
                } else {
                    assert!(within(entry.stored, &bytes));
                }
            }
            if let Some(n) = cuda::cubin_extent(entry.stored) {
                assert!(n <= entry.stored.len() as u64);
            }
        }
    }
}

/// A raw LZ4 block decoded as the spec describes it (docs/formats/cuda-fatbin.md
/// §6.1), written independently of lz4_flex to compare with it.
fn lz4_reference(mut input: &[u8], limit: usize) -> Option<Vec<u8>> {
    fn length(input: &mut &[u8], mut n: usize) -> Option<usize> {
        if n == 15 {
            loop {
                let (&b, rest) = input.split_first()?;
                *input = rest;
                n = n.checked_add(usize::from(b))?;
                if b != 255 {
                    break;
                }
            }
        }
        Some(n)
    }
    let mut out = Vec::new();
    loop {
        let (&token, rest) = input.split_first()?;
        input = rest;
        let literals = length(&mut input, usize::from(token >> 4))?;
        if literals > input.len() || out.len() + literals > limit {
            return None;
        }
        out.extend_from_slice(&input[..literals]);
        input = &input[literals..];
        if input.is_empty() {
            return Some(out);
        }
        let offset = usize::from(offload_format::bytes::u16_le(input, 0)?);
        input = &input[2..];
        if offset == 0 || offset > out.len() {
            return None;
        }
        let matched = length(&mut input, usize::from(token & 15))?.checked_add(4)?;
        if out.len() + matched > limit {
            return None;
        }
        for _ in 0..matched {
            out.push(out[out.len() - offset]);
        }
    }
}

/// The LZ4 path of the CUDA reader: the first two bytes give the declared
/// size (so the fuzzer can hit it exactly), the rest is the block. Whatever
/// decodes must be exactly the declared size and agree with the reference.
pub fn cuda_lz4(data: &[u8]) {
    use offload_format::cuda::{Codec, decompress};
    let Some((size, block)) = data.split_first_chunk::<2>() else { return };
    // `size` is the 2-byte array split off above.
    let declared = u64::from(u16::from_le_bytes(*size));
    if let Ok(out) = decompress(Codec::Lz4, block, declared) {
        assert_eq!(out.len() as u64, declared);
        if let Some(reference) = lz4_reference(block, declared as usize) {
            assert_eq!(reference, out, "lz4_flex and the reference decoder differ");
        }
    }
}

/// Walks `data` as a package of `kind` (every kind when `None`, by its
/// magic) with small limits, so that spooling and the size limit are
/// reached by small inputs too, and checks what the walker promises: a
/// member with an offset is exactly the input's bytes there; every problem
/// names what is wrong; rebasing a scan of each member keeps offsets inside
/// the input.
pub fn package_walk(kind: Option<offload_inspect::package::Kind>, data: &[u8]) {
    use offload_inspect::package::{self, Event, Limits};
    use offload_inspect::{self, Options};
    let limits = Limits { max_depth: 3, in_memory: 64 << 10, max_member: 16 << 20, ..Limits::default() };
    let mut visit = |event: Event<'_>| match event {
        Event::Member(m) => {
            if let Some(at) = m.offset {
                let start = usize::try_from(at).expect("offset fits");
                let end = start.checked_add(m.bytes.len()).expect("no overflow");
                assert_eq!(data.get(start..end), Some(m.bytes), "a stored member is the input's bytes at its offset");
            }
            let mut inv = offload_inspect::scan(m.bytes, "member", &Options::default());
            package::rebase(&mut inv, m.steps, m.offset);
            for o in &inv.objects {
                if let Some(off) = o.offset {
                    assert!(
                        off.checked_add(o.size).is_some_and(|e| e <= data.len() as u64),
                        "object outside the input"
                    );
                }
                assert!(!o.location.0.is_empty() || m.steps.is_empty());
            }
        }
        Event::Progress { done, total, .. } => assert!(total.is_none_or(|t| done <= t)),
        Event::Problem(p) => assert!(!p.to_string().is_empty()),
    };
    let result = match kind {
        Some(kind) => package::walk_as(kind, data, &limits, &mut visit),
        None => package::walk(data, &limits, &mut visit),
    };
    if let Err(e) = result {
        assert!(!e.to_string().is_empty());
    }
}

/// kpack (`docs/formats/kpack.md`): the archive reader, `verify`, one
/// frame's decompression, the `.rocm_kpack_ref` marker reader and the
/// msgpack reader, all over the same input. Every located code object lies
/// inside the input; a served code object has exactly its declared size.
pub fn kpack(data: &[u8]) {
    use offload_format::kpack::{Archive, Marker, verify};
    use offload_format::msgpack;

    if let Ok((value, used)) = msgpack::read(data) {
        assert!(used >= 1 && used <= data.len());
        // Re-reading the prefix gives the same value (compared as text: a
        // NaN float is not equal to itself).
        let again = msgpack::read(&data[..used]).map(|(v, n)| (format!("{v:?}"), n));
        assert_eq!(again, Ok((format!("{value:?}"), used)));
    }
    if let Ok(marker) = Marker::parse(data) {
        assert!(marker.len <= data.len());
        assert!(marker.search_paths.iter().all(|p| within(data, p.as_bytes())));
    }
    let Ok(archive) = Archive::parse(data) else { return };
    assert!(archive.toc_offset + archive.toc_len <= data.len() as u64);
    for ordinal in 0..archive.spans.len() {
        let stored = archive.stored(ordinal as u32).expect("every span was checked");
        assert!(within(data, stored));
    }
    let options = verify::VerifyOptions { decompress: true, limit: MAX_DECLARED };
    for problem in verify::verify(&archive, &options) {
        assert!(!problem.to_string().is_empty());
    }
    for (_, entry) in archive.entries() {
        if let Ok(bytes) = archive.decompress(entry, MAX_DECLARED) {
            assert_eq!(bytes.len() as u64, entry.original_size);
        }
    }
    kpack_rewrite(&archive);
}

/// Writer/reader round trip: the entries of a parsed archive, written
/// again with their stored frames, read back to the same entries and
/// frames (the writer refuses only duplicates and foreign targets).
fn kpack_rewrite(archive: &offload_format::kpack::Archive<'_>) {
    use offload_format::kpack::{Archive, Scheme, write};
    if archive.scheme != Scheme::ZstdPerKernel {
        return;
    }
    let mut entries = Vec::new();
    for (key, e) in archive.entries() {
        let Ok(stored) = archive.stored(e.ordinal) else { return };
        entries.push(write::NewEntry {
            key: key.to_string(),
            target: e.target.to_string(),
            original_size: e.original_size,
            frame: std::borrow::Cow::Borrowed(stored),
            source_id: e.source_id.map(str::to_string),
        });
    }
    let arches = archive.gfx_arches.clone();
    let Ok(bytes) = write::archive(archive.group_name.unwrap_or(""), &arches, &entries) else { return };
    let again = Archive::parse(&bytes).expect("the writer's output parses");
    assert_eq!(again.gfx_arches, arches);
    for (i, e) in entries.iter().enumerate() {
        let found = again.find(&e.key, &e.target).expect("every entry is found");
        assert_eq!(found.ordinal as usize, i);
        assert_eq!(found.original_size, e.original_size);
        assert_eq!(again.stored(found.ordinal).ok(), Some(&e.frame[..]));
    }
}

/// Kernel metadata readers (`offload kernels`): the AMDGPU code object
/// note with its msgpack map (`amdhsa.kernels`) and the CUDA cubin
/// `.nv.info` attribute records, both directly and through the
/// dispatcher `offload kernels` uses. Any input is an error or a list of
/// kernels; formatting every record must not fail.
pub fn code_kernels(data: &[u8]) {
    use offload_format::{amdgpu, cuda};
    if let Ok(k) = amdgpu::kernels::read(data) {
        let _ = format!("{k:?}");
    }
    if let Ok(k) = cuda::nvinfo::read(data) {
        let _ = format!("{k:?}");
    }
    if let Some(Err(e)) = offload_inspect::kernels::of_bytes(data) {
        assert!(!e.is_empty());
    }
}

// ------------------------------------------------------------ kernels

/// The kernel readers: AMDGPU metadata (msgpack note and descriptors),
/// `.nv.info` records, PTX `.entry` directives, and the demangler and
/// occupancy estimate applied to what they return. The first byte picks
/// the reader so that each sees unframed input too.
pub fn kernels(data: &[u8]) {
    use offload_format::{amdgpu, cuda, msgpack};
    let Some((&pick, rest)) = data.split_first() else { return };
    match pick % 5 {
        0 => {
            let _ = msgpack::read(rest);
        }
        1 => {
            if let Ok(k) = amdgpu::kernels::read(rest) {
                for k in &k.kernels {
                    let _ = offload_inspect::kernels::demangle::demangle(&k.name);
                }
            }
        }
        2 => {
            let _ = cuda::nvinfo::records(rest);
            let _ = cuda::nvinfo::read(rest);
        }
        3 => {
            let m = cuda::ptx::read(rest);
            for e in &m.entries {
                assert!(e.name.len() <= rest.len());
            }
        }
        _ => {
            if let Ok(name) = std::str::from_utf8(rest) {
                if let Some(d) = offload_inspect::kernels::demangle::demangle(name) {
                    assert!(d.len() <= offload_inspect::kernels::demangle::MAX_OUTPUT);
                }
            }
            let inv = offload_inspect::scan(rest, "fuzz", &offload_inspect::Options::default());
            let rows = offload_inspect::kernels::rows(&inv, &offload_inspect::kernels::kernels(&inv, 1));
            let _ = offload_inspect::kernels::diff(&rows, &rows);
        }
    }
}

/// The PE image reader (sections, imports, base relocations, records,
/// checksum) and `prune` on PE images: every slice lies inside the input,
/// every list is bounded by the input's size, and a prune that is planned
/// (zero mode, and cut mode when it applies) writes an output that passes
/// its own check.
pub fn pe_image(data: &[u8]) {
    use offload_format::coff::pe::{self, PeImage};
    use offload_rewrite::prune::{self, files, pe as prune_pe};
    let Ok(image) = PeImage::parse(data) else { return };
    assert!(image.sections.len() * 40 <= data.len());
    for s in &image.sections {
        assert!(within(data, image.section_data(s)));
        if let Some(at) = image.rva_to_offset(s.virtual_address) {
            assert!(at < data.len());
        }
    }
    if let Ok(imports) = image.imports() {
        assert!(imports.len() * 20 <= data.len());
    }
    if let Ok(relocs) = image.base_relocations() {
        assert!(relocs.len() <= data.len() / 2);
    }
    for name in [&b".hipFatB"[..], b".nvFatBi"] {
        if let Ok(records) = image.records(name, 0x4849_5046) {
            assert!(records.iter().all(|r| r.offset < data.len()));
        }
    }
    let _ = pe::checksum(data, image.checksum_offset);
    for target in ["sm_89", "gfx90a"] {
        let rules =
            prune::Rules { keep: vec![prune::parse_target(target).expect("a valid target")], ..Default::default() };
        let Ok((input, pruned)) = files::plan_file(data, &rules) else { continue };
        let files::Input::Pe(pe_input) = &input else { continue };
        let Some(out) = prune_pe::output_plan(data, pe_input, &pruned).try_to_vec() else { continue };
        if let Err(e) = files::verify_file(&out, data, &input, &pruned) {
            panic!("a zero-mode PE output fails its check: {e}");
        }
        if let Ok(cut) = prune_pe::plan_pe_cut(data, pe_input, &pruned) {
            let Some(out) = cut.output_plan(data, &pruned).try_to_vec() else { continue };
            if let Err(e) = cut.verify(&out, data, &pruned) {
                panic!("a cut PE output fails its check: {e}");
            }
        }
    }
}

// ------------------------------------------------------------ COFF

/// COFF relocatable objects (`.obj`) and `.lib` archives of them: the
/// object reader's tables stay inside the input and are bounded by its
/// size, and `offload prune` in zero mode (section checksums rewritten)
/// and in cut mode, on an object or a `.lib`, is refused or writes an
/// output that passes the check the CLI runs before committing.
pub fn coff_object(data: &[u8]) {
    use offload_format::coff::{ObjectView, is_object};
    use offload_rewrite::prune::{self, cut_file, files};
    if is_object(data)
        && let Ok(v) = ObjectView::read(data)
    {
        assert!(v.sections.len() * 40 <= data.len(), "more sections than the file holds");
        assert!(v.symbols.len() * 18 <= data.len(), "more symbols than the file holds");
        assert!(v.symbol_table_len <= data.len() as u64);
        let relocations: usize = v.sections.iter().map(|s| s.relocations.len()).sum();
        assert!(relocations * 10 <= data.len(), "more relocations than the file holds");
        for (k, s) in v.sections.iter().enumerate() {
            assert_eq!(s.number, k + 1);
            assert!(s.header_offset + 40 <= data.len());
            assert_eq!(v.section(s.number as i32), Some(s));
        }
        for s in &v.symbols {
            assert!(s.offset + 18 <= data.len(), "a symbol record outside the file");
            assert_eq!(v.symbol(s.index), Some(s));
        }
        assert!(v.section(0).is_none() && v.section(-1).is_none());
    }
    for targets in [&["gfx906", "sm_80"][..], &["gfx90a:xnack-", "sm_89"]] {
        let keep = targets.iter().map(|t| prune::parse_target(t).expect("a valid target")).collect();
        let rules = prune::Rules { keep, allow_empty: true, ..Default::default() };
        let Ok((input, pruned)) = files::plan_file(data, &rules) else { continue };
        if !matches!(input, files::Input::Coff(_) | files::Input::Archive { .. }) {
            continue;
        }
        if let Some(out) = files::zero_output_plan(data, &input, &pruned).try_to_vec() {
            if input.in_place() {
                assert_eq!(out.len(), data.len(), "a zero-mode output of another size");
            }
            if let Err(e) = files::verify_file(&out, data, &input, &pruned) {
                panic!("a zero-mode COFF or .lib output fails its check: {e}");
            }
        }
        if let Ok(Some(cut)) = cut_file::plan_file_cut(data, &input, &pruned)
            && let Some(out) = cut.output_plan(data, &pruned).try_to_vec()
            && let Err(e) = cut.verify(&out, data, &pruned)
        {
            panic!("a cut COFF object or .lib fails its check: {e}");
        }
    }
}
