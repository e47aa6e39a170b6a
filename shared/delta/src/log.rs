//! The `_delta_log` folder on storage: which versions exist, commits and checkpoints.
//!
//! Only `_delta_log/` is ever listed; data files come from the log alone.

use futures::{StreamExt, TryStreamExt, stream};
use serde::Deserialize;

use std::sync::{Arc, Mutex};

use crate::actions::{ActionLine, DeltaCommit, Metadata, Protocol};
use crate::catalog_managed::{
    self, CatalogError, CatalogManaged, CommitCatalog, Ratified, STAGED_COMMITS,
};
use crate::checkpoint::{
    SparseFile, definition_actions, definition_chunk_ranges, footer_start,
    for_each_checkpoint_action, json_actions,
};
use crate::error::{Error, Result};
use crate::limits::LogLimits;
use crate::replay::{ActiveFileSet, FileFilter};
use lakemirror_storage::TableStorage;

/// Commit files read at once.
const FETCH_CONCURRENCY: usize = 16;

/// What a file in `_delta_log/` is, judged by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFileKind {
    Commit(i64),
    /// Classic checkpoint; `parts` is `Some((part, of))` for multi-part checkpoints.
    Checkpoint {
        version: i64,
        parts: Option<(u32, u32)>,
    },
    /// UUID-named (v2) checkpoint.
    V2Checkpoint(i64),
    /// `.crc`, `_last_checkpoint`, compacted logs, temporary files, sidecars...
    Other,
}

impl LogFileKind {
    /// The version a commit or checkpoint file is of.
    pub fn version(&self) -> Option<i64> {
        match *self {
            LogFileKind::Commit(v)
            | LogFileKind::Checkpoint { version: v, .. }
            | LogFileKind::V2Checkpoint(v) => Some(v),
            LogFileKind::Other => None,
        }
    }
}

/// Classifies a file name (the last path segment) in `_delta_log/`.
pub fn classify(name: &str) -> LogFileKind {
    let Some((digits, rest)) = name.split_at_checked(20) else {
        return LogFileKind::Other;
    };
    let Ok(version) = digits.parse::<i64>() else {
        return LogFileKind::Other;
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return LogFileKind::Other;
    }
    match rest {
        ".json" => LogFileKind::Commit(version),
        ".checkpoint.parquet" => LogFileKind::Checkpoint {
            version,
            parts: None,
        },
        _ => {
            let Some(tail) = rest.strip_prefix(".checkpoint.") else {
                return LogFileKind::Other;
            };
            let stem = tail
                .strip_suffix(".parquet")
                .or_else(|| tail.strip_suffix(".json"));
            let Some(stem) = stem else {
                return LogFileKind::Other;
            };
            let numbers: Vec<_> = stem.split('.').collect();
            match numbers.as_slice() {
                [part, of] if tail.ends_with(".parquet") => match (part.parse(), of.parse()) {
                    (Ok(part), Ok(of)) => LogFileKind::Checkpoint {
                        version,
                        parts: Some((part, of)),
                    },
                    _ => LogFileKind::Other,
                },
                [_uuid] => LogFileKind::V2Checkpoint(version),
                _ => LogFileKind::Other,
            }
        }
    }
}

/// The table at one version, rebuilt from a checkpoint and commits.
#[derive(Debug, Clone)]
pub struct DeltaSnapshot {
    pub version: i64,
    pub timestamp_ms: i64,
    pub active: ActiveFileSet,
    /// [`DeltaCommit::content_hash`] of commit `version`, when it was read (not when the
    /// version exists only as a checkpoint).
    pub commit_hash: Option<u64>,
}

impl DeltaSnapshot {
    pub fn metadata(&self) -> Option<&Metadata> {
        self.active.metadata.as_ref()
    }
    pub fn protocol(&self) -> Option<&Protocol> {
        self.active.protocol.as_ref()
    }
}

/// Commits found after a version.
#[derive(Debug)]
pub enum CommitsSince {
    /// Every commit from the next version up to the target, in order (maybe none).
    Contiguous(Vec<DeltaCommit>),
    /// The commit right after the version is gone (log cleanup): rebuild from a checkpoint.
    Gap { first_available: Option<i64> },
}

#[derive(Deserialize)]
struct LastCheckpoint {
    version: i64,
    /// Actions in the checkpoint (optional in the protocol).
    size: Option<u64>,
}

/// Reads the `_delta_log` of one table.
#[derive(Debug, Clone)]
pub struct DeltaLog {
    table: TableStorage,
    /// What one read holds in memory: log files above its bytes and replays above its files
    /// are refused instead of the process being killed for its memory.
    limits: LogLimits,
    /// Who ratifies a catalog-managed table's commits; None: only published commits are read.
    commit_catalog: Option<Arc<dyn CommitCatalog>>,
    /// How the table is read once it is known to be catalog-managed (shared by clones).
    catalog_managed: Arc<Mutex<Option<CatalogManaged>>>,
}

impl DeltaLog {
    /// The log of `table`, read within this process's [`LogLimits`].
    pub fn new(table: TableStorage) -> Self {
        Self::with_limits(table, LogLimits::current())
    }

    pub fn with_limits(table: TableStorage, limits: LogLimits) -> Self {
        Self {
            table,
            limits,
            commit_catalog: None,
            catalog_managed: Arc::default(),
        }
    }

    /// The log read, when the table is catalog-managed, with the commits `catalog` ratified
    /// (see [`catalog_managed`]); without a catalog, up to the newest published version.
    pub fn with_commit_catalog(mut self, catalog: Option<Arc<dyn CommitCatalog>>) -> Self {
        self.commit_catalog = catalog;
        self
    }

    /// How a catalog-managed table is read, once the log knows the table is one.
    pub fn catalog_managed(&self) -> Option<CatalogManaged> {
        self.catalog_managed
            .lock()
            .map(|state| state.clone())
            .unwrap_or_default()
    }

    /// How a catalog-managed table was read, for reports; None for any other table.
    pub fn catalog_managed_report(&self) -> Option<catalog_managed::CatalogManagedReport> {
        self.catalog_managed().as_ref().map(Into::into)
    }

    fn ratified(&self) -> Option<Arc<Ratified>> {
        match self.catalog_managed() {
            Some(CatalogManaged::Ratified(ratified)) => Some(ratified),
            _ => None,
        }
    }

