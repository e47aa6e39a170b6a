//! The one commit of a mirror: what the writer staged, committed over the catalog table as
//! read (compare-and-swap), the report filled and the files nothing names any more deleted.
//! The sync ([`crate::sync`]) and the fan-out's finishing step ([`crate::fanout`]) both
//! commit here; a lost race is answered here too, each caller reading the table again.

use std::time::Duration;

use lakemirror_iceberg::Error as IcebergError;
use lakemirror_iceberg::catalog::{CatalogTable, Lakehouse};
use lakemirror_iceberg::writer::{MetadataWriter, StagedTable};
use lakemirror_runtime::crash;
use lakemirror_storage::{IoCounters, canonical_uri};

use crate::error::Result;
use crate::report::SyncReport;

/// How many times a mirror's commit is made again after losing a race for its catalog table
/// (each time over the table read again).
pub(crate) const MAX_ATTEMPTS: u32 = 8;

/// Whether a commit landed, or lost its race and waited its backoff: the caller reads the
/// catalog table again and stages anew.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commit {
    Landed,
    LostRace,
}

/// Commits `staged` over `read`, filling `report` in (what was committed, where its metadata
/// lies) and deleting the files the new metadata no longer names. A lost race before
/// [`MAX_ATTEMPTS`] (the report counts the attempts) waits its backoff and says so, with
/// nothing made visible; after it, it is the error.
pub(crate) async fn commit_staged(
    lake: &Lakehouse,
    writer: &MetadataWriter,
    read: &CatalogTable,
    staged: &StagedTable,
    report: &mut SyncReport,
    counters: &IoCounters,
) -> Result<Commit> {
    let attempt = report.attempts;
    crash::point("mirror-before-commit");
    let location = match lake.commit(read, &staged.table, counters).await {
        Err(IcebergError::CommitConflict(table)) if attempt < MAX_ATTEMPTS => {
            lost_race(&table, attempt).await;
            return Ok(Commit::LostRace);
        }
        committed => committed?,
    };
    crash::point("mirror-after-commit");
    let mut removed_files = staged.removed_files.clone();
    // A catalog that wrote the metadata itself (REST) never points at the staged file.
    // Compared canonically: a Java server spells the same file `file:/…`, and deleting
    // the file it registered would break the mirror.
    if canonical_uri(&location) != canonical_uri(&staged.table.metadata_location) {
        removed_files.push(staged.table.metadata_location.clone());
    }
    writer.delete_expired(&removed_files).await;
    for omitted in staged.table.omitted_declarations() {
        tracing::warn!(table = %read.full_name(), column = %omitted.column, reason = %omitted.reason, "a column left out of the mirror; the rest is mirrored exactly (lakemirror.omitted-columns)");
    }
    for note in staged.table.reader_notes() {
        tracing::warn!(table = %read.full_name(), %note, "a reader's limit the mirror works around");
    }
    report.committed(staged, location);
    Ok(Commit::Landed)
}

/// A commit lost its race for the catalog table (another writer committed first): waits
/// the backoff of `attempt` before the caller reads the table again.
async fn lost_race(table: &str, attempt: u32) {
    let pause = backoff(attempt);
    tracing::warn!(%table, attempt, ?pause, "another writer committed first; reading the table again");
    tokio::time::sleep(pause).await;
}

/// Exponential backoff with jitter: 50 ms, 100 ms, ... capped at 5 s.
fn backoff(attempt: u32) -> Duration {
    let base = 50u64.saturating_mul(1 << attempt.min(7)).min(5_000);
    let jitter = u64::from(uuid::Uuid::new_v4().as_u128() as u16) % (base / 2 + 1);
    Duration::from_millis(base / 2 + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_bounded() {
        for attempt in 1..20 {
            let pause = backoff(attempt);
            assert!(pause <= Duration::from_millis(5_000), "{pause:?}");
            assert!(pause >= Duration::from_millis(25));
        }
        assert!(backoff(1) <= Duration::from_millis(100));
    }
}
