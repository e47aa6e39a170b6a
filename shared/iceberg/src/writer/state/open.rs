//! Opening the table being written: created from the first plan's schema and partitioning,
//! or loaded from its metadata and the manifest list of its current snapshot.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{
    FormatVersion, ManifestContentType, SortOrder, TableMetadata, TableMetadataBuilder, Transform,
    UnboundPartitionSpec,
};

use lakemirror_plan::layout::{Content, bucket_of_manifest};
use lakemirror_plan::metrics::set_metrics_modes;
use lakemirror_plan::partition::partition_field_name;
use lakemirror_plan::properties::*;
use lakemirror_plan::{CommittedTable, SnapshotPlan};

use crate::error::{Error, Result};
use crate::writer::*;

use super::TableState;
use super::definition::set_definition_properties;

impl TableState {
    /// A new table with the first plan's schema and partitioning. The schema is taken out of
    /// the plan: the metadata builder assigns the IDs of a new table itself.
    pub(in crate::writer) fn create(
        writer: &MetadataWriter,
        first: &mut SnapshotPlan,
    ) -> Result<Self> {
        let schema = first
            .schema
            .take()
            .ok_or_else(|| Error::Bug("a new table was planned without a schema".into()))?;
        let mut spec = UnboundPartitionSpec::builder().with_spec_id(0);
        for column in &first.partition_columns {
            let source = schema.field_id_by_name(column).ok_or_else(|| {
                Error::Bug(format!(
                    "partition column {column} is not in the planned schema"
                ))
            })?;
            spec = spec.add_partition_field(
                source,
                partition_field_name(column),
                Transform::Identity,
            )?;
        }
        let table_uri = writer.data_store.root_uri().to_string();
        let mut properties = HashMap::from([
            (DELTA_TABLE_PROPERTY.to_string(), table_uri.clone()),
            (
                "write.metadata.path".to_string(),
                writer.metadata_store.location("metadata"),
            ),
            // The data files are Delta's: no Iceberg maintenance (expire_snapshots,
            // remove_orphan_files, Athena VACUUM) may delete them, as Iceberg's own snapshot
            // and migrate actions do for tables over files they do not own.
            (GC_ENABLED.to_string(), "false".to_string()),
        ]);
        set_definition_properties(&mut properties, first)?;
        set_metrics_modes(&schema, &mut properties);
        // The metadata is assembled, not built: TableMetadataBuilder::new would assign fresh
        // field IDs, and a column-mapped table's IDs must stay Delta's.
        let spec = spec.build().bind(schema.clone())?;
        let format_version = first.format_version.unwrap_or(writer.format_version);
        let mut created = serde_json::json!({
            "format-version": format_version as u8,
            "table-uuid": uuid::Uuid::new_v4().to_string(),
            "location": table_uri,
            "last-sequence-number": 0,
            // Snapshots carry their Delta commit's time, which may be long past: the builder
            // refuses a snapshot older than the metadata's last update.
            "last-updated-ms": 0,
            "last-column-id": schema.highest_field_id(),
            "current-schema-id": schema.schema_id(),
            "schemas": [schema],
            "default-spec-id": spec.spec_id(),
            "partition-specs": [spec],
            "last-partition-id": spec.highest_field_id().unwrap_or(999),
            "default-sort-order-id": 0,
            "sort-orders": [SortOrder::unsorted_order()],
            "properties": properties,
            "snapshots": [],
            "snapshot-log": [],
            "metadata-log": [],
            "refs": {},
        });
        if format_version == FormatVersion::V3 {
            created["next-row-id"] = 0.into();
        }
        let created: TableMetadata = serde_json::from_value(created)?;
        Ok(Self {
            loaded_properties: HashSet::new(),
            format_version,
            next_row_id: 0,
            schema: created.current_schema().clone(),
            schemas: created.schemas_iter().cloned().collect(),
            spec: created.default_partition_spec().clone(),
            properties,
            last_sequence_number: 0,
            last_timestamp_ms: 0,
            parent_snapshot_id: None,
            bucket_count: 1,
            manifests: BTreeMap::new(),
            loaded: HashMap::new(),
            totals: Totals::default(),
            builder: Some(TableMetadataBuilder::new_from_metadata(created, None)),
        })
    }

    pub(in crate::writer) async fn load(
        writer: &MetadataWriter,
        table: &CommittedTable,
    ) -> Result<Self> {
        let m = &table.metadata;
        let mut manifests = BTreeMap::new();
        let mut bucket_count = m
            .properties()
            .get(BUCKETS_PROPERTY)
            .and_then(|b| b.parse().ok())
            .unwrap_or(1u32);
        let mut totals = Totals::default();
        if let Some(snapshot) = m.current_snapshot() {
            let list_location = snapshot.manifest_list();
            writer.own(list_location)?;
            let bytes = writer.read_avro_required(list_location).await?;
            for manifest in writer.own_manifests(&bytes, m.format_version())? {
                let content = match manifest.content {
                    ManifestContentType::Deletes => Content::Deletes,
                    ManifestContentType::Data => Content::Data,
                };
                match bucket_of_manifest(&manifest.manifest_path, content) {
                    Some(bucket) if bucket < bucket_count => {
                        manifests
                            .entry((content, bucket))
                            .or_insert_with(Vec::new)
                            .push(manifest);
                    }
                    // Not our layout (another writer touched the table): one rebuild fixes it.
                    _ => {
                        bucket_count = 0;
                        let key = (content, u32::MAX - manifests.len() as u32);
                        manifests.insert(key, vec![manifest]);
                    }
                }
            }
            totals = Totals::of(&snapshot.summary().additional_properties);
        }
        let mut state = Self {
            builder: Some(TableMetadataBuilder::new_from_metadata(
                since_last_snapshot(m)?,
                Some(table.metadata_location.clone()),
            )),
            schema: m.current_schema().clone(),
            schemas: m.schemas_iter().cloned().collect(),
            spec: m.default_partition_spec().clone(),
            properties: m.properties().clone(),
            loaded_properties: m.properties().keys().cloned().collect(),
            format_version: m.format_version(),
            next_row_id: m.next_row_id(),
            last_sequence_number: m.last_sequence_number(),
            last_timestamp_ms: m.current_snapshot().map_or(0, |s| s.timestamp_ms()),
            parent_snapshot_id: m.current_snapshot().map(|s| s.snapshot_id()),
            bucket_count: bucket_count.max(1),
            manifests,
            loaded: HashMap::new(),
            totals,
        };
        if bucket_count == 0 {
            state.rebucket(writer, None).await?;
        }
        Ok(state)
    }
}

/// The metadata as loaded, with `last-updated-ms` no later than its current snapshot: new
/// snapshots carry their Delta commit's time, which the builder refuses when older than the
/// last update (less a minute), and a mirror written before snapshots took Delta's times
/// was last updated at sync time.
pub(super) fn since_last_snapshot(metadata: &TableMetadata) -> Result<TableMetadata> {
    let Some(current) = metadata.current_snapshot() else {
        return Ok(metadata.clone());
    };
    if metadata.last_updated_ms() <= current.timestamp_ms() {
        return Ok(metadata.clone());
    }
    let mut json = serde_json::to_value(metadata)?;
    json["last-updated-ms"] = current.timestamp_ms().into();
    Ok(serde_json::from_value(json)?)
}
