//! Delta schema -> Iceberg schema, keeping field IDs stable across schema changes, and the
//! name mapping that lets readers find columns in Parquet files written without field IDs.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    ListType, MapType, MappedField, NameMapping, NestedField, NestedFieldRef, PrimitiveType,
    Schema, StructType, Type,
};

use crate::name_mapping::DECOY_FLOOR;
use lakemirror_delta::schema::{DeltaField, DeltaType};

/// Assigns field IDs: a column-mapped field keeps its `delta.columnMapping.id`; any other
/// reuses the ID it had in the previous Iceberg schema (same name path, same kind of type),
/// or, for a list element or map key/value of a column the schema left out, the ID the name
/// mapping gave it; else it gets the next unused ID, so an ID never changes meaning. In a
/// column-mapped schema the IDs lakemirror assigns (list elements, map keys and values)
/// start at [`ASSIGNED_ID_BASE`], clear of the IDs Delta hands out to columns added later.
struct IdAssigner<'a> {
    previous: Option<&'a Schema>,
    /// (parent field ID, child name in the mapping) -> ID, from the previous name mapping.
    mapped_children: HashMap<(i32, String), i32>,
    last_id: i32,
}

impl IdAssigner<'_> {
    fn id_for(&mut self, path: &str, new_type: &Type) -> i32 {
        let reused = self.previous.and_then(|schema| {
            let field = schema.field_by_name(path)?;
            same_kind(&field.field_type, new_type).then_some(field.id)
        });
        reused.unwrap_or_else(|| self.next())
    }

    /// The ID of `parent`'s `element`, `key` or `value`.
    fn child_id(&mut self, parent: i32, name: &str, path: &str, new_type: &Type) -> i32 {
        let in_schema = self
            .previous
            .and_then(|schema| schema.field_by_name(path))
            .is_some();
        match self.mapped_children.get(&(parent, name.to_string())) {
            Some(id) if !in_schema => *id,
            _ => self.id_for(path, new_type),
        }
    }

    fn next(&mut self) -> i32 {
        self.last_id += 1;
        self.last_id
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

/// A Delta schema as Iceberg sees it.
#[derive(Debug, Clone)]
pub struct ConvertedSchema {
    /// Every Delta column, with its Iceberg field ID.
    pub schema: Schema,
    /// Fields of `void` type: no data file holds them, every reader returns null.
    pub void_ids: HashSet<i32>,
    /// Columns Java Iceberg cannot read (see [`ConvertedSchema::readable_by_java`]), by
    /// logical path (`s.l`, `m.value.x`), with their field IDs.
    pub unreadable: Vec<(String, i32)>,
}

impl ConvertedSchema {
    /// The schema without the columns Java Iceberg cannot read.
    ///
    /// Spark writes Parquet field IDs for every struct field of a column-mapped table, but
    /// none for list elements and map keys/values (unless the table has
    /// `delta.columnMapping.nested.ids`). Java Iceberg (Athena, EMR, Glue ETL, Spark) reads a
    /// file that has any field IDs by ID only, never through the name mapping, and drops a
    /// list or map whose element (or key and value) has no ID and holds no field with one:
    /// reading it then fails (`[col-…, list, element] optional int32 element is not in the
    /// store`). No metadata can make such a column readable, so it is left out.
    pub fn readable_by_java(&self) -> Result<Schema, String> {
        let omitted: HashSet<i32> = self.unreadable.iter().map(|(_, id)| *id).collect();
        if omitted.is_empty() {
            return Ok(self.schema.clone());
        }
        Schema::builder()
            .with_schema_id(self.schema.schema_id())
            .with_fields(without(self.schema.as_struct().fields(), &omitted))
            .build()
            .map_err(|e| e.to_string())
    }

    /// The logical paths of the unreadable columns, in schema order.
    pub fn unreadable_paths(&self) -> Vec<String> {
        self.unreadable
            .iter()
            .map(|(path, _)| path.clone())
            .collect()
    }
}

fn without(fields: &[NestedFieldRef], omitted: &HashSet<i32>) -> Vec<NestedFieldRef> {
    fields
        .iter()
        .filter(|f| !omitted.contains(&f.id))
        .map(|f| {
            let field_type = match f.field_type.as_ref() {
                Type::Struct(s) => Type::Struct(StructType::new(without(s.fields(), omitted))),
                Type::List(l) => Type::List(ListType::new(Arc::new(NestedField::list_element(
                    l.element_field.id,
                    retyped(&l.element_field.field_type, omitted),
                    false,
                )))),
                Type::Map(m) => Type::Map(MapType::new(
                    m.key_field.clone(),
                    Arc::new(NestedField::map_value_element(
                        m.value_field.id,
                        retyped(&m.value_field.field_type, omitted),
                        false,
                    )),
                )),
                Type::Primitive(_) => return f.clone(),
            };
            Arc::new(NestedField::optional(f.id, &f.name, field_type))
        })
        .collect()
}

fn retyped(t: &Type, omitted: &HashSet<i32>) -> Type {
    let probe = Arc::new(NestedField::optional(0, "_", t.clone()));
    without(&[probe], omitted)
        .pop()
        .map_or_else(|| t.clone(), |f| f.field_type.as_ref().clone())
}

/// Converts a Delta schema to an Iceberg schema with ID `schema_id`.
///
/// `previous` is the table's current Iceberg schema (None for a new table), `mapping` its
/// name mapping, and `last_column_id` the table's highest assigned field ID.
pub fn iceberg_schema(
    fields: &[DeltaField],
    previous: Option<&Schema>,
    mapping: Option<&NameMapping>,
    last_column_id: i32,
    schema_id: i32,
) -> Result<ConvertedSchema, String> {
    let column_mapped = max_column_mapping_id(fields) > 0;
    let floor = if column_mapped { ASSIGNED_ID_BASE } else { 0 };
    let mut mapped_children = HashMap::new();
    let mut mapped_max = 0;
    if let Some(mapping) = mapping {
        index_children(mapping.fields(), &mut mapped_children);
        // IDs the mapping gave columns the schema no longer has (or leaves out) stay taken.
        mapped_max = max_mapped_id(mapping.fields());
    }
    let mut walk = Walk {
        ids: IdAssigner {
            previous,
            mapped_children,
            last_id: last_column_id.max(floor).max(mapped_max),
        },
        column_mapped,
        void_ids: HashSet::new(),
        unreadable: Vec::new(),
    };
    let (fields, _) = walk.struct_fields(fields, "")?;
    let schema = Schema::builder()
        .with_schema_id(schema_id)
        .with_fields(fields)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(ConvertedSchema {
        schema,
        void_ids: walk.void_ids,
        unreadable: walk.unreadable,
    })
}

fn max_mapped_id(fields: &[impl std::borrow::Borrow<MappedField>]) -> i32 {
    fields
        .iter()
        .map(|f| {
            let f = f.borrow();
            let own = f.field_id().filter(|id| *id < DECOY_FLOOR).unwrap_or(0);
            own.max(max_mapped_id(f.fields()))
        })
        .max()
        .unwrap_or(0)
}

fn index_children(
    fields: &[impl std::borrow::Borrow<MappedField>],
    out: &mut HashMap<(i32, String), i32>,
) {
    for field in fields {
        let field = field.borrow();
        if let Some(parent) = field.field_id() {
            for child in field.fields() {
                if let Some(id) = child.field_id() {
                    for name in child.names() {
                        out.insert((parent, name.clone()), id);
                    }
                }
            }
        }
        index_children(field.fields(), out);
    }
}

/// One pass over a Delta schema: IDs, types, and what Java Iceberg can read.
struct Walk<'a> {
    ids: IdAssigner<'a>,
    column_mapped: bool,
    void_ids: HashSet<i32>,
    unreadable: Vec<(String, i32)>,
}

