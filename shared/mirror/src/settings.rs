//! How a deployment mirrors its tables: the glue-sync settings every entry point shares (the
//! function's environment, `lakemirror sync`, `fan-out plan` and `invoke glue-sync`).
//!
//! Each setting is declared once, in [`SETTINGS`]: its environment variable (a
//! [`Variable`]: its name, which the CLI flag is spelled from and reads too, its default, its
//! allowed values, its help) and how it is read. The CLI builds its flags from the table;
//! glue-sync's environment (`glue_sync::ENVIRONMENT`) names the SAM parameter of each, and
//! `shared/cli/src/environment.rs` checks `template.yaml`, `docs/deployment.md` and the CLI
//! against them.

use iceberg::spec::FormatVersion;
use lakemirror_plan::history::{HistoryPolicy, parse_hourly_for, parse_recent_versions};
use lakemirror_plan::parse_format_version;
use lakemirror_plan::target::{NameFrom, allowed_names};
use lakemirror_runtime::settings::Variable;

use crate::error::{Error, Result};

/// What to mirror where.
#[derive(Debug, Clone)]
pub struct SyncRequest {
    /// The Delta table root: `s3://bucket/path`, `file:///path` or a local path.
    pub table_uri: String,
    /// Glue database; the Delta table property `lakemirror.glue.database` overrides it.
    pub database: String,
    /// Glue table name, used as given. Without it: the Delta table property
    /// `lakemirror.glue.table`, else the folder name.
    pub table: Option<String>,
    /// Where Iceberg metadata goes; defaults to `<table>/_lakemirror/iceberg`.
    pub metadata_uri: Option<String>,
    /// Stop at this Delta version instead of the newest.
    pub to_version: Option<i64>,
    /// A version the Delta log is known to hold, from the event that announced it. Without
    /// `to_version`, the sync reads the commits up to it by name and leaves newer ones to
    /// their own events; when the mirror already has it, the next commit is probed (one
    /// request) and, when it exists, the mirror catches up to the newest version.
    pub known_version: Option<i64>,
    /// How the deployment mirrors its tables (format version, naming, history, ...).
    pub settings: SyncSettings,
}

impl SyncRequest {
    /// A sync of `table_uri` into Glue database `database` with every setting at its
    /// default: the newest version, named by folder, Iceberg v2, the default history.
    pub fn new(table_uri: impl Into<String>, database: impl Into<String>) -> Self {
        SyncSettings::default().request(table_uri.into(), database.into())
    }
}

/// What a sync does when the Delta table it mirrors is gone (`ON_MISSING_SOURCE`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnMissingSource {
    /// Fail with [`crate::Error::SourceMissing`] and leave the Glue table as it is.
    #[default]
    Keep,
    /// Delete the Glue table (the Iceberg metadata files stay).
    Drop,
}

impl std::str::FromStr for OnMissingSource {
    type Err = String;

    fn from_str(value: &str) -> std::result::Result<Self, Self::Err> {
        match value.trim().to_ascii_lowercase().as_str() {
            "keep" => Ok(Self::Keep),
            "drop" => Ok(Self::Drop),
            other => Err(format!(
                "{other:?} is not an action for a missing Delta table: use keep (the default: fail and leave the Glue table) or drop (delete the Glue table)"
            )),
        }
    }
}

/// Every setting of a sync but the table itself and where it goes ([`SETTINGS`] says what
/// each field is read from).
#[derive(Debug, Clone)]
pub struct SyncSettings {
    pub format_version: FormatVersion,
    pub on_missing_source: OnMissingSource,
    pub allowed_databases: Option<regex::Regex>,
    pub name_from: NameFrom,
    pub bootstrap_group_files: u64,
    pub history: HistoryPolicy,
}

/// One sync setting: its variable, declared once, and how a value of it is read into
/// [`SyncSettings`].
#[derive(Debug)]
pub struct Setting {
    /// The function's environment variable, which the CLI flag reads too.
    pub variable: &'static Variable,
    /// Whether it shapes a new mirror (`fan-out plan` takes only these).
    pub of_new_table: bool,
    read: fn(&mut SyncSettings, &str) -> std::result::Result<(), String>,
}