    /// Reads the table as catalog-managed from now on: asks its catalog which commits it
    /// ratified (`table_id` as its configuration names it), or, without a catalog, reads it up
    /// to its newest published version.
    pub async fn ratify(&self, table_id: Option<&str>) -> Result<()> {
        let root = self.table.root_uri();
        let state = match &self.commit_catalog {
            None => CatalogManaged::PublishedOnly {
                table_id: table_id.map(str::to_string),
            },
            Some(catalog) => {
                let id = table_id.ok_or_else(|| {
                    self.malformed(format!(
                        "the table is catalog-managed, but its configuration names no catalog table id ({}); nothing was read",
                        catalog_managed::TABLE_ID_KEYS.join(", ")
                    ))
                })?;
                let ratified = catalog.ratified(id, root).await.map_err(|e| match e {
                    CatalogError::Unavailable(reason) => Error::CatalogUnavailable {
                        table: root.to_string(),
                        reason,
                    },
                    CatalogError::Refused(reason) => Error::CatalogRefused {
                        table: root.to_string(),
                        reason,
                    },
                })?;
                tracing::debug!(table = root, catalog = %ratified.catalog, latest = ratified.latest_version, listed = ratified.commits.len(), "the catalog's ratified commits");
                CatalogManaged::Ratified(Arc::new(ratified))
            }
        };
        if let Ok(mut held) = self.catalog_managed.lock() {
            *held = Some(state);
        }
        Ok(())
    }

    /// Stops a replay that meets a catalog-managed table whose catalog it can ask but has not
    /// yet: the rest of the published log may hold commits the catalog never ratified (even a
    /// gap), and the read starts again with the catalog's answer.
    fn ask_catalog_first(&self, active: &ActiveFileSet) -> Result<()> {
        let unasked = self.commit_catalog.is_some() && self.catalog_managed().is_none();
        match active.protocol.as_ref() {
            Some(protocol) if unasked && catalog_managed::is_catalog_managed(protocol) => {
                Err(Error::CatalogNotAskedYet {
                    table: self.table.root_uri().to_string(),
                    table_id: active
                        .metadata
                        .as_ref()
                        .and_then(catalog_managed::catalog_table_id)
                        .map(str::to_string),
                })
            }
            _ => Ok(()),
        }
    }

    /// After a read that showed the table's `protocol` and `metadata`: when the table is
    /// catalog-managed and its catalog was not asked yet, asks it. True when the read must be
    /// made again to take the ratified commits in.
    async fn discovered(
        &self,
        protocol: Option<&Protocol>,
        metadata: Option<&Metadata>,
    ) -> Result<bool> {
        let catalog_managed = protocol.is_some_and(catalog_managed::is_catalog_managed);
        if !catalog_managed || self.catalog_managed().is_some() {
            return Ok(false);
        }
        self.ratify(metadata.and_then(catalog_managed::catalog_table_id))
            .await?;
        Ok(self.ratified().is_some())
    }

    pub fn limits(&self) -> LogLimits {
        self.limits
    }

    pub fn table(&self) -> &TableStorage {
        &self.table
    }

    fn log_dir(&self) -> String {
        self.table.location("_delta_log/")
    }

    fn log_file(&self, name: &str) -> String {
        self.table.location(&format!("_delta_log/{name}"))
    }

    /// The location of the commit file of `version`.
    pub fn commit_file(&self, version: i64) -> String {
        self.log_file(&format!("{version:020}.json"))
    }

    fn malformed(&self, reason: impl std::fmt::Display) -> Error {
        Error::malformed(self.table.root_uri(), reason)
    }

    /// Log files after version `after` (all when None), classified, in version order; of a
    /// catalog-managed table, as its catalog has them.
    async fn list(
        &self,
        after: Option<i64>,
    ) -> Result<Vec<(LogFileKind, object_store::ObjectMeta)>> {
        let published = self.list_published(after).await?;
        match self.ratified() {
            None => Ok(published),
            Some(ratified) => self.with_ratified_commits(published, after, &ratified),
        }
    }

    /// The newest version published in `_delta_log/` (a commit, or a checkpoint whose commit
    /// was cleaned up); None when there is none. Of a catalog-managed table, the catalog may
    /// have ratified newer ones.
    pub async fn published_version(&self) -> Result<Option<i64>> {
        let hint = self.last_checkpoint_version().await?;
        let mut listed = self.list_published(hint.map(|v| v - 1)).await?;
        if listed.is_empty() && hint.is_some() {
            listed = self.list_published(None).await?;
        }
        Ok(listed.iter().filter_map(|(kind, _)| kind.version()).max())
    }

    /// The files of `_delta_log/` itself after version `after`, classified, in version order.
    async fn list_published(
        &self,
        after: Option<i64>,
    ) -> Result<Vec<(LogFileKind, object_store::ObjectMeta)>> {
        // Keys sort by their zero-padded version, so `<after>.zzz` sorts after every file
        // of version `after` and before those of `after + 1`.
        let offset = after.map(|v| self.log_file(&format!("{v:020}.zzz")));
        let listed = self
            .table
            .list_after(&self.log_dir(), offset.as_deref())
            .await?;
        Ok(listed
            .into_iter()
            .filter_map(|meta| {
                let name = meta.location.filename()?.to_string();
                // Only direct children of _delta_log (not _sidecars/, _staged_commits/).
                let parent_is_log = meta.location.as_ref().rsplit('/').nth(1) == Some("_delta_log");
                let kind = classify(&name);
                (parent_is_log && kind != LogFileKind::Other).then_some((kind, meta))
            })
            .collect())
    }

    /// A listing of a catalog-managed table as its catalog has it: nothing past the newest
    /// ratified version, and the ratified commits not yet published as the staged files the
    /// catalog names (a published commit wins over a staged copy of the same version).
    fn with_ratified_commits(
        &self,
        published: Vec<(LogFileKind, object_store::ObjectMeta)>,
        after: Option<i64>,
        ratified: &Ratified,
    ) -> Result<Vec<(LogFileKind, object_store::ObjectMeta)>> {
        let mut files: Vec<_> = published
            .into_iter()
            .filter(|(kind, _)| kind.version().is_none_or(|v| v <= ratified.latest_version))
            .collect();
        let newest_published = files
            .iter()
            .filter_map(|(kind, _)| kind.version())
            .max()
            .max(after)
            .unwrap_or(-1);
        for v in newest_published + 1..=ratified.latest_version {
            let Some(commit) = ratified.commits.get(&v) else {
                return Err(self.malformed(format!(
                    "version {v} is neither published in _delta_log/ nor listed as ratified by {} (its newest version is {}): the log has a gap at version {v}",
                    ratified.catalog, ratified.latest_version
                )));
            };
            let location = self.staged_file(&commit.file_name);
            files.push((
                LogFileKind::Commit(v),
                object_store::ObjectMeta {
                    location: self.table.key(&location)?,
                    last_modified: chrono::DateTime::from_timestamp_millis(commit.modified_ms)
                        .unwrap_or_default(),
                    size: commit.size,
                    e_tag: None,
                    version: None,
                },
            ));
        }
        Ok(files)
    }

