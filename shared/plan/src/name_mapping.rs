//! The name mapping (`schema.name-mapping.default`): how readers find a column in a Parquet
//! file written without (or without all) field IDs.
//!
//! Two rules that Java Iceberg (Athena, EMR, Glue ETL, Spark) enforces and the lenient
//! readers do not:
//! - **Names are unique at every level.** Java indexes a level's names in one map and refuses
//!   the whole table on a duplicate ("Multiple entries with same key"); DuckDB silently takes
//!   one of them. A field's *required* name (what data files call it: the physical name with
//!   column mapping, else the name) always wins; a logical name is added only where no other
//!   field at its level has it.
//! - **The mapping only grows.** Files written before a column was renamed or dropped still
//!   carry the old name, so old names stay (as Java's `MappingUtil.update` keeps them), unless
//!   another field now needs that name.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};

use iceberg::spec::{MappedField, NameMapping, NestedField, Schema, Type};

/// Iceberg's reserved field ID of the `_change_type` metadata column.
const CHANGE_TYPE_FIELD_ID: i32 = i32::MAX - 104;
/// Decoy IDs, counted down from here: a file column mapped to an ID no schema has is read by
/// nobody. IDs lakemirror assigns never come near them.
pub const FIRST_DECOY_ID: i32 = i32::MAX - 201;
/// Below the decoys: IDs from here up are never counted as taken by a column.
pub const DECOY_FLOOR: i32 = FIRST_DECOY_ID - 100_000;

/// The names one field of the schema should have in the mapping.
struct Wanted {
    id: i32,
    /// The name data files use for it: always in the mapping.
    required: String,
    /// The logical name of a column-mapped field, when it differs: only where free.
    optional: Option<String>,
    children: Vec<Wanted>,
}

/// The name mapping of `schema`, grown from `previous` (the table's mapping so far).
///
/// `physical` gives the physical name of column-mapped fields by field ID. A field in
/// `void_ids` (a Delta `void` column, of nulls only) has its names mapped to a decoy ID:
/// readers then read it as null even from a file that holds a column of that name, and
/// pyiceberg, which refuses a file column the mapping does not know, reads such files too.
///
/// Delta writers with Change Data Feed may leave a `_change_type` column in data files that
/// the table schema does not have. Readers that map every file column (pyiceberg) fail on an
/// unmapped one, so it is mapped to Iceberg's reserved `_change_type` ID, which no table
/// column uses and no scan projects.
pub fn name_mapping(
    previous: Option<&NameMapping>,
    schema: &Schema,
    physical: &HashMap<i32, String>,
    void_ids: &HashSet<i32>,
) -> NameMapping {
    let mut next_decoy = FIRST_DECOY_ID;
    let wanted = wanted_fields(
        schema.as_struct().fields(),
        physical,
        void_ids,
        &mut next_decoy,
    );
    let live: HashSet<i32> = ids_of(&wanted);
    let previous: Vec<&MappedField> = previous
        .map(|m| m.fields().iter().collect())
        .unwrap_or_default();
    let mut fields = merge(&previous, wanted, &live);
    let taken = fields
        .iter()
        .any(|f| f.names().iter().any(|n| n == "_change_type"));
    if !taken {
        fields.push(MappedField::new(
            Some(CHANGE_TYPE_FIELD_ID),
            vec!["_change_type".into()],
            vec![],
        ));
    }
    NameMapping::new(fields)
}

fn wanted_fields(
    fields: &[std::sync::Arc<NestedField>],
    physical: &HashMap<i32, String>,
    void_ids: &HashSet<i32>,
    next_decoy: &mut i32,
) -> Vec<Wanted> {
    fields
        .iter()
        .map(|f| {
            let (required, optional) = match physical.get(&f.id) {
                Some(p) => (p.clone(), (*p != f.name).then(|| f.name.clone())),
                None => (f.name.clone(), None),
            };
            wanted(f, required, optional, physical, void_ids, next_decoy)
        })
        .collect()
}

fn wanted(
    field: &NestedField,
    required: String,
    optional: Option<String>,
    physical: &HashMap<i32, String>,
    void_ids: &HashSet<i32>,
    next_decoy: &mut i32,
) -> Wanted {
    let id = if void_ids.contains(&field.id) {
        *next_decoy -= 1;
        *next_decoy + 1
    } else {
        field.id
    };
    let mut element =
        |f: &NestedField, name: &str| wanted(f, name.into(), None, physical, void_ids, next_decoy);
    let children = match field.field_type.as_ref() {
        Type::Primitive(_) => vec![],
        Type::Struct(s) => wanted_fields(s.fields(), physical, void_ids, next_decoy),
        Type::List(l) => vec![element(&l.element_field, "element")],
        Type::Map(m) => vec![
            element(&m.key_field, "key"),
            element(&m.value_field, "value"),
        ],
    };
    Wanted {
        id,
        required,
        optional,
        children,
    }
}

