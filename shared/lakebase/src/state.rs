//! `lakemirror.sync_state`: the Delta version (and mode, row count, schema) each target was
//! last synced at, written in the same transaction as the rows.

use tokio_postgres::{Client, Transaction};

use crate::config::{Mode, SyncedTable};
use crate::error::Result;
use crate::postgres::{TableName, pg_error};
use lakemirror_delta::actions::Metadata;

/// The state table, in the target database.
pub(crate) const STATE_TABLE: &str = "\"lakemirror\".\"sync_state\"";

/// What `lakemirror.sync_state` says about a target.
#[derive(Debug, Clone)]
pub(crate) struct SyncState {
    pub(crate) version: i64,
    pub(crate) rows: i64,
    /// The Delta metadata at `version` (absent in rows written before it was recorded).
    pub(crate) metadata: Option<Metadata>,
}

pub(crate) async fn read_state(
    tx: &Transaction<'_>,
    target: &TableName,
) -> Result<Option<SyncState>> {
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

pub(crate) async fn write_state(
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
    lakemirror_runtime::crash::point("lakebase-after-state");
    Ok(())
}

/// The schema and table that record what was synced (created once, by whoever comes first).
pub(crate) async fn ensure_state_table(client: &mut Client) -> Result<()> {
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
