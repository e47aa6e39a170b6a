//! The writer against the in-memory store: plans in, metadata written, and what was written
//! read back through the manifests (not through the writer's own state).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, FormatVersion, NestedField, Operation, PrimitiveType, Schema,
    Struct, Type,
};
use lakemirror_delta::test_tables::inline_deletion_vector;
use lakemirror_plan::properties::BUCKETS_PROPERTY;
use lakemirror_plan::{CommittedTable, PlannedFile, SnapshotPlan};
use lakemirror_storage::{IoCounters, ObjectStores};

use super::manifests::read_live_files;
use super::*;

const TABLE: &str = "s3://lake/orders";

fn writer(format_version: FormatVersion) -> MetadataWriter {
    let stores = ObjectStores::in_memory();
    let counters = Arc::new(IoCounters::default());
    let data = stores.open(TABLE, counters.clone()).unwrap();
    let metadata = stores
        .open(&data.location("_lakemirror/iceberg"), counters)
        .unwrap();
    MetadataWriter::new(metadata, data).with_format_version(format_version)
}

fn file(n: usize, records: u64) -> PlannedFile {
    PlannedFile {
        location: format!("{TABLE}/part-{n:05}.parquet"),
        partition: Struct::empty(),
        size: 1000,
        record_count: Some(records),
        deletion_vector: None,
        metrics: Default::default(),
        first_row_id: None,
        data_sequence_number: None,
    }
}

fn plan(version: i64, added: Vec<PlannedFile>, removed: Vec<String>) -> SnapshotPlan {
    SnapshotPlan {
        delta_version: version,
        commit_timestamp_ms: 1_700_000_000_000 + version * 1000,
        operation: if removed.is_empty() {
            Operation::Append
        } else {
            Operation::Overwrite
        },
        added,
        removed,
        ..SnapshotPlan::default()
    }
}

fn bootstrap(added: Vec<PlannedFile>) -> SnapshotPlan {
    let schema = Schema::builder()
        .with_fields(vec![
            NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
        ])
        .build()
        .unwrap();
    SnapshotPlan {
        schema: Some(schema),
        replace_all: true,
        ..plan(0, added, Vec::new())
    }
}

async fn stage(
    writer: &MetadataWriter,
    current: Option<&CommittedTable>,
    plan: SnapshotPlan,
) -> CommittedTable {
    writer.stage(current, vec![plan]).await.unwrap().table
}

/// The live entries of the table's current snapshot, as its manifests hold them.
async fn live(writer: &MetadataWriter, table: &CommittedTable) -> Vec<DataFile> {
    let snapshot = table.metadata.current_snapshot().unwrap();
    writer
        .live_files_of(&table.metadata, snapshot)
        .await
        .unwrap()
}

fn summary(table: &CommittedTable, key: &str) -> String {
    let snapshot = table.metadata.current_snapshot().unwrap();
    snapshot.summary().additional_properties[key].clone()
}

#[tokio::test]
async fn rebucketing_keeps_each_file_once() {
    let writer = writer(FormatVersion::V2);
    let table = stage(&writer, None, bootstrap(vec![file(0, 1)])).await;
    assert_eq!(table.metadata.properties()[BUCKETS_PROPERTY], "1");
    // 2,001 files in one bucket of 1,000: the buckets grow, every file moves.
    let added = (1..=2000).map(|n| file(n, 1)).collect();
    let table = stage(&writer, Some(&table), plan(1, added, Vec::new())).await;
    let buckets: u32 = table.metadata.properties()[BUCKETS_PROPERTY]
        .parse()
        .unwrap();
    assert!(buckets > 1, "{buckets} buckets");
    let files = live(&writer, &table).await;
    let locations: HashSet<&str> = files.iter().map(|f| f.file_path()).collect();
    assert_eq!(files.len(), 2001, "every file once");
    assert_eq!(locations.len(), 2001);
    assert_eq!(summary(&table, "total-data-files"), "2001");
    // Removing files of every bucket after the move leaves the rest, once each.
    let removed = (0..500).map(|n| file(n * 4, 1).location).collect();
    let table = stage(&writer, Some(&table), plan(2, vec![file(5000, 1)], removed)).await;
    let files = live(&writer, &table).await;
    let locations: HashSet<&str> = files.iter().map(|f| f.file_path()).collect();
    assert_eq!((files.len(), locations.len()), (1502, 1502));
    assert!(!locations.contains(file(0, 1).location.as_str()));
    assert!(locations.contains(file(1, 1).location.as_str()));
    assert_eq!(summary(&table, "total-data-files"), "1502");
}