impl std::ops::Deref for Setting {
    type Target = Variable;

    fn deref(&self) -> &Variable {
        self.variable
    }
}

impl Setting {
    /// Whether `value` is one this setting takes (why not, when it is not).
    pub fn check(&self, value: &str) -> std::result::Result<(), String> {
        (self.read)(&mut SyncSettings::unread(), value)
    }
}

/// "A number above 0" (a count of files, of deliveries).
pub(crate) fn above_zero(value: &str) -> std::result::Result<u64, String> {
    value
        .trim()
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{value:?}: give a number above 0"))
}

/// `ICEBERG_FORMAT_VERSION`.
pub const ICEBERG_FORMAT_VERSION: Variable = Variable {
    name: "ICEBERG_FORMAT_VERSION",
    default: Some("2"),
    values: &["2", "3"],
    help: "Iceberg format version of a newly created mirror: 2 (deletion vectors become position-delete files; Athena reads it) or 3 (Puffin deletion vectors). The Delta table property lakemirror.iceberg.format-version overrides it; an existing mirror keeps its version.",
};

/// `ON_MISSING_SOURCE`.
pub const ON_MISSING_SOURCE: Variable = Variable {
    name: "ON_MISSING_SOURCE",
    default: Some("keep"),
    values: &["keep", "drop"],
    help: "When the Delta table is gone (no _delta_log with a commit or checkpoint) but its Glue table is there: keep (fail with \"source table missing\" and leave the Glue table as it is) or drop (delete the Glue table; the Iceberg metadata files stay).",
};

/// `ALLOWED_GLUE_DATABASES`.
pub const ALLOWED_GLUE_DATABASES: Variable = Variable {
    name: "ALLOWED_GLUE_DATABASES",
    default: None,
    values: &[],
    help: "The Glue databases a Delta table's own lakemirror.glue.database / lakemirror.glue.table properties may choose, as a regex over the whole name [default: none: those properties are ignored, with a warning].",
};

/// `TABLE_NAME_FROM_PATH`.
pub const TABLE_NAME_FROM_PATH: Variable = Variable {
    name: "TABLE_NAME_FROM_PATH",
    default: Some("folder"),
    values: &["folder", "path", "unique-path"],
    help: "The default Glue table name: folder (the folder's name), path (the whole path below the bucket) or unique-path (the path, plus a digest when it is not plain lower-case letters and digits, so no two locations of a bucket share a name).",
};

/// `BOOTSTRAP_GROUP_FILES`.
pub const BOOTSTRAP_GROUP_FILES: Variable = Variable {
    name: "BOOTSTRAP_GROUP_FILES",
    default: Some("250000"),
    values: &[],
    help: "A new mirror of a table whose checkpoint holds more actions is bootstrapped in groups of about this many files, one group after another, from spill files in the temp folder (TMPDIR): memory stays near 2 KB per file of a group, not of the table.",
};

/// `HISTORY_RECENT_VERSIONS`.
pub const HISTORY_RECENT_VERSIONS: Variable = Variable {
    name: "HISTORY_RECENT_VERSIONS",
    default: Some("100"),
    values: &[],
    help: "The newest this many Delta versions keep an Iceberg snapshot each (exact time travel); older ones are thinned to one snapshot per hour, then per day. The Delta table property lakemirror.history.recent-versions overrides it.",
};

/// `HISTORY_HOURLY_FOR`.
pub const HISTORY_HOURLY_FOR: Variable = Variable {
    name: "HISTORY_HOURLY_FOR",
    default: Some("1 day"),
    values: &[],
    help: "For how long before the newest commit the versions older than those keep one snapshot per UTC hour (the hour's last); older still, one per UTC day, until Delta's retention expires them. An interval such as '1 day', '12 hours', or 0. The Delta table property lakemirror.history.hourly-for overrides it.",
};

