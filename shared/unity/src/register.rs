//! Registration of a Delta table in Unity Catalog as an EXTERNAL DELTA table.
//!
//! The decision is pure ([`decide`]): no entry -> create; an entry over the same storage
//! location whose columns and properties match -> nothing; one whose columns or properties
//! differ -> delete and re-create. The OSS API has no way to update a table's columns, and
//! deleting an EXTERNAL table removes only its catalog entry, never the data; the
//! re-created entry keeps the properties and comment the old one had. An entry of that name
//! over another location, or a MANAGED / non-Delta one, is never touched.
//!
//! Races (two deliveries of the same commit, two commits in quick succession) end in a 409
//! on create; the registration then reads the entry again and decides again, a bounded
//! number of times.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use lakemirror_delta::{DeltaLog, Metadata, catalog_managed};
use lakemirror_plan::target::default_table_name;
use lakemirror_runtime::crash;
use lakemirror_storage::{IoCounters, IoTotals, ObjectStores, canonical_uri};

use crate::client::{CreateOutcome, CreateTable, TableInfo, UnityCatalog};
use crate::columns::columns;
use crate::error::{Error, Result, Setting};

/// Delta table property: `false` keeps the table out of Unity Catalog.
pub const ENABLED_PROPERTY: &str = "lakemirror.unity.enabled";
/// Delta table property naming the catalog of the entry.
pub const CATALOG_PROPERTY: &str = "lakemirror.unity.catalog";
/// Delta table property naming the schema of the entry.
pub const SCHEMA_PROPERTY: &str = "lakemirror.unity.schema";
/// Delta table property naming the table of the entry.
pub const TABLE_PROPERTY: &str = "lakemirror.unity.table";

/// How many times a registration re-reads the entry after losing a race.
const MAX_ATTEMPTS: u32 = 4;

/// What to register, and where by default.
#[derive(Debug, Clone, Default)]
pub struct UnityRegisterRequest {
    /// The Delta table root (`s3://bucket/prefix` or a local path).
    pub table_uri: String,
    /// `UC_CATALOG` / `--uc-catalog`: the catalog unless the table names one.
    pub catalog: Option<String>,
    /// `UC_SCHEMA` / `--uc-schema`: the schema unless the table names one.
    pub schema: Option<String>,
    /// `--table`: the table name; when given, the `lakemirror.unity.*` properties are not
    /// consulted. Default: the table property, else the folder name.
    pub table: Option<String>,
    /// `ALLOWED_UC_CATALOGS`: the catalogs a Delta table's own `lakemirror.unity.catalog`,
    /// `.schema` and `.table` properties may choose (a regex over the whole name). None:
    /// those properties are ignored, so whoever writes a table cannot claim an entry.
    pub allowed_catalogs: Option<regex::Regex>,
}

/// What a registration did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UnityReport {
    pub table_uri: String,
    /// `catalog.schema.table`; None when the table opted out.
    pub full_name: Option<String>,
    /// `created`, `recreated`, `up_to_date`, `opted_out`, or `catalog_managed` (the table is
    /// the catalog's own: see `reason`).
    pub action: &'static str,
    /// Why nothing was registered, when that is not the table's own choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub delta_version: i64,
    pub columns: usize,
    pub elapsed_ms: u64,
    /// Storage requests and bytes read for it.
    pub io: IoTotals,
}

/// The catalog, schema and table of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnityName {
    pub catalog: String,
    pub schema: String,
    pub table: String,
}

impl std::fmt::Display for UnityName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.catalog, self.schema, self.table)
    }
}

