//! The schema in an Avro file's header, made valid for strict readers before the file is
//! written. iceberg-rust names a decimal's fixed type `decimal_<precision>_<scale>` at each
//! use, so a partition of two decimal columns of one precision defines `decimal_10_2` twice:
//! Avro forbids redefining a name (Java's and C's Avro libraries and DuckDB refuse the file).
//! A repeated definition is renamed (`decimal_10_2_2`), not turned into a reference: pyiceberg
//! cannot read a named-type reference, and readers of Iceberg manifests read fixed values by
//! position and size, never by their type's name. The file's blocks are left as they are: the
//! schema's names do not change a byte of the data.

use std::collections::HashSet;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

pub(crate) const MAGIC: &[u8] = b"Obj\x01";

/// `file` with every named type of its schema defined once; the same bytes when it already is
/// (or when it is not an Avro object container, which is not ours to change).
pub(crate) fn with_unique_type_names(file: Bytes) -> Result<Bytes, String> {
    if !file.starts_with(MAGIC) {
        return Ok(file);
    }
    let mut reader = Reader {
        bytes: &file,
        pos: MAGIC.len(),
    };
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    loop {
        let count = reader.long()?;
        if count == 0 {
            break;
        }
        if count < 0 {
            reader.long()?; // the block's size in bytes
        }
        for _ in 0..count.unsigned_abs() {
            let key = reader.bytes()?.to_vec();
            let value = reader.bytes()?.to_vec();
            entries.push((key, value));
        }
    }
    let rest = file.slice(reader.pos..);
    let Some(schema) = entries.iter_mut().find(|(key, _)| key == b"avro.schema") else {
        return Err("the Avro file has no avro.schema in its header".into());
    };
    let mut json: Value = serde_json::from_slice(&schema.1)
        .map_err(|e| format!("the Avro file's schema is not JSON: {e}"))?;
    if !rename_repeated(&mut json, "", &mut HashSet::new()) {
        return Ok(file);
    }
    schema.1 = serde_json::to_vec(&json).map_err(|e| e.to_string())?;
    let mut out = BytesMut::with_capacity(file.len() + 64);
    out.put_slice(MAGIC);
    put_long(
        &mut out,
        i64::try_from(entries.len()).map_err(|e| e.to_string())?,
    );
    for (key, value) in &entries {
        put_bytes(&mut out, key)?;
        put_bytes(&mut out, value)?;
    }
    put_long(&mut out, 0);
    out.put_slice(&rest);
    Ok(out.freeze())
}

/// Renames each repeated definition of a record, enum or fixed (by full name) to a name not
/// defined yet; answers whether it renamed any.
fn rename_repeated(schema: &mut Value, namespace: &str, defined: &mut HashSet<String>) -> bool {
    match schema {
        Value::Array(branches) => branches.iter_mut().fold(false, |renamed, b| {
            rename_repeated(b, namespace, defined) | renamed
        }),
        Value::Object(object) => {
            let mut renamed = false;
            let mut inner = namespace.to_string();
            let kind = object.get("type").and_then(Value::as_str).unwrap_or("");
            if matches!(kind, "record" | "enum" | "fixed")
                && let Some(name) = object
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            {
                let space = object
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(namespace)
                    .to_string();
                let full = |name: &str| match (name.contains('.'), space.is_empty()) {
                    (true, _) | (false, true) => name.to_string(),
                    (false, false) => format!("{space}.{name}"),
                };
                let mut unique = name.clone();
                let mut n = 1;
                while defined.contains(&full(&unique)) {
                    n += 1;
                    unique = format!("{name}_{n}");
                }
                if unique != name {
                    object.insert("name".into(), Value::String(unique.clone()));
                    renamed = true;
                }
                let full_unique = full(&unique);
                inner = full_unique
                    .rsplit_once('.')
                    .map_or(String::new(), |(s, _)| s.to_string());
                defined.insert(full_unique);
            }
            for key in ["fields", "items", "values", "type"] {
                if let Some(child) = object.get_mut(key) {
                    match (key, child) {
                        ("fields", Value::Array(fields)) => {
                            for field in fields {
                                if let Some(ty) = field.get_mut("type") {
                                    renamed |= rename_repeated(ty, &inner, defined);
                                }
                            }
                        }
                        ("type", Value::String(_)) | ("fields", _) => {}
                        (_, child) => renamed |= rename_repeated(child, &inner, defined),
                    }
                }
            }
            renamed
        }
        _ => false,
    }
}

