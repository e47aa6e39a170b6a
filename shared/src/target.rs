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

use crate::delta::actions::Metadata;
use crate::error::{Error, Result};

/// Delta table property naming the Glue database of the mirror.
pub const DATABASE_PROPERTY: &str = "lakemirror.glue.database";
/// Delta table property naming the Glue table of the mirror.
pub const TABLE_PROPERTY: &str = "lakemirror.glue.table";
/// File beside the Iceberg metadata that remembers the resolved target.
pub const TARGET_FILE: &str = "glue-target.json";

/// A Glue database and table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlueTarget {
    pub database: String,
    pub table: String,
}

/// How to name the mirror before looking at the Delta table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetDefaults {
    /// `GLUE_DATABASE` / `--glue-database`.
    pub database: String,
    /// The folder name.
    pub table: String,
    /// `--glue-table`: when given, table properties are not consulted at all.
    pub explicit_table: Option<String>,
}

impl TargetDefaults {
    /// The target when properties are not consulted.
    pub fn fixed(&self) -> Option<GlueTarget> {
        self.explicit_table.as_ref().map(|table| GlueTarget {
            database: self.database.clone(),
            table: table.clone(),
        })
    }

    /// The target the Delta table's properties ask for.
    pub fn resolve(&self, properties: &TargetProperties) -> Result<GlueTarget> {
        if let Some(fixed) = self.fixed() {
            return Ok(fixed);
        }
        let name = |key: &str, value: &Option<String>| -> Result<Option<String>> {
            match value.as_deref().map(str::trim) {
                None | Some("") => Ok(None),
                Some(value) => glue_name(value).map(Some).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "Delta table property {key}={value:?} is not a Glue name (letters, digits and _ only); fix it with ALTER TABLE … SET TBLPROPERTIES"
                    ))
                }),
            }
        };
        Ok(GlueTarget {
            database: name(DATABASE_PROPERTY, &properties.database)?
                .unwrap_or_else(|| self.database.clone()),
            table: name(TABLE_PROPERTY, &properties.table)?.unwrap_or_else(|| self.table.clone()),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

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
        }
    }

    #[test]
    fn defaults_apply_without_properties() {
        let target = defaults(None).resolve(&props(&[])).unwrap();
        assert_eq!(
            (target.database.as_str(), target.table.as_str()),
            ("lake", "orders")
        );
        assert_eq!(
            defaults(None).resolve(&TargetProperties::of(None)).unwrap(),
            target
        );
    }

    #[test]
    fn table_properties_override_database_and_table() {
        let m = props(&[(DATABASE_PROPERTY, "Sales"), (TABLE_PROPERTY, "orders_v2")]);
        let target = defaults(None).resolve(&m).unwrap();
        assert_eq!(
            (target.database.as_str(), target.table.as_str()),
            ("sales", "orders_v2")
        );
        let only_table = props(&[(TABLE_PROPERTY, "o")]);
        assert_eq!(
            defaults(None).resolve(&only_table).unwrap().database,
            "lake"
        );
    }

    #[test]
    fn an_explicit_table_name_wins() {
        let m = props(&[(DATABASE_PROPERTY, "sales"), (TABLE_PROPERTY, "x")]);
        let target = defaults(Some("mine")).resolve(&m).unwrap();
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
