//! `glue-sync`: bring the Iceberg table in Glue to the Delta table's newest version.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::delta::{CommitsSince, DeltaLog, DeltaSnapshot, Metadata};
use crate::error::{Error, Result};
use crate::glue::{GlueCatalog, GlueTable, default_table_name};
use crate::mirror::{CommittedTable, MetadataWriter, SnapshotPlan, plan_commits, plan_full};
use crate::storage::{IoCounters, IoTotals, TableStorage};
use crate::target::{RememberedProperties, TARGET_FILE, TargetDefaults, TargetProperties};

/// How many times a sync re-plans after losing a race for the Glue table.
pub const MAX_ATTEMPTS: u32 = 8;
/// How many times one sync follows the Delta table's `lakemirror.glue.*` properties to
/// another Glue table (each move re-reads what the properties say).
const MAX_MOVES: u32 = 3;

/// What to mirror where.
#[derive(Debug, Clone)]
pub struct GlueSyncRequest {
    /// The Delta table root: `s3://bucket/path`, `file:///path` or a local path.
    pub table_uri: String,
    /// Glue database; the Delta table property `lakemirror.glue.database` overrides it.
    pub database: String,
    /// Glue table name, used as given. Without it: the Delta table property
    /// `lakemirror.glue.table`, else the folder name.
    pub table: Option<String>,
    /// Where Iceberg metadata goes; defaults to `<table>/_lakemirror/iceberg`.
    pub metadata_uri: Option<String>,
    /// Stop at this Delta version instead of the newest.
    pub to_version: Option<i64>,
    /// A version the Delta log is known to hold, from the event that announced it. Without
    /// `to_version`, the sync reads the commits up to it by name and leaves newer ones to
    /// their own events; nothing is read from the log when the mirror already has it.
    pub known_version: Option<i64>,
    /// Format version of a new Iceberg table; the Delta table property
    /// `lakemirror.iceberg.format-version` overrides it. An existing table keeps its own.
    pub format_version: iceberg::spec::FormatVersion,
}

/// The outcome of a sync, printed as the last line of the CLI.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyncReport {
    pub database: String,
    pub table: String,
    pub delta_version: Option<i64>,
    pub snapshot_id: Option<i64>,
    pub snapshots_committed: usize,
    pub added_files: usize,
    pub removed_files: usize,
    /// Iceberg snapshots expired because Delta VACUUM may delete their files.
    pub expired_snapshots: usize,
    pub metadata_location: Option<String>,
    /// Columns left out of the Iceberg schema because Java Iceberg cannot read them
    /// (`lakemirror.omitted-columns`).
    pub omitted_columns: Vec<String>,
    pub attempts: u32,
    pub elapsed_ms: u64,
    pub io: IoTotals,
    pub snapshots: Vec<crate::mirror::writer::SnapshotOutcome>,
}

