//! Delta log actions as they appear in JSON commits and (converted) checkpoints.
//!
//! Only the fields lakemirror needs are modelled; unknown fields and unknown actions are
//! ignored, as the Delta protocol asks of readers.

use std::collections::HashMap;

use serde::Deserialize;

use crate::bounded::{self, HeapSize};

/// One line of a commit file, or one row of a checkpoint: at most one field is set.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionLine {
    pub add: Option<Add>,
    pub remove: Option<Remove>,
    pub meta_data: Option<Metadata>,
    pub protocol: Option<Protocol>,
    pub commit_info: Option<CommitInfo>,
    /// In a v2 checkpoint: a file in `_delta_log/_sidecars/` holding more of its actions.
    pub sidecar: Option<Sidecar>,
    /// Configuration of a named domain (`delta.rowTracking` holds the row ID high-water mark).
    pub domain_metadata: Option<DomainMetadata>,
}

impl HeapSize for ActionLine {
    fn heap_size(&self) -> u64 {
        // Each action as it is held: its struct and what it points to.
        let add = self
            .add
            .as_ref()
            .map_or(0, |a| std::mem::size_of::<Add>() as u64 + a.heap_size());
        let remove = self
            .remove
            .as_ref()
            .map_or(0, |r| std::mem::size_of::<Remove>() as u64 + r.heap_size());
        add + remove + self.meta_data.heap_size() + self.protocol.heap_size()
    }
}

/// A `domainMetadata` action: the configuration of one named domain of the table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DomainMetadata {
    pub domain: String,
    /// JSON text.
    #[serde(default)]
    pub configuration: String,
    #[serde(default)]
    pub removed: bool,
}

/// The domain of row tracking, whose configuration holds `rowIdHighWaterMark`.
pub const ROW_TRACKING_DOMAIN: &str = "delta.rowTracking";

impl DomainMetadata {
    /// The highest row ID the table has assigned, when this is row tracking's domain.
    pub fn row_id_high_water_mark(&self) -> Option<i64> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct RowTracking {
            row_id_high_water_mark: i64,
        }
        if self.domain != ROW_TRACKING_DOMAIN || self.removed {
            return None;
        }
        serde_json::from_str::<RowTracking>(&self.configuration)
            .ok()
            .map(|r| r.row_id_high_water_mark)
    }
}

/// A v2 checkpoint's pointer to a sidecar file of add/remove actions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Sidecar {
    /// Relative to `_delta_log/_sidecars/`, or an absolute URI.
    pub path: String,
}

/// A data file that becomes part of the table.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Add {
    /// URI-encoded path, relative to the table root or absolute.
    pub path: String,
    #[serde(default, deserialize_with = "bounded::map")]
    pub partition_values: HashMap<String, Option<String>>,
    pub size: i64,
    #[serde(default = "default_true")]
    pub data_change: bool,
    /// JSON string with `numRecords`, `minValues`, ...; may be absent.
    pub stats: Option<String>,
    /// Rows of this file that are deleted, when the table uses deletion vectors.
    pub deletion_vector: Option<super::deletion_vector::DeletionVector>,
    /// Row tracking: the row ID of the file's first row (the others follow by position,
    /// unless the file materializes its row IDs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_row_id: Option<i64>,
    /// Row tracking: the version that first committed this file, its rows' commit version
    /// unless the file materializes theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_row_commit_version: Option<i64>,
}

impl Add {
    /// The partition value stored under `key` (the column's physical name), looked up
    /// case-insensitively as Spark does. A missing key, JSON null and an empty string are all
    /// a null partition value (the protocol: "an empty string for any type translates to a
    /// null partition value").
    pub fn partition_value(&self, key: &str) -> Option<&str> {
        self.partition_values
            .get(key)
            .or_else(|| {
                self.partition_values
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(key))
                    .map(|(_, v)| v)
            })
            .and_then(|v| v.as_deref())
            .filter(|v| !v.is_empty())
    }
}

