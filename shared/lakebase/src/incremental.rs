//! Incremental sync: the commits since the synced version applied by primary key in one
//! transaction (rows only in removed files deleted, rows in added files upserted, deletion
//! vectors counted, added columns added); a full refresh when that is cheaper or the commits
//! are gone from the log.

use tokio_postgres::Transaction;

use crate::changes::{FileChanges, file_changes, full_refresh_is_cheaper};
use crate::config::{Mode, SyncedTable};
use crate::defaults::{ColumnDefault, column_default, current_defaults};
use crate::error::{Error, Result, Setting};
use crate::postgres::{TableName, pg_error, quote_ident};
use crate::read::{Rows, SourceColumn, deleted_positions, source_columns};
use crate::state::{SyncState, write_state};
use crate::sync::{
    Applied, check_primary_key, copy_rows, key_text, readable_metadata, values_hidden,
};
use crate::types::{PgType, TargetTypes};
use lakemirror_delta::{CommitsSince, DeltaLog, Metadata};
use lakemirror_storage::TableStorage;

/// Applies the commits after the synced version to the target by primary key. None when
/// they cannot be applied from the log alone (cleaned up, removes without partition values,
/// a data file already vacuumed): the caller refreshes fully instead.
pub(crate) async fn apply_increment(
    tx: &Transaction<'_>,
    log: &DeltaLog,
    table: &SyncedTable,
    state: &SyncState,
    to_version: Option<i64>,
    types: &TargetTypes,
) -> Result<Option<Applied>> {
    let store = log.table();
    let uri = store.root_uri().to_string();
    let target = &table.target;
    if to_version.is_some_and(|v| v < state.version) {
        return Err(Error::Target(format!(
            "{target} is at Delta version {} already; an incremental sync cannot go back to {}. Run a full refresh (sync.mode = \"full_refresh\") to load an older version",
            state.version,
            to_version.unwrap_or_default()
        ))
        .fixed_by(Setting::FullRefresh));
    }
    let commits = match log.commits_since(state.version, to_version, None).await? {
        CommitsSince::Contiguous(commits) => commits,
        CommitsSince::Gap { first_available } => {
            tracing::warn!(%target, synced = state.version, ?first_available, "the commits after the synced version were cleaned up from the Delta log; refreshing fully");
            return Ok(None);
        }
        CommitsSince::Partial(commits) => {
            tracing::warn!(%target, synced = state.version, read = commits.len(), "more commits are new than one read of the log holds in this memory; refreshing fully");
            return Ok(None);
        }
    };
    let Some(last) = commits.last() else {
        let columns = match &state.metadata {
            Some(metadata) => source_columns(&uri, metadata, types)?,
            None => Vec::new(),
        };
        return Ok(Some(
            Applied {
                version: state.version,
                up_to_date: true,
                ..Applied::default()
            }
            .with_columns(target, &columns),
        ));
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
    let columns = source_columns(&uri, &metadata, types)?;
    check_primary_key(&uri, &columns, &table.primary_key)?;
    let target_key = primary_key_of(tx, target).await?;
    if target_key != table.primary_key {
        return Err(Error::Target(format!(
            "{target} has primary key ({}) but sync.primary_key is ({}); run a full refresh (sync.mode = \"full_refresh\") to rebuild it",
            target_key.join(", "),
            table.primary_key.join(", ")
        ))
        .fixed_by(Setting::FullRefresh));
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
    add_columns(tx, target, &added_columns).await?;
    let previous = state.metadata.as_ref();
    set_defaults(
        tx,
        target,
        previous,
        &columns,
        &added_columns,
        changed_metadata,
    )
    .await?;
    let mut applied = Applied {
        version,
        ..Applied::default()
    }
    .with_columns(target, &columns);
    if !changes.is_empty() {
        match apply_changes(tx, store, table, &columns, &changes).await {
            Ok((inserted, updated, deleted)) => {
                applied.inserted = inserted;
                applied.updated = updated;
                applied.deleted = deleted;
            }
            Err(e) if e.is_not_found() => {
                tracing::warn!(%target, error = %e, "a data file the increment needs is gone (vacuumed); refreshing fully");
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
    }
    lakemirror_runtime::crash::point("lakebase-increment-after-apply");
    let rows = state.rows + applied.inserted as i64 - applied.deleted as i64;
    write_state(tx, table, &uri, Mode::Incremental, version, rows, &metadata).await?;
    Ok(Some(applied))
}

/// Adds the columns Delta added, without their default: `ADD COLUMN … DEFAULT` would give
/// it to the rows there already, which Delta readers read as null (their files predate the
/// column). [`set_defaults`] sets it after.
async fn add_columns(
    tx: &Transaction<'_>,
    target: &TableName,
    added_columns: &[&SourceColumn],
) -> Result<()> {
    for column in added_columns {
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
    Ok(())
}

/// Sets or drops the default of each column whose Delta default changed since `previous`
/// (the synced metadata), and gives an added column its default.
async fn set_defaults(
    tx: &Transaction<'_>,
    target: &TableName,
    previous: Option<&Metadata>,
    columns: &[SourceColumn],
    added_columns: &[&SourceColumn],
    changed_metadata: bool,
) -> Result<()> {
    let previous = previous.map(|m| current_defaults(&m.schema_string));
    for column in columns {
        let added = added_columns
            .iter()
            .any(|a| a.copy.name == column.copy.name);
        let before = previous.as_ref().map(|defaults| {
            column_default(
                defaults.get(&column.copy.name).map(String::as_str),
                &column.copy.pg,
            )
        });
        let changed = changed_metadata && before.as_ref() != Some(&column.default);
        if !(changed || (added && column.default != ColumnDefault::None)) {
            continue;
        }
        let action = match &column.default {
            ColumnDefault::Literal(sql) => format!("SET DEFAULT {sql}"),
            _ if added => continue,
            _ => "DROP DEFAULT".to_string(),
        };
        tx.batch_execute(&format!(
            "ALTER TABLE {} ALTER COLUMN {} {action}",
            target.sql(),
            quote_ident(&column.copy.name)
        ))
        .await
        .map_err(|e| {
            pg_error(
                &format!(
                    "setting the default of column {} of {target}",
                    column.copy.name
                ),
                e,
            )
        })?;
    }
    Ok(())
}

/// Loads the changed rows into temporary tables and applies them: keys that left the table
/// are deleted, rows at the end of the range are inserted or updated (unchanged rows are not
/// written). Returns (inserted, updated, deleted).
pub(crate) async fn apply_changes(
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
    lakemirror_runtime::crash::point("lakebase-increment-after-copy");

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
        let error = Error::Rows(format!(
            "{target}: the Delta table {} holds the primary key ({}) more than once; nothing was changed. Fix the source or sync.primary_key",
            store.root_uri(),
            key_text(&pairs, table.show_values)
        ));
        return Err(values_hidden(error, table.show_values));
    }
    tx.batch_execute("ANALYZE lakemirror_upserts; ANALYZE lakemirror_deletes")
        .await
        .map_err(|e| pg_error("analyzing the increment", e))?;

    let column_names: Vec<String> = columns.iter().map(|c| c.copy.name.clone()).collect();
    let postgis: Vec<String> = columns
        .iter()
        .filter(|c| {
            matches!(
                c.copy.pg,
                PgType::Geometry { .. } | PgType::Geography { .. }
            )
        })
        .map(|c| c.copy.name.clone())
        .collect();
    let deleted = tx
        .execute(&delete_statement(&target.sql(), &table.primary_key), &[])
        .await
        .map_err(|e| pg_error(&format!("deleting rows from {target}"), e))?;
    let row = tx
        .query_one(
            &upsert_statement(&target.sql(), &table.primary_key, &column_names, &postgis),
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

/// The target's primary key columns, in key order.
pub(crate) async fn primary_key_of(
    tx: &Transaction<'_>,
    target: &TableName,
) -> Result<Vec<String>> {
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
pub(crate) async fn target_columns(
    tx: &Transaction<'_>,
    target: &TableName,
) -> Result<Vec<(String, String)>> {
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
pub(crate) fn schema_change<'a>(
    uri: &str,
    target: &TableName,
    existing: &[(String, String)],
    columns: &'a [SourceColumn],
) -> Result<Vec<&'a SourceColumn>> {
    let needs_refresh = |what: String| {
        Error::Target(format!(
            "{target}: {what} in {uri}; an incremental sync only adds columns. Run a full refresh (sync.mode = \"full_refresh\" once) to rebuild the table"
        ))
        .fixed_by(Setting::FullRefresh)
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
                let postgis = [pg.as_str(), &column.copy.pg.sql()]
                    .iter()
                    .any(|t| t.contains("geometry") || t.contains("geography"));
                let why = if postgis {
                    " (PostGIS was installed in or removed from the target database since the table was created)"
                } else {
                    ""
                };
                return Err(needs_refresh(format!(
                    "column {:?} changed type from {pg} to {}{why}",
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
pub(crate) fn same_type(postgres: &str, ours: &str) -> bool {
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
            .replace([' ', '"'], "")
    };
    // PostGIS types may be schema-qualified (`"public".geometry`); the
    // qualifier is dropped before the type's name and modifiers are compared.
    let unqualified = |t: String| {
        let name_end = t.find('(').unwrap_or(t.len());
        match t[..name_end].rfind('.') {
            Some(dot) => t[dot + 1..].to_string(),
            None => t,
        }
    };
    unqualified(canonical(postgres)) == unqualified(canonical(ours))
}

/// `k1 = k1 AND ...` between the key columns of two aliases.
fn same_key(primary_key: &[String], a: &str, b: &str) -> String {
    primary_key
        .iter()
        .map(|k| format!("{a}.{k} = {b}.{k}", k = quote_ident(k)))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// Deletes from `target` the keys of `lakemirror_deletes` that `lakemirror_upserts` does
/// not write again (a row that moved to another file is updated, not deleted).
pub(crate) fn delete_statement(target: &str, primary_key: &[String]) -> String {
    format!(
        "DELETE FROM {target} t USING lakemirror_deletes d WHERE {} AND NOT EXISTS (SELECT 1 FROM lakemirror_upserts u WHERE {})",
        same_key(primary_key, "t", "d"),
        same_key(primary_key, "u", "d")
    )
}

/// Inserts or updates `lakemirror_upserts` into `target` by primary key, rewriting only
/// rows whose values changed, and answers (inserted, updated). The columns in `as_bytes`
/// (PostGIS's) are compared as their bytes: exact, and free of operator lookup, which fails
/// when the extension's schema is not on the search path.
pub(crate) fn upsert_statement(
    target: &str,
    primary_key: &[String],
    columns: &[String],
    as_bytes: &[String],
) -> String {
    let all: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
    let keys: Vec<String> = primary_key.iter().map(|k| quote_ident(k)).collect();
    let values: Vec<(String, bool)> = columns
        .iter()
        .filter(|c| !primary_key.contains(c))
        .map(|c| (quote_ident(c), as_bytes.contains(c)))
        .collect();
    let list = |f: &dyn Fn(&str, bool) -> String| {
        values
            .iter()
            .map(|(v, bytes)| f(v, *bytes))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let compared = |side: &str| {
        list(&|v, bytes| match bytes {
            true => format!("{side}.{v}::bytea"),
            false => format!("{side}.{v}"),
        })
    };
    let on_conflict = if values.is_empty() {
        "DO NOTHING".to_string()
    } else {
        format!(
            "DO UPDATE SET {} WHERE ({}) IS DISTINCT FROM ({})",
            list(&|v, _| format!("{v} = EXCLUDED.{v}")),
            compared("t"),
            compared("EXCLUDED")
        )
    };
    format!(
        "WITH written AS (
                   INSERT INTO {target} AS t ({cols}) SELECT {cols} FROM lakemirror_upserts
                   ON CONFLICT ({}) {on_conflict}
                   RETURNING (xmax = 0) AS inserted)
                 SELECT count(*) FILTER (WHERE inserted), count(*) FILTER (WHERE NOT inserted) FROM written",
        keys.join(", "),
        cols = all.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn a_row_rewritten_elsewhere_is_not_deleted() {
        let sql = delete_statement("\"public\".\"orders\"", &names(&["id", "Region"]));
        assert_eq!(
            sql,
            "DELETE FROM \"public\".\"orders\" t USING lakemirror_deletes d WHERE t.\"id\" = d.\"id\" AND t.\"Region\" = d.\"Region\" AND NOT EXISTS (SELECT 1 FROM lakemirror_upserts u WHERE u.\"id\" = d.\"id\" AND u.\"Region\" = d.\"Region\")"
        );
    }

    #[test]
    fn an_upsert_rewrites_only_changed_values_and_counts_inserts_apart() {
        let sql = upsert_statement(
            "\"public\".\"t\"",
            &names(&["id"]),
            &names(&["id", "a", "b c"]),
            &[],
        );
        assert!(sql.contains("INSERT INTO \"public\".\"t\" AS t (\"id\", \"a\", \"b c\") SELECT \"id\", \"a\", \"b c\" FROM lakemirror_upserts"), "{sql}");
        assert!(sql.contains("ON CONFLICT (\"id\") DO UPDATE SET \"a\" = EXCLUDED.\"a\", \"b c\" = EXCLUDED.\"b c\" WHERE (t.\"a\", t.\"b c\") IS DISTINCT FROM (EXCLUDED.\"a\", EXCLUDED.\"b c\")"), "{sql}");
        assert!(sql.contains("RETURNING (xmax = 0) AS inserted"), "{sql}");
    }

    #[test]
    fn postgis_values_are_compared_as_bytes() {
        let sql = upsert_statement(
            "t",
            &names(&["id"]),
            &names(&["id", "g", "v"]),
            &names(&["g"]),
        );
        assert!(
            sql.contains("WHERE (t.\"g\"::bytea, t.\"v\") IS DISTINCT FROM (EXCLUDED.\"g\"::bytea, EXCLUDED.\"v\")"),
            "{sql}"
        );
    }

    #[test]
    fn a_table_of_key_columns_only_inserts_what_is_new() {
        let sql = upsert_statement("t", &names(&["id"]), &names(&["id"]), &[]);
        assert!(sql.contains("ON CONFLICT (\"id\") DO NOTHING"), "{sql}");
    }

    #[test]
    fn postgres_spellings_of_our_types_compare_equal_qualified_or_not() {
        assert!(same_type(
            "timestamp with time zone",
            "timestamp with time zone"
        ));
        assert!(same_type("numeric(10,2)", "numeric(10,2)"));
        assert!(!same_type("numeric(10,3)", "numeric(10,2)"));
        assert!(same_type(
            "geometry(Geometry,4326)",
            "\"public\".geometry(Geometry,4326)"
        ));
        assert!(same_type("gis.geography", "\"gis\".geography"));
        assert!(!same_type(
            "geometry(Geometry,3857)",
            "\"public\".geometry(Geometry,4326)"
        ));
        assert!(!same_type("bytea", "\"public\".geometry(Geometry,4326)"));
    }

    #[test]
    fn identifiers_with_quotes_stay_one_identifier() {
        let sql = delete_statement("t", &names(&["we\"ird"]));
        assert!(sql.contains("t.\"we\"\"ird\" = d.\"we\"\"ird\""), "{sql}");
    }
}