/// Runs one sync, retrying when another writer commits first.
pub async fn glue_sync(
    glue: &GlueCatalog,
    request: &GlueSyncRequest,
    counters: Arc<IoCounters>,
) -> Result<SyncReport> {
    let started = Instant::now();
    let glue = &glue.counting_in(counters.clone());
    let data = TableStorage::open(&request.table_uri, counters.clone())?;
    let metadata_uri = request
        .metadata_uri
        .clone()
        .unwrap_or_else(|| data.location("_lakemirror/iceberg"));
    let metadata_store = TableStorage::open(&metadata_uri, counters.clone())?;
    let defaults = TargetDefaults {
        database: request.database.clone(),
        table: default_table_name(&request.table_uri),
        explicit_table: request.table.clone(),
    };
    let log = DeltaLog::new(data.clone());
    let writer = MetadataWriter::new(metadata_store.clone(), data.clone())
        .with_format_version(request.format_version);
    // An explicit Glue table needs no lakemirror.glue.* properties.
    let remembered = match defaults.fixed() {
        Some(_) => None,
        None => remembered_properties(&metadata_store, data.root_uri()).await?,
    };
    // A snapshot read to learn the properties is handed to the first plan, not read twice.
    let mut snapshot = None;
    let mut properties = match (defaults.fixed(), &remembered) {
        (Some(_), _) => TargetProperties::default(),
        (None, Some(known)) => known.properties.clone(),
        (None, None) => {
            let read = log.snapshot(request.to_version).await?;
            let properties = TargetProperties::of(read.metadata());
            snapshot = Some(read);
            properties
        }
    };
    let mut target = defaults.resolve(&properties)?;

    let mut attempt = 0;
    let mut moves = 0;
    loop {
        attempt += 1;
        let read = glue
            .load(
                &target.database,
                &target.table,
                data.root_uri(),
                &metadata_store,
            )
            .await?;
        let planned = plan(&log, &read, request, snapshot.take()).await?;
        if defaults.fixed().is_none()
            && let Some(metadata) = &planned.newest_metadata
        {
            properties = TargetProperties::of(Some(metadata));
            let wanted = defaults.resolve(&properties)?;
            if wanted != target {
                moves += 1;
                if moves > MAX_MOVES {
                    return Err(Error::CatalogState(format!(
                        "the Glue target of {} keeps changing between {}.{} and {}.{}; check its lakemirror.glue.* table properties",
                        request.table_uri,
                        target.database,
                        target.table,
                        wanted.database,
                        wanted.table
                    )));
                }
                tracing::warn!(
                    table = %request.table_uri,
                    from = %format!("{}.{}", target.database, target.table),
                    to = %format!("{}.{}", wanted.database, wanted.table),
                    "the Delta table's lakemirror.glue.* properties name another Glue table; mirroring there (the old Glue table is left as it is: drop it when nothing reads it)"
                );
                target = wanted;
                attempt -= 1;
                continue;
            }
        }
        let plans = planned.plans;
        let mut report = SyncReport {
            database: target.database.clone(),
            table: target.table.clone(),
            delta_version: read.current.as_ref().and_then(|c| c.delta_version()),
            snapshot_id: read
                .current
                .as_ref()
                .and_then(|c| c.metadata.current_snapshot_id()),
            snapshots_committed: 0,
            added_files: 0,
            removed_files: 0,
            expired_snapshots: 0,
            metadata_location: read.current.as_ref().map(|c| c.metadata_location.clone()),
            omitted_columns: read
                .current
                .as_ref()
                .map(CommittedTable::omitted_columns)
                .unwrap_or_default(),
            attempts: attempt,
            elapsed_ms: 0,
            io: IoTotals::default(),
            snapshots: Vec::new(),
        };
        if !plans.is_empty() {
            let first = plans.first().map(|p| p.delta_version);
            let last = plans.last().map(|p| p.delta_version);
            tracing::info!(table = %read.full_name(), from = ?first, to = ?last, "writing {} snapshot(s)", plans.len());
            let staged = writer.stage(read.current.as_ref(), plans).await?;
            crate::crash::point("glue-before-commit");
            match glue.commit(&read, &staged.table).await {
                Ok(()) => crate::crash::point("glue-after-commit"),
                Err(Error::CommitConflict(table)) if attempt < MAX_ATTEMPTS => {
                    let pause = backoff(attempt);
                    tracing::warn!(%table, attempt, ?pause, "another writer committed first; re-planning");
                    tokio::time::sleep(pause).await;
                    continue;
                }
                Err(e) => return Err(e),
            }
            writer.delete_expired(&staged.expired_files).await;
            report.expired_snapshots = staged.expired_snapshots.len();
            report.snapshots_committed = staged.snapshots.len();
            report.added_files = staged.snapshots.iter().map(|s| s.added_files).sum();
            report.removed_files = staged.snapshots.iter().map(|s| s.removed_files).sum();
            report.delta_version = staged.snapshots.last().map(|s| s.delta_version);
            report.snapshot_id = staged.snapshots.last().map(|s| s.snapshot_id);
            report.metadata_location = Some(staged.table.metadata_location.clone());
            report.omitted_columns = staged.table.omitted_columns();
            if !report.omitted_columns.is_empty() {
                tracing::warn!(table = %read.full_name(), columns = ?report.omitted_columns, "columns left out of the Iceberg schema: Java Iceberg cannot read them (see lakemirror.omitted-columns)");
            }
            report.snapshots = staged.snapshots;
        }
        if defaults.fixed().is_none()
            && let Some(version) = report.delta_version
            && remembered
                .as_ref()
                .is_none_or(|r| r.properties != properties && r.delta_version <= version)
        {
            remember_properties(&metadata_store, data.root_uri(), version, &properties).await?;
        }
        report.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        report.io = counters.totals();
        return Ok(report);
    }
}

