//! Finding every offload code object in any file, for the `offload`
//! inspector.
//!
//! [`scan`] walks a file of any kind and returns a flat list of
//! [`CodeObject`]s: the entries of binary, text and compressed bundles, the
//! images of OffloadBinary packages, and the `__CLANG_OFFLOAD_BUNDLE__*`
//! sections of fat objects. It looks in
//!
//! * raw files: a bundle, several bundles or compressed bundles back to
//!   back, concatenated OffloadBinaries, a text bundle;
//! * ELF, COFF and Mach-O objects, executables and shared libraries: the
//!   sections `.hip_fatbin` (`__HIP,__hip_fatbin` on Mach-O, `.hip_fat` in
//!   PE images), `.llvm.offloading*`, `__CLANG_OFFLOAD_BUNDLE__<ID>`, and any
//!   other section that starts with a bundle, compressed-bundle or
//!   OffloadBinary header;
//! * `ar` archives (every member), and LLVM bitcode (`!llvm.embedded.objects`);
//! * nested payloads: an entry or image that is itself a bundle, compressed
//!   bundle, OffloadBinary or archive (and, for host entries, an object).
//!
//! Listing reads headers only: payloads are located, not read. For a
//! compressed bundle the stream is decoded only as far as the bundle header
//! inside it (text bundles, whose IDs are spread through the data, are
//! decoded in full). With [`Options::deep`] every compressed bundle is
//! decompressed and checked, and every entry is checked against what it
//! claims to be: that is what `offload verify` runs.
//!
//! # The three common tasks
//!
//! The examples use a HIP bundle compiled for `gfx906` and `gfx90a:xnack+`
//! (the repository's `samples/hip-gfx906-gfx90a.bc`: a host entry and two
//! device entries). For a file on disk, read or memory-map it and pass the
//! bytes; the name passed to [`scan`] is only used in messages.
//!
//! ## List the code objects of a file
//!
//! ```
//! use offload_inspect::{Options, scan};
//!
//! let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.bc");
//! let inventory = scan(data, "hip-gfx906-gfx90a.bc", &Options::default());
//! for o in &inventory.objects {
//!     // The bundle entry ID, the canonical target ID, the size in bytes,
//!     // and where the object lies ("file", "member libx.a(foo.o) section
//!     // .hip_fatbin", ...).
//!     println!("{}\t{}\t{}\t{}", o.id, o.target_id, o.size, o.location);
//! }
//! let targets: Vec<&str> = inventory.objects.iter().map(|o| o.target_id.as_str()).collect();
//! assert_eq!(targets, ["", "gfx906", "gfx90a:xnack+"]);
//! assert!(!inventory.has_errors());
//! ```
//!
//! ## Select the code object a GPU loads
//!
//! ```
//! use offload_inspect::select::{Gpu, Runtime, Verdict, select};
//! use offload_inspect::{Options, scan};
//!
//! let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.bc");
//! let inventory = scan(data, "sample", &Options::default());
//! // A GPU as `rocminfo` or `--offload-arch` names it, features included.
//! let gpu = Gpu::parse("gfx90a:xnack+")?;
//! let selection = select(&inventory.objects, &gpu, Runtime::Hip);
//! let chosen: Vec<&str> =
//!     selection.chosen.iter().map(|&i| inventory.objects[i].target_id.as_str()).collect();
//! assert_eq!(chosen, ["gfx90a:xnack+"]);
//! // Every other object has a verdict that says why it was not taken.
//! if let Some(Verdict::Rejected(why)) = &selection.verdicts[1] {
//!     println!("{}: {}", why.code(), why.explain(&gpu, Runtime::Hip));
//! }
//! # Ok::<(), offload_inspect::select::GpuError>(())
//! ```
//!
//! ## Extract a code object's bytes, decompressing
//!
//! ```
//! use offload_inspect::{Options, scan};
//!
//! // The same bundle, compressed with `clang-offload-bundler -compress`.
//! let data = include_bytes!("../../../samples/hip-gfx906-gfx90a.compressed.bc");
//! let inventory = scan(data, "sample", &Options::default());
//! let gfx906 = inventory.objects.iter().find(|o| o.target_id == "gfx906").unwrap();
//! assert!(gfx906.compressed);
//! // Decompressed, with the bundle's hash checked.
//! let bytes = inventory.bytes(gfx906)?;
//! assert_eq!(bytes.len() as u64, gfx906.size);
//! # Ok::<(), offload_inspect::BytesError>(())
//! ```
//!
//! To extract many objects, [`decode::visit_objects`] decompresses
//! each compressed bundle once, on several threads, with bounded memory.

