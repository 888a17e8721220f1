//! Output: JSON written by `serde_json` in the project's layout (objects on
//! one line with `", "` and `": "` between items, arrays of objects one
//! object a line), and aligned text tables, coloured only where
//! [`Colors`] says so.

use crate::cli::ColorChoice;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::ser::{CharEscape, Formatter};
use std::io;

/// serde_json's compact form with a space after each `,` and `:`, the
/// layout `offload` has always printed (the golden files hold it).
struct Spaced;

impl Formatter for Spaced {
    fn begin_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }
    /// Backspace and form feed as `\u00XX` like every other control
    /// character (serde_json's `\b`, `\f` would change existing output).
    fn write_char_escape<W: ?Sized + io::Write>(&mut self, w: &mut W, escape: CharEscape) -> io::Result<()> {
        match escape {
            CharEscape::Backspace => w.write_all(b"\\u0008"),
            CharEscape::FormFeed => w.write_all(b"\\u000c"),
            other => serde_json::ser::CompactFormatter.write_char_escape(w, other),
        }
    }
}

/// `value` as JSON on one line.
pub fn json<T: Serialize + ?Sized>(value: &T) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Spaced);
    // Serialising to memory fails only for a map key that is not a string,
    // which none of the records has.
    if value.serialize(&mut ser).is_err() {
        return "null".into();
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Prints `value` as indented JSON (the `--json` reports). Serialising to
/// memory fails only for a map key that is not a string; should it, the
/// message goes to standard error and the exit status is 2.
pub fn print_pretty<T: Serialize + ?Sized>(argv0: &str, value: &T) -> Result<(), u8> {
    match serde_json::to_string_pretty(value) {
        Ok(text) => {
            println!("{text}");
            Ok(())
        }
        Err(e) => {
            eprintln!("{argv0}: error: {e}");
            Err(2)
        }
    }
}

/// A JSON value of an [`Object`].
#[derive(serde::Serialize)]
#[serde(untagged)]
pub enum Value {
    Str(String),
    Num(u64),
    Null,
}

/// A JSON object built key by key, in insertion order (`extract-uri`'s
/// records; code objects and findings are `offload_inspect::record`'s).
#[derive(Default)]
pub struct Object(Vec<(&'static str, Value)>);

impl Object {
    pub fn add(mut self, key: &'static str, value: Value) -> Self {
        self.0.push((key, value));
        self
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// A JSON array of records, one per line.
pub fn array<T: Serialize>(records: &[T]) -> String {
    if records.is_empty() {
        return "[]\n".into();
    }
    let items: Vec<String> = records.iter().map(|r| format!("  {}", json(r))).collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

/// A string, or null.
pub fn opt_str(s: Option<String>) -> Value {
    s.map_or(Value::Null, Value::Str)
}

/// Hex offset or `-`.
pub fn offset(o: Option<u64>) -> String {
    o.map_or_else(|| "-".to_string(), |v| format!("{v:#x}"))
}

/// How text tables show sizes and how wide they may be, decided once per
/// run from standard output: on a terminal sizes are human (`1.5 MiB`,
/// unless `--bytes`) and tables fit its width; through a pipe everything is
/// exact and whole, so scripts and files get what they always got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    /// Sizes as `1.5 MiB` rather than `1572864`.
    pub human: bool,
    /// The terminal's columns: wider tables elide their longest cells.
    pub width: Option<usize>,
}

static LAYOUT: std::sync::OnceLock<Layout> = std::sync::OnceLock::new();

impl Layout {
    /// The layout for this process's standard output: a terminal's width
    /// (`COLUMNS` when set, else the terminal's own), human sizes there
    /// unless `bytes`.
    pub fn for_stdout(bytes: bool) -> Layout {
        use std::io::IsTerminal;
        if !std::io::stdout().is_terminal() {
            return Layout::default();
        }
        let columns = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse().ok()).filter(|&c: &usize| c > 0);
        Layout { human: !bytes, width: columns.or_else(terminal_columns) }
    }
}

/// The columns of the terminal on standard output, if it says.
fn terminal_columns() -> Option<usize> {
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which
    // points at a live, properly aligned local of that type.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size as *mut libc::winsize) };
    (rc == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Sets the layout of this run (once, from `main`; later calls are ignored).
pub fn set_layout(layout: Layout) {
    let _ = LAYOUT.set(layout);
}

fn layout() -> Layout {
    LAYOUT.get().copied().unwrap_or_default()
}

/// A size for a table cell: exact bytes, or human on a terminal.
pub fn size(bytes: u64) -> String {
    if layout().human { human(bytes) } else { bytes.to_string() }
}

/// [`size`] of a difference that may be negative (bytes saved by a
/// rewrite that grew the file): `-1.5 KiB`, `-1536`.
pub fn signed_size(bytes: i64) -> String {
    let magnitude = size(bytes.unsigned_abs());
    if bytes < 0 { format!("-{magnitude}") } else { magnitude }
}

/// What follows exact sizes in a sentence (`7112 of 7112 bytes`): ` bytes`,
/// or nothing where [`size`] is human (`6.9 KiB of 6.9 KiB`).
pub fn bytes_unit() -> &'static str {
    if layout().human { "" } else { " bytes" }
}

/// `bytes` in binary units with one decimal: `512 B`, `1.5 KiB`, `23.0 MiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    // Round first, so that 1023.96 KiB reads 1.0 MiB, not 1024.0 KiB.
    while (value * 10.0).round() / 10.0 >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// Aligned columns; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    table_with(header, rows, &|_, cell| cell.to_string())
}

/// The narrowest a column is made to fit a terminal: its header, and
/// never under 12 characters.
const MIN_FIT: usize = 12;

/// Narrows the widest columns until the row fits `width` (two spaces
/// between columns); a column never goes below its header or [`MIN_FIT`].
fn fit(widths: &mut [usize], header: &[&str], width: usize) {
    let floor = |i: usize| header.get(i).map_or(0, |h| h.chars().count()).max(MIN_FIT);
    let mut total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    // One character at a time from the widest column that may still
    // narrow, so that two long columns share the cut.
    while total > width {
        let widest = widths.iter().enumerate().filter(|&(i, w)| *w > floor(i)).max_by_key(|&(i, w)| (*w, i));
        let Some((i, _)) = widest else { return };
        if let Some(w) = widths.get_mut(i) {
            *w -= 1;
        }
        total -= 1;
    }
}

/// `text` in `width` characters: a third from the start and the rest from
/// the end with `…` between (paths and IDs say most at their end: the
/// file name, the target ID).
pub fn elide(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width || width == 0 {
        return text.to_string();
    }
    let keep = width - 1;
    let head = keep / 3;
    let tail = keep - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!("{start}…{end}")
}

/// [`table`] with each row cell passed through `cell(column, text)` (to
/// colour it); widths are those of the plain text.
pub fn table_with(header: &[&str], rows: &[Vec<String>], cell: &dyn Fn(usize, &str) -> String) -> String {
    // Names from files (entry IDs, member names) may hold ESC, BEL or line
    // breaks: shown escaped, never sent to the terminal as they are.
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(|c| escape_controls(c)).collect()).collect();
    let rows = &rows[..];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    if let Some(width) = layout().width {
        fit(&mut widths, header, width);
    }
    render(header, rows, &widths, cell)
}

/// The table with these column widths: cells longer than theirs are
/// elided, then padded, then coloured (escapes never count as width).
fn render(header: &[&str], rows: &[Vec<String>], widths: &[usize], cell: &dyn Fn(usize, &str) -> String) -> String {
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for (r, row) in std::iter::once(&header).chain(rows).enumerate() {
        let last = row.len().saturating_sub(1);
        for (i, text) in row.iter().enumerate() {
            let width = widths.get(i).copied().unwrap_or(0);
            let text = elide(text, width);
            out.push_str(&if r == 0 { text.clone() } else { cell(i, &text) });
            if i != last {
                out.push_str(&" ".repeat(width.saturating_sub(text.chars().count()) + 2));
            }
        }
        out.push('\n');
    }
    out
}

/// `text` with control characters (C0, DEL, C1) written as `\xNN` or
/// `\u{NNNN}`, and `\` doubled when it could be read as such an escape
/// (docs/reliability.md).
pub fn escape_controls(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// The colours text output uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Paint {
    Green,
    Yellow,
    Red,
}

/// Whether text output is coloured: never in JSON; with `--color auto`
/// only when standard output is a terminal and `NO_COLOR` is unset or
/// empty (no-color.org); `--color always` is an explicit request and wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Colors {
    on: bool,
}

impl Colors {
    pub fn new(choice: ColorChoice, json: bool) -> Self {
        use std::io::IsTerminal;
        Self::decide(choice, json, std::io::stdout().is_terminal(), std::env::var_os("NO_COLOR"))
    }

    fn decide(choice: ColorChoice, json: bool, tty: bool, no_color: Option<std::ffi::OsString>) -> Self {
        let on = !json
            && match choice {
                ColorChoice::Always => true,
                ColorChoice::Never => false,
                ColorChoice::Auto => tty && no_color.is_none_or(|v| v.is_empty()),
            };
        Colors { on }
    }

    /// `text` in `paint` (bold for red, which marks failures), or as it is.
    pub fn paint(self, text: &str, paint: Paint) -> String {
        if !self.on {
            return text.to_string();
        }
        let sgr = match paint {
            Paint::Green => "32",
            Paint::Yellow => "33",
            Paint::Red => "1;31",
        };
        format!("\x1b[{sgr}m{text}\x1b[0m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(json("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"");
        assert_eq!(json("\u{8}\u{c}\t/"), "\"\\u0008\\u000c\\t/\"");
    }

    #[test]
    fn objects_keep_their_order_and_layout() {
        let o = Object::default().add("z", Value::Num(1)).add("a", Value::Null).add("s", Value::Str("x".into()));
        assert_eq!(json(&o), r#"{"z": 1, "a": null, "s": "x"}"#);
        assert_eq!(array(&[o, Object::default()]), "[\n  {\"z\": 1, \"a\": null, \"s\": \"x\"},\n  {}\n]\n");
        assert_eq!(json(&vec!["a", "b"]), r#"["a", "b"]"#);
    }

    #[test]
    fn tables_escape_control_characters() {
        let t = table(&["A", "B"], &[vec!["id\x1b]0;pwned\x07".into(), "x\ny".into()]]);
        assert_eq!(t, "A                   B\nid\\x1b]0;pwned\\x07  x\\x0ay\n");
        assert!(!t.contains('\x1b') && !t.contains('\x07'));
        assert_eq!(escape_controls("plain\\text"), "plain\\text");
        assert_eq!(escape_controls("a\u{9b}b"), "a\\x9bb");
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "A    BB\nxxx  y\n");
        let on = Colors::decide(ColorChoice::Always, false, false, None);
        let t = table_with(&["A", "BB"], &[vec!["x".into(), "y".into()]], &|i, c| {
            if i == 0 { on.paint(c, Paint::Green) } else { c.to_string() }
        });
        assert_eq!(t, "A  BB\n\x1b[32mx\x1b[0m  y\n", "padding counts the text, not the escapes");
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(1024 * 1024 - 1), "1.0 MiB");
        assert_eq!(human(25_384_336), "24.2 MiB");
        assert_eq!(human(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn wide_tables_elide_to_fit() {
        assert_eq!(elide("libfoo.so-0-hipv4-gfx90a", 12), "lib…4-gfx90a");
        assert_eq!(elide("short", 12), "short");
        let rows = vec![vec!["a".repeat(40), "x".into(), "b".repeat(30)]];
        let mut widths = vec![40, 1, 30];
        fit(&mut widths, &["FILE", "K", "WHY"], 50);
        assert!(widths.iter().sum::<usize>() + 4 <= 50, "{widths:?}");
        assert!(widths[0] >= MIN_FIT && widths[2] >= MIN_FIT, "both long columns share the cut: {widths:?}");
        let t = render(&["FILE", "K", "WHY"], &rows, &widths, &|_, c| c.to_string());
        assert!(t.lines().all(|l| l.chars().count() <= 50), "{t}");
        assert!(t.contains('…'));
        // Too narrow to fit: columns stop at their floor.
        let mut widths = vec![40, 1, 30];
        fit(&mut widths, &["FILE", "K", "WHY"], 5);
        assert_eq!(widths, [MIN_FIT, 1, MIN_FIT]);
    }

    #[test]
    fn colour_only_where_asked_and_never_in_json() {
        use ColorChoice::*;
        let set = || Some(std::ffi::OsString::from("1"));
        let empty = || Some(std::ffi::OsString::new());
        for (choice, json, tty, no_color, want) in [
            (Auto, false, true, None, true),
            (Auto, false, false, None, false),
            (Auto, false, true, set(), false),
            (Auto, false, true, empty(), true),
            (Auto, true, true, None, false),
            (Always, false, false, set(), true),
            (Always, true, true, None, false),
            (Never, false, true, None, false),
        ] {
            let c = Colors::decide(choice, json, tty, no_color.clone());
            assert_eq!(c.paint("OK", Paint::Green) != "OK", want, "{choice:?} json={json} tty={tty} {no_color:?}");
        }
    }
}
