//! Listing `_delta_log/`: its files classified in version order, the newest published
//! version, the version a read rebuilds and the oldest one the log can rebuild.

use crate::error::{Error, Result};

use super::checkpoints::newest_complete_checkpoint;
use super::{DeltaLog, LogFileKind, classify};

impl DeltaLog {
    /// Log files after version `after` (all when None), classified, in version order; of a
    /// catalog-managed table, as its catalog has them.
    pub(super) async fn list(
        &self,
        after: Option<i64>,
    ) -> Result<Vec<(LogFileKind, object_store::ObjectMeta)>> {
        let published = self.list_published(after).await?;
        match self.ratified() {
            None => Ok(published),
            Some(ratified) => self.with_ratified_commits(published, after, ratified),
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
                (parent_is_log && kind.is_published()).then_some((kind, meta))
            })
            .collect())
    }

    /// The log files from at least `back` versions before the newest checkpoint on (all of
    /// them with a target), and the version to rebuild: `target`, or the newest.
    pub(super) async fn listed_to(
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
}
