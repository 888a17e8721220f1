//! A small command-line parser that follows LLVM's `cl` conventions, so the
//! drop-in tools accept exactly what LLVM's tools accept:
//!
//! * one or two leading dashes (`-type=o`, `--type=o`); `--` ends options;
//! * values attached with `=` or given as the next argument (`-type o`);
//! * boolean flags that optionally take `=true|false|1|0`;
//! * repeatable options, optionally comma-separated (`-targets=a,b`);
//! * the last occurrence of a single-valued option wins;
//! * `@file` response files (GNU tokenization);
//! * LLVM's messages and exit code 1 for bad command lines.
//!
//! clap and lexopt cannot be used: both read `-type=o` as short options.

use std::fmt::Write as _;

/// How an option takes its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// A boolean flag: `-x`, `-x=true`, `-x=0`.
    Flag,
    /// A string value.
    Str,
    /// An unsigned 32-bit integer (`cl::opt<unsigned>`).
    Uint,
    /// A signed 32-bit integer (`cl::opt<int>`).
    Int,
}

/// One option of a tool.
#[derive(Clone, Copy, Debug)]
pub struct OptSpec {
    /// Name without dashes, e.g. `type`, `o`, `###`.
    pub name: &'static str,
    pub kind: ValueKind,
    /// Shown after `=` in help, e.g. `string` gives `--type=<string>`.
    pub value_name: &'static str,
    /// `cl::list`: every occurrence is kept.
    pub multiple: bool,
    /// Values are split at commas (`cl::CommaSeparated`).
    pub comma_separated: bool,
    /// `cl::Required`: must occur at least once.
    pub required: bool,
    /// Not shown by `--help` (shown by `--help-hidden`).
    pub hidden: bool,
    pub help: &'static str,
}

impl OptSpec {
    pub const fn flag(name: &'static str, help: &'static str) -> Self {
        OptSpec {
            name,
            kind: ValueKind::Flag,
            value_name: "",
            multiple: false,
            comma_separated: false,
            required: false,
            hidden: false,
            help,
        }
    }
    pub const fn value(name: &'static str, value_name: &'static str, help: &'static str) -> Self {
        OptSpec {
            name,
            kind: ValueKind::Str,
            value_name,
            multiple: false,
            comma_separated: false,
            required: false,
            hidden: false,
            help,
        }
    }
    pub const fn kind(mut self, kind: ValueKind) -> Self {
        self.kind = kind;
        self
    }
    pub const fn list(mut self) -> Self {
        self.multiple = true;
        self
    }
    pub const fn comma(mut self) -> Self {
        self.multiple = true;
        self.comma_separated = true;
        self
    }
    pub const fn required(mut self) -> Self {
        self.required = true;
        self
    }
    pub const fn hidden(mut self) -> Self {
        self.hidden = true;
        self
    }

    fn takes_value(&self) -> bool {
        self.kind != ValueKind::Flag
    }

    /// The option as LLVM prints it in messages: `-o` for one-letter
    /// names, `--name` otherwise.
    pub fn display_name(&self) -> String {
        dashed(self.name)
    }
}

fn dashed(name: &str) -> String {
    if name.chars().count() == 1 { format!("-{name}") } else { format!("--{name}") }
}

/// Positional arguments a tool accepts (`cl::Positional`).
#[derive(Clone, Copy, Debug)]
pub struct PositionalSpec {
    /// Shown in the usage line, e.g. `<input files>`.
    pub value_name: &'static str,
    pub min: usize,
    /// `None` means any number.
    pub max: Option<usize>,
}

/// Everything the parser needs to know about a tool.
#[derive(Clone, Copy, Debug)]
pub struct ToolSpec {
    /// The name LLVM prints as the prefix of cl messages (the basename).
    pub name: &'static str,
    /// The OVERVIEW text of `--help`.
    pub overview: &'static str,
    /// The title of the tool's option category in `--help`.
    pub category: &'static str,
    pub options: &'static [OptSpec],
    pub positional: Option<PositionalSpec>,
    /// The line `--version` prints.
    pub version: &'static str,
    /// Order in which missing required options are reported (LLVM reports
    /// them in its option-map order). Options not listed come after, in
    /// table order.
    pub required_order: &'static [&'static str],
}