pub mod ccob;
mod checks;
pub mod decode;
mod deep;
pub mod elf_flags;
pub mod id;
pub mod keep;
pub mod kernels;
pub mod kpack;
pub mod layout;
pub mod package;
pub mod record;
pub mod report;
mod scan;
pub mod select;
pub mod select_cuda;
pub mod uri;

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

pub use scan::scan;

/// How far [`scan`] looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Decompress and check everything (`verify`).
    pub deep: bool,
    /// How many containers deep to follow nesting (archive in archive,
    /// bundle in OffloadBinary, ...).
    pub max_depth: usize,
    /// Threads that decompress bundles for a deep scan; 0: one per core
    /// (fewer when the bundles are large, see [`decode::MEMORY_BUDGET`]).
    pub workers: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options { deep: false, max_depth: 8, workers: 0 }
    }
}

/// One step of the path from the file to a code object.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// A member of an archive, named by the archive's name.
    Member {
        /// The archive's name as shown in messages.
        archive: String,
        /// The member's name as the archive stores it.
        member: String,
    },
    /// A section of an object (`segment,section` on Mach-O).
    Section(String),
    /// The n-th payload of a section or file holding several back to back.
    Index(usize),
    /// Inside the payload of the bundle entry with this ID.
    Entry(String),
    /// Inside the image of the n-th entry of an OffloadBinary.
    Image(usize),
    /// A global of an LLVM bitcode module (`!llvm.embedded.objects`).
    Global(String),
    /// A file inside a package (zip, wheel, tar, deb, conda), by its path
    /// there: `member torch/lib/libx.so` (see [`crate::package`]).
    PackageMember(String),
    /// A ROCm kpack archive another file leads to (a kpack-split host
    /// binary's search paths), by its path as the loader forms it.
    KpackArchive(String),
    /// An entry of a kpack archive's table of contents: its binary key
    /// (`<kernel_name>#<co_index>`) and the target it is filed under.
    KpackEntry {
        /// The binary key.
        key: String,
        /// The target ID it is filed under.
        target: String,
    },
}

/// Where a code object lies, outermost step first. Displayed as the steps
/// separated by spaces (`member libx.a(foo.o) section .hip_fatbin #1`);
/// `file` stands for the file itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location(pub Vec<Step>);

impl Location {
    pub(crate) fn with(&self, step: Step) -> Location {
        let mut steps = self.0.clone();
        steps.push(step);
        Location(steps)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Member { archive, member } => write!(f, "member {archive}({member})"),
            Step::Section(name) => write!(f, "section {name}"),
            Step::Index(i) => write!(f, "#{i}"),
            Step::Entry(id) => write!(f, "entry {id}"),
            Step::Image(i) => write!(f, "image {i}"),
            Step::Global(name) => write!(f, "global {name}"),
            Step::PackageMember(path) => write!(f, "member {path}"),
            Step::KpackArchive(path) => write!(f, "kpack {path}"),
            Step::KpackEntry { key, target } => write!(f, "key {key} target {target}"),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let starts_with_container = matches!(
            self.0.first(),
            Some(
                Step::Member { .. }
                    | Step::Section(_)
                    | Step::Global(_)
                    | Step::PackageMember(_)
                    | Step::KpackArchive(_)
            )
        );
        if !starts_with_container {
            f.write_str("file")?;
        }
        for (i, step) in self.0.iter().enumerate() {
            if i > 0 || !starts_with_container {
                f.write_str(" ")?;
            }
            write!(f, "{step}")?;
        }
        Ok(())
    }
}

/// The container format a code object was found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// A binary bundle (`__CLANG_OFFLOAD_BUNDLE__` header), or a fat
    /// object's `__CLANG_OFFLOAD_BUNDLE__<ID>` section.
    Bundle,
    /// A bundle inside a `CCOB` compressed bundle.
    CompressedBundle,
    /// A text bundle (marker comment lines).
    TextBundle,
    /// An OffloadBinary image.
    OffloadBinary,
    /// An entry of an NVIDIA CUDA fat binary (`.nv_fatbin`,
    /// `__nv_relfatbin`, `.fatbin` files).
    CudaFatbin,
    /// A cubin on its own (an ELF for EM_CUDA).
    Cubin,
    /// An entry of a ROCm kpack archive (`.kpack`), found in the archive
    /// itself or through a kpack-split host binary
    /// (`docs/formats/kpack.md`).
    KpackArchive,
}