/// A data file that leaves the table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Remove {
    pub path: String,
    #[serde(default = "default_true")]
    pub data_change: bool,
    /// The rows of the file that were deleted when it was removed, typed: an action is parsed
    /// into no more memory than its bytes ask for.
    pub deletion_vector: Option<super::deletion_vector::DeletionVector>,
    /// Present when written with `extendedFileMetadata` (Spark and delta-rs do).
    #[serde(default, deserialize_with = "bounded::option_map")]
    pub partition_values: Option<HashMap<String, Option<String>>>,
    #[serde(default)]
    pub size: Option<i64>,
    /// When the file was removed (ms); VACUUM may delete it `deletedFileRetentionDuration`
    /// after this. A long operation's removes are older than its commit.
    #[serde(default)]
    pub deletion_timestamp: Option<i64>,
}

/// Table metadata: schema, partitioning, configuration.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// The table's unique ID: a table re-created at the same location gets a new one.
    #[serde(default)]
    pub id: Option<String>,
    pub schema_string: String,
    #[serde(default, deserialize_with = "bounded::list")]
    pub partition_columns: Vec<String>,
    #[serde(default, deserialize_with = "bounded::map")]
    pub configuration: HashMap<String, Option<String>>,
}

/// Reader and writer requirements of the table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Protocol {
    pub min_reader_version: i32,
    #[serde(default, deserialize_with = "bounded::option_list")]
    pub reader_features: Option<Vec<String>>,
}

/// What the writer said about the commit; only its timestamp matters here.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommitInfo {
    pub timestamp: Option<i64>,
    pub in_commit_timestamp: Option<i64>,
}

fn default_true() -> bool {
    true
}

impl HeapSize for Add {
    fn heap_size(&self) -> u64 {
        self.path.heap_size()
            + self.partition_values.heap_size()
            + self.stats.heap_size()
            + self.deletion_vector.heap_size()
    }
}

impl HeapSize for Remove {
    fn heap_size(&self) -> u64 {
        self.path.heap_size() + self.partition_values.heap_size() + self.deletion_vector.heap_size()
    }
}

impl HeapSize for Metadata {
    fn heap_size(&self) -> u64 {
        self.id.heap_size()
            + self.schema_string.heap_size()
            + self.partition_columns.heap_size()
            + self.configuration.heap_size()
    }
}

impl HeapSize for Protocol {
    fn heap_size(&self) -> u64 {
        self.reader_features.heap_size()
    }
}

impl HeapSize for DeltaCommit {
    fn heap_size(&self) -> u64 {
        let each = |n: usize, size: usize| (n * size) as u64;
        each(self.adds.len(), std::mem::size_of::<Add>())
            + each(self.removes.len(), std::mem::size_of::<Remove>())
            + self.adds.heap_size()
            + self.removes.heap_size()
            + self.metadata.heap_size()
            + self.protocol.heap_size()
    }
}

/// Why a commit file could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitParseError {
    /// It is not a Delta commit.
    #[error("{0}")]
    Malformed(String),
    /// Parsed, it would hold more memory than the read may.
    #[error("it holds more than the {max_bytes} bytes one read of the log may hold once parsed")]
    HoldsMore { max_bytes: u64 },
}

/// The actions of one Delta version, in log order.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaCommit {
    pub version: i64,
    /// Milliseconds since the epoch: in-commit timestamp, else commitInfo, else file time.
    pub timestamp_ms: i64,
    /// A hash of the commit file's bytes: another table's commit of the same version (the
    /// table was re-created at the same location) differs.
    pub content_hash: u64,
    pub adds: Vec<Add>,
    pub removes: Vec<Remove>,
    pub metadata: Option<Metadata>,
    pub protocol: Option<Protocol>,
    /// The row ID high-water mark this commit sets (`delta.rowTracking` domain).
    pub row_id_high_water_mark: Option<i64>,
}

