//! Reading commits: fetched by name or from a listing, parsed within the limits, and the
//! commits found after a version.

use futures::{StreamExt, TryStreamExt, stream};

use crate::bounded::HeapSize;

use crate::actions::{CommitParseError, DeltaCommit};
use crate::error::{Error, Result};

use super::{DeltaLog, FETCH_CONCURRENCY, LogFileKind};

/// Commits found after a version.
#[derive(Debug)]
pub enum CommitsSince {
    /// Every commit from the next version up to the target, in order (maybe none).
    Contiguous(Vec<DeltaCommit>),
    /// The first commits from the next version on, in order, as many as one read holds
    /// parsed: more follow, for the next read.
    Partial(Vec<DeltaCommit>),
    /// The commit right after the version is gone (log cleanup): rebuild from a checkpoint.
    Gap { first_available: Option<i64> },
}

impl DeltaLog {
    pub(super) async fn read_commit(
        &self,
        version: i64,
        meta: &object_store::ObjectMeta,
    ) -> Result<DeltaCommit> {
        let (bytes, time_ms) = self.commit_bytes(version, meta).await?;
        self.parse_commit(version, &bytes, time_ms)
    }

    /// The bytes of commit `version` (listed as `meta`) and its file's time.
    pub(super) async fn commit_bytes(
        &self,
        version: i64,
        meta: &object_store::ObjectMeta,
    ) -> Result<(bytes::Bytes, i64)> {
        let location = self.table.location_of_key(&meta.location);
        let (bytes, meta) = self
            .table
            .get_listed(&location, meta.size, self.limits.file_bytes)
            .await?
            .ok_or_else(|| self.malformed(format!("commit {version} vanished while reading")))?;
        Ok((bytes, meta.last_modified.timestamp_millis()))
    }

    /// Parses a commit held whole, after checking that its actions (about one a line) fit
    /// the files one read holds, and holding no more memory than they may.
    fn parse_commit(&self, version: i64, bytes: &[u8], time_ms: i64) -> Result<DeltaCommit> {
        let lines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
        if lines > self.limits.held_files {
            return Err(self.too_many_files(version));
        }
        DeltaCommit::parse_within(version, bytes, time_ms, self.limits.held_bytes(), |_| true)
            .map_err(|e| match e {
                CommitParseError::HoldsMore { .. } => self.too_many_files(version),
                CommitParseError::Malformed(reason) => self.malformed(reason),
            })
    }

