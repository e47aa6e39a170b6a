//! Where a Delta table's mirror lives in Glue: the database and table name.
//!
//! The defaults (the configured database, the folder name) can be overridden by the Delta
//! table itself with the table properties `lakemirror.glue.database` and
//! `lakemirror.glue.table`, so a team can name its mirror without touching the deployment.
//! An explicit `--glue-table` wins over both.
//!
//! Reading table properties needs the Delta metadata, which usually sits in a checkpoint.
//! So that an incremental sync does not read the checkpoint, the two property values are
//! remembered beside the Iceberg metadata (`glue-target.json`), with the Delta version they
//! were read at; the target is resolved from them and the current defaults on every sync.
//! A commit that changes the properties moves the mirror.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use lakemirror_delta::Metadata;

/// Delta table property naming the Glue database of the mirror.
pub const DATABASE_PROPERTY: &str = "lakemirror.glue.database";
/// Delta table property naming the Glue table of the mirror.
pub const TABLE_PROPERTY: &str = "lakemirror.glue.table";
/// File beside the Iceberg metadata that remembers the resolved target.
pub const TARGET_FILE: &str = "glue-target.json";

/// A Glue database and table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CatalogTarget {
    pub database: String,
    pub table: String,
}

/// How to name the mirror before looking at the Delta table.
#[derive(Debug, Clone)]
pub struct TargetDefaults {
    /// `GLUE_DATABASE` / `--glue-database`.
    pub database: String,
    /// From the table's location (see [`NameFrom`]).
    pub table: String,
    /// `--glue-table`: when given, table properties are not consulted at all.
    pub explicit_table: Option<String>,
    /// `ALLOWED_GLUE_DATABASES`: the databases a Delta table's own `lakemirror.glue.*`
    /// properties may choose (a regex over the whole name). None: the properties are
    /// ignored, so whoever writes a table cannot claim a name for its mirror.
    pub allowed_databases: Option<regex::Regex>,
    /// Whether the default name is the folder's or the whole path's.
    pub name_from: NameFrom,
}

/// Which rule named a mirror (in the sync report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamedBy {
    /// `--glue-table` / `GLUE_TABLE`.
    Flag,
    /// The Delta table's `lakemirror.glue.*` properties, as the deployment allows.
    TableProperties,
    /// The table's folder name.
    Folder,
    /// The table's whole path.
    Path,
}

/// `TABLE_NAME_FROM_PATH`: the default Glue table name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NameFrom {
    /// The folder's name (`s3://lake/sales/orders` -> `orders`). Two tables of one name in
    /// different folders collide: the second is refused, as its Glue table mirrors the first.
    #[default]
    Folder,
    /// The whole path below the bucket (`sales_orders`). `a/b` and `a_b`, `Sales/x` and
    /// `sales/x` still meet in one name: the second is refused.
    Path,
    /// The whole path below the bucket, with a digest of the exact path appended when the
    /// path is not plain lower-case letters and digits (`sales_orders`,
    /// `team_a_orders__1f0c…`): never one name for two locations of a bucket, so no table
    /// can squat another's name.
    UniquePath,
}

impl std::str::FromStr for NameFrom {
    type Err = String;

    fn from_str(value: &str) -> std::result::Result<Self, Self::Err> {
        match value.trim() {
            "folder" => Ok(Self::Folder),
            "path" => Ok(Self::Path),
            "unique-path" => Ok(Self::UniquePath),
            other => Err(format!(
                "{other:?} is not a naming rule: use folder (the folder's name), path (the whole path below the bucket) or unique-path (the path, with a digest when it is not plain, so no two locations share a name)"
            )),
        }
    }
}

/// `ALLOWED_GLUE_DATABASES` as a regex that must match the whole name; None when empty.
pub fn allowed_names(pattern: Option<&str>, what: &str) -> Result<Option<regex::Regex>> {
    let Some(pattern) = pattern.map(str::trim).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map(Some)
        .map_err(|e| Error::Setting {
            name: what.to_string(),
            reason: format!("{pattern:?} is not a regex: {e}"),
        })
}

impl TargetDefaults {
    /// Whether the Delta table's own `lakemirror.glue.*` properties may choose its target:
    /// no explicit table, and an allowlist of databases (`ALLOWED_GLUE_DATABASES`). When they
    /// may not, the target is the deployment's whatever they say, so a sync need not read or
    /// remember them (a request saved on every sync).
    pub fn properties_choose(&self) -> bool {
        self.explicit_table.is_none() && self.allowed_databases.is_some()
    }

    /// The target when properties are not consulted.
    pub fn fixed(&self) -> Option<CatalogTarget> {
        self.explicit_table.as_ref().map(|table| CatalogTarget {
            database: self.database.clone(),
            table: table.clone(),
        })
    }