impl DeltaCommit {
    /// Parses a newline-delimited JSON commit file. `file_time_ms` is the object's
    /// modification time, used when the commit carries no timestamp of its own.
    pub fn parse(version: i64, bytes: &[u8], file_time_ms: i64) -> Result<Self, String> {
        Self::parse_each(version, bytes, file_time_ms, |_| true)
    }

    /// [`DeltaCommit::parse`] handing each line to `keep` first, which may take from it, and
    /// keeping in the commit only what it answers true for: a replay that applies file
    /// actions as they are read holds none of them.
    pub fn parse_each(
        version: i64,
        bytes: &[u8],
        file_time_ms: i64,
        keep: impl FnMut(&mut ActionLine) -> bool,
    ) -> Result<Self, String> {
        Self::parse_within(version, bytes, file_time_ms, u64::MAX, keep).map_err(|e| e.to_string())
    }

    /// [`DeltaCommit::parse_each`] keeping at most `max_bytes` of memory in the commit
    /// ([`HeapSize`]): a commit that would hold more is refused as it is parsed, before it
    /// holds much more than the bound.
    pub fn parse_within(
        version: i64,
        bytes: &[u8],
        file_time_ms: i64,
        max_bytes: u64,
        mut keep: impl FnMut(&mut ActionLine) -> bool,
    ) -> Result<Self, CommitParseError> {
        let text = std::str::from_utf8(bytes).map_err(|e| {
            CommitParseError::Malformed(format!("commit {version} is not UTF-8: {e}"))
        })?;
        let mut commit = DeltaCommit {
            version,
            timestamp_ms: file_time_ms,
            content_hash: content_hash(bytes),
            adds: Vec::new(),
            removes: Vec::new(),
            metadata: None,
            protocol: None,
            row_id_high_water_mark: None,
        };
        let mut info_time = None;
        let mut held = 0u64;
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let mut action: ActionLine = serde_json::from_str(line).map_err(|e| {
                CommitParseError::Malformed(format!(
                    "commit {version}, line {}: not a Delta action ({e})",
                    n + 1
                ))
            })?;
            if let Some(info) = &action.commit_info {
                info_time = info.in_commit_timestamp.or(info.timestamp);
            }
            if keep(&mut action) {
                held = held.saturating_add(action.heap_size());
                if held > max_bytes {
                    return Err(CommitParseError::HoldsMore { max_bytes });
                }
                commit.push(action);
            }
        }
        if let Some(t) = info_time {
            commit.timestamp_ms = t;
        }
        Ok(commit)
    }

    fn push(&mut self, action: ActionLine) {
        if let Some(add) = action.add {
            self.adds.push(add);
        }
        if let Some(remove) = action.remove {
            self.removes.push(remove);
        }
        if let Some(metadata) = action.meta_data {
            self.metadata = Some(metadata);
        }
        if let Some(protocol) = action.protocol {
            self.protocol = Some(protocol);
        }
        if let Some(mark) = action
            .domain_metadata
            .as_ref()
            .and_then(DomainMetadata::row_id_high_water_mark)
        {
            self.row_id_high_water_mark = Some(mark);
        }
    }

    /// True when every file action says the data did not change (OPTIMIZE, compaction).
    pub fn is_rearrangement(&self) -> bool {
        let any = !self.adds.is_empty() || !self.removes.is_empty();
        any && self.adds.iter().all(|a| !a.data_change)
            && self.removes.iter().all(|r| !r.data_change)
    }
}

/// FNV-1a over a commit file's bytes: the same on every machine and in every release.
pub fn content_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// `numRecords` from an `add.stats` JSON string, when present and sane.
pub fn num_records(stats: Option<&str>) -> Option<u64> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Stats {
        num_records: Option<i64>,
    }
    let stats: Stats = serde_json::from_str(stats?).ok()?;
    stats.num_records.and_then(|n| u64::try_from(n).ok())
}

