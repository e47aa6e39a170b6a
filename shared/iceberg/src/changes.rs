//! A commit's changes, typed: the requirements and updates that turn the metadata the catalog
//! pointed at when it was read (`previous`) into the metadata the writer staged (`next`),
//! as iceberg's own `TableRequirement` and `TableUpdate`. Computed once, for every catalog
//! ([`crate::catalog::CatalogCommit::changes`]): a catalog that takes changes rather than a
//! location (Iceberg REST) sends them; one that swaps a pointer (Glue, the in-memory catalog)
//! checks its own version instead. Pure: no IO.
//!
//! They are the difference of the two documents, not the builder's change list: the writer
//! builds `next` with iceberg's builder, then finishes it outside the builder (the snapshot
//! log without gaps, thinned and expired snapshots removed, `lakemirror.thinned-removals`
//! set: `writer/state/finish.rs`, `with_history`), and starts the builder from a copy whose
//! `last-updated-ms` is moved back (`since_last_snapshot`), so the builder's list says less
//! than what changed. The difference says all of it: schemas, specs and snapshots that are
//! new, snapshots that are gone, properties that changed. Each new snapshot is a change of
//! its own, asserting the one before it on `main`: a REST server keeps each in its snapshot
//! log (a snapshot added and superseded in one commit is dropped from it, and with it
//! `FOR TIMESTAMP AS OF` that version), and every step is a Delta version a reader may see.

use std::collections::{HashMap, HashSet};

use iceberg::TableRequirement;
use iceberg::TableUpdate;
use iceberg::spec::{
    MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadata, UnboundPartitionSpec,
};

/// One change of the table: what must still hold, and what changes (one REST commit).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TableChange {
    pub requirements: Vec<TableRequirement>,
    pub updates: Vec<TableUpdate>,
}

/// Why `next` cannot be reached from `previous` by changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAnUpdate {
    /// `next` is another table (a rebuilt mirror): a new table UUID, which no update assigns
    /// to an existing table.
    NewTable,
}

/// What a commit changes: the metadata as a whole, or typed changes.
#[derive(Debug, Clone, PartialEq)]
pub enum Changes {
    /// The metadata as a whole: no metadata was read (a new table, or one whose metadata
    /// could not be read), or the mirror is another table now (a new UUID, which no update
    /// assigns to an existing table).
    Whole,
    /// The changes that turn the metadata read into the staged one, in order (none: nothing
    /// changed).
    Update(Vec<TableChange>),
}

impl Changes {
    /// The changes from `previous` (the metadata read, if any) to `next`.
    pub fn between(previous: Option<&TableMetadata>, next: &TableMetadata) -> Self {
        match previous.map(|previous| changes(previous, next)) {
            Some(Ok(update)) => Self::Update(update),
            Some(Err(NotAnUpdate::NewTable)) | None => Self::Whole,
        }
    }
}

/// The changes that turn `previous` into `next`, in order; empty when nothing changed.
pub fn changes(
    previous: &TableMetadata,
    next: &TableMetadata,
) -> Result<Vec<TableChange>, NotAnUpdate> {
    if previous.uuid() != next.uuid() {
        return Err(NotAnUpdate::NewTable);
    }
    let first = added_structure(previous, next);
    let mut last = set_state(previous, next);

    let known: HashSet<i64> = previous.snapshots().map(|s| s.snapshot_id()).collect();
    let mut added: Vec<_> = next
        .snapshots()
        .filter(|s| !known.contains(&s.snapshot_id()))
        .collect();
    added.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms()));
    // lakemirror's main branch keeps no retention settings of its own.
    let main_reference = |snapshot_id| TableUpdate::SetSnapshotRef {
        ref_name: MAIN_BRANCH.to_string(),
        reference: SnapshotReference {
            snapshot_id,
            retention: SnapshotRetention::Branch {
                min_snapshots_to_keep: None,
                max_snapshot_age_ms: None,
                max_ref_age_ms: None,
            },
        },
    };
    let mut on_main = previous.current_snapshot_id();
    let mut commits = Vec::new();
    let mut pending = first;
    let count = added.len();
    for (i, snapshot) in added.into_iter().enumerate() {
        let mut updates = std::mem::take(&mut pending);
        updates.push(TableUpdate::AddSnapshot {
            snapshot: snapshot.as_ref().clone(),
        });
        updates.push(main_reference(snapshot.snapshot_id()));
        if i + 1 == count {
            updates.append(&mut last);
        }
        commits.push(TableChange {
            requirements: requirements(previous, on_main),
            updates,
        });
        on_main = Some(snapshot.snapshot_id());
    }
    // No new snapshot: whatever else changed goes in one commit.
    pending.append(&mut last);
    if !pending.is_empty() {
        commits.push(TableChange {
            requirements: requirements(previous, on_main),
            updates: pending,
        });
    }
    Ok(commits)
}

