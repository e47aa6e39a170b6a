//! What to sync where: the keys Lakebase users know (`source.path`, `sync.mode`, …), from a
//! TOML file listing any number of tables or from command-line flags for one.
//!
//! ```toml
//! [[tables]]
//! source.path = "s3://lake/gold/orders"
//! sync.mode = "full_refresh"
//! sync.primary_key = ["order_id"]
//! target.table_name = "app.orders"
//! ```

use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::postgres::TableName;

/// Where the rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A Delta table URI (`s3://…`, `file://…` or a local path).
    Path(String),
    /// A Unity Catalog table, resolved to its storage location through the UC REST API.
    UnityCatalog {
        catalog: String,
        schema: String,
        table: String,
    },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Path(uri) => write!(f, "{uri}"),
            Self::UnityCatalog {
                catalog,
                schema,
                table,
            } => write!(f, "{catalog}.{schema}.{table}"),
        }
    }
}

/// `sync.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    FullRefresh,
    Incremental,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FullRefresh => "full_refresh",
            Self::Incremental => "incremental",
        }
    }
}

/// `sync.conflict_on_existing`: the target exists and lakemirror did not create it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conflict {
    Error,
    Replace,
}

/// One synced table, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncedTable {
    pub source: Source,
    pub interval: Duration,
    pub mode: Mode,
    pub conflict_on_existing: Conflict,
    pub primary_key: Vec<String>,
    pub target: TableName,
    /// Whether an error may name a row by its key values. Primary keys are user data, and
    /// errors end in logs and dead-letter messages: by default a row is named by its key
    /// columns and a hash of the values. Only the CLI's `--show-values` turns this on.
    pub show_values: bool,
}

impl SyncedTable {
    /// The Delta table URI of a `source.path` source.
    pub fn source_path(&self) -> Option<&str> {
        match &self.source {
            Source::Path(path) => Some(path),
            Source::UnityCatalog { .. } => None,
        }
    }
}

/// The keys of one table as written (flags or one `[[tables]]` entry).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableKeys {
    #[serde(default)]
    pub source: SourceKeys,
    #[serde(default)]
    pub sync: SyncKeys,
    #[serde(default)]
    pub target: TargetKeys,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceKeys {
    pub catalog: Option<String>,
    pub schema: Option<String>,
    pub table: Option<String>,
    pub path: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyncKeys {
    pub interval: Option<String>,
    pub mode: Option<String>,
    pub conflict_on_existing: Option<String>,
    pub primary_key: Option<PrimaryKey>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetKeys {
    pub table_name: Option<String>,
}

/// `sync.primary_key`: `"a,b"` or `["a", "b"]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum PrimaryKey {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    tables: Vec<TableKeys>,
}

/// Reads a TOML config file: every `[[tables]]` entry, checked.
pub fn read_config(path: &std::path::Path) -> Result<Vec<SyncedTable>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Config(format!("cannot read config file {}: {e}", path.display())))?;
    parse_config(&text, &format!("config file {}", path.display()))
}

/// Parses TOML config text (`origin` names it in errors): every `[[tables]]` entry, checked.
pub fn parse_config(text: &str, origin: &str) -> Result<Vec<SyncedTable>> {
    let file: ConfigFile =
        toml::from_str(text).map_err(|e| Error::Config(format!("{origin}: {e}")))?;
    if file.tables.is_empty() {
        return Err(Error::Config(format!("{origin} lists no [[tables]]")));
    }
    file.tables
        .iter()
        .enumerate()
        .map(|(i, keys)| {
            keys.check()
                .map_err(|e| Error::Config(format!("{origin} tables[{i}]: {e}")))
        })
        .collect()
}

impl TableKeys {
    /// The table these keys describe, or an error naming the key and what it allows.
    pub fn check(&self) -> Result<SyncedTable> {
        let s = &self.source;
        let source = match (&s.path, &s.catalog, &s.schema, &s.table) {
            (Some(path), None, None, None) if !path.trim().is_empty() => {
                Source::Path(path.trim().to_string())
            }
            (None, Some(catalog), Some(schema), Some(table)) => Source::UnityCatalog {
                catalog: catalog.clone(),
                schema: schema.clone(),
                table: table.clone(),
            },
            _ => {
                return Err(Error::Config(
                    "give either source.path (a Delta table URI) or all of source.catalog, source.schema and source.table".into(),
                ));
            }
        };
        let mode = match self.sync.mode.as_deref().unwrap_or("full_refresh") {
            "full_refresh" => Mode::FullRefresh,
            "incremental" => Mode::Incremental,
            other => {
                return Err(Error::Config(format!(
                    "sync.mode = {other:?}: allowed values are full_refresh, incremental"
                )));
            }
        };
        let conflict_on_existing =
            match self.sync.conflict_on_existing.as_deref().unwrap_or("error") {
                "error" => Conflict::Error,
                "replace" => Conflict::Replace,
                other => {
                    return Err(Error::Config(format!(
                        "sync.conflict_on_existing = {other:?}: allowed values are error, replace"
                    )));
                }
            };
        let primary_key: Vec<String> = match &self.sync.primary_key {
            None => Vec::new(),
            Some(PrimaryKey::One(list)) => list
                .split(',')
                .map(|c| c.trim().to_string())
                .filter(|c| !c.is_empty())
                .collect(),
            Some(PrimaryKey::Many(columns)) => columns.clone(),
        };
        if mode == Mode::Incremental && primary_key.is_empty() {
            return Err(Error::Config(
                "sync.mode = incremental needs sync.primary_key (the column(s) that identify a row)".into(),
            ));
        }
        let interval = match &self.sync.interval {
            None => Duration::from_secs(15 * 60),
            Some(text) => parse_interval(text).ok_or_else(|| {
                Error::Config(format!(
                    "sync.interval = {text:?}: write a duration such as \"15 minutes\", \"1 hour\", \"30s\" (at least 1 minute)"
                ))
            })?,
        };
        let target = match &self.target.table_name {
            Some(name) => TableName::parse(name)?,
            None => TableName::parse(&lakemirror_plan::target::default_table_name(
                &match &source {
                    Source::Path(uri) => uri.clone(),
                    Source::UnityCatalog { table, .. } => table.clone(),
                },
            ))?,
        };
        Ok(SyncedTable {
            source,
            interval,
            mode,
            conflict_on_existing,
            primary_key,
            target,
            show_values: false,
        })
    }
}

