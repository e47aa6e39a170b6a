//! `lakemirror status`: which mirrors are behind or failing. For every mirror in a Glue
//! database: the Delta version it holds and when that was committed, the newest Delta
//! version (found by probing commit files by name, never by listing the log), the lag, and
//! the last error the dead-letter queue holds for the table.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use iceberg::spec::TableMetadata;
use object_store::ObjectMeta;
use serde::Serialize;

use lakemirror_delta::DeltaLog;
pub use lakemirror_events::ParkedError;
use lakemirror_plan::CommittedTable;
use lakemirror_plan::properties::DELTA_TABLE_PROPERTY;
use lakemirror_storage::uri::under_prefix;
use lakemirror_storage::{IoCounters, ObjectStores, canonical_uri};

use crate::error::{Error, Result};
use lakemirror_iceberg::catalog::{IcebergEntry, Lakehouse};

/// Tables read at once.
const TABLES_AT_ONCE: usize = 16;

/// A mirror lakemirror wrote: a Glue table whose Iceberg metadata names its Delta table.
#[derive(Debug, Clone)]
pub struct Mirror {
    pub database: String,
    pub table: String,
    pub delta_table_uri: String,
    /// The folder holding the mirror's `metadata/` (glue-sync's `--metadata-uri`).
    pub metadata_uri: String,
    pub committed: CommittedTable,
}

impl Mirror {
    pub fn glue_table(&self) -> String {
        format!("{}.{}", self.database, self.table)
    }
}

/// A Glue table that looks like a mirror but could not be read.
#[derive(Debug, Clone)]
pub struct Unreadable {
    pub table: String,
    pub error: String,
}

/// The mirrors of `database` whose Delta tables lie under one of `prefixes` (empty: all),
/// and the Iceberg tables whose metadata could not be read. Iceberg tables that lakemirror
/// did not write are left out.
pub async fn mirrors(
    lake: &Lakehouse,
    database: &str,
    prefixes: &[String],
    counters: &Arc<IoCounters>,
) -> Result<(Vec<Mirror>, Vec<Unreadable>)> {
    let entries = lake.catalog.iceberg_tables(database, counters).await?;
    let read: Vec<(IcebergEntry, Result<Option<Mirror>>)> = futures::stream::iter(entries)
        .map(|entry| async move {
            let mirror = read_mirror(&lake.stores, database, &entry, counters).await;
            (entry, mirror)
        })
        .buffered(TABLES_AT_ONCE)
        .collect()
        .await;
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    for (entry, mirror) in read {
        match mirror {
            Ok(Some(mirror))
                if prefixes.is_empty()
                    || prefixes
                        .iter()
                        .any(|p| under_prefix(&mirror.delta_table_uri, &canonical_uri(p))) =>
            {
                found.push(mirror)
            }
            Ok(_) => {}
            Err(e) => unreadable.push(Unreadable {
                table: format!("{database}.{}", entry.name),
                error: e.to_string(),
            }),
        }
    }
    Ok((found, unreadable))
}

async fn read_mirror(
    stores: &ObjectStores,
    database: &str,
    entry: &IcebergEntry,
    counters: &Arc<IoCounters>,
) -> Result<Option<Mirror>> {
    let location = &entry.metadata_location;
    let store = stores.open(location, counters.clone())?;
    let metadata: TableMetadata =
        match lakemirror_iceberg::metadata_json::read(&store, location).await? {
            Some(Ok(metadata)) => metadata,
            Some(Err(why)) => {
                return Err(Error::catalog_state(format!(
                    "{location} is not Iceberg table metadata ({why})"
                )));
            }
            None => {
                return Err(Error::catalog_state(format!(
                    "its metadata {location} is gone (the Delta table's folder was deleted?)"
                )));
            }
        };
    let Some(named) = metadata.properties().get(DELTA_TABLE_PROPERTY).cloned() else {
        return Ok(None);
    };
    let metadata_uri = location
        .rsplit_once("/metadata/")
        .map_or(location.as_str(), |(folder, _)| folder)
        .to_string();
    let delta_table_uri = delta_table_of(&metadata_uri, &named)?;
    Ok(Some(Mirror {
        database: database.to_string(),
        table: entry.name.clone(),
        delta_table_uri,
        metadata_uri,
        committed: CommittedTable {
            metadata,
            metadata_location: location.clone(),
        },
    }))
}