#[tokio::test]
async fn a_changed_deletion_vector_retires_the_old_delete_file_in_the_same_snapshot() {
    for format_version in [FormatVersion::V2, FormatVersion::V3] {
        let writer = writer(format_version);
        let with_deletes = |deleted: &[u64]| PlannedFile {
            deletion_vector: Some(inline_deletion_vector(deleted)),
            ..file(1, 100)
        };
        let table = stage(
            &writer,
            None,
            bootstrap(vec![file(0, 10), with_deletes(&[1, 2])]),
        )
        .await;
        let deletes = |files: &[DataFile]| -> Vec<(String, u64)> {
            files
                .iter()
                .filter(|f| f.content_type() == DataContentType::PositionDeletes)
                .map(|f| (f.file_path().to_string(), f.record_count()))
                .collect()
        };
        let first = deletes(&live(&writer, &table).await);
        assert_eq!(first.len(), 1, "{format_version:?}");
        assert_eq!(first[0].1, 2);
        // Delta rewrites the file's deletion vector: remove and add of the same path.
        let changed = plan(
            1,
            vec![with_deletes(&[1, 2, 3])],
            vec![file(1, 100).location],
        );
        let table = stage(&writer, Some(&table), changed).await;
        let files = live(&writer, &table).await;
        let second = deletes(&files);
        assert_eq!(
            second.len(),
            1,
            "{format_version:?}: the old delete file is gone"
        );
        assert_eq!(second[0].1, 3);
        assert_ne!(second[0].0, first[0].0);
        let data = files
            .iter()
            .filter(|f| f.content_type() == DataContentType::Data)
            .count();
        assert_eq!(data, 2, "each data file once");
        assert_eq!(summary(&table, "removed-delete-files"), "1");
        assert_eq!(summary(&table, "added-delete-files"), "1");
        assert_eq!(summary(&table, "total-delete-files"), "1");
        assert_eq!(summary(&table, "total-position-deletes"), "3");
    }
}

#[tokio::test]
async fn v3_row_ids_carry_over() {
    let writer = writer(FormatVersion::V3);
    let table = stage(&writer, None, bootstrap(vec![file(0, 10), file(1, 20)])).await;
    assert_eq!(table.metadata.next_row_id(), 30);
    let table = stage(&writer, Some(&table), plan(1, vec![file(2, 5)], Vec::new())).await;
    let snapshot = table.metadata.current_snapshot().unwrap();
    assert_eq!(snapshot.first_row_id(), Some(30));
    // The rewritten bucket's manifest takes the next range for all its rows.
    assert_eq!(table.metadata.next_row_id(), 30 + 35);
    let manifests = writer
        .manifests_of(snapshot.manifest_list(), &table.metadata)
        .await
        .unwrap()
        .unwrap();
    let mut first_row_ids = BTreeMap::new();
    for manifest in &manifests {
        for live in read_live_files(&writer, manifest).await.unwrap() {
            first_row_ids.insert(live.data_file.file_path().to_string(), live.first_row_id);
        }
    }
    let id = |n: usize| first_row_ids[&file(n, 0).location];
    assert_eq!(
        (id(0), id(1), id(2)),
        (Some(0), Some(10), Some(30)),
        "the files of the first snapshot keep their row IDs; the new one starts the new range"
    );
}

#[test]
fn snapshot_ids_are_positive() {
    assert!((0..1000).all(|_| new_snapshot_id() > 0));
}