/// The entry's name, or None when the table opted out with `lakemirror.unity.enabled=false`.
pub fn resolve_name(
    request: &UnityRegisterRequest,
    configuration: &HashMap<String, Option<String>>,
    folder: &str,
) -> Result<Option<UnityName>> {
    let property = |key: &str| {
        configuration
            .get(key)
            .cloned()
            .flatten()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    if let Some(enabled) = property(ENABLED_PROPERTY) {
        match enabled.to_ascii_lowercase().as_str() {
            "false" => return Ok(None),
            "true" => {}
            other => {
                return Err(Error::Entry(format!(
                    "Delta table property {ENABLED_PROPERTY}={other:?} must be true or false; fix it with ALTER TABLE … SET TBLPROPERTIES"
                )));
            }
        }
    }
    // The names a table's properties choose count only inside the catalogs the deployment
    // allows them.
    let asked = [CATALOG_PROPERTY, SCHEMA_PROPERTY, TABLE_PROPERTY]
        .iter()
        .any(|key| property(key).is_some());
    let catalog_asked = property(CATALOG_PROPERTY).or_else(|| request.catalog.clone());
    let allowed = match (&request.allowed_catalogs, &catalog_asked) {
        (Some(allowed), Some(catalog)) => {
            request.catalog.as_deref() == Some(catalog.as_str())
                || allowed.is_match(&catalog.to_lowercase())
        }
        _ => false,
    };
    if asked && request.table.is_none() && !allowed {
        tracing::warn!(
            table = %request.table_uri,
            "the Delta table's lakemirror.unity.catalog/schema/table properties are ignored: this deployment does not let tables choose {} (ALLOWED_UC_CATALOGS)",
            catalog_asked.as_deref().unwrap_or("a catalog")
        );
    }
    let explicit = request.table.is_some() || !allowed;
    let pick = |key: &str, default: Option<&str>, setting: Setting| -> Result<String> {
        let what = match setting {
            Setting::Catalog => "catalog",
            Setting::Schema => "schema",
            _ => "table",
        };
        let from_property = if explicit { None } else { property(key) };
        let value = from_property.as_deref().or(default).ok_or_else(|| {
            Error::Entry(format!(
                "no Unity Catalog {what} for {}: set UC_{} or the Delta table property {key}",
                request.table_uri,
                what.to_ascii_uppercase()
            ))
            .fixed_by(setting)
        })?;
        unity_name(value).ok_or_else(|| {
            Error::Entry(format!(
                "{value:?} (the {what}, from {key} or the request) is not a Unity Catalog name: it must be non-empty and hold no '.', '/', spaces or control characters"
            ))
            .fixed_by(setting)
        })
    };
    Ok(Some(UnityName {
        catalog: pick(
            CATALOG_PROPERTY,
            request.catalog.as_deref(),
            Setting::Catalog,
        )?,
        schema: pick(SCHEMA_PROPERTY, request.schema.as_deref(), Setting::Schema)?,
        table: pick(
            TABLE_PROPERTY,
            Some(
                &request
                    .table
                    .clone()
                    .unwrap_or_else(|| default_table_name(folder)),
            ),
            Setting::Table,
        )?,
    }))
}

/// A name as Unity Catalog stores it (lower case), or None when it cannot be one part of a
/// three-part name.
fn unity_name(value: &str) -> Option<String> {
    let name = value.trim().to_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 255
        && !name
            .chars()
            .any(|c| c == '.' || c == '/' || c.is_whitespace() || c.is_control());
    valid.then_some(name)
}

/// The entry a Delta table should have.
pub fn desired_entry(
    name: &UnityName,
    table_root: &str,
    metadata: &Metadata,
) -> Result<CreateTable> {
    let properties = metadata
        .configuration
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
        .collect();
    Ok(CreateTable {
        name: name.table.clone(),
        catalog_name: name.catalog.clone(),
        schema_name: name.schema.clone(),
        table_type: "EXTERNAL".into(),
        data_source_format: "DELTA".into(),
        columns: columns(&metadata.schema_string, &metadata.partition_columns)?,
        storage_location: table_root.to_string(),
        comment: None,
        properties,
    })
}

/// What to do about an entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Create(CreateTable),
    UpToDate,
    /// Delete the entry and create this one (the old entry's properties and comment kept).
    Recreate(CreateTable),
}