fn ids_of(wanted: &[Wanted]) -> HashSet<i32> {
    let mut ids = HashSet::new();
    let mut stack: Vec<&Wanted> = wanted.iter().collect();
    while let Some(w) = stack.pop() {
        ids.insert(w.id);
        stack.extend(w.children.iter());
    }
    ids
}

/// One level: the fields of the schema (in schema order) with their earlier names, then
/// the fields the schema no longer has (dropped or renamed away), each name on one field.
fn merge(previous: &[&MappedField], wanted: Vec<Wanted>, live: &HashSet<i32>) -> Vec<MappedField> {
    struct Entry<'a> {
        id: Option<i32>,
        earlier: Option<&'a MappedField>,
        wanted: Option<Wanted>,
        names: Vec<String>,
    }
    let wanted_ids: HashSet<i32> = wanted.iter().map(|w| w.id).collect();
    let mut entries: Vec<Entry> = wanted
        .into_iter()
        .map(|w| Entry {
            id: Some(w.id),
            earlier: previous
                .iter()
                .copied()
                .find(|p| p.field_id() == Some(w.id)),
            wanted: Some(w),
            names: Vec::new(),
        })
        .collect();
    // A field gone from this level keeps its names for old files, unless its ID is used
    // elsewhere now (IDs are unique across the whole mapping).
    entries.extend(
        previous
            .iter()
            .copied()
            .filter(|p| {
                p.field_id()
                    .is_none_or(|id| !wanted_ids.contains(&id) && !live.contains(&id))
            })
            .map(|p| Entry {
                id: p.field_id(),
                earlier: Some(p),
                wanted: None,
                names: Vec::new(),
            }),
    );
    let mut claimed: HashSet<String> = HashSet::new();
    let mut claim = |names: &mut Vec<String>, name: &str| {
        if claimed.insert(name.to_string()) {
            names.push(name.to_string());
        }
    };
    for e in entries.iter_mut() {
        if let Some(w) = &e.wanted {
            claim(&mut e.names, &w.required);
        }
    }
    for e in entries.iter_mut() {
        for name in e.earlier.map(|p| p.names()).unwrap_or_default() {
            claim(&mut e.names, name);
        }
    }
    for e in entries.iter_mut() {
        if let Some(optional) = e.wanted.as_ref().and_then(|w| w.optional.as_ref()) {
            claim(&mut e.names, optional);
        }
    }
    entries
        .into_iter()
        .filter(|e| !e.names.is_empty())
        .map(|e| {
            let earlier: Vec<&MappedField> = e
                .earlier
                .map(|p| p.fields().iter().map(AsRef::as_ref).collect())
                .unwrap_or_default();
            let children = e.wanted.map(|w| w.children).unwrap_or_default();
            MappedField::new(e.id, e.names, merge(&earlier, children, live))
        })
        .collect()
}

/// A field of a data file's Parquet schema as readers that map a file by name see it: a
/// list's element is `element`, a map's entries `key` and `value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileField {
    pub name: String,
    pub children: Vec<FileField>,
}

/// The decoy IDs of fields inside a left-out variant column (its shredded `typed_value`) are
/// counted down from here, above those of its `metadata` and `value`.
const SHREDDED_DECOYS: i32 = DECOY_FLOOR + 90_000;
/// ... and down to here.
const SHREDDED_DECOYS_END: i32 = DECOY_FLOOR + 1_000;

