//! Splitting a wheel (`docs/formats/kpack.md`, "Wheels"): a host wheel with
//! the same file name, whose fat HIP binaries are split, plus one device
//! wheel per processor (`<name>-device-gfx90a`, holding every variant of
//! that processor: `gfx90a`, `gfx90a:xnack+`, `gfx90a:xnack-`; generic
//! targets get their own: `<name>-device-gfx11-generic`). Each fat binary's
//! archives go to `<top folder>/.kpack/` (its first path component is the
//! overlay root, as `--overlay-root` names it for AMD's splitter), so that
//! installing the host wheel and any device wheels into one
//! `site-packages` gives a working tree. RECORD files use the wheel
//! format's urlsafe base64 SHA-256 without padding, sizes, and a line of
//! their own.

use super::{KpackError, SplitOptions, TreeSplit, split_tree};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};

/// The largest wheel member read (4 GiB).
const MEMBER_LIMIT: u64 = 4 << 30;

/// A split wheel.
#[derive(Clone, Debug)]
pub struct WheelSplit {
    /// The host wheel: (file name, bytes).
    pub host: (String, Vec<u8>),
    /// The device wheels: (file name, bytes), by processor.
    pub devices: Vec<(String, Vec<u8>)>,
    /// The split of each overlay root (top folder), by root.
    pub trees: Vec<(String, TreeSplit)>,
}

fn bad(why: impl Into<String>) -> KpackError {
    KpackError::Refused(format!("wheel: {}", why.into()))
}

