//! Following imports inside a package file (a wheel, a tarball, a `.deb`)
//! without unpacking it: what `check` does for a folder, with the
//! package's member tree standing in for the file system
//! (docs/guide/checking.md, docs/guide/windows.md).
//!
//! Each member that is a program or library is read once ([`read_image`]:
//! headers only) as the caller walks the package. Then [`resolve`] looks
//! every imported name up:
//!
//! * **PE images** (a `win_amd64` wheel): as [`super::windows`] does for a
//!   folder: API sets and system DLLs are present; then the importing
//!   image's own folder in the package (names compared without case, the
//!   same machine); then the `PATH` stand-in folders on disk.
//! * **ELF objects** (a Linux wheel): `DT_RPATH` (when there is no
//!   `DT_RUNPATH`) and `DT_RUNPATH` folders relative to `$ORIGIN`, looked up
//!   in the package; then `ld.so.cache` and the system folders of this
//!   machine (or of `--root`). The `DT_RPATH` of the objects that loaded
//!   this one and `LD_LIBRARY_PATH` are not used: inside a package nothing
//!   loaded it yet.
//!
//! A name not found is missing ([`NotFound::pe`] says whose: the caller
//! counts a DLL's as a failure, as for a folder, and reports an ELF
//! object's, which other packages usually provide, as a note). Names found
//! in the package lead nowhere further (they are members, judged by the
//! caller's walk).

use super::deps::{Search, Via};
use super::dynamic::{self, Abi, Dynamic};
use super::windows::{WinSearch, is_system_dll};
use offload_format::coff::pe::PeImage;
use std::path::Path;

/// What a member imports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Image {
    /// A PE image: its machine and imported DLL names (imports and
    /// delay-load imports).
    Pe {
        /// The file header's machine.
        machine: u16,
        /// The DLL names.
        imports: Vec<String>,
    },
    /// A loadable ELF object: its ABI and dynamic section.
    Elf {
        /// Class and machine.
        abi: Abi,
        /// `DT_NEEDED`, `DT_RPATH`, `DT_RUNPATH`, ...
        dynamic: Dynamic,
    },
}

/// The imports of a member's bytes, when it is a PE image or a loadable
/// ELF object whose tables read.
pub fn read_image(data: &[u8]) -> Option<Image> {
    if offload_format::coff::pe::is_pe(data) {
        let image = PeImage::parse(data).ok()?;
        let imports = image.imports().ok()?.into_iter().map(|i| i.dll).collect();
        return Some(Image::Pe { machine: image.machine, imports });
    }
    let abi = dynamic::abi(data)?;
    if !dynamic::is_loadable(data)
        || abi.machine == offload_format::elf::EM_AMDGPU
        || abi.machine == offload_format::elf::EM_CUDA
    {
        return None;
    }
    Some(Image::Elf { abi, dynamic: dynamic::read(data).ok()? })
}

/// One import found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Found {
    /// The member that imports it (its path in the package).
    pub by: String,
    /// The name imported.
    pub name: String,
    /// Where it was found: a member path, or a path on disk.
    pub path: String,
    /// How.
    pub via: Via,
}

/// One import not found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotFound {
    /// The member that imports it.
    pub by: String,
    /// The name imported.
    pub name: String,
    /// Whether the importer is a PE image (a Windows wheel ships what its
    /// DLLs import, or names it through `PATH`); an ELF object's libraries
    /// often come from other packages (a ROCm or CUDA install).
    pub pe: bool,
}

/// The imports of a package's members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolved {
    /// Each import found, in member order.
    pub found: Vec<Found>,
    /// Each import missing.
    pub missing: Vec<NotFound>,
}

