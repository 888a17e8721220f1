//! The work of `offload split --kpack` and `offload join`: ROCm's kpack
//! form written and undone (the library's `offload_rewrite::kpack` does the
//! work and checks it; docs/formats/kpack.md, "Writing"). Every output is
//! staged and renamed into place only when all of them are written.

use offload_format::kpack::{Archive, HostBinary};
use offload_format::plan::Plan;
use offload_io::Outputs;
use offload_rewrite::kpack::{self, SplitOptions, TreeSplit};
use std::path::{Path, PathBuf};

/// Exit codes: 0 done, 1 the input cannot be split or joined (said why),
/// 2 usage or I/O error.
fn fail(argv0: &str, code: u8, msg: impl std::fmt::Display) -> u8 {
    eprintln!("{argv0}: error: {msg}");
    code
}

/// Regular files under `root`, as (path inside the root with `/`, path).
/// Symbolic links and special files are skipped (listed in `skipped`).
fn walk(root: &Path, skipped: &mut Vec<String>) -> std::io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let kind = e.file_type()?;
            let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                out.push((rel, path));
            } else {
                skipped.push(rel);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The name of a single file's or folder's archive group: its name up to
/// the first `.` (`libfoo.so.1` → `libfoo`), `-` and `.` as `_`.
fn default_group(path: &Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "kpack".into());
    let stem = name.split('.').next().filter(|s| !s.is_empty()).unwrap_or("kpack");
    stem.replace(['-', '.'], "_")
}

fn summary(tree: &TreeSplit) -> String {
    let archive_bytes: usize = tree.archives.iter().map(|(_, b)| b.len()).sum();
    let targets: Vec<String> = tree.objects.iter().map(|(t, n)| format!("{t} ({n})")).collect();
    format!(
        "{} host binaries, {} bytes of device code in {} archives of {} bytes; targets: {}; {} loader answers checked",
        tree.hosts.len(),
        tree.device_bytes,
        tree.archives.len(),
        archive_bytes,
        targets.join(", "),
        tree.checked
    )
}

fn stage_all(argv0: &str, files: &[(PathBuf, Plan)]) -> Result<(), u8> {
    for (path, _) in files {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            return Err(fail(argv0, 2, format!("'{}': {e}", parent.display())));
        }
    }
    let mut outputs = Outputs::new();
    for (path, plan) in files {
        let p = path.to_string_lossy();
        if let Err(e) = outputs.stage(&p, plan, &[]) {
            return Err(fail(argv0, 2, e));
        }
    }
    outputs.commit().map_err(|e| fail(argv0, 2, e))
}

/// Outputs staged, not yet committed, and the folders made for them.
/// Dropped uncommitted (the check failed, or staging did), it leaves
/// nothing: the staged files go, and the folders made, when empty.
struct Staged {
    outputs: Option<Outputs>,
    /// Made by [`stage`], parents first.
    made: Vec<PathBuf>,
}

