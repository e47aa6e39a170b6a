//! Full refresh: in one transaction, under an advisory lock per target, the rows are loaded
//! with binary `COPY` into a new table, the primary key is built, the grants of the old table
//! are copied, the old table is dropped and the new one renamed into its place, and
//! `lakemirror.sync_state` records the Delta version. Readers see the old table or the new
//! one, never an empty or partial one; a crash anywhere rolls everything back.

use tokio_postgres::Transaction;

use crate::config::{Mode, SyncedTable};
use crate::error::Result;
use crate::postgres::{TableName, pg_error, quote_ident, quote_literal};
use crate::read::{Rows, SourceColumn, source_columns};
use crate::state::{SyncState, write_state};
use crate::sync::{Applied, check_primary_key, copy_rows, duplicate_key, readable_metadata};
use crate::types::TargetTypes;
use lakemirror_delta::DeltaLog;

/// Replaces the target with the rows of the Delta version: loaded into a new table, which
/// takes the old one's place, grants and name.
pub(crate) async fn full_refresh(
    tx: &Transaction<'_>,
    log: &DeltaLog,
    table: &SyncedTable,
    exists: bool,
    state: Option<&SyncState>,
    to_version: Option<i64>,
    types: &TargetTypes,
) -> Result<Applied> {
    let store = log.table();
    let uri = store.root_uri().to_string();
    let target = &table.target;
    let snapshot = log.snapshot(to_version).await?;
    let metadata = readable_metadata(&uri, &snapshot)?;
    let columns = source_columns(&uri, metadata, types)?;
    check_primary_key(&uri, &columns, &table.primary_key)?;
    if exists && state.map(|s| s.version) == Some(snapshot.version) {
        return Ok(Applied {
            version: snapshot.version,
            up_to_date: true,
            catalog_managed: snapshot.catalog_managed.clone(),
            ..Applied::default()
        }
        .with_columns(target, &columns));
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
    create_staging(tx, target, &staging, &columns, table).await?;
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
    lakemirror_runtime::crash::point("lakebase-after-copy");
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
    lakemirror_runtime::crash::point("lakebase-after-index");
    swap_in(tx, target, &staging, exists, table, &uri).await?;
    lakemirror_runtime::crash::point("lakebase-after-swap");
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
        catalog_managed: snapshot.catalog_managed.clone(),
        ..Applied::default()
    }
    .with_columns(target, &columns))
}

/// Creates the new table `staging` beside `target` (and `target`'s schema when it is not
/// there), with the source's columns, their defaults and the primary key's NOT NULL.
async fn create_staging(
    tx: &Transaction<'_>,
    target: &TableName,
    staging: &TableName,
    columns: &[SourceColumn],
    table: &SyncedTable,
) -> Result<()> {
    let column_list: Vec<String> = columns
        .iter()
        .map(|c| {
            let not_null = if table.primary_key.contains(&c.copy.name) {
                " NOT NULL"
            } else {
                ""
            };
            format!(
                "{} {}{not_null}{}",
                quote_ident(&c.copy.name),
                c.copy.pg.sql(),
                c.default.clause()
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
    Ok(())
}

/// Puts the loaded `staging` table in `target`'s place: the old table's grants carried over
/// and the old table dropped (when it `exists`), then the name, the comment and the primary
/// key's index name taken.
async fn swap_in(
    tx: &Transaction<'_>,
    target: &TableName,
    staging: &TableName,
    exists: bool,
    table: &SyncedTable,
    uri: &str,
) -> Result<()> {
    if exists {
        copy_grants(tx, target, staging).await?;
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
    Ok(())
}

/// The old table's owner and table privileges (from its ACL: every grant, with its grant
/// option), given to the new table. Column-level grants are not carried over.
pub(crate) async fn copy_grants(
    tx: &Transaction<'_>,
    from: &TableName,
    to: &TableName,
) -> Result<()> {
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
pub(crate) fn pkey_name(table: &str) -> String {
    let mut end = table.len().min(58);
    while !table.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}_pkey", &table[..end])
}