/// Reader features lakemirror can mirror today. Anything else stops the sync.
const SUPPORTED_READER_FEATURES: &[&str] = &[
    "timestampNtz",
    "vacuumProtocolCheck",
    "deletionVectors",
    "v2Checkpoint",
    "columnMapping",
    "typeWidening",
    "typeWidening-preview",
    // Read as its catalog ratified it, or up to the newest published version (see
    // `catalog_managed`).
    "catalogManaged",
    "catalogOwned-preview",
    // Column types: a mirror holds them in format version 3 and leaves the column out by
    // name in 2; they never change which rows exist.
    "variantType",
    "variantType-preview",
    "variantShredding-preview",
    "variantShredding",
    "geospatial",
];

/// Delta's default `delta.deletedFileRetentionDuration`: one week.
pub const DEFAULT_DELETED_FILE_RETENTION_MS: i64 = 7 * 24 * 3600 * 1000;

/// How long VACUUM keeps removed files: `delta.deletedFileRetentionDuration`
/// (`interval 7 days`, `interval 1 week`, `168 hours`...), in milliseconds.
pub fn deleted_file_retention_ms(metadata: &Metadata) -> Result<i64, String> {
    let Some(Some(text)) = metadata
        .configuration
        .get("delta.deletedFileRetentionDuration")
    else {
        return Ok(DEFAULT_DELETED_FILE_RETENTION_MS);
    };
    parse_interval_ms(text).ok_or_else(|| {
        format!(
            "delta.deletedFileRetentionDuration {text:?} is not an interval like 'interval 7 days'"
        )
    })
}

/// An interval as Delta writes them (`interval 7 days`, `interval 1 week`, `168 hours`,
/// `1 day 12 hours`), in milliseconds; None when it is not one.
pub fn parse_interval_ms(text: &str) -> Option<i64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let words = match words.first() {
        Some(w) if w.eq_ignore_ascii_case("interval") => &words[1..],
        _ => &words[..],
    };
    if words.is_empty() {
        return None;
    }
    let mut total: i64 = 0;
    for pair in words.chunks(2) {
        let [n, unit] = pair else { return None };
        let n: i64 = n.parse().ok()?;
        let unit_ms: i64 = match unit.to_ascii_lowercase().trim_end_matches('s') {
            "week" => 7 * 24 * 3_600_000,
            "day" => 24 * 3_600_000,
            "hour" => 3_600_000,
            "minute" => 60_000,
            "second" => 1_000,
            "millisecond" => 1,
            _ => return None,
        };
        total = total.saturating_add(n.saturating_mul(unit_ms));
    }
    Some(total)
}