    /// The location of a staged commit the catalog names (a bare file name, checked).
    fn staged_file(&self, file_name: &str) -> String {
        self.log_file(&format!("{STAGED_COMMITS}/{file_name}"))
    }

    async fn read_commit(
        &self,
        version: i64,
        meta: &object_store::ObjectMeta,
    ) -> Result<DeltaCommit> {
        let (bytes, time_ms) = self.commit_bytes(version, meta).await?;
        self.parse_commit(version, &bytes, time_ms)
    }

    /// The bytes of commit `version` (listed as `meta`) and its file's time.
    async fn commit_bytes(
        &self,
        version: i64,
        meta: &object_store::ObjectMeta,
    ) -> Result<(bytes::Bytes, i64)> {
        let location = self.table.location_of_key(&meta.location);
        let (bytes, meta) = self
            .table
            .get_at_most(&location, self.limits.file_bytes)
            .await?
            .ok_or_else(|| self.malformed(format!("commit {version} vanished while reading")))?;
        Ok((bytes, meta.last_modified.timestamp_millis()))
    }

    /// Parses a commit held whole, after checking that its actions (about one a line) fit
    /// the files one read holds.
    fn parse_commit(&self, version: i64, bytes: &[u8], time_ms: i64) -> Result<DeltaCommit> {
        let lines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
        if lines > self.limits.held_files {
            return Err(self.too_many_files(version));
        }
        DeltaCommit::parse(version, bytes, time_ms).map_err(|reason| self.malformed(reason))
    }

    fn too_many_files(&self, version: i64) -> Error {
        Error::TooManyFiles {
            table: self.table.root_uri().to_string(),
            version,
            limit: self.limits.held_files,
            memory: self.limits.memory_text(),
        }
    }

    /// The commits after `version` up to `target` (newest when None). `known` is a version
    /// the log is known to hold (the commit an event announced): without a target, the
    /// commits up to it are read and newer ones are left to their own events.
    ///
    /// Commit files are fetched by name and the log is listed only when a name is missing
    /// (nothing new, or cleaned up) or more than one commit is new and nothing bounds them:
    /// a LIST costs more than a GET on S3, and some stores list in time that grows with
    /// the bucket, while the usual sync has one new commit.
    pub async fn commits_since(
        &self,
        version: i64,
        target: Option<i64>,
        known: Option<i64>,
    ) -> Result<CommitsSince> {
        if target.is_some_and(|t| t <= version) {
            return Ok(CommitsSince::Contiguous(Vec::new()));
        }
        let named = target.or(known.filter(|k| *k > version));
        if let Some(last) = named {
            if let Some(commits) = self.fetch_commits(version + 1, last).await? {
                return Ok(CommitsSince::Contiguous(commits));
            }
        } else if let Some(first) = self.fetch_commit(version + 1).await? {
            let Some(second) = self.fetch_commit(version + 2).await? else {
                return Ok(CommitsSince::Contiguous(vec![first]));
            };
            // Catching up on several commits: list the rest.
            if let CommitsSince::Contiguous(rest) =
                self.listed_commits_since(version + 2, None).await?
            {
                return Ok(CommitsSince::Contiguous(
                    [first, second].into_iter().chain(rest).collect(),
                ));
            }
        }
        self.listed_commits_since(version, target).await
    }

    /// Whether the log holds commit `version` (published, or ratified by the table's catalog):
    /// one request, which is how a sync announced by an old event finds commits whose own
    /// events were lost.
    pub async fn has_commit(&self, version: i64) -> Result<bool> {
        Ok(self.commit_file_bytes(version).await?.is_some())
    }

    /// Commit `version`, if its file exists.
    async fn fetch_commit(&self, version: i64) -> Result<Option<DeltaCommit>> {
        let Some((bytes, meta)) = self.commit_file_bytes(version).await? else {
            return Ok(None);
        };
        self.parse_commit(version, &bytes, meta.last_modified.timestamp_millis())
            .map(Some)
    }

    /// The bytes of commit `version`, read within the limits: its published file, else, for
    /// a catalog-managed table, the staged file its catalog ratified; None when neither
    /// exists (or the catalog's newest version is older).
    async fn commit_file_bytes(
        &self,
        version: i64,
    ) -> Result<Option<(bytes::Bytes, object_store::ObjectMeta)>> {
        let ratified = self.ratified();
        if ratified
            .as_ref()
            .is_some_and(|r| version > r.latest_version)
        {
            return Ok(None);
        }
        let published = self.commit_file(version);
        if let Some(found) = self
            .table
            .get_at_most(&published, self.limits.file_bytes)
            .await?
        {
            return Ok(Some(found));
        }
        let Some(commit) = ratified.and_then(|r| r.commits.get(&version).cloned()) else {
            return Ok(None);
        };
        let staged = self.staged_file(&commit.file_name);
        if let Some(found) = self
            .table
            .get_at_most(&staged, self.limits.file_bytes)
            .await?
        {
            return Ok(Some(found));
        }
        // Published and cleaned up since the catalog was asked.
        self.table
            .get_at_most(&published, self.limits.file_bytes)
            .await?
            .map(Some)
            .ok_or_else(|| {
                self.malformed(format!(
                    "version {version} is ratified as {staged}, which does not exist, and is not published either"
                ))
            })
    }

    /// Commits `first..=last`, fetched by name; None when one of them does not exist.
    async fn fetch_commits(&self, first: i64, last: i64) -> Result<Option<Vec<DeltaCommit>>> {
        let fetched: Vec<Option<DeltaCommit>> = stream::iter(first..=last)
            .map(|v| self.fetch_commit(v))
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(fetched.into_iter().collect())
    }

    /// [`Self::commits_since`] from a listing of the log.
    async fn listed_commits_since(
        &self,
        version: i64,
        target: Option<i64>,
    ) -> Result<CommitsSince> {
        let listed = self.list(Some(version)).await?;
        let mut wanted = Vec::new();
        let mut expected = version + 1;
        for (kind, meta) in &listed {
            let LogFileKind::Commit(v) = *kind else {
                continue;
            };
            if target.is_some_and(|t| v > t) {
                break;
            }
            if v != expected {
                if wanted.is_empty() {
                    return Ok(CommitsSince::Gap {
                        first_available: Some(v),
                    });
                }
                return Err(self.malformed(format!("commit {expected} is missing but {v} exists")));
            }
            wanted.push((v, meta));
            expected += 1;
        }
        // A checkpoint past `version` without the commits before it: they were cleaned up.
        let in_range = |v: i64| v > version && target.is_none_or(|t| v <= t);
        if wanted.is_empty()
            && listed.iter().any(|(kind, _)| match *kind {
                LogFileKind::Checkpoint { version: v, .. } | LogFileKind::V2Checkpoint(v) => {
                    in_range(v)
                }
                _ => false,
            })
        {
            return Ok(CommitsSince::Gap {
                first_available: None,
            });
        }
        let commits: Vec<DeltaCommit> = stream::iter(wanted)
            .map(|(v, meta)| self.read_commit(v, meta))
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        if let Some(t) = target
            && commits.last().map(|c| c.version) != Some(t)
        {
            return Err(Error::NoSuchVersion {
                table: self.table.root_uri().to_string(),
                version: t,
                newest: Some(commits.last().map_or(version, |c| c.version)),
            });
        }
        Ok(CommitsSince::Contiguous(commits))
    }

