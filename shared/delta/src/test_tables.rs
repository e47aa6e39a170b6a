//! Delta tables written by hand, for tests without Spark: commit files of `protocol`,
//! `metaData`, `add` and `remove` actions as JSON lines, and JSON (v2) checkpoints, into any
//! [`TableStorage`] (an in-memory one, usually). Data files are not written: every `add` says
//! its `numRecords`, so nothing reads them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use lakemirror_storage::TableStorage;
use serde_json::{Value, json};

/// `protocol` of reader version 1, writer version 2.
pub fn protocol() -> Value {
    json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
}

/// `protocol` of reader version 3 with `reader_features`.
pub fn protocol_with_reader_features(reader_features: &[&str]) -> Value {
    json!({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                        "readerFeatures": reader_features, "writerFeatures": reader_features}})
}

/// `metaData` of table `id`: `columns` as (name, Delta primitive type), nullable, and
/// `partition_columns`.
pub fn metadata(id: &str, columns: &[(&str, &str)], partition_columns: &[&str]) -> Value {
    let fields: Vec<Value> = columns
        .iter()
        .map(|(name, ty)| json!({"name": name, "type": ty, "nullable": true, "metadata": {}}))
        .collect();
    let schema = json!({"type": "struct", "fields": fields}).to_string();
    json!({"metaData": {"id": id, "format": {"provider": "parquet", "options": {}},
                        "schemaString": schema, "partitionColumns": partition_columns,
                        "configuration": {}, "createdTime": 1_700_000_000_000_i64}})
}

/// `add` of `path` (relative, URI-encoded) with `records` rows.
pub fn add(path: &str, records: u64, partition_values: &[(&str, &str)]) -> Value {
    let partition_values: serde_json::Map<String, Value> = partition_values
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"add": {"path": path, "partitionValues": partition_values, "size": 1000 + records,
                   "modificationTime": 1_700_000_000_000_i64, "dataChange": true,
                   "stats": json!({"numRecords": records}).to_string()}})
}

/// `commitInfo` of a commit made at `timestamp_ms`.
pub fn commit_info(timestamp_ms: i64) -> Value {
    json!({"commitInfo": {"timestamp": timestamp_ms, "operation": "WRITE"}})
}

/// `remove` of `path`, removed now (a removal long past would let VACUUM delete the file,
/// and the snapshots before it expire at once).
pub fn remove(path: &str) -> Value {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    json!({"remove": {"path": path, "deletionTimestamp": now, "dataChange": true}})
}

/// `_delta_log/<version>.json` holding `actions`, one per line.
pub async fn write_commit(table: &TableStorage, version: i64, actions: &[Value]) {
    let text: String = actions.iter().map(|a| format!("{a}\n")).collect();
    table
        .put(
            &table.location(&format!("_delta_log/{version:020}.json")),
            text.into(),
        )
        .await
        .unwrap();
}

/// A JSON v2 checkpoint at `version` holding `actions` (the table's protocol, metadata and
/// live adds), and `_last_checkpoint` naming it.
pub async fn write_checkpoint(table: &TableStorage, version: i64, actions: &[Value]) {
    let mut lines = vec![json!({"checkpointMetadata": {"version": version}})];
    lines.extend(actions.iter().cloned());
    let text: String = lines.iter().map(|a| format!("{a}\n")).collect();
    let name =
        format!("_delta_log/{version:020}.checkpoint.8e1a0f9c-0000-4000-8000-000000000000.json");
    table
        .put(&table.location(&name), text.into())
        .await
        .unwrap();
    let hint = json!({"version": version, "size": actions.len()}).to_string();
    table
        .put(&table.location("_delta_log/_last_checkpoint"), hint.into())
        .await
        .unwrap();
}

/// Deletes `_delta_log/<version>.json` (log cleanup after a checkpoint).
pub async fn delete_commit(table: &TableStorage, version: i64) {
    table
        .delete(&table.location(&format!("_delta_log/{version:020}.json")))
        .await
        .unwrap();
}

/// An inline deletion vector (`storageType` "i") deleting the rows at `deleted`.
pub fn inline_deletion_vector(deleted: &[u64]) -> crate::deletion_vector::DeletionVector {
    let bitmap: roaring::RoaringTreemap = deleted.iter().copied().collect();
    let mut data = crate::deletion_vector::MAGIC.to_le_bytes().to_vec();
    bitmap.serialize_into(&mut data).unwrap();
    let size = data.len() as i64;
    while !data.len().is_multiple_of(4) {
        data.push(0);
    }
    crate::deletion_vector::DeletionVector {
        storage_type: "i".to_string(),
        path_or_inline_dv: z85::encode(&data),
        offset: None,
        size_in_bytes: size,
        cardinality: deleted.len() as i64,
    }
}