pub(crate) struct Reader<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
}

impl Reader<'_> {
    /// A zig-zag varint long.
    pub(crate) fn long(&mut self) -> Result<i64, String> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .bytes
                .get(self.pos)
                .ok_or("the Avro header ends early")?;
            self.pos += 1;
            value |= u64::from(byte & 0x7F) << shift;
            if byte & 0x80 == 0 {
                return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
            }
        }
        Err("the Avro header holds a number longer than 10 bytes".into())
    }

    pub(crate) fn bytes(&mut self) -> Result<&[u8], String> {
        let len =
            usize::try_from(self.long()?).map_err(|_| "a negative length in the Avro header")?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len())
            .ok_or("the Avro header ends early")?;
        let found = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(found)
    }
}

fn put_long(out: &mut BytesMut, value: i64) {
    let mut n = ((value << 1) ^ (value >> 63)) as u64;
    while n >= 0x80 {
        out.put_u8((n as u8 & 0x7F) | 0x80);
        n >>= 7;
    }
    out.put_u8(n as u8);
}

fn put_bytes(out: &mut BytesMut, bytes: &[u8]) -> Result<(), String> {
    put_long(out, i64::try_from(bytes.len()).map_err(|e| e.to_string())?);
    out.put_slice(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(schema: &str, codec: &[u8]) -> Bytes {
        let mut out = BytesMut::new();
        out.put_slice(MAGIC);
        put_long(&mut out, 2);
        put_bytes(&mut out, b"avro.schema").unwrap();
        put_bytes(&mut out, schema.as_bytes()).unwrap();
        put_bytes(&mut out, b"avro.codec").unwrap();
        put_bytes(&mut out, codec).unwrap();
        put_long(&mut out, 0);
        out.put_slice(&[7u8; 16]); // sync marker
        out.put_slice(b"blocks");
        out.freeze()
    }

    #[test]
    fn a_repeated_named_type_is_renamed_and_the_blocks_are_kept() {
        let decimal = r#"{"type":"fixed","name":"decimal_10_2","size":5,"logicalType":"decimal","precision":10,"scale":2}"#;
        let schema = format!(
            r#"{{"type":"record","name":"r102","fields":[{{"name":"a","type":["null",{decimal}]}},{{"name":"b","type":["null",{decimal}]}}]}}"#
        );
        let file = with_unique_type_names(container(&schema, b"null")).unwrap();
        assert!(file.ends_with(&[&[7u8; 16][..], b"blocks"].concat()));
        let mut reader = Reader {
            bytes: &file,
            pos: 4,
        };
        assert_eq!(reader.long().unwrap(), 2);
        assert_eq!(reader.bytes().unwrap(), b"avro.schema");
        let json: Value = serde_json::from_slice(reader.bytes().unwrap()).unwrap();
        let names: Vec<&str> = json["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["type"][1]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["decimal_10_2", "decimal_10_2_2"]);
        assert_eq!(reader.bytes().unwrap(), b"avro.codec");
        assert_eq!(reader.bytes().unwrap(), b"null");
        assert_eq!(reader.long().unwrap(), 0);
    }

    #[test]
    fn a_valid_file_is_left_as_it_is() {
        let file = container(
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}"#,
            b"deflate",
        );
        assert_eq!(with_unique_type_names(file.clone()).unwrap(), file);
        assert_eq!(
            with_unique_type_names(Bytes::from_static(b"{}")).unwrap(),
            Bytes::from_static(b"{}")
        );
        assert!(with_unique_type_names(Bytes::from_static(b"Obj\x01\x04")).is_err());
    }
}
