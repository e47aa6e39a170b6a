//! Delta schema -> Iceberg schema, keeping field IDs stable across schema changes, and the
//! name mapping that lets readers find columns in Parquet files written without field IDs.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    ListType, MapType, MappedField, NameMapping, NestedField, NestedFieldRef, PrimitiveType,
    Schema, StructType, Type,
};

use crate::delta::schema::{DeltaField, DeltaType};

/// Assigns field IDs: a column-mapped field keeps its `delta.columnMapping.id`; any other
/// reuses the ID it had in the previous Iceberg schema (same name path, same kind of type)
/// or gets the next unused ID, so an ID never changes meaning. In a column-mapped schema
/// the IDs lakemirror assigns (list elements, map keys and values) start at
/// [`ASSIGNED_ID_BASE`], clear of the IDs Delta hands out to columns added later.
struct IdAssigner<'a> {
    previous: Option<&'a Schema>,
    last_id: i32,
}

impl IdAssigner<'_> {
    fn id_for(&mut self, path: &str, new_type: &Type) -> i32 {
        let reused = self.previous.and_then(|schema| {
            let field = schema.field_by_name(path)?;
            same_kind(&field.field_type, new_type).then_some(field.id)
        });
        reused.unwrap_or_else(|| {
            self.last_id += 1;
            self.last_id
        })
    }
}

fn same_kind(a: &Type, b: &Type) -> bool {
    match (a, b) {
        (Type::Primitive(x), Type::Primitive(y)) => x == y || promotes(x, y),
        (Type::Struct(_), Type::Struct(_))
        | (Type::List(_), Type::List(_))
        | (Type::Map(_), Type::Map(_)) => true,
        _ => false,
    }
}

/// Converts a Delta schema to an Iceberg schema with ID `schema_id`.
///
/// `previous` is the table's current Iceberg schema (None for a new table) and
/// `last_column_id` the table's highest assigned field ID.
pub fn iceberg_schema(
    fields: &[DeltaField],
    previous: Option<&Schema>,
    last_column_id: i32,
    schema_id: i32,
) -> Result<Schema, String> {
    let column_mapped = max_column_mapping_id(fields) > 0;
    let floor = if column_mapped { ASSIGNED_ID_BASE } else { 0 };
    let mut ids = IdAssigner {
        previous,
        last_id: last_column_id.max(floor),
    };
    let fields = struct_fields(fields, "", &mut ids)?;
    Schema::builder()
        .with_schema_id(schema_id)
        .with_fields(fields)
        .build()
        .map_err(|e| e.to_string())
}

fn struct_fields(
    fields: &[DeltaField],
    prefix: &str,
    ids: &mut IdAssigner,
) -> Result<Vec<NestedFieldRef>, String> {
    fields
        .iter()
        .map(|f| {
            let path = format!("{prefix}{}", f.name);
            // Shape first (to compare kinds), then IDs of children, then this field's ID.
            let shape = shape(&f.data_type, &path)?;
            let id = match f.column_mapping_id {
                Some(id) => id,
                None => ids.id_for(&path, &shape),
            };
            let nested = NestedIds {
                ids: &f.nested_ids,
                path: f.physical_name().to_string(),
            };
            let field_type = typed(&f.data_type, &path, ids, &nested)?;
            // Every column is optional: Delta allows files written before a column existed,
            // and readers must return null for them rather than fail.
            Ok(Arc::new(NestedField::optional(id, &f.name, field_type)))
        })
        .collect()
}

/// First ID lakemirror assigns in a column-mapped schema (Delta's own IDs count up from 1).
pub const ASSIGNED_ID_BASE: i32 = 1_000_000_000;

/// The highest `delta.columnMapping.id` of the schema (0 without column mapping).
pub fn max_column_mapping_id(fields: &[DeltaField]) -> i32 {
    fn of_type(t: &DeltaType) -> i32 {
        match t {
            DeltaType::Primitive(_) => 0,
            DeltaType::Struct(fields) => max_column_mapping_id(fields),
            DeltaType::Array { element, .. } => of_type(element),
            DeltaType::Map { key, value, .. } => of_type(key).max(of_type(value)),
        }
    }
    fields
        .iter()
        .map(|f| f.column_mapping_id.unwrap_or(0).max(of_type(&f.data_type)))
        .max()
        .unwrap_or(0)
}

