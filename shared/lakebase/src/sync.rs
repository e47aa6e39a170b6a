//! `lakebase-sync`: a Delta table version into a PostgreSQL table, by full refresh
//! ([`crate::full_refresh`]) or incrementally ([`crate::incremental`]), the version recorded
//! in [`crate::state`] in the same transaction. What both share: the report, the COPY of
//! rows, and the errors that name a row.
//!
//! A circle, on purpose: this file calls the two ways of syncing, and they call back into
//! the parts they share, which live here (one place for the COPY and its errors) rather
//! than in a fourth file that each of the three would import.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use tokio_postgres::{Client, Transaction};

use crate::config::{Conflict, Mode, Source, SyncedTable};
use crate::copy::{HEADER, Rejected, TRAILER, encode_rows};
use crate::error::{Error, Result, Setting};
use crate::full_refresh::full_refresh;
use crate::incremental::apply_increment;
use crate::postgres::{TableName, pg_error, quote_ident};
use crate::read::{Rows, SourceColumn, default_warnings, geo_storage, read_file};
use crate::state::{ensure_state_table, read_state};
use crate::types::{GeoStorage, TargetTypes};
use lakemirror_delta::actions::{Add, Metadata, unsupported_feature};
use lakemirror_delta::catalog_managed::{self, CatalogManagedReport};
use lakemirror_delta::{DeltaLog, DeltaSnapshot};
use lakemirror_storage::{IoCounters, ObjectStores, TableStorage};
use lakemirror_unity::UnityCatalog;

/// COPY data is sent in chunks of about this size.
pub(crate) const CHUNK_BYTES: usize = 4 << 20;

/// The outcome of one table's sync: the CLI's last line.
#[derive(Debug, Clone, Serialize)]
pub struct LakebaseReport {
    pub source: String,
    pub target: String,
    pub mode: &'static str,
    pub delta_version: i64,
    pub rows_inserted: u64,
    pub rows_updated: u64,
    pub rows_deleted: u64,
    /// True when the target was already at this Delta version.
    pub up_to_date: bool,
    pub elapsed_ms: u64,
    /// Of a catalog-managed Delta table: what its catalog ratified, or why only the published
    /// log was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_managed: Option<CatalogManagedReport>,
    /// Of a table with geometry or geography columns: `postgis` (PostGIS types, the
    /// extension being installed in the target database) or `wkb_bytea` (WKB in `bytea`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub geospatial: Option<GeoStorage>,
    /// What the target does not get as Delta has it (a column default that is not a
    /// literal), naming the column.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Row counts of one applied sync.
#[derive(Debug, Clone, Default)]
pub(crate) struct Applied {
    pub(crate) version: i64,
    pub(crate) inserted: u64,
    pub(crate) updated: u64,
    pub(crate) deleted: u64,
    pub(crate) up_to_date: bool,
    /// How the geospatial columns are stored, when the table has any.
    pub(crate) geospatial: Option<GeoStorage>,
    pub(crate) warnings: Vec<String>,
    /// How a catalog-managed table was read (the log's tail); None for any other table.
    pub(crate) catalog_managed: Option<lakemirror_delta::CatalogManaged>,
}

impl Applied {
    /// With what the columns say about the target: how geo values are stored, the defaults
    /// left out (each also logged as a warning).
    pub(crate) fn with_columns(mut self, target: &TableName, columns: &[SourceColumn]) -> Self {
        self.geospatial = geo_storage(columns);
        self.warnings = default_warnings(columns);
        for warning in &self.warnings {
            tracing::warn!(%target, "{warning}");
        }
        self
    }
}

/// Syncs one table, up to Delta version `to_version` (the newest when None). A source named
/// `catalog.schema.table` is resolved through `unity` (Unity Catalog).
pub async fn lakebase_sync(
    stores: &ObjectStores,
    client: &mut Client,
    table: &SyncedTable,
    to_version: Option<i64>,
    unity: Option<&UnityCatalog>,
) -> Result<LakebaseReport> {
    let started = Instant::now();
    let counters = Arc::new(IoCounters::default());
    let store = match &table.source {
        Source::Path(uri) => stores.open(uri, counters)?,
        Source::UnityCatalog { .. } => {
            let uc = unity.ok_or_else(|| {
                Error::Config(format!(
                    "source {} is a Unity Catalog table: set UC_URL and UC_TOKEN so lakemirror can resolve it, or give source.path (the table's storage location)",
                    table.source
                ))
                .fixed_by(Setting::UnityCatalog)
            })?;
            lakemirror_unity::open_table(stores, uc, &table.source.to_string(), counters).await?
        }
    };
    let commit_catalog = unity.map(|uc| {
        Arc::new(lakemirror_unity::UnityCommits::new(uc.clone()))
            as Arc<dyn lakemirror_delta::CommitCatalog>
    });
    let mut log = DeltaLog::new(store).with_commit_catalog(commit_catalog);
    ensure_state_table(client).await?;

    let target = &table.target;
    let mut tx = client
        .transaction()
        .await
        .map_err(|e| pg_error("starting a transaction", e))?;
    // Concurrent runs for the same target wait here instead of interleaving.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('lakemirror:' || $1))",
        &[&target.sql()],
    )
    .await
    .map_err(|e| pg_error("waiting for the target's lock", e))?;
    let state = read_state(&tx, target).await?;
    let types = target_types(&tx).await?;
    let exists = tx
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&target.sql()])
        .await
        .map_err(|e| pg_error("looking for the target table", e))?
        .get::<_, bool>(0);
    if exists && state.is_none() && table.conflict_on_existing == Conflict::Error {
        return Err(Error::Target(format!(
            "{target} exists and was not created by lakemirror; nothing was changed. Set sync.conflict_on_existing = \"replace\" to replace it, or choose another target.table_name"
        ))
        .fixed_by(Setting::ConflictOnExisting));
    }
    if table.mode == Mode::Incremental
        && exists
        && let Some(state) = &state
    {
        // A catalog-managed table's newest commits may be ratified, not yet published: the
        // log's tail, which its definition calls for (read only for tables whose catalog
        // names them).
        if state
            .metadata
            .as_ref()
            .and_then(catalog_managed::catalog_table_id)
            .is_some()
        {
            log = log.with_its_tail().await?;
        }
        let increment = tx
            .savepoint("lakemirror_increment")
            .await
            .map_err(|e| pg_error("starting the increment", e))?;
        match apply_increment(&increment, &log, table, state, to_version, &types).await? {
            Some(applied) => {
                increment
                    .commit()
                    .await
                    .map_err(|e| pg_error("finishing the increment", e))?;
                tx.commit()
                    .await
                    .map_err(|e| pg_error(&format!("committing the increment of {target}"), e))?;
                return Ok(LakebaseReport {
                    catalog_managed: log.catalog_managed_report(),
                    ..report(table, Mode::Incremental, applied, started)
                });
            }
            None => increment
                .rollback()
                .await
                .map_err(|e| pg_error("abandoning the increment", e))?,
        }
    }
    let applied =
        full_refresh(&tx, &log, table, exists, state.as_ref(), to_version, &types).await?;
    tx.commit()
        .await
        .map_err(|e| pg_error(&format!("committing the refresh of {target}"), e))?;
    Ok(LakebaseReport {
        catalog_managed: applied.catalog_managed.as_ref().map(Into::into),
        ..report(table, Mode::FullRefresh, applied, started)
    })
}