impl Format {
    /// The name used in listings and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Format::Bundle => "bundle",
            Format::CompressedBundle => "compressed-bundle",
            Format::TextBundle => "text-bundle",
            Format::OffloadBinary => "offload-binary",
            Format::CudaFatbin => "cuda-fatbin",
            Format::Cubin => "cubin",
            Format::KpackArchive => "kpack-archive",
        }
    }
}

/// Bytes that live either in the scanned file or in a buffer the scan made
/// (data decoded from bitcode or decompressed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bytes<'a> {
    /// A slice of the scanned file.
    Borrowed(&'a [u8]),
    /// `len` bytes at `start` of a buffer the [`Inventory`] owns; only the
    /// inventory that made it can resolve it (the numbers are checked
    /// again when resolved, so a stale one yields no bytes, not a panic).
    Owned {
        /// Which of the inventory's buffers.
        buffer: usize,
        /// Offset in that buffer.
        start: usize,
        /// Length in bytes.
        len: usize,
    },
}

/// How to get a code object's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Payload<'a> {
    /// Stored as is.
    Plain(Bytes<'a>),
    /// `len` bytes at `start` of the decompressed contents of the
    /// compressed bundle `blob` (header included).
    Compressed {
        /// The whole compressed bundle, header included.
        blob: Bytes<'a>,
        /// Offset of the object in the decompressed bundle.
        start: u64,
        /// The object's size in bytes.
        len: u64,
    },
    /// `len` bytes at `start` of a CUDA fat binary entry's decoded
    /// `stream`, which declares `uncompressed` bytes (for PTX, the text
    /// without the NUL that ends the stream).
    Cuda {
        /// The entry's stored (possibly compressed) data.
        stream: Bytes<'a>,
        /// How `stream` is compressed.
        codec: offload_format::cuda::Codec,
        /// The size `stream` declares once decoded, in bytes.
        uncompressed: u64,
        /// Offset of the object in the decoded stream.
        start: u64,
        /// The object's size in bytes.
        len: u64,
    },
    /// The stored bytes of one entry of a kpack archive: a zstd frame (or
    /// the code object itself for the `none` scheme) that decodes to `len`
    /// bytes.
    Kpack {
        /// The stored bytes.
        stored: Bytes<'a>,
        /// How they are stored.
        scheme: offload_format::kpack::Scheme,
        /// The entry's ordinal in its archive.
        ordinal: u32,
        /// The size the entry declares once decoded.
        len: u64,
    },
}

/// What a CUDA fat binary entry's header says, for the rules that pick one
/// (`select --kind cuda`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaEntry {
    /// What the entry holds (cubin, PTX, ...).
    pub kind: offload_format::cuda::EntryKind,
    /// The header's architecture with its `a`/`f` suffix.
    pub arch: offload_format::cuda::Arch,
    /// The entry header's flag bits as stored (compression, 64-bit, ...).
    pub flags: u64,
    /// Found in `__nv_relfatbin`: relocatable device code that `nvlink`
    /// reads, never loaded by the runtime as such.
    pub relocatable: bool,
    /// Absolute offset of the fat binary's header in the scanned file, when
    /// it lies there.
    pub fatbin: Option<u64>,
    /// In an executable or shared library whose `.nvFatBinSegment` records
    /// point at other fat binaries only: the runtime never registers it.
    pub unregistered: bool,
}

