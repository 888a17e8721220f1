//! The operations of `clang-offload-bundler` (bundle, unbundle, list) with
//! LLVM 19's validation order, messages, entry order and output rules. The
//! CLI opens files and writes plans; everything it decides lives here.

use crate::bundle::archive::{self, ArchiveError, ArchiveOptions};
use crate::bundle::compressed::{self, CompressOptions, CompressedError, Header};
use crate::bundle::object::{self as object_bundle, ObjectError};
use crate::bundle::{BundleError, FileType, binary, text};
use crate::llvm_release::LlvmRelease;
use crate::plan::Plan;
use crate::string_map::{StringHash, string_map_order};
use crate::target_id::{BundleEntryId, find_conflicting_targets, has_six_field_shape, is_compatible};
use std::collections::BTreeSet;
use std::num::NonZeroU64;

/// Everything that stops the bundler, with LLVM 19's wording.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BundlerError {
    /// `-unbundle` and `-list` given together.
    #[error("-unbundle and -list cannot be used together")]
    UnbundleWithList,
    /// `-list` with other than one input.
    #[error("only one input file supported for -list")]
    ListInputCount,
    /// `-list` with `-output`.
    #[error("-outputs option is invalid for -list")]
    ListWithOutputs,
    /// `-list` with `-targets`.
    #[error("-targets option is invalid for -list")]
    ListWithTargets,
    /// `-check-input-archive` without `-unbundle`.
    #[error("-check-input-archive cannot be used while bundling")]
    CheckArchiveWhileBundling,
    /// `-check-input-archive` for a type other than `a`.
    #[error("-check-input-archive can only be used for unbundling archives (-type=a)")]
    CheckArchiveNotArchive,
    /// No `-output` given.
    #[error("no output file specified!")]
    NoOutput,
    /// No `-targets` given.
    #[error("for the --targets option: must be specified at least once!")]
    NoTargets,
    /// Unbundling with other than one input.
    #[error("only one input file supported in unbundling mode")]
    UnbundleInputCount,
    /// Unbundling with as many outputs as targets not given.
    #[error("number of output files and targets should match in unbundling mode")]
    UnbundleOutputCount,
    /// Bundling with `-type=a`.
    #[error("Archive files are only supported for unbundling")]
    ArchiveBundling,
    /// Bundling with other than one output.
    #[error("only one output file supported in bundling mode")]
    BundleOutputCount,
    /// Bundling with as many inputs as targets not given.
    #[error("number of input files and targets should match in bundling mode")]
    BundleInputCount,
    /// A target given twice.
    #[error("Duplicate targets are not allowed")]
    DuplicateTarget,
    /// A target of fewer than five `-`-separated fields, refused by LLVM 20
    /// and later (LLVM 22's wording).
    #[error(
        "Targets need to follow the format '<offload kind>-<target triple>', where '<target triple>' follows the \
         format '<kind>-<arch>-<vendor>-<os>-<env>[-<target id>[:target features]]'."
    )]
    TargetFormat,
    /// Two targets that standardize to the same ID (the two as given, and that ID).
    #[error("Duplicate targets are not allowed: '{0}' and '{1}' both stand for '{2}'")]
    SameStandardizedTarget(String, String, String),
    /// A target that does not parse or that LLVM rejects (the message).
    #[error("{0}")]
    InvalidTarget(String),
    /// Two targets whose target IDs conflict (`gfx90a` and `gfx90a:xnack+`).
    #[error("Cannot bundle inputs with conflicting targets: '{0}' and '{1}'")]
    ConflictingTargets(String, String),
    /// Bundling with other than one host target (how many).
    #[error("expecting exactly one host target but got {0}")]
    HostCount(usize),
    /// A `-type` LLVM 19 does not know (the value).
    #[error("'{0}': invalid file type specified")]
    InvalidFileType(String),
    /// `-bundle-align=0`.
    #[error("invalid -bundle-align value 0: the alignment must be at least 1")]
    ZeroAlignment,
    /// Targets with no entry in the input, without `-allow-missing-bundles` (their list).
    #[error("Can't find bundles for {0}")]
    MissingBundles(String),
    /// The host target was asked for but the input has no host entry.
    #[error("Can't find bundle for the host target")]
    MissingHostBundle,
    /// A malformed bundle.
    #[error("{0}")]
    Format(#[from] BundleError),
    /// A compressed input that does not decompress or whose hash does not match.
    #[error("Failed to decompress input: {0}")]
    Decompress(CompressedError),
    /// Compressing the output failed.
    #[error("{0}")]
    Compress(CompressedError),
    /// An object file that cannot be read or written.
    #[error("{0}")]
    Object(#[from] ObjectError),
    /// An archive that cannot be unbundled.
    #[error("{0}")]
    Archive(#[from] ArchiveError),
    /// Any other failure (the message).
    #[error("{0}")]
    Other(String),
}

/// What was asked for on the command line, before any file is opened.
#[derive(Debug, Clone)]
pub struct Request {
    /// The LLVM release whose bundler to follow (target rules, IDs written).
    pub release: LlvmRelease,
    /// The `-type` value.
    pub file_type: String,
    /// The `-targets` values, in order.
    pub targets: Vec<String>,
    /// How many `-input`s.
    pub input_count: usize,
    /// How many `-output`s.
    pub output_count: usize,
    /// `-unbundle`.
    pub unbundle: bool,
    /// `-list`.
    pub list: bool,
    /// `-check-input-archive`.
    pub check_input_archive: bool,
}

impl Default for Request {
    /// An empty request following LLVM 19, the library's behaviour before
    /// the release became a choice (the drop-in tool sets the release it
    /// follows, `llvm_release::follow`).
    fn default() -> Self {
        Request {
            release: LlvmRelease::Llvm19,
            file_type: String::new(),
            targets: Vec::new(),
            input_count: 0,
            output_count: 0,
            unbundle: false,
            list: false,
            check_input_archive: false,
        }
    }
}

/// The requested targets after validation.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The release whose rules parsed and match the IDs.
    pub release: LlvmRelease,
    /// Parsed IDs, in `-targets` order.
    pub ids: Vec<BundleEntryId>,
    /// The IDs LLVM 19 writes and matches with, in `-targets` order.
    pub standardized: Vec<String>,
    /// Index of the (last) host target.
    pub host_index: Option<usize>,
    /// Every target is hip or hipv4 (a host is then optional).
    pub hip_only: bool,
}

/// Checks a request in LLVM 19's order (steps that do not need files).
/// `-list` requests return `Ok(None)`.
pub fn validate(req: &Request) -> Result<Option<Targets>, BundlerError> {
    if req.list {
        if req.unbundle {
            return Err(BundlerError::UnbundleWithList);
        }
        if req.input_count != 1 {
            return Err(BundlerError::ListInputCount);
        }
        if req.output_count != 0 {
            return Err(BundlerError::ListWithOutputs);
        }
        if !req.targets.is_empty() {
            return Err(BundlerError::ListWithTargets);
        }
        return Ok(None);
    }
    if req.check_input_archive {
        if !req.unbundle {
            return Err(BundlerError::CheckArchiveWhileBundling);
        }
        if req.file_type != "a" {
            return Err(BundlerError::CheckArchiveNotArchive);
        }
    }
    if req.output_count == 0 {
        return Err(BundlerError::NoOutput);
    }
    if req.targets.is_empty() {
        return Err(BundlerError::NoTargets);
    }
    if req.unbundle {
        if req.input_count != 1 {
            return Err(BundlerError::UnbundleInputCount);
        }
        if req.output_count != req.targets.len() {
            return Err(BundlerError::UnbundleOutputCount);
        }
    } else {
        if req.file_type == "a" {
            return Err(BundlerError::ArchiveBundling);
        }
        if req.output_count != 1 {
            return Err(BundlerError::BundleOutputCount);
        }
        if req.input_count != req.targets.len() {
            return Err(BundlerError::BundleInputCount);
        }
    }
    let mut seen = BTreeSet::new();
    let mut ids = Vec::with_capacity(req.targets.len());
    let mut host_count = 0;
    let mut host_index = None;
    let mut hip_only = true;
    for (index, raw) in req.targets.iter().enumerate() {
        if !seen.insert(raw.as_str()) {
            return Err(BundlerError::DuplicateTarget);
        }
        if req.release.facts().refuses_three_field_host_triple && !has_six_field_shape(raw) {
            return Err(BundlerError::TargetFormat);
        }
        let id = BundleEntryId::parse_as(req.release, raw);
        let (kind_ok, triple_ok) = (id.is_kind_valid(), id.is_triple_valid());
        if !kind_ok || !triple_ok {
            let mut msg = format!("invalid target '{raw}'");
            if !kind_ok {
                msg.push_str(&format!(", unknown offloading kind '{}'", id.kind));
            }
            if !triple_ok {
                msg.push_str(&format!(", unknown target triple '{}'", id.triple.as_str()));
            }
            return Err(BundlerError::InvalidTarget(msg));
        }
        if id.is_host() {
            host_count += 1;
            host_index = Some(index);
        }
        if id.kind != "hip" && id.kind != "hipv4" {
            hip_only = false;
        }
        ids.push(id);
    }
    if let Some((a, b)) = find_conflicting_targets(&ids) {
        return Err(BundlerError::ConflictingTargets(a, b));
    }
    if (req.unbundle && host_count > 1) || (!req.unbundle && host_count != 1 && !hip_only) {
        return Err(BundlerError::HostCount(host_count));
    }
    let standardized: Vec<String> = ids.iter().map(BundleEntryId::standardized).collect();
    // Two spellings of one target (say `-gfx906` and `--gfx906`) make LLVM 19
    // write a bundle whose payloads sit at the wrong offsets, or silently skip
    // an output when unbundling. Refuse them instead.
    for (i, a) in standardized.iter().enumerate() {
        if let Some(j) = standardized[..i].iter().position(|b| b == a) {
            return Err(BundlerError::SameStandardizedTarget(
                req.targets[j].clone(),
                req.targets[i].clone(),
                a.clone(),
            ));
        }
    }
    Ok(Some(Targets { release: req.release, ids, standardized, host_index, hip_only }))
}

/// Parses `-type`; the error is LLVM's.
pub fn file_type(name: &str) -> Result<FileType, BundlerError> {
    FileType::parse(name).ok_or_else(|| BundlerError::InvalidFileType(name.to_string()))
}

/// Whether bundling adds sections to the host object (`-type=o` with an
/// object file as host input) rather than writing a bundle format. Such
/// output is never compressed: LLVM 19 compresses the bundle it would have
/// written and then writes the object instead. LLVM 19 crashes on HIP-only
/// object bundles (no host input to add sections to); we write those in
/// the binary format.
pub fn writes_object(file_type: FileType, targets: &Targets, inputs: &[&[u8]]) -> Result<bool, BundlerError> {
    Ok(match (file_type, targets.host_index) {
        (FileType::Object, Some(host)) => object_bundle::detect(inputs[host])?.is_some(),
        _ => false,
    })
}

/// The arguments after the program name of the `llvm-objcopy` command
/// LLVM's bundler runs to bundle objects (where [`writes_object`] holds),
/// which it prints instead under `-###`: per target in `-targets` order, a
/// section `__CLANG_OFFLOAD_BUNDLE__<id>` made from that target's input
/// (the host's from `empty_file`, an empty file), flagged
/// `readonly,exclude`; then `--`, the host input and the output.
/// docs/llvm-tests.md shows the command of LLVM 19 and 22.
pub fn objcopy_arguments(targets: &Targets, inputs: &[&str], empty_file: &str, output: &str) -> Vec<String> {
    let mut args = Vec::with_capacity(2 * targets.standardized.len() + 3);
    for (i, id) in targets.standardized.iter().enumerate() {
        let file = if Some(i) == targets.host_index { empty_file } else { inputs.get(i).copied().unwrap_or_default() };
        args.push(format!("--add-section=__CLANG_OFFLOAD_BUNDLE__{id}={file}"));
        args.push(format!("--set-section-flags=__CLANG_OFFLOAD_BUNDLE__{id}=readonly,exclude"));
    }
    args.push("--".to_string());
    let host = targets.host_index.and_then(|h| inputs.get(h)).copied().unwrap_or_default();
    args.push(host.to_string());
    args.push(output.to_string());
    args
}

/// Bundles one input per target into one output, entries in `-targets`
/// order with their standardized IDs.
pub fn bundle<'a>(
    file_type: FileType,
    targets: &Targets,
    inputs: &[&'a [u8]],
    align: u32,
) -> Result<Plan<'a>, BundlerError> {
    let entries: Vec<(&[u8], &'a [u8])> =
        targets.standardized.iter().map(String::as_bytes).zip(inputs.iter().copied()).collect();
    if writes_object(file_type, targets, inputs)? {
        let host = targets.host_index.unwrap_or_default();
        if let Some(format) = object_bundle::detect(inputs[host])? {
            return Ok(object_bundle::bundle(inputs[host], format, &entries, host)?);
        }
    }
    match file_type {
        FileType::Text { comment } => Ok(text::write(&text::Markers::new(comment), &entries)),
        FileType::Binary | FileType::Object => {
            let align = NonZeroU64::new(u64::from(align)).ok_or(BundlerError::ZeroAlignment)?;
            Ok(binary::write(&entries, align))
        }
        FileType::Archive => Err(BundlerError::ArchiveBundling),
    }
}

/// The records of a binary bundle's table in LLVM's iteration order: one
/// per distinct ID, holding the record of the last entry with that ID.
pub fn table_in_map_order<'a>(table: &[binary::TableEntry<'a>]) -> Vec<binary::TableEntry<'a>> {
    let ids: Vec<&[u8]> = table.iter().map(|e| e.id).collect();
    // The last entry of each ID, found in one pass: a search per distinct ID
    // would take quadratic time on a bundle with many entries.
    let mut last: std::collections::HashMap<&[u8], usize> = std::collections::HashMap::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        last.insert(id, i);
    }
    string_map_order(&ids, StringHash::Xxh3)
        .into_iter()
        .filter_map(|first| last.get(ids[first]).map(|&i| table[i]))
        .collect()
}

