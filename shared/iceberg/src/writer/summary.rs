//! What a snapshot changed, counted, and the summary it carries: Iceberg's standard
//! `added-*` / `deleted-*` / `total-*` keys, the Delta version and commit it mirrors.

use std::collections::HashMap;

use iceberg::spec::Summary;
use lakemirror_plan::SnapshotPlan;
use lakemirror_plan::properties::{
    DELTA_COMMIT_HASH, DELTA_COMMIT_TIMESTAMP, DELTA_REMOVED_AT, DELTA_VERSION,
};

/// Files, and the records (for delete files: the positions) in them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub(super) files: u64,
    pub(super) records: u64,
}

impl Counts {
    pub(super) fn new(files: u64, records: u64) -> Self {
        Self { files, records }
    }

    /// `self + arriving - leaving`, never below zero.
    fn moved(self, arriving: Counts, leaving: Counts) -> Counts {
        Counts {
            files: (self.files + arriving.files).saturating_sub(leaving.files),
            records: (self.records + arriving.records).saturating_sub(leaving.records),
        }
    }
}

impl std::ops::AddAssign<(u64, u64)> for Counts {
    fn add_assign(&mut self, (files, records): (u64, u64)) {
        self.files += files;
        self.records += records;
    }
}

impl std::ops::Add for Counts {
    type Output = Counts;

    fn add(self, other: Counts) -> Counts {
        Counts::new(self.files + other.files, self.records + other.records)
    }
}

/// What the newest snapshot holds: data files and records, delete files and positions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Totals {
    pub(super) data: Counts,
    pub(super) deletes: Counts,
}

impl Totals {
    /// The totals a snapshot's summary states (0 where it states none).
    pub(super) fn of(summary: &HashMap<String, String>) -> Self {
        let number = |key: &str| summary.get(key).and_then(|v| v.parse().ok()).unwrap_or(0);
        Self {
            data: Counts::new(number("total-data-files"), number("total-records")),
            deletes: Counts::new(
                number("total-delete-files"),
                number("total-position-deletes"),
            ),
        }
    }

    /// The totals after `changed`. (What a replaced snapshot held left the totals when it
    /// was replaced.)
    pub(super) fn after(self, changed: &Changed) -> Self {
        Self {
            data: self.data.moved(changed.added, changed.deleted),
            deletes: self
                .deletes
                .moved(changed.added_deletes, changed.retired_deletes),
        }
    }
}

/// What writing one snapshot's manifests changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Changed {
    /// Data files added.
    pub(super) added: Counts,
    /// Data files leaving with the previous snapshot when it is replaced whole.
    pub(super) replaced: Counts,
    /// Data files deleted from the buckets rewritten.
    pub(super) deleted: Counts,
    /// Delete files leaving with the previous snapshot when it is replaced whole.
    pub(super) replaced_deletes: Counts,
    /// Delete files retired with their data files, or replaced by a changed deletion vector.
    pub(super) retired_deletes: Counts,
    /// Delete files added.
    pub(super) added_deletes: Counts,
    pub(super) manifests_written: usize,
}

impl Changed {
    /// The previous snapshot, holding `totals`, leaves whole (a replace).
    pub(super) fn replacing(&mut self, totals: Totals) {
        self.replaced = totals.data;
        self.replaced_deletes = totals.deletes;
    }

    /// Data files that left the table, however they left.
    pub(super) fn removed(&self) -> Counts {
        self.replaced + self.deleted
    }

    /// Delete files that left the table, however they left.
    pub(super) fn removed_deletes(&self) -> Counts {
        self.replaced_deletes + self.retired_deletes
    }
}

/// The summary of the snapshot that mirrors `plan`: what `changed`, the `totals` after it.
pub(super) fn snapshot_summary(plan: &SnapshotPlan, changed: &Changed, totals: &Totals) -> Summary {
    let removed = changed.removed();
    let removed_deletes = changed.removed_deletes();
    let mut properties: HashMap<String, String> = [
        (DELTA_VERSION, plan.delta_version.to_string()),
        (DELTA_COMMIT_TIMESTAMP, plan.commit_timestamp_ms.to_string()),
        ("added-data-files", changed.added.files.to_string()),
        ("deleted-data-files", removed.files.to_string()),
        ("added-records", changed.added.records.to_string()),
        ("deleted-records", removed.records.to_string()),
        ("total-data-files", totals.data.files.to_string()),
        ("total-records", totals.data.records.to_string()),
        (
            "added-delete-files",
            changed.added_deletes.files.to_string(),
        ),
        ("removed-delete-files", removed_deletes.files.to_string()),
        (
            "added-position-deletes",
            changed.added_deletes.records.to_string(),
        ),
        (
            "removed-position-deletes",
            removed_deletes.records.to_string(),
        ),
        ("total-delete-files", totals.deletes.files.to_string()),
        ("total-position-deletes", totals.deletes.records.to_string()),
        ("total-equality-deletes", "0".to_string()),
        (
            "lakemirror.manifests-written",
            changed.manifests_written.to_string(),
        ),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect();
    if let Some(hash) = plan.commit_hash {
        properties.insert(DELTA_COMMIT_HASH.to_string(), format!("{hash:016x}"));
    }
    if let Some(removed_at) = plan.removed_at_ms {
        properties.insert(DELTA_REMOVED_AT.to_string(), removed_at.to_string());
    }
    Summary {
        operation: plan.operation.clone(),
        additional_properties: properties,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_follow_what_arrives_and_leaves_and_the_summary_states_both() {
        let before = Totals {
            data: Counts::new(10, 1_000),
            deletes: Counts::new(2, 20),
        };
        let changed = Changed {
            added: Counts::new(3, 300),
            deleted: Counts::new(1, 100),
            retired_deletes: Counts::new(1, 5),
            added_deletes: Counts::new(1, 7),
            manifests_written: 4,
            ..Changed::default()
        };
        let after = before.after(&changed);
        assert_eq!(after.data, Counts::new(12, 1_200));
        assert_eq!(after.deletes, Counts::new(2, 22));
        let plan = SnapshotPlan {
            delta_version: 7,
            commit_hash: Some(0xab),
            ..SnapshotPlan::default()
        };
        let summary = snapshot_summary(&plan, &changed, &after);
        let read = Totals::of(&summary.additional_properties);
        assert_eq!(read, after, "the next load reads back the totals written");
        let value = |key: &str| summary.additional_properties[key].as_str();
        assert_eq!(value("added-data-files"), "3");
        assert_eq!(value("deleted-data-files"), "1");
        assert_eq!(value("removed-delete-files"), "1");
        assert_eq!(value("removed-position-deletes"), "5");
        assert_eq!(value(DELTA_VERSION), "7");
        assert_eq!(value(DELTA_COMMIT_HASH), "00000000000000ab");
        assert_eq!(value("lakemirror.manifests-written"), "4");
    }

    #[test]
    fn a_replaced_snapshot_counts_as_removed_but_leaves_the_totals_once() {
        let changed = Changed {
            added: Counts::new(5, 50),
            replaced: Counts::new(4, 40),
            replaced_deletes: Counts::new(1, 3),
            ..Changed::default()
        };
        // A replace takes the totals away as it starts (state/bucket_manifests.rs), then adds what arrives.
        let after = Totals::default().after(&changed);
        assert_eq!(after.data, Counts::new(5, 50));
        assert_eq!(changed.removed(), Counts::new(4, 40));
        assert_eq!(changed.removed_deletes(), Counts::new(1, 3));
    }
}
