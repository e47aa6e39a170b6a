//! The recent history of a table: its state at the start of a window of versions and the
//! commits after it, one snapshot per version.

use futures::{StreamExt, TryStreamExt, stream};

use crate::actions::DeltaCommit;
use crate::bounded::HeapSize;
use crate::error::Result;
use crate::replay::ActiveFileSet;

use super::checkpoints::{Reading, first_complete_checkpoint, newest_complete_checkpoint};
use super::snapshot::Replayed;
use super::{DeltaLog, DeltaSnapshot, FETCH_CONCURRENCY, LogFileKind};

impl DeltaLog {
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
        self.as_catalog_has_it(async |log: &DeltaLog| {
            log.read_recent_history(target, versions, floor, since_checkpoint)
                .await
        })
        .await
    }

    async fn read_recent_history(
        &self,
        target: Option<i64>,
        versions: u64,
        floor: Option<i64>,
        since_checkpoint: bool,
    ) -> Result<Replayed<(DeltaSnapshot, Vec<DeltaCommit>)>> {
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
        let mut base = match self
            .replay(
                &listed,
                start,
                Reading::Everything,
                ActiveFileSet::default(),
            )
            .await?
        {
            Replayed::Table(base) => base,
            Replayed::CatalogManaged { table_id } => {
                return Ok(Replayed::CatalogManaged { table_id });
            }
        };
        let mut read = stream::iter(start + 1..=version)
            .map(|v| {
                let meta = listed
                    .iter()
                    .find_map(|(k, m)| (*k == LogFileKind::Commit(v)).then_some(m))
                    .ok_or_else(|| self.malformed(format!("commit {v} is missing")));
                async move { self.read_commit(v, meta?).await }
            })
            .buffered(FETCH_CONCURRENCY);
        // The window's commits are held with the base's files: together within the limits.
        let mut held = base.active.held_bytes;
        let mut commits: Vec<DeltaCommit> = Vec::new();
        while let Some(commit) = read.try_next().await? {
            held = held.saturating_add(commit.heap_size());
            if held > self.limits.held_bytes() {
                return Err(self.too_many_files(commit.version));
            }
            commits.push(commit);
        }
        // The window's newest protocol says how the table is read.
        let protocol = commits.iter().rev().find_map(|c| c.protocol.as_ref());
        let metadata = commits.iter().rev().find_map(|c| c.metadata.as_ref());
        let (protocol, metadata) = (protocol.or(base.protocol()), metadata.or(base.metadata()));
        if let Some(table_id) = self.catalog_to_ask(protocol, metadata) {
            return Ok(Replayed::CatalogManaged { table_id });
        }
        base.catalog_managed = self.read_as(protocol, metadata);
        Ok(Replayed::Table((base, commits)))
    }
}
