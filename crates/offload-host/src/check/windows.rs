//! Following a Windows program's or DLL's imports the way the Windows
//! loader searches for an application, without loading anything: what
//! `check` needs to say whether a `win_amd64` wheel or an unpacked Windows
//! install would start, from Linux. docs/guide/windows.md says what of the
//! loader's search order is modelled and what is not.
//!
//! Each imported DLL name (import table, then delay-load table) is looked
//! up once, case-insensitively, breadth first:
//!
//! 1. a DLL already found under that name is reused;
//! 2. API sets (`api-ms-win-*`, `ext-ms-win-*`), the KnownDLLs and the
//!    other DLLs every Windows 10/11 system holds in System32
//!    ([`is_system_dll`]) count as present;
//! 3. the application folder: the folder of the file given (for a wheel
//!    or a folder, the folder of each DLL checked);
//! 4. the folders given in order, standing in for `PATH`.
//!
//! A file found with a different machine (an x86 DLL for an x64 program)
//! is passed over, as the loader does.

use super::deps::{Closure, Loaded, Missing, Via};
use super::dynamic::Dynamic;
use offload_format::coff::pe::PeImage;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where DLLs are looked for besides the application folder.
#[derive(Clone, Debug, Default)]
pub struct WinSearch {
    /// Folders standing in for `PATH`, searched last, in order.
    pub path: Vec<PathBuf>,
}

/// Why the starting file cannot be followed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WinDepsError {
    /// It cannot be read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is not a PE image, or its import table is malformed.
    #[error("{0}")]
    Pe(#[from] offload_format::coff::pe::PeError),
}

/// API set prefixes: virtual names the loader resolves to system DLLs.
const API_SETS: [&str; 2] = ["api-ms-win-", "ext-ms-win-"];

/// The KnownDLLs of Windows 10 and 11 and the System32 DLLs programs
/// commonly import that every installation has (lower case), plus the
/// GPU drivers' user-mode runtimes a driver install puts in System32
/// (`nvcuda.dll`, `nvml.dll`).
pub const SYSTEM_DLLS: &[&str] = &[
    "advapi32.dll",
    "bcrypt.dll",
    "cfgmgr32.dll",
    "clbcatq.dll",
    "combase.dll",
    "comctl32.dll",
    "comdlg32.dll",
    "coml2.dll",
    "crypt32.dll",
    "d3d11.dll",
    "d3d12.dll",
    "dbghelp.dll",
    "difxapi.dll",
    "dxgi.dll",
    "gdi32.dll",
    "gdiplus.dll",
    "imagehlp.dll",
    "imm32.dll",
    "iphlpapi.dll",
    "kernel32.dll",
    "kernelbase.dll",
    "msctf.dll",
    "msvcrt.dll",
    "normaliz.dll",
    "nsi.dll",
    "ntdll.dll",
    "nvcuda.dll",
    "nvml.dll",
    "ole32.dll",
    "oleaut32.dll",
    "opengl32.dll",
    "powrprof.dll",
    "psapi.dll",
    "rpcrt4.dll",
    "sechost.dll",
    "secur32.dll",
    "setupapi.dll",
    "shcore.dll",
    "shell32.dll",
    "shlwapi.dll",
    "ucrtbase.dll",
    "user32.dll",
    "userenv.dll",
    "version.dll",
    "winmm.dll",
    "wintrust.dll",
    "wldap32.dll",
    "ws2_32.dll",
];

/// Whether the loader finds `name` without searching any folder: an API
/// set or a DLL of [`SYSTEM_DLLS`].
pub fn is_system_dll(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    API_SETS.iter().any(|p| lower.starts_with(p)) || SYSTEM_DLLS.contains(&lower.as_str())
}

/// Whether `data` starts like a PE image.
pub fn is_pe(data: &[u8]) -> bool {
    offload_format::coff::pe::is_pe(data)
}

/// A PE file read no larger than this (the headers and import tables of
/// any real DLL lie well inside; the whole file is read for simplicity).
const READ_LIMIT: u64 = 4 << 30;

fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut data = Vec::new();
    std::fs::File::open(path)?.take(READ_LIMIT).read_to_end(&mut data)?;
    Ok(data)
}