/// The Delta table a mirror follows, from where its metadata lies: a mirror whose metadata
/// lies in `<table>/_lakemirror/iceberg` follows `<table>`, whatever its property names; a
/// property naming another table is refused (the table's writer can write that file: it
/// must not make a verify read another table's log under this mirror's name). Metadata kept
/// elsewhere (the CLI's `--metadata-uri`) names its table by the property alone.
fn delta_table_of(metadata_uri: &str, named: &str) -> Result<String> {
    let Some(root) = metadata_uri.strip_suffix(MIRROR_FOLDER) else {
        return Ok(named.to_string());
    };
    if canonical_uri(root) != canonical_uri(named) {
        return Err(Error::catalog_state(format!(
            "its metadata lies in {root}'s folder but names the Delta table {named} ({DELTA_TABLE_PROPERTY}): a mirror follows the table whose folder holds it; it is not read as {named}'s"
        )));
    }
    Ok(named.to_string())
}

/// The folder below a Delta table's root where its mirror's metadata lies.
const MIRROR_FOLDER: &str = "/_lakemirror/iceberg";

/// Where a mirror stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// The mirror holds the newest Delta version.
    CaughtUp,
    /// The Delta log holds newer versions.
    Behind,
    /// The Delta log holds no commit at or after the mirrored version, nor a checkpoint.
    SourceMissing,
    /// The mirror or its Delta log could not be read (see `error`).
    Unreadable,
}

/// One line of `lakemirror status`.
#[derive(Debug, Clone, Serialize)]
pub struct TableStatus {
    pub glue_table: String,
    pub delta_table: Option<String>,
    pub state: State,
    pub mirrored_version: Option<i64>,
    /// When the mirrored Delta version was committed (RFC 3339).
    pub mirrored_at: Option<String>,
    pub newest_version: Option<i64>,
    pub lag_versions: Option<i64>,
    /// How long the oldest Delta commit the mirror lacks has waited; 0 when caught up.
    pub lag_seconds: Option<i64>,
    /// The newest error the dead-letter queue holds for this Delta table.
    pub last_error: Option<String>,
    pub last_error_at: Option<String>,
    /// Why the status could not be read.
    pub error: Option<String>,
    /// Of a catalog-managed Delta table: the versions its catalog ratified and published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_managed: Option<CatalogManagedStatus>,
}

/// Where a catalog-managed Delta table stands: its newest version is the newest its catalog
/// ratified; publication into `_delta_log/` may lag behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogManagedStatus {
    pub table_id: Option<String>,
    /// The newest version the catalog ratified; None when no catalog was asked.
    pub ratified_version: Option<i64>,
    /// The newest version published in `_delta_log/`.
    pub published_version: Option<i64>,
    /// Why the mirror can follow only the published log, and which setting lifts that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited: Option<String>,
}

/// The newest Delta version at or after `from`, which the caller knows to exist, and the
/// metadata of the commit right after `from` when there is one: probes commit files by
/// name (`exists`), doubling the step, then halving between the last found and the first
/// missing. `2 log2(lag) + 1` probes; one when caught up.
pub async fn newest_version<F, Fut>(from: i64, exists: F) -> Result<(i64, Option<ObjectMeta>)>
where
    F: Fn(i64) -> Fut,
    Fut: Future<Output = Result<Option<ObjectMeta>>>,
{
    let Some(next) = exists(from + 1).await? else {
        return Ok((from, None));
    };
    let mut found = from + 1;
    let mut step: i64 = 1;
    let mut missing = loop {
        let probe = found.saturating_add(step);
        if probe == i64::MAX || exists(probe).await?.is_none() {
            break probe;
        }
        found = probe;
        step = step.saturating_mul(2);
    };
    while missing - found > 1 {
        let middle = found + (missing - found) / 2;
        if exists(middle).await?.is_some() {
            found = middle;
        } else {
            missing = middle;
        }
    }
    Ok((found, Some(next)))
}

