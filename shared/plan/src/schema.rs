//! Delta schema -> Iceberg schema, keeping field IDs stable across schema changes, and the
//! name mapping that lets readers find columns in Parquet files written without field IDs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, ListType, Literal, MapType, MappedField, NameMapping, NestedField,
    NestedFieldRef, PrimitiveLiteral, PrimitiveType, Schema, StructType, Type,
};

use crate::name_mapping::DECOY_FLOOR;
use lakemirror_delta::defaults::{self, SparkLiteral};
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
    /// Every Delta column, with its Iceberg field ID (a [`V3Type`] as its `binary`
    /// placeholder).
    pub schema: Schema,
    /// Fields of `void` type: no data file holds them, every reader returns null.
    pub void_ids: HashSet<i32>,
    /// Columns the mirror cannot hold, by logical path (`s.l`, `m.value.x`), with their field
    /// IDs and why (see [`ConvertedSchema::mirrored`]).
    pub omitted: Vec<OmittedColumn>,
    /// The fields of Iceberg v3 types iceberg-rust 0.10 cannot express, by field ID: their
    /// type as the Iceberg spec writes it (`variant`, `geometry`, `geography(…)`).
    pub v3_types: BTreeMap<i32, String>,
    /// The fields of Delta's variant type, in either format version.
    pub variant_ids: HashSet<i32>,
    /// Columns of the mirror widened from a smaller integer to long (`delta.typeChanges`):
    /// files written before hold a narrower integer, which Spark's vectorized Parquet
    /// reader (Iceberg 1.10) cannot read as long (apache/iceberg#16341).
    pub widened_to_long: Vec<String>,
}

/// A column the mirror leaves out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OmittedColumn {
    /// Its logical path (`s.l`, `m.value.x`).
    pub path: String,
    pub id: i32,
    pub reason: OmitReason,
}

/// Why a column is left out of the mirror's schema: the rest of the table is mirrored
/// exactly, and the column comes back when the cause goes away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OmitReason {
    /// A list or map of a column-mapped table whose Parquet files carry no nested field IDs:
    /// Java Iceberg (Athena, EMR, Glue ETL, Spark) cannot read it. Kept on request
    /// ([`crate::snapshot::KEEP_UNREADABLE_PROPERTY`]).
    UnreadableByJava,
    /// A type Iceberg format version 2 does not have (variant, geometry, geography).
    NotInFormatVersion2 { delta_type: String },
    /// A widening Iceberg cannot express: files written before it hold the narrower type.
    Widened { from: String, to: String },
}

impl std::fmt::Display for OmitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OmitReason::UnreadableByJava => f.write_str(
                "a list or map without nested field IDs in a column-mapped table: Java Iceberg cannot read it (lakemirror.iceberg.keep-unreadable-columns=true keeps it for other readers)",
            ),
            OmitReason::NotInFormatVersion2 { delta_type } => write!(
                f,
                "Delta type {delta_type}: Iceberg format version 2 has no such type; a mirror in format version 3 holds it (--iceberg-format-version 3, or the table property lakemirror.iceberg.format-version=3 for a new mirror)"
            ),
            OmitReason::Widened { from, to } => write!(
                f,
                "widened from {from} to {to}, which Iceberg cannot express (it allows int to long, float to double, and decimal precision with the same scale): files written before hold the narrower type. It comes back when Delta no longer lists the change (delta.typeChanges), once those files are rewritten"
            ),
        }
    }
}

impl ConvertedSchema {
    /// The schema the mirror writes: every column but the omitted ones (a column Java cannot
    /// read is kept when `keep_unreadable`), and the columns left out.
    pub fn mirrored(&self, keep_unreadable: bool) -> Result<(Schema, Vec<OmittedColumn>), String> {
        let omitted: Vec<OmittedColumn> = self
            .omitted
            .iter()
            .filter(|c| !(keep_unreadable && c.reason == OmitReason::UnreadableByJava))
            .cloned()
            .collect();
        if omitted.is_empty() {
            return Ok((self.schema.clone(), omitted));
        }
        let ids: HashSet<i32> = omitted.iter().map(|c| c.id).collect();
        let kept = without(self.schema.as_struct().fields(), &ids);
        if kept.is_empty() {
            let columns: Vec<String> = omitted
                .iter()
                .map(|c| format!("{} ({})", c.path, c.reason))
                .collect();
            return Err(format!(
                "every column is one this mirror cannot hold: {}. An Iceberg table without a column is refused by DuckDB and read as no rows by pyiceberg, so nothing was written; a mirror in Iceberg format version 3 holds variant and geo columns (ICEBERG_FORMAT_VERSION=3, --iceberg-format-version 3, or the table property lakemirror.iceberg.format-version=3)",
                columns.join("; ")
            ));
        }
        let schema = Schema::builder()
            .with_schema_id(self.schema.schema_id())
            .with_fields(kept)
            .build()
            .map_err(|e| e.to_string())?;
        Ok((schema, omitted))
    }

