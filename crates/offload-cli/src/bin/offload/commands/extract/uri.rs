//! `offload extract URI...`: the bytes ROCm code-object URIs name
//! (`file://PATH#offset=N&size=M`, see `offload_inspect::uri`).
//!
//! A range holding a code object (or anything else `list` finds code in:
//! a bundle, an OffloadBinary, a CUDA fat binary, an object, an archive) is
//! written as it is, as `llvm-objcopy --dump-offload-bundle=URI` writes it,
//! to `NAME-offsetN-sizeM.co`. A range holding a compressed bundle (the URI
//! `list` gives every code object inside one, which has no range of its
//! own) gives the code objects inside it, decompressed, named as `extract`
//! names them. All outputs are written, or none.

use crate::output::{self, Object, Value};
use offload_format::bundle::{binary, compressed};
use offload_format::plan::Plan;
use offload_inspect::decode::visit_objects;
use offload_inspect::{Options, scan, uri};
use std::sync::Mutex;

/// One output: the JSON record and the text line.
struct Written {
    object: Object,
    line: String,
}

/// Why a URI gave nothing.
enum Failure {
    /// A message for `offload: error: ...`.
    Message(String),
    /// A staging failure.
    Output(offload_io::OutputError),
}

pub fn run(argv0: &str, uris: &[String], output: Option<String>, dir: Option<String>, json: bool) -> u8 {
    let dir = dir.unwrap_or_else(|| ".".into());
    let mut outputs = offload_io::Outputs::new();
    let mut written = Vec::new();
    for text in uris {
        let result = one(argv0, text, output.as_deref(), &dir, &mut outputs, &mut written);
        match result {
            Ok(()) => {}
            Err(Failure::Message(m)) => {
                eprintln!("{argv0}: error: {m}");
                return 1;
            }
            Err(Failure::Output(e)) => {
                eprintln!("{argv0}: error: {e}");
                return 1;
            }
        }
    }
    if output.is_some() && written.len() > 1 {
        eprintln!("{argv0}: error: the URIs name {} code objects; use --output-dir to write them all", written.len());
        return 1;
    }
    if let Err(e) = outputs.commit() {
        eprintln!("{argv0}: error: {e}");
        return 1;
    }
    if json {
        let objects: Vec<Object> = written.into_iter().map(|w| w.object).collect();
        print!("{}", output::array(&objects));
    } else if output.as_deref() != Some("-") {
        for w in &written {
            println!("{}", w.line);
        }
    }
    0
}

/// The path a URI names, as the text `offload_io::Input::open` takes.
fn path_text(text: &str, path: Vec<u8>) -> Result<String, Failure> {
    String::from_utf8(path)
        .map_err(|_| Failure::Message(format!("'{text}': the path is not UTF-8, which is not supported")))
}

/// What a range holds, by its first bytes: whether `list` would find code
/// in it, or it is a code object itself.
fn holds_code(bytes: &[u8]) -> bool {
    const SPIRV: [u8; 4] = [0x03, 0x02, 0x23, 0x07];
    let head = &bytes[..bytes.len().min(4096)];
    bytes.is_empty()
        || bytes.starts_with(b"\x7fELF")
        || binary::has_magic(bytes)
        || bytes.starts_with(&offload_format::offload_binary::MAGIC)
        || bytes.starts_with(&offload_format::cuda::FATBIN_MAGIC_BYTES)
        || bytes.starts_with(b"!<arch>\n")
        || bytes.starts_with(&SPIRV)
        || offload_format::offload_binary::is_bitcode(bytes)
        || offload_format::bundle::object::looks_like_object(bytes)
        // PTX text (a CUDA fat binary's PTX entry): a `.version` directive.
        || (head.is_ascii() && head.windows(8).any(|w| w == b".version"))
}

