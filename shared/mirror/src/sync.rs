//! One sync of one table: bring its Iceberg mirror (in Glue or a REST catalog) to the Delta
//! table's newest version. This file is the loop (load, commit, retry on a lost race);
//! [`crate::decide`] says what to write.
//!
//! What a sync is asked ([`crate::settings::SyncRequest`]) and what it reports
//! ([`crate::report`]) live apart from it, so that the planning, the one commit and the
//! fan-out that share them do not reach back into this loop.

use std::sync::Arc;
use std::time::Instant;

use lakemirror_delta::catalog_managed::CatalogManagedReport;
use lakemirror_delta::{CatalogManaged, DeltaLog};
use lakemirror_plan::CommittedTable;
use lakemirror_plan::target::{
    CatalogTarget, NameFrom, RememberedProperties, TARGET_FILE, TargetDefaults, TargetProperties,
    default_table_name, path_table_name, unique_path_table_name,
};
use lakemirror_storage::{IoCounters, ObjectStores, TableStorage};

use crate::commit::{Commit, commit_staged};
use crate::decide::{Planned, RecentHistory, bootstraps_in_groups, plan};
use crate::error::{Error, Result};
pub use crate::report::{SyncAction, SyncReport};
pub use crate::settings::{OnMissingSource, SyncRequest};
use lakemirror_iceberg::Error as IcebergError;
use lakemirror_iceberg::catalog::{CatalogTable, Lakehouse};
use lakemirror_iceberg::writer::MetadataWriter;

/// How many times one sync follows the Delta table's `lakemirror.glue.*` properties to
/// another Glue table (each move re-reads what the properties say).
const MAX_MOVES: u32 = 3;

/// The Delta table's storage and the mirror's metadata folder (`metadata_uri`, by default
/// `<table>/_lakemirror/iceberg`, which Delta VACUUM leaves alone).
pub fn mirror_stores(
    stores: &ObjectStores,
    table_uri: &str,
    metadata_uri: Option<&str>,
    counters: &Arc<IoCounters>,
) -> Result<(TableStorage, TableStorage)> {
    let data = stores.open(table_uri, counters.clone())?;
    let metadata_uri = metadata_uri
        .map(str::to_string)
        .unwrap_or_else(|| data.location("_lakemirror/iceberg"));
    let metadata_store = stores.open(&metadata_uri, counters.clone())?;
    Ok((data, metadata_store))
}

/// How the request names its mirror before the Delta table's properties are read.
pub fn target_defaults(request: &SyncRequest) -> TargetDefaults {
    TargetDefaults {
        database: request.database.clone(),
        table: match request.settings.name_from {
            NameFrom::Folder => default_table_name(&request.table_uri),
            NameFrom::Path => path_table_name(&request.table_uri),
            NameFrom::UniquePath => unique_path_table_name(&request.table_uri),
        },
        explicit_table: request.table.clone(),
        allowed_databases: request.settings.allowed_databases.clone(),
        name_from: request.settings.name_from,
    }
}

/// Runs one sync, retrying when another writer commits first. When more commits are new
/// than one read of the log holds parsed (its share of the memory budget), the sync goes on
/// in steps, each committed before the next is read.
pub async fn sync_table(
    lake: &Lakehouse,
    request: &SyncRequest,
    counters: Arc<IoCounters>,
) -> Result<SyncReport> {
    let started = Instant::now();
    let mut report: Option<SyncReport> = None;
    loop {
        let (step, more_follow) = sync_step(lake, request, counters.clone()).await?;
        let done = match report.take() {
            None => step,
            Some(before) => before.followed_by(step),
        };
        if !more_follow {
            return Ok(done.finished(started, &counters));
        }
        tracing::info!(table = %request.table_uri, delta_version = ?done.delta_version, "more commits follow than one read of the log holds: syncing on");
        report = Some(done);
    }
}

/// One step of [`sync_table`]: its report, and whether more commits follow.
async fn sync_step(
    lake: &Lakehouse,
    request: &SyncRequest,
    counters: Arc<IoCounters>,
) -> Result<(SyncReport, bool)> {
    let started = Instant::now();
    let (data, metadata_store) = mirror_stores(
        &lake.stores,
        &request.table_uri,
        request.metadata_uri.as_deref(),
        &counters,
    )?;
    let defaults = target_defaults(request);
    let mut log = lake.delta_log(data.clone());
    let writer = MetadataWriter::new(metadata_store.clone(), data.clone())
        .with_format_version(request.settings.format_version)
        .with_history(request.settings.history);
    // The lakemirror.glue.* properties are remembered only where they may choose the target.
    let remembered = match defaults.properties_choose() {
        false => None,
        true => remembered_properties(&metadata_store, data.root_uri()).await?,
    };
    let FirstRead {
        mut properties,
        mut history,
        mut in_groups,
        mut tail,
    } = first_read(&log, request, &defaults, remembered.as_ref()).await?;
    if let TailRead::Read(found) = &tail {
        log = log.with_tail(found.clone());
    }
    let (mut target, mut named_by) = defaults.resolve(&properties)?;

    let mut attempt = 0;
    let mut moves = 0;
    loop {
        attempt += 1;
        let read = load_claiming(lake, &target, &data, &metadata_store, &counters).await?;
        let (tailed, first) = log_for_planning(log, &read, request, &tail).await?;
        log = tailed;
        if let Some(first) = first {
            (history, in_groups, tail) = (first.history, first.in_groups, first.tail);
        }
        // On every sync, not only a mirror's first: a table inside another's folder must not
        // keep a mirror that an `_delta_log/` gone for a moment let it take. The listings go
        // out beside the planning's reads.
        let nested = async {
            match attempt {
                1 => refuse_nested(&lake.stores, &data, &counters).await,
                _ => Ok(()),
            }
        };
        let (nested, planned) = tokio::join!(
            nested,
            plan(&log, &read, request, history.take(), in_groups)
        );
        if let Err(nested) = nested {
            return Err(disown(lake, &read, nested, &counters).await);
        }
        let planned = match planned {
            Err(Error::SourceMissing {
                table,
                catalog_table,
            }) if request.settings.on_missing_source == OnMissingSource::Drop => {
                lake.drop_table(&read, &counters).await?;
                tracing::warn!(%table, %catalog_table, "the Delta table is gone: deleted its catalog table (the Iceberg metadata files stay)");
                let report =
                    SyncReport::of(&target.database, &target.table, named_by, None, attempt);
                return Ok((
                    report.dropped(&table, &log).finished(started, &counters),
                    false,
                ));
            }
            other => other?,
        };
        if defaults.fixed().is_none()
            && let Some(metadata) = &planned.newest_metadata
        {
            properties = TargetProperties::of(Some(metadata));
            let (wanted, wanted_by) = defaults.resolve(&properties)?;
            named_by = wanted_by;
            if wanted != target {
                moves += 1;
                moved(request, &target, &wanted, moves)?;
                target = wanted;
                attempt -= 1;
                continue;
            }
        }
        let mut report = SyncReport::of(
            &target.database,
            &target.table,
            named_by,
            read.current.as_ref(),
            attempt,
        );
        report.reason = planned.rebuilt.clone();
        let more_follow = planned.more_follow;
        // A whole read in the planning may have found the table catalog-managed: the id the
        // mirror records and the report follow it.
        log = log.with_tail(planned.catalog_managed.clone());
        let committed = commit_planned(lake, &writer, &read, &log, planned, &mut report, &counters);
        if committed.await? == Commit::LostRace {
            continue;
        }
        if defaults.properties_choose()
            && let Some(version) = report.delta_version
            && remembered
                .as_ref()
                .is_none_or(|r| r.properties != properties && r.delta_version <= version)
        {
            remember_properties(&metadata_store, data.root_uri(), version, &properties).await?;
        }
        report.catalog_managed = catalog_managed_report(&log, &read);
        return Ok((report.finished(started, &counters), more_follow));
    }
}

