//! The sync's decisions, apart from its retry loop ([`crate::sync`]): given the mirror
//! as read and the Delta log, what to write. Nothing of the catalog changes here; the loop
//! commits what these plan, and plans again when it loses a race.

use lakemirror_delta::{CatalogManaged, CommitsSince, DeltaLog, DeltaSnapshot, Metadata};
use lakemirror_plan::expiry::expiring_plans;
use lakemirror_plan::history::{HistoryPolicy, merge_thinned};
use lakemirror_plan::partition::is_avro_name;
use lakemirror_plan::properties::RETENTION_PROPERTY;
use lakemirror_plan::{
    CommittedTable, IcebergView, SnapshotPlan, plan_commits, plan_full, plan_full_taking,
};

use crate::error::{Error, Result};
use crate::grouped::GroupedBootstrap;
use crate::settings::SyncRequest;
use lakemirror_iceberg::catalog::CatalogTable;

/// What to write: nothing when Iceberg is already at the target version, the commits since
/// the synced version when the log still has them, else the whole table at the target; or,
/// when the Delta table is not the one the mirror was built from (re-created at the same
/// location) or changed in a way a mirror cannot follow (column mapping turned on), the
/// table as a new history. An event for a version the mirror has is dropped only after the
/// log was seen to still hold the very commit the mirror last took. `in_groups`: the table
/// is already known to be bootstrapped in groups (too large for one read).
pub(crate) async fn plan(
    log: &DeltaLog,
    read: &CatalogTable,
    request: &SyncRequest,
    history: Option<RecentHistory>,
    in_groups: bool,
) -> Result<Planned> {
    let to_version = request.to_version;
    let Some(current) = &read.current else {
        return plan_new_mirror(log, read, request, history, in_groups).await;
    };
    let view = current.view()?;
    let spec = current.metadata.default_partition_spec();
    if let Some(field) = spec.fields().iter().find(|f| !is_avro_name(&f.name)) {
        let reason = format!(
            "partition field {:?} is not a valid Avro name, which DuckDB and the Apache Avro libraries refuse in a manifest: the mirror is written again with valid names",
            field.name
        );
        let format_version = Some(current.metadata.format_version());
        return rebuild(log, request, None, Some(reason), format_version, None).await;
    }
    let Some(synced) = view.delta_version else {
        let snapshot = log.snapshot(to_version).await?;
        let metadata = snapshot.metadata().cloned();
        let read_as = snapshot.catalog_managed.clone();
        return Ok(Planned::grown(
            vec![plan_full_taking(
                log.table().scope(),
                Some(&view),
                snapshot,
                request.settings.format_version,
            )?],
            metadata.as_ref(),
        )
        .read_as(read_as.as_ref()));
    };
    let mirrored_already = match to_version {
        Some(target) => target <= synced,
        None => request.known_version.is_some_and(|known| known <= synced),
    };
    // The check and the read of the new commits go out together: one round trip.
    let identity = async {
        Ok::<_, Error>(match current.commit_hash() {
            None => Identity::Unrecorded,
            Some(recorded) => match log.commit_hash(synced).await? {
                None => Identity::Missing,
                Some(hash) if hash == recorded => Identity::Same,
                Some(_) => Identity::Changed,
            },
        })
    };
    let commits = async {
        match (mirrored_already, to_version) {
            (true, Some(_)) => Ok(None),
            // An event for a version the mirror holds (a duplicate, a late one, a backfill):
            // one request for the next commit, so that commits whose events were lost are
            // synced now, not at the table's next commit.
            (true, None) => match log.has_commit(synced + 1).await? {
                false => Ok(None),
                true => log.commits_since(synced, None, None).await.map(Some),
            },
            (false, _) => log
                .commits_since(synced, to_version, request.known_version)
                .await
                .map(Some),
        }
    };
    let (identity, commits) = tokio::join!(identity, commits);
    let identity = identity?;
    if identity == Identity::Missing
        && matches!(log.tail(), Some(CatalogManaged::PublishedOnly { .. }))
    {
        // The mirror holds commits its catalog ratified that are not published yet; without
        // the catalog nothing past the published log can be read, nor the mirror checked.
        tracing::warn!(table = %read.full_name(), synced, "the mirror is past the Delta table's published log; without its catalog it is left as it is");
        return Ok(Planned::default());
    }
    if matches!(identity, Identity::Missing | Identity::Changed) {
        return checked_full(log, read, current, &view, synced, request, identity).await;
    }
    let commits = commits?;
    if commits.is_none() {
        if to_version.is_some_and(|target| target < synced) {
            tracing::warn!(table = %read.full_name(), synced, target = ?to_version, "the mirror is already past the requested version; lakemirror never rewinds a table");
        } else {
            tracing::debug!(table = %read.full_name(), synced, "the announced commit is mirrored already");
        }
        return Ok(Planned::default());
    }
    planned_commits(
        log, read, current, &view, synced, request, identity, commits,
    )
    .await
}