/// The entries of a whole binary bundle in LLVM's iteration order.
fn binary_entries_in_map_order(data: &[u8]) -> Result<Vec<binary::TableEntry<'_>>, BundlerError> {
    Ok(match binary::read_table(data, data.len() as u64)? {
        binary::Table::Complete(table) => table_in_map_order(&table),
        _ => Vec::new(),
    })
}

/// The object format of `input` when `-type=o` reads it as an object
/// (otherwise it is read as a binary bundle).
fn object_format(file_type: FileType, input: &[u8]) -> Result<Option<object_bundle::Format>, BundlerError> {
    Ok(if file_type == FileType::Object { object_bundle::detect(input)? } else { None })
}

/// The IDs `-list` prints, in LLVM 19's order.
pub fn list(file_type: FileType, input: &[u8]) -> Result<Vec<&[u8]>, BundlerError> {
    if let Some(format) = object_format(file_type, input)? {
        return Ok(object_bundle::bundles(input, format)?.into_iter().map(|b| b.id).collect());
    }
    match file_type {
        FileType::Text { comment } => {
            let mut reader = text::TextReader::new(input, comment);
            let mut ids = Vec::new();
            while let Some(id) = reader.next_id() {
                ids.push(id);
                reader.skip_entry()?;
            }
            Ok(ids)
        }
        FileType::Binary | FileType::Object | FileType::Archive => {
            Ok(binary_entries_in_map_order(input)?.into_iter().map(|e| e.id).collect())
        }
    }
}