/// The physical name of every column-mapped field, by its field ID (which is its
/// `delta.columnMapping.id`).
pub fn physical_names(fields: &[DeltaField]) -> HashMap<i32, String> {
    fn walk(fields: &[DeltaField], out: &mut HashMap<i32, String>) {
        for f in fields {
            if let (Some(id), Some(name)) = (f.column_mapping_id, &f.physical_name) {
                out.insert(id, name.clone());
            }
            walk_type(&f.data_type, out);
        }
    }
    fn walk_type(t: &DeltaType, out: &mut HashMap<i32, String>) {
        match t {
            DeltaType::Primitive(_) => {}
            DeltaType::Struct(fields) => walk(fields, out),
            DeltaType::Array { element, .. } => walk_type(element, out),
            DeltaType::Map { key, value, .. } => {
                walk_type(key, out);
                walk_type(value, out);
            }
        }
    }
    let mut out = HashMap::new();
    walk(fields, &mut out);
    out
}

/// The Iceberg type with placeholder IDs, used only to compare kinds.
fn shape(t: &DeltaType, path: &str) -> Result<Type, String> {
    Ok(match t {
        DeltaType::Primitive(name) => Type::Primitive(primitive(name, path)?),
        DeltaType::Struct(_) => Type::Struct(StructType::new(vec![])),
        DeltaType::Array { .. } => Type::List(ListType::new(Arc::new(NestedField::list_element(
            0,
            Type::Primitive(PrimitiveType::Int),
            false,
        )))),
        DeltaType::Map { .. } => Type::Map(MapType::new(
            Arc::new(NestedField::map_key_element(
                0,
                Type::Primitive(PrimitiveType::Int),
            )),
            Arc::new(NestedField::map_value_element(
                0,
                Type::Primitive(PrimitiveType::Int),
                false,
            )),
        )),
    })
}

/// The `delta.columnMapping.nested.ids` of the struct field a list or map sits in, and the
/// path of the current element inside it (`<physical name>.element.key` …).
struct NestedIds<'a> {
    ids: &'a HashMap<String, i32>,
    path: String,
}

impl<'a> NestedIds<'a> {
    fn child(&self, name: &str) -> NestedIds<'a> {
        NestedIds {
            ids: self.ids,
            path: format!("{}.{name}", self.path),
        }
    }

    /// Delta's ID for this element, else one from the assigner.
    fn id(&self, ids: &mut IdAssigner, path: &str, shape: &Type) -> i32 {
        match self.ids.get(&self.path) {
            Some(id) => *id,
            None => ids.id_for(path, shape),
        }
    }
}

fn typed(
    t: &DeltaType,
    path: &str,
    ids: &mut IdAssigner,
    nested: &NestedIds,
) -> Result<Type, String> {
    Ok(match t {
        DeltaType::Primitive(name) => Type::Primitive(primitive(name, path)?),
        DeltaType::Struct(fields) => Type::Struct(StructType::new(struct_fields(
            fields,
            &format!("{path}."),
            ids,
        )?)),
        DeltaType::Array {
            element,
            contains_null: _,
        } => {
            let element_path = format!("{path}.element");
            let inner = nested.child("element");
            let id = inner.id(ids, &element_path, &shape(element, &element_path)?);
            let element_type = typed(element, &element_path, ids, &inner)?;
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                id,
                element_type,
                false,
            ))))
        }
        DeltaType::Map {
            key,
            value,
            value_contains_null: _,
        } => {
            let (key_path, value_path) = (format!("{path}.key"), format!("{path}.value"));
            let (key_ids, value_ids) = (nested.child("key"), nested.child("value"));
            let key_id = key_ids.id(ids, &key_path, &shape(key, &key_path)?);
            let key_type = typed(key, &key_path, ids, &key_ids)?;
            let value_id = value_ids.id(ids, &value_path, &shape(value, &value_path)?);
            let value_type = typed(value, &value_path, ids, &value_ids)?;
            Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(key_id, key_type)),
                Arc::new(NestedField::map_value_element(value_id, value_type, false)),
            ))
        }
    })
}

