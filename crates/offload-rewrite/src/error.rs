//! The readers' errors, whichever format's, as one type: what the
//! rewriters' own errors carry as their `#[source]` when an input (or an
//! output read back for its check) does not read. The message is the
//! reader's, unchanged.

use offload_format::bundle::BundleError;
use offload_format::bundle::compressed::CompressedError;
use offload_format::bundle::object::ObjectError;
use offload_format::coff::CoffError;
use offload_format::coff::pe::PeError;
use offload_format::cuda::CudaError;
use offload_format::elf::ElfError;
use offload_format::elf::segments::SegmentsError;
use offload_format::kpack::host::HostError;
use offload_inspect::layout::LayoutError;
use offload_inspect::layout::openmp::OpenMpError;

/// A file, or a part of one, that its format's reader refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// An ELF file.
    #[error(transparent)]
    Elf(#[from] ElfError),
    /// An ELF program header table.
    #[error(transparent)]
    Segments(#[from] SegmentsError),
    /// An uncompressed offload bundle.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A compressed offload bundle.
    #[error(transparent)]
    Compressed(#[from] CompressedError),
    /// The bundles of an object file's sections.
    #[error(transparent)]
    Object(#[from] ObjectError),
    /// A COFF object.
    #[error(transparent)]
    Coff(#[from] CoffError),
    /// A PE image.
    #[error(transparent)]
    Pe(#[from] PeError),
    /// A CUDA fat binary.
    #[error(transparent)]
    Cuda(#[from] CudaError),
    /// The offload layout of a host binary.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The OpenMP offload layout of a host binary.
    #[error(transparent)]
    OpenMp(#[from] OpenMpError),
    /// The kpack view of a host binary.
    #[error(transparent)]
    KpackHost(#[from] HostError),
}