/// What the sync of a catalog-managed table read: logged when it is limited to the
/// published log (no catalog to ask).
fn catalog_managed_report(log: &DeltaLog, read: &CatalogTable) -> Option<CatalogManagedReport> {
    let report = log.catalog_managed_report();
    if let Some(limited) = report.as_ref().and_then(|c| c.limited.as_ref()) {
        tracing::warn!(table = %read.full_name(), "{limited}");
    }
    report
}

/// What the sync learns of its Glue target before the first load: the Delta table's
/// properties, and the history read to learn them, which the first plan takes rather than
/// reading it twice (and whether the table is too large for one read).
struct FirstRead {
    properties: TargetProperties,
    history: Option<RecentHistory>,
    /// Bootstrapped in groups: the table is never read whole, its definition names it.
    in_groups: bool,
    /// How the read found a catalog-managed table to be read (the log's tail).
    tail: TailRead,
}

/// What a read of the Delta log found of its tail (see [`DeltaLog::tail`]).
enum TailRead {
    /// Nothing was read yet.
    NotRead,
    /// The tail a read found: None for a table that is not catalog-managed (or is gone).
    Read(Option<CatalogManaged>),
}

/// The log the sync plans with, after the load, and the first read of a new mirror whose
/// table was not read before the load (its target did not need it): what the first plan
/// takes, as the first read would have. (A mirror whose metadata is lost is rebuilt by the
/// planning, which reads its own history.) A mirror of a catalog-managed table names its
/// table's id: the log's tail is then asked before the planning, so that every read of the
/// sync reads the table as its catalog has it (its newest versions may exist only as the
/// commits its catalog ratified) and the catalog is asked once.
async fn log_for_planning(
    mut log: DeltaLog,
    read: &CatalogTable,
    request: &SyncRequest,
    tail: &TailRead,
) -> Result<(DeltaLog, Option<FirstRead>)> {
    let mut first = None;
    if read.current.is_none() && read.lost.is_none() && matches!(tail, TailRead::NotRead) {
        let new_table = read_new_table(&log, request).await?;
        if let TailRead::Read(found) = &new_table.tail {
            log = log.with_tail(found.clone());
        }
        first = Some(new_table);
    }
    let current = read.current.as_ref();
    match current.and_then(CommittedTable::catalog_table_id) {
        Some(id) if log.tail().is_none() => {
            let name = current.and_then(CommittedTable::catalog_table_name);
            Ok((log.ask_catalog_known_as(id, name).await?, first))
        }
        _ => Ok((log, first)),
    }
}

async fn first_read(
    log: &DeltaLog,
    request: &SyncRequest,
    defaults: &TargetDefaults,
    remembered: Option<&RememberedProperties>,
) -> Result<FirstRead> {
    // Properties that cannot choose the target are not read before the load: a new mirror
    // reads its table after it, and a table that names another catalog table is warned
    // about when the planning reads its metadata (`TargetDefaults::resolve`).
    match (defaults.properties_choose(), remembered) {
        (false, _) => Ok(FirstRead::known(TargetProperties::default())),
        (true, Some(remembered)) => Ok(FirstRead::known(remembered.properties.clone())),
        (true, None) => read_new_table(log, request).await,
    }
}

impl FirstRead {
    /// What is known without reading the table: its target's properties.
    fn known(properties: TargetProperties) -> Self {
        FirstRead {
            properties,
            history: None,
            in_groups: false,
            tail: TailRead::NotRead,
        }
    }
}

/// The first read of a table not mirrored yet: its recent history (which the first plan
/// takes), or, larger than one read holds, its definition (bootstrapped in groups).
async fn read_new_table(log: &DeltaLog, request: &SyncRequest) -> Result<FirstRead> {
    let named_by_definition = async || -> Result<FirstRead> {
        let definition = log.definition().await?;
        Ok(FirstRead {
            properties: TargetProperties::of(Some(&definition.metadata)),
            history: None,
            in_groups: true,
            tail: TailRead::Read(definition.catalog_managed),
        })
    };
    if bootstraps_in_groups(log, request).await? {
        return named_by_definition().await;
    }
    match RecentHistory::read(log, request, None, true).await {
        Ok(read) => Ok(FirstRead {
            properties: TargetProperties::of(read.newest_metadata()),
            tail: TailRead::Read(read.catalog_managed().cloned()),
            history: Some(read),
            in_groups: false,
        }),
        // Gone, or never there: the catalog table (if any) says which.
        Err(e) if e.is_not_a_delta_table() => Ok(FirstRead {
            tail: TailRead::Read(None),
            ..FirstRead::known(TargetProperties::default())
        }),
        // Larger than one read holds: bootstrapped in groups, named by its definition.
        Err(e) if e.is_too_many_files() => named_by_definition().await,
        Err(e) => Err(e),
    }
}

/// The Delta table's `lakemirror.glue.*` properties name another Glue table than `target`:
/// logged, or refused once they have moved more than [`MAX_MOVES`] times in one sync.
fn moved(
    request: &SyncRequest,
    target: &CatalogTarget,
    wanted: &CatalogTarget,
    moves: u32,
) -> Result<()> {
    if moves > MAX_MOVES {
        return Err(Error::catalog_state(format!(
            "the Glue target of {} keeps changing between {}.{} and {}.{}; check its lakemirror.glue.* table properties",
            request.table_uri, target.database, target.table, wanted.database, wanted.table
        )));
    }
    tracing::warn!(
        table = %request.table_uri,
        from = %format!("{}.{}", target.database, target.table),
        to = %format!("{}.{}", wanted.database, wanted.table),
        "the Delta table's lakemirror.glue.* properties name another Glue table; mirroring there (the old Glue table is left as it is: drop it when nothing reads it)"
    );
    Ok(())
}

