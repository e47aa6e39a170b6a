//! What one read holds: a commit or a replay with more files than the
//! [`LogLimits`](crate::limits::LogLimits) allow is refused instead of the process being
//! killed for its memory.

use crate::error::{Error, Result};
use crate::replay::ActiveFileSet;

use super::DeltaLog;

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
    use crate::limits::LogLimits;
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
}