    /// The logical paths of the omitted columns, in schema order.
    pub fn omitted_paths(&self) -> Vec<String> {
        self.omitted.iter().map(|c| c.path.clone()).collect()
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

/// Converts a Delta schema to an Iceberg schema with ID `schema_id`, for a mirror in
/// `format_version`.
///
/// `previous` is the table's current Iceberg schema (None for a new table), `mapping` its
/// name mapping, and `last_column_id` the table's highest assigned field ID.
pub fn iceberg_schema(
    fields: &[DeltaField],
    previous: Option<&Schema>,
    mapping: Option<&NameMapping>,
    last_column_id: i32,
    schema_id: i32,
    format_version: FormatVersion,
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
        v3: format_version >= FormatVersion::V3,
        void_ids: HashSet::new(),
        omitted: Vec::new(),
        v3_types: BTreeMap::new(),
        variant_ids: HashSet::new(),
        widened_to_long: Vec::new(),
    };
    let (fields, _, _) = walk.struct_fields(fields, "")?;
    let schema = Schema::builder()
        .with_schema_id(schema_id)
        .with_fields(fields)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(ConvertedSchema {
        schema,
        void_ids: walk.void_ids,
        omitted: walk.omitted,
        v3_types: walk.v3_types,
        variant_ids: walk.variant_ids,
        widened_to_long: walk.widened_to_long,
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

/// One pass over a Delta schema: IDs, types, defaults, and what the mirror cannot hold.
struct Walk<'a> {
    ids: IdAssigner<'a>,
    column_mapped: bool,
    /// Whether the mirror is in format version 3 (variant, geo and defaults exist there).
    v3: bool,
    void_ids: HashSet<i32>,
    omitted: Vec<OmittedColumn>,
    v3_types: BTreeMap<i32, String>,
    variant_ids: HashSet<i32>,
    widened_to_long: Vec<String>,
}

/// A Delta type as the walk made it.
struct Typed {
    field_type: Type,
    /// Whether Java finds a Parquet field ID inside it (see [`Walk::typed`]).
    holds_ids: bool,
    /// Why the whole field must be left out, when it must.
    omit: Option<OmitReason>,
}

impl Walk<'_> {
    /// The fields of a struct, whether any of them Java can read (a struct field carries a
    /// Parquet field ID, so a struct with a readable field holds an ID), and, when every field
    /// is left out, why the first one is.
    fn struct_fields(
        &mut self,
        fields: &[DeltaField],
        prefix: &str,
    ) -> Result<(Vec<NestedFieldRef>, bool, Option<OmitReason>), String> {
        let mut out = Vec::with_capacity(fields.len());
        let mut any_readable = false;
        let mut first_omitted = None;
        let mut all_omitted = !fields.is_empty();
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
            let omitted_before = self.omitted.len();
            let typed = self.typed(&f.data_type, id, &path, &nested)?;
            if f.data_type == DeltaType::Primitive("void".into()) {
                self.void_ids.insert(id);
            }
            let readable = match &f.data_type {
                DeltaType::Primitive(_) => true,
                DeltaType::Struct(children) => children.is_empty() || typed.holds_ids,
                DeltaType::Array { .. } | DeltaType::Map { .. } => typed.holds_ids,
            };
            let omit = typed
                .omit
                .or_else(|| unexpressible_widening(f, &path))
                .or_else(|| {
                    (!readable && self.column_mapped).then_some(OmitReason::UnreadableByJava)
                });
            if omit.is_none() && widened_to_long(f) {
                self.widened_to_long.push(path.clone());
            }
            match omit {
                Some(reason) => {
                    // The whole field goes, not its parts one by one.
                    self.omitted.truncate(omitted_before);
                    self.omitted.push(OmittedColumn {
                        path: path.clone(),
                        id,
                        reason: reason.clone(),
                    });
                    first_omitted.get_or_insert(reason);
                }
                None => {
                    all_omitted = false;
                    if readable || !self.column_mapped {
                        any_readable = true;
                    }
                }
            }
            // Every column is optional: Delta allows files written before a column existed,
            // and readers must return null for them rather than fail.
            let field = NestedField::optional(id, &f.name, typed.field_type);
            out.push(Arc::new(self.with_defaults(field, f, &path)));
        }
        Ok((
            out,
            any_readable,
            all_omitted.then_some(first_omitted).flatten(),
        ))
    }

    /// `field` with the Delta column's defaults as Iceberg's `initial-default` (from
    /// `EXISTS_DEFAULT`) and `write-default` (from `CURRENT_DEFAULT`): format version 3 only,
    /// literals of primitive columns only. Delta sets `EXISTS_DEFAULT` only on a column made
    /// with its default, which every data file of the table holds, so the initial default
    /// changes no row any reader returns.
    fn with_defaults(&self, field: NestedField, delta: &DeltaField, path: &str) -> NestedField {
        let (Type::Primitive(_), DeltaType::Primitive(delta_type)) =
            (field.field_type.as_ref(), &delta.data_type)
        else {
            return field;
        };
        if !self.v3 || self.v3_types.contains_key(&field.id) {
            return field;
        }
        let literal = |text: &Option<String>, kind: &str| {
            let literal = match defaults::parse(text.as_deref()?) {
                Some(SparkLiteral::Null) => return None,
                parsed => parsed.and_then(|default| default_literal(&default, delta_type)),
            };
            if literal.is_none() {
                tracing::warn!(
                    column = path,
                    default = kind,
                    "the Delta column default is not a literal the mirror can state for its type; the Iceberg column has none"
                );
            }
            literal
        };
        let mut field = field;
        if let Some(value) = literal(&delta.exists_default, "EXISTS_DEFAULT") {
            field = field.with_initial_default(value);
        }
        if let Some(value) = literal(&delta.current_default, "CURRENT_DEFAULT") {
            field = field.with_write_default(value);
        }
        field
    }

    /// The Iceberg type of `t` (the type of field `id`), whether Java finds a Parquet field ID
    /// inside it (Spark writes IDs for struct fields, and for list elements and map
    /// keys/values only with `delta.columnMapping.nested.ids`), and why the field must go.
    fn typed(
        &mut self,
        t: &DeltaType,
        id: i32,
        path: &str,
        nested: &NestedIds,
    ) -> Result<Typed, String> {
        Ok(match t {
            DeltaType::Primitive(name) => match V3Type::of_delta(name) {
                Some(v3) if self.v3 => {
                    if v3 == V3Type::Variant {
                        self.variant_ids.insert(id);
                    }
                    self.v3_types.insert(id, v3.iceberg_type());
                    Typed {
                        field_type: Type::Primitive(V3_PLACEHOLDER),
                        holds_ids: false,
                        omit: None,
                    }
                }
                Some(v2) => {
                    if v2 == V3Type::Variant {
                        self.variant_ids.insert(id);
                    }
                    Typed {
                        field_type: Type::Primitive(V3_PLACEHOLDER),
                        holds_ids: false,
                        omit: Some(OmitReason::NotInFormatVersion2 {
                            delta_type: name.clone(),
                        }),
                    }
                }
                None => Typed {
                    field_type: Type::Primitive(primitive(name, path)?),
                    holds_ids: false,
                    omit: None,
                },
            },
            DeltaType::Struct(fields) => {
                let (fields, any, omit) = self.struct_fields(fields, &format!("{path}."))?;
                Typed {
                    field_type: Type::Struct(StructType::new(fields)),
                    holds_ids: any,
                    omit,
                }
            }
            DeltaType::Array { element, .. } => {
                let (field, holds, omit) = self.child(element, id, "element", path, nested)?;
                Typed {
                    field_type: Type::List(ListType::new(field)),
                    holds_ids: holds,
                    omit,
                }
            }
            DeltaType::Map { key, value, .. } => {
                // Java keeps a map whose key has an ID or whose value holds one; a key's own
                // fields do not count (Iceberg's Parquet PruneColumns.map).
                let (key_field, _, key_omit) = self.child(key, id, "key", path, nested)?;
                let key_has_id = nested.ids.contains_key(&nested.child("key").path);
                let (value_field, value_holds, value_omit) =
                    self.child(value, id, "value", path, nested)?;
                Typed {
                    field_type: Type::Map(MapType::new(key_field, value_field)),
                    holds_ids: key_has_id || value_holds,
                    omit: key_omit.or(value_omit),
                }
            }
        })
    }

    /// A list element or map key/value: its field, whether it has or holds an ID, and why
    /// the column holding it must go.
    fn child(
        &mut self,
        t: &DeltaType,
        parent: i32,
        name: &str,
        path: &str,
        nested: &NestedIds,
    ) -> Result<(NestedFieldRef, bool, Option<OmitReason>), String> {
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
        let typed = self.typed(t, id, &child_path, &inner)?;
        let field = match name {
            "element" => NestedField::list_element(id, typed.field_type, false),
            "key" => NestedField::map_key_element(id, typed.field_type),
            _ => NestedField::map_value_element(id, typed.field_type, false),
        };
        Ok((
            Arc::new(field),
            own_id.is_some() || typed.holds_ids,
            typed.omit,
        ))
    }
}

/// Whether `field` (or an element inside it) was widened from a smaller integer to long.
fn widened_to_long(field: &DeltaField) -> bool {
    field
        .type_changes
        .iter()
        .any(|(from, to)| to == "long" && matches!(from.as_str(), "byte" | "short" | "integer"))
}

/// The first widening of `field` Iceberg cannot express, as the reason it is left out.
fn unexpressible_widening(field: &DeltaField, path: &str) -> Option<OmitReason> {
    field
        .type_changes
        .iter()
        .find(|(from, to)| !expressible_widening(from, to, path))
        .map(|(from, to)| OmitReason::Widened {
            from: from.clone(),
            to: to.clone(),
        })
}

/// Whether Iceberg can express Delta's widening of a column from `from` to `to`. A void
/// column has no data in any file: any type change of it is free.
fn expressible_widening(from: &str, to: &str, path: &str) -> bool {
    from == "void"
        || match (primitive(from, path), primitive(to, path)) {
            (Ok(a), Ok(b)) => promotes(&a, &b),
            _ => false,
        }
}

/// The placeholder iceberg-rust 0.10 holds a [`V3Type`] as: a leaf without children, IDs,
/// defaults or bounds, like the real type. The metadata file names the real one.
pub const V3_PLACEHOLDER: PrimitiveType = PrimitiveType::Binary;

/// An Iceberg format version 3 type Delta has and iceberg-rust 0.10 lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum V3Type {
    Variant,
    Geometry { crs: String },
    Geography { crs: String, algorithm: String },
}

