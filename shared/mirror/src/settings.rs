//! How a deployment mirrors its tables: the glue-sync settings every entry point shares (the
//! function's environment, `lakemirror sync`, `fan-out plan` and `invoke glue-sync`).
//!
//! Each setting is declared once, in [`SETTINGS`]: its environment variable (which the CLI
//! flag reads too, the flag spelled from it), its SAM parameter, its default, its allowed
//! values, its help and how it is read. The CLI builds its flags from the table, and a test
//! here checks that `template.yaml` and `docs/deployment.md` (the README's settings table)
//! say the same.

use iceberg::spec::FormatVersion;
use lakemirror_plan::history::{HistoryPolicy, parse_hourly_for, parse_recent_versions};
use lakemirror_plan::parse_format_version;
use lakemirror_plan::target::{NameFrom, allowed_names};

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

/// One sync setting, declared once.
#[derive(Debug)]
pub struct Setting {
    /// The function's environment variable, which the CLI flag reads too.
    pub variable: &'static str,
    /// The SAM parameter that sets the variable.
    pub parameter: &'static str,
    /// The value when it is not set, as it is written; None: unset.
    pub default: Option<&'static str>,
    /// The values it takes, when they are a list.
    pub values: &'static [&'static str],
    /// Whether it shapes a new mirror (`fan-out plan` takes only these).
    pub of_new_table: bool,
    /// What it does: the flag's help, first line first.
    pub help: &'static str,
    read: fn(&mut SyncSettings, &str) -> std::result::Result<(), String>,
}

impl Setting {
    /// The CLI flag: the variable in lower case, `-` for `_`.
    pub fn flag(&self) -> String {
        format!("--{}", self.variable.to_lowercase().replace('_', "-"))
    }

    /// Whether `value` is one this setting takes (why not, when it is not).
    pub fn check(&self, value: &str) -> std::result::Result<(), String> {
        (self.read)(&mut SyncSettings::unread(), value)
    }
}