/// What `next` adds before its snapshots: a newer format version, new schemas and new
/// partition specs, in id order.
fn added_structure(previous: &TableMetadata, next: &TableMetadata) -> Vec<TableUpdate> {
    let mut first = Vec::new();
    if next.format_version() > previous.format_version() {
        first.push(TableUpdate::UpgradeFormatVersion {
            format_version: next.format_version(),
        });
    }
    let mut schemas: Vec<_> = next
        .schemas_iter()
        .filter(|s| previous.schema_by_id(s.schema_id()).is_none())
        .collect();
    schemas.sort_by_key(|s| s.schema_id());
    first.extend(schemas.into_iter().map(|schema| TableUpdate::AddSchema {
        schema: schema.as_ref().clone(),
    }));
    let mut specs: Vec<_> = next
        .partition_specs_iter()
        .filter(|s| previous.partition_spec_by_id(s.spec_id()).is_none())
        .collect();
    specs.sort_by_key(|s| s.spec_id());
    first.extend(specs.into_iter().map(|spec| TableUpdate::AddSpec {
        spec: UnboundPartitionSpec::from(spec.as_ref().clone()),
    }));
    first
}

/// What `next` sets after its snapshots: the current schema and default spec, the snapshots
/// it no longer keeps, its properties and location.
fn set_state(previous: &TableMetadata, next: &TableMetadata) -> Vec<TableUpdate> {
    let mut last = Vec::new();
    if next.current_schema_id() != previous.current_schema_id() {
        last.push(TableUpdate::SetCurrentSchema {
            schema_id: next.current_schema_id(),
        });
    }
    if next.default_partition_spec_id() != previous.default_partition_spec_id() {
        last.push(TableUpdate::SetDefaultSpec {
            spec_id: next.default_partition_spec_id(),
        });
    }
    let kept: HashSet<i64> = next.snapshots().map(|s| s.snapshot_id()).collect();
    let mut removed: Vec<i64> = previous
        .snapshots()
        .map(|s| s.snapshot_id())
        .filter(|id| !kept.contains(id))
        .collect();
    removed.sort_unstable();
    if !removed.is_empty() {
        last.push(TableUpdate::RemoveSnapshots {
            snapshot_ids: removed,
        });
    }
    let changed: HashMap<String, String> = next
        .properties()
        .iter()
        .filter(|(k, v)| previous.properties().get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !changed.is_empty() {
        last.push(TableUpdate::SetProperties { updates: changed });
    }
    let mut dropped: Vec<String> = previous
        .properties()
        .keys()
        .filter(|k| !next.properties().contains_key(*k))
        .cloned()
        .collect();
    dropped.sort();
    if !dropped.is_empty() {
        last.push(TableUpdate::RemoveProperties { removals: dropped });
    }
    if next.location() != previous.location() {
        last.push(TableUpdate::SetLocation {
            location: next.location().to_string(),
        });
    }
    last
}

/// Every commit asserts the table (its UUID) and the snapshot `main` must still point at:
/// the compare-and-swap of a REST catalog. Another writer's commit in between fails ours
/// with 409, and the sync reads again.
fn requirements(previous: &TableMetadata, on_main: Option<i64>) -> Vec<TableRequirement> {
    vec![
        TableRequirement::UuidMatch {
            uuid: previous.uuid(),
        },
        TableRequirement::RefSnapshotIdMatch {
            r#ref: MAIN_BRANCH.to_string(),
            snapshot_id: on_main,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::TableMetadataBuilder;

    /// A metadata with `snapshots` (id, sequence number, timestamp) on main, and properties.
    fn metadata(
        snapshots: &[(i64, i64, i64)],
        schemas: usize,
        properties: &[(&str, &str)],
    ) -> TableMetadata {
        let schema = |id: usize| {
            let fields: Vec<serde_json::Value> = (1..=id + 1)
                .map(|f| serde_json::json!({"id": f, "name": format!("c{f}"), "required": false, "type": "long"}))
                .collect();
            serde_json::json!({"type": "struct", "schema-id": id, "fields": fields})
        };
        let snapshot_list: Vec<serde_json::Value> = snapshots
            .iter()
            .enumerate()
            .map(|(i, (id, seq, ts))| {
                let mut s = serde_json::json!({
                    "snapshot-id": id, "sequence-number": seq, "timestamp-ms": ts,
                    "manifest-list": format!("file:///t/metadata/snap-{id}.avro"),
                    "summary": {"operation": "append"}, "schema-id": 0,
                });
                if i > 0 {
                    s["parent-snapshot-id"] = snapshots[i - 1].0.into();
                }
                s
            })
            .collect();
        let last = snapshots.last();
        let mut json = serde_json::json!({
            "format-version": 2,
            "table-uuid": "8e1a0f9c-0000-4000-8000-000000000000",
            "location": "file:///t",
            "last-sequence-number": last.map_or(0, |s| s.1),
            "last-updated-ms": last.map_or(0, |s| s.2),
            "last-column-id": schemas,
            "current-schema-id": schemas - 1,
            "schemas": (0..schemas).map(schema).collect::<Vec<_>>(),
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": properties.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect::<serde_json::Map<_, _>>(),
            "snapshots": snapshot_list,
            "snapshot-log": snapshots.iter().map(|(id, _, ts)| serde_json::json!({"snapshot-id": id, "timestamp-ms": ts})).collect::<Vec<_>>(),
        });
        if let Some((id, _, _)) = last {
            json["current-snapshot-id"] = (*id).into();
            json["refs"] = serde_json::json!({"main": {"snapshot-id": id, "type": "branch"}});
        }
        serde_json::from_value(json).unwrap()
    }

    /// `previous` after the server applied `commits`, each checked against its requirements.
    fn applied(previous: &TableMetadata, commits: Vec<TableChange>) -> TableMetadata {
        let mut current = previous.clone();
        for commit in commits {
            for requirement in &commit.requirements {
                requirement.check(Some(&current)).unwrap();
            }
            let mut builder = TableMetadataBuilder::new_from_metadata(current, None);
            for update in commit.updates {
                builder = update.apply(builder).unwrap();
            }
            current = builder.build().unwrap().metadata;
        }
        current
    }

    #[test]
    fn new_snapshots_are_one_commit_each_and_the_rest_rides_on_the_last() {
        let previous = metadata(&[(1, 1, 1_000)], 1, &[("a", "1"), ("gone", "x")]);
        let next = metadata(
            &[(2, 2, 2_000), (3, 3, 3_000), (4, 4, 4_000)],
            2,
            &[("a", "2"), ("b", "3")],
        );
        let commits = changes(&previous, &next).unwrap();
        assert_eq!(commits.len(), 3);
        let on_main: Vec<_> = commits
            .iter()
            .map(|c| match &c.requirements[1] {
                TableRequirement::RefSnapshotIdMatch { snapshot_id, .. } => *snapshot_id,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(on_main, [Some(1), Some(2), Some(3)]);
        assert!(matches!(
            commits[0].updates[0],
            TableUpdate::AddSchema { .. }
        ));
        let result = applied(&previous, commits);
        let ids: Vec<i64> = result
            .snapshots()
            .map(|s| s.snapshot_id())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(ids, [2, 3, 4]);
        assert_eq!(result.current_snapshot_id(), Some(4));
        assert_eq!(result.current_schema_id(), 1);
        assert_eq!(result.current_schema(), next.current_schema());
        assert_eq!(result.properties(), next.properties());
        // Each snapshot was committed on its own: the server's log holds every one kept.
        let log: Vec<i64> = result.history().iter().map(|e| e.snapshot_id).collect();
        assert_eq!(log, [2, 3, 4]);
    }

    #[test]
    fn a_first_snapshot_asserts_main_is_absent_and_nothing_changed_is_no_commit() {
        let empty = metadata(&[], 1, &[]);
        let next = metadata(&[(7, 1, 1_000)], 1, &[]);
        let commits = changes(&empty, &next).unwrap();
        assert_eq!(
            commits[0].requirements[1],
            TableRequirement::RefSnapshotIdMatch {
                r#ref: "main".into(),
                snapshot_id: None
            }
        );
        assert_eq!(applied(&empty, commits).current_snapshot_id(), Some(7));
        assert_eq!(super::changes(&next, &next).unwrap(), Vec::new());
    }

    #[test]
    fn properties_alone_are_one_commit_and_a_new_table_is_refused() {
        let previous = metadata(&[(1, 1, 1_000)], 1, &[("a", "1")]);
        let next = metadata(&[(1, 1, 1_000)], 1, &[("a", "2")]);
        let commits = changes(&previous, &next).unwrap();
        assert_eq!(commits.len(), 1);
        assert_eq!(applied(&previous, commits).properties(), next.properties());
        let mut json = serde_json::to_value(&next).unwrap();
        json["table-uuid"] = "8e1a0f9c-0000-4000-8000-000000000001".into();
        let rebuilt: TableMetadata = serde_json::from_value(json).unwrap();
        assert_eq!(
            super::changes(&previous, &rebuilt),
            Err(NotAnUpdate::NewTable)
        );
    }

    #[test]
    fn a_stale_commit_fails_its_requirement() {
        let previous = metadata(&[(1, 1, 1_000)], 1, &[]);
        let moved_on = metadata(&[(1, 1, 1_000), (9, 2, 2_000)], 1, &[]);
        let next = metadata(&[(1, 1, 1_000), (2, 2, 2_000)], 1, &[]);
        let commits = changes(&previous, &next).unwrap();
        assert!(
            commits[0]
                .requirements
                .iter()
                .any(|r| r.check(Some(&moved_on)).is_err())
        );
    }
}
