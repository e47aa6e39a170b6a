//! The Delta schema (`metaData.schemaString`), parsed into plain data.

use std::collections::HashMap;

use serde_json::Value;

/// A Delta data type.
#[derive(Debug, Clone, PartialEq)]
pub enum DeltaType {
    /// `long`, `string`, `decimal(10,2)`, ... exactly as written in the log.
    Primitive(String),
    Struct(Vec<DeltaField>),
    Array {
        element: Box<DeltaType>,
        contains_null: bool,
    },
    Map {
        key: Box<DeltaType>,
        value: Box<DeltaType>,
        value_contains_null: bool,
    },
}

/// A named field of a struct.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaField {
    pub name: String,
    pub data_type: DeltaType,
    pub nullable: bool,
    /// `delta.columnMapping.id`: the field's stable ID when column mapping is on.
    pub column_mapping_id: Option<i32>,
    /// `delta.columnMapping.physicalName`: the column's name in Parquet files and
    /// `partitionValues` when column mapping is on.
    pub physical_name: Option<String>,
    /// `delta.typeChanges`: the widenings this field (or a nested element) went through,
    /// as (from, to) Delta type names; older files still hold the narrower type.
    pub type_changes: Vec<(String, String)>,
    /// `delta.columnMapping.nested.ids` (IcebergCompat tables): IDs of the list elements and
    /// map keys/values inside this field, by path (`<physical name>.element`, `….key`, …).
    pub nested_ids: HashMap<String, i32>,
    /// Column defaults (`allowColumnDefaults`), as Spark SQL text: `EXISTS_DEFAULT`, the value
    /// of rows written before the column had one, and `CURRENT_DEFAULT`, what a writer puts
    /// when it gives none.
    pub exists_default: Option<String>,
    pub current_default: Option<String>,
}

impl DeltaField {
    /// The name Parquet files and `partitionValues` use for this field.
    pub fn physical_name(&self) -> &str {
        self.physical_name.as_deref().unwrap_or(&self.name)
    }
}

/// Parses `schemaString`: a JSON struct type.
pub fn parse_schema(schema_string: &str) -> Result<Vec<DeltaField>, String> {
    let value: Value = serde_json::from_str(schema_string)
        .map_err(|e| format!("schemaString is not JSON: {e}"))?;
    match parse_type(&value)? {
        DeltaType::Struct(fields) => Ok(fields),
        other => Err(format!("schemaString is not a struct type: {other:?}")),
    }
}

fn parse_type(value: &Value) -> Result<DeltaType, String> {
    if let Some(name) = value.as_str() {
        return Ok(DeltaType::Primitive(name.to_string()));
    }
    let kind = value.get("type").and_then(Value::as_str);
    match kind {
        Some("struct") => {
            let fields = value
                .get("fields")
                .and_then(Value::as_array)
                .ok_or("struct type without fields")?;
            fields
                .iter()
                .map(parse_field)
                .collect::<Result<_, _>>()
                .map(DeltaType::Struct)
        }
        Some("array") => Ok(DeltaType::Array {
            element: Box::new(parse_type(
                value
                    .get("elementType")
                    .ok_or("array without elementType")?,
            )?),
            contains_null: value
                .get("containsNull")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        }),
        Some("map") => Ok(DeltaType::Map {
            key: Box::new(parse_type(
                value.get("keyType").ok_or("map without keyType")?,
            )?),
            value: Box::new(parse_type(
                value.get("valueType").ok_or("map without valueType")?,
            )?),
            value_contains_null: value
                .get("valueContainsNull")
                .and_then(Value::as_bool)
                .unwrap_or(true),
        }),
        _ => Err(format!("unknown Delta type {value}")),
    }
}

fn parse_field(value: &Value) -> Result<DeltaField, String> {
    let name = value
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("struct field without name: {value}"))?;
    let metadata = value.get("metadata");
    let column_mapping_id = match metadata.and_then(|m| m.get("delta.columnMapping.id")) {
        None | Some(Value::Null) => None,
        Some(id) => Some(
            id.as_i64()
                .and_then(|id| i32::try_from(id).ok())
                .filter(|id| *id > 0)
                .ok_or_else(|| {
                    format!("field {name}: delta.columnMapping.id {id} is not a positive int")
                })?,
        ),
    };
    let physical_name = metadata
        .and_then(|m| m.get("delta.columnMapping.physicalName"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let type_changes = metadata
        .and_then(|m| m.get("delta.typeChanges"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|change| {
            let side = |key: &str| change.get(key).and_then(Value::as_str).map(str::to_string);
            side("fromType").zip(side("toType")).ok_or_else(|| {
                format!("field {name}: delta.typeChanges entry without fromType/toType: {change}")
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let nested_ids = metadata
        .and_then(|m| m.get("delta.columnMapping.nested.ids"))
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(path, id)| {
            id.as_i64()
                .and_then(|id| i32::try_from(id).ok())
                .filter(|id| *id > 0)
                .map(|id| (path.clone(), id))
                .ok_or_else(|| {
                    format!("field {name}: delta.columnMapping.nested.ids {path} = {id} is not a positive int")
                })
        })
        .collect::<Result<HashMap<_, _>, String>>()?;
    let text = |key: &str| {
        metadata
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(DeltaField {
        nested_ids,
        exists_default: text("EXISTS_DEFAULT"),
        current_default: text("CURRENT_DEFAULT"),
        name: name.to_string(),
        data_type: parse_type(
            value
                .get("type")
                .ok_or_else(|| format!("field {name} without type"))?,
        )?,
        nullable: value
            .get("nullable")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        column_mapping_id,
        physical_name,
        type_changes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_nested_types() {
        let s = r#"{"type":"struct","fields":[
            {"name":"id","type":"long","nullable":false,"metadata":{}},
            {"name":"d","type":"decimal(10,2)","nullable":true,"metadata":{}},
            {"name":"s","type":{"type":"struct","fields":[{"name":"a","type":"string","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
            {"name":"l","type":{"type":"array","elementType":"integer","containsNull":false},"nullable":true,"metadata":{}},
            {"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"long","containsNull":true},"valueContainsNull":true},"nullable":true,"metadata":{}}
        ]}"#;
        let fields = parse_schema(s).unwrap();
        assert_eq!(fields.len(), 5);
        assert!(!fields[0].nullable);
        assert_eq!(
            fields[1].data_type,
            DeltaType::Primitive("decimal(10,2)".into())
        );
        assert!(matches!(
            &fields[3].data_type,
            DeltaType::Array {
                contains_null: false,
                ..
            }
        ));
        assert!(
            matches!(&fields[4].data_type, DeltaType::Map { value, .. } if matches!(**value, DeltaType::Array { .. }))
        );
    }

    #[test]
    fn reads_column_mapping_metadata() {
        let s = r#"{"type":"struct","fields":[
            {"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-x"}},
            {"name":"b","type":"long","nullable":true,"metadata":{}}
        ]}"#;
        let fields = parse_schema(s).unwrap();
        assert_eq!(fields[0].column_mapping_id, Some(7));
        assert_eq!(fields[0].physical_name(), "col-x");
        assert_eq!(fields[1].physical_name(), "b");
        let bad = r#"{"type":"struct","fields":[{"name":"a","type":"long","metadata":{"delta.columnMapping.id":"x"}}]}"#;
        assert!(parse_schema(bad).is_err());
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_schema("[]").is_err());
        assert!(parse_schema(r#"{"type":"struct","fields":[{"type":"long"}]}"#).is_err());
        assert!(parse_schema("nope").is_err());
    }
}
