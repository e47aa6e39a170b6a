//! How much of a log one table's work reads into memory: its share of the process's memory
//! budget ([`lakemirror_storage::budget`]).
//!
//! A sync holds each log file it reads as bytes (their room taken from the share while they
//! live) and each data file of the table as an action (about 2 KB with its column stats,
//! bounded by count from the rest of the share). A log too large for the share is refused
//! with what to do, or read in groups, instead of the process being killed for its memory
//! with every other table of its batch.
//!
//! A commit or a replay with more files than the [`LogLimits`] allow is refused instead of
//! the process being killed for its memory.

use lakemirror_storage::MemoryShare;
use lakemirror_storage::budget;

use crate::error::{Error, Result};
use crate::replay::ActiveFileSet;

use super::DeltaLog;

use lakemirror_storage::budget::BYTES_PER_HELD_FILE;

/// What one table's work reads of a log at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// The memory these limits were derived from (None: not bounded by memory).
    pub memory_mb: Option<u64>,
    /// How many tables share that memory at once.
    pub shared_by: u32,
    /// The largest commit, checkpoint part or sidecar read into memory.
    pub file_bytes: u64,
    /// The most data files one replay holds.
    pub held_files: u64,
}

impl LogLimits {
    /// No bound but the largest log file (tests, and a process that was given no memory).
    pub fn unbounded() -> Self {
        Self::of(&MemoryShare::unbounded())
    }

    /// The limits of work within `share`.
    pub fn of(share: &MemoryShare) -> Self {
        LogLimits {
            memory_mb: share.memory_mb(),
            shared_by: share.shared_by(),
            file_bytes: share.read_bytes(),
            held_files: share.held_files(),
        }
    }

    /// The limits of the work running now: its share of the budget.
    pub fn current() -> Self {
        Self::of(&budget::current())
    }

    /// The memory the held files may take (about [`BYTES_PER_HELD_FILE`] each).
    pub fn held_bytes(&self) -> u64 {
        self.held_files.saturating_mul(BYTES_PER_HELD_FILE)
    }

    /// The memory size as the error messages name it.
    pub fn memory_text(&self) -> String {
        let memory = match self.memory_mb {
            Some(mb) => format!("{mb} MB of memory"),
            None => "this memory".to_string(),
        };
        match self.shared_by {
            0 | 1 => memory,
            n => format!("{memory}, shared by {n} tables at once"),
        }
    }
}

impl DeltaLog {
    pub(super) fn too_many_files(&self, version: i64) -> Error {
        Error::TooManyFiles {
            table: self.table.root_uri().to_string(),
            version,
            limit: self.limits.held_files,
            memory: self.limits.memory_text(),
            shared: self.limits.shared_by > 1,
        }
    }

    /// Refuses a replay holding more files than the limits allow, or files that take more
    /// memory than that many files of the usual size would.
    pub(super) fn check_held(&self, active: &ActiveFileSet, version: i64) -> Result<()> {
        let files = active.files.len() as u64 > self.limits.held_files;
        let bytes = active.held_bytes > self.limits.held_bytes();
        match files || bytes {
            true => Err(self.too_many_files(version)),
            false => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::replay::FileFilter;
    use crate::test_tables::{add, commit_info, metadata, protocol, write_commit};
    use lakemirror_storage::ObjectStores;
    use lakemirror_storage::TableStorage;

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
            shared_by: 1,
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

    #[test]
    fn the_limits_grow_with_memory_and_the_default_function_fits_a_group() {
        let small = LogLimits::of(&MemoryShare::for_memory_mb(128));
        let default = LogLimits::of(&MemoryShare::for_memory_mb(1024));
        let large = LogLimits::of(&MemoryShare::for_memory_mb(10240));
        // The default function holds about 236,000 files: most of a default bootstrap group
        // (250,000, cut to what the budget holds).
        assert!(default.held_files > 200_000, "{}", default.held_files);
        assert!(small.held_files < default.held_files && default.held_files < large.held_files);
        assert!(small.file_bytes < default.file_bytes && default.file_bytes < large.file_bytes);
        let part = LogLimits::of(&MemoryShare::for_memory_mb(1024).part(4));
        assert!(part.held_files * 4 <= default.held_files + 4);
        assert_eq!(
            part.memory_text(),
            "1024 MB of memory, shared by 4 tables at once"
        );
    }
}