impl Walk<'_> {
    /// The fields of a struct, and whether any of them Java can read: a struct field
    /// carries a Parquet field ID, so a struct with a readable field holds an ID.
    fn struct_fields(
        &mut self,
        fields: &[DeltaField],
        prefix: &str,
    ) -> Result<(Vec<NestedFieldRef>, bool), String> {
        let mut out = Vec::with_capacity(fields.len());
        let mut any_readable = false;
        for f in fields {
            let path = format!("{prefix}{}", f.name);
            // Shape first (to compare kinds), then IDs of children, then this field's ID.
            let shape = shape(&f.data_type, &path)?;
            let id = match f.column_mapping_id {
                Some(id) => id,
                None => self.ids.id_for(&path, &shape),
            };
            let nested = NestedIds {
                ids: &f.nested_ids,
                path: f.physical_name().to_string(),
            };
            let omitted_before = self.unreadable.len();
            let (field_type, holds_ids) = self.typed(&f.data_type, id, &path, &nested)?;
            if f.data_type == DeltaType::Primitive("void".into()) {
                self.void_ids.insert(id);
            }
            let readable = match &f.data_type {
                DeltaType::Primitive(_) => true,
                DeltaType::Struct(children) => children.is_empty() || holds_ids,
                DeltaType::Array { .. } | DeltaType::Map { .. } => holds_ids,
            };
            if readable || !self.column_mapped {
                any_readable = true;
            } else {
                // The whole field goes, not its parts one by one.
                self.unreadable.truncate(omitted_before);
                self.unreadable.push((path.clone(), id));
            }
            // Every column is optional: Delta allows files written before a column existed,
            // and readers must return null for them rather than fail.
            out.push(Arc::new(NestedField::optional(id, &f.name, field_type)));
        }
        Ok((out, any_readable))
    }

    /// The Iceberg type of `t` (the type of field `id`), and whether Java finds a Parquet
    /// field ID inside it: Spark writes IDs for struct fields, and for list elements and map
    /// keys/values only with `delta.columnMapping.nested.ids`.
    fn typed(
        &mut self,
        t: &DeltaType,
        id: i32,
        path: &str,
        nested: &NestedIds,
    ) -> Result<(Type, bool), String> {
        Ok(match t {
            DeltaType::Primitive(name) => (Type::Primitive(primitive(name, path)?), false),
            DeltaType::Struct(fields) => {
                let (fields, any) = self.struct_fields(fields, &format!("{path}."))?;
                (Type::Struct(StructType::new(fields)), any)
            }
            DeltaType::Array { element, .. } => {
                let (field, holds) = self.child(element, id, "element", path, nested)?;
                (Type::List(ListType::new(field)), holds)
            }
            DeltaType::Map { key, value, .. } => {
                // Java keeps a map whose key has an ID or whose value holds one; a key's own
                // fields do not count (Iceberg's Parquet PruneColumns.map).
                let (key_field, _) = self.child(key, id, "key", path, nested)?;
                let key_has_id = nested.ids.contains_key(&nested.child("key").path);
                let (value_field, value_holds) = self.child(value, id, "value", path, nested)?;
                (
                    Type::Map(MapType::new(key_field, value_field)),
                    key_has_id || value_holds,
                )
            }
        })
    }

    /// A list element or map key/value: its field, and whether it has or holds an ID.
    fn child(
        &mut self,
        t: &DeltaType,
        parent: i32,
        name: &str,
        path: &str,
        nested: &NestedIds,
    ) -> Result<(NestedFieldRef, bool), String> {
        let child_path = format!("{path}.{name}");
        let inner = nested.child(name);
        let own_id = inner.ids.get(&inner.path).copied();
        let id = match own_id {
            Some(id) => id,
            None => {
                let shape = shape(t, &child_path)?;
                self.ids.child_id(parent, name, &child_path, &shape)
            }
        };
        let (field_type, holds) = self.typed(t, id, &child_path, &inner)?;
        let field = match name {
            "element" => NestedField::list_element(id, field_type, false),
            "key" => NestedField::map_key_element(id, field_type),
            _ => NestedField::map_value_element(id, field_type, false),
        };
        Ok((Arc::new(field), own_id.is_some() || holds))
    }
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
        // Delta's `void` (a column of nulls) has no data in any file. Iceberg v2 has no type
        // for it; any type reads as null when no file holds the column, and the name mapping
        // leaves it out so that no file column is ever matched to it.
        "void" => PrimitiveType::String,
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
            // A void column has no data in any file: any type change of it is free.
            let legal = from == "void"
                || match (primitive(from, &path), primitive(to, &path)) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use lakemirror_delta::schema::parse_schema;

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
            None,
            0,
            0,
        )
        .unwrap()
        .schema;
        let new = iceberg_schema(
            &widened("integer", "long"),
            Some(&old),
            None,
            old.highest_field_id(),
            1,
        )
        .unwrap()
        .schema;
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
        let s = iceberg_schema(&fields, None, None, 0, 0).unwrap().schema;
        assert_eq!(s.field_id_by_name("m.key"), Some(4));
        assert_eq!(s.field_id_by_name("m.value"), Some(5));
        assert_eq!(s.field_id_by_name("m.value.element"), Some(6));
        assert_eq!(s.field_id_by_name("s.l.element"), Some(9));
        let bad = r#"{"type":"struct","fields":[{"name":"l","type":{"type":"array","elementType":"integer","containsNull":true},"metadata":{"delta.columnMapping.nested.ids":{"x.element":"nine"}}}]}"#;
        assert!(
            lakemirror_delta::schema::parse_schema(bad)
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
        let s = iceberg_schema(&fields, None, None, 0, 0).unwrap().schema;
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
        let s2 = iceberg_schema(&later, Some(&s), None, s.highest_field_id(), 1)
            .unwrap()
            .schema;
        assert_eq!(s2.field_id_by_name("n"), Some(10));
        assert_eq!(s2.field_id_by_name("l.element"), Some(ASSIGNED_ID_BASE + 1));
    }

    #[test]
    fn new_table_gets_sequential_ids_and_all_types_map() {
        let s = iceberg_schema(&delta(BASE), None, None, 0, 0)
            .unwrap()
            .schema;
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
        let first = iceberg_schema(&delta(BASE), None, None, 0, 0)
            .unwrap()
            .schema;
        let grown =
            format!(r#"{{"name":"x","type":"string","nullable":true,"metadata":{{}}}}, {BASE}"#);
        let second = iceberg_schema(&delta(&grown), Some(&first), None, 4, 1)
            .unwrap()
            .schema;
        assert_eq!(second.field_id_by_name("id"), Some(1));
        assert_eq!(second.field_id_by_name("m.value"), Some(4));
        assert_eq!(second.field_id_by_name("x"), Some(5));
        assert_eq!(second.schema_id(), 1);
    }

    #[test]
    fn a_column_whose_type_changed_never_reuses_the_id() {
        let first = iceberg_schema(&delta(BASE), None, None, 0, 0)
            .unwrap()
            .schema;
        let changed = r#"{"name":"id","type":"string","nullable":true,"metadata":{}}"#;
        let second = iceberg_schema(&delta(changed), Some(&first), None, 4, 1)
            .unwrap()
            .schema;
        assert_eq!(second.field_id_by_name("id"), Some(5));
    }

    /// A column-mapped field as Spark writes it, with its ID and physical name.
    fn cm(id: i32, name: &str, t: &str) -> String {
        format!(
            r#"{{"name":"{name}","type":{t},"nullable":true,"metadata":{{"delta.columnMapping.id":{id},"delta.columnMapping.physicalName":"col-{id}"}}}}"#
        )
    }

    #[test]
    fn lists_and_maps_java_cannot_read_in_spark_files_are_named_and_left_out() {
        let array =
            |e: &str| format!(r#"{{"type":"array","elementType":{e},"containsNull":true}}"#);
        let map = |k: &str, v: &str| {
            format!(r#"{{"type":"map","keyType":{k},"valueType":{v},"valueContainsNull":true}}"#)
        };
        let strukt =
            |fields: &[String]| format!(r#"{{"type":"struct","fields":[{}]}}"#, fields.join(","));
        let fields = delta(
            &[
                cm(1, "id", r#""long""#),
                cm(2, "ints", &array(r#""integer""#)),
                // Java reads these: the element / value is a struct whose fields carry IDs.
                cm(3, "structs", &array(&strukt(&[cm(4, "a", r#""integer""#)]))),
                cm(
                    5,
                    "by_key",
                    &map(r#""string""#, &strukt(&[cm(6, "a", r#""integer""#)])),
                ),
                cm(7, "counts", &map(r#""string""#, r#""long""#)),
                // a struct keeps its readable fields; one left with none goes whole
                cm(
                    8,
                    "s",
                    &strukt(&[cm(9, "a", r#""integer""#), cm(10, "l", &array(r#""long""#))]),
                ),
                cm(
                    11,
                    "only_lists",
                    &strukt(&[cm(12, "l", &array(r#""long""#))]),
                ),
                cm(
                    13,
                    "deep",
                    &array(&strukt(&[cm(
                        14,
                        "m",
                        &map(r#""string""#, &array(r#""long""#)),
                    )])),
                ),
                cm(15, "nothing", r#""void""#),
            ]
            .join(","),
        );
        let converted = iceberg_schema(&fields, None, None, 0, 0).unwrap();
        assert_eq!(
            converted.unreadable_paths(),
            vec!["ints", "counts", "s.l", "only_lists", "deep"],
            "deep: its element struct keeps no readable field, so the list holds no ID"
        );
        assert_eq!(converted.void_ids, HashSet::from([15]));
        let readable = converted.readable_by_java().unwrap();
        for gone in ["ints", "counts", "s.l", "only_lists", "deep"] {
            assert!(readable.field_by_name(gone).is_none(), "{gone}");
        }
        for kept in [
            "id",
            "structs.element.a",
            "by_key.value.a",
            "s.a",
            "nothing",
        ] {
            assert!(readable.field_by_name(kept).is_some(), "{kept}");
        }
        // IDs stay the table's: the full schema still has every column
        assert_eq!(converted.schema.field_id_by_name("ints"), Some(2));
        // With nested IDs (IcebergCompat) every list and map is readable.
        let with_ids = delta(
            r#"{"name":"ints","type":{"type":"array","elementType":"integer","containsNull":true},"nullable":true,
                "metadata":{"delta.columnMapping.id":2,"delta.columnMapping.physicalName":"col-2","delta.columnMapping.nested.ids":{"col-2.element":3}}}"#,
        );
        let converted = iceberg_schema(&with_ids, None, None, 0, 0).unwrap();
        assert!(converted.unreadable.is_empty());
        // Without column mapping files carry no IDs at all and readers use the name mapping.
        let plain = iceberg_schema(&delta(BASE), None, None, 0, 0).unwrap();
        assert!(plain.unreadable.is_empty());
    }

    #[test]
    fn a_left_out_list_keeps_its_element_id_from_the_name_mapping() {
        let fields = delta(&cm(
            2,
            "ints",
            r#"{"type":"array","elementType":"integer","containsNull":true}"#,
        ));
        let first = iceberg_schema(&fields, None, None, 0, 0).unwrap();
        let element = first.schema.field_id_by_name("ints.element").unwrap();
        let table = first.readable_by_java().unwrap();
        let mapping = crate::name_mapping::name_mapping(
            None,
            &first.schema,
            &physical_names(&fields),
            &HashSet::new(),
        );
        let again = iceberg_schema(&fields, Some(&table), Some(&mapping), element, 1).unwrap();
        assert_eq!(again.schema.field_id_by_name("ints.element"), Some(element));
    }

    #[test]
    fn a_void_column_may_become_any_type() {
        let fields = delta(
            r#"{"name":"c","type":"double","nullable":true,"metadata":{"delta.typeChanges":[{"fromType":"void","toType":"double"}]}}"#,
        );
        assert!(check_type_changes(&fields, "").is_ok());
    }
}