    /// Rebuilds the table at `target` (newest when None) from the newest complete
    /// checkpoint at or before it plus the JSON commits after that checkpoint.
    ///
    /// A catalog-managed table is read as its catalog has it (see [`Self::ratify`]): when
    /// the read shows the table is one, its catalog is asked and the table read again.
    pub async fn snapshot(&self, target: Option<i64>) -> Result<DeltaSnapshot> {
        loop {
            let snapshot = match self
                .rebuild(target, Reading::Everything, ActiveFileSet::default())
                .await
            {
                // A version past the published log may be one the catalog ratified.
                Err(e @ Error::NoSuchVersion { .. }) if self.catalog_managed().is_none() => {
                    self.definition().await?;
                    match self.ratified() {
                        Some(_) => continue,
                        None => return Err(e),
                    }
                }
                Err(Error::CatalogNotAskedYet { table_id, .. }) => {
                    self.ratify(table_id.as_deref()).await?;
                    continue;
                }
                other => other?,
            };
            if !self
                .discovered(snapshot.protocol(), snapshot.metadata())
                .await?
            {
                return Ok(snapshot);
            }
        }
    }

    /// [`Self::snapshot`] holding only the data files `filter` keeps (one part of a
    /// fanned-out bootstrap): the others are let go as they are read. The filter may act on
    /// what it sees, so the log is read once: a catalog-managed table is ratified before
    /// (by [`Self::definition`] or [`Self::ratify`]).
    pub async fn snapshot_of(
        &self,
        target: Option<i64>,
        filter: FileFilter,
    ) -> Result<DeltaSnapshot> {
        self.rebuild(target, Reading::Everything, ActiveFileSet::filtered(filter))
            .await
    }

    /// The newest version's metaData and protocol, without its files: of a Parquet
    /// checkpoint only the footer and those two columns are read (ranged requests), so the
    /// cost does not grow with the number of files in the table.
    pub async fn definition(&self) -> Result<TableDefinition> {
        let snapshot = loop {
            // Its commits are applied as they are parsed, holding no file.
            let no_files = ActiveFileSet::filtered(FileFilter::new(|_| false));
            let snapshot = match self.rebuild(None, Reading::Definition, no_files).await {
                Err(Error::CatalogNotAskedYet { table_id, .. }) => {
                    self.ratify(table_id.as_deref()).await?;
                    continue;
                }
                other => other?,
            };
            if !self
                .discovered(snapshot.protocol(), snapshot.metadata())
                .await?
            {
                break snapshot;
            }
        };
        match (snapshot.active.metadata, snapshot.active.protocol) {
            (Some(metadata), Some(protocol)) => Ok(TableDefinition {
                version: snapshot.version,
                metadata,
                protocol,
            }),
            _ => Err(self.malformed("no metaData or protocol action")),
        }
    }

    async fn rebuild(
        &self,
        target: Option<i64>,
        reading: Reading,
        active: ActiveFileSet,
    ) -> Result<DeltaSnapshot> {
        let (listed, version) = self.listed_to(target, 0).await?;
        self.replay(&listed, version, reading, active).await
    }

    /// The table at the start of its newest `versions` versions up to `target` (the newest
    /// when None), or at `floor` when that is later, and the commits after it up to the
    /// target: the base and the steps of a history of one snapshot per version. With
    /// `since_checkpoint`, no earlier than the newest checkpoint: only the commits a replay
    /// reads anyway. When the log cannot rebuild the table at that start (no checkpoint at or
    /// before it), the history starts at the first checkpoint after it.
    ///
    /// A catalog-managed table is read as its catalog has it, as [`Self::snapshot`] reads it.
    pub async fn recent_history(
        &self,
        target: Option<i64>,
        versions: u64,
        floor: Option<i64>,
        since_checkpoint: bool,
    ) -> Result<(DeltaSnapshot, Vec<DeltaCommit>)> {
        loop {
            let (base, commits) = match self
                .read_recent_history(target, versions, floor, since_checkpoint)
                .await
            {
                Err(e @ Error::NoSuchVersion { .. }) if self.catalog_managed().is_none() => {
                    self.definition().await?;
                    match self.ratified() {
                        Some(_) => continue,
                        None => return Err(e),
                    }
                }
                Err(Error::CatalogNotAskedYet { table_id, .. }) => {
                    self.ratify(table_id.as_deref()).await?;
                    continue;
                }
                other => other?,
            };
            let protocol = commits.iter().rev().find_map(|c| c.protocol.as_ref());
            let metadata = commits.iter().rev().find_map(|c| c.metadata.as_ref());
            let (protocol, metadata) = (protocol.or(base.protocol()), metadata.or(base.metadata()));
            if !self.discovered(protocol, metadata).await? {
                return Ok((base, commits));
            }
        }
    }

    async fn read_recent_history(
        &self,
        target: Option<i64>,
        versions: u64,
        floor: Option<i64>,
        since_checkpoint: bool,
    ) -> Result<(DeltaSnapshot, Vec<DeltaCommit>)> {
        let back = match since_checkpoint {
            true => 0,
            false => i64::try_from(versions.max(1)).unwrap_or(i64::MAX),
        };
        let (mut listed, version) = self.listed_to(target, back).await?;
        let checkpoint = since_checkpoint
            .then(|| newest_complete_checkpoint(&listed, version).map(|(v, _)| v))
            .flatten();
        let window = i64::try_from(versions.max(1)).unwrap_or(i64::MAX);
        let wanted = version
            .saturating_sub(window - 1)
            .max(floor.unwrap_or(0))
            .max(checkpoint.unwrap_or(0))
            .clamp(0, version);
        let rebuildable = |listed: &[(LogFileKind, object_store::ObjectMeta)], at: i64| {
            newest_complete_checkpoint(listed, at).is_some()
                || listed.iter().any(|(k, _)| *k == LogFileKind::Commit(0))
        };
        if !rebuildable(&listed, wanted) {
            // The tail listed may start after the checkpoint that rebuilds `wanted`.
            listed = self.list(None).await?;
        }
        let start = if rebuildable(&listed, wanted) {
            wanted
        } else {
            first_complete_checkpoint(&listed, wanted, version).unwrap_or(version)
        };
        let base = self
            .replay(
                &listed,
                start,
                Reading::Everything,
                ActiveFileSet::default(),
            )
            .await?;
        let commits: Vec<DeltaCommit> = stream::iter(start + 1..=version)
            .map(|v| {
                let meta = listed
                    .iter()
                    .find_map(|(k, m)| (*k == LogFileKind::Commit(v)).then_some(m))
                    .ok_or_else(|| self.malformed(format!("commit {v} is missing")));
                async move { self.read_commit(v, meta?).await }
            })
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        Ok((base, commits))
    }