/// The result of a successful parse.
#[derive(Debug, Default, Clone)]
pub struct Parsed {
    /// (option name, value) in command-line order; flags get "true"/"false".
    occurrences: Vec<(&'static str, String)>,
    pub positionals: Vec<String>,
}

impl Parsed {
    /// Every value given for a list option, in order (comma lists split).
    pub fn values(&self, name: &str) -> Vec<&str> {
        self.occurrences.iter().filter(|(n, _)| *n == name).map(|(_, v)| v.as_str()).collect()
    }
    /// The last value given for a single-valued option.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.occurrences.iter().rev().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }
    /// Whether the option occurred at all.
    pub fn occurred(&self, name: &str) -> bool {
        self.occurrences.iter().any(|(n, _)| *n == name)
    }
    /// The value of a boolean flag (last occurrence wins; absent is false).
    pub fn flag(&self, name: &str) -> bool {
        self.value(name) == Some("true")
    }
    /// The value of an unsigned option; validated during parsing.
    pub fn uint(&self, name: &str) -> Option<u32> {
        self.value(name).and_then(|v| parse_llvm_uint(v).map(|x| x as u32))
    }
    /// The value of an integer option; validated during parsing.
    pub fn int(&self, name: &str) -> Option<i32> {
        self.value(name).and_then(parse_llvm_int)
    }
}

/// What the caller should do after parsing.
#[derive(Debug)]
pub enum Outcome {
    /// Run the tool with these options.
    Run(Parsed),
    /// Help or version text to print on stdout, then exit 0.
    Print(String),
    /// Messages to print on stderr, then exit 1.
    Fail(String),
}

/// LLVM parses integers with auto-detected radix (0x.., 0.., 0b..).
fn parse_llvm_u64(v: &str) -> Option<u64> {
    let (digits, radix) = if let Some(r) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        (r, 16)
    } else if let Some(r) = v.strip_prefix("0b").or_else(|| v.strip_prefix("0B")) {
        (r, 2)
    } else if v.len() > 1 && v.starts_with('0') {
        (&v[1..], 8)
    } else {
        (v, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

fn parse_llvm_uint(v: &str) -> Option<u64> {
    parse_llvm_u64(v).filter(|&x| x <= u64::from(u32::MAX))
}

fn parse_llvm_int(v: &str) -> Option<i32> {
    match v.strip_prefix('-') {
        Some(rest) => parse_llvm_u64(rest).and_then(|x| i64::try_from(x).ok()).and_then(|x| i32::try_from(-x).ok()),
        None => parse_llvm_u64(v).and_then(|x| i32::try_from(x).ok()),
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "true" | "TRUE" | "True" | "1" => Some(true),
        "false" | "FALSE" | "False" | "0" => Some(false),
        _ => None,
    }
}

/// Splits the contents of a response file the way GNU tools do: whitespace
/// separates arguments, quotes group, backslash escapes the next character.
pub fn tokenize_gnu(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut in_arg = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_arg {
                    args.push(std::mem::take(&mut cur));
                    in_arg = false;
                }
            }
            '\\' => {
                in_arg = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '"' | '\'' => {
                in_arg = true;
                let quote = c;
                while let Some(n) = chars.next() {
                    if n == quote {
                        break;
                    }
                    if n == '\\' && quote == '"' {
                        if let Some(e) = chars.next() {
                            cur.push(e);
                        }
                        continue;
                    }
                    cur.push(n);
                }
            }
            c => {
                in_arg = true;
                cur.push(c);
            }
        }
    }
    if in_arg {
        args.push(cur);
    }
    args
}

/// The most bytes read from one response file (`@/dev/zero` must not
/// exhaust memory).
const MAX_RESPONSE_FILE: u64 = 64 << 20;
/// The most response files one command line may expand (a few files that
/// each name the next several times would otherwise expand exponentially).
const MAX_RESPONSE_FILES: usize = 4096;

/// Reads a response file; `None` when it cannot be read (it is then kept as
/// a literal argument).
fn read_response_file(path: &str) -> Option<Result<String, String>> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_RESPONSE_FILE + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > MAX_RESPONSE_FILE {
        return Some(Err(format!("response file '{path}' is larger than {MAX_RESPONSE_FILE} bytes")));
    }
    Some(String::from_utf8(bytes).map_err(|_| format!("response file '{path}' is not valid UTF-8")))
}