/// An input after decompression, before its hash has been checked.
pub struct Decompressed<'a> {
    bytes: std::borrow::Cow<'a, [u8]>,
    /// Present when the input was a compressed bundle.
    pub info: Option<DecompressionInfo>,
}

/// What `-verbose` reports about a decompressed input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecompressionInfo {
    /// The compressed bundle's header.
    pub header: Header,
    /// Bytes of compressed data.
    pub compressed_len: usize,
    /// The truncated MD5 of the decompressed data (compare with
    /// `header.hash`).
    pub computed_hash: u64,
}

impl<'a> Decompressed<'a> {
    /// The bundle, once its stored hash is confirmed. LLVM 19 only reports a
    /// mismatch under `-verbose` and goes on with corrupt data; we refuse.
    pub fn into_verified(self) -> Result<std::borrow::Cow<'a, [u8]>, BundlerError> {
        match self.info {
            Some(i) if i.header.hash != i.computed_hash => {
                Err(BundlerError::Decompress(CompressedError::HashMismatch {
                    stored: i.header.hash,
                    computed: i.computed_hash,
                }))
            }
            _ => Ok(self.bytes),
        }
    }
}

/// Decompresses `input` if it is a compressed bundle (LLVM 19's test: at
/// least 20 bytes starting with `CCOB`); other inputs pass through. A blob
/// ends where its size field says; anything but zero padding after it is an
/// error, since LLVM 19 would feed it to the decompressor.
pub fn decompress_input(input: &[u8]) -> Result<Decompressed<'_>, BundlerError> {
    if !compressed::is_compressed(input) {
        return Ok(Decompressed { bytes: std::borrow::Cow::Borrowed(input), info: None });
    }
    let blob = compressed::read_single_blob(input).map_err(BundlerError::Decompress)?;
    let bytes = compressed::decompress_unverified(&blob).map_err(BundlerError::Decompress)?;
    let info = DecompressionInfo {
        header: blob.header,
        compressed_len: blob.data.len(),
        computed_hash: compressed::truncated_md5(&bytes),
    };
    Ok(Decompressed { bytes: std::borrow::Cow::Owned(bytes), info: Some(info) })
}

