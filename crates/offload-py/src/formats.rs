//! Writing and reading the containers themselves: binary bundles
//! (compressed or not) through the library's bundler API, compressed
//! bundles, and OffloadBinary packages. Output is what LLVM 19's
//! `clang-offload-bundler -type=bc` and `clang-offload-packager` write, or
//! with `llvm_version=22` what LLVM 22's bundler and `llvm-offload-binary`
//! write (the per-release facts are `offload_format::llvm_release`'s rows;
//! docs/llvm-releases.md, docs/library.md).

use crate::source::{Failure, Source};
use offload_format::bundle::FileType;
use offload_format::bundle::compressed::{self, CompressOptions};
use offload_format::bundler::{self, Request, UnbundleOptions};
use offload_format::llvm_release::LlvmRelease;
use offload_format::offload_binary::{Image, ImageArgs, ImageKind, OffloadBinary, RecordOrder, write_plan_for};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// The releases whose bundler and packager the writers can follow; 19
/// stays the default so that existing callers keep their bytes.
const WRITER_RELEASES: [LlvmRelease; 2] = [LlvmRelease::Llvm19, LlvmRelease::Llvm22];

/// The release `llvm_version=` names, or why it names none.
fn release(llvm_version: u32) -> Result<LlvmRelease, Failure> {
    LlvmRelease::from_major(llvm_version)
        .filter(|r| WRITER_RELEASES.contains(r))
        .ok_or_else(|| Failure::Invalid(format!("llvm_version={llvm_version}: the writers follow LLVM 19 or 22")))
}

fn bundler_error(e: bundler::BundlerError) -> Failure {
    Failure::Bundler(e.to_string())
}

fn materialise(plan: &offload_format::plan::Plan) -> Result<Vec<u8>, Failure> {
    plan.try_to_vec().ok_or_else(|| Failure::Format("the output does not fit in memory".into()))
}

fn to_bytes<'py>(py: Python<'py>, v: Vec<Vec<u8>>) -> Vec<Bound<'py, PyBytes>> {
    v.iter().map(|b| PyBytes::new(py, b)).collect()
}