/// Maps a Delta primitive type name to Iceberg.
pub fn primitive(name: &str, path: &str) -> Result<PrimitiveType, String> {
    Ok(match name {
        "byte" | "short" | "integer" => PrimitiveType::Int,
        "long" => PrimitiveType::Long,
        "float" => PrimitiveType::Float,
        "double" => PrimitiveType::Double,
        "boolean" => PrimitiveType::Boolean,
        "string" => PrimitiveType::String,
        "binary" => PrimitiveType::Binary,
        "date" => PrimitiveType::Date,
        "timestamp" => PrimitiveType::Timestamptz,
        "timestamp_ntz" => PrimitiveType::Timestamp,
        other => {
            let (precision, scale) = decimal_precision_scale(other).ok_or_else(|| {
                format!("column {path} has Delta type {other}, which Iceberg cannot express")
            })?;
            PrimitiveType::Decimal { precision, scale }
        }
    })
}

/// Whether Iceberg allows changing a column from `from` to `to` (type promotion): the
/// widenings that keep the field's ID and let readers widen old files' values.
pub fn promotes(from: &PrimitiveType, to: &PrimitiveType) -> bool {
    use PrimitiveType as P;
    match (from, to) {
        (P::Int, P::Long) | (P::Float, P::Double) => true,
        (
            P::Decimal {
                precision: p1,
                scale: s1,
            },
            P::Decimal {
                precision: p2,
                scale: s2,
            },
        ) => s1 == s2 && p2 >= p1,
        _ => from == to,
    }
}

/// Checks every Delta type widening (`delta.typeChanges`) of the schema: each must be one
/// Iceberg can express, or the column is named with both types.
pub fn check_type_changes(fields: &[DeltaField], prefix: &str) -> Result<(), String> {
    for f in fields {
        let path = format!("{prefix}{}", f.name);
        for (from, to) in &f.type_changes {
            let legal = match (primitive(from, &path), primitive(to, &path)) {
                (Ok(a), Ok(b)) => promotes(&a, &b),
                _ => false,
            };
            if !legal {
                return Err(format!(
                    "column {path} was widened from {from} to {to}, which Iceberg cannot express (it allows int to long, float to double, and decimal precision with the same scale)"
                ));
            }
        }
        let mut nested = &f.data_type;
        loop {
            match nested {
                DeltaType::Struct(children) => {
                    check_type_changes(children, &format!("{path}."))?;
                    break;
                }
                DeltaType::Array { element, .. } => nested = element,
                DeltaType::Map { value, .. } => nested = value,
                DeltaType::Primitive(_) => break,
            }
        }
    }
    Ok(())
}

/// `decimal(p,s)` -> (p, s).
pub fn decimal_precision_scale(name: &str) -> Option<(u32, u32)> {
    let inner = name.strip_prefix("decimal(")?.strip_suffix(')')?;
    let (p, s) = inner.split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

/// Iceberg's reserved field ID of the `_change_type` metadata column.
const CHANGE_TYPE_FIELD_ID: i32 = i32::MAX - 104;

/// The name mapping (`schema.name-mapping.default`) of an Iceberg schema whose Parquet
/// files carry no (or not all) field IDs: every field is found by its name, and a
/// column-mapped field also by its physical name (`physical`, by field ID), which is what
/// Parquet files of column-mapped tables use.
///
/// Delta writers with Change Data Feed may leave a `_change_type` column in data files
/// that the table schema does not have. Readers that map every file column (pyiceberg)
/// fail on an unmapped one, so it is mapped to Iceberg's reserved `_change_type` ID, which
/// no table column uses and no scan projects.
pub fn name_mapping(schema: &Schema, physical: &HashMap<i32, String>) -> NameMapping {
    let mut fields: Vec<MappedField> = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| mapped(f, &f.name, physical))
        .collect();
    if schema.field_by_name("_change_type").is_none() {
        fields.push(MappedField::new(
            Some(CHANGE_TYPE_FIELD_ID),
            vec!["_change_type".into()],
            vec![],
        ));
    }
    NameMapping::new(fields)
}

