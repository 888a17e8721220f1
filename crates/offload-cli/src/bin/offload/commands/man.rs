//! `offload man`: the man pages, generated from the one clap definition
//! ([`crate::cli::Cli`]).

use crate::cli::Cli;
use clap::CommandFactory;
use offload_format::plan::Plan;
use std::path::Path;

/// Examples of each page (`offload` for the top page): the command line
/// and what it does.
fn examples(command: &str) -> &'static [(&'static str, &'static str)] {
    match command {
        "offload" => &[
            ("offload list libfoo.so", "Every GPU code object in a library, with its target and size."),
            (
                "offload check /opt/rocm/lib",
                "Whether the GPUs of this machine load code from every library of a folder.",
            ),
            (
                "offload size --keep gfx90a dist/*.whl",
                "Bytes per GPU target in wheels, and what pruning to gfx90a would save.",
            ),
        ],
        "list" => &[
            (
                "offload list libfoo.so",
                "The code objects of a library: location, format, kind, triple, target ID, size, offset.",
            ),
            (
                "offload list --json torch-2.5.0-cp311-cp311-linux_x86_64.whl",
                "Those of every member of a wheel, as JSON.",
            ),
        ],
        "select" => &[(
            "offload select --gpu gfx90a:xnack- libfoo.so",
            "Which code object the HIP runtime loads on the GPU, and why the others are rejected.",
        )],
        "extract" => &[
            (
                "offload extract --gpu gfx906 -o scale.co libfoo.so",
                "The code object the runtime would load on gfx906, written to scale.co.",
            ),
            (
                "offload extract --all --output-dir out pkg.whl",
                "Every code object of a wheel, named after the member it comes from.",
            ),
        ],
        "verify" => &[("offload verify lib/", "Decompresses and checks every code object of every file in a folder.")],
        "check" => &[
            ("offload check /opt/rocm/lib", "Whether the GPUs of this machine load code from each library."),
            (
                "offload check --gpu gfx1030 --gpu sm_89 app",
                "The same for named GPUs, following the program's libraries as the loader finds them.",
            ),
        ],
        "gpus" => &[("offload gpus", "The GPUs of this machine and the target ID each one asks code objects for.")],
        "size" => &[("offload size --keep gfx90a,gfx942 lib/", "Bytes per target, and what prune --keep would drop.")],
        "diff" => &[
            ("offload diff old.whl new.whl", "Code objects added, removed and changed between two wheels."),
            ("offload diff --kernels old.so new.so", "Kernels added and removed, and resources that changed (spills)."),
        ],
        "prune" => &[
            (
                "offload prune --keep gfx90a libfoo.so -o libfoo.gfx90a.so",
                "A copy of the library with only the gfx90a code, as small as its layout allows (cut, else zero; the report says which and why).",
            ),
            (
                "offload prune --keep gfx90a --mode zero libfoo.so -o libfoo.gfx90a.so",
                "The same with every other byte in place (the file keeps its size; GNU strip and patchelf keep working).",
            ),
            (
                "offload prune --keep sm_90 pkg.whl -o pkg.sm90.whl",
                "A wheel whose libraries keep only what sm_90 loads, RECORD rewritten.",
            ),
            (
                "offload prune --keep gfx942 --in-place venv/",
                "Every file of a folder pruned in place, one file at a time.",
            ),
            (
                "offload prune --keep gfx942 rootfs.tar.zst -o small.tar.zst",
                "A container layer rewritten as a new tarball.",
            ),
            (
                "offload prune --keep gfx90a --dry-run libfoo.so",
                "What would be dropped, and the bytes saved; nothing written.",
            ),
        ],
        "kernels" => &[
            (
                "offload kernels libfoo.so",
                "Every kernel of every code object: registers, LDS or shared memory, scratch, spills and an occupancy estimate.",
            ),
            (
                "offload kernels --gpu gfx942 --json torch-2.9-cp312-cp312-linux_x86_64.whl",
                "The kernels the GPU would load from a wheel, as JSON.",
            ),
        ],
        "split" => &[
            (
                "offload split --by family pkg-1.0-py3-none-manylinux_2_28_x86_64.whl -o wheels",
                "One wheel per CUDA SM family and AMD target, each pruned to what its GPUs load (+sm9x, +gfx942).",
            ),
            (
                "offload split --kpack /opt/rocm/lib -o split",
                "Every HIP library of a folder in ROCm kpack form: host libraries and one archive per target.",
            ),
        ],
        "join" => &[(
            "offload join split/lib/libfoo.so -o libfoo.so",
            "The fat library again from a library split by offload split --kpack and its archives.",
        )],
        "replace" => &[(
            "offload replace --entry gfx90a:xnack+ --with new.co libfoo.so -o libfoo.new.so",
            "A copy of the library with one code object replaced.",
        )],
        "completions" => {
            &[("offload completions bash > ~/.local/share/bash-completion/completions/offload", "Completion for bash.")]
        }
        "man" => {
            &[("offload man --output-dir ~/.local/share/man/man1", "Installs offload.1 and one page per command.")]
        }
        _ => &[],
    }
}