/// One code object (or host entry) found in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeObject<'a> {
    /// Where it lies in the scanned file.
    pub location: Location,
    /// The container it is an entry of.
    pub format: Format,
    /// The bundle entry ID as stored; for OffloadBinary images
    /// `<triple>-<arch>`.
    pub id: String,
    /// `host`, `hip`, `hipv4`, `openmp`, ... as stored in a bundle ID; the
    /// offload kind's name (`openmp`, `cuda`, `hip`, `none`) for images.
    pub offload_kind: String,
    /// The triple, without an empty trailing environment.
    pub triple: String,
    /// The canonical target ID (`gfx90a:sramecc-:xnack+`); the stored one
    /// when it cannot be canonicalised; empty when there is none.
    pub target_id: String,
    /// Why the stored target ID has no canonical form, if it has none.
    pub target_id_error: Option<String>,
    /// The target ID as stored (the `arch` string of an OffloadBinary).
    pub stored_target: String,
    /// Uncompressed size in bytes.
    pub size: u64,
    /// Absolute offset of the bytes in the scanned file, when they are
    /// stored there as is.
    pub offset: Option<u64>,
    /// Stored compressed (a compressed bundle, or a compressed CUDA
    /// entry): [`Inventory::bytes`] decompresses it.
    pub compressed: bool,
    /// Index into [`Inventory::units`]: the fat binary (bundle, compressed
    /// bundle, or set of OffloadBinaries of one section) that a runtime
    /// registers as one.
    pub unit: usize,
    /// The payload holds further code objects (listed after this one);
    /// such records are not candidates for selection.
    pub container: bool,
    /// OffloadBinary images only: the kind of image.
    pub image_kind: Option<offload_format::offload_binary::ImageKind>,
    /// How to get its bytes; use [`Inventory::bytes`] rather than reading
    /// this directly.
    pub payload: Payload<'a>,
    /// CUDA fat binary entries and cubins only.
    pub cuda: Option<CudaEntry>,
    /// kpack archive entries only: which archive, key and target.
    pub kpack: Option<kpack::KpackRef>,
}

impl CodeObject<'_> {
    /// What the image is, for the JSON key `image_kind`: CUDA entries as
    /// `cuobjdump` names them (`elf`, `ptx`, `nvvm`, `concat`), a lone
    /// cubin `elf`, OffloadBinary images by LLVM's name for their kind
    /// (`o`, `bc`, `cubin`, `fatbin`, `s`, `spv`, `none`); bundle entries
    /// record no kind.
    pub fn image_kind_name(&self) -> Option<String> {
        match (&self.cuda, self.image_kind) {
            (Some(c), _) => Some(c.kind.name()),
            (None, Some(k)) => Some(k.to_string()),
            (None, None) => None,
        }
    }
}

/// A set of code objects a runtime registers together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Where the unit lies in the scanned file.
    pub location: Location,
    /// Its container format.
    pub format: Format,
}

/// How bad a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Severity {
    /// Something unusual that a tool or runtime still accepts.
    Warning,
    /// Malformed or inconsistent data: `offload verify` fails on it.
    Error,
}

impl Severity {
    /// `warning` or `error`, as in listings and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// A problem found while scanning or checking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// How bad it is.
    pub severity: Severity,
    /// Absolute offset in the scanned file of the byte concerned (or of the
    /// compressed bundle or container holding it), when known.
    pub offset: Option<u64>,
    /// Where it is, in the words of [`Location`]'s display.
    pub location: String,
    /// What is wrong, in one sentence.
    pub message: String,
}