/// Expands `@file` arguments recursively; a file that cannot be read is left
/// as a literal argument, as LLVM does. A file that includes itself, directly
/// or through others, is an error with LLVM's message (LLVM prints it and
/// then runs with no options at all; we stop).
fn expand_response_files(args: &[String]) -> Result<Vec<String>, String> {
    struct Expansion {
        out: Vec<String>,
        /// The files being expanded, outermost first.
        chain: Vec<std::path::PathBuf>,
        files: usize,
    }
    fn expand(args: &[String], x: &mut Expansion) -> Result<(), String> {
        for a in args {
            if let Some(path) = a.strip_prefix('@')
                && x.chain.len() < 20
                && let Some(text) = read_response_file(path)
            {
                let text = text?;
                let id = std::fs::canonicalize(path).unwrap_or_else(|_| std::path::PathBuf::from(path));
                if x.chain.contains(&id) {
                    return Err(format!("recursive expansion of: '{}'", id.display()));
                }
                x.files += 1;
                if x.files > MAX_RESPONSE_FILES {
                    return Err(format!("more than {MAX_RESPONSE_FILES} response files to expand"));
                }
                x.chain.push(id);
                expand(&tokenize_gnu(&text), x)?;
                x.chain.pop();
                continue;
            }
            x.out.push(a.clone());
        }
        Ok(())
    }
    let mut x = Expansion { out: Vec::new(), chain: Vec::new(), files: 0 };
    expand(args, &mut x)?;
    Ok(x.out)
}

/// Optimal string alignment distance (insertions, deletions, replacements).
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

const GENERIC: &[(&str, &str, bool)] = &[
    ("help", "Display available options (--help-hidden for more)", false),
    ("help-hidden", "Display all available options", true),
    ("help-list", "Display list of available options (--help-list-hidden for more)", false),
    ("help-list-hidden", "Display list of all available options", true),
    ("version", "Display the version of this program", false),
];