/// Compresses a bundled output (the `-compress` step).
pub fn compress(bundle: &[u8], options: &CompressOptions) -> Result<compressed::Compressed, BundlerError> {
    compressed::compress(bundle, options).map_err(BundlerError::Compress)
}

/// Options of an unbundling run.
#[derive(Debug, Clone, Copy, Default)]
pub struct UnbundleOptions {
    /// `-allow-missing-bundles`: a target with no entry gets an empty
    /// output instead of an error.
    pub allow_missing_bundles: bool,
    /// `-hip-openmp-compatible`: HIP entries also serve OpenMP targets.
    pub hip_openmp_compatible: bool,
}

/// The bundles of an input, visited the way LLVM's handlers visit them.
enum Visitor<'a> {
    /// Table records in map order, the current payload, the whole input.
    Binary(std::vec::IntoIter<binary::TableEntry<'a>>, Option<&'a [u8]>, &'a [u8]),
    Text(text::TextReader<'a>),
    /// Bundle sections in section order, the current one, the whole object.
    Object(
        std::vec::IntoIter<object_bundle::BundleSection<'a>>,
        Option<object_bundle::BundleSection<'a>>,
        object_bundle::Format,
        &'a [u8],
    ),
}

/// The bundles of an input in LLVM's handler order: each ID, then, only if
/// the entry is wanted, its payload (for text bundles that matters: an
/// entry whose payload is not read is skipped only past its START line).
trait Cursor<'a> {
    type Payload;
    fn next_id(&mut self) -> Option<&'a [u8]>;
    fn payload(&mut self) -> Result<Self::Payload, BundlerError>;
}

