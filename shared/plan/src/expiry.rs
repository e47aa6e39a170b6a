//! Which snapshots expire: Delta VACUUM deletes files old Iceberg snapshots still read, so
//! snapshots go before that can happen. A decision on metadata alone; deleting their files is
//! the writer's.

use iceberg::spec::{MAIN_BRANCH, Snapshot, TableMetadata};

use crate::properties::{DELTA_COMMIT_TIMESTAMP, DELTA_REMOVED_AT};

/// Snapshots expire this long before VACUUM may delete the files they still reference.
const EXPIRY_MARGIN_MS: i64 = 3_600_000;

/// The snapshots to expire, oldest first, and the oldest one kept. Delta VACUUM may delete a
/// file `retention` after it was removed, so a snapshot must go before the earliest removal
/// by any later version is `retention` old (less a margin); the history is also kept no
/// longer than a retention period after the next version. The current snapshot always stays.
pub fn expirable(
    metadata: &TableMetadata,
    now_ms: i64,
    retention_ms: i64,
) -> (Vec<i64>, Option<i64>) {
    let mut snapshots: Vec<_> = metadata.snapshots().collect();
    snapshots.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms()));
    // Only a straight history with the main branch alone, as lakemirror writes it: there a
    // manifest is listed by a run of consecutive snapshots, which makes the file cleanup
    // exact. Anything else (another tool's branch, tag or rollback) is left alone.
    let linear = snapshots
        .windows(2)
        .all(|p| p[1].parent_snapshot_id() == Some(p[0].snapshot_id()));
    let current_is_newest =
        snapshots.last().map(|s| s.snapshot_id()) == metadata.current_snapshot_id();
    if !linear || !current_is_newest {
        return (Vec::new(), None);
    }
    // The earliest removal of each version that removed files: its removes' own
    // deletionTimestamp (a MERGE or OPTIMIZE that ran for hours removed files long before it
    // committed), else, for snapshots written before that was recorded, its commit time.
    let removed_at = |s: &Snapshot| {
        let summary = &s.summary().additional_properties;
        let number = |key: &str| summary.get(key).and_then(|v| v.parse::<i64>().ok());
        number(DELTA_REMOVED_AT).or_else(|| {
            let removed = number("deleted-data-files").unwrap_or(0) > 0
                || number("removed-delete-files").unwrap_or(0) > 0;
            removed.then(|| number(DELTA_COMMIT_TIMESTAMP).unwrap_or(s.timestamp_ms()))
        })
    };
    // later_removal[i]: the earliest removal by any version after snapshot i.
    let mut later_removal = vec![None; snapshots.len()];
    let mut earliest: Option<i64> = None;
    for (i, s) in snapshots.iter().enumerate().rev() {
        later_removal[i] = earliest;
        if let Some(t) = removed_at(s) {
            earliest = Some(earliest.map_or(t, |e| e.min(t)));
        }
    }
    let commit_time = |s: &Snapshot| {
        s.summary()
            .additional_properties
            .get(DELTA_COMMIT_TIMESTAMP)
            .and_then(|t| t.parse::<i64>().ok())
            .unwrap_or(s.timestamp_ms())
    };
    let past = |t: i64| t.saturating_add(retention_ms) - EXPIRY_MARGIN_MS <= now_ms;
    // A snapshot goes when VACUUM may have deleted a file it reads (a later version removed
    // it a retention period ago), and, to bound the history as before, once the version
    // after it is a retention period old.
    let expired: Vec<i64> = snapshots
        .windows(2)
        .zip(&later_removal)
        .take_while(|(pair, removal)| removal.is_some_and(past) || past(commit_time(pair[1])))
        .map(|(pair, _)| pair[0].snapshot_id())
        .collect();
    // Checked last: it serializes the metadata, and most syncs expire nothing.
    if expired.is_empty() || !main_only(metadata) {
        return (Vec::new(), None);
    }
    let oldest_kept = snapshots.get(expired.len()).map(|s| s.snapshot_id());
    (expired, oldest_kept)
}

/// Whether `main` is the table's only branch or tag (TableMetadata has no refs iterator).
pub fn main_only(metadata: &TableMetadata) -> bool {
    serde_json::to_value(metadata)
        .ok()
        .and_then(|m| {
            m.get("refs")
                .and_then(|r| r.as_object())
                .map(|refs| refs.keys().all(|name| name == MAIN_BRANCH))
        })
        .unwrap_or(false)
}