/// The status of one mirror.
pub async fn table_status(
    lake: &Lakehouse,
    mirror: &Mirror,
    now_ms: i64,
    parked: &HashMap<String, ParkedError>,
    counters: &Arc<IoCounters>,
) -> TableStatus {
    let mirrored_version = mirror.committed.delta_version();
    let mirrored_at_ms = mirror
        .committed
        .metadata
        .current_snapshot()
        .map(|s| s.timestamp_ms());
    let parked = parked.get(&canonical_uri(&mirror.delta_table_uri));
    let mut status = TableStatus {
        glue_table: mirror.glue_table(),
        delta_table: Some(mirror.delta_table_uri.clone()),
        state: State::Unreadable,
        mirrored_version,
        mirrored_at: mirrored_at_ms.map(rfc3339),
        newest_version: None,
        lag_versions: None,
        lag_seconds: None,
        last_error: parked.map(|p| p.error.clone()),
        last_error_at: parked.map(|p| rfc3339(p.sent_at_ms)),
        error: None,
        catalog_managed: None,
    };
    let Some(mirrored) = mirrored_version else {
        status.error = Some("the current snapshot names no delta.version".into());
        return status;
    };
    let probed = match mirror.committed.catalog_table_id() {
        Some(id) => {
            let read = catalog_managed_status(lake, mirror, id, counters).await;
            match read {
                Ok((probed, managed)) => {
                    status.catalog_managed = Some(managed);
                    Ok(probed)
                }
                Err(e) => Err(e),
            }
        }
        None => probe(&lake.stores, mirror, mirrored, counters).await,
    };
    match probed {
        Ok(None) => status.state = State::SourceMissing,
        Ok(Some(Probed {
            newest,
            waiting_since_ms,
        })) => {
            status.newest_version = Some(newest);
            status.lag_versions = Some((newest - mirrored).max(0));
            status.state = if newest > mirrored {
                State::Behind
            } else {
                State::CaughtUp
            };
            status.lag_seconds = Some(
                match (newest > mirrored, waiting_since_ms.or(mirrored_at_ms)) {
                    (true, Some(since)) => ((now_ms - since) / 1000).max(0),
                    _ => 0,
                },
            );
        }
        Err(e) => status.error = Some(e.to_string()),
    }
    status
}

struct Probed {
    newest: i64,
    /// When the oldest commit the mirror lacks was written.
    waiting_since_ms: Option<i64>,
}

/// The newest version of the mirror's Delta log, by name: the mirrored commit and the one
/// after it (two requests when caught up). When the mirrored commit was cleaned from the
/// log, the search starts from `_last_checkpoint`. None: the log is gone.
async fn probe(
    stores: &ObjectStores,
    mirror: &Mirror,
    mirrored: i64,
    counters: &Arc<IoCounters>,
) -> Result<Option<Probed>> {
    let data = stores.open(&mirror.delta_table_uri, counters.clone())?;
    let log = DeltaLog::new(data.clone());
    let exists = |version: i64| {
        let data = data.clone();
        let location = log.commit_file(version);
        async move { Ok(data.head_if_exists(&location).await?) }
    };
    let (mirrored_commit, after) = futures::join!(exists(mirrored), exists(mirrored + 1));
    let start = match (mirrored_commit?, after?) {
        (_, Some(_)) => mirrored,
        (Some(_), None) => {
            return Ok(Some(Probed {
                newest: mirrored,
                waiting_since_ms: None,
            }));
        }
        // The mirrored commit is gone: cleaned up after a newer checkpoint, or the table
        // was deleted.
        (None, None) => match log.last_checkpoint_version().await? {
            Some(checkpoint) if checkpoint > mirrored => checkpoint,
            _ => return Ok(None),
        },
    };
    let (newest, next) = newest_version(start, exists).await?;
    Ok(Some(Probed {
        newest,
        waiting_since_ms: next
            .filter(|_| start == mirrored)
            .map(|meta| meta.last_modified.timestamp_millis()),
    }))
}