fn mapped(field: &NestedField, name: &str, physical: &HashMap<i32, String>) -> MappedField {
    let children = match field.field_type.as_ref() {
        Type::Primitive(_) => vec![],
        Type::Struct(s) => s
            .fields()
            .iter()
            .map(|f| mapped(f, &f.name, physical))
            .collect(),
        Type::List(l) => vec![mapped(&l.element_field, "element", physical)],
        Type::Map(m) => vec![
            mapped(&m.key_field, "key", physical),
            mapped(&m.value_field, "value", physical),
        ],
    };
    let mut names = vec![name.to_string()];
    if let Some(p) = physical.get(&field.id).filter(|p| *p != name) {
        names.push(p.clone());
    }
    MappedField::new(Some(field.id), names, children)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::schema::parse_schema;

    fn delta(fields: &str) -> Vec<DeltaField> {
        parse_schema(&format!(r#"{{"type":"struct","fields":[{fields}]}}"#)).unwrap()
    }

    const BASE: &str = r#"{"name":"id","type":"long","nullable":true,"metadata":{}},
        {"name":"m","type":{"type":"map","keyType":"string","valueType":"integer","valueContainsNull":true},"nullable":true,"metadata":{}}"#;

    #[test]
    fn only_widenings_iceberg_can_express_pass() {
        let widened = |from: &str, to: &str| {
            delta(&format!(
                r#"{{"name":"c","type":"{to}","nullable":true,"metadata":{{"delta.typeChanges":[{{"fromType":"{from}","toType":"{to}","tableVersion":2}}]}}}}"#
            ))
        };
        for (from, to) in [
            ("byte", "long"),
            ("integer", "long"),
            ("short", "integer"),
            ("float", "double"),
            ("decimal(10,2)", "decimal(20,2)"),
        ] {
            assert!(
                check_type_changes(&widened(from, to), "").is_ok(),
                "{from} -> {to}"
            );
        }
        for (from, to) in [
            ("integer", "double"),
            ("decimal(10,2)", "decimal(20,5)"),
            ("long", "decimal(21,1)"),
            ("date", "timestamp_ntz"),
        ] {
            let err = check_type_changes(&widened(from, to), "").unwrap_err();
            assert!(
                err.contains("column c") && err.contains(from) && err.contains(to),
                "{err}"
            );
        }
        // a widened column keeps its ID
        let old = iceberg_schema(
            &delta(r#"{"name":"c","type":"integer","nullable":true,"metadata":{}}"#),
            None,
            0,
            0,
        )
        .unwrap();
        let new = iceberg_schema(
            &widened("integer", "long"),
            Some(&old),
            old.highest_field_id(),
            1,
        )
        .unwrap();
        assert_eq!(new.field_id_by_name("c"), old.field_id_by_name("c"));
    }

    #[test]
    fn nested_ids_of_icebergcompat_tables_number_elements_keys_and_values() {
        // As Databricks writes them with IcebergCompat: the Parquet files carry these IDs.
        let fields = delta(
            r#"{"name":"m","type":{"type":"map","keyType":"string","valueType":{"type":"array","elementType":"long","containsNull":true},"valueContainsNull":true},"nullable":true,
                "metadata":{"delta.columnMapping.id":3,"delta.columnMapping.physicalName":"col-m",
                            "delta.columnMapping.nested.ids":{"col-m.key":4,"col-m.value":5,"col-m.value.element":6}}},
               {"name":"s","type":{"type":"struct","fields":[{"name":"l","type":{"type":"array","elementType":"integer","containsNull":true},"nullable":true,
                   "metadata":{"delta.columnMapping.id":8,"delta.columnMapping.physicalName":"col-l","delta.columnMapping.nested.ids":{"col-l.element":9}}}]},"nullable":true,
                "metadata":{"delta.columnMapping.id":7,"delta.columnMapping.physicalName":"col-s"}}"#,
        );
        let s = iceberg_schema(&fields, None, 0, 0).unwrap();
        assert_eq!(s.field_id_by_name("m.key"), Some(4));
        assert_eq!(s.field_id_by_name("m.value"), Some(5));
        assert_eq!(s.field_id_by_name("m.value.element"), Some(6));
        assert_eq!(s.field_id_by_name("s.l.element"), Some(9));
        let bad = r#"{"type":"struct","fields":[{"name":"l","type":{"type":"array","elementType":"integer","containsNull":true},"metadata":{"delta.columnMapping.nested.ids":{"x.element":"nine"}}}]}"#;
        assert!(
            crate::delta::schema::parse_schema(bad)
                .unwrap_err()
                .contains("nested.ids")
        );
    }

    #[test]
    fn column_mapping_ids_are_kept_and_physical_names_mapped() {
        let fields = delta(
            r#"{"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"col-a"}},
            {"name":"l","type":{"type":"array","elementType":"integer","containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":9,"delta.columnMapping.physicalName":"col-l"}}"#,
        );
        let s = iceberg_schema(&fields, None, 0, 0).unwrap();
        assert_eq!(s.field_id_by_name("a"), Some(5));
        assert_eq!(s.field_id_by_name("l"), Some(9));
        // the list element has no Delta ID: it gets one clear of every ID Delta may hand out
        assert_eq!(s.field_id_by_name("l.element"), Some(ASSIGNED_ID_BASE + 1));
        // a column Delta adds later (ID 10) does not collide, and the element keeps its ID
        let later = delta(
            r#"{"name":"a","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":5,"delta.columnMapping.physicalName":"col-a"}},
            {"name":"l","type":{"type":"array","elementType":"integer","containsNull":true},"nullable":true,"metadata":{"delta.columnMapping.id":9,"delta.columnMapping.physicalName":"col-l"}},
            {"name":"n","type":"long","nullable":true,"metadata":{"delta.columnMapping.id":10,"delta.columnMapping.physicalName":"col-n"}}"#,
        );
        let s2 = iceberg_schema(&later, Some(&s), s.highest_field_id(), 1).unwrap();
        assert_eq!(s2.field_id_by_name("n"), Some(10));
        assert_eq!(s2.field_id_by_name("l.element"), Some(ASSIGNED_ID_BASE + 1));
        let mapping = serde_json::to_value(name_mapping(&s, &physical_names(&fields))).unwrap();
        assert_eq!(mapping[0]["names"], serde_json::json!(["a", "col-a"]));
        assert_eq!(mapping[1]["names"], serde_json::json!(["l", "col-l"]));
        assert_eq!(
            mapping[1]["fields"][0]["names"],
            serde_json::json!(["element"])
        );
    }

    #[test]
    fn new_table_gets_sequential_ids_and_all_types_map() {
        let s = iceberg_schema(&delta(BASE), None, 0, 0).unwrap();
        assert_eq!(s.field_id_by_name("id"), Some(1));
        assert_eq!(s.field_id_by_name("m"), Some(2));
        assert_eq!(s.field_id_by_name("m.key"), Some(3));
        assert_eq!(s.field_id_by_name("m.value"), Some(4));
        for (delta_type, iceberg) in [
            ("byte", PrimitiveType::Int),
            ("timestamp", PrimitiveType::Timestamptz),
            ("timestamp_ntz", PrimitiveType::Timestamp),
            (
                "decimal(38, 4)",
                PrimitiveType::Decimal {
                    precision: 38,
                    scale: 4,
                },
            ),
        ] {
            assert_eq!(primitive(delta_type, "c").unwrap(), iceberg);
        }
        assert!(primitive("variant", "c").unwrap_err().contains("column c"));
    }

    #[test]
    fn added_column_keeps_existing_ids_and_takes_a_new_one() {
        let first = iceberg_schema(&delta(BASE), None, 0, 0).unwrap();
        let grown =
            format!(r#"{{"name":"x","type":"string","nullable":true,"metadata":{{}}}}, {BASE}"#);
        let second = iceberg_schema(&delta(&grown), Some(&first), 4, 1).unwrap();
        assert_eq!(second.field_id_by_name("id"), Some(1));
        assert_eq!(second.field_id_by_name("m.value"), Some(4));
        assert_eq!(second.field_id_by_name("x"), Some(5));
        assert_eq!(second.schema_id(), 1);
    }

    #[test]
    fn a_column_whose_type_changed_never_reuses_the_id() {
        let first = iceberg_schema(&delta(BASE), None, 0, 0).unwrap();
        let changed = r#"{"name":"id","type":"string","nullable":true,"metadata":{}}"#;
        let second = iceberg_schema(&delta(changed), Some(&first), 4, 1).unwrap();
        assert_eq!(second.field_id_by_name("id"), Some(5));
    }

    #[test]
    fn name_mapping_covers_nested_fields() {
        let s = iceberg_schema(&delta(BASE), None, 0, 0).unwrap();
        let json = serde_json::to_value(name_mapping(&s, &HashMap::new())).unwrap();
        assert_eq!(
            json,
            serde_json::json!([
                {"field-id": 1, "names": ["id"]},
                {"field-id": 2, "names": ["m"], "fields": [
                    {"field-id": 3, "names": ["key"]},
                    {"field-id": 4, "names": ["value"]}
                ]},
                {"field-id": 2147483543, "names": ["_change_type"]}
            ])
        );
    }
}