impl ToolSpec {
    fn find(&self, name: &str) -> Option<&'static OptSpec> {
        self.options.iter().find(|o| o.name == name)
    }

    /// The closest option name to an unknown argument, as LLVM suggests it.
    fn nearest(&self, arg: &str) -> Option<String> {
        if arg.is_empty() {
            return None;
        }
        let (lhs, rhs) = arg.split_once('=').unwrap_or((arg, ""));
        let mut best: Option<(usize, String)> = None;
        let candidates =
            self.options.iter().map(|o| (o.name, o.takes_value())).chain(GENERIC.iter().map(|g| (g.0, false)));
        for (name, permit_value) in candidates {
            let probe = if permit_value { lhs } else { arg };
            let d = edit_distance(name, probe);
            if best.as_ref().is_none_or(|(bd, _)| d < *bd) {
                let shown = if rhs.is_empty() || !permit_value { name.to_string() } else { format!("{name}={rhs}") };
                best = Some((d, shown));
            }
        }
        best.map(|(_, s)| s)
    }

    /// Parses `args` (without `argv[0]`); `argv0` is used in messages.
    pub fn parse(&self, argv0: &str, args: &[String]) -> Outcome {
        let args = match expand_response_files(args) {
            Ok(args) => args,
            Err(message) => return Outcome::Fail(format!("{argv0}: error: {message}\n")),
        };
        let mut parsed = Parsed::default();
        let mut errors = String::new();
        let mut dash_dash = false;
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            if dash_dash || !arg.starts_with('-') || arg == "-" {
                if self.positional.is_some() {
                    parsed.positionals.push(arg.clone());
                } else {
                    let _ = writeln!(
                        errors,
                        "{}: Unknown command line argument '{arg}'.  Try: '{argv0} --help'",
                        self.name
                    );
                }
                continue;
            }
            if arg == "--" {
                dash_dash = true;
                continue;
            }
            let body = arg.strip_prefix("--").unwrap_or(&arg[1..]);
            let (name, inline_value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            match name {
                "help" | "help-hidden" | "help-list" | "help-list-hidden" if inline_value.is_none() => {
                    let hidden = name.ends_with("hidden");
                    let list = name.starts_with("help-list");
                    return Outcome::Print(self.help_text(hidden, list));
                }
                "version" if inline_value.is_none() => {
                    return Outcome::Print(format!("{}\n", self.version));
                }
                _ => {}
            }
            let Some(opt) = self.find(name) else {
                let _ =
                    writeln!(errors, "{}: Unknown command line argument '{arg}'.  Try: '{argv0} --help'", self.name);
                if let Some(s) = self.nearest(body) {
                    let _ = writeln!(errors, "{}: Did you mean '{}'?", self.name, dashed(&s));
                }
                continue;
            };
            let shown = dashed(name);
            if opt.kind == ValueKind::Flag {
                let v = match inline_value {
                    None => true,
                    Some(v) => match parse_bool(v) {
                        Some(b) => b,
                        None => {
                            let _ = writeln!(
                                errors,
                                "{}: for the {shown} option: '{v}' is invalid value for boolean argument! Try 0 or 1",
                                self.name
                            );
                            continue;
                        }
                    },
                };
                parsed.occurrences.push((opt.name, v.to_string()));
                continue;
            }
            let value = match inline_value {
                Some(v) => v.to_string(),
                None if i < args.len() => {
                    i += 1;
                    args[i - 1].clone()
                }
                None => {
                    let _ = writeln!(errors, "{}: for the {shown} option: requires a value!", self.name);
                    continue;
                }
            };
            let valid = match opt.kind {
                ValueKind::Uint => parse_llvm_uint(&value).is_some(),
                ValueKind::Int => parse_llvm_int(&value).is_some(),
                _ => true,
            };
            if !valid {
                let what = if opt.kind == ValueKind::Uint { "uint" } else { "integer" };
                let _ = writeln!(
                    errors,
                    "{}: for the {shown} option: '{value}' value invalid for {what} argument!",
                    self.name
                );
                continue;
            }
            if opt.comma_separated {
                for piece in value.split(',') {
                    parsed.occurrences.push((opt.name, piece.to_string()));
                }
            } else {
                parsed.occurrences.push((opt.name, value));
            }
        }
        if let Some(pos) = self.positional {
            if parsed.positionals.len() < pos.min {
                let _ = writeln!(
                    errors,
                    "{}: Not enough positional command line arguments specified!\nMust specify at least {} positional argument{}: See: {argv0} --help",
                    self.name,
                    pos.min,
                    if pos.min == 1 { "" } else { "s" }
                );
            } else if pos.max.is_some_and(|m| parsed.positionals.len() > m) {
                let _ = writeln!(
                    errors,
                    "{}: Too many positional arguments specified!\nCan specify at most {} positional arguments: See: {argv0} --help",
                    self.name,
                    pos.max.unwrap_or(0)
                );
            }
        }
        let mut required: Vec<&OptSpec> =
            self.required_order.iter().filter_map(|n| self.find(n)).filter(|o| o.required).collect();
        for o in self.options.iter().filter(|o| o.required) {
            if !required.iter().any(|r| r.name == o.name) {
                required.push(o);
            }
        }
        for o in required {
            if !parsed.occurred(o.name) {
                let _ = writeln!(
                    errors,
                    "{}: for the {} option: must be specified at least once!",
                    self.name,
                    o.display_name()
                );
            }
        }
        if errors.is_empty() { Outcome::Run(parsed) } else { Outcome::Fail(errors) }
    }

    fn arg_text(o: &OptSpec) -> String {
        let mut s = o.display_name();
        if o.takes_value() {
            let v = match (o.value_name, o.kind) {
                ("", ValueKind::Uint) => "uint",
                ("", ValueKind::Int) => "int",
                ("", _) => "string",
                (v, _) => v,
            };
            let _ = write!(s, "=<{v}>");
        }
        s
    }

    /// `--help` in LLVM's layout: overview, usage, then options grouped by
    /// category (or one flat list for `--help-list`), sorted by name.
    pub fn help_text(&self, show_hidden: bool, flat: bool) -> String {
        let mut generic: Vec<(String, &str)> =
            GENERIC.iter().filter(|g| show_hidden || !g.2).map(|g| (dashed(g.0), g.1)).collect();
        let mut own: Vec<(String, &str)> =
            self.options.iter().filter(|o| show_hidden || !o.hidden).map(|o| (Self::arg_text(o), o.help)).collect();
        if flat {
            own.extend(generic.drain(..).filter(|(n, _)| n != "--version" && !n.starts_with("--help-list")));
        }
        let key = |s: &str| s.trim_start_matches('-').split('=').next().unwrap_or("").to_string();
        own.sort_by_key(|(n, _)| key(n));
        generic.sort_by_key(|(n, _)| key(n));
        let width = own.iter().chain(generic.iter()).map(|(n, _)| n.len()).max().unwrap_or(0);
        let mut out = format!("OVERVIEW: {}\n\nUSAGE: {} [options]", self.overview, self.name);
        if let Some(p) = self.positional {
            let _ = write!(out, " {}", p.value_name);
        }
        out.push_str("\n\nOPTIONS:\n");
        let print = |out: &mut String, rows: &[(String, &str)]| {
            for (arg, help) in rows {
                let mut lines = help.lines();
                let first = lines.next().unwrap_or("");
                let _ = writeln!(out, "  {arg:<width$} - {first}");
                for l in lines {
                    let _ = writeln!(out, "{:indent$}{l}", "", indent = width + 5);
                }
            }
        };
        if flat {
            print(&mut out, &own);
        } else {
            out.push_str("\nGeneric Options:\n\n");
            print(&mut out, &generic);
            let _ = write!(out, "\n{}:\n\n", self.category);
            print(&mut out, &own);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: &[OptSpec] = &[
        OptSpec::value("type", "string", "Type").required(),
        OptSpec::value("targets", "string", "Targets").comma(),
        OptSpec::value("input", "string", "Input").list(),
        OptSpec::value("bundle-align", "", "Align").kind(ValueKind::Uint),
        OptSpec::value("compression-level", "n", "Level").kind(ValueKind::Int),
        OptSpec::flag("list", "List"),
        OptSpec::flag("###", "Print").hidden(),
    ];
    const TOOL: ToolSpec = ToolSpec {
        name: "tool",
        overview: "A test tool.",
        category: "tool options",
        options: OPTS,
        positional: None,
        version: "tool 1",
        required_order: &[],
    };

    fn run(args: &[&str]) -> Outcome {
        TOOL.parse("./tool", &args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn one_or_two_dashes_and_both_value_forms() {
        let Outcome::Run(p) = run(&["-type=bc", "--targets", "a,b", "-targets=c", "--input", "x", "-input=-"]) else {
            panic!("parse failed")
        };
        assert_eq!(p.value("type"), Some("bc"));
        assert_eq!(p.values("targets"), ["a", "b", "c"]);
        assert_eq!(p.values("input"), ["x", "-"]);
    }

    #[test]
    fn value_is_taken_even_if_it_looks_like_an_option() {
        let Outcome::Run(p) = run(&["-type", "-list"]) else { panic!() };
        assert_eq!(p.value("type"), Some("-list"));
        assert!(!p.flag("list"));
    }

    #[test]
    fn flags_accept_boolean_values_and_last_wins() {
        let Outcome::Run(p) = run(&["-type=o", "-list", "-list=0"]) else { panic!() };
        assert!(!p.flag("list"));
        let Outcome::Fail(e) = run(&["-type=o", "-list=yes"]) else { panic!() };
        assert_eq!(e, "tool: for the --list option: 'yes' is invalid value for boolean argument! Try 0 or 1\n");
    }

    #[test]
    fn integers_are_checked() {
        let Outcome::Fail(e) = run(&["-type=o", "-bundle-align=-1"]) else { panic!() };
        assert_eq!(e, "tool: for the --bundle-align option: '-1' value invalid for uint argument!\n");
        let Outcome::Fail(e) = run(&["-type=o", "-compression-level=abc"]) else { panic!() };
        assert_eq!(e, "tool: for the --compression-level option: 'abc' value invalid for integer argument!\n");
        let Outcome::Run(p) = run(&["-type=o", "-bundle-align=0x10", "-compression-level=-3"]) else { panic!() };
        assert_eq!(p.uint("bundle-align"), Some(16));
        assert_eq!(p.int("compression-level"), Some(-3));
    }

    #[test]
    fn unknown_arguments_and_missing_required_are_reported_in_order() {
        let Outcome::Fail(e) = run(&["foo", "-inpu=x"]) else { panic!() };
        assert_eq!(
            e,
            "tool: Unknown command line argument 'foo'.  Try: './tool --help'\n\
             tool: Unknown command line argument '-inpu=x'.  Try: './tool --help'\n\
             tool: Did you mean '--input=x'?\n\
             tool: for the --type option: must be specified at least once!\n"
        );
    }

    #[test]
    fn missing_value_at_the_end() {
        let Outcome::Fail(e) = run(&["-type=o", "-input"]) else { panic!() };
        assert_eq!(e, "tool: for the --input option: requires a value!\n");
    }

    #[test]
    fn response_files_are_expanded() {
        let dir = tempfile::tempdir().unwrap();
        let rsp = dir.path().join("args");
        std::fs::write(&rsp, "-type=bc \"-input=a b\"\n-list").unwrap();
        let Outcome::Run(p) = run(&[&format!("@{}", rsp.display())]) else { panic!() };
        assert_eq!(p.value("type"), Some("bc"));
        assert_eq!(p.values("input"), ["a b"]);
        assert!(p.flag("list"));
    }

    /// A response file that names itself used to expand exponentially
    /// (`@r @r` in r: 2^20 reads; `@r @r @r @r`: 4^20, a hang).
    #[test]
    fn recursive_response_files_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("r");
        let arg = format!("@{}", r.display());
        std::fs::write(&r, format!("{arg} ").repeat(4)).unwrap();
        let Outcome::Fail(e) = run(&[&arg]) else { panic!() };
        let real = std::fs::canonicalize(&r).unwrap();
        assert_eq!(e, format!("./tool: error: recursive expansion of: '{}'\n", real.display()));
        // Through another file, too.
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, format!("-list @{}", b.display())).unwrap();
        std::fs::write(&b, format!("-type=bc @{}", a.display())).unwrap();
        let Outcome::Fail(e) = run(&[&format!("@{}", a.display())]) else { panic!() };
        assert!(e.contains("recursive expansion of:"), "{e}");
        // The same file twice side by side is not recursion.
        let ok = dir.path().join("ok");
        std::fs::write(&ok, "-list").unwrap();
        let ok_arg = format!("@{}", ok.display());
        let Outcome::Run(p) = run(&["-type=bc", &ok_arg, &ok_arg]) else { panic!() };
        assert!(p.flag("list"));
    }

    #[test]
    fn fan_out_of_response_files_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        // f0 names f1 eight times, f1 names f2 eight times, ...: 8^10 files.
        for i in 0..10 {
            let next = format!("@{} ", dir.path().join(format!("f{}", i + 1)).display());
            std::fs::write(dir.path().join(format!("f{i}")), next.repeat(8)).unwrap();
        }
        std::fs::write(dir.path().join("f10"), "-list").unwrap();
        let Outcome::Fail(e) = run(&[&format!("@{}", dir.path().join("f0").display())]) else { panic!() };
        assert!(e.contains("more than 4096 response files"), "{e}");
    }

    #[test]
    fn help_lists_visible_options_only() {
        let Outcome::Print(h) = run(&["--help"]) else { panic!() };
        assert!(h.contains("  --type=<string>         - Type\n"), "{h}");
        assert!(h.contains("  --bundle-align=<uint>   - Align\n"), "{h}");
        assert!(!h.contains("###"));
        let Outcome::Print(h) = run(&["--help-hidden"]) else { panic!() };
        assert!(h.contains("--###"));
    }

    #[test]
    fn gnu_tokenizer() {
        assert_eq!(tokenize_gnu(r#"a "b c" 'd e' f\ g"#), ["a", "b c", "d e", "f g"]);
    }
}