/// What the exit status means for `command` (docs/reference/offload.md,
/// "Exit status").
fn exit_status(command: &str) -> [&'static str; 3] {
    let io = "a usage error, or a file could not be read or written";
    match command {
        "check" => [
            "every GPU loads code from every file given",
            "some GPU does not (each line says why), or a problem was found",
            io,
        ],
        "select" => {
            ["every fat binary holds a code object for the GPU", "some fat binary holds nothing that loads", io]
        }
        "diff" => ["the inputs hold the same code objects", "they differ", io],
        "verify" => ["no errors were found", "errors were found", io],
        "extract" => [
            "every matching code object was written",
            "none matches, or some could not be decoded (the others are written)",
            io,
        ],
        _ => ["success", "problems were found (the messages say which)", io],
    }
}

/// Text for roff: backslashes and dashes escaped, no line starting with
/// a control character.
fn roff_text(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with('.') || escaped.starts_with('\'') { format!("\\&{escaped}") } else { escaped }
}

/// The man page of `command` in roff: clap's sections, then EXAMPLES and
/// EXIT STATUS.
fn page(command: clap::Command, name: &str) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    // The footer names the tool and its version on every page (clap would
    // write the subcommand's name there).
    let source = format!("offload {}", crate::cli::VERSION);
    let has_args = command.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = command.has_subcommands();
    let has_version = command.get_version().is_some() || command.get_long_version().is_some();
    let man = clap_mangen::Man::new(command).source(source);
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if has_args {
        man.render_options_section(&mut out)?;
    }
    if has_subcommands {
        man.render_subcommands_section(&mut out)?;
    }
    let mut extra = String::new();
    let list = examples(name);
    if !list.is_empty() {
        extra.push_str(".SH EXAMPLES\n");
        for (line, what) in list {
            extra.push_str(&format!(".TP\n\\fB{}\\fR\n{}\n", roff_text(line), roff_text(what)));
        }
    }
    extra.push_str(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in exit_status(name).iter().enumerate() {
        extra.push_str(&format!(".TP\n{code}\n{}\n", roff_text(meaning)));
    }
    out.extend_from_slice(extra.as_bytes());
    if has_version {
        man.render_version_section(&mut out)?;
    }
    Ok(out)
}

/// The pages: `offload.1`, then `offload-COMMAND.1` for each command.
pub fn pages() -> std::io::Result<Vec<(String, Vec<u8>)>> {
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    let mut pages = vec![("offload.1".to_string(), page(top.clone(), "offload")?)];
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        // clap names a built subcommand's page after its display name
        // (`offload-list`); name the file the same way.
        let name = sub.get_display_name().unwrap_or_else(|| sub.get_name()).to_string();
        pages.push((format!("{name}.1"), page(sub.clone(), sub.get_name())?));
    }
    Ok(pages)
}

/// `offload man`'s options.
#[derive(clap::Args, Debug, PartialEq, Eq)]
pub struct ManArgs {
    /// Write offload.1 and offload-COMMAND.1 into DIR
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<std::path::PathBuf>,
}

impl ManArgs {
    pub fn run(&self, ctx: &crate::cli::Context) -> u8 {
        man(&ctx.argv0, self.output_dir.as_deref())
    }
}

/// `offload man`: `offload.1` on standard output, or every page written
/// into `dir` (all or none: staged, then committed).
fn man(argv0: &str, dir: Option<&Path>) -> u8 {
    let pages = match pages() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{argv0}: error: cannot render the man page: {e}");
            return 1;
        }
    };
    let Some(dir) = dir else {
        use std::io::Write;
        let top = pages.first().map(|(_, bytes)| bytes.as_slice()).unwrap_or_default();
        // A write error on standard output is status 2 with the system's
        // message, as for every command (docs/reliability.md).
        let mut out = std::io::stdout().lock();
        return match out.write_all(top).and_then(|()| out.flush()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("{argv0}: error: standard output: {}", offload_io::error_text(&e));
                2
            }
        };
    };
    let mut outputs = offload_io::Outputs::new();
    for (name, bytes) in &pages {
        let path = dir.join(name).to_string_lossy().into_owned();
        if let Err(e) = outputs.stage(&path, &Plan::borrowed(bytes), &[]) {
            eprintln!("{argv0}: error: {e}");
            return 2;
        }
    }
    // A page that cannot be written is an I/O error: 2, as everywhere.
    if let Err(e) = outputs.commit() {
        eprintln!("{argv0}: error: {e}");
        return 2;
    }
    0
}

#[cfg(test)]
mod tests {
    /// Every page has EXAMPLES and EXIT STATUS; every command has examples.
    #[test]
    fn pages_have_examples_and_exit_status() {
        let pages = super::pages().unwrap();
        assert!(pages.len() > 10);
        for (name, bytes) in &pages {
            let text = String::from_utf8_lossy(bytes);
            assert!(text.contains(".SH EXAMPLES"), "{name}");
            assert!(text.contains(".SH \"EXIT STATUS\""), "{name}");
            assert!(text.contains("\\fBoffload"), "{name}");
        }
    }
}