/// A binary bundle of `inputs` (one per target, bundle entry IDs such as
/// `host-x86_64-unknown-linux-gnu`, `hip-amdgcn-amd-amdhsa--gfx90a:xnack+`),
/// as `clang-offload-bundler -type=bc [-compress]` of LLVM `llvm_version`
/// (19 or 22) writes it: 22 writes version 3 `CCOB`s and the AMDHSA
/// triple with an empty environment.
#[pyfunction]
#[pyo3(signature = (targets, inputs, *, compress = false, align = 1, llvm_version = 19))]
fn bundle<'py>(
    py: Python<'py>,
    targets: Vec<String>,
    inputs: Vec<Bound<'py, PyBytes>>,
    compress: bool,
    align: u32,
    llvm_version: u32,
) -> PyResult<Bound<'py, PyBytes>> {
    let release = release(llvm_version)?;
    // Borrowed, not copied: `bytes` objects are immutable and `inputs`
    // keeps them alive while the GIL is released.
    let slices: Vec<&[u8]> = inputs.iter().map(|b| b.as_bytes()).collect();
    let out = py.allow_threads(|| {
        let request = Request {
            release,
            file_type: "bc".into(),
            input_count: slices.len(),
            output_count: 1,
            targets,
            ..Request::default()
        };
        let targets =
            bundler::validate(&request).map_err(bundler_error)?.ok_or_else(|| Failure::Invalid("no targets".into()))?;
        let plan = bundler::bundle(FileType::Binary, &targets, &slices, align).map_err(bundler_error)?;
        let bytes = materialise(&plan)?;
        if compress {
            // The release's bundler defaults: zstd level 3 on one thread,
            // its CCOB version.
            let version = release.facts().ccob_default_version.unwrap_or(2);
            let options = CompressOptions { version, ..CompressOptions::default() };
            return Ok(bundler::compress(&bytes, &options).map_err(bundler_error)?.bytes);
        }
        Ok::<_, Failure>(bytes)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// The payloads for `targets` from a binary bundle (path or bytes,
/// compressed or not), as `clang-offload-bundler -type=bc -unbundle`
/// of LLVM `llvm_version` (19 or 22) chooses them; a target without an
/// entry gets empty bytes only with `allow_missing`.
#[pyfunction]
#[pyo3(signature = (input, targets, *, allow_missing = false, llvm_version = 19))]
fn unbundle<'py>(
    py: Python<'py>,
    input: &Bound<'py, PyAny>,
    targets: Vec<String>,
    allow_missing: bool,
    llvm_version: u32,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let release = release(llvm_version)?;
    let source = Source::from_py(input)?;
    let outputs = py.allow_threads(|| {
        let request = Request {
            release,
            file_type: "bc".into(),
            input_count: 1,
            output_count: targets.len(),
            targets,
            unbundle: true,
            ..Request::default()
        };
        let targets =
            bundler::validate(&request).map_err(bundler_error)?.ok_or_else(|| Failure::Invalid("no targets".into()))?;
        source.with_bytes(|data| {
            let bundle = bundler::decompress_input(data).and_then(|d| d.into_verified()).map_err(bundler_error)?;
            let options = UnbundleOptions { allow_missing_bundles: allow_missing, ..UnbundleOptions::default() };
            let plans = bundler::unbundle(FileType::Binary, &targets, &bundle, options).map_err(bundler_error)?;
            plans.iter().map(materialise).collect::<Result<Vec<_>, _>>()
        })
    })?;
    Ok(to_bytes(py, outputs))
}

/// The bundle inside a compressed bundle (`CCOB`), hash checked.
#[pyfunction]
fn decompress<'py>(py: Python<'py>, input: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let source = Source::from_py(input)?;
    let out = py.allow_threads(|| {
        source.with_bytes(|data| {
            if !compressed::is_compressed(data) {
                return Err(Failure::Format("not a compressed bundle (no CCOB header)".into()));
            }
            let err = |e: compressed::CompressedError| Failure::Format(format!("Failed to decompress input: {e}"));
            let blob = compressed::read_single_blob(data).map_err(err)?;
            compressed::decompress(&blob).map_err(err)
        })
    })?;
    Ok(PyBytes::new(py, &out))
}

/// One image to pack: its bytes and its string records, keys in the
/// order given (as on a packager command line).
struct PackImage<'py> {
    image: Bound<'py, PyBytes>,
    file: String,
    kind: Option<String>,
    /// Every key but `image`, `kind`, `file`, with its value.
    records: Vec<(String, String)>,
}

/// A [`PackImage`] borrowed as plain data.
struct ImageView<'a> {
    image: &'a [u8],
    file: &'a str,
    kind: Option<&'a str>,
    records: &'a [(String, String)],
}

fn pack_image<'py>(d: &Bound<'py, PyDict>, release: LlvmRelease) -> PyResult<PackImage<'py>> {
    let (mut image, mut file, mut kind, mut records) = (None, String::new(), None, Vec::new());
    for (k, v) in d.iter() {
        let key: String = k.extract()?;
        match key.as_str() {
            "image" => image = Some(v.downcast_into::<PyBytes>()?),
            "file" => file = v.extract()?,
            "kind" => kind = Some(v.extract()?),
            _ => records.push((key, v.extract()?)),
        }
    }
    // LLVM 19's packager requires a triple; LLVM 22's only a file, which
    // here is the image.
    let requires_triple = release.facts().packager_requires_triple;
    match image {
        Some(image) if !requires_triple || records.iter().any(|(k, _): &(String, String)| k == "triple") => {
            Ok(PackImage { image, file, kind, records })
        }
        Some(_) => Err(Failure::Invalid("'image' and 'triple' are required image keys".into()).into()),
        None => Err(Failure::Invalid("'image' is a required image key".into()).into()),
    }
}