/// Writes the `planned` snapshots and commits them to the catalog over `read`, filling
/// `report` in; nothing to write leaves both alone. A lost race comes back as
/// [`Commit::LostRace`] with nothing made visible, for the sync to plan again.
async fn commit_planned(
    lake: &Lakehouse,
    writer: &MetadataWriter,
    read: &CatalogTable,
    log: &DeltaLog,
    planned: Planned,
    report: &mut SyncReport,
    counters: &IoCounters,
) -> Result<Commit> {
    let mut plans = planned.plans;
    if let Some(newest) = plans.last_mut() {
        newest.record_catalog(log.tail());
    }
    if plans.is_empty() && planned.grouped.is_none() {
        return Ok(Commit::Landed);
    }
    let first = plans.first().map(|p| p.delta_version);
    let last = plans.last().map(|p| p.delta_version);
    tracing::info!(table = %read.full_name(), from = ?first, to = ?last, "writing {} snapshot(s)", plans.len().max(1));
    // A rebuild is a new history: nothing of the current metadata carries over.
    let base = match planned.rebuilt {
        Some(_) => None,
        None => read.current.as_ref(),
    };
    let staged = match &planned.grouped {
        Some(grouped) => grouped.stage(writer).await?,
        None => writer.stage(base, plans).await?,
    };
    let committed = commit_staged(lake, writer, read, &staged, report, counters).await?;
    if committed == Commit::Landed {
        report.action = match (&planned.rebuilt, &read.current) {
            (Some(reason), _) => {
                tracing::warn!(table = %read.full_name(), %reason, "rebuilt the mirror as a new history");
                SyncAction::Rebuilt
            }
            (None, None) => SyncAction::Created,
            (None, Some(_)) => SyncAction::Synced,
        };
    }
    Ok(committed)
}

/// The catalog table `target` as read for the Delta table at `data`. A name another Delta
/// table holds is taken over when that table lies inside a third table's folder: a nested
/// table may not keep a name (it took it while the outer table's `_delta_log/` was gone, or
/// before it came), and the table that is not nested gets it.
async fn load_claiming(
    lake: &Lakehouse,
    target: &CatalogTarget,
    data: &TableStorage,
    metadata_store: &TableStorage,
    counters: &Arc<IoCounters>,
) -> Result<CatalogTable> {
    let (database, name) = (&target.database, &target.table);
    match lake
        .load(database, name, data.root_uri(), metadata_store)
        .await
    {
        Err(IcebergError::NameTaken {
            message,
            holder: Some(holder),
            metadata_location,
        }) => {
            let nested = match lake.stores.open(&holder, counters.clone()) {
                Ok(holder_store) => refuse_nested(&lake.stores, &holder_store, counters).await,
                Err(_) => Ok(()),
            };
            let Err(Error::NestedTable { outer, .. }) = nested else {
                return Err(IcebergError::NameTaken {
                    message,
                    holder: Some(holder),
                    metadata_location,
                }
                .into());
            };
            tracing::warn!(catalog_table = %format!("{database}.{name}"), %holder, %outer, table = %data.root_uri(), "the catalog table mirrored a table inside another table's folder, which may not keep a name: it now mirrors this table (the nested table's metadata files stay)");
            // Only the entry found: another writer may have taken the name since.
            lake.drop_if_at(database, name, &metadata_location, counters)
                .await?;
            Ok(lake
                .load(database, name, data.root_uri(), metadata_store)
                .await?)
        }
        read => Ok(read?),
    }
}

/// A table found inside another table's folder (`nested`) gives up the catalog table it
/// mirrors: readers of that name no longer read its rows, and a table that is not nested
/// may take the name. Answers the error, saying so.
async fn disown(
    lake: &Lakehouse,
    read: &CatalogTable,
    nested: Error,
    counters: &IoCounters,
) -> Error {
    let Error::NestedTable { table, outer, .. } = nested else {
        return nested;
    };
    if read.current.is_none() {
        return Error::NestedTable {
            table,
            outer,
            disowned: None,
        };
    }
    let full_name = read.full_name();
    match lake.drop_table(read, counters).await {
        Ok(false) => Error::NestedTable {
            table,
            outer,
            disowned: None,
        },
        Ok(true) => {
            tracing::warn!(%table, %outer, catalog_table = %full_name, "a table inside another table's folder: its mirror was removed from the catalog (the metadata files stay)");
            Error::NestedTable {
                table,
                outer,
                disowned: Some(full_name),
            }
        }
        Err(e) => e.into(),
    }
}