    /// The log files from at least `back` versions before the newest checkpoint on (all of
    /// them with a target), and the version to rebuild: `target`, or the newest.
    async fn listed_to(
        &self,
        target: Option<i64>,
        back: i64,
    ) -> Result<(Vec<(LogFileKind, object_store::ObjectMeta)>, i64)> {
        // `_last_checkpoint` is a hint that lets us list only the tail of the log.
        let hint = match target {
            None => self.last_checkpoint_version().await?,
            Some(_) => None,
        };
        let after = hint
            .map(|v| v.saturating_sub(back) - 1)
            .filter(|after| *after >= 0);
        let mut listed = self.list(after).await?;
        let has_base = |files: &[(LogFileKind, object_store::ObjectMeta)]| {
            files.iter().any(|(k, _)| {
                matches!(
                    k,
                    LogFileKind::Checkpoint { .. }
                        | LogFileKind::V2Checkpoint(_)
                        | LogFileKind::Commit(0)
                )
            })
        };
        if after.is_some() && !has_base(&listed) {
            tracing::warn!(
                table = self.table.root_uri(),
                "_last_checkpoint points to a missing checkpoint; reading the whole log"
            );
            listed = self.list(None).await?;
        }
        // A version whose commit was cleaned up but whose checkpoint is there still counts.
        let newest = listed
            .iter()
            .filter_map(|(k, _)| match k {
                LogFileKind::Commit(v) => Some(*v),
                _ => None,
            })
            .chain(newest_complete_checkpoint(&listed, target.unwrap_or(i64::MAX)).map(|(v, _)| v))
            .filter(|v| target.is_none_or(|t| *v <= t))
            .max();
        let Some(version) = newest else {
            // With a target there was no hint, so `listed` is the whole log.
            return Err(match target {
                Some(t) if !listed.is_empty() => Error::NoSuchVersion {
                    table: self.table.root_uri().to_string(),
                    version: t,
                    newest: None,
                },
                _ => Error::NotADeltaTable(self.table.root_uri().to_string()),
            });
        };
        if let Some(t) = target
            && t != version
        {
            return Err(Error::NoSuchVersion {
                table: self.table.root_uri().to_string(),
                version: t,
                newest: Some(version),
            });
        }
        Ok((listed, version))
    }

    /// The table at `version` from the newest complete checkpoint in `listed` at or before
    /// it plus the JSON commits after that checkpoint.
    async fn replay(
        &self,
        listed: &[(LogFileKind, object_store::ObjectMeta)],
        version: i64,
        reading: Reading,
        mut active: ActiveFileSet,
    ) -> Result<DeltaSnapshot> {
        let checkpoint = newest_complete_checkpoint(listed, version);
        let start = match &checkpoint {
            Some((cp_version, parts)) => {
                let started = std::time::Instant::now();
                for (n, meta) in parts.iter().enumerate() {
                    self.read_checkpoint_part(meta, &mut active, reading)
                        .await?;
                    self.check_held(&active, *cp_version)?;
                    // A large checkpoint reports each part read (a line per stage in
                    // Lambda's log, progress on the CLI's stderr).
                    if reading == Reading::Everything && started.elapsed() >= PROGRESS_AFTER {
                        tracing::info!(
                            table = self.table.root_uri(),
                            part = n + 1,
                            of = parts.len(),
                            files = active.files.len(),
                            elapsed_s = started.elapsed().as_secs(),
                            "read the checkpoint"
                        );
                    }
                }
                self.ask_catalog_first(&active)?;
                cp_version + 1
            }
            None => 0,
        };
        let mut timestamp_ms = 0;
        let mut commit_hash = None;
        for v in start..=version {
            let meta = listed
                .iter()
                .find_map(|(k, m)| (*k == LogFileKind::Commit(v)).then_some(m))
                .ok_or_else(|| {
                    self.malformed(format!(
                        "commit {v} is missing and no checkpoint covers it (log cleaned up without a checkpoint?)"
                    ))
                })?;
            let commit = match active.filter {
                // A filtered replay holds only its share of the files: the commit is applied
                // as it is parsed, never held as actions.
                Some(_) => {
                    let (bytes, time_ms) = self.commit_bytes(v, meta).await?;
                    active
                        .apply_parsed(v, &bytes, time_ms)
                        .map_err(|reason| self.malformed(reason))?
                }
                None => {
                    let commit = self.read_commit(v, meta).await?;
                    active.apply(&commit);
                    commit
                }
            };
            self.check_held(&active, v)?;
            self.ask_catalog_first(&active)?;
            timestamp_ms = commit.timestamp_ms;
            commit_hash = Some(commit.content_hash);
        }
        if start > version {
            // The snapshot is the checkpoint itself: take the time of its commit if listed.
            timestamp_ms = listed
                .iter()
                .find_map(|(k, m)| {
                    matches!(k, LogFileKind::Checkpoint { version: cv, .. } | LogFileKind::V2Checkpoint(cv) if *cv == version)
                        .then_some(m)
                })
                .map_or(0, |m| m.last_modified.timestamp_millis());
        }
        if active.metadata.is_none() || active.protocol.is_none() {
            return Err(self.malformed(format!(
                "no metaData or protocol action up to version {version}"
            )));
        }
        Ok(DeltaSnapshot {
            version,
            timestamp_ms,
            active,
            commit_hash,
        })
    }

    /// [`DeltaCommit::content_hash`] of commit `version`; None when its file is gone.
    pub async fn commit_hash(&self, version: i64) -> Result<Option<u64>> {
        Ok(self
            .commit_file_bytes(version)
            .await?
            .map(|(bytes, _)| super::actions::content_hash(&bytes)))
    }

