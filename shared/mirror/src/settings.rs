//! How a deployment mirrors its tables: the glue-sync settings every entry point shares (the
//! function's environment, `lakemirror glue-sync`, `fan-out plan` and `invoke glue-sync`),
//! read by one parser under one name each.

use iceberg::spec::FormatVersion;
use lakemirror_plan::history::{HistoryPolicy, parse_hourly_for, parse_recent_versions};
use lakemirror_plan::parse_format_version;
use lakemirror_plan::target::{NameFrom, allowed_names};

use crate::error::{Error, Result};
use crate::fanout::BOOTSTRAP_GROUP_FILES;
use crate::sync::{OnMissingSource, SyncRequest};

/// Every setting of a sync but the table itself and where it goes.
#[derive(Debug, Clone)]
pub struct SyncSettings {
    /// `ICEBERG_FORMAT_VERSION`: 2 (default) or 3, for tables created from now on; a Delta
    /// table's `lakemirror.iceberg.format-version` property overrides it.
    pub format_version: FormatVersion,
    /// `ON_MISSING_SOURCE`: `keep` (default: the event is parked as "source table missing")
    /// or `drop` (the Glue table of a Delta table that is gone is deleted).
    pub on_missing_source: OnMissingSource,
    /// `ALLOWED_GLUE_DATABASES`: the databases a Delta table's `lakemirror.glue.*`
    /// properties may choose (a regex); unset: the properties are ignored.
    pub allowed_databases: Option<regex::Regex>,
    /// `TABLE_NAME_FROM_PATH`: `folder` (default), `path` or `unique-path`.
    pub name_from: NameFrom,
    /// `BOOTSTRAP_GROUP_FILES`: a new mirror of a table with more files is bootstrapped in
    /// groups of about this many (default 250,000; about 2 KB of memory per file).
    pub bootstrap_group_files: u64,
    /// `HISTORY_RECENT_VERSIONS`, `HISTORY_HOURLY_FOR`: the history each mirror keeps; a Delta
    /// table's `lakemirror.history.*` properties override them.
    pub history: HistoryPolicy,
}

impl Default for SyncSettings {
    fn default() -> Self {
        Self {
            format_version: FormatVersion::V2,
            on_missing_source: OnMissingSource::Keep,
            allowed_databases: None,
            name_from: NameFrom::Folder,
            bootstrap_group_files: BOOTSTRAP_GROUP_FILES,
            history: HistoryPolicy::default(),
        }
    }
}

impl SyncSettings {
    /// The names the settings are read under: the function's environment variables, and the
    /// CLI's flags' variables.
    pub const VARIABLES: [&'static str; 7] = [
        "ICEBERG_FORMAT_VERSION",
        "ON_MISSING_SOURCE",
        "ALLOWED_GLUE_DATABASES",
        "TABLE_NAME_FROM_PATH",
        "BOOTSTRAP_GROUP_FILES",
        "HISTORY_RECENT_VERSIONS",
        "HISTORY_HOURLY_FOR",
    ];

    /// The settings `setting` gives by name (unset or blank: the default).
    pub fn from_settings(setting: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let var = |name: &str| setting(name).filter(|v| !v.trim().is_empty());
        let mut settings = Self::default();
        if let Some(value) = var("ICEBERG_FORMAT_VERSION") {
            settings.format_version = parse_format_version(&value).ok_or_else(|| {
                Error::setting(
                    "ICEBERG_FORMAT_VERSION",
                    format!("{value:?}: allowed values are 2 and 3"),
                )
            })?;
        }
        if let Some(value) = var("ON_MISSING_SOURCE") {
            settings.on_missing_source = value
                .parse()
                .map_err(|e| Error::setting("ON_MISSING_SOURCE", e))?;
        }
        settings.allowed_databases = allowed_names(
            var("ALLOWED_GLUE_DATABASES").as_deref(),
            "ALLOWED_GLUE_DATABASES",
        )?;
        if let Some(value) = var("TABLE_NAME_FROM_PATH") {
            settings.name_from = value
                .parse()
                .map_err(|e| Error::setting("TABLE_NAME_FROM_PATH", e))?;
        }
        if let Some(value) = var("BOOTSTRAP_GROUP_FILES") {
            settings.bootstrap_group_files = value
                .trim()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| {
                    Error::setting(
                        "BOOTSTRAP_GROUP_FILES",
                        format!("{value:?}: give a number of files above 0"),
                    )
                })?;
        }
        if let Some(value) = var("HISTORY_RECENT_VERSIONS") {
            settings.history.recent_versions = parse_recent_versions(&value)
                .map_err(|e| Error::setting("HISTORY_RECENT_VERSIONS", e))?;
        }
        if let Some(value) = var("HISTORY_HOURLY_FOR") {
            settings.history.hourly_for_ms =
                parse_hourly_for(&value).map_err(|e| Error::setting("HISTORY_HOURLY_FOR", e))?;
        }
        Ok(settings)
    }

    /// The sync of `table_uri` into Glue database `database` under these settings.
    pub fn request(&self, table_uri: String, database: String) -> SyncRequest {
        SyncRequest {
            table_uri,
            database,
            table: None,
            metadata_uri: None,
            to_version: None,
            known_version: None,
            format_version: self.format_version,
            on_missing_source: self.on_missing_source,
            allowed_databases: self.allowed_databases.clone(),
            name_from: self.name_from,
            bootstrap_group_files: self.bootstrap_group_files,
            history: self.history,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<SyncSettings> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SyncSettings::from_settings(&|name| map.get(name).cloned())
    }

    #[test]
    fn unset_and_blank_settings_are_the_defaults() {
        let unset = from(&[]).unwrap();
        let blank = from(&SyncSettings::VARIABLES.map(|name| (name, " "))).unwrap();
        for settings in [unset, blank] {
            assert_eq!(
                format!("{settings:?}"),
                format!("{:?}", SyncSettings::default())
            );
        }
    }

    #[test]
    fn every_setting_is_read_under_its_name() {
        let settings = from(&[
            ("ICEBERG_FORMAT_VERSION", "3"),
            ("ON_MISSING_SOURCE", "drop"),
            ("ALLOWED_GLUE_DATABASES", "team_.*"),
            ("TABLE_NAME_FROM_PATH", "path"),
            ("BOOTSTRAP_GROUP_FILES", "1000"),
            ("HISTORY_RECENT_VERSIONS", "7"),
            ("HISTORY_HOURLY_FOR", "2 hours"),
        ])
        .unwrap();
        assert_eq!(settings.format_version, FormatVersion::V3);
        assert_eq!(settings.on_missing_source, OnMissingSource::Drop);
        assert!(settings.allowed_databases.unwrap().is_match("team_a"));
        assert_eq!(settings.name_from, NameFrom::Path);
        assert_eq!(settings.bootstrap_group_files, 1000);
        assert_eq!(settings.history.recent_versions, 7);
        assert_eq!(settings.history.hourly_for_ms, 2 * 3_600_000);
    }

    #[test]
    fn a_wrong_value_names_its_setting() {
        for name in SyncSettings::VARIABLES {
            let value = if name == "ALLOWED_GLUE_DATABASES" {
                "("
            } else {
                "nonsense"
            };
            let error = from(&[(name, value)]).unwrap_err().to_string();
            assert!(error.contains(name), "{name}: {error}");
        }
    }
}