/// The variant columns `mapping` holds as left out (a format version 2 mirror maps a
/// variant's `metadata` and `value` to decoy IDs): the path of names data files use for each.
pub fn variant_placeholders(mapping: &NameMapping) -> Vec<Vec<String>> {
    fn walk(fields: &[impl Borrow<MappedField>], prefix: &[String], out: &mut Vec<Vec<String>>) {
        for f in fields {
            let f = f.borrow();
            let Some(name) = f.names().first() else {
                continue;
            };
            let path: Vec<String> = prefix.iter().cloned().chain([name.clone()]).collect();
            let decoy = |member: &str| {
                f.fields().iter().any(|c| {
                    c.names().iter().any(|n| n == member)
                        && c.field_id().is_some_and(|id| id >= DECOY_FLOOR)
                })
            };
            if decoy("metadata") && decoy("value") {
                out.push(path);
            } else {
                walk(f.fields(), &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(mapping.fields(), &[], &mut out);
    out
}

/// `mapping` (a new one, for a schema change) with the fields `earlier` (the mapping it
/// replaces) knew inside each left-out variant column: the files that hold them are still
/// there. None when it knows them all.
pub fn with_variant_fields_of(mapping: &NameMapping, earlier: &NameMapping) -> Option<NameMapping> {
    fn file_fields(fields: &[impl Borrow<MappedField>]) -> Vec<FileField> {
        fields
            .iter()
            .map(Borrow::borrow)
            .filter_map(|f: &MappedField| {
                Some(FileField {
                    name: f.names().first()?.clone(),
                    children: file_fields(f.fields()),
                })
            })
            .collect()
    }
    fn at<'m>(fields: &'m [impl Borrow<MappedField>], path: &[String]) -> Option<&'m MappedField> {
        let (name, rest) = path.split_first()?;
        let field = fields
            .iter()
            .map(Borrow::borrow)
            .find(|f: &&MappedField| f.names().contains(name))?;
        match rest.is_empty() {
            true => Some(field),
            false => at(field.fields(), rest),
        }
    }
    let mut grown: Option<NameMapping> = None;
    for path in variant_placeholders(mapping) {
        let Some(known) = at(earlier.fields(), &path) else {
            continue;
        };
        let current = grown.as_ref().unwrap_or(mapping);
        if let Some(more) = with_file_fields(current, &path, &file_fields(known.fields())) {
            grown = Some(more);
        }
    }
    grown
}

/// `mapping` with every field of `fields` (the fields a data file holds inside the variant
/// column at `path`) mapped, the new ones to decoy IDs no schema has: pyiceberg maps every
/// field of a file before it projects the columns it reads, and refuses a file with one the
/// mapping does not know (a shredded variant's `typed_value`, which differs file by file).
/// The mapping only grows. None when it knows every field already.
pub fn with_file_fields(
    mapping: &NameMapping,
    path: &[String],
    fields: &[FileField],
) -> Option<NameMapping> {
    fn copy(f: &MappedField) -> MappedField {
        MappedField::new(
            f.field_id(),
            f.names().to_vec(),
            f.fields().iter().map(|c| copy(c)).collect(),
        )
    }
    fn lowest(fields: &[impl Borrow<MappedField>], low: &mut i32) {
        for f in fields {
            let f = f.borrow();
            if let Some(id) = f
                .field_id()
                .filter(|id| (SHREDDED_DECOYS_END..=SHREDDED_DECOYS).contains(id))
            {
                *low = (*low).min(id);
            }
            lowest(f.fields(), low);
        }
    }
    /// `known` (a level of the mapping) with what of `file` it lacks; whether it grew.
    fn merge(
        known: &[impl Borrow<MappedField>],
        file: &[FileField],
        next: &mut i32,
    ) -> (Vec<MappedField>, bool) {
        let mut grew = false;
        let mut out: Vec<MappedField> = known
            .iter()
            .map(Borrow::borrow)
            .map(
                |k: &MappedField| match file.iter().find(|f| k.names().contains(&f.name)) {
                    Some(f) => {
                        let (children, more) = merge(k.fields(), &f.children, next);
                        grew |= more;
                        MappedField::new(k.field_id(), k.names().to_vec(), children)
                    }
                    None => copy(k),
                },
            )
            .collect();
        for f in file {
            let is_known = known.iter().any(|k| k.borrow().names().contains(&f.name));
            if !is_known && *next <= SHREDDED_DECOYS_END {
                tracing::warn!(field = %f.name, "no decoy ID is left for a field of a left-out variant: pyiceberg refuses the files that hold it");
            }
            if !is_known && *next > SHREDDED_DECOYS_END {
                *next -= 1;
                let id = *next;
                let (children, _) = merge(&[] as &[MappedField], &f.children, next);
                out.push(MappedField::new(Some(id), vec![f.name.clone()], children));
                grew = true;
            }
        }
        (out, grew)
    }
    fn within(
        fields: &[impl Borrow<MappedField>],
        path: &[String],
        file: &[FileField],
        next: &mut i32,
    ) -> (Vec<MappedField>, bool) {
        let mut grew = false;
        let out = fields
            .iter()
            .map(Borrow::borrow)
            .map(|f: &MappedField| match path.split_first() {
                Some((name, rest)) if f.names().contains(name) => {
                    let (children, more) = match rest.is_empty() {
                        true => merge(f.fields(), file, next),
                        false => within(f.fields(), rest, file, next),
                    };
                    grew |= more;
                    MappedField::new(f.field_id(), f.names().to_vec(), children)
                }
                _ => copy(f),
            })
            .collect();
        (out, grew)
    }
    let mut next = SHREDDED_DECOYS + 1;
    lowest(mapping.fields(), &mut next);
    let (fields, grew) = within(mapping.fields(), path, fields, &mut next);
    grew.then(|| NameMapping::new(fields))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{ListType, PrimitiveType};
    use serde_json::json;

    use super::*;

    fn long(id: i32, name: &str) -> Arc<NestedField> {
        Arc::new(NestedField::optional(
            id,
            name,
            Type::Primitive(PrimitiveType::Long),
        ))
    }

    fn schema(fields: Vec<Arc<NestedField>>) -> Schema {
        Schema::builder().with_fields(fields).build().unwrap()
    }

    fn json_of(m: &NameMapping) -> serde_json::Value {
        let mut v = serde_json::to_value(m).unwrap();
        v.as_array_mut().unwrap().pop(); // _change_type
        v
    }

    fn parse(v: serde_json::Value) -> NameMapping {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_new_table_maps_each_field_by_name_and_nested_fields_by_element_key_value() {
        let list = Arc::new(NestedField::optional(
            2,
            "l",
            Type::List(ListType::new(long(3, "element"))),
        ));
        let m = name_mapping(
            None,
            &schema(vec![long(1, "id"), list]),
            &HashMap::new(),
            &HashSet::new(),
        );
        assert_eq!(
            serde_json::to_value(&m).unwrap(),
            json!([
                {"field-id": 1, "names": ["id"]},
                {"field-id": 2, "names": ["l"], "fields": [{"field-id": 3, "names": ["element"]}]},
                {"field-id": 2147483543, "names": ["_change_type"]}
            ])
        );
    }

    #[test]
    fn an_upgraded_table_whose_renamed_column_lent_its_name_maps_every_name_once() {
        // Column mapping turned on later: physical name = the name then. `a` was renamed to
        // `b`, and a new column `a` added (physical col-3). Files call field 1 `a`.
        let physical = HashMap::from([(1, "a".to_string()), (3, "col-3".to_string())]);
        let s = schema(vec![long(1, "b"), long(3, "a")]);
        let m = name_mapping(None, &s, &physical, &HashSet::new());
        assert_eq!(
            json_of(&m),
            json!([
                {"field-id": 1, "names": ["a", "b"]},
                {"field-id": 3, "names": ["col-3"]}
            ])
        );
        // A mapping an older lakemirror wrote with the duplicate is repaired.
        let broken = parse(json!([
            {"field-id": 1, "names": ["b", "a"]},
            {"field-id": 3, "names": ["a", "col-3"]}
        ]));
        let repaired = name_mapping(Some(&broken), &s, &physical, &HashSet::new());
        assert_eq!(
            json_of(&repaired),
            json!([
                {"field-id": 1, "names": ["a", "b"]},
                {"field-id": 3, "names": ["col-3"]}
            ])
        );
    }

    #[test]
    fn dropped_and_renamed_fields_keep_their_names_for_old_files() {
        let physical = HashMap::from([(1, "col-1".to_string()), (2, "col-2".to_string())]);
        let first = name_mapping(
            None,
            &schema(vec![long(1, "a"), long(2, "c")]),
            &physical,
            &HashSet::new(),
        );
        // c dropped, a renamed to x
        let second = name_mapping(
            Some(&first),
            &schema(vec![long(1, "x")]),
            &physical,
            &HashSet::new(),
        );
        assert_eq!(
            json_of(&second),
            json!([
                {"field-id": 1, "names": ["col-1", "a", "x"]},
                {"field-id": 2, "names": ["col-2", "c"]}
            ])
        );
    }

    #[test]
    fn a_name_taken_over_by_another_column_moves_to_it() {
        // Without column mapping: `x` replaced by a new `x` of another type (overwriteSchema).
        let first = name_mapping(
            None,
            &schema(vec![long(1, "id"), long(2, "x")]),
            &HashMap::new(),
            &HashSet::new(),
        );
        let second = name_mapping(
            Some(&first),
            &schema(vec![long(1, "id"), long(5, "x")]),
            &HashMap::new(),
            &HashSet::new(),
        );
        assert_eq!(
            json_of(&second),
            json!([{"field-id": 1, "names": ["id"]}, {"field-id": 5, "names": ["x"]}])
        );
    }

    #[test]
    fn void_columns_map_to_decoys_so_they_read_as_null() {
        let s = schema(vec![long(1, "id"), long(2, "nothing"), long(3, "none")]);
        let m = name_mapping(None, &s, &HashMap::new(), &HashSet::from([2, 3]));
        assert_eq!(
            json_of(&m),
            json!([
                {"field-id": 1, "names": ["id"]},
                {"field-id": FIRST_DECOY_ID, "names": ["nothing"]},
                {"field-id": FIRST_DECOY_ID - 1, "names": ["none"]}
            ])
        );
        // stable from one sync to the next; a void column that gets a type takes its name
        assert_eq!(
            name_mapping(Some(&m), &s, &HashMap::new(), &HashSet::from([2, 3])),
            m
        );
        let typed = name_mapping(Some(&m), &s, &HashMap::new(), &HashSet::from([3]));
        assert_eq!(
            json_of(&typed),
            json!([
                {"field-id": 1, "names": ["id"]},
                {"field-id": 2, "names": ["nothing"]},
                {"field-id": FIRST_DECOY_ID, "names": ["none"]}
            ])
        );
    }

    #[test]
    fn a_real_change_type_column_takes_the_name_from_the_reserved_entry() {
        let first = name_mapping(
            None,
            &schema(vec![long(1, "id")]),
            &HashMap::new(),
            &HashSet::new(),
        );
        let second = name_mapping(
            Some(&first),
            &schema(vec![long(1, "id"), long(2, "_change_type")]),
            &HashMap::new(),
            &HashSet::new(),
        );
        assert_eq!(
            serde_json::to_value(&second).unwrap(),
            json!([{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["_change_type"]}])
        );
    }

    #[test]
    fn a_left_out_variants_shredded_fields_are_mapped_to_decoys_and_the_mapping_only_grows() {
        let leaf = |name: &str| FileField {
            name: name.into(),
            children: vec![],
        };
        let shredded = |key: &str| FileField {
            name: key.into(),
            children: vec![leaf("value"), leaf("typed_value")],
        };
        let mapping = parse(json!([
            {"field-id": 1, "names": ["i"]},
            {"field-id": 2, "names": ["v"], "fields": [
                {"field-id": DECOY_FLOOR + 999, "names": ["metadata"]},
                {"field-id": DECOY_FLOOR + 998, "names": ["value"]}]},
            {"field-id": 3, "names": ["s"], "fields": [{"field-id": 4, "names": ["x"]}]}
        ]));
        assert_eq!(variant_placeholders(&mapping), vec![vec!["v".to_string()]]);
        let first = FileField {
            name: "typed_value".into(),
            children: vec![shredded("id")],
        };
        let file = [leaf("metadata"), leaf("value"), first];
        let grown = with_file_fields(&mapping, &["v".to_string()], &file).unwrap();
        assert!(
            with_file_fields(&grown, &["v".to_string()], &file).is_none(),
            "known already"
        );
        // A file shredding another key adds only that key, below the IDs given before.
        let second = FileField {
            name: "typed_value".into(),
            children: vec![shredded("name")],
        };
        let grown = with_file_fields(&grown, &["v".to_string()], &[second]).unwrap();
        let json = serde_json::to_value(&grown).unwrap();
        let typed = &json[1]["fields"][2];
        assert_eq!(typed["names"], json!(["typed_value"]));
        let keys: Vec<&str> = typed["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["names"][0].as_str().unwrap())
            .collect();
        assert_eq!(keys, ["id", "name"]);
        let mut ids = Vec::new();
        fn collect(v: &serde_json::Value, ids: &mut Vec<i64>) {
            for f in v.as_array().unwrap() {
                ids.push(f["field-id"].as_i64().unwrap());
                if let Some(children) = f.get("fields") {
                    collect(children, ids);
                }
            }
        }
        collect(&json, &mut ids);
        let unique: HashSet<i64> = ids.iter().copied().collect();
        assert_eq!(unique.len(), ids.len(), "IDs are unique: {ids:?}");
        assert!(
            ids.iter()
                .filter(|id| **id > 4)
                .all(|id| *id >= i64::from(DECOY_FLOOR))
        );
        // The rest of the mapping is as it was.
        assert_eq!(json[0], json!({"field-id": 1, "names": ["i"]}));
        assert_eq!(json[2]["fields"][0], json!({"field-id": 4, "names": ["x"]}));
    }
}