/// (machine, imported DLL names) of a PE file.
fn imports(path: &Path) -> Result<(u16, Vec<String>), WinDepsError> {
    let data = read(path)?;
    let image = PeImage::parse(&data)?;
    Ok((image.machine, image.imports()?.into_iter().map(|i| i.dll).collect()))
}

/// A file named `name` in `dir`, matched case-insensitively (Windows file
/// names are; the unpacked wheel may be on a case-sensitive file system).
fn in_dir(dir: &Path, name: &str) -> Option<PathBuf> {
    let exact = dir.join(name);
    if exact.is_file() {
        return Some(exact);
    }
    let entries = std::fs::read_dir(dir).ok()?;
    entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case(name)) && p.is_file())
}

/// Everything `program` (an EXE or DLL) imports, as the Windows loader
/// would find it for an application in `program`'s folder under `search`.
/// Objects found in System32 ([`is_system_dll`]) are listed with
/// [`Via::System`] and a path below `C:\Windows\System32`, not read.
pub fn closure(program: &Path, search: &WinSearch) -> Result<Closure, WinDepsError> {
    let (machine, needed) = imports(program)?;
    let app_dir = program.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut closure = Closure::default();
    let mut names: HashMap<String, usize> = HashMap::new();
    let file_name = program.file_name().map(|n| n.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    names.insert(file_name, 0);
    closure.objects.push(Loaded {
        path: program.to_path_buf(),
        name: program.to_string_lossy().into_owned(),
        loader: None,
        via: Via::Given,
        dynamic: Dynamic { needed, ..Dynamic::default() },
    });
    let mut next = 0;
    while let Some(object) = closure.objects.get(next) {
        for name in object.dynamic.needed.clone() {
            let key = name.to_ascii_lowercase();
            if names.contains_key(&key) {
                continue;
            }
            if is_system_dll(&name) {
                names.insert(key, closure.objects.len());
                closure.objects.push(Loaded {
                    path: PathBuf::from(format!("C:\\Windows\\System32\\{name}")),
                    name,
                    loader: Some(next),
                    via: Via::System,
                    dynamic: Dynamic::default(),
                });
                continue;
            }
            let dirs =
                std::iter::once((&app_dir, Via::AppFolder)).chain(search.path.iter().map(|d| (d, Via::PathFolder)));
            let mut found = None;
            for (dir, via) in dirs {
                let Some(path) = in_dir(dir, &name) else { continue };
                match imports(&path) {
                    Ok((m, needed)) if m == machine => {
                        found = Some((path, via, needed));
                        break;
                    }
                    Ok(_) => closure.problems.push((path, "a DLL for another machine; passed over".into())),
                    Err(e) => closure.problems.push((path, e.to_string())),
                }
            }
            match found {
                Some((path, via, needed)) => {
                    names.insert(key, closure.objects.len());
                    closure.objects.push(Loaded {
                        path,
                        name,
                        loader: Some(next),
                        via,
                        dynamic: Dynamic { needed, ..Dynamic::default() },
                    });
                }
                None => {
                    names.insert(key, usize::MAX);
                    closure.missing.push(Missing { name, needed_by: next });
                }
            }
        }
        next += 1;
    }
    Ok(closure)
}

/// Most files [`pe_files`] looks at in one folder tree.
pub const WALK_LIMIT: usize = 100_000;

/// The PE images (`.dll`, `.exe`, `.pyd` files starting like one) below
/// `dir`, sorted, symbolic links not followed, at most 32 folders deep and
/// [`WALK_LIMIT`] entries looked at: the files of an unpacked wheel or a
/// Windows install whose imports `check` follows.
pub fn pe_files(dir: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    let mut seen = 0usize;
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.filter_map(Result::ok) {
            seen += 1;
            if seen > WALK_LIMIT {
                out.sort();
                return out;
            }
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() && depth < 32 {
                stack.push((path, depth + 1));
                continue;
            }
            let ext = path.extension().map(|x| x.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
            if !kind.is_file() || !matches!(ext.as_str(), "dll" | "exe" | "pyd") {
                continue;
            }
            let mut head = [0u8; 4096];
            let Ok(mut f) = std::fs::File::open(&path) else { continue };
            let n = f.read(&mut head).unwrap_or(0);
            if is_pe(&head[..n]) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-cli/tests/fixtures/pe")
    }

    /// A scratch application folder holding copies of some fixtures.
    fn app(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            std::fs::copy(fixtures().join(f), dir.path().join(f)).unwrap();
        }
        dir
    }

    #[test]
    fn an_exe_finds_its_dll_in_the_app_folder_and_misses_the_runtime() {
        let dir = app(&["app.exe", "hip_kernels.dll"]);
        let c = closure(&dir.path().join("app.exe"), &WinSearch::default()).unwrap();
        let found: Vec<(&str, Via)> = c.objects.iter().map(|o| (o.name.as_str(), o.via)).collect();
        assert_eq!(found[1], ("hip_kernels.dll", Via::AppFolder));
        assert_eq!(c.missing.len(), 1);
        assert_eq!(c.missing[0].name, "amdhip64_6.dll");
        assert_eq!(c.chain(c.missing[0].needed_by), [dir.path().join("app.exe").to_str().unwrap(), "hip_kernels.dll"]);
    }

    #[test]
    fn folders_given_stand_in_for_path() {
        let dir = app(&["app.exe", "hip_kernels.dll"]);
        let runtime = app(&["amdhip64_6.dll"]);
        let search = WinSearch { path: vec![PathBuf::from("/nonexistent"), runtime.path().to_path_buf()] };
        let c = closure(&dir.path().join("app.exe"), &search).unwrap();
        assert!(c.missing.is_empty(), "{:?}", c.missing);
        let rt = c.objects.iter().find(|o| o.name == "amdhip64_6.dll").unwrap();
        assert_eq!(rt.via, Via::PathFolder);
        // The app folder comes first: a copy there wins.
        std::fs::copy(fixtures().join("amdhip64_6.dll"), dir.path().join("AMDHIP64_6.DLL")).unwrap();
        let c = closure(&dir.path().join("app.exe"), &search).unwrap();
        let rt = c.objects.iter().find(|o| o.name == "amdhip64_6.dll").unwrap();
        assert_eq!(rt.via, Via::AppFolder);
    }

    #[test]
    fn pe_files_finds_images_below_a_folder() {
        let dir = app(&["app.exe", "kernel.cu"]);
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::copy(fixtures().join("hip_kernels.dll"), dir.path().join("bin/hip_kernels.dll")).unwrap();
        std::fs::write(dir.path().join("bin/fake.dll"), b"MZ not really").unwrap();
        let found = pe_files(dir.path());
        assert_eq!(found, [dir.path().join("app.exe"), dir.path().join("bin/hip_kernels.dll")]);
    }

    #[test]
    fn damaged_images_give_errors_or_short_lists_not_panics() {
        // Every 32-bit field of the headers and import tables of both
        // files set to 0, all-ones and 2^31, one at a time.
        let dir = app(&["app.exe", "hip_kernels.dll"]);
        for name in ["app.exe", "hip_kernels.dll"] {
            let good = std::fs::read(fixtures().join(name)).unwrap();
            for at in (0..good.len().min(0x800)).step_by(4) {
                for v in [0u32, u32::MAX, 1 << 31] {
                    let mut bad = good.clone();
                    bad[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    std::fs::write(dir.path().join(name), &bad).unwrap();
                    if let Ok(c) = closure(&dir.path().join("app.exe"), &WinSearch::default()) {
                        assert!(c.objects.len() <= 3 && c.missing.len() <= 2, "{name} {at:#x} {v:#x}");
                    }
                }
            }
            std::fs::write(dir.path().join(name), &good).unwrap();
        }
    }

    #[test]
    fn system_dlls_and_api_sets_are_present() {
        assert!(is_system_dll("KERNEL32.dll") && is_system_dll("api-ms-win-crt-runtime-l1-1-0.dll"));
        assert!(!is_system_dll("amdhip64_6.dll") && !is_system_dll("vcruntime140.dll"));
    }

    #[test]
    fn a_file_that_is_not_pe_is_an_error() {
        let dir = app(&["kernel.cu"]);
        assert!(matches!(closure(&dir.path().join("kernel.cu"), &WinSearch::default()), Err(WinDepsError::Pe(_))));
    }
}