/// Refuses a mirror of a table that lies inside another table's folder (an ancestor folder
/// holds `_delta_log/`): one listing per ancestor, once per sync. An ancestor the function
/// may not list (above its `TABLE_PREFIXES`) is not one it mirrors.
async fn refuse_nested(
    stores: &ObjectStores,
    data: &TableStorage,
    counters: &Arc<IoCounters>,
) -> Result<()> {
    for outer in ancestors(data.root_uri()) {
        let store = stores.open(&outer, counters.clone())?;
        // A Delta table: a commit or checkpoint in its log, not any object that happens to
        // lie under a folder of that name.
        let is_log_file = |name: &str| lakemirror_delta::log::classify(name).is_published();
        match store
            .holds_any_named(&store.location("_delta_log/"), is_log_file)
            .await
        {
            Ok(true) => {
                return Err(Error::NestedTable {
                    table: data.root_uri().to_string(),
                    outer,
                    disowned: None,
                });
            }
            Ok(false) => {}
            Err(e) if e.is_permission_denied() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// The folders that hold a table root, nearest first, up to the bucket (or the file system's
/// root): `s3://b/w/t/x` -> `s3://b/w/t`, `s3://b/w`, `s3://b`.
fn ancestors(root: &str) -> Vec<String> {
    let Some((scheme, rest)) = root.split_once("://") else {
        return Vec::new();
    };
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let leading = if rest.starts_with('/') { "/" } else { "" };
    (1..segments.len())
        .rev()
        .map(|n| format!("{scheme}://{leading}{}", segments[..n].join("/")))
        .collect()
}

/// The `lakemirror.glue.*` properties remembered for this Delta table, if any.
async fn remembered_properties(
    metadata_store: &TableStorage,
    delta_table_uri: &str,
) -> Result<Option<RememberedProperties>> {
    let Some(bytes) = metadata_store
        .get_if_exists(&metadata_store.location(TARGET_FILE))
        .await?
    else {
        return Ok(None);
    };
    // An unreadable or foreign file is not fatal: the properties are read again.
    Ok(serde_json::from_slice::<RememberedProperties>(&bytes)
        .ok()
        .filter(|r| r.delta_table_uri == delta_table_uri))
}

/// Remembers the properties as of `delta_version`. A concurrent sync may write an older
/// state last; that heals itself: the commits after the old target's version carry the
/// change again.
async fn remember_properties(
    metadata_store: &TableStorage,
    delta_table_uri: &str,
    delta_version: i64,
    properties: &TargetProperties,
) -> Result<()> {
    let remembered = RememberedProperties {
        delta_table_uri: delta_table_uri.to_string(),
        delta_version,
        properties: properties.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&remembered)?;
    Ok(metadata_store
        .put(&metadata_store.location(TARGET_FILE), bytes.into())
        .await?)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tables_ancestors_run_from_its_parent_to_the_bucket() {
        assert_eq!(
            super::ancestors("s3://lake/warehouse/team_a/t"),
            [
                "s3://lake/warehouse/team_a",
                "s3://lake/warehouse",
                "s3://lake"
            ]
        );
        assert_eq!(
            super::ancestors("file:///tmp/w/t"),
            ["file:///tmp/w", "file:///tmp"]
        );
        assert!(super::ancestors("s3://lake").is_empty());
    }

    use super::*;
    use lakemirror_runtime::Kind;

    use lakemirror_delta::test_tables::{
        add, commit_info, delete_commit, metadata, protocol, remove, write_commit,
    };
    use lakemirror_plan::history::{Version, kept};
    use lakemirror_storage::ObjectStores;

    use std::collections::BTreeSet;

    use iceberg::spec::TableMetadata;
    use lakemirror_plan::properties::DELTA_VERSION;

    use lakemirror_iceberg::catalog::InMemoryCatalog;

    fn lake() -> (Lakehouse, Arc<InMemoryCatalog>) {
        let catalog = Arc::new(InMemoryCatalog::with_databases(&["lake"]));
        let lake = Lakehouse::new(ObjectStores::in_memory(), catalog.clone());
        (lake, catalog)
    }

    fn request(table_uri: &str) -> SyncRequest {
        SyncRequest::new(table_uri, "lake")
    }

    async fn sync(lake: &Lakehouse, request: &SyncRequest) -> Result<SyncReport> {
        sync_table(lake, request, Arc::default()).await
    }

    /// `s3://lake/stream`, a table of one file at version 0, mirrored: the table and the
    /// request that synced it.
    async fn a_mirrored_table_of_one_file(
        lake: &Lakehouse,
    ) -> (lakemirror_storage::TableStorage, SyncRequest) {
        let uri = "s3://lake/stream";
        let table = lake.stores.open(uri, Arc::default()).unwrap();
        write_commit(
            &table,
            0,
            &[
                protocol(),
                metadata("s", &[("id", "long")], &[]),
                add("f0.parquet", 1, &[]),
            ],
        )
        .await;
        let request = request(uri);
        sync(lake, &request).await.unwrap();
        (table, request)
    }

    #[tokio::test(start_paused = true)]
    async fn a_sync_creates_extends_and_then_leaves_the_mirror_alone() {
        let (lake, catalog) = lake();
        let orders = lake
            .stores
            .open("s3://lake/orders", Arc::default())
            .unwrap();
        write_commit(
            &orders,
            0,
            &[
                protocol(),
                metadata("t1", &[("id", "long")], &[]),
                add("a.parquet", 5, &[]),
            ],
        )
        .await;
        let request = request("s3://lake/orders");
        let created = sync(&lake, &request).await.unwrap();
        assert_eq!(
            (created.action, created.delta_version),
            (SyncAction::Created, Some(0))
        );
        assert_eq!(created.table, "orders", "named after its folder");

        write_commit(&orders, 1, &[add("b.parquet", 5, &[])]).await;
        write_commit(&orders, 2, &[remove("a.parquet")]).await;
        catalog.interfere("lake", "orders", 1);
        let synced = sync(&lake, &request).await.unwrap();
        assert_eq!(synced.action, SyncAction::Synced);
        assert_eq!(
            synced.snapshots_committed, 2,
            "one snapshot per Delta version"
        );
        assert_eq!((synced.added_files, synced.removed_files), (1, 1));
        assert_eq!(synced.attempts, 2, "the lost race was planned again");

        let again = sync(&lake, &request).await.unwrap();
        assert_eq!(
            (again.action, again.delta_version),
            (SyncAction::Unchanged, Some(2))
        );
        assert_eq!(again.snapshots_committed, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_sync_that_keeps_losing_its_race_gives_up_with_a_retryable_error() {
        let (lake, catalog) = lake();
        let orders = lake
            .stores
            .open("s3://lake/orders", Arc::default())
            .unwrap();
        write_commit(
            &orders,
            0,
            &[protocol(), metadata("t1", &[("id", "long")], &[])],
        )
        .await;
        sync(&lake, &request("s3://lake/orders")).await.unwrap();
        write_commit(&orders, 1, &[add("a.parquet", 5, &[])]).await;
        catalog.interfere("lake", "orders", u32::MAX);
        let err = sync(&lake, &request("s3://lake/orders")).await.unwrap_err();
        assert!(
            matches!(err, Error::Iceberg(IcebergError::CommitConflict(_))),
            "{err}"
        );
        assert!(err.is_retryable());
    }

    #[tokio::test]
    async fn a_mirror_whose_delta_table_is_gone_is_kept_or_dropped_as_asked() {
        let (lake, catalog) = lake();
        let orders = lake
            .stores
            .open("s3://lake/orders", Arc::default())
            .unwrap();
        write_commit(
            &orders,
            0,
            &[protocol(), metadata("t1", &[("id", "long")], &[])],
        )
        .await;
        sync(&lake, &request("s3://lake/orders")).await.unwrap();
        delete_commit(&orders, 0).await;
        let kept = sync(&lake, &request("s3://lake/orders")).await.unwrap_err();
        assert!(matches!(kept, Error::SourceMissing { .. }), "{kept}");
        assert!(!kept.is_retryable());
        assert!(catalog.parameters("lake", "orders").is_some());
        let mut dropping = request("s3://lake/orders");
        dropping.settings.on_missing_source = OnMissingSource::Drop;
        let dropped = sync(&lake, &dropping).await.unwrap();
        assert_eq!(dropped.action, SyncAction::Dropped);
        assert!(catalog.parameters("lake", "orders").is_none());
    }

    #[tokio::test]
    async fn a_catalog_table_that_mirrors_another_delta_table_is_refused() {
        let (lake, _) = lake();
        for uri in ["s3://lake/a/orders", "s3://lake/b/orders"] {
            let table = lake.stores.open(uri, Arc::default()).unwrap();
            write_commit(
                &table,
                0,
                &[protocol(), metadata(uri, &[("id", "long")], &[])],
            )
            .await;
        }
        sync(&lake, &request("s3://lake/a/orders")).await.unwrap();
        let err = sync(&lake, &request("s3://lake/b/orders"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::Iceberg(IcebergError::NameTaken { message, .. }) if message.contains("mirrors s3://lake/a/orders")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_nested_table_gives_up_its_name_and_a_table_that_is_not_nested_takes_it() {
        let (lake, catalog) = lake();
        let table = |uri: &str| lake.stores.open(uri, Arc::default()).unwrap();
        let nested = table("s3://lake/team_a/t/orders");
        write_commit(
            &nested,
            0,
            &[
                protocol(),
                metadata("n", &[("id", "long")], &[]),
                add("666.parquet", 1, &[]),
            ],
        )
        .await;
        // Mirrored while the outer table's log is gone: it takes the name `orders`.
        sync(&lake, &request("s3://lake/team_a/t/orders"))
            .await
            .unwrap();
        assert!(catalog.parameters("lake", "orders").is_some());
        // The outer log is back; the sales team's table wants the name.
        let outer = table("s3://lake/team_a/t");
        write_commit(
            &outer,
            0,
            &[protocol(), metadata("o", &[("id", "long")], &[])],
        )
        .await;
        let sales = table("s3://lake/sales/orders");
        write_commit(
            &sales,
            0,
            &[
                protocol(),
                metadata("s", &[("id", "long")], &[]),
                add("1.parquet", 1, &[]),
            ],
        )
        .await;
        let taken = sync(&lake, &request("s3://lake/sales/orders"))
            .await
            .unwrap();
        assert_eq!(
            (taken.action, taken.table.as_str()),
            (SyncAction::Created, "orders")
        );
        let metadata = current_metadata(&lake, &catalog, "orders").await;
        assert_eq!(
            metadata.properties()[lakemirror_plan::properties::DELTA_TABLE_PROPERTY],
            "s3://lake/sales/orders"
        );
        // The nested table's next sync is refused, and takes nothing back.
        let err = sync(&lake, &request("s3://lake/team_a/t/orders"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Iceberg(IcebergError::NameTaken { .. })),
            "{err}"
        );
        let metadata = current_metadata(&lake, &catalog, "orders").await;
        assert_eq!(
            metadata.properties()[lakemirror_plan::properties::DELTA_TABLE_PROPERTY],
            "s3://lake/sales/orders"
        );
    }

    #[tokio::test]
    async fn a_nested_tables_own_sync_removes_its_mirror_from_the_catalog() {
        let (lake, catalog) = lake();
        let table = |uri: &str| lake.stores.open(uri, Arc::default()).unwrap();
        let nested = table("s3://lake/team_a/t/orders");
        write_commit(
            &nested,
            0,
            &[protocol(), metadata("n", &[("id", "long")], &[])],
        )
        .await;
        sync(&lake, &request("s3://lake/team_a/t/orders"))
            .await
            .unwrap();
        let outer = table("s3://lake/team_a/t");
        write_commit(
            &outer,
            0,
            &[protocol(), metadata("o", &[("id", "long")], &[])],
        )
        .await;
        let err = sync(&lake, &request("s3://lake/team_a/t/orders"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, Error::NestedTable { disowned: Some(name), .. } if name == "lake.orders"),
            "{err}"
        );
        assert!(
            err.to_string().contains("removed from the catalog"),
            "{err}"
        );
        assert!(catalog.parameters("lake", "orders").is_none());
    }

    #[tokio::test]
    async fn more_new_commits_than_one_read_holds_are_synced_in_steps() {
        let (lake, catalog) = lake();
        let uri = "s3://lake/steps";
        let table = lake.stores.open(uri, Arc::default()).unwrap();
        write_commit(
            &table,
            0,
            &[protocol(), metadata("s", &[("id", "long")], &[])],
        )
        .await;
        sync(&lake, &request(uri)).await.unwrap();
        for v in 1..=30 {
            write_commit(&table, v, &[add(&format!("f{v}.parquet"), 1, &[])]).await;
        }
        // A memory whose share holds a few commits at a time.
        let small = Arc::new(lakemirror_storage::MemoryShare::for_memory_mb(1));
        let synced = lakemirror_storage::budget::within(small, sync(&lake, &request(uri)))
            .await
            .unwrap();
        assert_eq!(synced.delta_version, Some(30));
        assert_eq!(
            (synced.action, synced.added_files),
            (SyncAction::Synced, 30)
        );
        assert!(synced.steps > 1, "in steps: {}", synced.steps);
        let metadata = current_metadata(&lake, &catalog, "steps").await;
        assert_eq!(
            metadata
                .current_snapshot()
                .unwrap()
                .summary()
                .additional_properties["total-data-files"],
            "30"
        );
    }

    /// The mirror's metadata as the catalog points at it.
    async fn current_metadata(
        lake: &Lakehouse,
        catalog: &InMemoryCatalog,
        table: &str,
    ) -> TableMetadata {
        let location = catalog.parameters("lake", table).unwrap()["metadata_location"].clone();
        let store = lake.stores.open(&location, Arc::default()).unwrap();
        serde_json::from_slice(&store.get(&location).await.unwrap().0).unwrap()
    }

    /// Every manifest list in the mirror's metadata folder.
    async fn manifest_lists(lake: &Lakehouse, table_uri: &str) -> BTreeSet<String> {
        let store = lake.stores.open(table_uri, Arc::default()).unwrap();
        let folder = store.location("_lakemirror/iceberg/metadata/");
        store
            .list_after(&folder, None)
            .await
            .unwrap()
            .into_iter()
            .map(|meta| store.location_of_key(&meta.location))
            .filter(|location| {
                location
                    .rsplit('/')
                    .next()
                    .is_some_and(|name| name.starts_with("snap-"))
            })
            .collect()
    }

    #[tokio::test]
    async fn a_long_history_is_thinned_by_the_policy_whether_synced_in_one_go_or_commit_by_commit()
    {
        const MINUTE: i64 = 60_000;
        let policy = lakemirror_plan::history::HistoryPolicy {
            recent_versions: 20,
            hourly_for_ms: 6 * 60 * MINUTE,
        };
        let start = chrono::Utc::now().timestamp_millis() - 3 * 24 * 60 * MINUTE;
        let at = |v: i64| start + v * 7 * MINUTE;
        let (lake, catalog) = lake();
        let mut versions = Vec::new();
        for name in ["at_once", "one_by_one"] {
            let uri = format!("s3://lake/{name}");
            let table = lake.stores.open(&uri, Arc::default()).unwrap();
            write_commit(
                &table,
                0,
                &[
                    commit_info(at(0)),
                    protocol(),
                    metadata(name, &[("id", "long")], &[]),
                ],
            )
            .await;
            for v in 1..=400 {
                write_commit(
                    &table,
                    v,
                    &[commit_info(at(v)), add(&format!("f{v}.parquet"), 1, &[])],
                )
                .await;
            }
        }
        versions.extend((0..=400).map(|v| Version {
            delta_version: v,
            committed_ms: at(v),
        }));
        let wanted: Vec<i64> = kept(&versions, &policy)
            .into_iter()
            .zip(&versions)
            .filter(|(keep, _)| *keep)
            .map(|(_, v)| v.delta_version)
            .collect();
        assert!(
            wanted.len() < 60,
            "the policy keeps {} of 401 versions",
            wanted.len()
        );

        let mut at_once = request("s3://lake/at_once");
        at_once.settings.history = policy;
        at_once.to_version = Some(0);
        sync(&lake, &at_once).await.unwrap();
        at_once.to_version = None;
        let caught_up = sync(&lake, &at_once).await.unwrap();
        let written: Vec<i64> = caught_up
            .snapshots
            .iter()
            .map(|s| s.delta_version)
            .collect();
        assert_eq!(
            written,
            wanted
                .iter()
                .copied()
                .filter(|v| *v > 0)
                .collect::<Vec<_>>(),
            "a snapshot per version kept, none for the others"
        );

        let mut one_by_one = request("s3://lake/one_by_one");
        one_by_one.settings.history = policy;
        let mut thinned = 0;
        for v in 0..=400 {
            one_by_one.to_version = Some(v);
            thinned += sync(&lake, &one_by_one).await.unwrap().thinned_snapshots;
        }
        assert!(thinned > 300, "thinned {thinned}");

        for name in ["at_once", "one_by_one"] {
            let metadata = current_metadata(&lake, &catalog, name).await;
            let mut history: Vec<_> = metadata.snapshots().collect();
            history.sort_by_key(|s| s.sequence_number());
            let kept_versions: Vec<i64> = history
                .iter()
                .map(|s| {
                    s.summary().additional_properties[DELTA_VERSION]
                        .parse()
                        .unwrap()
                })
                .collect();
            // Syncs commit by commit thin in batches (a quarter of the window waits).
            let pending = kept_versions.len() - wanted.len();
            assert!(
                pending <= 5,
                "{name}: {pending} versions wait to be thinned"
            );
            assert!(
                wanted.iter().all(|v| kept_versions.contains(v)),
                "{name}: {kept_versions:?}"
            );
            // Time travel by timestamp covers the newest run of consecutive versions only.
            let log: Vec<i64> = metadata.history().iter().map(|l| l.snapshot_id).collect();
            let tail: Vec<i64> = history[history.len() - log.len()..]
                .iter()
                .map(|s| s.snapshot_id())
                .collect();
            assert_eq!(log, tail, "{name}");
            assert!(
                log.len() >= 20,
                "{name}: the per-version window is in the log"
            );
            let first_logged = history.len() - log.len();
            assert_eq!(
                kept_versions[first_logged..],
                (kept_versions[first_logged]..=400).collect::<Vec<_>>(),
                "{name}: the log's versions follow one another"
            );
            // No manifest list outlives its snapshot; every kept one is there.
            let lists: BTreeSet<String> = history
                .iter()
                .map(|s| s.manifest_list().to_string())
                .collect();
            assert_eq!(
                manifest_lists(&lake, &format!("s3://lake/{name}")).await,
                lists,
                "{name}"
            );
            // The newest snapshot holds every file.
            let current = metadata.current_snapshot().unwrap();
            assert_eq!(
                current.summary().additional_properties["total-data-files"],
                "400"
            );
        }
    }

    /// Issue 54: every request of a one-commit sync is named, and they are the floor: the
    /// commit, the catalog's pointer, the current metadata and manifest list, the three files
    /// written and the swap, with two checks (the commit mirrored last is still the table's;
    /// no folder above holds a Delta log). The deployment lets no table choose its name, so
    /// no remembered target is read.
    #[tokio::test]
    async fn a_one_commit_sync_makes_the_requests_of_the_floor_and_names_each() {
        let (lake, _) = lake();
        let (table, mut request) = a_mirrored_table_of_one_file(&lake).await;
        write_commit(&table, 1, &[add("f1.parquet", 1, &[])]).await;
        // As the function syncs it: the event names the version.
        request.known_version = Some(1);
        let io = sync(&lake, &request).await.unwrap().io;
        let calls: Vec<(&str, u64)> = io.calls.iter().map(|(c, n)| (c.as_str(), *n)).collect();
        assert_eq!(
            calls,
            [
                ("S3 GET Delta commit", 2),
                ("S3 GET manifest list", 1),
                ("S3 GET mirror metadata", 1),
                ("S3 LIST Delta log listing", 1),
                ("S3 PUT manifest", 1),
                ("S3 PUT manifest list", 1),
                ("S3 PUT mirror metadata", 1),
                ("catalog commit", 1),
                ("catalog load", 1),
            ]
        );
        assert_eq!(io.requests, 10);
    }

    #[tokio::test]
    async fn an_append_adds_a_layer_to_its_bucket_and_a_bucket_of_many_layers_is_rewritten() {
        let (lake, catalog) = lake();
        let (table, request) = a_mirrored_table_of_one_file(&lake).await;
        let uri = request.table_uri.as_str();
        let metadata_store = lake
            .stores
            .open(&format!("{uri}/_lakemirror/iceberg"), Arc::default())
            .unwrap();
        let writer = MetadataWriter::new(metadata_store, table.clone());
        let mut manifests = Vec::new();
        let mut requests = Vec::new();
        for v in 1..=12 {
            write_commit(&table, v, &[add(&format!("f{v}.parquet"), 1, &[])]).await;
            requests.push(sync(&lake, &request).await.unwrap().io.requests);
            let metadata = current_metadata(&lake, &catalog, "stream").await;
            let current = metadata.current_snapshot().unwrap();
            let live = writer.live_files_of(&metadata, current).await.unwrap();
            let mut paths: Vec<String> = live
                .iter()
                .map(|f| f.file_path().rsplit('/').next().unwrap().to_string())
                .collect();
            paths.sort();
            let mut wanted: Vec<String> = (0..=v).map(|i| format!("f{i}.parquet")).collect();
            wanted.sort();
            assert_eq!(paths, wanted, "version {v}");
            let list = writer
                .manifests_of(current.manifest_list(), &metadata)
                .await
                .unwrap()
                .unwrap();
            manifests.push(list.len());
        }
        // One manifest, then a layer per append up to eight, then one again.
        assert_eq!(manifests, vec![2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5]);
        // An append reads no manifest of the bucket; the rewrite reads all eight.
        assert!(
            requests
                .iter()
                .enumerate()
                .all(|(i, r)| i == 7 || *r == requests[0]),
            "{requests:?}"
        );
        assert_eq!(requests[7], requests[0] + 8, "{requests:?}");
        // A removal reads the bucket's manifest and layers and rewrites it into one.
        write_commit(&table, 13, &[remove("f3.parquet")]).await;
        sync(&lake, &request).await.unwrap();
        let metadata = current_metadata(&lake, &catalog, "stream").await;
        let current = metadata.current_snapshot().unwrap();
        let list = writer
            .manifests_of(current.manifest_list(), &metadata)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(
            writer
                .live_files_of(&metadata, current)
                .await
                .unwrap()
                .len(),
            12
        );
    }
}

#[cfg(test)]
mod catalog_managed_tests {
    use std::sync::Arc;

    use lakemirror_runtime::Kind;

    use super::*;
    use lakemirror_delta::catalog_managed::RatifiedCommit;
    use lakemirror_delta::test_tables::{
        InMemoryCommitCatalog, add, catalog_managed_commit, commit_info, write_checkpoint,
        write_commit, write_staged,
    };
    use lakemirror_iceberg::catalog::InMemoryCatalog;
    use lakemirror_plan::properties::{CATALOG_TABLE_ID_PROPERTY, CATALOG_TABLE_NAME_PROPERTY};
    use lakemirror_storage::ObjectStores;

    const ROOT: &str = "s3://lake/managed";

    struct Rig {
        lake: Lakehouse,
        catalog: Arc<InMemoryCatalog>,
        commits: Arc<InMemoryCommitCatalog>,
        table: TableStorage,
    }

    async fn rig() -> Rig {
        let catalog = Arc::new(InMemoryCatalog::with_databases(&["lake"]));
        let commits = Arc::new(InMemoryCommitCatalog::default());
        let lake = Lakehouse::new(ObjectStores::in_memory(), catalog.clone())
            .with_commit_catalog(Some(commits.clone()));
        let table = lake.stores.open(ROOT, Arc::default()).unwrap();
        write_commit(
            &table,
            0,
            &catalog_managed_commit("t", "uc-1", &[("id", "long")]),
        )
        .await;
        commits.create("uc-1", ROOT);
        Rig {
            lake,
            catalog,
            commits,
            table,
        }
    }

    impl Rig {
        async fn stage(&self, version: i64, uuid: &str) -> RatifiedCommit {
            write_staged(
                &self.table,
                version,
                uuid,
                &[
                    commit_info(1_700_000_000_000 + version),
                    add(&format!("{uuid}.parquet"), 10, &[]),
                ],
            )
            .await
        }

        /// Publishes a staged commit into `_delta_log/` (a copy of its bytes).
        async fn publish(&self, commit: &RatifiedCommit) {
            let staged = self
                .table
                .location(&format!("_delta_log/_staged_commits/{}", commit.file_name));
            let (bytes, _) = self.table.get(&staged).await.unwrap();
            let published = self
                .table
                .location(&format!("_delta_log/{:020}.json", commit.version));
            self.table.put(&published, bytes).await.unwrap();
        }

        /// The properties of the `managed` mirror's current metadata.
        async fn mirror_properties(&self) -> std::collections::HashMap<String, String> {
            let properties = self.catalog.parameters("lake", "managed").unwrap();
            let (bytes, _) = self
                .table
                .get(&properties["metadata_location"])
                .await
                .unwrap();
            let metadata: iceberg::spec::TableMetadata = serde_json::from_slice(&bytes).unwrap();
            metadata.properties().clone()
        }

        async fn sync(&self, known: i64) -> Result<SyncReport> {
            let request = SyncRequest {
                known_version: Some(known),
                ..SyncRequest::new(ROOT, "lake")
            };
            sync_table(&self.lake, &request, Arc::default()).await
        }
    }

    /// A mirror that records no catalog id (its table was plain) of a table re-created as
    /// catalog-managed: the rebuild reads the table as its catalog has it, and the mirror
    /// records the id and reports how it was read.
    #[tokio::test(start_paused = true)]
    async fn a_table_re_created_as_catalog_managed_is_rebuilt_as_its_catalog_has_it() {
        use lakemirror_delta::test_tables::{metadata, protocol};
        let rig = rig().await;
        let root = "s3://lake/recreated";
        let table = rig.lake.stores.open(root, Arc::default()).unwrap();
        write_commit(
            &table,
            0,
            &[
                commit_info(1),
                protocol(),
                metadata("plain", &[("id", "long")], &[]),
                add("old.parquet", 10, &[]),
            ],
        )
        .await;
        let request = SyncRequest::new(root, "lake");
        sync_table(&rig.lake, &request, Arc::default())
            .await
            .unwrap();
        write_commit(
            &table,
            0,
            &catalog_managed_commit("managed", "uc-2", &[("id", "long")]),
        )
        .await;
        rig.commits.create("uc-2", root);
        let staged = write_staged(
            &table,
            1,
            "00000000-0000-4000-8000-000000000009",
            &[commit_info(2), add("new.parquet", 10, &[])],
        )
        .await;
        rig.commits.ratify("uc-2", staged);
        let rebuilt = sync_table(&rig.lake, &request, Arc::default())
            .await
            .unwrap();
        assert_eq!(
            (rebuilt.action, rebuilt.delta_version),
            (SyncAction::Rebuilt, Some(1))
        );
        assert_eq!(rebuilt.catalog_managed.unwrap().ratified_version, Some(1));
        let properties = rig.catalog.parameters("lake", "recreated").unwrap();
        let (bytes, _) = table.get(&properties["metadata_location"]).await.unwrap();
        let metadata: iceberg::spec::TableMetadata = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            metadata
                .properties()
                .get(CATALOG_TABLE_ID_PROPERTY)
                .map(String::as_str),
            Some("uc-2")
        );
    }

    /// A catalog-managed table bootstrapped in groups records its catalog's id like any other
    /// bootstrap: a mirror without it is never asked about again and stays at the published
    /// log without saying so.
    #[tokio::test(start_paused = true)]
    async fn a_catalog_managed_table_bootstrapped_in_groups_is_read_as_its_catalog_has_it_after() {
        let rig = rig().await;
        let first = rig.stage(1, "00000000-0000-4000-8000-000000000001").await;
        rig.commits.ratify("uc-1", first.clone());
        rig.publish(&first).await;
        let mut checkpoint = catalog_managed_commit("t", "uc-1", &[("id", "long")]);
        checkpoint.remove(0); // its commitInfo
        for name in [
            "a.parquet",
            "b.parquet",
            &format!("{}.parquet", first.file_name),
        ] {
            checkpoint.push(add(name, 10, &[]));
        }
        write_checkpoint(&rig.table, 1, &checkpoint).await;
        let mut request = SyncRequest {
            known_version: Some(1),
            ..SyncRequest::new(ROOT, "lake")
        };
        request.settings.bootstrap_group_files = 1;
        let created = sync_table(&rig.lake, &request, Arc::default())
            .await
            .unwrap();
        assert_eq!(
            (created.action, created.delta_version, created.added_files),
            (SyncAction::Created, Some(1), 3)
        );

        let second = rig.stage(2, "00000000-0000-4000-8000-000000000002").await;
        rig.commits.ratify("uc-1", second);
        let synced = rig.sync(2).await.unwrap();
        assert_eq!(
            (synced.action, synced.delta_version),
            (SyncAction::Synced, Some(2))
        );
        assert_eq!(
            rig.mirror_properties().await.get(CATALOG_TABLE_ID_PROPERTY),
            Some(&"uc-1".to_string())
        );
    }

    /// The name the catalog answered by is recorded beside the id, and a new process (a new
    /// commit catalog) is told it before it asks: a fresh function asks by name at once.
    #[tokio::test(start_paused = true)]
    async fn the_catalogs_name_of_the_table_is_recorded_and_told_to_the_next_process() {
        let rig = rig().await;
        let first = rig.stage(1, "00000000-0000-4000-8000-000000000001").await;
        rig.commits.ratify("uc-1", first);
        rig.sync(1).await.unwrap();
        let name = InMemoryCommitCatalog::name_of("uc-1");
        assert_eq!(
            rig.mirror_properties()
                .await
                .get(CATALOG_TABLE_NAME_PROPERTY),
            Some(&name)
        );
        assert_eq!(
            rig.commits.known_as(),
            [],
            "a new mirror has nothing to tell"
        );

        let second = rig.stage(2, "00000000-0000-4000-8000-000000000002").await;
        rig.commits.ratify("uc-1", second);
        rig.sync(2).await.unwrap();
        assert_eq!(rig.commits.known_as(), [("uc-1".to_string(), name)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_catalog_managed_table_is_mirrored_as_its_catalog_ratifies_it() {
        let rig = rig().await;
        let first = rig.stage(1, "00000000-0000-4000-8000-000000000001").await;
        rig.commits.ratify("uc-1", first.clone());
        let created = rig.sync(1).await.unwrap();
        assert_eq!(
            (created.action, created.delta_version),
            (SyncAction::Created, Some(1))
        );
        // The catalog's commits are the log's tail, read once for the whole sync.
        assert_eq!(rig.commits.asked(), 1);
        let managed = created.catalog_managed.clone().unwrap();
        assert_eq!(managed.ratified_version, Some(1));
        assert_eq!(managed.limited, None);
        assert_eq!(
            rig.mirror_properties()
                .await
                .get(CATALOG_TABLE_ID_PROPERTY)
                .map(String::as_str),
            Some("uc-1")
        );

        // Staged, not yet ratified: nothing to mirror, and the report says how far the
        // catalog got.
        let second = rig.stage(2, "00000000-0000-4000-8000-000000000002").await;
        let early = rig.sync(2).await.unwrap();
        assert_eq!(
            (early.action, early.delta_version),
            (SyncAction::Unchanged, Some(1))
        );
        assert_eq!(early.catalog_managed.unwrap().ratified_version, Some(1));
        rig.commits.ratify("uc-1", second.clone());
        let asked = rig.commits.asked();
        let ratified = rig.sync(2).await.unwrap();
        assert_eq!(
            (ratified.action, ratified.delta_version),
            (SyncAction::Synced, Some(2))
        );
        assert_eq!(rig.commits.asked(), asked + 1);

        // Published much later, the catalog told: the backfill events change nothing.
        rig.publish(&first).await;
        rig.publish(&second).await;
        rig.commits.published("uc-1", 2);
        for version in [1, 2] {
            let backfill = rig.sync(version).await.unwrap();
            assert_eq!(
                (backfill.action, backfill.delta_version),
                (SyncAction::Unchanged, Some(2)),
                "{version}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_catalog_down_fails_the_sync_retryably_and_leaves_the_mirror_alone() {
        let rig = rig().await;
        let first = rig.stage(1, "00000000-0000-4000-8000-000000000001").await;
        rig.commits.ratify("uc-1", first);
        rig.sync(1).await.unwrap();
        let second = rig.stage(2, "00000000-0000-4000-8000-000000000002").await;
        rig.commits.ratify("uc-1", second);
        rig.commits.set_down(true);
        let err = rig.sync(2).await.unwrap_err();
        assert!(err.is_retryable(), "{err}");
        rig.commits.set_down(false);
        assert_eq!(rig.sync(2).await.unwrap().delta_version, Some(2));
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_catalog_the_mirror_follows_the_published_log_and_never_goes_back() {
        let rig = rig().await;
        let first = rig.stage(1, "00000000-0000-4000-8000-000000000001").await;
        rig.commits.ratify("uc-1", first.clone());
        let without = Lakehouse::new(rig.lake.stores.clone(), rig.catalog.clone());
        let request = SyncRequest::new(ROOT, "lake");
        let limited = sync_table(&without, &request, Arc::default())
            .await
            .unwrap();
        assert_eq!(
            (limited.action, limited.delta_version),
            (SyncAction::Created, Some(0))
        );
        let managed = limited.catalog_managed.unwrap();
        assert_eq!(managed.ratified_version, None);
        assert!(managed.limited.unwrap().contains("UC_URL"));
        // With its catalog the mirror goes on to version 1; without it again, a mirror
        // past the published log is left as it is, not rebuilt as a re-created table.
        assert_eq!(rig.sync(1).await.unwrap().delta_version, Some(1));
        let left = sync_table(&without, &request, Arc::default())
            .await
            .unwrap();
        assert_eq!(
            (left.action, left.delta_version),
            (SyncAction::Unchanged, Some(1))
        );
        rig.publish(&first).await;
        let published = sync_table(&without, &request, Arc::default())
            .await
            .unwrap();
        assert_eq!(
            (published.action, published.delta_version),
            (SyncAction::Unchanged, Some(1))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_staged_file_the_catalog_did_not_ratify_is_never_mirrored() {
        let rig = rig().await;
        let winner = rig.stage(1, "00000000-0000-4000-8000-000000000001").await;
        // A writer of the table drops staged files of its own: a loser of version 1 and
        // one for version 2 the catalog never heard of.
        rig.stage(1, "ffffffff-0000-4000-8000-000000000001").await;
        rig.stage(2, "ffffffff-0000-4000-8000-000000000002").await;
        rig.commits.ratify("uc-1", winner);
        let report = rig.sync(2).await.unwrap();
        assert_eq!(report.delta_version, Some(1));
        let verify = crate::verify::verify(
            &rig.lake,
            &crate::verify::VerifyRequest {
                table_uri: ROOT.into(),
                database: "lake".into(),
                table: None,
                metadata_uri: None,
                version: None,
                max_differences: 5,
            },
            Arc::default(),
        )
        .await
        .unwrap();
        assert!(verify.equal, "{:?}", verify.differences);
        assert_eq!(verify.delta_files, 1);
        assert_eq!(verify.catalog_managed.unwrap().ratified_version, Some(1));
    }
}