/// A mirror to start (none in the catalog), or one to write anew because its metadata is
/// gone: the whole table at the target version, in groups when it is too large for one read.
async fn plan_new_mirror(
    log: &DeltaLog,
    read: &CatalogTable,
    request: &SyncRequest,
    history: Option<RecentHistory>,
    in_groups: bool,
) -> Result<Planned> {
    let root = log.table().root_uri();
    let to_version = request.to_version;
    if let Some(lost) = &read.lost {
        let reason =
            format!("the mirror's metadata {lost} is gone: the Delta table's folder was deleted");
        return match rebuild(log, request, None, Some(reason), None, None).await {
            Err(e) if e.is_not_a_delta_table() => Err(Error::SourceMissing {
                table: root.to_string(),
                catalog_table: read.full_name(),
            }),
            planned => planned,
        };
    }
    if !in_groups && (history.is_some() || !bootstraps_in_groups(log, request).await?) {
        // A new mirror: its history starts with the per-version window.
        match rebuild(log, request, None, None, None, history).await {
            // More files than one read holds (a huge commit and no checkpoint yet).
            Err(e) if e.is_too_many_files() => {
                tracing::info!(table = %root, error = %e, "bootstrapping in groups")
            }
            planned => return planned,
        }
    }
    let grouped =
        GroupedBootstrap::read(log, to_version, request.settings.bootstrap_group_files).await?;
    Ok(Planned {
        plans: Vec::new(),
        newest_metadata: grouped.metadata().cloned(),
        rebuilt: None,
        catalog_managed: grouped.catalog_managed().cloned(),
        grouped: Some(grouped),
        more_follow: false,
    })
}

/// The mirror at `synced` extended by the `commits` since, or written anew from a
/// checkpoint when the log no longer holds them all, or when a commit asks for a rebuild.
#[allow(clippy::too_many_arguments)]
async fn planned_commits(
    log: &DeltaLog,
    read: &CatalogTable,
    current: &CommittedTable,
    view: &IcebergView,
    synced: i64,
    request: &SyncRequest,
    identity: Identity,
    commits: Option<CommitsSince>,
) -> Result<Planned> {
    let (commits, more_follow) = match commits {
        Some(CommitsSince::Contiguous(commits)) => (Some(commits), false),
        Some(CommitsSince::Partial(commits)) => (Some(commits), true),
        Some(CommitsSince::Gap { first_available }) => {
            tracing::warn!(table = %read.full_name(), synced, ?first_available, "commits after the synced version were cleaned up; rebuilding from the checkpoint");
            return checked_full(log, read, current, view, synced, request, identity).await;
        }
        None => (None, false),
    };
    match commits {
        Some(commits) => match plan_commits(log.table().scope(), view, &commits) {
            Ok(plans) => {
                let policy = history_policy(request, Some(current), &plans);
                let mut planned = Planned::grown(
                    written_plans(plans, &policy, Some(current)),
                    commits.iter().rev().find_map(|c| c.metadata.as_ref()),
                );
                planned.more_follow = more_follow;
                Ok(planned)
            }
            Err(lakemirror_plan::Error::RebuildNeeded {
                from_version,
                reason,
                ..
            }) => {
                let format_version = Some(current.metadata.format_version());
                rebuild(
                    log,
                    request,
                    Some(from_version),
                    Some(reason),
                    format_version,
                    None,
                )
                .await
            }
            Err(e) => Err(e.into()),
        },
        None => Ok(Planned::default()),
    }
}

/// Whether the log still holds the commit the mirror's current snapshot was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Identity {
    Same,
    /// Its file is gone: log cleanup, or the table was dropped or re-created.
    Missing,
    /// Another commit of the same version: the table was re-created.
    Changed,
    /// Mirrors written before lakemirror recorded it.
    Unrecorded,
}

