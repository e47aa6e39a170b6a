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
use futures::SinkExt;
use serde::Serialize;
use tokio_postgres::{Client, Transaction};

use super::config::{Conflict, Mode, Source, SyncedTable};
use super::copy::{HEADER, Rejected, TRAILER, encode_rows};
use super::postgres::{TableName, pg_error, quote_ident, quote_literal};
use super::read::{SourceColumn, read_file, source_columns};
use crate::delta::DeltaLog;
use crate::delta::actions::unsupported_feature;
use crate::error::{Error, Result};
use crate::storage::{IoCounters, TableStorage};

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

/// Syncs one table.
pub async fn lakebase_sync(client: &mut Client, table: &SyncedTable) -> Result<LakebaseReport> {
    let started = Instant::now();
    let uri = match &table.source {
        Source::Path(uri) => uri.clone(),
        Source::UnityCatalog { .. } => {
            return Err(Error::InvalidInput(format!(
                "source {}: Unity Catalog sources are not supported yet; give source.path (the table's storage location)",
                table.source
            )));
        }
    };
    if table.mode == Mode::Incremental {
        return Err(Error::InvalidInput(format!(
            "{}: sync.mode = incremental is not available in this release; use full_refresh",
            table.target
        )));
    }
    let store = TableStorage::open(&uri, Arc::new(IoCounters::default()))?;
    let snapshot = DeltaLog::new(store.clone()).snapshot(None).await?;
    let (Some(metadata), Some(protocol)) = (snapshot.metadata(), snapshot.protocol()) else {
        return Err(Error::malformed(&uri, "no metaData or protocol action"));
    };
    if let Some(feature) = unsupported_feature(protocol, Some(metadata)) {
        return Err(Error::UnsupportedFeature {
            table: uri.clone(),
            feature,
        });
    }
    let columns = source_columns(&uri, metadata)?;
    for key in &table.primary_key {
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
    ensure_state_table(client).await?;

    let target = &table.target;
    let tx = client
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
    let state = tx
        .query_opt(
            &format!("SELECT delta_version FROM {STATE_TABLE} WHERE target = $1"),
            &[&target.sql()],
        )
        .await
        .map_err(|e| pg_error("reading lakemirror.sync_state", e))?;
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
    if exists && state.as_ref().map(|r| r.get::<_, i64>(0)) == Some(snapshot.version) {
        tx.commit().await.map_err(|e| pg_error("committing", e))?;
        return Ok(report(table, snapshot.version, 0, 0, true, started));
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
    let loaded = copy_rows(&tx, &store, &columns, &snapshot, &staging, table).await?;
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
        .map_err(|e| duplicate_key(target, &uri, e))?;
    }
    if exists {
        copy_grants(&tx, target, &staging).await?;
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
    let rows = i64::try_from(loaded).unwrap_or(i64::MAX);
    tx.execute(
        &format!(
            "INSERT INTO {STATE_TABLE} (target, source, mode, delta_version, rows, synced_at)
             VALUES ($1, $2, $3, $4, $5, now())
             ON CONFLICT (target) DO UPDATE SET source = EXCLUDED.source, mode = EXCLUDED.mode,
               delta_version = EXCLUDED.delta_version, rows = EXCLUDED.rows, synced_at = now()"
        ),
        &[
            &target.sql(),
            &uri,
            &Mode::FullRefresh.as_str(),
            &snapshot.version,
            &rows,
        ],
    )
    .await
    .map_err(|e| pg_error("recording the synced version", e))?;
    tx.commit()
        .await
        .map_err(|e| pg_error(&format!("committing the refresh of {target}"), e))?;
    let deleted = u64::try_from(previous_rows).unwrap_or(0);
    Ok(report(
        table,
        snapshot.version,
        loaded,
        deleted,
        false,
        started,
    ))
}

fn report(
    table: &SyncedTable,
    version: i64,
    inserted: u64,
    deleted: u64,
    up_to_date: bool,
    started: Instant,
) -> LakebaseReport {
    LakebaseReport {
        source: table.source.to_string(),
        target: table.target.to_string(),
        mode: table.mode.as_str(),
        delta_version: version,
        rows_inserted: inserted,
        rows_updated: 0,
        rows_deleted: deleted,
        up_to_date,
        elapsed_ms: started.elapsed().as_millis() as u64,
    }
}

/// The schema and table that record what was synced (created once, by whoever comes first).
async fn ensure_state_table(client: &mut Client) -> Result<()> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_error("starting a transaction", e))?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('lakemirror:sync_state'));
         CREATE SCHEMA IF NOT EXISTS \"lakemirror\";
         CREATE TABLE IF NOT EXISTS {STATE_TABLE} (
           target text PRIMARY KEY,
           source text NOT NULL,
           mode text NOT NULL,
           delta_version bigint NOT NULL,
           rows bigint NOT NULL,
           synced_at timestamptz NOT NULL
         )"
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

/// Streams every active file's rows into `staging`; returns the row count.
async fn copy_rows(
    tx: &Transaction<'_>,
    store: &TableStorage,
    columns: &[SourceColumn],
    snapshot: &crate::delta::DeltaSnapshot,
    staging: &TableName,
    table: &SyncedTable,
) -> Result<u64> {
    let sink = tx
        .copy_in::<_, Bytes>(&format!(
            "COPY {} FROM STDIN (FORMAT binary)",
            staging.sql()
        ))
        .await
        .map_err(|e| pg_error("starting COPY", e))?;
    futures::pin_mut!(sink);
    let copy_columns: Vec<_> = columns.iter().map(|c| c.copy.clone()).collect();
    let mut buffer = BytesMut::with_capacity(CHUNK_BYTES + (1 << 16));
    buffer.extend_from_slice(HEADER);
    let mut files: Vec<_> = snapshot.active.files.values().collect();
    files.sort_by(|a, b| a.path.cmp(&b.path));
    for add in files {
        for arrays in read_file(store, columns, add).await? {
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
    let key: Vec<String> = table
        .primary_key
        .iter()
        .filter_map(|k| {
            let i = columns.iter().position(|c| &c.copy.name == k)?;
            let formatter = arrow_cast::display::ArrayFormatter::try_new(
                arrays[i].as_ref(),
                &arrow_cast::display::FormatOptions::default(),
            )
            .ok()?;
            Some(format!("{k}={}", formatter.value(r.row)))
        })
        .collect();
    let row = if key.is_empty() {
        format!("a row of {path}")
    } else {
        format!("the row with {}", key.join(", "))
    };
    Error::InvalidInput(format!(
        "{}: column {} of {row} {}; nothing was changed",
        table.target, r.column, r.reason
    ))
}

/// A duplicate primary key, with the key PostgreSQL reports.
fn duplicate_key(target: &TableName, uri: &str, e: tokio_postgres::Error) -> Error {
    let duplicate = e
        .as_db_error()
        .filter(|db| db.code().code() == "23505")
        .map(|db| db.detail().unwrap_or("").to_string());
    match duplicate {
        Some(detail) => Error::InvalidInput(format!(
            "{target}: the Delta table {uri} holds the primary key more than once ({detail}); nothing was changed. Fix the source or sync.primary_key"
        )),
        None => pg_error("building the primary key", e),
    }
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