    /// The target the Delta table's properties ask for, as far as the deployment lets
    /// them choose, and the rule that named it.
    pub fn resolve(&self, properties: &TargetProperties) -> Result<(CatalogTarget, NamedBy)> {
        if let Some(fixed) = self.fixed() {
            return Ok((fixed, NamedBy::Flag));
        }
        let by_location = || {
            let named_by = match self.name_from {
                NameFrom::Folder => NamedBy::Folder,
                NameFrom::Path | NameFrom::UniquePath => NamedBy::Path,
            };
            (
                CatalogTarget {
                    database: self.database.clone(),
                    table: self.table.clone(),
                },
                named_by,
            )
        };
        if properties.database.is_none() && properties.table.is_none() {
            return Ok(by_location());
        }
        let name = |key: &str, value: &Option<String>| -> Result<Option<String>> {
            match value.as_deref().map(str::trim) {
                None | Some("") => Ok(None),
                Some(value) => glue_name(value).map(Some).ok_or_else(|| {
                    Error::Setting {
                        name: format!("Delta table property {key}"),
                        reason: format!("{value:?} is not a Glue name (letters, digits and _ only); fix it with ALTER TABLE … SET TBLPROPERTIES"),
                    }
                }),
            }
        };
        let target = CatalogTarget {
            database: name(DATABASE_PROPERTY, &properties.database)?
                .unwrap_or_else(|| self.database.clone()),
            table: name(TABLE_PROPERTY, &properties.table)?.unwrap_or_else(|| self.table.clone()),
        };
        let allowed = match &self.allowed_databases {
            None => false,
            Some(allowed) => target.database == self.database || allowed.is_match(&target.database),
        };
        if !allowed {
            tracing::warn!(
                database = properties.database.as_deref(),
                table = properties.table.as_deref(),
                "the Delta table's lakemirror.glue.* properties are ignored: this deployment does not let tables choose {} (ALLOWED_GLUE_DATABASES)",
                target.database
            );
            return Ok(by_location());
        }
        Ok((target, NamedBy::TableProperties))
    }
}

/// The values of the `lakemirror.glue.*` properties of a Delta table (None when unset).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetProperties {
    pub database: Option<String>,
    pub table: Option<String>,
}

impl TargetProperties {
    pub fn of(metadata: Option<&Metadata>) -> Self {
        let empty = HashMap::new();
        let configuration = metadata.map_or(&empty, |m| &m.configuration);
        let value = |key: &str| configuration.get(key).cloned().flatten();
        Self {
            database: value(DATABASE_PROPERTY),
            table: value(TABLE_PROPERTY),
        }
    }
}

/// A name as Glue stores it (lower case), or None when Glue would reject it.
fn glue_name(value: &str) -> Option<String> {
    let name = value.trim().to_lowercase();
    let valid = !name.is_empty()
        && name.len() <= 255
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    valid.then_some(name)
}

/// The remembered properties of one Delta table, as of a Delta version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RememberedProperties {
    pub delta_table_uri: String,
    pub delta_version: i64,
    #[serde(flatten)]
    pub properties: TargetProperties,
}

/// A Glue table name: the Delta folder's last segment, lower-cased, with every character
/// Glue rejects turned into `_`.
pub fn default_table_name(table_uri: &str) -> String {
    let last = table_uri
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default();
    sanitized_name(last)
}

/// A Glue table name from the table's whole path below the bucket (`s3://lake/sales/orders`
/// -> `sales_orders`), lower-cased, other characters as `_`: unique per location.
pub fn path_table_name(table_uri: &str) -> String {
    let path = table_uri.split_once("://").map_or(table_uri, |(_, rest)| {
        rest.split_once('/').map_or("", |(_, p)| p)
    });
    sanitized_name(path.trim_matches('/'))
}