#[tokio::test]
async fn a_replaced_snapshot_leaves_the_totals_and_counts_as_removed() {
    let writer = writer(FormatVersion::V2);
    let with_deletes = PlannedFile {
        deletion_vector: Some(inline_deletion_vector(&[0, 1, 2])),
        ..file(1, 20)
    };
    let table = stage(&writer, None, bootstrap(vec![file(0, 10), with_deletes])).await;
    assert_eq!(summary(&table, "total-delete-files"), "1");
    // The whole table at a version, as after commits cleaned up while the mirror was behind.
    let replace = SnapshotPlan {
        replace_all: true,
        ..plan(5, vec![file(2, 7)], Vec::new())
    };
    let table = stage(&writer, Some(&table), replace).await;
    let files = live(&writer, &table).await;
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].file_path(), file(2, 7).location);
    for (key, value) in [
        ("added-data-files", "1"),
        ("added-records", "7"),
        ("deleted-data-files", "2"),
        ("deleted-records", "30"),
        ("removed-delete-files", "1"),
        ("removed-position-deletes", "3"),
        ("total-data-files", "1"),
        ("total-records", "7"),
        ("total-delete-files", "0"),
        ("total-position-deletes", "0"),
    ] {
        assert_eq!(summary(&table, key), value, "{key}");
    }
}

/// The live data files of the current snapshot with their sequence numbers and first row IDs,
/// by location.
async fn lineage(
    writer: &MetadataWriter,
    table: &CommittedTable,
) -> BTreeMap<String, (i64, i64, Option<i64>)> {
    let snapshot = table.metadata.current_snapshot().unwrap();
    let (bytes, _) = writer
        .metadata_store
        .get(snapshot.manifest_list())
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for manifest in writer
        .own_manifests(&bytes, table.metadata.format_version())
        .unwrap()
    {
        if manifest.content != iceberg::spec::ManifestContentType::Data {
            continue;
        }
        assert!(
            manifest.first_row_id.is_some(),
            "Java drops the files' own IDs without one"
        );
        for live in read_live_files(writer, &manifest).await.unwrap() {
            out.insert(
                live.data_file.file_path().to_string(),
                (
                    live.sequence_number,
                    live.file_sequence_number,
                    live.first_row_id,
                ),
            );
        }
    }
    out
}

#[tokio::test]
async fn deltas_row_tracking_becomes_row_lineage_with_its_row_ids_and_commit_versions() {
    let writer = writer(FormatVersion::V3);
    let tracked = |n: usize, records: u64, base: i64, committed: i64| PlannedFile {
        first_row_id: Some(base),
        data_sequence_number: Some(committed),
        ..file(n, records)
    };
    // Version 5 of a table whose files came in at versions 2 and 5.
    let first = SnapshotPlan {
        delta_version: 5,
        row_lineage: Some(lakemirror_plan::snapshot::RowLineage {
            high_water_mark: 19,
        }),
        ..bootstrap(vec![tracked(0, 10, 0, 2), tracked(1, 5, 10, 5)])
    };
    let table = stage(&writer, None, first).await;
    let snapshot = table.metadata.current_snapshot().unwrap();
    assert_eq!(
        snapshot.sequence_number(),
        5,
        "the sequence number is the Delta version"
    );
    assert_eq!(
        table.metadata.next_row_id(),
        20,
        "one past Delta's high-water mark"
    );
    let files = lineage(&writer, &table).await;
    assert_eq!(files[&file(0, 10).location], (2, 2, Some(0)));
    assert_eq!(files[&file(1, 5).location], (5, 5, Some(10)));
    // Version 7 adds a file and drops one; the kept file keeps its row IDs and version.
    let next = SnapshotPlan {
        row_lineage: Some(lakemirror_plan::snapshot::RowLineage {
            high_water_mark: 22,
        }),
        ..plan(7, vec![tracked(2, 3, 20, 7)], vec![file(1, 5).location])
    };
    let table = stage(&writer, Some(&table), next).await;
    assert_eq!(
        table.metadata.current_snapshot().unwrap().sequence_number(),
        7
    );
    assert_eq!(table.metadata.next_row_id(), 23);
    let files = lineage(&writer, &table).await;
    assert_eq!(files.len(), 2);
    assert_eq!(files[&file(0, 10).location], (2, 2, Some(0)));
    assert_eq!(files[&file(2, 3).location], (7, 7, Some(20)));
    assert_eq!(
        table
            .metadata
            .properties()
            .get(lakemirror_plan::properties::ROW_LINEAGE_PROPERTY)
            .map(String::as_str),
        Some("true")
    );
}