    /// The oldest version the log can rebuild the table at: 0 when its commit is there, else
    /// the oldest complete checkpoint with every commit after it up to the newest.
    pub async fn oldest_version(&self) -> Result<i64> {
        let listed = self.list(None).await?;
        let commits: std::collections::BTreeSet<i64> = listed
            .iter()
            .filter_map(|(k, _)| match k {
                LogFileKind::Commit(v) => Some(*v),
                _ => None,
            })
            .collect();
        let newest = commits.last().copied();
        let contiguous_after =
            |start: i64| newest.is_none_or(|n| (start + 1..=n).all(|v| commits.contains(&v)));
        if commits.contains(&0) && contiguous_after(0) {
            return Ok(0);
        }
        let mut checkpoints: Vec<i64> = listed
            .iter()
            .filter_map(|(k, _)| match *k {
                LogFileKind::Checkpoint { version, .. } | LogFileKind::V2Checkpoint(version) => {
                    Some(version)
                }
                _ => None,
            })
            .collect();
        checkpoints.sort_unstable();
        checkpoints.dedup();
        checkpoints
            .into_iter()
            .find(|v| {
                newest_complete_checkpoint(&listed, *v).is_some_and(|(cp, _)| cp == *v)
                    && contiguous_after(*v)
            })
            .ok_or_else(|| Error::NotADeltaTable(self.table.root_uri().to_string()))
    }

    /// The number of actions `_last_checkpoint` says its checkpoint holds (about one per
    /// data file of a large table), when it says.
    pub async fn last_checkpoint_size(&self) -> Result<Option<u64>> {
        Ok(self.last_checkpoint().await?.and_then(|hint| hint.size))
    }

    /// The version `_last_checkpoint` names (a hint: the checkpoint may be incomplete).
    pub async fn last_checkpoint_version(&self) -> Result<Option<i64>> {
        Ok(self.last_checkpoint().await?.map(|hint| hint.version))
    }

    async fn last_checkpoint(&self) -> Result<Option<LastCheckpoint>> {
        let Some(bytes) = self
            .table
            .get_if_exists(&self.log_file("_last_checkpoint"))
            .await?
        else {
            return Ok(None);
        };
        match serde_json::from_slice::<LastCheckpoint>(&bytes) {
            Ok(hint) => Ok(Some(hint)),
            Err(e) => {
                tracing::warn!(table = self.table.root_uri(), error = %e, "_last_checkpoint is unreadable; reading the whole log");
                Ok(None)
            }
        }
    }

    /// Refuses a replay holding more files than the limits allow.
    fn check_held(&self, active: &ActiveFileSet, version: i64) -> Result<()> {
        match active.files.len() as u64 > self.limits.held_files {
            true => Err(self.too_many_files(version)),
            false => Ok(()),
        }
    }

    /// A checkpoint part or sidecar, read whole within the limits.
    async fn checkpoint_bytes(&self, location: &str) -> Result<bytes::Bytes> {
        let (bytes, _) = self
            .table
            .get_at_most(location, self.limits.file_bytes)
            .await?
            .ok_or_else(|| self.malformed(format!("{location} vanished while reading")))?;
        Ok(bytes)
    }

    async fn read_checkpoint_part(
        &self,
        meta: &object_store::ObjectMeta,
        active: &mut ActiveFileSet,
        reading: Reading,
    ) -> Result<()> {
        let location = self.table.location_of_key(&meta.location);
        // A v2 checkpoint keeps its file actions in sidecars (metaData and protocol never).
        let mut sidecars: Vec<String> = Vec::new();
        // Applies one action; answers the sidecar it names.
        let held = usize::try_from(self.limits.held_files).unwrap_or(usize::MAX);
        let mut apply = |line: ActionLine| -> Option<String> {
            // Past the limit the rest is let go: the caller refuses the replay.
            if let Some(add) = line.add
                && active.files.len() <= held
            {
                active.add(add);
            }
            if let Some(m) = line.meta_data {
                active.metadata = Some(m);
            }
            if let Some(p) = line.protocol {
                active.protocol = Some(p);
            }
            if let Some(mark) = line
                .domain_metadata
                .as_ref()
                .and_then(crate::actions::DomainMetadata::row_id_high_water_mark)
            {
                active.row_id_high_water_mark = Some(mark);
            }
            line.sidecar
                .filter(|_| reading == Reading::Everything)
                .map(|sidecar| sidecar.path)
        };
        let mut apply_part = |line: ActionLine| sidecars.extend(apply(line));
        // Rows are applied as they are decoded: the checkpoint is never held as actions.
        if location.ends_with(".json") {
            let bytes = self.checkpoint_bytes(&location).await?;
            json_actions(&bytes)
                .map_err(|e| self.malformed(format!("checkpoint {location}: {e}")))?
                .into_iter()
                .for_each(&mut apply_part);
        } else if reading == Reading::Definition {
            self.checkpoint_definition(&location, meta.size)
                .await?
                .map_err(|e| self.malformed(format!("checkpoint {location}: {e}")))?
                .into_iter()
                .for_each(&mut apply_part);
        } else {
            let bytes = self.checkpoint_bytes(&location).await?;
            for_each_checkpoint_action(bytes, &mut apply_part)
                .map_err(|e| self.malformed(format!("checkpoint {location}: {e}")))?;
        }
        for path in sidecars {
            let sidecar = self
                .table
                .scope()
                .resolve(crate::LogPath::Sidecar, &path)
                .map_err(|why| self.malformed(why))?;
            let bytes = self.checkpoint_bytes(&sidecar).await?;
            for_each_checkpoint_action(bytes, |line| {
                apply(line);
            })
            .map_err(|e| self.malformed(format!("sidecar {sidecar}: {e}")))?;
        }
        Ok(())
    }

    /// The metaData and protocol rows of a Parquet checkpoint: its footer and the chunks of
    /// those two columns, by ranged reads. The file actions, the bulk of it, stay unread.
    async fn checkpoint_definition(
        &self,
        location: &str,
        size: u64,
    ) -> Result<std::result::Result<Vec<ActionLine>, String>> {
        if size < 12 {
            return Ok(Err("too small to be Parquet".into()));
        }
        // One read usually holds the whole footer.
        let tail_start = size.saturating_sub(TAIL_READ);
        let tail = self.table.get_range(location, tail_start..size).await?;
        let footer_start = match footer_start(&tail, size) {
            Ok(start) => start,
            Err(e) => return Ok(Err(e)),
        };
        let footer = if footer_start < tail_start {
            self.table.get_range(location, footer_start..size).await?
        } else {
            tail.slice((footer_start - tail_start) as usize..)
        };
        let ranges = match definition_chunk_ranges(&footer, footer_start) {
            Ok(ranges) => ranges,
            Err(e) => return Ok(Err(e)),
        };
        let mut parts = stream::iter(ranges)
            .map(|range| async move {
                let start = range.start;
                self.table
                    .get_range(location, range)
                    .await
                    .map(|bytes| (start, bytes))
            })
            .buffered(FETCH_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?;
        parts.push((footer_start, footer));
        Ok(definition_actions(SparseFile { len: size, parts }))
    }
}

/// Reading a checkpoint for longer than this reports its progress.
const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// Bytes read from a checkpoint's end at first: a footer is rarely bigger.
const TAIL_READ: u64 = 64 * 1024;

/// What a snapshot reads of its checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    Everything,
    /// metaData and protocol only.
    Definition,
}