/// The glue-sync settings.
pub const SETTINGS: &[Setting] = &[
    Setting {
        variable: &ICEBERG_FORMAT_VERSION,
        of_new_table: true,
        read: |s, value| {
            s.format_version = parse_format_version(value)
                .ok_or_else(|| format!("{value:?}: allowed values are 2 and 3"))?;
            Ok(())
        },
    },
    Setting {
        variable: &ON_MISSING_SOURCE,
        of_new_table: false,
        read: |s, value| {
            s.on_missing_source = value.parse()?;
            Ok(())
        },
    },
    Setting {
        variable: &ALLOWED_GLUE_DATABASES,
        of_new_table: true,
        read: |s, value| {
            s.allowed_databases =
                allowed_names(Some(value), ALLOWED_GLUE_DATABASES.name).map_err(|e| match e {
                    lakemirror_plan::Error::Setting { reason, .. } => reason,
                    other => other.to_string(),
                })?;
            Ok(())
        },
    },
    Setting {
        variable: &TABLE_NAME_FROM_PATH,
        of_new_table: true,
        read: |s, value| {
            s.name_from = value.parse()?;
            Ok(())
        },
    },
    Setting {
        variable: &BOOTSTRAP_GROUP_FILES,
        of_new_table: false,
        read: |s, value| {
            s.bootstrap_group_files = above_zero(value)?;
            Ok(())
        },
    },
    Setting {
        variable: &HISTORY_RECENT_VERSIONS,
        of_new_table: false,
        read: |s, value| {
            s.history.recent_versions = parse_recent_versions(value)?;
            Ok(())
        },
    },
    Setting {
        variable: &HISTORY_HOURLY_FOR,
        of_new_table: false,
        read: |s, value| {
            s.history.hourly_for_ms = parse_hourly_for(value)?;
            Ok(())
        },
    },
];

impl Default for SyncSettings {
    /// Every setting at its declared default. (One that did not read would keep its unread
    /// value; `every_declared_default_reads` keeps that from happening.)
    fn default() -> Self {
        Self::from_settings(&|_| None).unwrap_or_else(|_| Self::unread())
    }
}

impl SyncSettings {
    /// The settings before any is read: every field is then read from its setting, set or at
    /// its declared default (`allowed_databases` stays None when unset). These are the values
    /// the floors below assume, so that even a declared default that did not read leaves a
    /// sane one (`every_declared_default_reads_and_is_what_the_floors_below_assume`).
    fn unread() -> Self {
        Self {
            format_version: FormatVersion::V2,
            on_missing_source: OnMissingSource::default(),
            allowed_databases: None,
            name_from: NameFrom::default(),
            bootstrap_group_files: crate::grouped::BOOTSTRAP_GROUP_FILES,
            history: HistoryPolicy::default(),
        }
    }

    /// The settings `setting` gives by variable name (unset or blank: the default).
    pub fn from_settings(setting: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let mut settings = Self::unread();
        for declared in SETTINGS {
            let value = declared
                .value(setting)
                .or(declared.default.map(str::to_string));
            if let Some(value) = value {
                (declared.read)(&mut settings, &value)
                    .map_err(|reason| Error::setting(declared.name, reason))?;
            }
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
            settings: self.clone(),
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
    fn every_declared_default_reads_and_is_what_the_floors_below_assume() {
        for setting in SETTINGS {
            if let Some(default) = setting.default {
                assert_eq!(setting.check(default), Ok(()), "{}", setting.name);
            }
        }
        let defaults = SyncSettings::from_settings(&|_| None).unwrap();
        assert_eq!(defaults.format_version, FormatVersion::V2);
        assert_eq!(defaults.on_missing_source, OnMissingSource::Keep);
        assert!(defaults.allowed_databases.is_none());
        assert_eq!(defaults.name_from, NameFrom::Folder);
        assert_eq!(
            defaults.bootstrap_group_files,
            crate::grouped::BOOTSTRAP_GROUP_FILES
        );
        assert_eq!(defaults.history, HistoryPolicy::default());
        let blanks: Vec<(&str, &str)> = SETTINGS.iter().map(|s| (s.name, " ")).collect();
        let blank = from(&blanks).unwrap();
        assert_eq!(format!("{blank:?}"), format!("{defaults:?}"));
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
        for name in SETTINGS.iter().map(|s| s.name) {
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