/// Checks that lakemirror can read the table: returns the first feature it cannot mirror.
pub fn unsupported_feature(protocol: &Protocol, metadata: Option<&Metadata>) -> Option<String> {
    if let Some(mode) = metadata.and_then(|m| m.configuration.get("delta.columnMapping.mode"))
        && let Some(mode) = mode.as_deref()
        && !matches!(mode, "none" | "name" | "id")
    {
        return Some(format!("columnMapping (mode {mode})"));
    }
    match protocol.min_reader_version {
        // Reader version 2 is column mapping, which is mirrored.
        1 | 2 => None,
        3 => protocol
            .reader_features
            .iter()
            .flatten()
            .find(|f| !SUPPORTED_READER_FEATURES.contains(&f.as_str()))
            .cloned(),
        v => Some(format!("reader version {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commit_lines_and_prefers_commit_info_time() {
        let text = br#"{"commitInfo":{"timestamp":1700000000000,"operation":"WRITE","operationParameters":{"auto":true,"x":null}}}
{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}
{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[]}","partitionColumns":["p"],"configuration":{},"createdTime":1}}
{"add":{"path":"p=a%20b/part-0.parquet","partitionValues":{"p":"a b"},"size":10,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":3}"}}
{"remove":{"path":"old.parquet","deletionTimestamp":5,"dataChange":true}}
{"someFutureAction":{"x":1}}
"#;
        let commit = DeltaCommit::parse(7, text, 42).unwrap();
        assert_eq!(commit.version, 7);
        assert_eq!(commit.timestamp_ms, 1_700_000_000_000);
        assert_eq!(commit.adds.len(), 1);
        assert_eq!(commit.adds[0].partition_values["p"].as_deref(), Some("a b"));
        assert_eq!(num_records(commit.adds[0].stats.as_deref()), Some(3));
        assert_eq!(commit.removes[0].path, "old.parquet");
        assert_eq!(commit.metadata.unwrap().partition_columns, vec!["p"]);
        assert!(!DeltaCommit::parse(7, b"", 42).unwrap().is_rearrangement());
    }

    #[test]
    fn malformed_line_names_the_line() {
        let err = DeltaCommit::parse(3, b"{\"add\":{}}\n{oops", 0).unwrap_err();
        assert!(err.contains("commit 3, line 1"), "{err}");
    }

    #[test]
    fn optimize_commit_is_a_rearrangement() {
        let text = br#"{"add":{"path":"b","partitionValues":{},"size":1,"modificationTime":1,"dataChange":false}}
{"remove":{"path":"a","dataChange":false}}"#;
        assert!(DeltaCommit::parse(1, text, 0).unwrap().is_rearrangement());
    }

    #[test]
    fn missing_or_bad_stats_give_no_record_count() {
        assert_eq!(num_records(None), None);
        assert_eq!(num_records(Some("{}")), None);
        assert_eq!(num_records(Some("not json")), None);
        assert_eq!(num_records(Some(r#"{"numRecords":-1}"#)), None);
    }

    #[test]
    fn deleted_file_retention_parses_delta_intervals() {
        let m = |v: &str| Metadata {
            id: None,
            schema_string: String::new(),
            partition_columns: vec![],
            configuration: HashMap::from([(
                "delta.deletedFileRetentionDuration".to_string(),
                Some(v.to_string()),
            )]),
        };
        let day = 24 * 3_600_000;
        assert_eq!(
            deleted_file_retention_ms(&m("interval 7 days")),
            Ok(7 * day)
        );
        assert_eq!(
            deleted_file_retention_ms(&m("interval 1 week")),
            Ok(7 * day)
        );
        assert_eq!(deleted_file_retention_ms(&m("168 hours")), Ok(7 * day));
        assert_eq!(deleted_file_retention_ms(&m("interval 0 hours")), Ok(0));
        assert!(deleted_file_retention_ms(&m("soon")).is_err());
        let none = Metadata {
            configuration: HashMap::new(),
            ..m("x")
        };
        assert_eq!(
            deleted_file_retention_ms(&none),
            Ok(DEFAULT_DELETED_FILE_RETENTION_MS)
        );
    }

    #[test]
    fn refuses_features_it_cannot_mirror() {
        let p = |v, f: &[&str]| Protocol {
            min_reader_version: v,
            reader_features: Some(f.iter().map(|s| s.to_string()).collect()),
        };
        assert_eq!(unsupported_feature(&p(1, &[]), None), None);
        assert_eq!(unsupported_feature(&p(3, &["timestampNtz"]), None), None);
        assert_eq!(
            unsupported_feature(&p(3, &["deletionVectors", "featureFromTheFuture"]), None)
                .as_deref(),
            Some("featureFromTheFuture")
        );
        assert_eq!(
            unsupported_feature(&p(2, &[]), None),
            None,
            "column mapping"
        );
        assert_eq!(unsupported_feature(&p(3, &["columnMapping"]), None), None);
        assert!(unsupported_feature(&p(4, &[]), None).is_some());
    }
}