/// Compares the entry Unity Catalog has with the one the Delta table needs.
pub fn decide(existing: Option<&TableInfo>, desired: &CreateTable) -> Result<Decision> {
    let Some(existing) = existing else {
        return Ok(Decision::Create(desired.clone()));
    };
    let full_name = desired.full_name();
    let location = existing.storage_location.as_deref().unwrap_or_default();
    if canonical_uri(location) != canonical_uri(&desired.storage_location) {
        return Err(Error::CatalogState(format!(
            "Unity Catalog table {full_name} exists over {location:?}, not over {}; nothing was changed. Choose another name (the Delta table property {TABLE_PROPERTY}) or drop that entry",
            desired.storage_location
        ))
        .fixed_by(Setting::Table));
    }
    let kind = (
        existing.table_type.as_deref().unwrap_or("EXTERNAL"),
        existing.data_source_format.as_deref().unwrap_or("DELTA"),
    );
    if !kind.0.eq_ignore_ascii_case("EXTERNAL") || !kind.1.eq_ignore_ascii_case("DELTA") {
        return Err(Error::CatalogState(format!(
            "Unity Catalog table {full_name} is a {} {} table, not an EXTERNAL DELTA one; lakemirror leaves it alone. Drop it or choose another name",
            kind.0, kind.1
        )));
    }
    let columns_match = existing.columns.len() == desired.columns.len()
        && existing.columns.iter().zip(&desired.columns).all(|(a, b)| {
            a.name.eq_ignore_ascii_case(&b.name)
                && a.type_text.eq_ignore_ascii_case(&b.type_text)
                && a.nullable == b.nullable
                && a.partition_index == b.partition_index
        });
    let properties_match = desired
        .properties
        .iter()
        .all(|(k, v)| existing.properties.get(k) == Some(v));
    if columns_match && properties_match {
        return Ok(Decision::UpToDate);
    }
    let mut replacement = desired.clone();
    let mut properties = existing.properties.clone();
    properties.extend(desired.properties.clone());
    replacement.properties = properties;
    replacement.comment = existing.comment.clone();
    Ok(Decision::Recreate(replacement))
}

/// Registers (or brings in line) the Unity Catalog entry of one Delta table.
pub async fn unity_register(
    stores: &ObjectStores,
    uc: &UnityCatalog,
    request: &UnityRegisterRequest,
) -> Result<UnityReport> {
    let started = Instant::now();
    let counters = Arc::new(IoCounters::default());
    let store = stores.open(&request.table_uri, counters.clone())?;
    let root = store.root_uri().to_string();
    let log = DeltaLog::new(store);
    // The schema and properties only: the files, which grow with the table, stay unread.
    let definition = log.definition().await?;
    let metadata = &definition.metadata;
    let folder = root.rsplit('/').next().unwrap_or_default();
    let report = |full_name: Option<String>, action, columns| UnityReport {
        table_uri: root.clone(),
        full_name,
        action,
        reason: None,
        delta_version: definition.version,
        columns,
        elapsed_ms: started.elapsed().as_millis() as u64,
        io: counters.totals(),
    };
    // A catalog-managed table is a managed table of its catalog already: a second entry,
    // EXTERNAL over the same files, would stand beside the catalog's own.
    if catalog_managed::is_catalog_managed(&definition.protocol) {
        let id = catalog_managed::catalog_table_id(metadata).unwrap_or("none");
        let reason = format!(
            "the table is catalog-managed (catalog table id {id}): it is its catalog's own managed table, and registering it again as an EXTERNAL table would make a second entry; nothing was registered"
        );
        tracing::info!(table = %root, "{reason}");
        return Ok(UnityReport {
            reason: Some(reason),
            ..report(None, "catalog_managed", 0)
        });
    }
    let Some(name) = resolve_name(request, &metadata.configuration, folder)? else {
        tracing::info!(table = %root, "{ENABLED_PROPERTY}=false: not registered");
        return Ok(report(None, "opted_out", 0));
    };
    let desired = desired_entry(&name, &root, metadata)?;
    let full_name = name.to_string();
    let column_count = desired.columns.len();
    for attempt in 1..=MAX_ATTEMPTS {
        let existing = uc.get_table(&full_name).await?;
        let action = match decide(existing.as_ref(), &desired)? {
            Decision::UpToDate => return Ok(report(Some(full_name), "up_to_date", column_count)),
            Decision::Create(entry) => {
                let schema = format!("{}.{}", name.catalog, name.schema);
                if uc.get_schema(&schema).await?.is_none() {
                    let (missing, setting) = match uc.get_catalog(&name.catalog).await? {
                        None => (format!("catalog {}", name.catalog), Setting::Catalog),
                        Some(_) => (format!("schema {schema}"), Setting::Schema),
                    };
                    return Err(Error::Unity {
                        message: format!(
                            "cannot register {full_name}: Unity Catalog at {} has no {missing}; create it or choose others (UC_CATALOG / UC_SCHEMA or the Delta table properties {CATALOG_PROPERTY} / {SCHEMA_PROPERTY})",
                            uc.url()
                        ),
                        retryable: false,
                    }
                    .fixed_by(setting));
                }
                if !create(uc, &entry).await? {
                    tracing::info!(table = %full_name, attempt, "created by someone else meanwhile; reading it again");
                    continue;
                }
                "created"
            }
            Decision::Recreate(entry) => {
                tracing::info!(table = %full_name, "the Delta schema or properties changed: re-creating the Unity Catalog entry");
                uc.delete_table(&full_name).await?;
                crash::point("unity-after-delete");
                if !create(uc, &entry).await? {
                    continue;
                }
                "recreated"
            }
        };
        tracing::info!(table = %full_name, location = %root, delta_version = definition.version, action, "registered in Unity Catalog");
        return Ok(report(Some(full_name), action, column_count));
    }
    Err(Error::Unity {
        message: format!(
            "Unity Catalog table {full_name} kept changing while lakemirror registered it ({MAX_ATTEMPTS} attempts); another process registers it too. Re-run to retry"
        ),
        retryable: true,
    })
}