/// A Glue table name no other location gets: [`path_table_name`] when the path below the
/// bucket is plain (lower-case letters and digits, `/` between), else that name, `__` and 16
/// hex digits of the SHA-256 of the exact URI. Plain names hold no `__`, digests differ per
/// location, so two locations of one bucket never share a name (the same path in two buckets
/// does: the second is refused, as with `path`).
pub fn unique_path_table_name(table_uri: &str) -> String {
    let name = path_table_name(table_uri);
    let path = table_uri.split_once("://").map_or(table_uri, |(_, rest)| {
        rest.split_once('/').map_or("", |(_, p)| p)
    });
    let plain = !path.is_empty()
        && path.split('/').all(|segment| {
            !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        });
    if plain {
        return name;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(table_uri.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let head: String = name.chars().take(200).collect();
    format!("{head}__{hex}")
}

/// `raw` lower-cased, every character Glue rejects turned into `_`; `_` when empty.
fn sanitized_name(raw: &str) -> String {
    let name: String = raw
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "_".to_string()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_path_names_never_meet() {
        assert_eq!(
            unique_path_table_name("s3://lake/sales/orders"),
            "sales_orders"
        );
        let names = [
            "s3://lake/a/b",
            "s3://lake/a_b",
            "s3://lake/a__b",
            "s3://lake/Sales/orders",
            "s3://lake/sales/orders",
            "s3://lake/sales-orders",
            "s3://lake/sales.orders",
        ]
        .map(unique_path_table_name);
        let distinct: std::collections::HashSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert!(names[1].starts_with("a_b__"), "{}", names[1]);
        assert_eq!(
            "unique-path".parse::<NameFrom>().unwrap(),
            NameFrom::UniquePath
        );
    }

    fn metadata(configuration: &[(&str, &str)]) -> Metadata {
        Metadata {
            id: None,
            schema_string: String::new(),
            partition_columns: Vec::new(),
            configuration: configuration
                .iter()
                .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                .collect(),
        }
    }

    fn props(configuration: &[(&str, &str)]) -> TargetProperties {
        TargetProperties::of(Some(&metadata(configuration)))
    }

    fn defaults(explicit: Option<&str>) -> TargetDefaults {
        TargetDefaults {
            database: "lake".into(),
            table: "orders".into(),
            explicit_table: explicit.map(str::to_string),
            allowed_databases: allowed_names(Some("sales|lake"), "test").unwrap(),
            name_from: NameFrom::Folder,
        }
    }

    #[test]
    fn table_properties_name_nothing_the_deployment_does_not_allow() {
        let claim = props(&[(DATABASE_PROPERTY, "finance"), (TABLE_PROPERTY, "payroll")]);
        let (target, named_by) = defaults(None).resolve(&claim).unwrap();
        assert_eq!(
            (target.database.as_str(), target.table.as_str()),
            ("lake", "orders")
        );
        assert_eq!(named_by, NamedBy::Folder);
        let none_allowed = TargetDefaults {
            allowed_databases: None,
            ..defaults(None)
        };
        let (target, _) = none_allowed
            .resolve(&props(&[(TABLE_PROPERTY, "x")]))
            .unwrap();
        assert_eq!(
            target.table, "orders",
            "without an allowlist no property counts"
        );
        assert!(allowed_names(Some("("), "ALLOWED_GLUE_DATABASES").is_err());
        assert!(
            allowed_names(Some("sales"), "x")
                .unwrap()
                .unwrap()
                .is_match("sales")
        );
        assert!(
            !allowed_names(Some("sales"), "x")
                .unwrap()
                .unwrap()
                .is_match("sales_x")
        );
    }

    #[test]
    fn defaults_apply_without_properties() {
        let (target, named_by) = defaults(None).resolve(&props(&[])).unwrap();
        assert_eq!(named_by, NamedBy::Folder);
        assert_eq!(
            (target.database.as_str(), target.table.as_str()),
            ("lake", "orders")
        );
        assert_eq!(
            defaults(None)
                .resolve(&TargetProperties::of(None))
                .unwrap()
                .0,
            target
        );
    }

    #[test]
    fn table_properties_override_database_and_table() {
        let m = props(&[(DATABASE_PROPERTY, "Sales"), (TABLE_PROPERTY, "orders_v2")]);
        let (target, named_by) = defaults(None).resolve(&m).unwrap();
        assert_eq!(
            (target.database.as_str(), target.table.as_str()),
            ("sales", "orders_v2")
        );
        assert_eq!(named_by, NamedBy::TableProperties);
        let only_table = props(&[(TABLE_PROPERTY, "o")]);
        assert_eq!(
            defaults(None).resolve(&only_table).unwrap().0.database,
            "lake"
        );
    }

    #[test]
    fn an_explicit_table_name_wins() {
        let m = props(&[(DATABASE_PROPERTY, "sales"), (TABLE_PROPERTY, "x")]);
        let (target, named_by) = defaults(Some("mine")).resolve(&m).unwrap();
        assert_eq!(named_by, NamedBy::Flag);
        assert_eq!(
            (target.database.as_str(), target.table.as_str()),
            ("lake", "mine")
        );
    }

    #[test]
    fn remembered_properties_round_trip() {
        let remembered = RememberedProperties {
            delta_table_uri: "s3://b/t".into(),
            delta_version: 7,
            properties: props(&[(TABLE_PROPERTY, "x")]),
        };
        let json = serde_json::to_string(&remembered).unwrap();
        assert_eq!(
            serde_json::from_str::<RememberedProperties>(&json).unwrap(),
            remembered
        );
    }

    #[test]
    fn a_property_glue_cannot_hold_is_refused() {
        let m = props(&[(TABLE_PROPERTY, "my-orders")]);
        let err = defaults(None).resolve(&m).unwrap_err().to_string();
        assert!(err.contains("lakemirror.glue.table"), "{err}");
    }
}

#[cfg(test)]
mod name_tests {
    use super::*;

    #[test]
    fn table_name_defaults_to_the_folder() {
        assert_eq!(default_table_name("s3://lake/warehouse/Orders/"), "orders");
        assert_eq!(
            default_table_name("/data/delta-0.8.0 special"),
            "delta_0_8_0_special"
        );
        assert_eq!(default_table_name("file:///x/Ünïcode"), "_n_code");
        assert_eq!(path_table_name("s3://lake/Sales/orders/"), "sales_orders");
        assert_eq!(path_table_name("file:///data/t"), "data_t");
    }
}
