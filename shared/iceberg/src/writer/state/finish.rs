//! Finishing the table: the metadata file written with the history thinned and expired as
//! the policy and Delta's retention say.

use std::collections::{BTreeMap, HashMap, HashSet};

use bytes::Bytes;
use iceberg::spec::{MAIN_BRANCH, Snapshot, TableMetadata};

use lakemirror_plan::CommittedTable;
use lakemirror_plan::expiry::{expirable, lakemirror_history};
use lakemirror_plan::history::{
    THINNED_REMOVALS_PROPERTY, carried_removals, gapless_tail, recorded_removals, thinned,
};
use lakemirror_plan::name_mapping::name_mapping;
use lakemirror_plan::properties::*;
use lakemirror_runtime::crash;

use crate::error::Result;
use crate::writer::*;

use super::TableState;

impl TableState {
    /// Writes the metadata file with `snapshots` written, the history thinned and expired
    /// as the policy and Delta's retention say.
    pub(in crate::writer) async fn finish(
        mut self,
        writer: &MetadataWriter,
        snapshots: Vec<SnapshotOutcome>,
    ) -> Result<StagedTable> {
        self.properties
            .insert(BUCKETS_PROPERTY.to_string(), self.bucket_count.to_string());
        if !self
            .properties
            .contains_key(iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING)
        {
            let mapping = name_mapping(None, &self.schema, &HashMap::new(), &HashSet::new());
            self.properties.insert(
                iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING.to_string(),
                serde_json::to_string(&mapping)?,
            );
        }
        let retention = self
            .properties
            .get(RETENTION_PROPERTY)
            .and_then(|r| r.parse().ok())
            .unwrap_or(lakemirror_delta::actions::DEFAULT_DELETED_FILE_RETENTION_MS);
        // Iceberg's own bound on the metadata log; the files that fall off it are deleted
        // after the commit, as Java does with delete-after-commit.
        for (key, default) in [
            (METADATA_VERSIONS_MAX, METADATA_VERSIONS_MAX_DEFAULT),
            (METADATA_DELETE_AFTER_COMMIT, "true"),
        ] {
            self.properties
                .entry(key.to_string())
                .or_insert_with(|| default.to_string());
        }
        // Properties dropped in this run (metrics modes of columns that are gone).
        let dropped: Vec<String> = self
            .loaded_properties
            .iter()
            .filter(|k| !self.properties.contains_key(*k))
            .cloned()
            .collect();
        let built = self
            .take_builder()?
            .remove_properties(&dropped)?
            .set_properties(self.properties)?
            .build()?;
        let metadata = built.metadata;
        let delete_after_commit = metadata
            .properties()
            .get(METADATA_DELETE_AFTER_COMMIT)
            .is_none_or(|v| v.eq_ignore_ascii_case("true"));
        let mut removed_files: Vec<String> = built
            .expired_metadata_logs
            .into_iter()
            .map(|log| log.metadata_file)
            .filter(|file| delete_after_commit && writer.metadata_store.contains(file))
            .collect();
        let policy = writer
            .history
            .overridden_by(metadata.properties())
            .unwrap_or_else(|reason| {
                tracing::warn!(%reason, "the mirror's lakemirror.history.* properties are unreadable; keeping history as the deployment says");
                writer.history
            });
        let removal = match lakemirror_history(&metadata) {
            Some(history) => {
                let now = chrono::Utc::now().timestamp_millis();
                let expired = expirable(&history, metadata.properties(), now, retention);
                let thinned = thinned(&history, &policy, &expired);
                let removed: HashSet<i64> = expired.iter().chain(&thinned).copied().collect();
                if removed.is_empty() {
                    None
                } else {
                    removed_files
                        .extend(writer.removed_files(&metadata, &history, &removed).await?);
                    let carried = carried_removals(
                        &history,
                        &removed,
                        &recorded_removals(metadata.properties()),
                    );
                    Some((expired, thinned, removed, carried))
                }
            }
            None => None,
        };
        let (metadata, expired, thinned) = match removal {
            Some((expired, thinned, removed, carried)) => (
                with_history(metadata, &removed, Some(&carried))?,
                expired,
                thinned,
            ),
            None => (
                with_history(metadata, &HashSet::new(), None)?,
                Vec::new(),
                Vec::new(),
            ),
        };
        let location = writer.metadata_location(&format!(
            "{:05}-{}.metadata.json",
            metadata.last_sequence_number(),
            uuid::Uuid::new_v4()
        ));
        writer
            .metadata_store
            .put(
                &location,
                Bytes::from(crate::metadata_json::to_bytes(&metadata)?),
            )
            .await?;
        crash::point("mirror-after-metadata");
        Ok(StagedTable {
            table: CommittedTable {
                metadata,
                metadata_location: location,
            },
            snapshots,
            expired_snapshots: expired,
            thinned_snapshots: thinned,
            removed_files,
        })
    }
}

/// The metadata without the `removed` snapshots, its snapshot log listing the kept snapshots
/// of the newest run without a gap ([`gapless_tail`]), and with `carried` as
/// [`THINNED_REMOVALS_PROPERTY`] (None: the property as it is). The builder keeps only the
/// last of the snapshots added in one go in the log (the others were never "current" to
/// it), but each is a Delta version that was current from its commit's time: time travel by
/// timestamp (`FOR TIMESTAMP AS OF`) reads the log.
pub(super) fn with_history(
    metadata: TableMetadata,
    removed: &HashSet<i64>,
    carried: Option<&BTreeMap<i64, i64>>,
) -> Result<TableMetadata> {
    let mut json = serde_json::to_value(&metadata)?;
    let main_only = json
        .get("refs")
        .and_then(|refs| refs.as_object())
        .is_some_and(|refs| refs.keys().all(|name| name == MAIN_BRANCH));
    if !main_only {
        return Ok(metadata);
    }
    let mut snapshots: Vec<&Snapshot> = metadata
        .snapshots()
        .filter(|s| !removed.contains(&s.snapshot_id()))
        .map(|s| s.as_ref())
        .collect();
    snapshots.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms()));
    let log: Vec<serde_json::Value> = gapless_tail(&snapshots)
        .iter()
        .map(|s| serde_json::json!({"timestamp-ms": s.timestamp_ms(), "snapshot-id": s.snapshot_id()}))
        .collect();
    json["snapshot-log"] = log.into();
    if !removed.is_empty()
        && let Some(all) = json.get_mut("snapshots").and_then(|s| s.as_array_mut())
    {
        all.retain(|s| {
            s.get("snapshot-id")
                .and_then(|id| id.as_i64())
                .is_none_or(|id| !removed.contains(&id))
        });
    }
    if let Some(carried) = carried
        && let Some(properties) = json.get_mut("properties").and_then(|p| p.as_object_mut())
    {
        if carried.is_empty() {
            properties.remove(THINNED_REMOVALS_PROPERTY);
        } else {
            let by_id: BTreeMap<String, i64> = carried
                .iter()
                .map(|(id, at)| (id.to_string(), *at))
                .collect();
            properties.insert(
                THINNED_REMOVALS_PROPERTY.to_string(),
                serde_json::to_string(&by_id)?.into(),
            );
        }
    }
    Ok(serde_json::from_value(json)?)
}