/// Where a catalog-managed table stands: the newest version its catalog ratified (the
/// published one without a catalog) and the newest published one.
async fn catalog_managed_status(
    lake: &Lakehouse,
    mirror: &Mirror,
    table_id: &str,
    counters: &Arc<IoCounters>,
) -> Result<(Option<Probed>, CatalogManagedStatus)> {
    let log = lake.delta_log(
        lake.stores
            .open(&mirror.delta_table_uri, counters.clone())?,
    );
    let known_as = mirror.committed.catalog_table_name();
    let (asked, published) = futures::join!(
        log.ask_catalog_known_as(table_id, known_as),
        log.published_version()
    );
    let published = published?;
    let read = asked?.tail().cloned();
    let ratified_version = read.as_ref().and_then(|r| r.ratified_version());
    let newest = ratified_version.or(published);
    Ok((
        newest.map(|newest| Probed {
            newest,
            waiting_since_ms: None,
        }),
        CatalogManagedStatus {
            table_id: Some(table_id.to_string()),
            ratified_version,
            published_version: published,
            limited: read.and_then(|r| r.limited()),
        },
    ))
}

/// Statuses of every mirror of `database` under `prefixes`, with the last error parked per
/// Delta table URI (from a dead-letter queue; empty without one).
pub async fn status(
    lake: &Lakehouse,
    database: &str,
    prefixes: &[String],
    parked: &HashMap<String, ParkedError>,
    counters: &Arc<IoCounters>,
) -> Result<Vec<TableStatus>> {
    let (mirrors, unreadable) = mirrors(lake, database, prefixes, counters).await?;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut statuses: Vec<TableStatus> = futures::stream::iter(&mirrors)
        .map(|mirror| table_status(lake, mirror, now_ms, parked, counters))
        .buffered(TABLES_AT_ONCE)
        .collect()
        .await;
    statuses.extend(unreadable.into_iter().map(|u| TableStatus {
        glue_table: u.table,
        delta_table: None,
        state: State::Unreadable,
        mirrored_version: None,
        mirrored_at: None,
        newest_version: None,
        lag_versions: None,
        lag_seconds: None,
        last_error: None,
        last_error_at: None,
        error: Some(u.error),
        catalog_managed: None,
    }));
    statuses.sort_by(|a, b| a.glue_table.cmp(&b.glue_table));
    Ok(statuses)
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}