impl<'a> Cursor<'a> for Visitor<'a> {
    type Payload = Plan<'a>;

    fn next_id(&mut self) -> Option<&'a [u8]> {
        match self {
            Visitor::Binary(it, current, whole) => it.next().map(|e| {
                // read_table checked the range against the input.
                *current = whole.get(e.offset as usize..(e.offset + e.size) as usize);
                e.id
            }),
            Visitor::Text(reader) => reader.next_id(),
            Visitor::Object(it, current, ..) => it.next().map(|b| {
                *current = Some(b);
                b.id
            }),
        }
    }

    fn payload(&mut self) -> Result<Plan<'a>, BundlerError> {
        match self {
            Visitor::Binary(_, current, _) => Ok(Plan::borrowed(current.unwrap_or_default())),
            Visitor::Text(reader) => Ok(Plan::borrowed(reader.payload()?)),
            Visitor::Object(_, current, format, whole) => match current {
                Some(b) if b.is_host_marker() => Ok(object_bundle::host_object(whole, *format)?),
                Some(b) => Ok(Plan::borrowed(b.contents)),
                None => Ok(Plan::new()),
            },
        }
    }
}

/// Unbundles a heterogeneous device archive (`-type=a`) named `archive`:
/// one archive per requested target, in `-targets` order. `thin` reads the
/// member files of a thin archive (refused without it).
pub fn unbundle_archive(
    targets: &Targets,
    input: &[u8],
    archive: &str,
    options: UnbundleOptions,
    check_input_archive: bool,
    thin: Option<archive::ThinMemberReader>,
) -> Result<Vec<Plan<'static>>, BundlerError> {
    let options = ArchiveOptions {
        allow_missing_bundles: options.allow_missing_bundles,
        hip_openmp_compatible: options.hip_openmp_compatible,
        check_input_archive,
        release: targets.release,
    };
    let archives = archive::unbundle(&targets.standardized, input, archive, options, thin)?;
    Ok(archives
        .into_iter()
        .map(|bytes| {
            let mut plan = Plan::new();
            plan.own(bytes);
            plan
        })
        .collect())
}

/// Formats LLVM's list of missing IDs: `X`, `X and Y`, `X, Y, and Z`.
fn english_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [a, b] => format!("{a} and {b}"),
        [rest @ .., last] => format!("{}, and {last}", rest.join(", ")),
    }
}

/// What unbundling puts into one output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fill<P> {
    /// The payload of the entry that matched.
    Payload(P),
    /// No entry matched anything: a host output gets the whole input.
    WholeInput,
    /// Nothing (an empty file).
    Empty,
}

