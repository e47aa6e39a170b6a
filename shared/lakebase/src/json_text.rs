//! A string as JSON text for PostgreSQL `jsonb`: the one escaping that the JSON of nested
//! values (`json.rs`) and of variants (`variant/`) both write, apart from both so that
//! neither reaches into the other.

use std::fmt::Write as _;

pub(crate) const NUL_IN_JSON: &str = "holds a NUL character, which PostgreSQL jsonb cannot store";

/// Appends `s` as a JSON string. PostgreSQL's jsonb cannot hold a NUL (`\u0000`), so a
/// string with one is refused.
pub(crate) fn write_string(out: &mut String, s: &str) -> Result<(), String> {
    out.push('"');
    for c in s.chars() {
        match c {
            '\0' => return Err(NUL_IN_JSON.into()),
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                write!(out, "\\u{:04x}", u32::from(c)).map_err(|e| e.to_string())?;
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(())
}