impl Staged {
    fn commit(mut self) -> Result<(), offload_io::OutputError> {
        self.made.clear();
        match self.outputs.take() {
            Some(o) => o.commit(),
            None => Ok(()),
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        drop(self.outputs.take());
        for dir in self.made.iter().rev() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Stages `files` (folders made as needed), written in parallel, without
/// committing them; an error in words (the folders made are removed).
fn stage(files: &[(PathBuf, Plan)]) -> Result<Staged, String> {
    let mut staged = Staged { outputs: Some(Outputs::new()), made: Vec::new() };
    for (path, _) in files {
        let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else { continue };
        let missing: Vec<PathBuf> = parent
            .ancestors()
            .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
            .map(Path::to_path_buf)
            .collect();
        let made = std::fs::create_dir_all(parent);
        staged.made.extend(missing.into_iter().rev());
        made.map_err(|e| format!("'{}': {e}", parent.display()))?;
    }
    let names: Vec<String> = files.iter().map(|(p, _)| p.to_string_lossy().into_owned()).collect();
    let items: Vec<(&str, &Plan)> = names.iter().map(String::as_str).zip(files.iter().map(|(_, p)| p)).collect();
    if let Some(outputs) = staged.outputs.as_mut() {
        outputs.stage_all(&items, &[]).map_err(|e| e.to_string())?;
    }
    Ok(staged)
}

/// `offload split --kpack INPUT -o DIR`.
pub fn split(
    argv0: &str,
    input: &Path,
    output: &Path,
    group: Option<&str>,
    level: i32,
    jobs: usize,
    device_prefix: Option<&str>,
) -> u8 {
    let options = SplitOptions { group: group.map_or_else(|| default_group(input), str::to_string), level, jobs };
    let meta = match std::fs::metadata(input) {
        Ok(m) => m,
        Err(e) => return fail(argv0, 2, format!("'{}': {e}", input.display())),
    };
    if output.exists() && std::fs::read_dir(output).map_or(true, |mut d| d.next().is_some()) {
        return fail(argv0, 2, format!("'{}' exists and is not an empty folder", output.display()));
    }
    let is_wheel = meta.is_file() && input.extension().is_some_and(|e| e == "whl");
    if is_wheel {
        let data = match std::fs::read(input) {
            Ok(d) => d,
            Err(e) => return fail(argv0, 2, format!("'{}': {e}", input.display())),
        };
        let name = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let split = match kpack::split_wheel(&name, &data, device_prefix, &options) {
            Ok(s) => s,
            Err(e) => return fail(argv0, 1, format!("'{}': {e}", input.display())),
        };
        if split.trees.is_empty() {
            return fail(argv0, 1, format!("'{}' holds no fat HIP binaries", input.display()));
        }
        let files: Vec<(PathBuf, Plan)> = std::iter::once(&split.host)
            .chain(&split.devices)
            .map(|(n, b)| (output.join(n), Plan::borrowed(b)))
            .collect();
        if let Err(code) = stage_all(argv0, &files) {
            return code;
        }
        for (root, tree) in &split.trees {
            println!("{root}/: {}", summary(tree));
        }
        for (path, _) in &files {
            println!("wrote {}", path.display());
        }
        return 0;
    }
    let mut skipped = Vec::new();
    let listing = if meta.is_dir() {
        match walk(input, &mut skipped) {
            Ok(l) => l,
            Err(e) => return fail(argv0, 2, format!("'{}': {e}", input.display())),
        }
    } else {
        let name = input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        vec![(name, input.to_path_buf())]
    };
    let mut datas = Vec::with_capacity(listing.len());
    for (_, path) in &listing {
        // Mapped, not copied: the split borrows the inputs' bytes.
        match offload_io::Input::open_regular(&path.to_string_lossy()) {
            Ok(d) => datas.push(d),
            Err(e) => return fail(argv0, 2, format!("'{}': {e}", path.display())),
        }
    }
    let files: Vec<(String, &[u8])> = listing.iter().zip(&datas).map(|((r, _), d)| (r.clone(), d.bytes())).collect();
    // The outputs are written to staging files while the split is checked,
    // and renamed into place only once the check has passed.
    let staged = kpack::split_tree_then(&files, &options, |tree| {
        if tree.hosts.is_empty() {
            return (Vec::new(), Ok(None));
        }
        let mut out: Vec<(PathBuf, Plan)> = Vec::new();
        for (rel, data) in &files {
            let bytes = tree.hosts.iter().find(|(h, _)| h == rel).map_or(*data, |(_, b)| b.as_slice());
            out.push((output.join(rel), Plan::borrowed(bytes)));
        }
        for (rel, bytes) in &tree.archives {
            out.push((output.join(rel), Plan::borrowed(bytes)));
        }
        let dests: Vec<PathBuf> = out.iter().map(|(p, _)| p.clone()).collect();
        (dests, stage(&out).map(Some))
    });
    let (tree, out, staged) = match staged {
        Ok((tree, (out, Ok(Some(staged))))) => (tree, out, staged),
        Ok((_, (_, Ok(None)))) => return fail(argv0, 1, format!("'{}' holds no fat HIP binaries", input.display())),
        Ok((_, (_, Err(e)))) => return fail(argv0, 2, e),
        Err(e) => return fail(argv0, 1, format!("'{}': {e}", input.display())),
    };
    if let Err(e) = staged.commit() {
        return fail(argv0, 2, e);
    }
    // Each file keeps its input's permissions (executables stay executable).
    for ((_, path), dest) in listing.iter().zip(&out) {
        if let Ok(m) = std::fs::metadata(path)
            && let Err(e) = std::fs::set_permissions(dest, m.permissions())
        {
            eprintln!("{argv0}: warning: '{}': {e}", dest.display());
        }
    }
    for s in &skipped {
        eprintln!("{argv0}: warning: '{s}' is not a regular file; not copied");
    }
    println!("{}", summary(&tree));
    println!("wrote {} files under {}", out.len(), output.display());
    0
}

/// `offload join HOST -o FILE [--archives DIR]`.
pub fn join(argv0: &str, host: &Path, output: &str, archives: Option<&Path>) -> u8 {
    let data = match std::fs::read(host) {
        Ok(d) => d,
        Err(e) => return fail(argv0, 2, format!("'{}': {e}", host.display())),
    };
    let hb = match HostBinary::read(&data) {
        Ok(h) => h,
        Err(e) => return fail(argv0, 1, format!("'{}': {e}", host.display())),
    };
    let Some(Ok(marker)) = &hb.marker else {
        return fail(
            argv0,
            1,
            format!("'{}' is not a kpack-split binary (no readable .rocm_kpack_ref)", host.display()),
        );
    };
    let dir = host.parent().unwrap_or(Path::new("."));
    let mut problems = Vec::new();
    let mut fetch = |co: u32, target: &str| -> Option<Vec<u8>> {
        let key = marker.lookup_key(co);
        for pattern in &marker.search_paths {
            let name = pattern.replacen("@GFXARCH@", target, 1);
            let path = match archives {
                Some(d) => d.join(Path::new(&name).file_name()?),
                None => dir.join(&name),
            };
            let Ok(bytes) = std::fs::read(&path) else { continue };
            let archive = match Archive::parse(&bytes) {
                Ok(a) => a,
                Err(e) => {
                    problems.push(format!("'{}': {e}", path.display()));
                    continue;
                }
            };
            if let Some(entry) = archive.find(&key, target) {
                match archive.decompress(entry, 4 << 30) {
                    Ok(b) => return Some(b),
                    Err(e) => problems.push(format!("'{}': {key} for {target}: {e}", path.display())),
                }
            }
        }
        None
    };
    let joined = kpack::join_binary(&data, &mut fetch);
    for p in &problems {
        eprintln!("{argv0}: warning: {p}");
    }
    let joined = match joined {
        Ok(j) => j,
        Err(e) => return fail(argv0, 1, format!("'{}': {e}", host.display())),
    };
    let mut outputs = Outputs::new();
    if let Err(e) = outputs.stage(output, &Plan::borrowed(&joined), &[]) {
        return fail(argv0, 2, e);
    }
    if let Err(e) = outputs.commit() {
        return fail(argv0, 2, e);
    }
    0
}
