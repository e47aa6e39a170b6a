//! The table at one version: replayed from the newest complete checkpoint at or before it
//! plus the commits after, or only its definition (metaData and protocol).

use crate::actions::{Metadata, Protocol};
use crate::catalog_managed::CatalogManaged;
use crate::error::{Error, Result};
use crate::replay::{ActiveFileSet, FileFilter};

use super::checkpoints::{Reading, newest_complete_checkpoint};
use super::{DeltaLog, LogFileKind};

/// The table at one version, rebuilt from a checkpoint and commits.
#[derive(Debug, Clone)]
pub struct DeltaSnapshot {
    pub version: i64,
    pub timestamp_ms: i64,
    pub active: ActiveFileSet,
    /// [`DeltaCommit::content_hash`] of commit `version`, when it was read (not when the
    /// version exists only as a checkpoint).
    pub commit_hash: Option<u64>,
    /// How a catalog-managed table was read (the log's tail); None for any other table. A
    /// caller that reads on keeps it ([`DeltaLog::with_tail`]).
    pub catalog_managed: Option<CatalogManaged>,
}

impl DeltaSnapshot {
    pub fn metadata(&self) -> Option<&Metadata> {
        self.active.metadata.as_ref()
    }
    pub fn protocol(&self) -> Option<&Protocol> {
        self.active.protocol.as_ref()
    }
}

/// A table's schema, properties and protocol at one version, without its files.
#[derive(Debug, Clone)]
pub struct TableDefinition {
    pub version: i64,
    pub metadata: Metadata,
    pub protocol: Protocol,
    /// How a catalog-managed table was read, as [`DeltaSnapshot::catalog_managed`].
    pub catalog_managed: Option<CatalogManaged>,
}

/// What a replay found: the table, or, when the log has a catalog it has not asked yet, that
/// the table is catalog-managed (read no further than that).
pub(super) enum Replayed<T> {
    Table(T),
    CatalogManaged { table_id: Option<String> },
}

impl<T> Replayed<T> {
    /// The table read by a log that asked its catalog (and so cannot stop to ask it).
    pub(super) fn asked(self, log: &DeltaLog) -> Result<T> {
        match self {
            Replayed::Table(table) => Ok(table),
            Replayed::CatalogManaged { .. } => Err(log.malformed(
                "the table is catalog-managed, and still was after its catalog was asked",
            )),
        }
    }
}

/// Reading a checkpoint for longer than this reports its progress.
const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

impl DeltaLog {
    /// Rebuilds the table at `target` (newest when None) from the newest complete
    /// checkpoint at or before it plus the JSON commits after that checkpoint.
    ///
    /// A catalog-managed table is read as its catalog has it: with the log's tail, or, when
    /// the read finds the table is one and its catalog was not asked yet, once more with the
    /// catalog's commits as the tail ([`DeltaSnapshot::catalog_managed`] says which).
    pub async fn snapshot(&self, target: Option<i64>) -> Result<DeltaSnapshot> {
        self.as_catalog_has_it(async |log: &DeltaLog| {
            log.rebuild(target, Reading::Everything, ActiveFileSet::default())
                .await
        })
        .await
    }

    /// What `read` finds of this log, or, when it finds a catalog-managed table whose
    /// catalog was not asked yet (also past the published log), what it finds of the log
    /// with the catalog's commits as its tail: read once more, never in a loop.
    pub(super) async fn as_catalog_has_it<T>(
        &self,
        read: impl AsyncFn(&DeltaLog) -> Result<Replayed<T>>,
    ) -> Result<T> {
        let replayed = match read(self).await {
            Err(e @ Error::NoSuchVersion { .. }) => self.past_published(e).await?,
            other => other?,
        };
        match replayed {
            Replayed::Table(table) => Ok(table),
            Replayed::CatalogManaged { table_id } => {
                let log = self.ask_catalog(table_id.as_deref()).await?;
                read(&log).await?.asked(&log)
            }
        }
    }

    /// A version past the published log (`e`) may be one the catalog ratified: when the
    /// log's definition shows a catalog-managed table whose catalog was not asked yet, the
    /// read is made again with it; else `e`.
    pub(super) async fn past_published<T>(&self, e: Error) -> Result<Replayed<T>> {
        if !self.asks_catalog() {
            return Err(e);
        }
        match self.read_definition().await? {
            Replayed::CatalogManaged { table_id } => Ok(Replayed::CatalogManaged { table_id }),
            Replayed::Table(_) => Err(e),
        }
    }

    /// [`Self::snapshot`] holding only the data files `filter` keeps (one part of a
    /// fanned-out bootstrap): the others are let go as they are read. The filter may act on
    /// what it sees, so the log is read once, with its tail ([`Self::with_its_tail`]).
    pub async fn snapshot_of(
        &self,
        target: Option<i64>,
        filter: FileFilter,
    ) -> Result<DeltaSnapshot> {
        let log = self.with_its_tail().await?;
        let replayed = log.rebuild(target, Reading::Everything, ActiveFileSet::filtered(filter));
        replayed.await?.asked(&log)
    }

    /// The newest version's metaData and protocol, without its files: of a Parquet
    /// checkpoint only the footer and those two columns are read (ranged requests), so the
    /// cost does not grow with the number of files in the table.
    pub async fn definition(&self) -> Result<TableDefinition> {
        self.as_catalog_has_it(async |log: &DeltaLog| log.read_definition().await)
            .await
    }

    async fn read_definition(&self) -> Result<Replayed<TableDefinition>> {
        // Its commits are applied as they are parsed, holding no file.
        let no_files = ActiveFileSet::filtered(FileFilter::new(|_| false));
        let snapshot = match self.rebuild(None, Reading::Definition, no_files).await? {
            Replayed::Table(snapshot) => snapshot,
            Replayed::CatalogManaged { table_id } => {
                return Ok(Replayed::CatalogManaged { table_id });
            }
        };
        match (snapshot.active.metadata, snapshot.active.protocol) {
            (Some(metadata), Some(protocol)) => Ok(Replayed::Table(TableDefinition {
                version: snapshot.version,
                metadata,
                protocol,
                catalog_managed: snapshot.catalog_managed,
            })),
            _ => Err(self.malformed("no metaData or protocol action")),
        }
    }

    async fn rebuild(
        &self,
        target: Option<i64>,
        reading: Reading,
        active: ActiveFileSet,
    ) -> Result<Replayed<DeltaSnapshot>> {
        let (listed, version) = self.listed_to(target, 0).await?;
        self.replay(&listed, version, reading, active).await
    }

    /// The table at `version` from the newest complete checkpoint in `listed` at or before
    /// it plus the JSON commits after that checkpoint.
    pub(super) async fn replay(
        &self,
        listed: &[(LogFileKind, object_store::ObjectMeta)],
        version: i64,
        reading: Reading,
        mut active: ActiveFileSet,
    ) -> Result<Replayed<DeltaSnapshot>> {
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
                if let Some(table_id) =
                    self.catalog_to_ask(active.protocol.as_ref(), active.metadata.as_ref())
                {
                    return Ok(Replayed::CatalogManaged { table_id });
                }
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
            if let Some(table_id) =
                self.catalog_to_ask(active.protocol.as_ref(), active.metadata.as_ref())
            {
                return Ok(Replayed::CatalogManaged { table_id });
            }
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
        let catalog_managed = self.read_as(active.protocol.as_ref(), active.metadata.as_ref());
        Ok(Replayed::Table(DeltaSnapshot {
            version,
            timestamp_ms,
            active,
            commit_hash,
            catalog_managed,
        }))
    }
}