/// The wheel format's normalized distribution name (`-`, `.` runs to `_`).
fn file_component(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c == '-' || c == '.' || c == '_' {
            if !out.ends_with('_') {
                out.push('_');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// urlsafe base64 without padding (RFC 4648 §5), as RECORD wants it.
pub fn urlsafe_b64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A RECORD for `files` (path, bytes), the RECORD's own line last.
pub fn record(files: &[(String, Vec<u8>)], record_path: &str) -> Vec<u8> {
    let mut out = String::new();
    for (path, bytes) in files {
        let hash = urlsafe_b64(&Sha256::digest(bytes));
        let path = if path.contains(',') || path.contains('"') {
            format!("\"{}\"", path.replace('"', "\"\""))
        } else {
            path.clone()
        };
        out.push_str(&format!("{path},sha256={hash},{}\n", bytes.len()));
    }
    out.push_str(&format!("{record_path},,\n"));
    out.into_bytes()
}

fn zip_files(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, KpackError> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let fixed = zip::DateTime::default();
    for (path, bytes) in files {
        let method = if path.ends_with(".kpack") || bytes.len() < 64 {
            zip::CompressionMethod::Stored
        } else {
            zip::CompressionMethod::Deflated
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .last_modified_time(fixed)
            .unix_permissions(if path.ends_with(".so") || path.contains(".so.") { 0o755 } else { 0o644 })
            .large_file(bytes.len() as u64 >= 0xffff_ffff);
        w.start_file(path.as_str(), options).map_err(|e| bad(e.to_string()))?;
        w.write_all(bytes).map_err(|e| bad(e.to_string()))?;
    }
    Ok(w.finish().map_err(|e| bad(e.to_string()))?.into_inner())
}

fn header<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().take_while(|l| !l.is_empty()).find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(str::trim))
}

/// The processor a device wheel is named by: the target without features.
fn processor(target: &str) -> &str {
    target.split(':').next().unwrap_or(target)
}

/// Splits the wheel `file_name` (its bytes `data`). `device_prefix` names
/// the device wheels (`<prefix>-<processor>`; default `<name>-device`).
pub fn split_wheel(
    file_name: &str,
    data: &[u8],
    device_prefix: Option<&str>,
    options: &SplitOptions,
) -> Result<WheelSplit, KpackError> {
    let mut zip = zip::ZipArchive::new(Cursor::new(data)).map_err(|e| bad(e.to_string()))?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        if f.is_dir() {
            continue;
        }
        let Some(path) = f.enclosed_name().and_then(|p| p.to_str().map(str::to_string)) else {
            return Err(bad(format!("member {:?} has an unsafe path", f.name())));
        };
        let declared = f.size();
        if declared > MEMBER_LIMIT {
            return Err(bad(format!("{path} declares {declared} bytes")));
        }
        let mut bytes = Vec::new();
        (&mut f).take(declared + 1).read_to_end(&mut bytes).map_err(|e| bad(format!("{path}: {e}")))?;
        if bytes.len() as u64 != declared {
            return Err(bad(format!("{path} is not the size it declares")));
        }
        files.push((path, bytes));
    }
    let dist_infos: Vec<&str> = {
        let mut d: Vec<&str> = files
            .iter()
            .filter_map(|(p, _)| p.split_once('/').map(|x| x.0))
            .filter(|top| top.ends_with(".dist-info"))
            .collect();
        d.sort();
        d.dedup();
        d
    };
    let [dist_info] = dist_infos[..] else {
        return Err(bad(format!("{} .dist-info folders, not one", dist_infos.len())));
    };
    let dist_info = dist_info.to_string();
    let text = |name: &str| {
        files
            .iter()
            .find(|(p, _)| *p == format!("{dist_info}/{name}"))
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| bad(format!("no {dist_info}/{name}")))
    };
    let metadata = text("METADATA")?;
    let wheel = text("WHEEL")?;
    let name = header(&metadata, "Name").ok_or_else(|| bad("METADATA has no Name"))?.to_string();
    let version = header(&metadata, "Version").ok_or_else(|| bad("METADATA has no Version"))?.to_string();
    let tags: Vec<&str> = wheel.lines().filter_map(|l| l.strip_prefix("Tag:").map(str::trim)).collect();
    if tags.is_empty() {
        return Err(bad("WHEEL has no Tag"));
    }
    // The (compressed) tag set of the file name: its last three parts.
    let stem = file_name.rsplit('/').next().unwrap_or(file_name).strip_suffix(".whl").unwrap_or(file_name);
    let parts: Vec<&str> = stem.split('-').collect();
    let tag = match parts.len() {
        n if n >= 5 => parts[n - 3..].join("-"),
        _ => return Err(bad(format!("{file_name} is not named <name>-<version>-<python>-<abi>-<platform>.whl"))),
    };
    let group = file_component(&name);
    let options = SplitOptions { group: group.clone(), ..options.clone() };
    let prefix = device_prefix.map_or_else(|| format!("{name}-device"), str::to_string);

    // Split each overlay root (top folder holding fat binaries).
    let mut roots: BTreeMap<String, Vec<(String, &[u8])>> = BTreeMap::new();
    for (path, bytes) in &files {
        if let Some((top, rest)) = path.split_once('/')
            && top != dist_info
        {
            roots.entry(top.to_string()).or_default().push((rest.to_string(), bytes.as_slice()));
        }
    }
    let mut trees = Vec::new();
    for (root, members) in &roots {
        let split = split_tree(members, &options)?;
        if !split.hosts.is_empty() {
            trees.push((root.clone(), split));
        }
    }
    // Host files: the split binaries replace the fat ones.
    let mut host_files: Vec<(String, Vec<u8>)> = Vec::new();
    for (path, bytes) in &files {
        if path.starts_with(&format!("{dist_info}/")) {
            continue;
        }
        let replaced = path.split_once('/').and_then(|(top, rest)| {
            trees.iter().find(|(r, _)| r == top)?.1.hosts.iter().find(|(h, _)| h == rest).map(|(_, b)| b.clone())
        });
        host_files.push((path.clone(), replaced.unwrap_or_else(|| bytes.clone())));
    }
    // Device files by processor.
    let mut devices: BTreeMap<String, Vec<(String, Vec<u8>)>> = BTreeMap::new();
    for (root, split) in &trees {
        for (archive, bytes) in &split.archives {
            let target = archive
                .strip_prefix(&format!(".kpack/{group}_"))
                .and_then(|t| t.strip_suffix(".kpack"))
                .ok_or_else(|| bad(format!("unexpected archive name {archive}")))?;
            devices
                .entry(processor(target).to_string())
                .or_default()
                .push((format!("{root}/{archive}"), bytes.clone()));
        }
    }
    // Host metadata: extras naming the device wheels.
    let mut extra = String::new();
    for p in devices.keys() {
        extra.push_str(&format!(
            "Provides-Extra: device-{p}\nRequires-Dist: {prefix}-{p} == {version}; extra == \"device-{p}\"\n"
        ));
    }
    if !devices.is_empty() {
        extra.push_str("Provides-Extra: device-all\n");
        for p in devices.keys() {
            extra.push_str(&format!("Requires-Dist: {prefix}-{p} == {version}; extra == \"device-all\"\n"));
        }
    }
    let (head, body) = metadata.split_once("\n\n").map_or((metadata.as_str(), None), |(h, b)| (h, Some(b)));
    let mut new_meta = format!("{}\n{extra}", head.trim_end_matches('\n'));
    if let Some(b) = body {
        new_meta.push('\n');
        new_meta.push_str(b);
    }
    for (path, bytes) in &files {
        if let Some(rest) = path.strip_prefix(&format!("{dist_info}/")) {
            if rest == "RECORD" || rest.starts_with("RECORD.") {
                continue;
            }
            let bytes = if rest == "METADATA" { new_meta.clone().into_bytes() } else { bytes.clone() };
            host_files.push((path.clone(), bytes));
        }
    }
    let host_record = format!("{dist_info}/RECORD");
    let rec = record(&host_files, &host_record);
    host_files.push((host_record, rec));
    let host = (file_name.to_string(), zip_files(&host_files)?);

    let mut device_wheels = Vec::new();
    for (p, mut members) in devices {
        let dist = format!("{prefix}-{p}");
        let comp = file_component(&dist);
        let info = format!("{comp}-{version}.dist-info");
        let summary = format!("Device code ({p}) for {name}, split by offload");
        members.push((
            format!("{info}/METADATA"),
            format!(
                "Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\nSummary: {summary}\nRequires-Dist: {name} == {version}\n"
            )
            .into_bytes(),
        ));
        let mut wheel_text =
            "Wheel-Version: 1.0\nGenerator: offload split --kpack\nRoot-Is-Purelib: false\n".to_string();
        for t in &tags {
            wheel_text.push_str(&format!("Tag: {t}\n"));
        }
        members.push((format!("{info}/WHEEL"), wheel_text.into_bytes()));
        let rec_path = format!("{info}/RECORD");
        let rec = record(&members, &rec_path);
        members.push((rec_path, rec));
        device_wheels.push((format!("{comp}-{version}-{tag}.whl"), zip_files(&members)?));
    }
    Ok(WheelSplit { host, devices: device_wheels, trees })
}