/// The CRS both formats assume when a type names none.
pub const DEFAULT_CRS: &str = "OGC:CRS84";
/// The edge algorithm of a geography that names none.
pub const DEFAULT_ALGORITHM: &str = "spherical";
/// The edge algorithms of Delta's and Iceberg's geography type alike.
const EDGE_ALGORITHMS: [&str; 5] = ["spherical", "vincenty", "thomas", "andoyer", "karney"];

impl V3Type {
    /// The v3 type of a Delta type name: `variant`, `geometry`, `geometry(<crs>)`,
    /// `geography`, `geography(<crs>)`, `geography(<algorithm>)`,
    /// `geography(<crs>, <algorithm>)`; None for any other.
    pub fn of_delta(name: &str) -> Option<Self> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("variant") {
            return Some(V3Type::Variant);
        }
        let (kind, args) = match name.split_once('(') {
            Some((kind, rest)) => (kind.trim(), rest.strip_suffix(')')?.trim()),
            None => (name, ""),
        };
        let args: Vec<&str> = args
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let is_algorithm = |a: &str| EDGE_ALGORITHMS.contains(&a.to_ascii_lowercase().as_str());
        match (kind.to_ascii_lowercase().as_str(), args.as_slice()) {
            ("geometry", []) => Some(V3Type::Geometry {
                crs: DEFAULT_CRS.into(),
            }),
            ("geometry", [crs]) => Some(V3Type::Geometry {
                crs: (*crs).to_string(),
            }),
            ("geography", []) => Some(V3Type::Geography {
                crs: DEFAULT_CRS.into(),
                algorithm: DEFAULT_ALGORITHM.into(),
            }),
            ("geography", [one]) if is_algorithm(one) => Some(V3Type::Geography {
                crs: DEFAULT_CRS.into(),
                algorithm: one.to_ascii_lowercase(),
            }),
            ("geography", [crs]) => Some(V3Type::Geography {
                crs: (*crs).to_string(),
                algorithm: DEFAULT_ALGORITHM.into(),
            }),
            ("geography", [crs, algorithm]) if is_algorithm(algorithm) => Some(V3Type::Geography {
                crs: (*crs).to_string(),
                algorithm: algorithm.to_ascii_lowercase(),
            }),
            _ => None,
        }
    }

    /// The v3 type an Iceberg schema names (`variant`, `geometry(C)`, `geography(C, A)` and
    /// the bare forms: the grammar Delta's names share).
    pub fn of_iceberg(name: &str) -> Option<Self> {
        Self::of_delta(name)
    }

    /// The type as the Iceberg spec writes it in a schema. The default CRS and edge
    /// algorithm are written in the bare form (`geometry`, `geography`), which Java, DuckDB
    /// and pyiceberg 0.12 all read (pyiceberg refuses `geometry(OGC:CRS84)`).
    pub fn iceberg_type(&self) -> String {
        let default_crs = |crs: &str| crs.eq_ignore_ascii_case(DEFAULT_CRS);
        match self {
            V3Type::Variant => "variant".into(),
            V3Type::Geometry { crs } if default_crs(crs) => "geometry".into(),
            V3Type::Geometry { crs } => format!("geometry({crs})"),
            V3Type::Geography { crs, algorithm }
                if default_crs(crs) && algorithm == DEFAULT_ALGORITHM =>
            {
                "geography".into()
            }
            V3Type::Geography { crs, algorithm } => format!("geography({crs}, {algorithm})"),
        }
    }
}

