//! Table metadata as JSON, with the Iceberg v3 types iceberg-rust 0.10 lacks.
//!
//! iceberg-rust 0.10 has no `variant`, `geometry` or `geography` type, and refuses a whole
//! metadata file that names one (`data did not match any variant of untagged enum
//! TableMetadataEnum`). The planner holds such a field as a `binary` placeholder
//! ([`lakemirror_plan::schema::V3_PLACEHOLDER`]) and records its real type by field ID in the
//! table property [`V3_TYPES_PROPERTY`]. Here the metadata file is written with the real types
//! (every schema of the table: field IDs are never reused) and read back with placeholders.
//! Readers of the file (Java, DuckDB, a REST catalog) see only the real types.

use std::collections::BTreeMap;

use iceberg::spec::TableMetadata;
use lakemirror_plan::properties::V3_TYPES_PROPERTY;
use lakemirror_plan::schema::V3Type;
use serde_json::Value;

/// The metadata file's bytes, with the real type of every placeholder field.
pub fn to_bytes(metadata: &TableMetadata) -> serde_json::Result<Vec<u8>> {
    let types = v3_types(metadata);
    if types.is_empty() {
        return serde_json::to_vec(metadata);
    }
    let mut json = serde_json::to_value(metadata)?;
    for schema in schemas_mut(&mut json) {
        name_types(schema, &types);
    }
    serde_json::to_vec(&json)
}

/// Table metadata from a metadata file's bytes, its v3 types as placeholders.
pub fn from_bytes(bytes: &[u8]) -> serde_json::Result<TableMetadata> {
    let mut json: Value = serde_json::from_slice(bytes)?;
    for schema in schemas_mut(&mut json) {
        hold_types(schema);
    }
    serde_json::from_value(json)
}

/// The real types of the placeholder fields of `metadata`, by field ID.
pub fn v3_types(metadata: &TableMetadata) -> BTreeMap<i32, String> {
    metadata
        .properties()
        .get(V3_TYPES_PROPERTY)
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

/// Every schema object of a metadata file (`schemas`, and v1's `schema`).
fn schemas_mut(json: &mut Value) -> Vec<&mut Value> {
    let Some(object) = json.as_object_mut() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in object.iter_mut() {
        match (key.as_str(), value) {
            ("schemas", Value::Array(schemas)) => out.extend(schemas.iter_mut()),
            ("schema", schema @ Value::Object(_)) => out.push(schema),
            _ => {}
        }
    }
    out
}

/// The places in a type where a type stands, with the field ID it is the type of: a struct's
/// fields (`id`/`type`), a list's element (`element-id`/`element`), a map's key and value.
const TYPE_SLOTS: [(&str, &str); 4] = [
    ("id", "type"),
    ("element-id", "element"),
    ("key-id", "key"),
    ("value-id", "value"),
];

/// Names the real type of each placeholder in `node` (a schema or a type within one).
pub fn name_types(node: &mut Value, types: &BTreeMap<i32, String>) {
    visit_types(node, &mut |id, slot| {
        if let Some(real) = id.and_then(|id| types.get(&id)) {
            *slot = Value::String(real.clone());
        }
    });
}

/// Replaces every v3 type in `node` by the placeholder iceberg-rust reads.
fn hold_types(node: &mut Value) {
    visit_types(node, &mut |_, slot| {
        if slot
            .as_str()
            .is_some_and(|t| V3Type::of_iceberg(t).is_some())
        {
            *slot = Value::String("binary".into());
        }
    });
}

/// Calls `visit` with (field ID, the type slot) of every typed place under `node`.
fn visit_types(node: &mut Value, visit: &mut dyn FnMut(Option<i32>, &mut Value)) {
    match node {
        Value::Object(object) => {
            for (id_key, type_key) in TYPE_SLOTS {
                let id = object
                    .get(id_key)
                    .and_then(Value::as_i64)
                    .and_then(|id| i32::try_from(id).ok());
                if let Some(slot) = object.get_mut(type_key)
                    && (id.is_some() || type_key == "type")
                    && slot.is_string()
                {
                    visit(id, slot);
                }
            }
            for value in object.values_mut() {
                if value.is_object() || value.is_array() {
                    visit_types(value, visit);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                visit_types(item, visit);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_written_as_their_real_types_and_read_back_as_placeholders() {
        let types = BTreeMap::from([
            (2, "variant".to_string()),
            (4, "geometry".to_string()),
            (7, "geography(EPSG:4326, karney)".to_string()),
        ]);
        let mut schema = serde_json::json!({"type": "struct", "schema-id": 0, "fields": [
            {"id": 1, "name": "id", "required": false, "type": "long"},
            {"id": 2, "name": "v", "required": false, "type": "binary"},
            {"id": 3, "name": "l", "required": false,
             "type": {"type": "list", "element-id": 4, "element": "binary", "element-required": false}},
            {"id": 5, "name": "m", "required": false,
             "type": {"type": "map", "key-id": 6, "key": "string", "value-id": 7, "value": "binary", "value-required": false}},
        ]});
        let plain = schema.clone();
        name_types(&mut schema, &types);
        assert_eq!(schema["fields"][1]["type"], "variant");
        assert_eq!(schema["fields"][2]["type"]["element"], "geometry");
        assert_eq!(
            schema["fields"][3]["type"]["value"],
            "geography(EPSG:4326, karney)"
        );
        assert_eq!(schema["fields"][3]["type"]["key"], "string");
        assert_eq!(schema["fields"][0]["type"], "long");
        hold_types(&mut schema);
        assert_eq!(schema, plain);
    }
}
