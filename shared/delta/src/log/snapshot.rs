//! The table at one version: replayed from the newest complete checkpoint at or before it
//! plus the commits after, or only its definition (metaData and protocol).

use crate::actions::{Metadata, Protocol};
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
}

/// Reading a checkpoint for longer than this reports its progress.
const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

impl DeltaLog {
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

    /// The table at `version` from the newest complete checkpoint in `listed` at or before
    /// it plus the JSON commits after that checkpoint.
    pub(super) async fn replay(
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
}
