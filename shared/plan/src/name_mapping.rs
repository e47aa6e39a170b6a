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
}
