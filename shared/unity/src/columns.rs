//! Delta schema -> Unity Catalog columns (`ColumnInfo`), pure.
//!
//! Each column carries its type three ways, as Spark's Unity Catalog connector writes them:
//! `type_name` (the `ColumnTypeName` enum), `type_text` (Spark's catalog string:
//! `bigint`, `decimal(10,2)`, `struct<a:int,b:array<string>>`) and `type_json` (the Delta
//! `StructField` JSON, verbatim from the log). Partition columns get their
//! `partition_index`.

use serde_json::Value;

use crate::client::ColumnInfo;
use crate::error::{Error, Result};

/// The columns of a Delta table, in schema order.
pub fn columns(schema_string: &str, partition_columns: &[String]) -> Result<Vec<ColumnInfo>> {
    let schema: Value = serde_json::from_str(schema_string)
        .map_err(|e| invalid(format!("the Delta schema is not JSON: {e}")))?;
    let fields = schema
        .get("fields")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid("the Delta schema is not a struct with fields".into()))?;
    fields
        .iter()
        .enumerate()
        .map(|(position, field)| {
            let name = field_name(field)?;
            let data_type = field
                .get("type")
                .ok_or_else(|| invalid(format!("column {name} has no type")))?;
            let (precision, scale) = decimal(data_type).unzip();
            Ok(ColumnInfo {
                name: name.to_string(),
                type_text: type_text(data_type)?,
                type_json: serde_json::to_string(field)?,
                type_name: type_name(data_type)?.to_string(),
                type_precision: precision,
                type_scale: scale,
                position: position as i32,
                comment: field
                    .pointer("/metadata/comment")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                nullable: field
                    .get("nullable")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
                partition_index: partition_columns
                    .iter()
                    .position(|p| p == name)
                    .map(|i| i as i32),
            })
        })
        .collect()
}

fn invalid(reason: String) -> Error {
    Error::Entry(format!(
        "cannot describe the table to Unity Catalog: {reason}"
    ))
}

fn field_name(field: &Value) -> Result<&str> {
    field
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(format!("a field has no name: {field}")))
}

/// A primitive Delta type name (`long`, `decimal(10,2)`, ...) or a nested type object.
fn primitive(data_type: &Value) -> Option<&str> {
    data_type.as_str()
}

fn kind(data_type: &Value) -> Option<&str> {
    data_type.get("type").and_then(Value::as_str)
}

/// `ColumnTypeName` of a Delta type.
pub fn type_name(data_type: &Value) -> Result<&'static str> {
    if let Some(name) = primitive(data_type) {
        return Ok(match name {
            "boolean" => "BOOLEAN",
            "byte" => "BYTE",
            "short" => "SHORT",
            "integer" => "INT",
            "long" => "LONG",
            "float" => "FLOAT",
            "double" => "DOUBLE",
            "date" => "DATE",
            "timestamp" => "TIMESTAMP",
            "timestamp_ntz" => "TIMESTAMP_NTZ",
            "string" => "STRING",
            "binary" => "BINARY",
            "variant" => "VARIANT",
            "void" => "NULL",
            d if d.starts_with("decimal") => "DECIMAL",
            other => return Err(invalid(format!("unknown Delta type {other:?}"))),
        });
    }
    match kind(data_type) {
        Some("struct") => Ok("STRUCT"),
        Some("array") => Ok("ARRAY"),
        Some("map") => Ok("MAP"),
        _ => Err(invalid(format!("unknown Delta type {data_type}"))),
    }
}

