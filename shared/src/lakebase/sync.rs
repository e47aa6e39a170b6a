//! `lakebase-sync`: a Delta table version into a PostgreSQL table.
//!
//! Full refresh: in one transaction, under an advisory lock per target, the rows are loaded
//! with binary `COPY` into a new table, the primary key is built, the grants of the old table
//! are copied, the old table is dropped and the new one renamed into its place, and
//! `lakemirror.sync_state` records the Delta version. Readers see the old table or the new
//! one, never an empty or partial one; a crash anywhere rolls everything back.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures::{SinkExt, StreamExt};
use serde::Serialize;
use tokio_postgres::{Client, Transaction};

use super::changes::{FileChanges, file_changes, full_refresh_is_cheaper};
use super::config::{Conflict, Mode, Source, SyncedTable};
use super::copy::{HEADER, Rejected, TRAILER, encode_rows};
use super::postgres::{TableName, pg_error, quote_ident, quote_literal};
use super::read::{Rows, SourceColumn, deleted_positions, read_file, source_columns};
use crate::delta::actions::{Add, Metadata, unsupported_feature};
use crate::delta::{CommitsSince, DeltaLog, DeltaSnapshot};
use crate::error::{Error, Result};
use crate::storage::{IoCounters, TableStorage};
use crate::unity::UnityCatalog;

/// The state table, in the target database.
pub const STATE_TABLE: &str = "\"lakemirror\".\"sync_state\"";
/// COPY data is sent in chunks of about this size.
const CHUNK_BYTES: usize = 4 << 20;

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
}

/// What `lakemirror.sync_state` says about a target.
#[derive(Debug, Clone)]
struct SyncState {
    version: i64,
    rows: i64,
    /// The Delta metadata at `version` (absent in rows written before it was recorded).
    metadata: Option<Metadata>,
}

/// Row counts of one applied sync.
#[derive(Debug, Clone, Copy, Default)]
struct Applied {
    version: i64,
    inserted: u64,
    updated: u64,
    deleted: u64,
    up_to_date: bool,
}

/// Syncs one table, up to Delta version `to_version` (the newest when None). A source named
/// `catalog.schema.table` is resolved through `unity` (Unity Catalog).
pub async fn lakebase_sync(
    client: &mut Client,
    table: &SyncedTable,
    to_version: Option<i64>,
    unity: Option<&UnityCatalog>,
) -> Result<LakebaseReport> {
    let started = Instant::now();
    let counters = Arc::new(IoCounters::default());
    let store = match &table.source {
        Source::Path(uri) => TableStorage::open(uri, counters)?,
        Source::UnityCatalog { .. } => {
            let uc = unity.ok_or_else(|| {
                Error::InvalidInput(format!(
                    "source {} is a Unity Catalog table: set UC_URL (--uc-url) and UC_TOKEN (--uc-token) so lakemirror can resolve it, or give source.path (the table's storage location)",
                    table.source
                ))
            })?;
            crate::unity::open_table(uc, &table.source.to_string(), counters).await?
        }
    };
    let log = DeltaLog::new(store);
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
    let exists = tx
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&target.sql()])
        .await
        .map_err(|e| pg_error("looking for the target table", e))?
        .get::<_, bool>(0);
    if exists && state.is_none() && table.conflict_on_existing == Conflict::Error {
        return Err(Error::InvalidInput(format!(
            "{target} exists and was not created by lakemirror; nothing was changed. Set sync.conflict_on_existing = \"replace\" (--conflict-on-existing replace) to replace it, or choose another target.table_name"
        )));
    }
    if table.mode == Mode::Incremental
        && exists
        && let Some(state) = &state
    {
        let increment = tx
            .savepoint("lakemirror_increment")
            .await
            .map_err(|e| pg_error("starting the increment", e))?;
        match apply_increment(&increment, &log, table, state, to_version).await? {
            Some(applied) => {
                increment
                    .commit()
                    .await
                    .map_err(|e| pg_error("finishing the increment", e))?;
                tx.commit()
                    .await
                    .map_err(|e| pg_error(&format!("committing the increment of {target}"), e))?;
                return Ok(report(table, Mode::Incremental, applied, started));
            }
            None => increment
                .rollback()
                .await
                .map_err(|e| pg_error("abandoning the increment", e))?,
        }
    }
    let applied = full_refresh(&tx, &log, table, exists, state.as_ref(), to_version).await?;
    tx.commit()
        .await
        .map_err(|e| pg_error(&format!("committing the refresh of {target}"), e))?;
    Ok(report(table, Mode::FullRefresh, applied, started))
}