/// Why a code object's bytes could not be produced.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BytesError {
    /// The compressed bundle is malformed, does not decompress, or its
    /// hash does not match.
    #[error(transparent)]
    Compressed(#[from] offload_format::bundle::compressed::CompressedError),
    /// The decompressed data is shorter than the object's place in it.
    #[error("the code object lies outside its decompressed bundle")]
    OutOfRange,
    /// A CUDA entry's stream does not decode.
    #[error(transparent)]
    Cuda(#[from] offload_format::cuda::CudaError),
    /// A kpack archive entry does not decode to its declared size.
    #[error(transparent)]
    Kpack(#[from] offload_format::kpack::ArchiveError),
}

/// Everything [`scan`] found. It can be shared between threads (see
/// [`decode::visit_objects`]).
#[derive(Debug, Default)]
pub struct Inventory<'a> {
    /// Every code object found, in file order; a container record comes
    /// before the objects inside it.
    pub objects: Vec<CodeObject<'a>>,
    /// The units the objects belong to ([`CodeObject::unit`]).
    pub units: Vec<Unit>,
    /// What was found wrong or unusual, in the order found.
    pub diagnostics: Vec<Diagnostic>,
    /// The `HIPK` records of a kpack-split host binary, when
    /// [`kpack::attach`] looked at them.
    pub kpack: Option<kpack::Split>,
    owned: Vec<Arc<[u8]>>,
}

impl<'a> Inventory<'a> {
    fn resolve(&self, bytes: Bytes<'a>) -> &[u8] {
        match bytes {
            Bytes::Borrowed(b) => b,
            Bytes::Owned { buffer, start, len } => {
                self.owned.get(buffer).and_then(|b| b.get(start..start.checked_add(len)?)).unwrap_or(&[])
            }
        }
    }

    /// What an object's image is, for the IMAGE column of tables: `ELF`,
    /// `PTX`, `bitcode`, `SPIR-V`, `NVVM`, `fatbin`, `bundle`, `offload`
    /// (an OffloadBinary), `archive`, `assembly`, or `-` when it cannot be
    /// told cheaply. Bytes stored as they are are recognised by their
    /// first bytes; otherwise the container's own record (a CUDA entry's
    /// kind, an OffloadBinary's image kind) says it. Nothing is
    /// decompressed for a column.
    pub fn image_label(&self, object: &CodeObject<'a>) -> &'static str {
        if let Payload::Plain(b) = object.payload
            && let Some(label) = sniff_image(self.resolve(b))
        {
            return label;
        }
        match object.image_kind_name().as_deref() {
            Some("elf" | "cubin" | "o") => "ELF",
            Some("ptx") => "PTX",
            Some("nvvm") => "NVVM",
            Some("bc") => "bitcode",
            Some("spv") => "SPIR-V",
            Some("fatbin") => "fatbin",
            Some("s") => "assembly",
            Some("concat") => "concat",
            _ => "-",
        }
    }

    /// The bytes of one code object; a compressed one is decompressed (and
    /// its bundle's hash checked) at every call, and nothing is kept: to
    /// get the bytes of several objects, use [`decode::visit_objects`],
    /// which decodes each bundle once.
    pub fn bytes(&self, object: &CodeObject<'a>) -> Result<Cow<'_, [u8]>, BytesError> {
        match object.payload {
            Payload::Plain(b) => Ok(Cow::Borrowed(self.resolve(b))),
            Payload::Compressed { blob, start, len } => {
                let blob = offload_format::bundle::compressed::read_blob(self.resolve(blob))?;
                let mut data = Vec::new();
                decode::decode_checked_into(&blob, &mut data)?;
                keep_range(data, start, len).map(Cow::Owned)
            }
            Payload::Cuda { stream, codec, uncompressed, start, len } => {
                let data = offload_format::cuda::decompress(codec, self.resolve(stream), uncompressed)?;
                keep_range(data, start, len).map(Cow::Owned)
            }
            Payload::Kpack { stored, scheme, ordinal, len } => {
                kpack::decode(self.resolve(stored), scheme, ordinal, len).map(Cow::Owned)
            }
        }
    }

    /// Whether any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(|d| d.severity == Severity::Error)
    }
}

/// The `len` bytes at `start` of decoded data, without a second copy.
fn keep_range(mut data: Vec<u8>, start: u64, len: u64) -> Result<Vec<u8>, BytesError> {
    let range = usize::try_from(start)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(s, l)| Some(s..s.checked_add(l)?))
        .filter(|r| r.end <= data.len())
        .ok_or(BytesError::OutOfRange)?;
    data.truncate(range.end);
    data.drain(..range.start);
    Ok(data)
}

#[cfg(test)]
mod tests;

/// The kind of image `data` starts like, by its magic bytes.
fn sniff_image(data: &[u8]) -> Option<&'static str> {
    const MAGICS: [(&[u8], &str); 9] = [
        (b"\x7fELF", "ELF"),
        (b"BC\xc0\xde", "bitcode"),
        (b"\xde\xc0\x17\x0b", "bitcode"),
        (b"\x03\x02\x23\x07", "SPIR-V"),
        (b"\x50\xed\x55\xba", "fatbin"),
        (b"__CLANG_OFFLOAD_BUNDLE__", "bundle"),
        (b"CCOB", "bundle"),
        (b"\x10\xff\x10\xad", "offload"),
        (b"!<arch>\n", "archive"),
    ];
    if let Some((_, label)) = MAGICS.iter().find(|(m, _)| data.starts_with(m)) {
        return Some(label);
    }
    let head = &data[..data.len().min(4096)];
    let text = std::str::from_utf8(head).ok()?.trim_start_matches(|c: char| c.is_whitespace() || c == '\0');
    let ptx = text.starts_with("//") || text.starts_with(".version");
    (ptx && head.windows(8).any(|w| w == b".version")).then_some("PTX")
}