/// LLVM 19's unbundling loop: each bundle, in handler order, goes to the
/// first requested target in the work list (a `StringMap`, so its hash
/// order) it is compatible with, which then leaves the list. Then the rules
/// for missing bundles, the plain-input-is-the-host rule and the host check.
fn fill_outputs<'a, C: Cursor<'a>>(
    targets: &Targets,
    options: UnbundleOptions,
    cursor: &mut C,
) -> Result<Vec<Fill<C::Payload>>, BundlerError> {
    let mut worklist = string_map_order(&targets.standardized, StringHash::Xxh3);
    let requested: Vec<BundleEntryId> =
        targets.standardized.iter().map(|s| BundleEntryId::parse_as(targets.release, s)).collect();
    let mut fills: Vec<Fill<C::Payload>> = targets.standardized.iter().map(|_| Fill::Empty).collect();
    let mut found_host = false;
    while !worklist.is_empty() {
        let Some(id) = cursor.next_id() else { break };
        let stored = BundleEntryId::parse_as(targets.release, &String::from_utf8_lossy(id));
        let Some(pos) = worklist.iter().position(|&key| {
            is_compatible(&stored, &requested[key], &targets.standardized[key], options.hip_openmp_compatible)
        }) else {
            continue;
        };
        let output = worklist.remove(pos);
        fills[output] = Fill::Payload(cursor.payload()?);
        found_host |= stored.is_host();
    }

    if !options.allow_missing_bundles && !worklist.is_empty() {
        let missing: BTreeSet<&str> = worklist.iter().map(|&key| targets.standardized[key].as_str()).collect();
        return Err(BundlerError::MissingBundles(english_list(&missing.into_iter().collect::<Vec<_>>())));
    }
    if worklist.len() == targets.standardized.len() {
        // Nothing matched: the input is taken to be the host's.
        for &output in &worklist {
            if requested[output].is_host() {
                fills[output] = Fill::WholeInput;
            }
        }
        return Ok(fills);
    }
    if !(found_host || targets.host_index.is_none() || options.allow_missing_bundles) {
        return Err(BundlerError::MissingHostBundle);
    }
    // Outputs still in the work list stay empty.
    Ok(fills)
}

/// Unbundles `input`: one plan per requested target, in `-targets` order.
pub fn unbundle<'a>(
    file_type: FileType,
    targets: &Targets,
    input: &'a [u8],
    options: UnbundleOptions,
) -> Result<Vec<Plan<'a>>, BundlerError> {
    let mut visitor = match (file_type, object_format(file_type, input)?) {
        (_, Some(format)) => Visitor::Object(object_bundle::bundles(input, format)?.into_iter(), None, format, input),
        (FileType::Text { comment }, _) => Visitor::Text(text::TextReader::new(input, comment)),
        (FileType::Binary | FileType::Object, _) => {
            Visitor::Binary(binary_entries_in_map_order(input)?.into_iter(), None, input)
        }
        (FileType::Archive, _) => {
            return Err(BundlerError::Other("archives are unbundled by unbundle_archive".into()));
        }
    };
    Ok(fill_outputs(targets, options, &mut visitor)?
        .into_iter()
        .map(|fill| match fill {
            Fill::Payload(plan) => plan,
            Fill::WholeInput => Plan::borrowed(input),
            Fill::Empty => Plan::new(),
        })
        .collect())
}

/// Table records as a cursor; a payload is its (offset, size).
struct TableCursor<'a>(std::vec::IntoIter<binary::TableEntry<'a>>, Option<(u64, u64)>);

impl<'a> Cursor<'a> for TableCursor<'a> {
    type Payload = (u64, u64);
    fn next_id(&mut self) -> Option<&'a [u8]> {
        self.0.next().map(|e| {
            self.1 = Some((e.offset, e.size));
            e.id
        })
    }
    fn payload(&mut self) -> Result<(u64, u64), BundlerError> {
        Ok(self.1.unwrap_or_default())
    }
}