/// What the target database offers beyond PostgreSQL's types: PostGIS, when the `postgis`
/// extension is installed in it (`pg_extension`), and the schema it lives in.
pub(crate) async fn target_types(tx: &Transaction<'_>) -> Result<TargetTypes> {
    let row = tx
        .query_opt(
            "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
             WHERE e.extname = 'postgis'",
            &[],
        )
        .await
        .map_err(|e| pg_error("looking for the PostGIS extension", e))?;
    Ok(TargetTypes {
        postgis_schema: row.map(|r| r.get(0)),
    })
}

/// The snapshot's metadata, when the table has one and needs no reader feature lakemirror
/// lacks.
pub(crate) fn readable_metadata<'a>(
    uri: &str,
    snapshot: &'a DeltaSnapshot,
) -> Result<&'a Metadata> {
    let (Some(metadata), Some(protocol)) = (snapshot.metadata(), snapshot.protocol()) else {
        return Err(Error::malformed(uri, "no metaData or protocol action"));
    };
    if let Some(feature) = unsupported_feature(protocol, Some(metadata)) {
        return Err(lakemirror_delta::Error::UnsupportedFeature {
            table: uri.to_string(),
            feature,
        }
        .into());
    }
    Ok(metadata)
}

pub(crate) fn report(
    table: &SyncedTable,
    mode: Mode,
    applied: Applied,
    started: Instant,
) -> LakebaseReport {
    LakebaseReport {
        source: table.source.to_string(),
        target: table.target.to_string(),
        mode: mode.as_str(),
        delta_version: applied.version,
        rows_inserted: applied.inserted,
        rows_updated: applied.updated,
        rows_deleted: applied.deleted,
        up_to_date: applied.up_to_date,
        elapsed_ms: started.elapsed().as_millis() as u64,
        catalog_managed: None,
        geospatial: applied.geospatial,
        warnings: applied.warnings,
    }
}

