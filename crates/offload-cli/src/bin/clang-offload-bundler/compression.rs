//! Compression settings (flags and LLVM's environment switches) and the
//! compress / decompress steps with LLVM's `-verbose` statistics.

use offload_cli::cl::Parsed;
use offload_cli::timers::{TimerGroup, with_commas};
use offload_format::bundle::compressed::{CompressOptions, Method};
use offload_format::bundler::{self, DecompressionInfo};
use offload_format::llvm_release::LlvmRelease;
use offload_format::plan::Plan;
use offload_io::Input;
use std::borrow::Cow;
use std::time::Duration;

/// The environment switches the bundler honours, read before the command
/// line (whose flags, when given, take precedence).
pub struct EnvSettings {
    pub verbose: bool,
    pub compress: bool,
    pub level: Option<i32>,
    /// The CCOB version `-compress` writes: the release's default, or
    /// `COMPRESSED_BUNDLE_FORMAT_VERSION` (2 or 3).
    pub format_version: u16,
}

impl EnvSettings {
    /// The settings as `release`'s bundler reads them (its warnings go to
    /// stderr at once, as LLVM prints them before doing anything).
    pub fn read(release: LlvmRelease) -> Self {
        let var = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        let facts = release.facts();
        let default_version = facts.ccob_default_version.unwrap_or(2);
        let mut s = EnvSettings { verbose: false, compress: false, level: None, format_version: default_version };
        match var("COMPRESSED_BUNDLE_FORMAT_VERSION") {
            None => {}
            // LLVM 22: a decimal number (leading zeros allowed, no sign or
            // blank) of 2 or 3.
            Some(v) if facts.ccob_version_env_checked => match v.parse::<u32>() {
                Ok(n @ (2 | 3)) if v.bytes().all(|b| b.is_ascii_digit()) => s.format_version = n as u16,
                Ok(_) if v.bytes().all(|b| b.is_ascii_digit()) => eprintln!(
                    "Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {v}. Valid values are 2 or 3. \
                     Using default version {default_version}."
                ),
                _ => eprintln!(
                    "Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {v}. Using default version \
                     {default_version}."
                ),
            },
            // Our LLVM 19 drop-in (LLVM 19 itself ignores the variable).
            Some(v) if v == "2" => s.format_version = 2,
            Some(v) if v == "3" => s.format_version = 3,
            Some(other) => {
                eprintln!("Warning: Invalid value for COMPRESSED_BUNDLE_FORMAT_VERSION: {other}. Using version 2.")
            }
        }
        if var("OFFLOAD_BUNDLER_IGNORE_ENV_VAR").as_deref() == Some("1") {
            return s;
        }
        if let Some(v) = var("OFFLOAD_BUNDLER_VERBOSE") {
            s.verbose = v == "1";
        }
        if let Some(v) = var("OFFLOAD_BUNDLER_COMPRESS") {
            s.compress = v == "1";
        }
        if let Some(v) = var("OFFLOAD_BUNDLER_COMPRESSION_LEVEL") {
            match v.parse::<i32>() {
                Ok(l) if !v.starts_with('+') => s.level = Some(l),
                _ => eprintln!("Warning: Invalid value for OFFLOAD_BUNDLER_COMPRESSION_LEVEL: {v}. Ignoring it."),
            }
        }
        s
    }
}

/// Decompresses the input if needed, printing LLVM's statistics under
/// `-verbose`, and checks the stored hash.
pub fn decompress<'a>(input: &'a Input, verbose: bool, timers: &mut TimerGroup) -> Result<Cow<'a, [u8]>, String> {
    let bytes = input.bytes();
    if !offload_format::bundle::compressed::is_compressed(bytes) {
        if verbose && bytes.len() >= 20 {
            eprintln!("Uncompressed bundle.");
        }
        return Ok(Cow::Borrowed(bytes));
    }
    let (result, wall) = timers.time("Decompression time", || bundler::decompress_input(bytes));
    let decompressed = result.map_err(|e| e.to_string())?;
    if let (true, Some(info)) = (verbose, decompressed.info) {
        print_decompression_stats(&info, wall);
    }
    decompressed.into_verified().map_err(|e| e.to_string())
}

/// LLVM 19's `-verbose` report of a decompressed input.
pub fn print_decompression_stats(info: &DecompressionInfo, wall: Duration) {
    let h = info.header;
    let rate = h.uncompressed_size as f64 / info.compressed_len as f64;
    let speed = (h.uncompressed_size as f64 / (1024.0 * 1024.0)) / wall.as_secs_f64();
    let mut msg = format!("Compressed bundle format version: {}\n", h.version);
    if let Some(total) = h.total_size {
        msg.push_str(&format!("Total file size (from header): {} bytes\n", with_commas(total)));
    }
    msg.push_str(&format!(
        "Decompression method: {}\nSize before decompression: {} bytes\nSize after decompression: {} bytes\n\
         Compression rate: {rate:.2}\nCompression ratio: {:.2}%\nDecompression speed: {speed:.2} MB/s\n\
         Stored hash: {:#018x}\nRecalculated hash: {:#018x}\nHashes match: {}",
        h.method.name(),
        with_commas(info.compressed_len as u64),
        with_commas(h.uncompressed_size),
        100.0 / rate,
        h.hash,
        info.computed_hash,
        if h.hash == info.computed_hash { "Yes" } else { "No" },
    ));
    eprintln!("{msg}");
}

/// Compresses a bundled output with LLVM 19's settings unless told
/// otherwise, printing LLVM's statistics under `-verbose`.
pub fn compress(
    plan: Plan,
    inputs: &[&Input],
    opts: &Parsed,
    env: &EnvSettings,
    verbose: bool,
    timers: &mut TimerGroup,
) -> Result<Plan<'static>, String> {
    let method = match opts.value("compression-method") {
        None | Some("zstd") => Method::Zstd,
        Some("zlib") => Method::Zlib,
        Some(other) => return Err(format!("'{other}': unknown compression method (use zstd or zlib)")),
    };
    let default_level = if method == Method::Zstd { 3 } else { 6 };
    let level = opts.int("compression-level").or(env.level).unwrap_or(default_level);
    let options = CompressOptions {
        method,
        level,
        version: env.format_version,
        threads: opts.uint("compression-threads").unwrap_or(0),
    };
    let bundle = offload_io::materialize(&plan, inputs).map_err(|e| offload_io::error_text(&e))?;
    let (result, wall) = timers.time("Compression time", || bundler::compress(&bundle, &options));
    let c = result.map_err(|e| e.to_string())?;
    if verbose {
        let rate = bundle.len() as f64 / c.compressed_len as f64;
        let speed = (bundle.len() as f64 / (1024.0 * 1024.0)) / wall.as_secs_f64();
        eprintln!(
            "Compressed bundle format version: {}\nTotal file size (including headers): {} bytes\n\
             Compression method used: {}\nCompression level: {level}\nBinary size before compression: {} bytes\n\
             Binary size after compression: {} bytes\nCompression rate: {rate:.2}\nCompression ratio: {:.2}%\n\
             Compression speed: {speed:.2} MB/s\nTruncated MD5 hash: {:#018x}",
            c.version,
            with_commas(c.bytes.len() as u64),
            method.name(),
            with_commas(bundle.len() as u64),
            with_commas(c.compressed_len as u64),
            100.0 / rate,
            c.hash,
        );
    }
    let mut out = Plan::new();
    out.own(c.bytes);
    Ok(out)
}
