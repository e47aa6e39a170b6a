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

/// The metadata file at `location`, read and parsed within the work's memory share: its JSON
/// values are counted first ([`parse_cost`]), and the room its parse takes is taken before
/// it is parsed; a file whose parse would take more than the share holds
/// (`{"pad":[0,0,0,…]}`, planted by whoever may write the table's folder) is refused,
/// unparsed. None when the file does not exist; `Some(Err(why))` when it is not table
/// metadata.
pub async fn read(
    store: &lakemirror_storage::TableStorage,
    location: &str,
) -> lakemirror_storage::Result<Option<Result<TableMetadata, String>>> {
    let Some(read) = store.get_to_parse(location, 1).await? else {
        return Ok(None);
    };
    let mut room = read.room;
    let size = read.bytes.len() as u64;
    let parsed = match parse_cost(&read.bytes) {
        Err(e) => Err(e.to_string()),
        Ok(cost) => {
            lakemirror_storage::budget::current()
                .grow(location, size, &mut room, cost)
                .await?;
            from_bytes(&read.bytes).map_err(|e| e.to_string())
        }
    };
    drop(room);
    Ok(Some(parsed))
}

/// Table metadata from a metadata file's bytes, its v3 types as placeholders. A file
/// without them is parsed straight into its type; one with them through a JSON tree, where
/// the types are replaced.
pub fn from_bytes(bytes: &[u8]) -> serde_json::Result<TableMetadata> {
    if !contains(bytes, V3_TYPES_PROPERTY.as_bytes())
        && let Ok(metadata) = serde_json::from_slice(bytes)
    {
        return Ok(metadata);
    }
    let mut json: Value = serde_json::from_slice(bytes)?;
    for schema in schemas_mut(&mut json) {
        hold_types(schema);
    }
    serde_json::from_value(json)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Memory one JSON value takes while a metadata file is parsed: its node in the parse tree
/// (serde's buffer for Iceberg's untagged format versions, or a JSON tree) and in the typed
/// result.
const BYTES_PER_VALUE: u64 = 64;

/// What parsing `bytes` as metadata takes in memory, estimated from its JSON values and
/// string bytes, counted without holding them (a JSON tree is never built for this);
/// an error when the bytes are not JSON.
pub fn parse_cost(bytes: &[u8]) -> serde_json::Result<u64> {
    let mut counted = Counted::default();
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde::de::DeserializeSeed::deserialize(Counter(&mut counted), &mut deserializer)?;
    deserializer.end()?;
    Ok(bytes.len() as u64
        + counted.values.saturating_mul(BYTES_PER_VALUE)
        + counted.string_bytes.saturating_mul(2))
}

/// JSON values and the bytes of the strings among them.
#[derive(Default)]
struct Counted {
    values: u64,
    string_bytes: u64,
}

/// Counts what it visits, holding nothing.
struct Counter<'a>(&'a mut Counted);

impl<'de> serde::de::DeserializeSeed<'de> for Counter<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Counter<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.0.values += 1;
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.0.values += 1;
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.0.values += 1;
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.0.values += 1;
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.values += 1;
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.values += 1;
        self.0.string_bytes += v.len() as u64;
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let counted = self.0;
        counted.values += 1;
        while seq.next_element_seed(Counter(&mut *counted))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let counted = self.0;
        counted.values += 1;
        while map.next_key_seed(Counter(&mut *counted))?.is_some() {
            map.next_value_seed(Counter(&mut *counted))?;
        }
        Ok(())
    }
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
    fn a_padded_file_costs_far_more_than_one_iceberg_writes() {
        let padded = format!(
            r#"{{"format-version":2,"pad":[{}0]}}"#,
            "0,".repeat(100_000)
        );
        let cost = parse_cost(padded.as_bytes()).unwrap();
        assert!(cost > 30 * padded.len() as u64, "{cost}");
        // A metadata file as Iceberg writes them: every value a key and a number or a word.
        let snapshots: Vec<String> = (0..200u64)
            .map(|n| format!(r#"{{"snapshot-id":{},"parent-snapshot-id":{},"sequence-number":{n},"timestamp-ms":1733000000000,"manifest-list":"s3://lake/warehouse/orders/_lakemirror/iceberg/metadata/snap-{n}7270227574474563845-1-0b4c5f2e-1d2c-4c8a-9b1e-3f5a7c9d1e2f.avro","summary":{{"operation":"append","delta.version":"{n}","added-data-files":"1","total-data-files":"{n}","total-records":"{n}00"}},"schema-id":0}}"#, 7270227574474563845u64 - n, 2270227574474563845u64 + n))
            .collect();
        let real = format!(
            r#"{{"format-version":2,"snapshots":[{}]}}"#,
            snapshots.join(",")
        );
        let cost = parse_cost(real.as_bytes()).unwrap();
        assert!(cost < 8 * real.len() as u64, "{cost} for {}", real.len());
        assert!(parse_cost(b"{not json").is_err());
    }

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
