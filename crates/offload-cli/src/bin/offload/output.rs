//! Output: JSON objects with a fixed key order (written by hand: a few
//! string escapes do not need a serialisation framework) and aligned text
//! tables.

use offload_format::inspect::CodeObject;
use std::fmt::Write as _;

/// A JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON value.
pub enum Value {
    Str(String),
    Num(u64),
    Bool(bool),
    Null,
}

impl Value {
    fn render(&self) -> String {
        match self {
            Value::Str(s) => string(s),
            Value::Num(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Null => "null".into(),
        }
    }
}

/// A JSON object, keys in insertion order.
#[derive(Default)]
pub struct Object(Vec<(&'static str, Value)>);

impl Object {
    pub fn add(mut self, key: &'static str, value: Value) -> Self {
        self.0.push((key, value));
        self
    }

    pub fn render(&self) -> String {
        let fields: Vec<String> = self.0.iter().map(|(k, v)| format!("{}: {}", string(k), v.render())).collect();
        format!("{{{}}}", fields.join(", "))
    }
}

/// A JSON array of objects, one per line.
pub fn array(objects: &[Object]) -> String {
    if objects.is_empty() {
        return "[]\n".into();
    }
    let items: Vec<String> = objects.iter().map(|o| format!("  {}", o.render())).collect();
    format!("[\n{}\n]\n", items.join(",\n"))
}

/// The keys `list` prints for a code object (the stable schema).
pub fn code_object(file: &str, o: &CodeObject) -> Object {
    Object::default()
        .add("file", Value::Str(file.to_string()))
        .add("location", Value::Str(o.location.to_string()))
        .add("format", Value::Str(o.format.name().to_string()))
        .add("id", Value::Str(o.id.clone()))
        .add("offload_kind", Value::Str(o.offload_kind.clone()))
        .add("triple", Value::Str(o.triple.clone()))
        .add("target_id", Value::Str(o.target_id.clone()))
        .add("size", Value::Num(o.size))
        .add("offset", o.offset.map_or(Value::Null, Value::Num))
        .add("compressed", Value::Bool(o.compressed))
        .add("unit", Value::Num(o.unit as u64))
        .add("image_kind", o.image_kind_name().map_or(Value::Null, Value::Str))
}

/// Hex offset or `-`.
pub fn offset(o: Option<u64>) -> String {
    o.map_or_else(|| "-".to_string(), |v| format!("{v:#x}"))
}

/// Aligned columns; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                out.push_str(cell);
            } else {
                let pad = widths[i] + 2 - cell.chars().count();
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\u0001é\"");
    }

    #[test]
    fn tables_align() {
        let t = table(&["A", "BB"], &[vec!["xxx".into(), "y".into()]]);
        assert_eq!(t, "A    BB\nxxx  y\n");
    }
}