fn one(
    argv0: &str,
    text: &str,
    output: Option<&str>,
    dir: &str,
    outputs: &mut offload_io::Outputs,
    written: &mut Vec<Written>,
) -> Result<(), Failure> {
    let parsed = uri::parse(text).map_err(|e| Failure::Message(e.to_string()))?;
    let path = path_text(text, parsed.path)?;
    let input = offload_io::Input::open(&path)
        .map_err(|e| Failure::Message(format!("'{path}': {}", offload_io::error_text(&e))))?;
    let data = input.bytes();
    let len = data.len() as u64;
    let size = parsed.size.unwrap_or(len.saturating_sub(parsed.offset));
    let range = usize::try_from(parsed.offset)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(s, n)| Some(s..s.checked_add(n)?))
        .filter(|r| r.end <= data.len())
        .ok_or_else(|| {
            Failure::Message(format!(
                "'{text}': offset {} and size {size} reach past the end of '{path}' ({len} bytes)",
                parsed.offset
            ))
        })?;
    let bytes = &data[range];
    let base = format!("{}-offset{}-size{size}", crate::inputs::display_name(&path), parsed.offset);
    let record = |id: Option<&str>, dest: &str| {
        Object::default()
            .add("file", Value::Str(path.clone()))
            .add("offset", Value::Num(parsed.offset))
            .add("size", Value::Num(size))
            .add("id", output::opt_str(id.map(str::to_string)))
            .add("path", Value::Str(dest.to_string()))
            .add("uri", Value::Str(text.to_string()))
    };
    if bytes.starts_with(compressed::MAGIC) {
        return inside_compressed(argv0, text, bytes, &base, output, dir, &input, outputs, written, &record);
    }
    if !holds_code(bytes) {
        let shown: String = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(Failure::Message(format!(
            "'{text}': the {size} bytes at offset {} of '{path}' are not a code object (they start {shown})",
            parsed.offset
        )));
    }
    let dest =
        output.map_or_else(|| format!("{dir}/{}", super::names::fit_name(&format!("{base}.co"))), str::to_string);
    let staged =
        offload_io::Outputs::stage_detached(&dest, &Plan::borrowed(bytes), &[&input]).map_err(Failure::Output)?;
    outputs.adopt(staged);
    written.push(Written { object: record(None, &dest), line: format!("{dest}\t-\t{text}") });
    Ok(())
}

/// A compressed bundle's code objects, decompressed once.
#[allow(clippy::too_many_arguments)]
fn inside_compressed(
    argv0: &str,
    text: &str,
    bytes: &[u8],
    base: &str,
    output: Option<&str>,
    dir: &str,
    input: &offload_io::Input,
    outputs: &mut offload_io::Outputs,
    written: &mut Vec<Written>,
    record: &dyn Fn(Option<&str>, &str) -> Object,
) -> Result<(), Failure> {
    let inv = scan(bytes, base, &Options::default());
    crate::inputs::print_diagnostics(argv0, text, &inv);
    let wanted: Vec<usize> = (0..inv.objects.len()).filter(|&i| !inv.objects[i].container).collect();
    if wanted.is_empty() {
        return Err(Failure::Message(format!("'{text}': the compressed bundle there holds no code object")));
    }
    let staged: Vec<Mutex<Option<(String, offload_io::StagedOutput)>>> =
        wanted.iter().map(|_| Mutex::new(None)).collect();
    let visited = visit_objects(&inv, &wanted, 0, |i, got| {
        let got = got.map_err(|e| Failure::Message(format!("'{text}': '{}': {e}", inv.objects[i].id)))?;
        let dest = match output {
            Some(o) => o.to_string(),
            None => format!("{dir}/{}", super::names::output_name(base, i, &inv.objects[i].id, got)),
        };
        let out =
            offload_io::Outputs::stage_detached(&dest, &Plan::borrowed(got), &[input]).map_err(Failure::Output)?;
        if let Some(slot) = wanted.binary_search(&i).ok().and_then(|p| staged.get(p))
            && let Ok(mut slot) = slot.lock()
        {
            *slot = Some((dest, out));
        }
        Ok(())
    });
    visited.map_err(|(_, failure)| failure)?;
    for (&i, slot) in wanted.iter().zip(staged) {
        if let Some((dest, out)) = slot.into_inner().ok().flatten() {
            outputs.adopt(out);
            let id = &inv.objects[i].id;
            written.push(Written { object: record(Some(id), &dest), line: format!("{dest}\t{id}\t{text}") });
        }
    }
    Ok(())
}