/// "15 minutes", "1 hour", "2h", "90s", "1 day": at least a minute (EventBridge's floor).
pub fn parse_interval(text: &str) -> Option<Duration> {
    let text = text.trim().to_lowercase();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "s" | "sec" | "secs" | "second" | "seconds" => n,
        "m" | "min" | "mins" | "minute" | "minutes" => n * 60,
        "h" | "hour" | "hours" => n * 3600,
        "d" | "day" | "days" => n * 86_400,
        _ => return None,
    };
    (seconds >= 60).then(|| Duration::from_secs(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(toml_text: &str) -> Result<SyncedTable> {
        let file: ConfigFile =
            toml::from_str(toml_text).map_err(|e| Error::Config(e.to_string()))?;
        file.tables[0].check()
    }

    #[test]
    fn a_table_with_every_key() {
        let t = keys(
            r#"[[tables]]
            source.path = "s3://lake/gold/orders"
            sync.interval = "1 hour"
            sync.mode = "incremental"
            sync.conflict_on_existing = "replace"
            sync.primary_key = "order_id, line"
            target.table_name = "app.Order Lines""#,
        )
        .unwrap();
        assert_eq!(t.source, Source::Path("s3://lake/gold/orders".into()));
        assert_eq!(t.interval, Duration::from_secs(3600));
        assert_eq!(
            (t.mode, t.conflict_on_existing),
            (Mode::Incremental, Conflict::Replace)
        );
        assert_eq!(t.primary_key, vec!["order_id", "line"]);
        assert_eq!(
            (t.target.schema.as_str(), t.target.table.as_str()),
            ("app", "Order Lines")
        );
    }

    #[test]
    fn defaults_follow_the_lakebase_docs() {
        let t = keys("[[tables]]\nsource.path = \"s3://lake/gold/Daily-Orders\"").unwrap();
        assert_eq!(t.mode, Mode::FullRefresh);
        assert_eq!(t.conflict_on_existing, Conflict::Error);
        assert_eq!(t.interval, Duration::from_secs(900));
        assert!(t.primary_key.is_empty());
        assert_eq!(t.target.sql(), r#""public"."daily_orders""#);
        let uc = keys("[[tables]]\nsource.catalog = \"main\"\nsource.schema = \"gold\"\nsource.table = \"orders\"\nsync.primary_key = [\"id\"]").unwrap();
        assert_eq!(uc.source.to_string(), "main.gold.orders");
        assert_eq!(uc.primary_key, vec!["id"]);
    }

    #[test]
    fn bad_keys_are_named_with_what_they_allow() {
        let cases = [
            ("sync.mode = \"fast\"", "full_refresh, incremental"),
            ("sync.conflict_on_existing = \"merge\"", "error, replace"),
            ("sync.interval = \"soon\"", "15 minutes"),
            ("sync.mode = \"incremental\"", "sync.primary_key"),
            ("source.catalog = \"main\"", "source.path"),
        ];
        for (line, wanted) in cases {
            let text = format!("[[tables]]\nsource.path = \"s3://x/t\"\n{line}");
            let text = if line.starts_with("source.catalog") {
                format!("[[tables]]\n{line}")
            } else {
                text
            };
            let err = keys(&text).unwrap_err().to_string();
            assert!(err.contains(wanted), "{line}: {err}");
        }
        let err = keys("[[tables]]\nsource.path = \"s3://x/t\"\nsync.speed = 3")
            .unwrap_err()
            .to_string();
        assert!(err.contains("speed"), "{err}");
    }

    #[test]
    fn intervals_read_like_the_docs() {
        assert_eq!(parse_interval("15 minutes"), Some(Duration::from_secs(900)));
        assert_eq!(parse_interval("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_interval("1 day"), Some(Duration::from_secs(86_400)));
        assert_eq!(parse_interval("30s"), None); // below EventBridge's minute
        assert_eq!(parse_interval("often"), None);
    }
}