/// The folder of a member path (`a/b/c.so` → `a/b`; `c.so` → ``).
fn folder(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// `dir/name` normalized (`.` and `..` resolved, never above the package
/// root); `None` when it would leave the package.
fn join(dir: &str, name: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for p in dir.split('/').chain(name.split('/')) {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Resolves the imports of `members` ((path in the package, image)).
pub fn resolve(members: &[(String, Image)], search: &Search, win: &WinSearch) -> Resolved {
    let mut out = Resolved::default();
    for (path, image) in members {
        match image {
            Image::Pe { machine, imports } => {
                for name in imports {
                    let found = if is_system_dll(name) {
                        Some((format!("C:\\Windows\\System32\\{name}"), Via::System))
                    } else {
                        pe_in_package(members, folder(path), name, *machine)
                            .map(|p| (p, Via::AppFolder))
                            .or_else(|| pe_on_path(win, name, *machine).map(|p| (p, Via::PathFolder)))
                    };
                    push(&mut out, path, name, found, true);
                }
            }
            Image::Elf { abi, dynamic } => {
                for name in &dynamic.needed {
                    let found = elf_in_package(members, path, dynamic, name, abi)
                        .or_else(|| elf_on_system(search, dynamic, name, abi));
                    push(&mut out, path, name, found, false);
                }
            }
        }
    }
    out
}

fn push(out: &mut Resolved, by: &str, name: &str, found: Option<(String, Via)>, pe: bool) {
    match found {
        Some((path, via)) => out.found.push(Found { by: by.into(), name: name.into(), path, via }),
        None => out.missing.push(NotFound { by: by.into(), name: name.into(), pe }),
    }
}

/// A PE member named `name` (without case) in the folder `dir`, for
/// `machine`.
fn pe_in_package(members: &[(String, Image)], dir: &str, name: &str, machine: u16) -> Option<String> {
    members.iter().find_map(|(p, image)| {
        let same_name = p.rsplit('/').next().is_some_and(|n| n.eq_ignore_ascii_case(name)) && folder(p) == dir;
        matches!(image, Image::Pe { machine: m, .. } if *m == machine && same_name).then(|| p.clone())
    })
}

/// A DLL in one of the `PATH` stand-in folders on disk, for `machine`.
fn pe_on_path(win: &WinSearch, name: &str, machine: u16) -> Option<String> {
    win.path.iter().find_map(|dir| {
        let entries = std::fs::read_dir(dir).ok()?;
        entries.filter_map(Result::ok).map(|e| e.path()).find_map(|p| {
            let named = p.file_name().is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case(name));
            if !named {
                return None;
            }
            let data = std::fs::read(&p).ok()?;
            let same = PeImage::parse(&data).is_ok_and(|i| i.machine == machine);
            same.then(|| p.to_string_lossy().into_owned())
        })
    })
}

/// An ELF member `name` in a `$ORIGIN`-relative `DT_RPATH` (no
/// `DT_RUNPATH`) or `DT_RUNPATH` folder of the member at `path`, with its
/// class and machine.
fn elf_in_package(
    members: &[(String, Image)],
    path: &str,
    dynamic: &Dynamic,
    name: &str,
    abi: &Abi,
) -> Option<(String, Via)> {
    let origin = folder(path);
    let mut lists: Vec<(&str, Via)> = Vec::new();
    if dynamic.runpath.is_none() {
        lists.extend(dynamic.rpath.as_deref().map(|r| (r, Via::Rpath)));
    }
    lists.extend(dynamic.runpath.as_deref().map(|r| (r, Via::Runpath)));
    for (list, via) in lists {
        for dir in super::deps::split_path(list) {
            let Some(rest) = dir.strip_prefix("$ORIGIN").or_else(|| dir.strip_prefix("${ORIGIN}")) else { continue };
            let Some(wanted) = join(origin, rest).and_then(|d| join(&d, name)) else { continue };
            let hit = members
                .iter()
                .find(|(p, image)| *p == wanted && matches!(image, Image::Elf { abi: a, .. } if a == abi));
            if let Some((p, _)) = hit {
                return Some((p.clone(), via));
            }
        }
    }
    None
}

/// `name` in this machine's (or `--root`'s) `ld.so.cache` or system
/// folders, with the importer's class and machine.
fn elf_on_system(search: &Search, dynamic: &Dynamic, name: &str, abi: &Abi) -> Option<(String, Via)> {
    if dynamic.nodeflib || name.contains('/') {
        return None;
    }
    // The ELF header alone says class and machine.
    let fits = |p: &Path| {
        use std::io::Read;
        let mut head = Vec::new();
        let read = super::deps::open_regular(p).and_then(|f| f.take(64).read_to_end(&mut head));
        read.is_ok() && dynamic::abi(&head).is_some_and(|a| &a == abi)
    };
    let rooted = |p: &str| match &search.root {
        Some(root) if p.starts_with('/') => root.join(p.trim_start_matches('/')),
        _ => Path::new(p).to_path_buf(),
    };
    for entry in search.cache.iter().flat_map(|c| c.lookup(name)).filter(|e| e.hwcap == 0) {
        let p = rooted(&entry.path);
        if fits(&p) {
            return Some((p.to_string_lossy().into_owned(), Via::Cache));
        }
    }
    search
        .system_dirs
        .iter()
        .map(|d| rooted(d).join(name))
        .find(|p| fits(p))
        .map(|p| (p.to_string_lossy().into_owned(), Via::System))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../offload-cli/tests/fixtures/pe").join(name))
            .unwrap()
    }

    #[test]
    fn pe_imports_resolve_in_the_importers_folder_of_the_package() {
        let app = read_image(&fixture("app.exe")).unwrap();
        let hip = read_image(&fixture("hip_kernels.dll")).unwrap();
        let rt = read_image(&fixture("amdhip64_6.dll")).unwrap();
        let members = vec![("pkg/app.exe".to_string(), app.clone()), ("pkg/HIP_KERNELS.DLL".to_string(), hip.clone())];
        let r = resolve(&members, &Search::default(), &WinSearch::default());
        assert_eq!(r.found.iter().find(|f| f.name == "hip_kernels.dll").map(|f| f.via), Some(Via::AppFolder));
        assert_eq!(r.missing, [NotFound { by: "pkg/HIP_KERNELS.DLL".into(), name: "amdhip64_6.dll".into(), pe: true }]);
        // In another folder of the package it is not found.
        let elsewhere = vec![
            ("pkg/app.exe".to_string(), app),
            ("lib/amdhip64_6.dll".to_string(), rt.clone()),
            ("pkg/hip_kernels.dll".to_string(), hip.clone()),
        ];
        let r = resolve(&elsewhere, &Search::default(), &WinSearch::default());
        assert_eq!(r.missing.len(), 1);
        let moved = vec![("pkg/hip_kernels.dll".to_string(), hip), ("pkg/amdhip64_6.dll".to_string(), rt)];
        assert!(resolve(&moved, &Search::default(), &WinSearch::default()).missing.is_empty());
    }

    #[test]
    fn elf_needed_resolves_through_origin_runpaths_inside_the_package() {
        let abi = Abi { is64: true, little: true, machine: 62 };
        let lib = |needed: &[&str], runpath: Option<&str>| Image::Elf {
            abi,
            dynamic: Dynamic {
                needed: needed.iter().map(|s| s.to_string()).collect(),
                runpath: runpath.map(str::to_string),
                ..Dynamic::default()
            },
        };
        let members = vec![
            ("pkg/_ext.so".to_string(), lib(&["libdep.so.1", "libnowhere.so.9"], Some("$ORIGIN/../pkg.libs"))),
            ("pkg.libs/libdep.so.1".to_string(), lib(&[], None)),
        ];
        let search = Search { system_dirs: Vec::new(), ..Search::default() };
        let r = resolve(&members, &search, &WinSearch::default());
        assert_eq!(
            r.found,
            [Found {
                by: "pkg/_ext.so".into(),
                name: "libdep.so.1".into(),
                path: "pkg.libs/libdep.so.1".into(),
                via: Via::Runpath
            }]
        );
        assert_eq!(r.missing, [NotFound { by: "pkg/_ext.so".into(), name: "libnowhere.so.9".into(), pe: false }]);
        assert_eq!(join("a/b", "../../.."), None, "never above the package root");
        assert_eq!(join("a/b", "./../c"), Some("a/c".into()));
    }
}