/// The glue-sync settings.
pub const SETTINGS: &[Setting] = &[
    Setting {
        variable: "ICEBERG_FORMAT_VERSION",
        parameter: "IcebergFormatVersion",
        default: Some("2"),
        values: &["2", "3"],
        of_new_table: true,
        help: "Iceberg format version of a newly created mirror: 2 (deletion vectors become position-delete files; Athena reads it) or 3 (Puffin deletion vectors). The Delta table property lakemirror.iceberg.format-version overrides it; an existing mirror keeps its version.",
        read: |s, value| {
            s.format_version = parse_format_version(value)
                .ok_or_else(|| format!("{value:?}: allowed values are 2 and 3"))?;
            Ok(())
        },
    },
    Setting {
        variable: "ON_MISSING_SOURCE",
        parameter: "OnMissingSource",
        default: Some("keep"),
        values: &["keep", "drop"],
        of_new_table: false,
        help: "When the Delta table is gone (no _delta_log with a commit or checkpoint) but its Glue table is there: keep (fail with \"source table missing\" and leave the Glue table as it is) or drop (delete the Glue table; the Iceberg metadata files stay).",
        read: |s, value| {
            s.on_missing_source = value.parse()?;
            Ok(())
        },
    },
    Setting {
        variable: "ALLOWED_GLUE_DATABASES",
        parameter: "AllowedGlueDatabases",
        default: None,
        values: &[],
        of_new_table: true,
        help: "The Glue databases a Delta table's own lakemirror.glue.database / lakemirror.glue.table properties may choose, as a regex over the whole name [default: none: those properties are ignored, with a warning].",
        read: |s, value| {
            s.allowed_databases =
                allowed_names(Some(value), "ALLOWED_GLUE_DATABASES").map_err(|e| match e {
                    lakemirror_plan::Error::Setting { reason, .. } => reason,
                    other => other.to_string(),
                })?;
            Ok(())
        },
    },
    Setting {
        variable: "TABLE_NAME_FROM_PATH",
        parameter: "TableNameFromPath",
        default: Some("folder"),
        values: &["folder", "path", "unique-path"],
        of_new_table: true,
        help: "The default Glue table name: folder (the folder's name), path (the whole path below the bucket) or unique-path (the path, plus a digest when it is not plain lower-case letters and digits, so no two locations of a bucket share a name).",
        read: |s, value| {
            s.name_from = value.parse()?;
            Ok(())
        },
    },
    Setting {
        variable: "BOOTSTRAP_GROUP_FILES",
        parameter: "BootstrapGroupFiles",
        default: Some("250000"),
        values: &[],
        of_new_table: false,
        help: "A new mirror of a table whose checkpoint holds more actions is bootstrapped in groups of about this many files, one group after another, from spill files in the temp folder (TMPDIR): memory stays near 2 KB per file of a group, not of the table.",
        read: |s, value| {
            s.bootstrap_group_files = value
                .trim()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{value:?}: give a number of files above 0"))?;
            Ok(())
        },
    },
    Setting {
        variable: "HISTORY_RECENT_VERSIONS",
        parameter: "HistoryRecentVersions",
        default: Some("100"),
        values: &[],
        of_new_table: false,
        help: "The newest this many Delta versions keep an Iceberg snapshot each (exact time travel); older ones are thinned to one snapshot per hour, then per day. The Delta table property lakemirror.history.recent-versions overrides it.",
        read: |s, value| {
            s.history.recent_versions = parse_recent_versions(value)?;
            Ok(())
        },
    },
    Setting {
        variable: "HISTORY_HOURLY_FOR",
        parameter: "HistoryHourlyFor",
        default: Some("1 day"),
        values: &[],
        of_new_table: false,
        help: "For how long before the newest commit the versions older than those keep one snapshot per UTC hour (the hour's last); older still, one per UTC day, until Delta's retention expires them. An interval such as '1 day', '12 hours', or 0. The Delta table property lakemirror.history.hourly-for overrides it.",
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
            let value = setting(declared.variable)
                .filter(|v| !v.trim().is_empty())
                .or(declared.default.map(str::to_string));
            if let Some(value) = value {
                (declared.read)(&mut settings, &value)
                    .map_err(|reason| Error::setting(declared.variable, reason))?;
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
                assert_eq!(setting.check(default), Ok(()), "{}", setting.variable);
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
        let blanks: Vec<(&str, &str)> = SETTINGS.iter().map(|s| (s.variable, " ")).collect();
        let blank = from(&blanks).unwrap();
        assert_eq!(format!("{blank:?}"), format!("{defaults:?}"));
    }

    /// `template.yaml`'s block of `parameter`: its `Default` and `AllowedValues`.
    fn template_parameter(template: &str, parameter: &str) -> (String, Option<String>) {
        let start = template
            .find(&format!("\n  {parameter}:\n"))
            .unwrap_or_else(|| panic!("template.yaml has no parameter {parameter}"));
        let block: Vec<&str> = template[start + 1..]
            .lines()
            .skip(1)
            .take_while(|line| line.starts_with("    "))
            .collect();
        let field = |name: &str| {
            block
                .iter()
                .find_map(|line| line.trim().strip_prefix(name))
                .map(|value| value.trim().trim_matches('"').to_string())
        };
        (
            field("Default:").unwrap_or_default(),
            field("AllowedValues:"),
        )
    }

    #[test]
    fn template_and_the_settings_table_of_the_docs_say_what_the_declaration_says() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let template = std::fs::read_to_string(format!("{root}/template.yaml")).unwrap();
        let docs = std::fs::read_to_string(format!("{root}/docs/deployment.md")).unwrap();
        for setting in SETTINGS {
            let (default, allowed) = template_parameter(&template, setting.parameter);
            assert_eq!(
                default,
                setting.default.unwrap_or(""),
                "{}",
                setting.parameter
            );
            if !setting.values.is_empty() {
                let allowed: Vec<String> = allowed
                    .unwrap_or_default()
                    .trim_matches(['[', ']'])
                    .split(',')
                    .map(|v| v.trim().trim_matches('"').to_string())
                    .collect();
                assert_eq!(allowed, setting.values, "{}", setting.parameter);
            }
            let wired = format!("{}: !Ref {}", setting.variable, setting.parameter);
            assert!(template.contains(&wired), "template.yaml lacks {wired:?}");

            let row = docs
                .lines()
                .find(|line| line.starts_with(&format!("| `{}` |", setting.parameter)))
                .unwrap_or_else(|| panic!("docs/deployment.md has no row {}", setting.parameter));
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            let documented_default = match setting.default {
                Some(default) => format!("`{default}`"),
                None => "empty".to_string(),
            };
            assert_eq!(cells[1], documented_default, "{row}");
            let names = format!("`{}` / `{}`", setting.variable, setting.flag());
            assert!(cells.last().is_some_and(|c| c.contains(&names)), "{row}");
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
        for name in SETTINGS.iter().map(|s| s.variable) {
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