/// A Delta column default, as [`defaults::parse`] reads it, as the Iceberg literal of the
/// column's type (`delta_type`, a Delta primitive type name); None when it is no value of
/// that type (`'16'` for an integer, `70000` for a short, `1.5` for a long). Timestamps are
/// not stated: no reader of a mirror has been judged on a timestamp default yet.
pub fn default_literal(default: &SparkLiteral, delta_type: &str) -> Option<Literal> {
    use SparkLiteral as S;
    let primitive = match (delta_type, default) {
        ("boolean", S::Boolean(b)) => PrimitiveLiteral::Boolean(*b),
        ("byte" | "short" | "integer", S::Number(n)) => {
            let value = n.integer()?;
            let fits = match delta_type {
                "byte" => i8::try_from(value).is_ok(),
                "short" => i16::try_from(value).is_ok(),
                _ => true,
            };
            PrimitiveLiteral::Int(i32::try_from(value).ok().filter(|_| fits)?)
        }
        ("long", S::Number(n)) => PrimitiveLiteral::Long(n.integer()?),
        ("float", S::Number(n)) => PrimitiveLiteral::Float(n.float()?.into()),
        ("double", S::Number(n)) => PrimitiveLiteral::Double(n.double()?.into()),
        ("string", S::String(s)) => PrimitiveLiteral::String(s.clone()),
        ("binary", S::Binary(bytes)) => PrimitiveLiteral::Binary(bytes.clone()),
        ("date", S::Date(date)) => {
            let days = date
                .signed_duration_since(chrono::NaiveDate::default())
                .num_days();
            PrimitiveLiteral::Int(i32::try_from(days).ok()?)
        }
        (decimal, S::Number(n)) => {
            let (precision, scale) = decimal_precision_scale(decimal)?;
            let unscaled = n.decimal(scale)?;
            let fits = 10u128
                .checked_pow(precision)
                .is_some_and(|limit| unscaled.unsigned_abs() < limit);
            PrimitiveLiteral::Int128(fits.then_some(unscaled)?)
        }
        _ => return None,
    };
    Some(Literal::Primitive(primitive))
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
        DeltaType::Primitive(name) if V3Type::of_delta(name).is_some() => {
            Type::Primitive(V3_PLACEHOLDER)
        }
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

    /// The schema of a format version 2 mirror.
    fn convert(
        fields: &[DeltaField],
        previous: Option<&Schema>,
        mapping: Option<&NameMapping>,
        last_column_id: i32,
        schema_id: i32,
    ) -> Result<ConvertedSchema, String> {
        iceberg_schema(
            fields,
            previous,
            mapping,
            last_column_id,
            schema_id,
            FormatVersion::V2,
        )
    }

    fn delta(fields: &str) -> Vec<DeltaField> {
        parse_schema(&format!(r#"{{"type":"struct","fields":[{fields}]}}"#)).unwrap()
    }

    const BASE: &str = r#"{"name":"id","type":"long","nullable":true,"metadata":{}},
        {"name":"m","type":{"type":"map","keyType":"string","valueType":"integer","valueContainsNull":true},"nullable":true,"metadata":{}}"#;

    #[test]
    fn a_widening_iceberg_cannot_express_leaves_that_column_out_by_name() {
        let widened = |from: &str, to: &str| {
            delta(&format!(
                r#"{{"name":"id","type":"long","nullable":true,"metadata":{{}}}},
                   {{"name":"c","type":"{to}","nullable":true,"metadata":{{"delta.typeChanges":[{{"fromType":"{from}","toType":"{to}","tableVersion":2}}]}}}}"#
            ))
        };
        for (from, to) in [
            ("byte", "long"),
            ("integer", "long"),
            ("short", "integer"),
            ("float", "double"),
            ("decimal(10,2)", "decimal(20,2)"),
            ("void", "double"),
        ] {
            let converted = convert(&widened(from, to), None, None, 0, 0).unwrap();
            assert!(converted.omitted.is_empty(), "{from} -> {to}");
        }
        for (from, to) in [
            ("byte", "double"),
            ("integer", "double"),
            ("decimal(10,2)", "decimal(20,5)"),
            ("long", "decimal(21,1)"),
            ("date", "timestamp_ntz"),
        ] {
            let converted = convert(&widened(from, to), None, None, 0, 0).unwrap();
            assert_eq!(converted.omitted_paths(), ["c"], "{from} -> {to}");
            let reason = converted.omitted[0].reason.to_string();
            assert!(reason.contains(from) && reason.contains(to), "{reason}");
            let (schema, _) = converted.mirrored(false).unwrap();
            assert!(schema.field_by_name("c").is_none());
            assert!(schema.field_by_name("id").is_some(), "the rest is mirrored");
        }
        // a widened column keeps its ID
        let old = convert(
            &delta(r#"{"name":"c","type":"integer","nullable":true,"metadata":{}}"#),
            None,
            None,
            0,
            0,
        )
        .unwrap()
        .schema;
        let new = convert(
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
        let s = convert(&fields, None, None, 0, 0).unwrap().schema;
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
        let s = convert(&fields, None, None, 0, 0).unwrap().schema;
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
        let s2 = convert(&later, Some(&s), None, s.highest_field_id(), 1)
            .unwrap()
            .schema;
        assert_eq!(s2.field_id_by_name("n"), Some(10));
        assert_eq!(s2.field_id_by_name("l.element"), Some(ASSIGNED_ID_BASE + 1));
    }

    #[test]
    fn new_table_gets_sequential_ids_and_all_types_map() {
        let s = convert(&delta(BASE), None, None, 0, 0).unwrap().schema;
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
        let first = convert(&delta(BASE), None, None, 0, 0).unwrap().schema;
        let grown =
            format!(r#"{{"name":"x","type":"string","nullable":true,"metadata":{{}}}}, {BASE}"#);
        let second = convert(&delta(&grown), Some(&first), None, 4, 1)
            .unwrap()
            .schema;
        assert_eq!(second.field_id_by_name("id"), Some(1));
        assert_eq!(second.field_id_by_name("m.value"), Some(4));
        assert_eq!(second.field_id_by_name("x"), Some(5));
        assert_eq!(second.schema_id(), 1);
    }

    #[test]
    fn a_column_whose_type_changed_never_reuses_the_id() {
        let first = convert(&delta(BASE), None, None, 0, 0).unwrap().schema;
        let changed = r#"{"name":"id","type":"string","nullable":true,"metadata":{}}"#;
        let second = convert(&delta(changed), Some(&first), None, 4, 1)
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
        let converted = convert(&fields, None, None, 0, 0).unwrap();
        assert_eq!(
            converted.omitted_paths(),
            vec!["ints", "counts", "s.l", "only_lists", "deep"],
            "deep: its element struct keeps no readable field, so the list holds no ID"
        );
        assert_eq!(converted.void_ids, HashSet::from([15]));
        let readable = converted.mirrored(false).unwrap().0;
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
        let converted = convert(&with_ids, None, None, 0, 0).unwrap();
        assert!(converted.omitted.is_empty());
        // Without column mapping files carry no IDs at all and readers use the name mapping.
        let plain = convert(&delta(BASE), None, None, 0, 0).unwrap();
        assert!(plain.omitted.is_empty());
    }

    #[test]
    fn a_left_out_list_keeps_its_element_id_from_the_name_mapping() {
        let fields = delta(&format!(
            "{},{}",
            cm(1, "id", r#""long""#),
            cm(
                2,
                "ints",
                r#"{"type":"array","elementType":"integer","containsNull":true}"#,
            )
        ));
        let first = convert(&fields, None, None, 0, 0).unwrap();
        let element = first.schema.field_id_by_name("ints.element").unwrap();
        let table = first.mirrored(false).unwrap().0;
        let mapping = crate::name_mapping::name_mapping(
            None,
            &first.schema,
            &physical_names(&fields),
            &HashSet::new(),
        );
        let again = convert(&fields, Some(&table), Some(&mapping), element, 1).unwrap();
        assert_eq!(again.schema.field_id_by_name("ints.element"), Some(element));
    }

    #[test]
    fn a_mirror_without_a_column_is_refused_naming_format_version_3() {
        let fields = delta(r#"{"name":"v","type":"variant","nullable":true,"metadata":{}}"#);
        let converted = convert(&fields, None, None, 0, 0).unwrap();
        let err = converted.mirrored(false).unwrap_err();
        assert!(
            err.contains("every column is one this mirror cannot hold: v (Delta type variant"),
            "{err}"
        );
        assert!(err.contains("--iceberg-format-version 3"), "{err}");
    }

    #[test]
    fn a_column_widened_from_a_smaller_integer_to_long_is_named_for_sparks_reader() {
        let fields = delta(
            r#"{"name":"b","type":"long","nullable":true,"metadata":{"delta.typeChanges":[{"fromType":"byte","toType":"long"}]}},
               {"name":"f","type":"double","nullable":true,"metadata":{"delta.typeChanges":[{"fromType":"float","toType":"double"}]}},
               {"name":"i","type":"long","nullable":true,"metadata":{}}"#,
        );
        let converted = convert(&fields, None, None, 0, 0).unwrap();
        assert_eq!(converted.widened_to_long, ["b"]);
    }

    const VARIANTS: &str = r#"{"name":"id","type":"long","nullable":true,"metadata":{}},
        {"name":"v","type":"variant","nullable":true,"metadata":{}},
        {"name":"vs","type":{"type":"array","elementType":"variant","containsNull":true},"nullable":true,"metadata":{}},
        {"name":"s","type":{"type":"struct","fields":[{"name":"x","type":"variant","nullable":true,"metadata":{}},{"name":"y","type":"integer","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
        {"name":"only","type":{"type":"struct","fields":[{"name":"x","type":"variant","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
        {"name":"geom","type":"geometry(OGC:CRS84)","nullable":true,"metadata":{}},
        {"name":"geog","type":"geography(EPSG:4326, karney)","nullable":true,"metadata":{}}"#;

    #[test]
    fn a_v2_mirror_leaves_out_each_variant_and_geo_column_and_keeps_the_rest() {
        let converted = convert(&delta(VARIANTS), None, None, 0, 0).unwrap();
        assert_eq!(
            converted.omitted_paths(),
            ["v", "vs", "s.x", "only", "geom", "geog"],
            "a struct keeps its other fields; one left with none goes whole"
        );
        for column in &converted.omitted {
            let reason = column.reason.to_string();
            assert!(reason.contains("format version 3"), "{reason}");
        }
        let (schema, _) = converted.mirrored(false).unwrap();
        assert!(schema.field_by_name("id").is_some());
        assert!(schema.field_by_name("s.y").is_some());
        assert!(schema.field_by_name("s.x").is_none());
        assert!(schema.field_by_name("only").is_none());
        assert!(converted.v3_types.is_empty());
    }

    #[test]
    fn a_v3_mirror_holds_variant_and_geo_columns_with_their_real_types() {
        let converted =
            iceberg_schema(&delta(VARIANTS), None, None, 0, 0, FormatVersion::V3).unwrap();
        assert!(converted.omitted.is_empty());
        let id = |path: &str| converted.schema.field_id_by_name(path).unwrap();
        let types: Vec<(&str, &str)> = ["v", "vs.element", "s.x", "only.x", "geom", "geog"]
            .into_iter()
            .map(|path| (path, converted.v3_types[&id(path)].as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("v", "variant"),
                ("vs.element", "variant"),
                ("s.x", "variant"),
                ("only.x", "variant"),
                ("geom", "geometry"),
                ("geog", "geography(EPSG:4326, karney)"),
            ]
        );
    }

    #[test]
    fn delta_geo_types_read_with_their_defaults() {
        for (delta, iceberg) in [
            ("geometry", "geometry"),
            ("geometry(OGC:CRS84)", "geometry"),
            ("geometry(EPSG:3857)", "geometry(EPSG:3857)"),
            ("geography", "geography"),
            ("geography(OGC:CRS84, spherical)", "geography"),
            ("geography(karney)", "geography(OGC:CRS84, karney)"),
            ("geography(EPSG:4326)", "geography(EPSG:4326, spherical)"),
            ("variant", "variant"),
        ] {
            assert_eq!(
                V3Type::of_delta(delta).unwrap().iceberg_type(),
                iceberg,
                "{delta}"
            );
        }
        for other in [
            "geometry(a, b)",
            "geography(a, nowhere)",
            "geometryx",
            "string",
        ] {
            assert_eq!(V3Type::of_delta(other), None, "{other}");
        }
    }

    #[test]
    fn column_defaults_become_iceberg_defaults_in_v3_only() {
        let fields = delta(
            r#"{"name":"a","type":"integer","nullable":true,"metadata":{}},
               {"name":"b","type":"integer","nullable":true,"metadata":{"EXISTS_DEFAULT":"16","CURRENT_DEFAULT":"16"}},
               {"name":"c","type":"string","nullable":true,"metadata":{"CURRENT_DEFAULT":"'it\\'s'"}},
               {"name":"d","type":"date","nullable":true,"metadata":{"CURRENT_DEFAULT":"current_date()"}}"#,
        );
        let v3 = iceberg_schema(&fields, None, None, 0, 0, FormatVersion::V3).unwrap();
        let field = |name: &str| v3.schema.field_by_name(name).unwrap().clone();
        let int16 = Some(Literal::Primitive(PrimitiveLiteral::Int(16)));
        assert_eq!(field("b").initial_default, int16);
        assert_eq!(field("b").write_default, int16);
        assert_eq!(
            field("c").write_default,
            Some(Literal::Primitive(PrimitiveLiteral::String("it's".into())))
        );
        assert_eq!(field("c").initial_default, None);
        assert_eq!(
            field("d").write_default,
            None,
            "an expression is no literal"
        );
        let v2 = convert(&fields, None, None, 0, 0).unwrap();
        assert_eq!(v2.schema.field_by_name("b").unwrap().write_default, None);
    }

    #[test]
    fn spark_sql_literals_read_as_their_type() {
        let lit = |text: &str, delta_type: &str| {
            defaults::parse(text).and_then(|d| default_literal(&d, delta_type))
        };
        let p = |p: PrimitiveLiteral| Some(Literal::Primitive(p));
        assert_eq!(lit("7L", "long"), p(PrimitiveLiteral::Long(7)));
        assert_eq!(lit("TRUE", "boolean"), p(PrimitiveLiteral::Boolean(true)));
        assert_eq!(
            lit("DATE '1970-01-02'", "date"),
            p(PrimitiveLiteral::Int(1))
        );
        assert_eq!(
            lit("12.50BD", "decimal(5,2)"),
            p(PrimitiveLiteral::Int128(1250))
        );
        assert_eq!(lit("1234.5", "decimal(5,2)"), None, "past its precision");
        assert_eq!(
            lit("X'0aFF'", "binary"),
            p(PrimitiveLiteral::Binary(vec![10, 255]))
        );
        assert_eq!(
            lit(r#""a\"b""#, "string"),
            p(PrimitiveLiteral::String("a\"b".into()))
        );
        assert_eq!(lit("'a", "string"), None);
        assert_eq!(lit("1.5", "integer"), None);
        assert_eq!(lit("NaN", "double"), None);
        assert_eq!(lit("200", "byte"), None);
        assert_eq!(
            lit("TIMESTAMP_NTZ '2020-01-01 10:00:00'", "timestamp_ntz"),
            None
        );
    }
}
