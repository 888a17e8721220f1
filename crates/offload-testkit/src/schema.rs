//! A small JSON Schema checker for the tests that hold the `--json` outputs
//! to the schema files under `docs/reference/schemas/`.
//!
//! It knows the keywords those files use, and refuses any other, so a schema
//! cannot silently say more than is checked: `$schema`, `$id`, `title`,
//! `description`, `$defs`, `$ref` (local, `#/$defs/NAME`), `type` (a name or
//! a list of names), `properties`, `required`, `additionalProperties`
//! (`false` or a schema), `items`, `enum`, `const`, `minimum`, `oneOf`,
//! `anyOf`.

use serde_json::Value;

/// Checks `value` against `schema`; returns every violation as
/// `PATH: what is wrong` (empty when the value conforms).
pub fn violations(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    check(schema, schema, value, "$", &mut out);
    out
}

/// Panics with every violation, naming `what` (the command whose output it
/// is), unless `value` conforms to `schema`.
pub fn assert_conforms(schema: &Value, value: &Value, what: &str) {
    let v = violations(schema, value);
    assert!(v.is_empty(), "{what}: output does not conform to its schema:\n  {}", v.join("\n  "));
}

const KNOWN: &[&str] = &[
    "$schema",
    "$id",
    "title",
    "description",
    "$defs",
    "$ref",
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "minimum",
    "oneOf",
    "anyOf",
];

fn type_matches(name: &str, value: &Value) -> bool {
    match name {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.is_u64() || value.is_i64(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

fn check(root: &Value, schema: &Value, value: &Value, path: &str, out: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        if schema.as_bool() == Some(false) {
            out.push(format!("{path}: not allowed here"));
        }
        return;
    };
    for key in obj.keys() {
        if !KNOWN.contains(&key.as_str()) {
            out.push(format!("{path}: the schema uses `{key}`, which this checker does not know"));
        }
    }
    if let Some(r) = obj.get("$ref").and_then(Value::as_str) {
        match r.strip_prefix("#/$defs/").and_then(|name| root.get("$defs").and_then(|d| d.get(name))) {
            Some(target) => check(root, target, value, path, out),
            None => out.push(format!("{path}: unresolved $ref {r}")),
        }
    }
    if let Some(t) = obj.get("type") {
        let names: Vec<&str> = match t {
            Value::String(s) => vec![s.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !names.iter().any(|n| type_matches(n, value)) {
            out.push(format!("{path}: expected {}, found {value}", names.join(" or ")));
            return;
        }
    }
    if let Some(e) = obj.get("enum").and_then(Value::as_array)
        && !e.contains(value)
    {
        out.push(format!("{path}: {value} is not one of {}", Value::Array(e.clone())));
    }
    if let Some(c) = obj.get("const")
        && c != value
    {
        out.push(format!("{path}: expected {c}, found {value}"));
    }
    if let (Some(min), Some(n)) = (obj.get("minimum").and_then(Value::as_f64), value.as_f64())
        && n < min
    {
        out.push(format!("{path}: {n} is below the minimum {min}"));
    }
    for (keyword, exactly_one) in [("oneOf", true), ("anyOf", false)] {
        if let Some(alts) = obj.get(keyword).and_then(Value::as_array) {
            let matching = alts
                .iter()
                .filter(|alt| {
                    let mut sub = Vec::new();
                    check(root, alt, value, path, &mut sub);
                    sub.is_empty()
                })
                .count();
            if matching == 0 || (exactly_one && matching > 1) {
                out.push(format!("{path}: {matching} of the {} alternatives of {keyword} match", alts.len()));
            }
        }
    }
    if let Some(map) = value.as_object() {
        let props = obj.get("properties").and_then(Value::as_object);
        if let Some(req) = obj.get("required").and_then(Value::as_array) {
            for name in req.iter().filter_map(Value::as_str) {
                if !map.contains_key(name) {
                    out.push(format!("{path}: missing key `{name}`"));
                }
            }
        }
        for (k, v) in map {
            let sub = format!("{path}.{k}");
            match props.and_then(|p| p.get(k)) {
                Some(s) => check(root, s, v, &sub, out),
                None => match obj.get("additionalProperties") {
                    Some(Value::Bool(false)) => out.push(format!("{path}: key `{k}` is not in the schema")),
                    Some(s @ Value::Object(_)) => check(root, s, v, &sub, out),
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(arr)) = (obj.get("items"), value.as_array()) {
        for (i, v) in arr.iter().enumerate() {
            check(root, items, v, &format!("{path}[{i}]"), out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::violations;
    use serde_json::json;

    #[test]
    fn finds_each_kind_of_violation() {
        let schema = json!({
            "$defs": {"n": {"type": "integer", "minimum": 0}},
            "type": "array",
            "items": {
                "type": "object",
                "required": ["a", "b"],
                "additionalProperties": false,
                "properties": {"a": {"$ref": "#/$defs/n"}, "b": {"enum": ["x", "y"]}, "c": {"type": ["string", "null"]}}
            }
        });
        assert!(violations(&schema, &json!([{"a": 1, "b": "x", "c": null}])).is_empty());
        let v = violations(&schema, &json!([{"a": -1, "b": "z", "c": 3, "d": 0}, {"b": "y"}, 7]));
        assert_eq!(v.len(), 6, "{v:#?}");
        assert!(v.iter().any(|s| s.contains("missing key `a`")));
        assert!(v.iter().any(|s| s.contains("key `d` is not in the schema")));
        assert!(!violations(&json!({"format": "date"}), &json!(1)).is_empty(), "unknown keywords are refused");
    }
}