/// A table's schema, properties and protocol at one version, without its files.
#[derive(Debug, Clone)]
pub struct TableDefinition {
    pub version: i64,
    pub metadata: Metadata,
    pub protocol: Protocol,
}

/// The newest checkpoint at or before `version` whose parts are all present.
/// The oldest complete checkpoint in `listed` from `from` to `to`.
fn first_complete_checkpoint(
    listed: &[(LogFileKind, object_store::ObjectMeta)],
    from: i64,
    to: i64,
) -> Option<i64> {
    let mut candidates: Vec<i64> = listed
        .iter()
        .filter_map(|(k, _)| match k {
            LogFileKind::Checkpoint { version: v, .. } | LogFileKind::V2Checkpoint(v) => Some(*v),
            _ => None,
        })
        .filter(|v| (from..=to).contains(v))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates
        .into_iter()
        .find(|v| newest_complete_checkpoint(listed, *v).is_some_and(|(cp, _)| cp == *v))
}

fn newest_complete_checkpoint(
    listed: &[(LogFileKind, object_store::ObjectMeta)],
    version: i64,
) -> Option<(i64, Vec<object_store::ObjectMeta>)> {
    let mut candidates: Vec<i64> = listed
        .iter()
        .filter_map(|(k, _)| match k {
            LogFileKind::Checkpoint { version: v, .. } | LogFileKind::V2Checkpoint(v)
                if *v <= version =>
            {
                Some(*v)
            }
            _ => None,
        })
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates.into_iter().rev().find_map(|cv| {
        // One file holds the whole checkpoint: classic single-file, or v2 (UUID-named).
        let single = listed.iter().find(|(k, _)| {
            *k == LogFileKind::Checkpoint {
                version: cv,
                parts: None,
            } || *k == LogFileKind::V2Checkpoint(cv)
        });
        if let Some((_, meta)) = single {
            return Some((cv, vec![meta.clone()]));
        }
        // Multi-part: take the first `of` for which every part 1..=of is listed.
        let mut parts: Vec<(u32, u32, object_store::ObjectMeta)> = listed
            .iter()
            .filter_map(|(k, m)| match k {
                LogFileKind::Checkpoint {
                    version: v,
                    parts: Some((p, of)),
                } if *v == cv => Some((*p, *of, m.clone())),
                _ => None,
            })
            .collect();
        parts.sort_by_key(|(p, of, _)| (*of, *p));
        let total = parts.first().map(|(_, of, _)| *of)?;
        let of_total: Vec<_> = parts
            .into_iter()
            .filter(|(_, of, _)| *of == total)
            .collect();
        let complete = of_total.len() == total as usize
            && of_total
                .iter()
                .enumerate()
                .all(|(i, (p, _, _))| *p as usize == i + 1);
        complete.then(|| (cv, of_total.into_iter().map(|(_, _, m)| m).collect()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_log_file_names() {
        assert_eq!(
            classify("00000000000000000042.json"),
            LogFileKind::Commit(42)
        );
        assert_eq!(
            classify("00000000000000000010.checkpoint.parquet"),
            LogFileKind::Checkpoint {
                version: 10,
                parts: None
            }
        );
        assert_eq!(
            classify("00000000000000000001.checkpoint.0000000002.0000000002.parquet"),
            LogFileKind::Checkpoint {
                version: 1,
                parts: Some((2, 2))
            }
        );
        assert_eq!(
            classify(
                "00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet"
            ),
            LogFileKind::V2Checkpoint(2)
        );
        for other in [
            "_last_checkpoint",
            "00000000000000000042.crc",
            ".00000000000000000042.json.crc",
            "00000000000000000004.00000000000000000006.compacted.json",
            ".00000000000000000042.json.tmp",
            "0000000000000000004a.json",
        ] {
            assert_eq!(classify(other), LogFileKind::Other, "{other}");
        }
    }
}

#[cfg(test)]
mod limit_tests {
    use std::sync::Arc;

    use super::*;
    use crate::test_tables::{add, commit_info, metadata, protocol, write_commit};
    use lakemirror_storage::ObjectStores;

    async fn table_of(files: usize) -> TableStorage {
        let table = ObjectStores::in_memory()
            .open("s3://lake/warehouse/big", Arc::default())
            .unwrap();
        let mut actions = vec![
            commit_info(1),
            protocol(),
            metadata("big", &[("id", "long")], &[]),
        ];
        actions.extend((0..files).map(|n| add(&format!("part-{n}.parquet"), 1, &[])));
        write_commit(&table, 0, &actions).await;
        table
    }

    fn limits(held_files: u64, file_bytes: u64) -> LogLimits {
        LogLimits {
            memory_mb: Some(1),
            file_bytes,
            held_files,
        }
    }

    #[tokio::test]
    async fn a_commit_with_more_files_than_a_read_holds_is_refused_before_it_is_parsed() {
        let table = table_of(50).await;
        let log = DeltaLog::with_limits(table.clone(), limits(40, 1 << 20));
        let err = log.snapshot(None).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::TooManyFiles {
                    limit: 40,
                    version: 0,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("MemorySize"), "{err}");
        // The one-commit read of an incremental sync is bounded the same way.
        let err = log.commits_since(-1, Some(0), None).await.unwrap_err();
        assert!(matches!(err, Error::TooManyFiles { .. }), "{err}");
        // Within the limit it reads.
        let log = DeltaLog::with_limits(table, limits(60, 1 << 20));
        assert_eq!(log.snapshot(None).await.unwrap().active.files.len(), 50);
    }

    #[tokio::test]
    async fn a_filtered_read_holds_only_its_share_so_a_large_commit_reads_in_parts() {
        let table = table_of(50).await;
        let log = DeltaLog::with_limits(table, limits(20, 1 << 20));
        let share = FileFilter::adds(|path| path.ends_with("1.parquet"));
        let snapshot = log.snapshot_of(None, share).await.unwrap();
        assert_eq!(snapshot.active.files.len(), 5);
        assert!(snapshot.metadata().is_some());
    }

    #[tokio::test]
    async fn a_log_file_larger_than_a_read_holds_is_refused_unread() {
        let table = table_of(50).await;
        let log = DeltaLog::with_limits(table, limits(1000, 1000));
        let err = log.snapshot(None).await.unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Storage(lakemirror_storage::Error::TooLarge { limit: 1000, .. })
            ),
            "{err}"
        );
    }
}

#[cfg(test)]
mod catalog_managed_tests {
    use std::sync::Arc;

    use super::*;
    use crate::catalog_managed::CatalogManaged;
    use crate::test_tables::{
        InMemoryCommitCatalog, add, catalog_managed_commit, commit_info, write_commit, write_staged,
    };
    use lakemirror_storage::ObjectStores;

    const ROOT: &str = "s3://lake/warehouse/managed";

    /// A catalog-managed table: version 0 published; 1 and 2 staged and ratified; a third
    /// staged file for version 3 that the catalog never ratified, and a loser of version 2.
    async fn managed() -> (TableStorage, Arc<InMemoryCommitCatalog>) {
        let table = ObjectStores::in_memory()
            .open(ROOT, Arc::default())
            .unwrap();
        write_commit(
            &table,
            0,
            &catalog_managed_commit("t", "uc-1", &[("id", "long")]),
        )
        .await;
        let catalog = Arc::new(InMemoryCommitCatalog::default());
        catalog.create("uc-1", ROOT);
        for v in 1..=2 {
            let staged = write_staged(
                &table,
                v,
                &format!("00000000-0000-4000-8000-00000000000{v}"),
                &[
                    commit_info(1_700_000_000_000 + v),
                    add(&format!("part-{v}.parquet"), 10, &[]),
                ],
            )
            .await;
            catalog.ratify("uc-1", staged);
        }
        write_staged(
            &table,
            2,
            "ffffffff-0000-4000-8000-000000000002",
            &[commit_info(1), add("loser.parquet", 10, &[])],
        )
        .await;
        write_staged(
            &table,
            3,
            "ffffffff-0000-4000-8000-000000000003",
            &[commit_info(1), add("never-ratified.parquet", 10, &[])],
        )
        .await;
        (table, catalog)
    }

    fn files(snapshot: &DeltaSnapshot) -> Vec<&str> {
        snapshot.active.files.keys().map(String::as_str).collect()
    }

    #[tokio::test]
    async fn a_catalog_managed_table_is_its_published_log_and_the_commits_its_catalog_ratified() {
        let (table, catalog) = managed().await;
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog.clone()));
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(snapshot.version, 2);
        assert_eq!(files(&snapshot), ["part-1.parquet", "part-2.parquet"]);
        assert!(matches!(
            log.catalog_managed(),
            Some(CatalogManaged::Ratified(_))
        ));
        // A ratified version is read at once, in the history too.
        let (base, commits) = log.recent_history(None, 100, None, false).await.unwrap();
        assert_eq!(base.version, 0);
        assert_eq!(
            commits.iter().map(|c| c.version).collect::<Vec<_>>(),
            [1, 2]
        );
        assert_eq!(log.snapshot(Some(1)).await.unwrap().version, 1);
        // Incrementally: a version the catalog has not ratified does not exist.
        let CommitsSince::Contiguous(after) = log.commits_since(1, None, Some(3)).await.unwrap()
        else {
            panic!("contiguous")
        };
        assert_eq!(after.iter().map(|c| c.version).collect::<Vec<_>>(), [2]);
        assert!(log.snapshot(Some(3)).await.is_err());
    }

    #[tokio::test]
    async fn a_version_asked_for_past_the_published_log_asks_the_catalog_first() {
        let (table, catalog) = managed().await;
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let snapshot = log.snapshot(Some(2)).await.unwrap();
        assert_eq!(files(&snapshot), ["part-1.parquet", "part-2.parquet"]);
    }

    #[tokio::test]
    async fn a_published_commit_wins_over_the_staged_copy_and_the_catalog_may_forget_it() {
        let (table, catalog) = managed().await;
        // Version 1 published (as a copy of another content, to tell them apart), and the
        // catalog told: it lists only version 2 now.
        write_commit(
            &table,
            1,
            &[commit_info(5), add("published-1.parquet", 10, &[])],
        )
        .await;
        catalog.published("uc-1", 1);
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(files(&snapshot), ["part-2.parquet", "published-1.parquet"]);
    }

    #[tokio::test]
    async fn a_version_neither_published_nor_listed_is_a_gap_named_in_the_error() {
        let (table, catalog) = managed().await;
        // The catalog forgets version 1 though it was never published.
        catalog.published("uc-1", 1);
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let err = log.snapshot(None).await.unwrap_err().to_string();
        assert!(err.contains("version 1 is neither published"), "{err}");
    }

    #[tokio::test]
    async fn a_published_commit_past_the_catalogs_newest_version_is_never_read() {
        let (table, catalog) = managed().await;
        // Version 3 published by a writer, though the catalog never ratified it, and version
        // 1 and 2 not published: the published log alone has a gap at 1.
        write_commit(&table, 3, &[commit_info(9), add("rogue.parquet", 10, &[])]).await;
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(snapshot.version, 2);
        assert_eq!(files(&snapshot), ["part-1.parquet", "part-2.parquet"]);
        let (_, commits) = log.recent_history(None, 100, None, false).await.unwrap();
        assert_eq!(
            commits.iter().map(|c| c.version).collect::<Vec<_>>(),
            [1, 2]
        );
    }

    #[tokio::test]
    async fn without_a_catalog_the_table_is_read_to_its_newest_published_version() {
        let (table, _) = managed().await;
        let log = DeltaLog::new(table);
        let snapshot = log.snapshot(None).await.unwrap();
        assert_eq!(snapshot.version, 0);
        let read = log.catalog_managed().unwrap();
        assert_eq!(read.table_id(), Some("uc-1"));
        assert!(read.limited().unwrap().contains("UC_URL"), "{read:?}");
    }

    #[tokio::test]
    async fn a_catalog_that_is_down_fails_the_read_retryably_and_one_about_another_table_for_good()
    {
        let (table, catalog) = managed().await;
        catalog.set_down(true);
        let log = DeltaLog::new(table.clone()).with_commit_catalog(Some(catalog.clone()));
        let err = log.snapshot(None).await.unwrap_err();
        assert!(err.is_retryable(), "{err}");
        catalog.set_down(false);
        // The id belongs to a table the catalog keeps elsewhere.
        catalog.create("uc-1", "s3://lake/warehouse/other");
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog));
        let err = log.snapshot(None).await.unwrap_err();
        assert!(!err.is_retryable(), "{err}");
        assert!(err.to_string().contains("warehouse/other"), "{err}");
    }

    #[tokio::test]
    async fn a_plain_table_never_asks_the_catalog() {
        let table = ObjectStores::in_memory()
            .open(ROOT, Arc::default())
            .unwrap();
        write_commit(
            &table,
            0,
            &[
                commit_info(1),
                crate::test_tables::protocol(),
                crate::test_tables::metadata("t", &[("id", "long")], &[]),
            ],
        )
        .await;
        let catalog = Arc::new(InMemoryCommitCatalog::default());
        let log = DeltaLog::new(table).with_commit_catalog(Some(catalog.clone()));
        log.snapshot(None).await.unwrap();
        log.commits_since(0, None, Some(1)).await.unwrap();
        assert_eq!(catalog.asked(), 0);
        assert!(log.catalog_managed().is_none());
    }
}