/// Spark's catalog string of a Delta type.
pub fn type_text(data_type: &Value) -> Result<String> {
    if let Some(name) = primitive(data_type) {
        return Ok(match name {
            "byte" => "tinyint".into(),
            "short" => "smallint".into(),
            "integer" => "int".into(),
            "long" => "bigint".into(),
            "boolean" | "float" | "double" | "date" | "timestamp" | "timestamp_ntz" | "string"
            | "binary" | "variant" | "void" => name.into(),
            d if d.starts_with("decimal") => match decimal(data_type) {
                Some((p, s)) => format!("decimal({p},{s})"),
                None => return Err(invalid(format!("unreadable decimal type {d:?}"))),
            },
            other => return Err(invalid(format!("unknown Delta type {other:?}"))),
        });
    }
    let nested = |key: &str| {
        data_type
            .get(key)
            .ok_or_else(|| invalid(format!("{data_type} has no {key}")))
            .and_then(type_text)
    };
    match kind(data_type) {
        Some("struct") => {
            let fields = data_type
                .get("fields")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid(format!("struct without fields: {data_type}")))?;
            let parts = fields
                .iter()
                .map(|f| {
                    let inner = f
                        .get("type")
                        .ok_or_else(|| invalid(format!("field without type: {f}")))?;
                    Ok(format!("{}:{}", quoted(field_name(f)?), type_text(inner)?))
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(format!("struct<{}>", parts.join(",")))
        }
        Some("array") => Ok(format!("array<{}>", nested("elementType")?)),
        Some("map") => Ok(format!(
            "map<{},{}>",
            nested("keyType")?,
            nested("valueType")?
        )),
        _ => Err(invalid(format!("unknown Delta type {data_type}"))),
    }
}

/// `decimal(p,s)` -> (p, s); plain `decimal` is Spark's default (10,0).
fn decimal(data_type: &Value) -> Option<(i32, i32)> {
    let name = primitive(data_type)?.trim();
    let rest = name.strip_prefix("decimal")?.trim();
    if rest.is_empty() {
        return Some((10, 0));
    }
    let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
    let (p, s) = inner.split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

/// A field name as Spark's catalog string writes it: backquoted unless a plain identifier.
fn quoted(name: &str) -> String {
    let plain = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("`{}`", name.replace('`', "``"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `ColumnTypeName` in ../shared/specs/unitycatalog-all.yaml.
    const SPEC_TYPE_NAMES: &[&str] = &[
        "BOOLEAN",
        "BYTE",
        "SHORT",
        "INT",
        "LONG",
        "FLOAT",
        "DOUBLE",
        "DATE",
        "TIMESTAMP",
        "TIMESTAMP_NTZ",
        "STRING",
        "BINARY",
        "DECIMAL",
        "INTERVAL",
        "ARRAY",
        "STRUCT",
        "MAP",
        "VARIANT",
        "CHAR",
        "NULL",
        "USER_DEFINED_TYPE",
        "TABLE_TYPE",
    ];

    fn every_delta_type() -> Vec<(Value, &'static str, &'static str)> {
        vec![
            (json!("boolean"), "BOOLEAN", "boolean"),
            (json!("byte"), "BYTE", "tinyint"),
            (json!("short"), "SHORT", "smallint"),
            (json!("integer"), "INT", "int"),
            (json!("long"), "LONG", "bigint"),
            (json!("float"), "FLOAT", "float"),
            (json!("double"), "DOUBLE", "double"),
            (json!("date"), "DATE", "date"),
            (json!("timestamp"), "TIMESTAMP", "timestamp"),
            (json!("timestamp_ntz"), "TIMESTAMP_NTZ", "timestamp_ntz"),
            (json!("string"), "STRING", "string"),
            (json!("binary"), "BINARY", "binary"),
            (json!("decimal(38,18)"), "DECIMAL", "decimal(38,18)"),
            (json!("decimal(5, 2)"), "DECIMAL", "decimal(5,2)"),
            (json!("variant"), "VARIANT", "variant"),
            (json!("void"), "NULL", "void"),
            (
                json!({"type": "array", "elementType": "long", "containsNull": true}),
                "ARRAY",
                "array<bigint>",
            ),
            (
                json!({"type": "map", "keyType": "string", "valueType": {"type": "array", "elementType": "date", "containsNull": false}, "valueContainsNull": true}),
                "MAP",
                "map<string,array<date>>",
            ),
            (
                json!({"type": "struct", "fields": [
                    {"name": "a", "type": "integer", "nullable": true, "metadata": {}},
                    {"name": "odd name", "type": {"type": "struct", "fields": [
                        {"name": "x`y", "type": "decimal(10,2)", "nullable": false, "metadata": {}}
                    ]}, "nullable": true, "metadata": {}}
                ]}),
                "STRUCT",
                "struct<a:int,`odd name`:struct<`x``y`:decimal(10,2)>>",
            ),
        ]
    }

    #[test]
    fn every_delta_type_maps_to_a_type_name_of_the_spec() {
        for (delta, name, text) in every_delta_type() {
            let mapped = type_name(&delta).unwrap();
            assert_eq!(mapped, name, "{delta}");
            assert!(
                SPEC_TYPE_NAMES.contains(&mapped),
                "{mapped} is not in the spec"
            );
            assert_eq!(type_text(&delta).unwrap(), text, "{delta}");
        }
    }

    /// The list above is the spec's, when the spec is at hand (../shared/specs).
    #[test]
    fn the_type_names_above_are_the_specs() {
        let spec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/specs/unitycatalog-all.yaml");
        let Ok(text) = std::fs::read_to_string(&spec) else {
            return;
        };
        let section = text
            .split("    ColumnTypeName:")
            .nth(1)
            .and_then(|rest| rest.split("    ColumnInfo:").next())
            .unwrap();
        let names: Vec<String> = section
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- "))
            .map(|n| n.trim_matches('\'').to_string())
            .collect();
        assert_eq!(names, SPEC_TYPE_NAMES, "{}", spec.display());
    }

    #[test]
    fn unknown_types_are_refused_with_their_name() {
        let err = type_name(&json!("interval day")).unwrap_err().to_string();
        assert!(err.contains("interval day"), "{err}");
        assert!(type_text(&json!({"type": "udt"})).is_err());
    }

    #[test]
    fn columns_carry_position_nullability_partitions_and_the_field_json() {
        let schema = json!({"type": "struct", "fields": [
            {"name": "id", "type": "long", "nullable": false, "metadata": {}},
            {"name": "price", "type": "decimal(12,3)", "nullable": true, "metadata": {"comment": "in EUR"}},
            {"name": "day", "type": "date", "nullable": true, "metadata": {"delta.columnMapping.id": 3}},
            {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": true}, "nullable": true, "metadata": {}}
        ]})
        .to_string();
        let cols = columns(&schema, &["day".to_string()]).unwrap();
        assert_eq!(
            cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["id", "price", "day", "tags"]
        );
        assert_eq!(
            cols.iter().map(|c| c.position).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        assert!(!cols[0].nullable && cols[1].nullable);
        assert_eq!(
            (cols[1].type_precision, cols[1].type_scale),
            (Some(12), Some(3))
        );
        assert_eq!(cols[1].comment.as_deref(), Some("in EUR"));
        assert_eq!(cols[0].type_precision, None);
        assert_eq!(
            cols.iter().map(|c| c.partition_index).collect::<Vec<_>>(),
            [None, None, Some(0), None]
        );
        assert_eq!(cols[3].type_text, "array<string>");
        let json: Value = serde_json::from_str(&cols[2].type_json).unwrap();
        assert_eq!(json["name"], "day");
        assert_eq!(json["type"], "date");
    }

    #[test]
    fn a_schema_that_is_not_a_struct_is_refused() {
        assert!(columns("not json", &[]).is_err());
        assert!(columns("{\"type\":\"struct\"}", &[]).is_err());
    }
}