/// The statuses as an aligned text table, one line per mirror.
pub fn table_text(statuses: &[TableStatus]) -> String {
    let header = [
        "GLUE TABLE",
        "DELTA TABLE",
        "STATE",
        "MIRRORED",
        "MIRRORED AT",
        "NEWEST",
        "LAG",
        "LAG TIME",
        "LAST ERROR",
    ];
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = statuses
        .iter()
        .map(|s| {
            let state = serde_json::to_value(s.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            vec![
                s.glue_table.clone(),
                s.delta_table.clone().unwrap_or_else(dash),
                state,
                s.mirrored_version.map_or_else(dash, |v| v.to_string()),
                s.mirrored_at.clone().unwrap_or_else(dash),
                s.newest_version.map_or_else(dash, |v| v.to_string()),
                s.lag_versions.map_or_else(dash, |v| v.to_string()),
                s.lag_seconds.map_or_else(dash, duration_text),
                s.error
                    .as_ref()
                    .or(s.last_error.as_ref())
                    .map_or_else(dash, |e| one_line(e, 80)),
            ]
        })
        .collect();
    text_table(&header, rows)
}

/// Rows under a header, each column as wide as its widest cell, two spaces apart.
pub fn text_table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let last = cells.len().saturating_sub(1);
        cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    c
                } else {
                    format!("{c:<width$}", width = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let mut out = vec![line(header.iter().map(|h| h.to_string()).collect())];
    out.extend(rows.into_iter().map(line));
    out.join("\n")
}

/// `3725` -> `1h02m`, `75` -> `1m15s`, `9` -> `9s`.
pub fn duration_text(seconds: i64) -> String {
    match seconds {
        s if s >= 86_400 => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
        s if s >= 3600 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        s if s >= 60 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{s}s"),
    }
}

/// The first line of `text`, at most `max` characters.
pub fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    if first.chars().count() > max {
        let cut: String = first.chars().take(max - 1).collect();
        format!("{cut}…")
    } else {
        first.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::sync::Mutex;

    #[test]
    fn a_mirror_follows_the_table_whose_folder_holds_its_metadata() {
        let own = "s3://lake/sales/orders/_lakemirror/iceberg";
        assert_eq!(
            delta_table_of(own, "s3a://lake/sales/orders/").unwrap(),
            "s3a://lake/sales/orders/"
        );
        // A forged property naming another table is refused, naming both.
        let forged = delta_table_of(own, "s3://lake/hr/salaries").unwrap_err();
        let message = forged.to_string();
        assert!(
            message.contains("s3://lake/sales/orders") && message.contains("s3://lake/hr/salaries"),
            "{message}"
        );
        // Metadata kept elsewhere (the CLI's --metadata-uri) names its table by the property.
        assert_eq!(
            delta_table_of("s3://meta/orders", "s3://lake/sales/orders").unwrap(),
            "s3://lake/sales/orders"
        );
    }

    fn meta(version: i64) -> ObjectMeta {
        ObjectMeta {
            location: object_store::path::Path::from(format!("{version:020}.json")),
            last_modified: chrono::DateTime::from_timestamp_millis(version * 1000).unwrap(),
            size: 1,
            e_tag: None,
            version: None,
        }
    }

    /// The newest version of a log holding `0..=newest`, from `from`, and the probes made.
    async fn search(from: i64, newest: i64) -> (i64, Option<i64>, usize) {
        let probes = Mutex::new(BTreeSet::new());
        let count = Mutex::new(0);
        let (found, next) = newest_version(from, |v| {
            probes.lock().unwrap().insert(v);
            *count.lock().unwrap() += 1;
            async move { Ok((0..=newest).contains(&v).then(|| meta(v))) }
        })
        .await
        .unwrap();
        let made = *count.lock().unwrap();
        (found, next.map(|m| m.last_modified.timestamp()), made)
    }

    #[tokio::test]
    async fn the_newest_version_is_found_by_name_in_log_probes() {
        assert_eq!(search(7, 7).await, (7, None, 1), "caught up: one probe");
        assert_eq!(search(7, 8).await, (8, Some(8), 2));
        for (from, newest) in [(0, 1), (0, 2), (0, 3), (5, 100), (3, 1_000_000), (0, 1023)] {
            let (found, next, probes) = search(from, newest).await;
            assert_eq!(found, newest, "from {from}");
            assert_eq!(next, Some(from + 1), "the first commit the mirror lacks");
            let lag = (newest - from) as f64;
            assert!(
                probes as f64 <= 2.0 * lag.log2().ceil() + 3.0,
                "{probes} probes for a lag of {lag}"
            );
        }
    }

    #[test]
    fn durations_read_as_an_operator_says_them() {
        assert_eq!(duration_text(0), "0s");
        assert_eq!(duration_text(75), "1m15s");
        assert_eq!(duration_text(3725), "1h02m");
        assert_eq!(duration_text(90_000), "1d01h");
    }

    #[test]
    fn the_text_table_aligns_its_columns() {
        let line = TableStatus {
            glue_table: "lake.orders".into(),
            delta_table: Some("s3://lake/orders".into()),
            state: State::Behind,
            mirrored_version: Some(3),
            mirrored_at: Some("2026-12-01T10:00:00Z".into()),
            newest_version: Some(5),
            lag_versions: Some(2),
            lag_seconds: Some(75),
            last_error: Some("a first line\nand a second".into()),
            last_error_at: None,
            error: None,
            catalog_managed: None,
        };
        let text = table_text(&[line]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].find("STATE"), lines[1].find("behind"), "{text}");
        assert!(lines[1].contains("1m15s "), "{text}");
        assert!(
            lines[1].ends_with("  a first line"),
            "only the first line: {text}"
        );
    }
}