/// An OffloadBinary package of `images`, as `clang-offload-packager
/// --image=file=F,triple=T,arch=A,kind=K,...` of LLVM 19 writes it, or
/// `llvm-offload-binary` of LLVM 22 with `llvm_version=22` (HIP stored as
/// 4, the bit-mask numbering, where 19 stores 3). Each image is a dict:
/// `image` (bytes) is required, and `triple` too for LLVM 19; `kind`
/// (openmp, cuda, hip; sycl for 22) sets the offload kind; `file` (a name)
/// only serves to infer the image kind from its extension, as the packager
/// does; every other key becomes a string record.
#[pyfunction]
#[pyo3(signature = (images, *, llvm_version = 19))]
fn pack<'py>(py: Python<'py>, images: Vec<Bound<'py, PyDict>>, llvm_version: u32) -> PyResult<Bound<'py, PyBytes>> {
    let release = release(llvm_version)?;
    let images = images.iter().map(|d| pack_image(d, release)).collect::<PyResult<Vec<_>>>()?;
    // What the work needs, without Python objects (the GIL is released).
    let views: Vec<ImageView> = images
        .iter()
        .map(|i| ImageView { image: i.image.as_bytes(), file: &i.file, kind: i.kind.as_deref(), records: &i.records })
        .collect();
    let out = py.allow_threads(|| {
        // The packager's arguments: `file` first, then the others in the
        // order given; the records are written in the packager's order.
        let args: Vec<ImageArgs> = views
            .iter()
            .map(|v| {
                let given = [("file", v.file)].into_iter().chain(v.kind.map(|k| ("kind", k)));
                ImageArgs::from_pairs(given.chain(v.records.iter().map(|(k, v)| (k.as_str(), v.as_str()))))
            })
            .collect();
        let mut written = Vec::new();
        for (&ImageView { image, file, .. }, args) in views.iter().zip(&args) {
            let strings: Vec<(&[u8], &[u8])> = args
                .string_records(RecordOrder::Llvm19)
                .into_iter()
                .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
                .collect();
            written.push(Image {
                image_kind: ImageKind::infer(file, image),
                offload_kind: args.offload_kind_in(release),
                flags: 0,
                strings,
                image,
            });
        }
        let plan = write_plan_for(release, &written).map_err(|e| Failure::Format(e.to_string()))?;
        materialise(&plan)
    })?;
    Ok(PyBytes::new(py, &out))
}

/// The images of the OffloadBinaries in a file or bytes (concatenated
/// packages included): dicts with `image`, `image_kind`, `offload_kind`,
/// `flags`, `version`, `offset` and `strings` (the string records).
#[pyfunction]
fn unpack<'py>(py: Python<'py>, input: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let source = Source::from_py(input)?;
    type Unpacked = (Vec<u8>, String, String, u32, u32, u64, Vec<(String, String)>);
    let images: Vec<Unpacked> = py.allow_threads(|| {
        source.with_bytes(|data| {
            let binaries =
                OffloadBinary::parse_all(data).map_err(|e| Failure::Format(format!("{}{e}", source.prefix())))?;
            Ok(binaries
                .iter()
                .map(|b| {
                    let strings = b
                        .strings()
                        .iter()
                        .map(|(k, v)| {
                            (String::from_utf8_lossy(k).into_owned(), String::from_utf8_lossy(v).into_owned())
                        })
                        .collect();
                    (
                        b.image().to_vec(),
                        b.image_kind().to_string(),
                        b.offload_kind().name().to_string(),
                        b.flags(),
                        b.version(),
                        b.offset(),
                        strings,
                    )
                })
                .collect())
        })
    })?;
    images
        .into_iter()
        .map(|(image, image_kind, offload_kind, flags, version, offset, strings)| {
            let d = PyDict::new(py);
            d.set_item("image", PyBytes::new(py, &image))?;
            d.set_item("image_kind", image_kind)?;
            d.set_item("offload_kind", offload_kind)?;
            d.set_item("flags", flags)?;
            d.set_item("version", version)?;
            d.set_item("offset", offset)?;
            let s = PyDict::new(py);
            for (k, v) in strings {
                s.set_item(k, v)?;
            }
            d.set_item("strings", s)?;
            Ok(d)
        })
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bundle, m)?)?;
    m.add_function(wrap_pyfunction!(unbundle, m)?)?;
    m.add_function(wrap_pyfunction!(decompress, m)?)?;
    m.add_function(wrap_pyfunction!(pack, m)?)?;
    m.add_function(wrap_pyfunction!(unpack, m)?)?;
    Ok(())
}
