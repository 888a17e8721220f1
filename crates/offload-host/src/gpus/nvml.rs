//! NVIDIA GPUs through NVML (`libnvidia-ml.so.1`, installed with the
//! driver), loaded at run time only when present: no library, no NVIDIA
//! GPUs. Only the six entry points below are used, with their documented
//! C signatures (NVML API reference, `nvml.h`).

use super::{LocalGpu, Scan, Vendor};
use offload_inspect::select::Gpu;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

type Device = *mut c_void;
type Init = unsafe extern "C" fn() -> c_int;
type GetCount = unsafe extern "C" fn(*mut c_uint) -> c_int;
type GetHandle = unsafe extern "C" fn(c_uint, *mut Device) -> c_int;
type GetName = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> c_int;
type GetCapability = unsafe extern "C" fn(Device, *mut c_int, *mut c_int) -> c_int;

/// `NVML_DEVICE_NAME_V2_BUFFER_SIZE`.
const NAME_BUFFER: usize = 96;
/// More devices than one machine has; bounds the loop on a bad count.
const MAX_DEVICES: c_uint = 1024;

/// The `sm_XY` GPU of a CUDA compute capability; `None` for one no GPU
/// has (NVML reports 1.0 up to 12.x today).
pub fn gpu_from_compute_capability(major: i32, minor: i32) -> Option<Gpu> {
    ((1..=99).contains(&major) && (0..=9).contains(&minor)).then(|| Gpu {
        arch: "nvptx64",
        processor: format!("sm_{major}{minor}"),
        xnack: None,
        sramecc: None,
    })
}

/// An open `dlopen` handle, closed on drop.
struct Library(*mut c_void);

impl Library {
    fn open(name: &CStr) -> Option<Library> {
        // SAFETY: `name` is a valid C string; dlopen has no other inputs.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        // Not `then_some`: that would build (and drop, dlclose) a null
        // handle when the library is absent.
        if handle.is_null() { None } else { Some(Library(handle)) }
    }

    /// The address of `symbol`, as a function of type `F`.
    ///
    /// # Safety
    /// `F` must be the symbol's real function type.
    unsafe fn get<F: Copy>(&self, symbol: &CStr) -> Option<F> {
        // SAFETY: the handle is open; the symbol name is a C string.
        let address = unsafe { libc::dlsym(self.0, symbol.as_ptr()) };
        // SAFETY: the caller vouches for the type; function pointers and
        // data pointers have the same size on every platform dlsym serves.
        (!address.is_null()).then(|| unsafe { std::mem::transmute_copy::<*mut c_void, F>(&address) })
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and is closed once.
        unsafe { libc::dlclose(self.0) };
    }
}

pub(super) fn scan(scan: &mut Scan) {
    let Some(lib) = Library::open(c"libnvidia-ml.so.1") else { return };
    if let Err(what) = list(&lib, scan) {
        scan.warnings.push(format!("libnvidia-ml.so.1: {what}; NVIDIA GPUs not listed"));
    }
}

fn list(lib: &Library, scan: &mut Scan) -> Result<(), String> {
    // SAFETY: each type is the NVML API's signature for the symbol.
    let (init, count, handle, name, capability, shutdown) = unsafe {
        let missing = |s: &str| format!("no symbol {s}");
        (
            lib.get::<Init>(c"nvmlInit_v2").ok_or_else(|| missing("nvmlInit_v2"))?,
            lib.get::<GetCount>(c"nvmlDeviceGetCount_v2").ok_or_else(|| missing("nvmlDeviceGetCount_v2"))?,
            lib.get::<GetHandle>(c"nvmlDeviceGetHandleByIndex_v2")
                .ok_or_else(|| missing("nvmlDeviceGetHandleByIndex_v2"))?,
            lib.get::<GetName>(c"nvmlDeviceGetName").ok_or_else(|| missing("nvmlDeviceGetName"))?,
            lib.get::<GetCapability>(c"nvmlDeviceGetCudaComputeCapability")
                .ok_or_else(|| missing("nvmlDeviceGetCudaComputeCapability"))?,
            lib.get::<Init>(c"nvmlShutdown").ok_or_else(|| missing("nvmlShutdown"))?,
        )
    };
    // SAFETY: NVML functions called with valid out-pointers, per the API.
    unsafe {
        let status = init();
        if status != 0 {
            return Err(format!("nvmlInit_v2 failed (NVML status {status})"));
        }
        let mut n: c_uint = 0;
        let status = count(&mut n);
        if status == 0 {
            for index in 0..n.min(MAX_DEVICES) {
                let mut device: Device = std::ptr::null_mut();
                if handle(index, &mut device) != 0 {
                    scan.warnings.push(format!("NVML: no handle for device {index}"));
                    continue;
                }
                let mut buffer = [0 as c_char; NAME_BUFFER];
                let device_name = (name(device, buffer.as_mut_ptr(), NAME_BUFFER as c_uint) == 0)
                    .then(|| {
                        CStr::from_bytes_until_nul(&buffer.map(|c| c as u8))
                            .ok()
                            .map(|s| s.to_string_lossy().into_owned())
                    })
                    .flatten();
                let (mut major, mut minor) = (0, 0);
                let gpu = (capability(device, &mut major, &mut minor) == 0)
                    .then(|| gpu_from_compute_capability(major, minor))
                    .flatten();
                let Some(gpu) = gpu else {
                    scan.warnings.push(format!("NVML: device {index}: no valid compute capability ({major}.{minor})"));
                    continue;
                };
                scan.gpus.push(LocalGpu {
                    index: 0,
                    vendor: Vendor::Nvidia,
                    gpu,
                    physical: None,
                    xnack: None,
                    sramecc: None,
                    name: device_name,
                    device_id: None,
                    node: None,
                });
            }
        }
        shutdown();
        if status != 0 {
            return Err(format!("nvmlDeviceGetCount_v2 failed (NVML status {status})"));
        }
    }
    Ok(())
}