/// The whole table at the target, after checking that it is still the table mirrored: when
/// it is not, a new history; when it is gone, [`Error::SourceMissing`].
pub(crate) async fn checked_full(
    log: &DeltaLog,
    read: &CatalogTable,
    current: &CommittedTable,
    view: &IcebergView,
    synced: i64,
    request: &SyncRequest,
    identity: Identity,
) -> Result<Planned> {
    let root = log.table().root_uri();
    let snapshot = match log.snapshot(request.to_version).await {
        Err(lakemirror_delta::Error::NotADeltaTable(_)) => {
            return Err(Error::SourceMissing {
                table: root.to_string(),
                catalog_table: read.full_name(),
            });
        }
        other => other?,
    };
    // A catalog-managed table found by this read: the rebuild reads on with its tail.
    let log = &log.clone().with_tail(snapshot.catalog_managed.clone());
    let table_id = snapshot.metadata().and_then(|m| m.id.as_deref());
    let reason = match (current.delta_table_id(), table_id) {
        (Some(was), Some(now)) if was != now => Some(format!(
            "the Delta table was re-created at the same location (table id {now}, was {was})"
        )),
        _ if snapshot.version < synced && request.to_version.is_none() => Some(format!(
            "the Delta table's newest version {} is below the mirrored version {synced}: it was re-created at the same location",
            snapshot.version
        )),
        _ if identity == Identity::Changed => Some(format!(
            "Delta commit {synced} is not the commit the mirror was built from: the table was re-created at the same location"
        )),
        _ => None,
    };
    let format_version = Some(current.metadata.format_version());
    if reason.is_none() && snapshot.version < synced {
        tracing::warn!(table = %read.full_name(), synced, target = snapshot.version, "the mirror is already past the requested version; lakemirror never rewinds a table");
        return Ok(Planned::default());
    }
    match reason {
        Some(reason) => rebuild(log, request, None, Some(reason), format_version, None).await,
        None => match plan_full(
            log.table().scope(),
            Some(view),
            &snapshot,
            request.settings.format_version,
        ) {
            Err(lakemirror_plan::Error::RebuildNeeded { reason, .. }) => {
                rebuild(
                    log,
                    request,
                    Some(snapshot.version),
                    Some(reason),
                    format_version,
                    None,
                )
                .await
            }
            plan => Ok(Planned::grown(vec![plan?], snapshot.metadata())
                .read_as(snapshot.catalog_managed.as_ref())),
        },
    }
}