/// What to write: nothing when Iceberg is already at the target version, the commits since
/// the synced version when the log still has them, else the whole table at the target.
async fn plan(
    log: &DeltaLog,
    read: &GlueTable,
    request: &GlueSyncRequest,
    snapshot: Option<DeltaSnapshot>,
) -> Result<Planned> {
    let root = log.table().root_uri();
    let to_version = request.to_version;
    let full = async |view| -> Result<Planned> {
        let snapshot = match snapshot {
            Some(s) => s,
            None => log.snapshot(to_version).await?,
        };
        Ok(Planned {
            plans: vec![plan_full(root, view, &snapshot)?],
            newest_metadata: snapshot.metadata().cloned(),
        })
    };
    let Some(current) = &read.current else {
        return full(None).await;
    };
    let view = current.view()?;
    let Some(synced) = view.delta_version else {
        return full(Some(&view)).await;
    };
    if let Some(target) = to_version
        && target <= synced
    {
        if target < synced {
            tracing::warn!(table = %read.full_name(), synced, target, "the mirror is already past the requested version; lakemirror never rewinds a table");
        }
        return Ok(Planned::default());
    }
    if to_version.is_none()
        && let Some(known) = request.known_version
        && known <= synced
    {
        tracing::debug!(table = %read.full_name(), synced, known, "the announced commit is mirrored already");
        return Ok(Planned::default());
    }
    match log
        .commits_since(synced, to_version, request.known_version)
        .await?
    {
        CommitsSince::Contiguous(commits) => Ok(Planned {
            plans: plan_commits(root, &view, &commits)?,
            newest_metadata: commits.iter().rev().find_map(|c| c.metadata.clone()),
        }),
        CommitsSince::Gap { first_available } => {
            tracing::warn!(table = %read.full_name(), synced, ?first_available, "commits after the synced version were cleaned up; rebuilding from the checkpoint");
            full(Some(&view)).await
        }
    }
}

/// The snapshots to write, and the newest Delta metadata that planning saw (None when the
/// commits planned did not change it).
#[derive(Default)]
struct Planned {
    plans: Vec<SnapshotPlan>,
    newest_metadata: Option<Metadata>,
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
    metadata_store
        .put(&metadata_store.location(TARGET_FILE), bytes.into())
        .await
}

/// Exponential backoff with jitter: 50 ms, 100 ms, ... capped at 5 s.
fn backoff(attempt: u32) -> Duration {
    let base = 50u64.saturating_mul(1 << attempt.min(7)).min(5_000);
    let jitter = u64::from(uuid::Uuid::new_v4().as_u128() as u16) % (base / 2 + 1);
    Duration::from_millis(base / 2 + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_bounded() {
        for attempt in 1..20 {
            let pause = backoff(attempt);
            assert!(pause <= Duration::from_millis(5_000), "{pause:?}");
            assert!(pause >= Duration::from_millis(25));
        }
        assert!(backoff(1) <= Duration::from_millis(100));
    }
}