/// Replaces the target with the rows of the Delta version: loaded into a new table, which
/// takes the old one's place, grants and name.
async fn full_refresh(
    tx: &Transaction<'_>,
    log: &DeltaLog,
    table: &SyncedTable,
    exists: bool,
    state: Option<&SyncState>,
    to_version: Option<i64>,
) -> Result<Applied> {
    let store = log.table();
    let uri = store.root_uri().to_string();
    let target = &table.target;
    let snapshot = log.snapshot(to_version).await?;
    let metadata = readable_metadata(&uri, &snapshot)?;
    let columns = source_columns(&uri, metadata)?;
    check_primary_key(&uri, &columns, &table.primary_key)?;
    if exists && state.map(|s| s.version) == Some(snapshot.version) {
        return Ok(Applied {
            version: snapshot.version,
            up_to_date: true,
            ..Applied::default()
        });
    }
    let previous_rows: i64 = if exists {
        tx.query_one(&format!("SELECT count(*) FROM {}", target.sql()), &[])
            .await
            .map_err(|e| pg_error("counting the rows replaced", e))?
            .get(0)
    } else {
        0
    };

    // The new table, loaded before the old one is touched.
    let staging = target.sibling(&format!(
        "lakemirror_new_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
    let column_list: Vec<String> = columns
        .iter()
        .map(|c| {
            let not_null = if table.primary_key.contains(&c.copy.name) {
                " NOT NULL"
            } else {
                ""
            };
            format!(
                "{} {}{not_null}",
                quote_ident(&c.copy.name),
                c.copy.pg.sql()
            )
        })
        .collect();
    // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema exists.
    let schema_exists: bool = tx
        .query_one(
            "SELECT to_regnamespace($1) IS NOT NULL",
            &[&quote_ident(&target.schema)],
        )
        .await
        .map_err(|e| pg_error("looking for the target schema", e))?
        .get(0);
    if !schema_exists {
        let schema = quote_ident(&target.schema);
        tx.batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .map_err(|e| pg_error(&format!("creating schema {schema}"), e))?;
    }
    tx.batch_execute(&format!(
        "CREATE TABLE {} ({})",
        staging.sql(),
        column_list.join(", ")
    ))
    .await
    .map_err(|e| pg_error(&format!("creating {staging}"), e))?;
    let mut files: Vec<_> = snapshot.active.files.values().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let loaded = copy_rows(
        tx,
        store,
        &columns,
        files.into_iter().map(|add| (add.clone(), Rows::Live)),
        &staging,
        table,
    )
    .await?;
    crate::crash::point("lakebase-after-copy");
    if !table.primary_key.is_empty() {
        let keys: Vec<String> = table.primary_key.iter().map(|k| quote_ident(k)).collect();
        tx.batch_execute(&format!(
            "ALTER TABLE {} ADD CONSTRAINT {} PRIMARY KEY ({})",
            staging.sql(),
            quote_ident(&pkey_name(&staging.table)),
            keys.join(", ")
        ))
        .await
        .map_err(|e| duplicate_key(target, &uri, table.show_values, e))?;
    }
    crate::crash::point("lakebase-after-index");
    if exists {
        copy_grants(tx, target, &staging).await?;
        tx.batch_execute(&format!("DROP TABLE {}", target.sql()))
            .await
            .map_err(|e| pg_error(&format!("dropping the old {target}"), e))?;
    }
    tx.batch_execute(&format!(
        "ALTER TABLE {} RENAME TO {}; COMMENT ON TABLE {} IS {}",
        staging.sql(),
        quote_ident(&target.table),
        target.sql(),
        quote_literal(&format!(
            "Mirrored by lakemirror from {uri}: a full refresh replaces it, do not edit"
        ))
    ))
    .await
    .map_err(|e| pg_error(&format!("renaming the new table to {target}"), e))?;
    if !table.primary_key.is_empty() {
        tx.batch_execute(&format!(
            "ALTER INDEX {} RENAME TO {}",
            staging.sibling(&pkey_name(&staging.table)).sql(),
            quote_ident(&pkey_name(&target.table))
        ))
        .await
        .map_err(|e| pg_error("naming the primary key", e))?;
    }
    crate::crash::point("lakebase-after-swap");
    let rows = i64::try_from(loaded).unwrap_or(i64::MAX);
    write_state(
        tx,
        table,
        &uri,
        Mode::FullRefresh,
        snapshot.version,
        rows,
        metadata,
    )
    .await?;
    Ok(Applied {
        version: snapshot.version,
        inserted: loaded,
        updated: 0,
        deleted: u64::try_from(previous_rows).unwrap_or(0),
        up_to_date: false,
    })
}

/// Applies the commits after the synced version to the target by primary key. None when
/// they cannot be applied from the log alone (cleaned up, removes without partition values,
/// a data file already vacuumed): the caller refreshes fully instead.
async fn apply_increment(
    tx: &Transaction<'_>,
    log: &DeltaLog,
    table: &SyncedTable,
    state: &SyncState,
    to_version: Option<i64>,
) -> Result<Option<Applied>> {
    let store = log.table();
    let uri = store.root_uri().to_string();
    let target = &table.target;
    if to_version.is_some_and(|v| v < state.version) {
        return Err(Error::InvalidInput(format!(
            "{target} is at Delta version {} already; an incremental sync cannot go back to {}. Run a full refresh (--mode full_refresh) to load an older version",
            state.version,
            to_version.unwrap_or_default()
        )));
    }
    let commits = match log.commits_since(state.version, to_version, None).await? {
        CommitsSince::Contiguous(commits) => commits,
        CommitsSince::Gap { first_available } => {
            tracing::warn!(%target, synced = state.version, ?first_available, "the commits after the synced version were cleaned up from the Delta log; refreshing fully");
            return Ok(None);
        }
    };
    let Some(last) = commits.last() else {
        return Ok(Some(Applied {
            version: state.version,
            up_to_date: true,
            ..Applied::default()
        }));
    };
    let version = last.version;

    // The schema at the end of the range: the state's, unless a commit changed it.
    let changed_metadata = commits
        .iter()
        .any(|c| c.metadata.is_some() || c.protocol.is_some());
    let metadata = match (&state.metadata, changed_metadata) {
        (Some(m), false) => m.clone(),
        _ => readable_metadata(&uri, &log.snapshot(Some(version)).await?)?.clone(),
    };
    let columns = source_columns(&uri, &metadata)?;
    check_primary_key(&uri, &columns, &table.primary_key)?;
    let target_key = primary_key_of(tx, target).await?;
    if target_key != table.primary_key {
        return Err(Error::InvalidInput(format!(
            "{target} has primary key ({}) but sync.primary_key is ({}); run a full refresh (--mode full_refresh) to rebuild it",
            target_key.join(", "),
            table.primary_key.join(", ")
        )));
    }
    let existing = target_columns(tx, target).await?;
    let added_columns = schema_change(&uri, target, &existing, &columns)?;

    let changes = match file_changes(&commits, !metadata.partition_columns.is_empty()) {
        Ok(changes) => changes,
        Err(reason) => {
            tracing::warn!(%target, %reason, "the commits cannot be applied row by row; refreshing fully");
            return Ok(None);
        }
    };
    if let Some(read) = changes.rows_read()
        && full_refresh_is_cheaper(read, u64::try_from(state.rows).unwrap_or(0))
    {
        tracing::info!(%target, rows_read = read, table_rows = state.rows, "the changed files hold most of the table (Delta rewrote them whole); a full refresh is cheaper");
        return Ok(None);
    }
    for column in &added_columns {
        tx.batch_execute(&format!(
            "ALTER TABLE {} ADD COLUMN {} {}",
            target.sql(),
            quote_ident(&column.copy.name),
            column.copy.pg.sql()
        ))
        .await
        .map_err(|e| {
            pg_error(
                &format!("adding column {} to {target}", column.copy.name),
                e,
            )
        })?;
    }
    let mut applied = Applied {
        version,
        ..Applied::default()
    };
    if !changes.is_empty() {
        match apply_changes(tx, store, table, &columns, &changes).await {
            Ok((inserted, updated, deleted)) => {
                applied.inserted = inserted;
                applied.updated = updated;
                applied.deleted = deleted;
            }
            Err(Error::Storage(object_store::Error::NotFound { path, .. })) => {
                tracing::warn!(%target, file = %path, "a data file the increment needs is gone (vacuumed); refreshing fully");
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    crate::crash::point("lakebase-increment-after-apply");
    let rows = state.rows + applied.inserted as i64 - applied.deleted as i64;
    write_state(tx, table, &uri, Mode::Incremental, version, rows, &metadata).await?;
    Ok(Some(applied))
}

/// Loads the changed rows into temporary tables and applies them: keys that left the table
/// are deleted, rows at the end of the range are inserted or updated (unchanged rows are not
/// written). Returns (inserted, updated, deleted).
async fn apply_changes(
    tx: &Transaction<'_>,
    store: &TableStorage,
    table: &SyncedTable,
    columns: &[SourceColumn],
    changes: &FileChanges,
) -> Result<(u64, u64, u64)> {
    let target = &table.target;
    let upserts = TableName {
        schema: "pg_temp".into(),
        table: "lakemirror_upserts".into(),
    };
    let deletes = TableName {
        schema: "pg_temp".into(),
        table: "lakemirror_deletes".into(),
    };
    let all: Vec<String> = columns.iter().map(|c| quote_ident(&c.copy.name)).collect();
    let keys: Vec<String> = table.primary_key.iter().map(|k| quote_ident(k)).collect();
    let key_columns: Vec<SourceColumn> = table
        .primary_key
        .iter()
        .filter_map(|k| columns.iter().find(|c| &c.copy.name == k).cloned())
        .collect();
    tx.batch_execute(&format!(
        "CREATE TEMP TABLE lakemirror_upserts ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA;
         CREATE TEMP TABLE lakemirror_deletes ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA",
        all.join(", "),
        target.sql(),
        keys.join(", "),
        target.sql()
    ))
    .await
    .map_err(|e| pg_error("creating the temporary tables of the increment", e))?;

    // Rows at the end: added files, and rows a deletion vector no longer deletes.
    let mut rows_in = Vec::new();
    let mut rows_out = Vec::new();
    for add in &changes.added {
        rows_in.push((add.clone(), Rows::Live));
    }
    for add in &changes.removed {
        rows_out.push((add.clone(), Rows::Live));
    }
    for (start, end) in &changes.redeleted {
        let before = deleted_positions(store, start).await?;
        let after = deleted_positions(store, end).await?;
        rows_in.push((end.clone(), Rows::At(&before - &after)));
        rows_out.push((end.clone(), Rows::At(&after - &before)));
    }
    copy_rows(tx, store, columns, rows_in, &upserts, table).await?;
    copy_rows(tx, store, &key_columns, rows_out, &deletes, table).await?;
    crate::crash::point("lakebase-increment-after-copy");

    let duplicate = tx
        .query_opt(
            &format!(
                "SELECT {} FROM lakemirror_upserts GROUP BY {} HAVING count(*) > 1 LIMIT 1",
                table
                    .primary_key
                    .iter()
                    .map(|k| format!("{}::text", quote_ident(k)))
                    .collect::<Vec<_>>()
                    .join(", "),
                keys.join(", ")
            ),
            &[],
        )
        .await
        .map_err(|e| pg_error("looking for duplicate keys", e))?;
    if let Some(row) = duplicate {
        let pairs: Vec<(String, String)> = table
            .primary_key
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let value: Option<String> = row.get(i);
                (k.clone(), value.unwrap_or_else(|| "NULL".into()))
            })
            .collect();
        return Err(Error::InvalidInput(format!(
            "{target}: the Delta table {} holds the primary key ({}) more than once; nothing was changed. Fix the source or sync.primary_key",
            store.root_uri(),
            key_text(&pairs, table.show_values)
        )));
    }
    tx.batch_execute("ANALYZE lakemirror_upserts; ANALYZE lakemirror_deletes")
        .await
        .map_err(|e| pg_error("analyzing the increment", e))?;

    let same_key = |a: &str, b: &str| {
        table
            .primary_key
            .iter()
            .map(|k| format!("{a}.{k} = {b}.{k}", k = quote_ident(k)))
            .collect::<Vec<_>>()
            .join(" AND ")
    };
    let deleted = tx
        .execute(
            &format!(
                "DELETE FROM {} t USING lakemirror_deletes d WHERE {} AND NOT EXISTS (SELECT 1 FROM lakemirror_upserts u WHERE {})",
                target.sql(),
                same_key("t", "d"),
                same_key("u", "d")
            ),
            &[],
        )
        .await
        .map_err(|e| pg_error(&format!("deleting rows from {target}"), e))?;
    let values: Vec<String> = columns
        .iter()
        .filter(|c| !table.primary_key.contains(&c.copy.name))
        .map(|c| quote_ident(&c.copy.name))
        .collect();
    let on_conflict = if values.is_empty() {
        "DO NOTHING".to_string()
    } else {
        format!(
            "DO UPDATE SET {} WHERE ({}) IS DISTINCT FROM ({})",
            values
                .iter()
                .map(|v| format!("{v} = EXCLUDED.{v}"))
                .collect::<Vec<_>>()
                .join(", "),
            values
                .iter()
                .map(|v| format!("t.{v}"))
                .collect::<Vec<_>>()
                .join(", "),
            values
                .iter()
                .map(|v| format!("EXCLUDED.{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let row = tx
        .query_one(
            &format!(
                "WITH written AS (
                   INSERT INTO {} AS t ({cols}) SELECT {cols} FROM lakemirror_upserts
                   ON CONFLICT ({}) {on_conflict}
                   RETURNING (xmax = 0) AS inserted)
                 SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM written",
                target.sql(),
                keys.join(", "),
                cols = all.join(", ")
            ),
            &[],
        )
        .await
        .map_err(|e| pg_error(&format!("writing rows into {target}"), e))?;
    let (inserted, updated): (i64, i64) = (row.get(0), row.get(1));
    Ok((
        u64::try_from(inserted).unwrap_or(0),
        u64::try_from(updated).unwrap_or(0),
        deleted,
    ))
}

/// The snapshot's metadata, when the table has one and needs no reader feature lakemirror
/// lacks.
fn readable_metadata<'a>(uri: &str, snapshot: &'a DeltaSnapshot) -> Result<&'a Metadata> {
    let (Some(metadata), Some(protocol)) = (snapshot.metadata(), snapshot.protocol()) else {
        return Err(Error::malformed(uri, "no metaData or protocol action"));
    };
    if let Some(feature) = unsupported_feature(protocol, Some(metadata)) {
        return Err(Error::UnsupportedFeature {
            table: uri.to_string(),
            feature,
        });
    }
    Ok(metadata)
}

/// Every configured key column exists in the source.
fn check_primary_key(uri: &str, columns: &[SourceColumn], primary_key: &[String]) -> Result<()> {
    for key in primary_key {
        if !columns.iter().any(|c| &c.copy.name == key) {
            return Err(Error::InvalidInput(format!(
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

/// The target's primary key columns, in key order.
async fn primary_key_of(tx: &Transaction<'_>, target: &TableName) -> Result<Vec<String>> {
    let rows = tx
        .query(
            "SELECT a.attname::text FROM pg_index i
             CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE i.indrelid = $1::text::regclass AND i.indisprimary ORDER BY k.n",
            &[&target.sql()],
        )
        .await
        .map_err(|e| pg_error(&format!("reading the primary key of {target}"), e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// The target's columns and their types as PostgreSQL spells them.
async fn target_columns(tx: &Transaction<'_>, target: &TableName) -> Result<Vec<(String, String)>> {
    let rows = tx
        .query(
            "SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute
             WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&target.sql()],
        )
        .await
        .map_err(|e| pg_error(&format!("reading the columns of {target}"), e))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

/// The source columns the target lacks (they become `ADD COLUMN`); any other difference
/// (a column dropped, renamed or retyped) needs a full refresh.
fn schema_change<'a>(
    uri: &str,
    target: &TableName,
    existing: &[(String, String)],
    columns: &'a [SourceColumn],
) -> Result<Vec<&'a SourceColumn>> {
    let needs_refresh = |what: String| {
        Error::InvalidInput(format!(
            "{target}: {what} in {uri}; an incremental sync only adds columns. Run a full refresh (--mode full_refresh, or sync.mode = \"full_refresh\" once) to rebuild the table"
        ))
    };
    for (name, _) in existing {
        if !columns.iter().any(|c| &c.copy.name == name) {
            return Err(needs_refresh(format!("column {name:?} is gone")));
        }
    }
    let mut added = Vec::new();
    for column in columns {
        match existing.iter().find(|(name, _)| name == &column.copy.name) {
            None => added.push(column),
            Some((_, pg)) if !same_type(pg, &column.copy.pg.sql()) => {
                return Err(needs_refresh(format!(
                    "column {:?} changed type from {pg} to {}",
                    column.copy.name,
                    column.copy.pg.sql()
                )));
            }
            Some(_) => {}
        }
    }
    Ok(added)
}

/// Whether PostgreSQL's spelling of a type (`format_type`) is the type lakemirror creates.
fn same_type(postgres: &str, ours: &str) -> bool {
    let canonical = |t: &str| {
        t.to_ascii_lowercase()
            .replace("timestamp with time zone", "timestamptz")
            .replace("timestamp without time zone", "timestamp")
            .replace("double precision", "float8")
            .replace("real", "float4")
            .replace("smallint", "int2")
            .replace("integer", "int4")
            .replace("bigint", "int8")
            .replace("boolean", "bool")
            .replace("character varying", "varchar")
            .replace(' ', "")
    };
    canonical(postgres) == canonical(ours)
}

async fn read_state(tx: &Transaction<'_>, target: &TableName) -> Result<Option<SyncState>> {
    let row = tx
        .query_opt(
            &format!(
                "SELECT delta_version, rows, delta_metadata::text FROM {STATE_TABLE} WHERE target = $1"
            ),
            &[&target.sql()],
        )
        .await
        .map_err(|e| pg_error("reading lakemirror.sync_state", e))?;
    Ok(row.map(|row| SyncState {
        version: row.get(0),
        rows: row.get(1),
        metadata: row
            .get::<_, Option<String>>(2)
            .and_then(|text| serde_json::from_str(&text).ok()),
    }))
}

async fn write_state(
    tx: &Transaction<'_>,
    table: &SyncedTable,
    uri: &str,
    mode: Mode,
    version: i64,
    rows: i64,
    metadata: &Metadata,
) -> Result<()> {
    let metadata = serde_json::to_string(metadata)?;
    tx.execute(
        &format!(
            "INSERT INTO {STATE_TABLE} (target, source, mode, delta_version, rows, synced_at, delta_metadata)
             VALUES ($1, $2, $3, $4, $5, now(), $6::text::jsonb)
             ON CONFLICT (target) DO UPDATE SET source = EXCLUDED.source, mode = EXCLUDED.mode,
               delta_version = EXCLUDED.delta_version, rows = EXCLUDED.rows, synced_at = now(),
               delta_metadata = EXCLUDED.delta_metadata"
        ),
        &[
            &table.target.sql(),
            &uri,
            &mode.as_str(),
            &version,
            &rows,
            &metadata,
        ],
    )
    .await
    .map_err(|e| pg_error("recording the synced version", e))?;
    crate::crash::point("lakebase-after-state");
    Ok(())
}

fn report(table: &SyncedTable, mode: Mode, applied: Applied, started: Instant) -> LakebaseReport {
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
    }
}

/// The schema and table that record what was synced (created once, by whoever comes first).
async fn ensure_state_table(client: &mut Client) -> Result<()> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_error("starting a transaction", e))?;
    // Each step only when needed: the IF NOT EXISTS forms check privileges (CREATE on the
    // database, ownership of the table) even when there is nothing to do, and the state
    // table may belong to another user of the same database.
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('lakemirror:sync_state'));
         DO $$ BEGIN
           IF to_regnamespace('lakemirror') IS NULL THEN
             CREATE SCHEMA \"lakemirror\";
           END IF;
           IF to_regclass('lakemirror.sync_state') IS NULL THEN
             CREATE TABLE {STATE_TABLE} (
               target text PRIMARY KEY,
               source text NOT NULL,
               mode text NOT NULL,
               delta_version bigint NOT NULL,
               rows bigint NOT NULL,
               synced_at timestamptz NOT NULL,
               delta_metadata jsonb
             );
           ELSIF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'lakemirror.sync_state'::regclass
                             AND attname = 'delta_metadata' AND NOT attisdropped) THEN
             ALTER TABLE {STATE_TABLE} ADD COLUMN delta_metadata jsonb;
           END IF;
         END $$"
    ))
    .await
    .map_err(|e| {
        pg_error(
            "creating lakemirror.sync_state (the user needs CREATE on the database)",
            e,
        )
    })?;
    tx.commit().await.map_err(|e| pg_error("committing", e))
}

/// Streams `rows` of each file into `into` (columns named, in `columns` order); returns
/// the row count.
async fn copy_rows(
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
fn rejected(
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
    Error::InvalidInput(format!(
        "{}: column {} of {row} {}; nothing was changed",
        table.target, r.column, r.reason
    ))
}

/// A duplicate primary key, with the key PostgreSQL reports (`Key (id)=(7) is
/// duplicated.`), its values hidden unless `show_values`.
fn duplicate_key(
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
            Error::InvalidInput(format!(
                "{target}: the Delta table {uri} holds the primary key more than once ({shown}); nothing was changed. Fix the source or sync.primary_key"
            ))
        }
        None => pg_error("building the primary key", e),
    }
}

/// How an error names a row's key: `id=42` with `show_values`, else the key columns and a
/// hash of the values (`id, hash 9c1b…`), which tells rows apart without carrying user
/// data into logs and dead-letter messages. `lakemirror lakebase-sync --show-values` shows
/// the values.
fn key_text(pairs: &[(String, String)], show_values: bool) -> String {
    if show_values {
        return pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ");
    }
    let columns: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    let values: Vec<&str> = pairs.iter().map(|(_, v)| v.as_str()).collect();
    let hash = crate::delta::actions::content_hash(values.join("\u{0}").as_bytes());
    format!(
        "{} with values hashed to {hash:016x} (run the CLI with --show-values to see them)",
        columns.join(", ")
    )
}

/// The old table's owner and table privileges (from its ACL: every grant, with its grant
/// option), given to the new table. Column-level grants are not carried over.
async fn copy_grants(tx: &Transaction<'_>, from: &TableName, to: &TableName) -> Result<()> {
    let owner: String = tx
        .query_one(
            "SELECT pg_get_userbyid(relowner)::text FROM pg_class WHERE oid = $1::text::regclass",
            &[&from.sql()],
        )
        .await
        .map_err(|e| pg_error(&format!("reading the owner of {from}"), e))?
        .get(0);
    let rows = tx
        .query(
            "SELECT a.grantee = 0, pg_get_userbyid(a.grantee)::text, a.privilege_type, a.is_grantable
             FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = $1::text::regclass AND a.grantee <> c.relowner",
            &[&from.sql()],
        )
        .await
        .map_err(|e| pg_error(&format!("reading the grants on {from}"), e))?;
    for row in rows {
        let (public, grantee, privilege, grantable): (bool, String, String, bool) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let grantee = if public {
            "PUBLIC".to_string()
        } else {
            quote_ident(&grantee)
        };
        // privilege_type is one of PostgreSQL's keywords (SELECT, INSERT, ...).
        if !privilege
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == ' ')
        {
            continue;
        }
        let option = if grantable { " WITH GRANT OPTION" } else { "" };
        tx.batch_execute(&format!(
            "GRANT {privilege} ON {} TO {grantee}{option}",
            to.sql()
        ))
        .await
        .map_err(|e| pg_error(&format!("copying a grant of {from}"), e))?;
    }
    let current: String = tx
        .query_one("SELECT current_user::text", &[])
        .await
        .map_err(|e| pg_error("reading the current user", e))?
        .get(0);
    if owner != current {
        tx.batch_execute(&format!(
            "ALTER TABLE {} OWNER TO {}",
            to.sql(),
            quote_ident(&owner)
        ))
        .await
        .map_err(|e| {
            pg_error(
                &format!(
                    "giving the new table to {from}'s owner {owner} (the sync's user must be a member of that role)"
                ),
                e,
            )
        })?;
    }
    Ok(())
}

/// The primary key's name: `<table>_pkey`, shortened to fit PostgreSQL's 63 bytes.
fn pkey_name(table: &str) -> String {
    let mut end = table.len().min(58);
    while !table.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}_pkey", &table[..end])
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