/// Creates the entry; false when it exists already (409).
async fn create(uc: &UnityCatalog, entry: &CreateTable) -> Result<bool> {
    match uc.create_table(entry).await? {
        CreateOutcome::Created => Ok(true),
        CreateOutcome::AlreadyExists => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ColumnInfo;

    fn config(pairs: &[(&str, &str)]) -> HashMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.to_string())))
            .collect()
    }

    fn request(
        catalog: Option<&str>,
        schema: Option<&str>,
        table: Option<&str>,
    ) -> UnityRegisterRequest {
        UnityRegisterRequest {
            table_uri: "s3://lake/gold/orders".into(),
            catalog: catalog.map(str::to_string),
            schema: schema.map(str::to_string),
            table: table.map(str::to_string),
            allowed_catalogs: lakemirror_plan::target::allowed_names(Some("sales|main"), "test")
                .unwrap(),
        }
    }

    fn name(c: &str, s: &str, t: &str) -> UnityName {
        UnityName {
            catalog: c.into(),
            schema: s.into(),
            table: t.into(),
        }
    }

    #[test]
    fn defaults_then_properties_then_an_explicit_table_name() {
        let r = request(Some("main"), Some("gold"), None);
        assert_eq!(
            resolve_name(&r, &config(&[]), "Orders").unwrap(),
            Some(name("main", "gold", "orders"))
        );
        assert_eq!(
            resolve_name(&r, &config(&[]), "daily-Orders 2").unwrap(),
            Some(name("main", "gold", "daily_orders_2"))
        );
        let props = config(&[
            (CATALOG_PROPERTY, "Sales"),
            (SCHEMA_PROPERTY, "eu"),
            (TABLE_PROPERTY, "orders_v2"),
        ]);
        assert_eq!(
            resolve_name(&r, &props, "orders").unwrap(),
            Some(name("sales", "eu", "orders_v2"))
        );
        let explicit = request(Some("main"), Some("gold"), Some("mine"));
        assert_eq!(
            resolve_name(&explicit, &props, "orders").unwrap(),
            Some(name("main", "gold", "mine"))
        );
    }

    #[test]
    fn a_table_names_its_entry_only_inside_the_catalogs_the_deployment_allows() {
        let props = config(&[(CATALOG_PROPERTY, "finance"), (TABLE_PROPERTY, "payroll")]);
        let r = request(Some("main"), Some("gold"), None);
        assert_eq!(
            resolve_name(&r, &props, "orders").unwrap(),
            Some(name("main", "gold", "orders")),
            "finance is not allowed: the properties are ignored"
        );
        let none_allowed = UnityRegisterRequest {
            allowed_catalogs: None,
            ..r
        };
        let own = config(&[(TABLE_PROPERTY, "payroll")]);
        assert_eq!(
            resolve_name(&none_allowed, &own, "orders").unwrap(),
            Some(name("main", "gold", "orders"))
        );
    }

    #[test]
    fn a_table_can_opt_out_and_bad_values_are_named() {
        let r = request(Some("main"), Some("gold"), None);
        assert_eq!(
            resolve_name(&r, &config(&[(ENABLED_PROPERTY, "FALSE")]), "t").unwrap(),
            None
        );
        let err = resolve_name(&r, &config(&[(ENABLED_PROPERTY, "no")]), "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains(ENABLED_PROPERTY), "{err}");
        let err = resolve_name(&r, &config(&[(TABLE_PROPERTY, "a.b")]), "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("a.b"), "{err}");
        let err = resolve_name(&request(None, Some("gold"), None), &config(&[]), "t").unwrap_err();
        assert_eq!(err.setting(), Some(Setting::Catalog), "{err}");
        assert!(err.to_string().contains("UC_CATALOG"), "{err}");
    }

    fn metadata(schema: &str) -> Metadata {
        Metadata {
            id: None,
            schema_string: schema.into(),
            partition_columns: vec!["day".into()],
            configuration: config(&[("delta.appendOnly", "false")]),
        }
    }

    const SCHEMA: &str = r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"day","type":"date","nullable":true,"metadata":{}}]}"#;
    const WIDER: &str = r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"day","type":"date","nullable":true,"metadata":{}},{"name":"note","type":"string","nullable":true,"metadata":{}}]}"#;

    fn as_stored(entry: &CreateTable) -> TableInfo {
        TableInfo {
            name: entry.name.clone(),
            catalog_name: entry.catalog_name.clone(),
            schema_name: entry.schema_name.clone(),
            table_type: Some("EXTERNAL".into()),
            data_source_format: Some("DELTA".into()),
            columns: entry
                .columns
                .iter()
                .map(|c| ColumnInfo {
                    type_text: c.type_text.to_uppercase(),
                    ..c.clone()
                })
                .collect(),
            storage_location: Some(format!("{}/", entry.storage_location)),
            comment: Some("owned by sales".into()),
            properties: {
                let mut p = entry.properties.clone();
                p.insert("owner_note".into(), "keep me".into());
                p
            },
            table_id: Some("id-1".into()),
        }
    }

    #[test]
    fn create_then_nothing_then_recreate_keeping_properties() {
        let n = name("main", "gold", "orders");
        let desired = desired_entry(&n, "s3://lake/gold/orders", &metadata(SCHEMA)).unwrap();
        assert_eq!(desired.table_type, "EXTERNAL");
        assert_eq!(desired.data_source_format, "DELTA");
        assert_eq!(desired.columns[1].partition_index, Some(0));
        assert!(matches!(
            decide(None, &desired).unwrap(),
            Decision::Create(_)
        ));
        let stored = as_stored(&desired);
        assert_eq!(decide(Some(&stored), &desired).unwrap(), Decision::UpToDate);

        let wider = desired_entry(&n, "s3://lake/gold/orders", &metadata(WIDER)).unwrap();
        let Decision::Recreate(entry) = decide(Some(&stored), &wider).unwrap() else {
            panic!("an added column re-creates the entry");
        };
        assert_eq!(entry.columns.len(), 3);
        assert_eq!(entry.properties["owner_note"], "keep me");
        assert_eq!(entry.properties["delta.appendOnly"], "false");
        assert_eq!(entry.comment.as_deref(), Some("owned by sales"));

        let mut changed = metadata(SCHEMA);
        changed
            .configuration
            .insert("delta.appendOnly".into(), Some("true".into()));
        let changed = desired_entry(&n, "s3://lake/gold/orders", &changed).unwrap();
        assert!(matches!(
            decide(Some(&stored), &changed).unwrap(),
            Decision::Recreate(_)
        ));
    }

    #[test]
    fn entries_over_other_locations_or_of_other_kinds_are_left_alone() {
        let n = name("main", "gold", "orders");
        let desired = desired_entry(&n, "s3://lake/gold/orders", &metadata(SCHEMA)).unwrap();
        let mut elsewhere = as_stored(&desired);
        elsewhere.storage_location = Some("s3://other/orders".into());
        let err = decide(Some(&elsewhere), &desired).unwrap_err().to_string();
        assert!(
            err.contains("s3://other/orders") && err.contains("nothing was changed"),
            "{err}"
        );
        let mut managed = as_stored(&desired);
        managed.table_type = Some("MANAGED".into());
        assert!(decide(Some(&managed), &desired).is_err());
        let mut s3a = as_stored(&desired);
        s3a.storage_location = Some("s3a://lake/gold/orders".into());
        assert_eq!(decide(Some(&s3a), &desired).unwrap(), Decision::UpToDate);
    }
}