    /// The commits after `version` up to `target` (newest when None). `known` is a version
    /// the log is known to hold (the commit an event announced): without a target, the
    /// commits up to it are read and newer ones are left to their own events.
    ///
    /// Commit files are fetched by name and the log is listed only when a name is missing
    /// (nothing new, or cleaned up), more than one commit is new and nothing bounds them,
    /// or the version named is more than [`FETCH_CONCURRENCY`] ahead: a LIST costs more than
    /// a GET on S3, and some stores list in time that grows with the bucket, while the usual
    /// sync has one new commit; but a version an event names is what a writer of the table
    /// chose (`00000000009999999999.json`), and no more versions are asked for by name than
    /// one round of fetches holds.
    ///
    /// The commits read are at most what one read of the log holds parsed
    /// ([`crate::LogLimits::held_bytes`]): past it, [`CommitsSince::Partial`].
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
        let by_name = |last: i64| last - version <= FETCH_CONCURRENCY as i64;
        if let Some(last) = named {
            if by_name(last)
                && let Some(commits) = self.fetch_commits(version + 1, last).await?
            {
                return Ok(self.within_held(commits));
            }
        } else if let Some(first) = self.fetch_commit(version + 1).await? {
            let Some(second) = self.fetch_commit(version + 2).await? else {
                return Ok(CommitsSince::Contiguous(vec![first]));
            };
            // Catching up on several commits: list the rest.
            match self.listed_commits_since(version + 2, None).await? {
                CommitsSince::Contiguous(rest) => {
                    return Ok(self.within_held([first, second].into_iter().chain(rest).collect()));
                }
                // The listing stopped at what one read holds: more follow, whatever fits.
                CommitsSince::Partial(rest) => {
                    return Ok(
                        match self.within_held([first, second].into_iter().chain(rest).collect()) {
                            CommitsSince::Contiguous(commits) => CommitsSince::Partial(commits),
                            partial => partial,
                        },
                    );
                }
                CommitsSince::Gap { .. } => {}
            }
        }
        self.listed_commits_since(version, target).await
    }

    /// `commits` (every one up to the target), or as many of the first as one read holds.
    fn within_held(&self, mut commits: Vec<DeltaCommit>) -> CommitsSince {
        let mut held = 0u64;
        let fit = commits
            .iter()
            .take_while(|c| {
                held = held.saturating_add(c.heap_size());
                held <= self.limits.held_bytes()
            })
            .count()
            .max(1);
        if fit >= commits.len() {
            return CommitsSince::Contiguous(commits);
        }
        commits.truncate(fit);
        CommitsSince::Partial(commits)
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
    pub(super) async fn commit_file_bytes(
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

    /// Commits `first..=last`, fetched by name (their bytes wait for room in the work's
    /// memory share), in order, as many as one read holds parsed (the rest are left to a
    /// next read: see [`Self::within_held`]); None when one of them does not exist.
    async fn fetch_commits(&self, first: i64, last: i64) -> Result<Option<Vec<DeltaCommit>>> {
        let mut fetched = stream::iter(first..=last)
            .map(|v| self.fetch_commit(v))
            .buffered(FETCH_CONCURRENCY);
        let (mut commits, mut held) = (Vec::new(), 0u64);
        while let Some(commit) = fetched.try_next().await? {
            let Some(commit) = commit else {
                return Ok(None);
            };
            held = held.saturating_add(commit.heap_size());
            commits.push(commit);
            if held > self.limits.held_bytes() {
                break;
            }
        }
        Ok(Some(commits))
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
        // Read in order, as many as one read holds parsed; the rest is left for the next.
        let mut read = stream::iter(wanted)
            .map(|(v, meta)| self.read_commit(v, meta))
            .buffered(FETCH_CONCURRENCY);
        let (mut commits, mut held) = (Vec::new(), 0u64);
        while let Some(commit) = read.try_next().await? {
            held = held.saturating_add(commit.heap_size());
            if held > self.limits.held_bytes() && !commits.is_empty() {
                return Ok(CommitsSince::Partial(commits));
            }
            commits.push(commit);
        }
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

    /// [`DeltaCommit::content_hash`] of commit `version`; None when its file is gone.
    pub async fn commit_hash(&self, version: i64) -> Result<Option<u64>> {
        Ok(self
            .commit_file_bytes(version)
            .await?
            .map(|(bytes, _)| crate::actions::content_hash(&bytes)))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::log::LogLimits;
    use crate::test_tables::{add, commit_info, metadata, protocol, write_commit};
    use lakemirror_storage::{IoCounters, ObjectStores, TableStorage};

    async fn table_of(versions: i64, counters: Arc<IoCounters>) -> TableStorage {
        let table = ObjectStores::in_memory()
            .open("s3://lake/warehouse/t", counters)
            .unwrap();
        write_commit(
            &table,
            0,
            &[
                commit_info(1),
                protocol(),
                metadata("t", &[("id", "long")], &[]),
            ],
        )
        .await;
        for v in 1..=versions {
            write_commit(
                &table,
                v,
                &[commit_info(v), add(&format!("f{v}.parquet"), 1, &[])],
            )
            .await;
        }
        table
    }

    #[tokio::test]
    async fn a_version_named_far_ahead_is_found_by_one_listing_not_a_request_per_version() {
        let counters = Arc::new(IoCounters::default());
        let table = table_of(3, counters.clone()).await;
        let log = DeltaLog::with_limits(table.clone(), LogLimits::unbounded());
        let before = counters.totals().requests;
        let CommitsSince::Contiguous(commits) = log
            .commits_since(1, None, Some(9_999_999_999))
            .await
            .unwrap()
        else {
            panic!("the commits after 1")
        };
        assert_eq!(
            commits.iter().map(|c| c.version).collect::<Vec<_>>(),
            [2, 3]
        );
        let requests = counters.totals().requests - before;
        assert_eq!(requests, 3, "one listing and the two commits");
        // A commit file of that name, planted: the log has a gap, which is an error.
        write_commit(&table, 9_999_999_999, &[commit_info(1)]).await;
        let err = log
            .commits_since(1, None, Some(9_999_999_999))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("commit 4 is missing"), "{err}");
    }

    #[tokio::test]
    async fn commits_past_what_one_read_holds_come_in_parts() {
        let table = table_of(40, Arc::default()).await;
        let limits = LogLimits {
            memory_mb: Some(1),
            shared_by: 1,
            file_bytes: 1 << 20,
            held_files: 2,
        };
        let log = DeltaLog::with_limits(table, limits);
        let CommitsSince::Partial(first) = log.commits_since(0, None, None).await.unwrap() else {
            panic!("more commits than one read holds")
        };
        assert!(!first.is_empty() && first.len() < 40, "{}", first.len());
        assert_eq!(first[0].version, 1);
        let held: u64 = first.iter().map(HeapSize::heap_size).sum();
        assert!(held <= limits.held_bytes() + first.last().unwrap().heap_size());
        let last = first.last().unwrap().version;
        let rest = log.commits_since(last, None, None).await.unwrap();
        assert!(
            matches!(&rest, CommitsSince::Partial(c) | CommitsSince::Contiguous(c) if c[0].version == last + 1)
        );
    }
}