/// The mirror as a new history (`reason`: why; None for a new mirror): the versions of the
/// per-version window the log still holds, from `from` at the earliest, to the target, in
/// `format_version` unless the Delta table asks for another. A new mirror's history starts
/// no earlier than the newest checkpoint: the versions its replay reads anyway, so the first
/// sync of a large table costs about what one snapshot does. A change the new history meets
/// on the way that a mirror cannot follow starts it again at that change. `history` is the
/// window when it was read already.
pub(crate) async fn rebuild(
    log: &DeltaLog,
    request: &SyncRequest,
    from: Option<i64>,
    reason: Option<String>,
    format_version: Option<iceberg::spec::FormatVersion>,
    history: Option<RecentHistory>,
) -> Result<Planned> {
    let root = log.table().root_uri();
    let mut floor = from;
    let mut versions = request.settings.history.recent_versions;
    let mut read = history;
    loop {
        let history = match read.take() {
            Some(history) => history,
            None => RecentHistory::read(log, request, floor, reason.is_none()).await?,
        };
        let start = history.base.version;
        let window_full =
            history.commits.len() + 1 >= usize::try_from(versions).unwrap_or(usize::MAX);
        let newest_metadata = history.newest_metadata().cloned();
        let read_as = history.catalog_managed().cloned();
        // The mirror keeps its format version unless the Delta table asks for another.
        let mut first = plan_full_taking(
            log.table().scope(),
            None,
            history.base,
            format_version.unwrap_or(request.settings.format_version),
        )?;
        first.format_version = first.format_version.or(format_version);
        let view = IcebergView::of_new_table(&first).ok_or_else(|| {
            Error::malformed(
                root,
                format!("version {start} has no schema to rebuild from"),
            )
        })?;
        match plan_commits(log.table().scope(), &view, &history.commits) {
            Ok(rest) => {
                let plans: Vec<SnapshotPlan> = std::iter::once(first).chain(rest).collect();
                let policy = history_policy(request, None, &plans);
                // The table asks for a longer window than the one read: read it again.
                if window_full && policy.recent_versions > versions {
                    versions = policy.recent_versions;
                    read = Some(
                        RecentHistory::read_versions(
                            log,
                            request,
                            floor,
                            versions,
                            reason.is_none(),
                        )
                        .await?,
                    );
                    continue;
                }
                return Ok(Planned {
                    plans: written_plans(plans, &policy, None),
                    newest_metadata,
                    rebuilt: reason,
                    grouped: None,
                    more_follow: false,
                    catalog_managed: read_as,
                });
            }
            Err(lakemirror_plan::Error::RebuildNeeded { from_version, .. })
                if from_version > start =>
            {
                floor = Some(from_version);
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The Delta table at the start of the per-version window and the commits after it.
pub(crate) struct RecentHistory {
    base: DeltaSnapshot,
    commits: Vec<lakemirror_delta::DeltaCommit>,
}

impl RecentHistory {
    /// The window the deployment's policy keeps, from `floor` at the earliest (with
    /// `since_checkpoint`, from the newest checkpoint).
    pub(crate) async fn read(
        log: &DeltaLog,
        request: &SyncRequest,
        floor: Option<i64>,
        since_checkpoint: bool,
    ) -> Result<Self> {
        let versions = request.settings.history.recent_versions;
        Self::read_versions(log, request, floor, versions, since_checkpoint).await
    }

    async fn read_versions(
        log: &DeltaLog,
        request: &SyncRequest,
        floor: Option<i64>,
        versions: u64,
        since_checkpoint: bool,
    ) -> Result<Self> {
        let (base, commits) = log
            .recent_history(request.to_version, versions, floor, since_checkpoint)
            .await?;
        Ok(Self { base, commits })
    }

    /// How a catalog-managed table was read (the log's tail the read found).
    pub(crate) fn catalog_managed(&self) -> Option<&CatalogManaged> {
        self.base.catalog_managed.as_ref()
    }

    /// The newest metaData: the last commit's that has one, else the base's.
    pub(crate) fn newest_metadata(&self) -> Option<&Metadata> {
        self.commits
            .iter()
            .rev()
            .find_map(|c| c.metadata.as_ref())
            .or(self.base.metadata())
    }
}

/// The snapshots to write, and the newest Delta metadata that planning saw (None when the
/// commits planned did not change it).
#[derive(Default)]
pub(crate) struct Planned {
    pub(crate) plans: Vec<SnapshotPlan>,
    pub(crate) newest_metadata: Option<Metadata>,
    /// Why the mirror is written as a new history; None when the plans extend it.
    pub(crate) rebuilt: Option<String>,
    /// A new mirror of a large table, written in groups instead of `plans`.
    pub(crate) grouped: Option<GroupedBootstrap>,
    /// More commits follow the planned ones than one read of the log held: the sync goes on
    /// once these are committed.
    pub(crate) more_follow: bool,
    /// How a whole read of the table (a snapshot, a history) found a catalog-managed table
    /// to be read, when the log had no tail yet: the sync keeps it for the rest of its work
    /// (the id it records, its report).
    pub(crate) catalog_managed: Option<CatalogManaged>,
}

/// Whether a new mirror of this table is bootstrapped in groups: its newest checkpoint holds
/// more actions than one bootstrap holds files (`_last_checkpoint`'s size; one small read):
/// `BOOTSTRAP_GROUP_FILES`, or what the work's share of the memory budget holds if less.
pub(crate) async fn bootstraps_in_groups(log: &DeltaLog, request: &SyncRequest) -> Result<bool> {
    let held = request
        .settings
        .bootstrap_group_files
        .min(log.limits().held_files);
    Ok(log
        .last_checkpoint_size()
        .await?
        .is_some_and(|size| size > held))
}

impl Planned {
    fn grown(plans: Vec<SnapshotPlan>, newest_metadata: Option<&Metadata>) -> Self {
        Self {
            plans,
            newest_metadata: newest_metadata.cloned(),
            rebuilt: None,
            grouped: None,
            more_follow: false,
            catalog_managed: None,
        }
    }

    /// These plans, read from the table as `read_as` says.
    fn read_as(mut self, read_as: Option<&CatalogManaged>) -> Self {
        self.catalog_managed = read_as.cloned();
        self
    }
}

/// The plans to write of `plans` (oldest first, on top of `current`): the versions the
/// policy keeps, the others merged into the next one kept, and none that would expire at once.
pub(crate) fn written_plans(
    plans: Vec<SnapshotPlan>,
    policy: &HistoryPolicy,
    current: Option<&CommittedTable>,
) -> Vec<SnapshotPlan> {
    let retention = plans
        .iter()
        .rev()
        .find_map(|p| p.deleted_file_retention_ms)
        .or_else(|| {
            current
                .and_then(|c| c.metadata.properties().get(RETENTION_PROPERTY))
                .and_then(|r| r.parse().ok())
        })
        .unwrap_or(lakemirror_delta::actions::DEFAULT_DELETED_FILE_RETENTION_MS);
    let now = chrono::Utc::now().timestamp_millis();
    let expiring = expiring_plans(&plans, now, retention);
    merge_thinned(plans, policy, expiring)
}

/// The history a mirror keeps after `plans`: the deployment's policy, with the table's own
/// settings as the newest plan that states them says, else as the mirror keeps them.
pub(crate) fn history_policy(
    request: &SyncRequest,
    current: Option<&CommittedTable>,
    plans: &[SnapshotPlan],
) -> HistoryPolicy {
    match plans.iter().rev().find_map(|p| p.history.as_ref()) {
        Some(settings) => request.settings.history.with_settings(settings),
        None => current
            .and_then(|c| {
                request
                    .settings
                    .history
                    .overridden_by(c.metadata.properties())
                    .ok()
            })
            .unwrap_or(request.settings.history),
    }
}