/// Unbundling decisions for a binary bundle known only by its entry table
/// (`None`: the input is not a bundle), so that its payloads can be written
/// while the input streams by: each output gets an (offset, size) range of
/// the input, the whole input, or nothing. Same rules as [`unbundle`].
pub fn unbundle_table(
    targets: &Targets,
    table: Option<&[binary::TableEntry<'_>]>,
    options: UnbundleOptions,
) -> Result<Vec<Fill<(u64, u64)>>, BundlerError> {
    let ordered = table.map(table_in_map_order).unwrap_or_default();
    fill_outputs(targets, options, &mut TableCursor(ordered.into_iter(), None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(targets: &[&str], unbundle: bool) -> Request {
        Request {
            file_type: "bc".into(),
            targets: targets.iter().map(|s| s.to_string()).collect(),
            input_count: if unbundle { 1 } else { targets.len() },
            output_count: if unbundle { targets.len() } else { 1 },
            unbundle,
            ..Request::default()
        }
    }

    fn targets(list: &[&str], unbundle: bool) -> Targets {
        validate(&request(list, unbundle)).unwrap().unwrap()
    }

    const HOST: &str = "host-x86_64-unknown-linux-gnu";
    const G906: &str = "hip-amdgcn-amd-amdhsa--gfx906";
    const G908: &str = "hip-amdgcn-amd-amdhsa--gfx908";

    #[test]
    fn objcopy_command_adds_one_section_per_target_and_reads_the_host() {
        let t = targets(&[G906, HOST, G908], false);
        let args = objcopy_arguments(&t, &["a.o", "h.o", "b.o"], "/tmp/empty.tmp", "out.o");
        let id = |s: &str| t.standardized[["a", "h", "b"].iter().position(|x| *x == s).unwrap()].clone();
        let want: Vec<String> = [
            format!("--add-section=__CLANG_OFFLOAD_BUNDLE__{}=a.o", id("a")),
            format!("--set-section-flags=__CLANG_OFFLOAD_BUNDLE__{}=readonly,exclude", id("a")),
            format!("--add-section=__CLANG_OFFLOAD_BUNDLE__{}=/tmp/empty.tmp", id("h")),
            format!("--set-section-flags=__CLANG_OFFLOAD_BUNDLE__{}=readonly,exclude", id("h")),
            format!("--add-section=__CLANG_OFFLOAD_BUNDLE__{}=b.o", id("b")),
            format!("--set-section-flags=__CLANG_OFFLOAD_BUNDLE__{}=readonly,exclude", id("b")),
            "--".into(),
            "h.o".into(),
            "out.o".into(),
        ]
        .into();
        assert_eq!(args, want);
        assert!(id("h").starts_with("host-x86_64-unknown-linux-gnu"));
    }

    #[test]
    fn validation_messages_in_order() {
        let e = |r: Request| validate(&r).unwrap_err().to_string();
        let mut r = request(&[HOST], false);
        r.list = true;
        r.unbundle = true;
        assert_eq!(e(r.clone()), "-unbundle and -list cannot be used together");
        r.unbundle = false;
        assert_eq!(e(r.clone()), "-outputs option is invalid for -list");
        r.output_count = 0;
        assert_eq!(e(r.clone()), "-targets option is invalid for -list");
        r.targets.clear();
        r.input_count = 2;
        assert_eq!(e(r.clone()), "only one input file supported for -list");
        let mut r = request(&[HOST], false);
        r.output_count = 0;
        assert_eq!(e(r), "no output file specified!");
        let mut r = request(&[HOST], false);
        r.targets.clear();
        assert_eq!(e(r), "for the --targets option: must be specified at least once!");
        let mut r = request(&[HOST, G906], true);
        r.output_count = 1;
        assert_eq!(e(r), "number of output files and targets should match in unbundling mode");
        let mut r = request(&[HOST], false);
        r.input_count = 2;
        assert_eq!(e(r), "number of input files and targets should match in bundling mode");
        assert_eq!(e(request(&[HOST, HOST], false)), "Duplicate targets are not allowed");
        assert_eq!(
            e(request(&["foo-bar"], false)),
            "invalid target 'foo-bar', unknown offloading kind 'foo', unknown target triple 'bar---'"
        );
        assert_eq!(
            e(request(&[HOST, "cuda-nvptx64-nvidia-cuda"], false)),
            "invalid target 'cuda-nvptx64-nvidia-cuda', unknown offloading kind 'cuda'"
        );
        assert_eq!(
            e(request(&["hip-amdgcn-amd-amdhsa--gfx90a", "hip-amdgcn-amd-amdhsa--gfx90a:xnack+"], false)),
            "Cannot bundle inputs with conflicting targets: 'hip-amdgcn-amd-amdhsa--gfx90a' and 'hip-amdgcn-amd-amdhsa--gfx90a:xnack+'"
        );
        assert_eq!(
            e(request(&["openmp-amdgcn-amd-amdhsa--gfx906", G906], false)),
            "expecting exactly one host target but got 0"
        );
        assert!(validate(&request(&[G906, G908], false)).is_ok());
        assert_eq!(
            e(request(&["hip-amdgcn-amd-amdhsa-gfx906", G906], true)),
            "Duplicate targets are not allowed: 'hip-amdgcn-amd-amdhsa-gfx906' and 'hip-amdgcn-amd-amdhsa--gfx906' both stand for 'hip-amdgcn-amd-amdhsa--gfx906'"
        );
    }

    #[test]
    fn bundle_then_list_and_unbundle() {
        let t = targets(&[HOST, G906, G908], false);
        let plan = bundle(FileType::Binary, &t, &[b"HOSTDATA", b"DEV1", b"DEVICE22"], 1).unwrap();
        let bytes = plan.to_vec();
        assert_eq!(bytes.len(), 212);
        let ids = list(FileType::Binary, &bytes).unwrap();
        assert_eq!(ids, [G906.as_bytes(), G908.as_bytes(), b"host-x86_64-unknown-linux-gnu-"]);
        let u = targets(&[G908, HOST], true);
        let out = unbundle(FileType::Binary, &u, &bytes, UnbundleOptions::default()).unwrap();
        assert_eq!(out[0].to_vec(), b"DEVICE22");
        assert_eq!(out[1].to_vec(), b"HOSTDATA");
    }

    #[test]
    fn missing_bundles_are_listed_sorted() {
        let u = targets(&[HOST, G906, G908], true);
        let e = unbundle(FileType::Binary, &u, b"plain", UnbundleOptions::default()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Can't find bundles for hip-amdgcn-amd-amdhsa--gfx906, hip-amdgcn-amd-amdhsa--gfx908, and host-x86_64-unknown-linux-gnu-"
        );
    }

    #[test]
    fn plain_input_is_the_host_when_missing_bundles_are_allowed() {
        let u = targets(&[HOST, G906], true);
        let opts = UnbundleOptions { allow_missing_bundles: true, ..Default::default() };
        let out = unbundle(FileType::Text { comment: "//" }, &u, b"int x;\n", opts).unwrap();
        assert_eq!(out[0].to_vec(), b"int x;\n");
        assert!(out[1].is_empty());
    }

    #[test]
    fn a_bundle_goes_to_at_most_one_target() {
        // gfx906 satisfies both requests; the work list order decides.
        let t = targets(&[G906], false);
        let bytes = bundle(FileType::Binary, &t, &[b"X"], 1).unwrap().to_vec();
        let u = targets(&["hip-amdgcn-amd-amdhsa--gfx906:xnack+", "hip-amdgcn-amd-amdhsa--gfx906:xnack-"], true);
        let opts = UnbundleOptions { allow_missing_bundles: true, ..Default::default() };
        let out = unbundle(FileType::Binary, &u, &bytes, opts).unwrap();
        let filled = out.iter().filter(|p| !p.is_empty()).count();
        assert_eq!(filled, 1);
    }

    #[test]
    fn zero_alignment_is_refused() {
        let t = targets(&[HOST], false);
        assert_eq!(bundle(FileType::Binary, &t, &[b"x"], 0).unwrap_err(), BundlerError::ZeroAlignment);
    }

    /// A duplicate ID keeps the last entry's payload, at the position of
    /// its first insertion, as in LLVM's StringMap.
    #[test]
    fn duplicate_ids_keep_the_last_payload() {
        let one = NonZeroU64::new(1).unwrap();
        let entries: [(&[u8], &[u8]); 4] = [(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")];
        let bytes = binary::write(&entries, one).to_vec();
        let got: Vec<(&[u8], &[u8])> = binary_entries_in_map_order(&bytes)
            .unwrap()
            .iter()
            .map(|e| (e.id, &bytes[e.offset as usize..(e.offset + e.size) as usize]))
            .collect();
        let order = string_map_order(&[b"a", b"b", b"c"], StringHash::Xxh3);
        let want: Vec<(&[u8], &[u8])> =
            order.iter().map(|&i| [(&b"a"[..], &b"3"[..]), (b"b", b"2"), (b"c", b"4")][i]).collect();
        assert_eq!(got, want);
    }

    /// 200,000 distinct entries: the last-entry lookup used to be a search
    /// per ID (quadratic, hours for a few megabytes of hostile header).
    #[test]
    fn many_entries_are_listed_in_linear_time() {
        let ids: Vec<Vec<u8>> = (0..200_000u32).map(|i| format!("e{i}").into_bytes()).collect();
        let entries: Vec<(&[u8], &[u8])> = ids.iter().map(|id| (id.as_slice(), &b""[..])).collect();
        let bytes = binary::write(&entries, NonZeroU64::new(1).unwrap()).to_vec();
        // Empty payloads sit at the end of the header, a valid offset.
        let listed = list(FileType::Binary, &bytes).unwrap();
        assert_eq!(listed.len(), ids.len());
    }

    #[test]
    fn english_lists() {
        assert_eq!(english_list(&["a"]), "a");
        assert_eq!(english_list(&["a", "b"]), "a and b");
        assert_eq!(english_list(&["a", "b", "c"]), "a, b, and c");
    }
}