/// Streams `rows` of each file into `into` (columns named, in `columns` order); returns
/// the row count.
pub(crate) async fn copy_rows(
    tx: &Transaction<'_>,
    store: &TableStorage,
    columns: &[SourceColumn],
    files: impl IntoIterator<Item = (Add, Rows)>,
    into: &TableName,
    table: &SyncedTable,
) -> Result<u64> {
    let names: Vec<String> = columns.iter().map(|c| quote_ident(&c.copy.name)).collect();
    let sink = tx
        .copy_in::<_, Bytes>(&format!(
            "COPY {} ({}) FROM STDIN (FORMAT binary)",
            into.sql(),
            names.join(", ")
        ))
        .await
        .map_err(|e| pg_error("starting COPY", e))?;
    futures::pin_mut!(sink);
    let copy_columns: Vec<_> = columns.iter().map(|c| c.copy.clone()).collect();
    let mut buffer = BytesMut::with_capacity(CHUNK_BYTES + (1 << 16));
    buffer.extend_from_slice(HEADER);
    for (add, rows) in files {
        let mut batches = read_file(store, columns, &add, &rows).await?;
        while let Some(arrays) = batches.next().await {
            let arrays = arrays?;
            encode_rows(&copy_columns, &arrays, &mut buffer)
                .map_err(|r| rejected(table, columns, &arrays, &add.path, r))?;
            if buffer.len() >= CHUNK_BYTES {
                sink.send(buffer.split().freeze())
                    .await
                    .map_err(|e| pg_error("sending rows", e))?;
            }
        }
    }
    buffer.extend_from_slice(TRAILER);
    sink.send(buffer.freeze())
        .await
        .map_err(|e| pg_error("sending rows", e))?;
    sink.as_mut()
        .finish()
        .await
        .map_err(|e| pg_error(&format!("loading {}", table.target), e))
}

/// A value PostgreSQL cannot hold, named by the row's key (or its place in the file).
pub(crate) fn rejected(
    table: &SyncedTable,
    columns: &[SourceColumn],
    arrays: &[arrow_array::ArrayRef],
    path: &str,
    r: Rejected,
) -> Error {
    let key: Vec<(String, String)> = table
        .primary_key
        .iter()
        .filter_map(|k| {
            let i = columns.iter().position(|c| &c.copy.name == k)?;
            let formatter = arrow_cast::display::ArrayFormatter::try_new(
                arrays[i].as_ref(),
                &arrow_cast::display::FormatOptions::default(),
            )
            .ok()?;
            Some((k.clone(), formatter.value(r.row).to_string()))
        })
        .collect();
    let row = if key.is_empty() {
        format!("a row of {path}")
    } else {
        format!("the row with {}", key_text(&key, table.show_values))
    };
    let error = Error::Rows(format!(
        "{}: column {} of {row} {}; nothing was changed",
        table.target, r.column, r.reason
    ));
    values_hidden(error, table.show_values || key.is_empty())
}

/// `error`, marked as one whose rows show their values with [`Setting::ShowValues`] when
/// they are hidden.
pub(crate) fn values_hidden(error: Error, shown: bool) -> Error {
    if shown {
        error
    } else {
        error.fixed_by(Setting::ShowValues)
    }
}

/// A duplicate primary key, with the key PostgreSQL reports (`Key (id)=(7) is
/// duplicated.`), its values hidden unless `show_values`.
pub(crate) fn duplicate_key(
    target: &TableName,
    uri: &str,
    show_values: bool,
    e: tokio_postgres::Error,
) -> Error {
    let duplicate = e
        .as_db_error()
        .filter(|db| db.code().code() == "23505")
        .map(|db| db.detail().unwrap_or("").to_string());
    match duplicate {
        Some(detail) => {
            let shown = match detail
                .strip_prefix("Key (")
                .and_then(|rest| rest.split_once(")=("))
                .and_then(|(columns, rest)| Some((columns, rest.rsplit_once(')')?.0)))
            {
                Some((columns, values)) if !show_values => {
                    key_text(&[(columns.to_string(), values.to_string())], false)
                }
                _ if show_values => detail,
                _ => "its values hidden".to_string(),
            };
            let error = Error::Rows(format!(
                "{target}: the Delta table {uri} holds the primary key more than once ({shown}); nothing was changed. Fix the source or sync.primary_key"
            ));
            values_hidden(error, show_values)
        }
        None => pg_error("building the primary key", e),
    }
}

/// How an error names a row's key: `id=42` with `show_values`, else the key columns and a
/// hash of the values (`id, hash 9c1b…`), which tells rows apart without carrying user
/// data into logs and dead-letter messages. `lakemirror lakebase-sync --show-values` shows
/// the values.
pub(crate) fn key_text(pairs: &[(String, String)], show_values: bool) -> String {
    if show_values {
        return pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    let columns: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    let values: Vec<&str> = pairs.iter().map(|(_, v)| v.as_str()).collect();
    let hash = lakemirror_delta::actions::content_hash(values.join("\u{0}").as_bytes());
    format!(
        "{} with values hashed to {hash:016x} (hidden: they may be personal data)",
        columns.join(", ")
    )
}

/// Every configured key column exists in the source.
pub(crate) fn check_primary_key(
    uri: &str,
    columns: &[SourceColumn],
    primary_key: &[String],
) -> Result<()> {
    for key in primary_key {
        if !columns.iter().any(|c| &c.copy.name == key) {
            return Err(Error::Config(format!(
                "sync.primary_key: {uri} has no column {key:?} (columns: {})",
                columns
                    .iter()
                    .map(|c| c.copy.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_hashed_unless_shown() {
        let key = [("id".to_string(), "42".to_string())];
        assert_eq!(key_text(&key, true), "id=42");
        let hidden = key_text(&key, false);
        assert!(
            hidden.starts_with("id with values hashed to ") && !hidden.contains("=42"),
            "{hidden}"
        );
        assert_ne!(
            hidden,
            key_text(&[("id".to_string(), "43".to_string())], false)
        );
    }
}
