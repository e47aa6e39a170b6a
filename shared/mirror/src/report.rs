//! What a sync reports: what it did to the mirror ([`SyncAction`]) and the figures of it
//! ([`SyncReport`]), the last line the CLI prints and what each function answers. The sync
//! ([`crate::sync`]), the one commit ([`crate::commit`]) and the fan-out fill it in.

use std::time::Instant;

use lakemirror_delta::DeltaLog;
use lakemirror_delta::catalog_managed::CatalogManagedReport;
use lakemirror_iceberg::writer::{SnapshotOutcome, StagedTable};
use lakemirror_plan::CommittedTable;
use lakemirror_plan::target::NamedBy;
use lakemirror_storage::{IoCounters, IoTotals};

/// What a sync did to the mirror.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncAction {
    /// The Iceberg table was created.
    Created,
    /// New snapshots were added to the mirror's history.
    Synced,
    /// The mirror was at the Delta version already.
    Unchanged,
    /// The mirror was written anew, as a new history (see `reason`).
    Rebuilt,
    /// The Delta table is gone and the Glue table was deleted (`--on-missing-source=drop`).
    Dropped,
}

/// The outcome of a sync, printed as the last line of the CLI.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SyncReport {
    pub action: SyncAction,
    /// Why the mirror was rebuilt or dropped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub database: String,
    pub table: String,
    /// Which rule named the Glue table.
    pub named_by: NamedBy,
    pub delta_version: Option<i64>,
    pub snapshot_id: Option<i64>,
    pub snapshots_committed: usize,
    pub added_files: usize,
    pub removed_files: usize,
    /// Iceberg snapshots expired because Delta VACUUM may delete their files.
    pub expired_snapshots: usize,
    /// Older Iceberg snapshots let go as the history policy thins them (one per hour, then
    /// per day, outside the per-version window).
    pub thinned_snapshots: usize,
    pub metadata_location: Option<String>,
    /// Columns left out of the Iceberg schema: a type or a widening its format version cannot
    /// hold, or a column Java Iceberg cannot read (`lakemirror.omitted-columns` says why).
    pub omitted_columns: Vec<String>,
    /// What readers of the mirror are told beside its columns (a reader's limit it works
    /// around, and how: `read.parquet.vectorization.enabled=false` while Spark's vectorized
    /// reader cannot read its widened columns).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reader_notes: Vec<String>,
    /// For a catalog-managed Delta table: what its catalog ratified, or why the mirror is
    /// limited to the published log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_managed: Option<CatalogManagedReport>,
    pub attempts: u32,
    /// Steps the sync took: more than one when more commits were new than one read of the
    /// log holds, each step committed before the next was read.
    #[serde(skip_serializing_if = "is_one")]
    pub steps: u32,
    pub elapsed_ms: u64,
    pub io: IoTotals,
    pub snapshots: Vec<SnapshotOutcome>,
}

impl SyncReport {
    /// The report of a sync that wrote nothing (yet) to `database.table`: the mirror as read
    /// (`current`, None when there is none), after `attempts` attempts.
    pub(crate) fn of(
        database: &str,
        table: &str,
        named_by: NamedBy,
        current: Option<&CommittedTable>,
        attempts: u32,
    ) -> Self {
        Self {
            action: SyncAction::Unchanged,
            reason: None,
            database: database.to_string(),
            table: table.to_string(),
            named_by,
            delta_version: current.and_then(CommittedTable::delta_version),
            snapshot_id: current.and_then(|c| c.metadata.current_snapshot_id()),
            snapshots_committed: 0,
            added_files: 0,
            removed_files: 0,
            expired_snapshots: 0,
            thinned_snapshots: 0,
            metadata_location: current.map(|c| c.metadata_location.clone()),
            omitted_columns: current
                .map(CommittedTable::omitted_columns)
                .unwrap_or_default(),
            reader_notes: current
                .map(CommittedTable::reader_notes)
                .unwrap_or_default(),
            catalog_managed: None,
            attempts,
            steps: 1,
            elapsed_ms: 0,
            io: IoTotals::default(),
            snapshots: Vec::new(),
        }
    }

    /// The Delta table at `table` is gone and its Glue table was deleted.
    pub(crate) fn dropped(mut self, table: &str, log: &DeltaLog) -> Self {
        self.action = SyncAction::Dropped;
        self.reason = Some(format!("the Delta table at {table} is missing"));
        self.catalog_managed = log.catalog_managed_report();
        self
    }

    /// What a commit of `staged` at `location` wrote.
    pub(crate) fn committed(&mut self, staged: &StagedTable, location: String) {
        self.expired_snapshots = staged.expired_snapshots.len();
        self.thinned_snapshots = staged.thinned_snapshots.len();
        self.snapshots_committed = staged.snapshots.len();
        self.added_files = staged.snapshots.iter().map(|s| s.added_files).sum();
        self.removed_files = staged.snapshots.iter().map(|s| s.removed_files).sum();
        self.delta_version = staged.snapshots.last().map(|s| s.delta_version);
        self.snapshot_id = staged.snapshots.last().map(|s| s.snapshot_id);
        self.metadata_location = Some(location);
        self.omitted_columns = staged.table.omitted_columns();
        self.reader_notes = staged.table.reader_notes();
        self.snapshots = staged.snapshots.clone();
    }

    /// This step's report followed by the next one's: what both did, the newest state.
    pub(crate) fn followed_by(self, next: SyncReport) -> Self {
        // What the steps did together: the weightiest of their actions.
        let weight = |action: SyncAction| match action {
            SyncAction::Unchanged => 0,
            SyncAction::Synced => 1,
            SyncAction::Created => 2,
            SyncAction::Rebuilt => 3,
            SyncAction::Dropped => 4,
        };
        let action = match weight(next.action) > weight(self.action) {
            true => next.action,
            false => self.action,
        };
        let mut snapshots = self.snapshots;
        snapshots.extend(next.snapshots);
        Self {
            action,
            reason: self.reason.or(next.reason),
            snapshots_committed: self.snapshots_committed + next.snapshots_committed,
            added_files: self.added_files + next.added_files,
            removed_files: self.removed_files + next.removed_files,
            expired_snapshots: self.expired_snapshots + next.expired_snapshots,
            thinned_snapshots: self.thinned_snapshots + next.thinned_snapshots,
            attempts: self.attempts.max(next.attempts),
            steps: self.steps + next.steps,
            snapshots,
            ..next
        }
    }

    /// The report with the sync's time since `started` and its requests.
    pub(crate) fn finished(mut self, started: Instant, counters: &IoCounters) -> Self {
        self.elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.io = counters.totals();
        self
    }
}

fn is_one(n: &u32) -> bool {
    *n == 1
}
