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

/// A catalog-managed table's first commit: `protocol` with `catalogManaged`, and `metaData`
/// naming catalog table id `catalog_id`.
pub fn catalog_managed_commit(
    table_id: &str,
    catalog_id: &str,
    columns: &[(&str, &str)],
) -> Vec<Value> {
    let mut metadata = metadata(table_id, columns, &[]);
    metadata["metaData"]["configuration"] = json!({
        "delta.enableInCommitTimestamps": "true",
        "io.unitycatalog.tableId": catalog_id,
    });
    vec![
        commit_info(1_700_000_000_000),
        protocol_with_reader_features(&["catalogManaged", "vacuumProtocolCheck"]),
        metadata,
    ]
}

/// `_delta_log/_staged_commits/<version>.<uuid>.json` holding `actions`, as a writer stages a
/// commit for its catalog; answers the commit as the catalog would list it.
pub async fn write_staged(
    table: &TableStorage,
    version: i64,
    uuid: &str,
    actions: &[Value],
) -> crate::catalog_managed::RatifiedCommit {
    let text: String = actions.iter().map(|a| format!("{a}\n")).collect();
    let file_name = format!("{version:020}.{uuid}.json");
    let size = text.len() as u64;
    table
        .put(
            &table.location(&format!("_delta_log/_staged_commits/{file_name}")),
            text.into(),
        )
        .await
        .unwrap();
    crate::catalog_managed::RatifiedCommit {
        version,
        file_name,
        size,
        modified_ms: 1_700_000_000_000 + version,
    }
}

/// A commit catalog kept in memory, for one table: what it ratified, and whether it answers.
#[derive(Debug, Default)]
pub struct InMemoryCommitCatalog {
    state: std::sync::Mutex<CatalogState>,
}

#[derive(Debug, Default)]
struct CatalogState {
    /// (table id, storage location) -> the newest ratified version and the commits listed.
    tables: std::collections::HashMap<
        String,
        (String, i64, Vec<crate::catalog_managed::RatifiedCommit>),
    >,
    down: bool,
    asked: u64,
    /// The names it was told ([`crate::catalog_managed::CommitCatalog::known_as`]).
    known_as: Vec<(String, String)>,
}

impl InMemoryCommitCatalog {
    /// A table `table_id` stored at `location`, with only version 0 (published) so far.
    pub fn create(&self, table_id: &str, location: &str) {
        let mut state = self.state.lock().unwrap();
        state
            .tables
            .insert(table_id.into(), (location.into(), 0, Vec::new()));
    }

    /// Ratifies `commit` as its version: the next one, as a catalog does.
    pub fn ratify(&self, table_id: &str, commit: crate::catalog_managed::RatifiedCommit) {
        let mut state = self.state.lock().unwrap();
        let (_, latest, commits) = state.tables.get_mut(table_id).unwrap();
        assert_eq!(
            commit.version,
            *latest + 1,
            "a catalog ratifies the next version only"
        );
        *latest = commit.version;
        commits.push(commit);
    }

    /// Forgets the commits up to `version`: they were published and the catalog was told.
    pub fn published(&self, table_id: &str, version: i64) {
        let mut state = self.state.lock().unwrap();
        let (_, _, commits) = state.tables.get_mut(table_id).unwrap();
        commits.retain(|c| c.version > version);
    }

    /// Makes the catalog unreachable (true) or reachable again.
    pub fn set_down(&self, down: bool) {
        self.state.lock().unwrap().down = down;
    }

    /// How many times it was asked.
    pub fn asked(&self) -> u64 {
        self.state.lock().unwrap().asked
    }

    /// The name it gives table `table_id` in its answers.
    pub fn name_of(table_id: &str) -> String {
        format!("memory.tables.{table_id}")
    }

    /// The (table id, name) hints it was given, in order.
    pub fn known_as(&self) -> Vec<(String, String)> {
        self.state.lock().unwrap().known_as.clone()
    }
}

#[async_trait::async_trait]
impl crate::catalog_managed::CommitCatalog for InMemoryCommitCatalog {
    fn describe(&self) -> String {
        "the in-memory catalog".into()
    }

    async fn ratified(
        &self,
        table_id: &str,
        table_root: &str,
    ) -> Result<crate::catalog_managed::Ratified, crate::catalog_managed::CatalogError> {
        use crate::catalog_managed::{CatalogError, Ratified};
        let mut state = self.state.lock().unwrap();
        state.asked += 1;
        if state.down {
            return Err(CatalogError::Unavailable(
                "the in-memory catalog is down".into(),
            ));
        }
        let Some((location, latest, commits)) = state.tables.get(table_id) else {
            return Err(CatalogError::Refused(format!("no table of id {table_id}")));
        };
        if location != table_root {
            return Err(CatalogError::Refused(format!(
                "table id {table_id} is kept at {location}, not at {table_root}"
            )));
        }
        Ratified::new(self.describe(), table_id.into(), *latest, commits.clone())
            .map(|r| r.named(Some(Self::name_of(table_id))))
            .map_err(CatalogError::Refused)
    }

    fn known_as(&self, table_id: &str, _table_root: &str, name: &str) {
        let mut state = self.state.lock().unwrap();
        state.known_as.push((table_id.into(), name.into()));
    }
}
