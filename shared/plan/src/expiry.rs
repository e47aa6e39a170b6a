//! Which snapshots expire: Delta VACUUM deletes files old Iceberg snapshots still read, so
//! snapshots go before that can happen. A decision on metadata alone; deleting their files is
//! the writer's.

use std::collections::HashMap;

use iceberg::spec::{MAIN_BRANCH, Snapshot, TableMetadata};

use crate::history::{MAX_REMOVED_PER_SYNC, recorded_removals, removed_at};
use crate::properties::DELTA_COMMIT_TIMESTAMP;
use crate::snapshot::SnapshotPlan;

/// Snapshots expire this long before VACUUM may delete the files they still reference.
const EXPIRY_MARGIN_MS: i64 = 3_600_000;

/// The snapshots to expire, oldest first. Delta VACUUM may delete a file `retention` after it
/// was removed, so a snapshot must go before the earliest removal by any later version is
/// `retention` old (less a margin); the history is also kept no longer than a retention period
/// after the next version. The current snapshot always stays.
/// `snapshots` is the history oldest first ([`lakemirror_history`]), `properties` the table's.
pub fn expirable(
    snapshots: &[&Snapshot],
    properties: &HashMap<String, String>,
    now_ms: i64,
    retention_ms: i64,
) -> Vec<i64> {
    // Removals by versions thinned away count where the snapshot standing for them is.
    let carried = recorded_removals(properties);
    let removed_at = |s: &Snapshot| {
        let own = removed_at(s);
        match carried.get(&s.snapshot_id()) {
            Some(at) => Some(own.map_or(*at, |own| own.min(*at))),
            None => own,
        }
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
    snapshots
        .windows(2)
        .zip(&later_removal)
        .take_while(|(pair, removal)| removal.is_some_and(past) || past(commit_time(pair[1])))
        .map(|(pair, _)| pair[0].snapshot_id())
        .take(MAX_REMOVED_PER_SYNC)
        .collect()
}

/// How many of the oldest `plans` (versions about to be written, oldest first) would expire
/// as soon as written, by [`expirable`]'s rule: their snapshots would read files VACUUM may
/// have deleted already (a first sync of a table VACUUM cleaned), so they are not written
/// apart. The newest is never one.
pub fn expiring_plans(plans: &[SnapshotPlan], now_ms: i64, retention_ms: i64) -> usize {
    let past = |t: i64| t.saturating_add(retention_ms) - EXPIRY_MARGIN_MS <= now_ms;
    let mut later_removal = vec![None; plans.len()];
    let mut earliest: Option<i64> = None;
    for (i, plan) in plans.iter().enumerate().rev() {
        later_removal[i] = earliest;
        if let Some(t) = plan.removed_at_ms {
            earliest = Some(earliest.map_or(t, |e| e.min(t)));
        }
    }
    plans
        .windows(2)
        .zip(&later_removal)
        .take_while(|(pair, removal)| {
            removal.is_some_and(past) || past(pair[1].commit_timestamp_ms)
        })
        .count()
}

/// The snapshots oldest first, when the history is one lakemirror writes alone: the main
/// branch only, current at the newest, each snapshot's parent the one before it or one the
/// table no longer has (expired or thinned). There a manifest is listed by a run of
/// consecutive snapshots, which makes the file cleanup exact. Anything else (another tool's
/// branch, tag, rollback or fork) is left alone: None.
pub fn lakemirror_history(metadata: &TableMetadata) -> Option<Vec<&Snapshot>> {
    let mut snapshots: Vec<&Snapshot> = metadata.snapshots().map(|s| s.as_ref()).collect();
    snapshots.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms()));
    let linear = snapshots.windows(2).all(|pair| {
        pair[1].parent_snapshot_id().is_none_or(|parent| {
            parent == pair[0].snapshot_id() || metadata.snapshot_by_id(parent).is_none()
        })
    });
    let current_is_newest =
        snapshots.last().map(|s| s.snapshot_id()) == metadata.current_snapshot_id();
    (linear && current_is_newest && main_only(metadata)).then_some(snapshots)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::properties::DELTA_REMOVED_AT;
    use serde_json::{Value, json};

    const DAY_MS: i64 = 86_400_000;
    const RETENTION_MS: i64 = 7 * DAY_MS;

    /// A snapshot as lakemirror writes it: parented on the one before, a Delta commit time,
    /// and `removed` data files.
    fn snapshot(id: i64, parent: Option<i64>, committed_ms: i64, removed: u32) -> Value {
        let mut summary = json!({
            "operation": if removed > 0 { "overwrite" } else { "append" },
            DELTA_COMMIT_TIMESTAMP: committed_ms.to_string(),
        });
        if removed > 0 {
            summary["deleted-data-files"] = json!(removed.to_string());
        }
        let mut s = json!({
            "snapshot-id": id,
            "sequence-number": id,
            "timestamp-ms": committed_ms,
            "manifest-list": format!("s3://b/t/metadata/snap-{id}.avro"),
            "summary": summary,
            "schema-id": 0,
        });
        if let Some(p) = parent {
            s["parent-snapshot-id"] = json!(p);
        }
        s
    }

    fn metadata(snapshots: Vec<Value>, current: i64, refs: Value) -> TableMetadata {
        let last_sequence = snapshots.len() as i64;
        serde_json::from_value(json!({
            "format-version": 2,
            "table-uuid": "6d5c1a8e-2d7f-4a44-9a8e-6d1f0c3c2a10",
            "location": "s3://b/t",
            "last-sequence-number": last_sequence,
            "last-updated-ms": 1_000,
            "last-column-id": 1,
            "current-schema-id": 0,
            "schemas": [{"type": "struct", "schema-id": 0,
                         "fields": [{"id": 1, "name": "id", "required": false, "type": "long"}]}],
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": {},
            "current-snapshot-id": current,
            "snapshots": snapshots,
            "refs": refs,
            "snapshot-log": [],
            "metadata-log": [],
        }))
        .expect("test metadata is valid")
    }

    fn expire(m: &TableMetadata, now_ms: i64) -> Vec<i64> {
        lakemirror_history(m)
            .map(|history| expirable(&history, m.properties(), now_ms, RETENTION_MS))
            .unwrap_or_default()
    }

    fn main_at(id: i64) -> Value {
        json!({"main": {"snapshot-id": id, "type": "branch"}})
    }

    /// Version 1 appends, version 2 removes files on day 10, version 3 appends on day 11.
    fn history() -> Vec<Value> {
        vec![
            snapshot(1, None, DAY_MS, 0),
            snapshot(2, Some(1), 10 * DAY_MS, 3),
            snapshot(3, Some(2), 11 * DAY_MS, 0),
        ]
    }

    #[test]
    fn a_snapshot_expires_before_vacuum_may_delete_what_a_later_version_removed() {
        let m = metadata(history(), 3, main_at(3));
        let vacuum_may_delete = 10 * DAY_MS + RETENTION_MS;
        assert_eq!(
            expire(&m, vacuum_may_delete - EXPIRY_MARGIN_MS - 1),
            Vec::<i64>::new(),
            "nothing is at risk yet"
        );
        assert_eq!(
            expire(&m, vacuum_may_delete - EXPIRY_MARGIN_MS),
            vec![1],
            "snapshot 1 reads the files version 2 removed; version 2 itself stays"
        );
    }

    #[test]
    fn history_is_kept_a_retention_period_after_the_next_version_and_the_current_stays() {
        let m = metadata(history(), 3, main_at(3));
        let long_after = 100 * DAY_MS;
        assert_eq!(expire(&m, long_after), vec![1, 2]);
    }

    #[test]
    fn the_removal_time_recorded_by_a_long_merge_counts_not_its_commit_time() {
        let mut snapshots = history();
        // Version 2 committed on day 10, but removed its files on day 5.
        snapshots[1]["summary"][DELTA_REMOVED_AT] = json!((5 * DAY_MS).to_string());
        let m = metadata(snapshots, 3, main_at(3));
        let now = 5 * DAY_MS + RETENTION_MS - EXPIRY_MARGIN_MS;
        assert_eq!(expire(&m, now), vec![1]);
    }

    #[test]
    fn another_tools_tag_branch_or_rollback_is_left_alone() {
        let long_after = 100 * DAY_MS;
        let tagged = metadata(
            history(),
            3,
            json!({"main": {"snapshot-id": 3, "type": "branch"},
                   "audit": {"snapshot-id": 1, "type": "tag"}}),
        );
        assert_eq!(expire(&tagged, long_after), Vec::<i64>::new());

        let rolled_back = metadata(history(), 2, main_at(2));
        assert_eq!(expire(&rolled_back, long_after), Vec::<i64>::new());

        let mut forked = history();
        forked[2]["parent-snapshot-id"] = json!(1);
        let forked = metadata(forked, 3, main_at(3));
        assert_eq!(expire(&forked, long_after), Vec::<i64>::new());
    }
}
