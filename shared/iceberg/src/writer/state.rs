//! The table being written: created or loaded, each plan applied as one snapshot, the
//! metadata file finished with the history thinned and expired.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    DataFile, FormatVersion, MAIN_BRANCH, ManifestContentType, ManifestFile, ManifestListWriter,
    PartitionSpecRef, SchemaRef, Snapshot, SortOrder, TableMetadata, TableMetadataBuilder,
    Transform, UnboundPartitionSpec,
};

use lakemirror_plan::expiry::{expirable, lakemirror_history};
use lakemirror_plan::history::{
    THINNED_REMOVALS_PROPERTY, carried_removals, gapless_tail, recorded_removals, thinned,
};
use lakemirror_plan::layout::{
    BucketChange, Content, FILES_PER_BUCKET, FanOutPart, LiveFile, bucket_of, bucket_of_manifest,
    buckets_for, change_bucket, referenced_data_file,
};
use lakemirror_plan::metrics::set_metrics_modes;
use lakemirror_plan::name_mapping::name_mapping;
use lakemirror_plan::partition::{PARTITION_TIMEZONE_PROPERTY, partition_field_name};
use lakemirror_plan::properties::*;
use lakemirror_plan::{CommittedTable, SnapshotPlan};
use lakemirror_runtime::crash;

use crate::error::{Error, Result};

use super::lineage::{assign_row_ids, explicit_row_ids};
use super::*;

/// The table being written: metadata builder plus the manifests of the newest snapshot.
pub(super) struct TableState {
    /// Always Some between calls; taken while a builder method consumes it.
    pub(super) builder: Option<TableMetadataBuilder>,
    pub(super) schema: SchemaRef,
    /// Every schema the metadata holds, to find the ID the builder gives a new one.
    pub(super) schemas: Vec<SchemaRef>,
    pub(super) spec: PartitionSpecRef,
    pub(super) properties: HashMap<String, String>,
    /// The property keys the table had when loaded.
    pub(super) loaded_properties: HashSet<String>,
    pub(super) format_version: FormatVersion,
    /// v3 row lineage: the first row ID the next snapshot assigns.
    pub(super) next_row_id: u64,
    pub(super) last_sequence_number: i64,
    pub(super) last_timestamp_ms: i64,
    pub(super) parent_snapshot_id: Option<i64>,
    pub(super) bucket_count: u32,
    /// The manifests of each non-empty bucket in the newest snapshot: the one written when
    /// the bucket was last rewritten, then the append layers written since, oldest first.
    pub(super) manifests: BTreeMap<(Content, u32), Vec<ManifestFile>>,
    /// Live files of buckets read or written in this run.
    pub(super) loaded: HashMap<(Content, u32), Vec<LiveFile>>,
    pub(super) totals: Totals,
}

impl TableState {
    /// A new table with the first plan's schema and partitioning. The schema is taken out of
    /// the plan: the metadata builder assigns the IDs of a new table itself.
    pub(super) fn create(writer: &MetadataWriter, first: &mut SnapshotPlan) -> Result<Self> {
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

    pub(super) async fn load(writer: &MetadataWriter, table: &CommittedTable) -> Result<Self> {
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
            let (bytes, _) = writer.metadata_store.get(list_location).await?;
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

    /// Reads the live files of a bucket (once per run): of its manifest and append layers,
    /// a path the newer layer names again replaces the older entry.
    pub(super) async fn bucket_files(
        &mut self,
        writer: &MetadataWriter,
        bucket: (Content, u32),
    ) -> Result<&mut Vec<LiveFile>> {
        if !self.loaded.contains_key(&bucket) {
            let manifests = self.manifests.get(&bucket).cloned().unwrap_or_default();
            let reads: Vec<_> = manifests
                .iter()
                .map(|m| read_live_files(writer, m))
                .collect();
            let layers = futures::future::try_join_all(reads).await?;
            let files = match layers.len() {
                0 | 1 => layers.into_iter().flatten().collect(),
                _ => newest_entry_per_path(layers.into_iter().flatten()),
            };
            self.loaded.insert(bucket, files);
        }
        self.loaded
            .get_mut(&bucket)
            .ok_or_else(|| Error::CatalogState(format!("bucket {bucket:?} vanished")))
    }

    /// Redistributes every live file over `buckets_for(total)` buckets (or `count`).
    /// A delete file goes to the bucket of the data file it applies to.
    pub(super) async fn rebucket(
        &mut self,
        writer: &MetadataWriter,
        count: Option<u32>,
    ) -> Result<()> {
        let mut all = Vec::new();
        let keys: Vec<(Content, u32)> = self.manifests.keys().copied().collect();
        for key in keys {
            let files = std::mem::take(self.bucket_files(writer, key).await?);
            all.extend(files.into_iter().map(|f| (key.0, f)));
        }
        let data_files = all.iter().filter(|(c, _)| *c == Content::Data).count();
        let count = count.unwrap_or_else(|| buckets_for(data_files));
        self.bucket_count = count;
        self.loaded.clear();
        for (content, file) in all {
            let owner = match content {
                Content::Data => Some(file.data_file.file_path().to_string()),
                Content::Deletes => referenced_data_file(&file.data_file),
            };
            let owner = owner.unwrap_or_else(|| file.data_file.file_path().to_string());
            let bucket = bucket_of(&owner, count);
            self.loaded.entry((content, bucket)).or_default().push(file);
        }
        // Every bucket is rewritten by the next snapshot.
        for bucket in 0..count {
            self.loaded.entry((Content::Data, bucket)).or_default();
            self.loaded.entry((Content::Deletes, bucket)).or_default();
        }
        self.manifests.clear();
        Ok(())
    }

    pub(super) async fn apply(
        &mut self,
        writer: &MetadataWriter,
        mut plan: SnapshotPlan,
    ) -> Result<SnapshotOutcome> {
        let snapshot_id = new_snapshot_id();
        let changed = self
            .write_manifests(writer, &mut plan, snapshot_id, None)
            .await?;
        self.commit_snapshot(writer, &plan, snapshot_id, changed)
            .await
    }

    /// The table's properties and schema as `plan` states them.
    pub(super) async fn take_definition(
        &mut self,
        writer: &MetadataWriter,
        plan: &mut SnapshotPlan,
    ) -> Result<()> {
        writer.complete_record_counts(&mut plan.added).await?;
        if let Some(retention) = plan.deleted_file_retention_ms {
            self.properties
                .insert(RETENTION_PROPERTY.to_string(), retention.to_string());
        }
        set_definition_properties(&mut self.properties, plan)?;
        self.properties
            .insert(GC_ENABLED.to_string(), "false".to_string());
        if let Some(schema) = plan.schema.take() {
            // The builder gives a schema equal to an earlier one that one's ID (a column
            // added and dropped again): snapshots and manifests must name the same ID.
            let schema_id = self
                .schemas
                .iter()
                .find(|known| {
                    known.as_struct() == schema.as_struct()
                        && known
                            .identifier_field_ids()
                            .eq(schema.identifier_field_ids())
                })
                .map_or_else(
                    || {
                        self.schemas
                            .iter()
                            .map(|s| s.schema_id())
                            .max()
                            .unwrap_or(-1)
                            + 1
                    },
                    |known| known.schema_id(),
                );
            let schema = Arc::new(schema.into_builder().with_schema_id(schema_id).build()?);
            set_metrics_modes(&schema, &mut self.properties);
            self.builder = Some(
                self.take_builder()?
                    .add_current_schema(schema.as_ref().clone())?,
            );
            if !self.schemas.iter().any(|s| s.schema_id() == schema_id) {
                self.schemas.push(schema.clone());
            }
            self.schema = schema;
        }
        Ok(())
    }

    /// Writes the bucket manifests `plan` changes (with `part`, only the buckets that part
    /// owns, of a table replaced in `part.buckets` buckets) and answers what changed.
    pub(super) async fn write_manifests(
        &mut self,
        writer: &MetadataWriter,
        plan: &mut SnapshotPlan,
        snapshot_id: i64,
        part: Option<&FanOutPart>,
    ) -> Result<Changed> {
        self.take_definition(writer, plan).await?;
        let sequence_number = self.next_sequence_number(plan);
        // Row lineage: a file keeps the data sequence number of the version that first
        // committed it, which its rows' `_last_updated_sequence_number` reads.
        let data_sequence_numbers: HashMap<String, i64> = plan
            .added
            .iter()
            .filter_map(|f| Some((f.location.clone(), f.data_sequence_number?)))
            .collect();
        let mut changed = Changed {
            added: Counts::new(
                plan.added.len() as u64,
                plan.added.iter().filter_map(|f| f.record_count).sum(),
            ),
            ..Changed::default()
        };

        let mut rewritten: BTreeMap<(Content, u32), BucketChange> = BTreeMap::new();
        // Files leaving: the whole previous snapshot when it is replaced (taken out of the
        // totals here), else the entries deleted from the buckets below (still in them).
        if plan.replace_all {
            let count = part.map_or_else(|| buckets_for(plan.added.len()), |p| p.buckets);
            self.bucket_count = count;
            self.manifests.clear();
            self.loaded = (0..count)
                .filter(|b| part.is_none_or(|p| p.owns_bucket(*b)))
                .flat_map(|b| {
                    [
                        ((Content::Data, b), Vec::new()),
                        ((Content::Deletes, b), Vec::new()),
                    ]
                })
                .collect();
            changed.replacing(std::mem::take(&mut self.totals));
        } else if self.totals.data.files as usize + plan.added.len()
            > self.bucket_count as usize * FILES_PER_BUCKET * 2
        {
            let wanted = buckets_for(self.totals.data.files as usize + plan.added.len());
            self.rebucket(writer, Some(wanted)).await?;
        }
        let count = self.bucket_count;

        // Which buckets change, and how.
        let mut touched: BTreeMap<u32, (Vec<String>, Vec<DataFile>)> = BTreeMap::new();
        for location in &plan.removed {
            touched
                .entry(bucket_of(location, count))
                .or_default()
                .0
                .push(location.clone());
        }
        let mut new_deletes: BTreeMap<u32, Vec<DataFile>> = BTreeMap::new();
        // Each planned file is let go as its Iceberg entry is made: a bootstrap never holds
        // both forms of every file.
        // A deletion vector's delete file is a PUT of its own: several at once, in order.
        let (spec_id, format_version) = (self.spec.spec_id(), self.format_version);
        let mut entries = futures::stream::iter(std::mem::take(&mut plan.added))
            .map(|file| async move {
                let bucket = bucket_of(&file.location, count);
                let entry = data_file(&file, spec_id)?;
                let deletes = match &file.deletion_vector {
                    Some(dv) => {
                        writer
                            .write_deletes(&file, dv, spec_id, format_version)
                            .await?
                    }
                    None => None,
                };
                Ok::<_, Error>((bucket, entry, deletes))
            })
            .buffered(DELETE_FILES_AT_ONCE);
        while let Some((bucket, entry, deletes)) = entries.try_next().await? {
            touched.entry(bucket).or_default().1.push(entry);
            if let Some(deletes) = deletes {
                new_deletes.entry(bucket).or_default().push(deletes);
            }
        }
        drop(entries);
        // Buckets loaded by a rebucket must all be rewritten.
        let pending: Vec<u32> = self
            .loaded
            .keys()
            .filter(|b| !self.manifests.contains_key(b))
            .map(|(_, b)| *b)
            .collect();
        for bucket in pending {
            touched.entry(bucket).or_default();
        }
        // An append adds a layer to each bucket it touches instead of rewriting it: what the
        // bucket holds is not read, and the new manifest lists the new files alone, so the
        // cost follows the commit. A bucket of MAX_LAYERS layers is rewritten whole next time.
        // (v3 rewrites: first row IDs are assigned per rewritten bucket.)
        let appends = plan.operation == iceberg::spec::Operation::Append
            && !plan.replace_all
            && part.is_none()
            && self.format_version != FormatVersion::V3;
        let mut layers = BTreeSet::new();
        for (bucket, (removes, adds)) in touched {
            let key = (Content::Data, bucket);
            let layered = self.manifests.get(&key).map_or(0, Vec::len);
            if appends
                && removes.is_empty()
                && !adds.is_empty()
                && !new_deletes.contains_key(&bucket)
                && (1..MAX_LAYERS).contains(&layered)
            {
                layers.insert(key);
                rewritten.insert(
                    key,
                    BucketChange {
                        kept: Vec::new(),
                        deleted: Vec::new(),
                        added: adds,
                    },
                );
                continue;
            }
            let data = std::mem::take(self.bucket_files(writer, (Content::Data, bucket)).await?);
            let deletes = std::mem::take(
                self.bucket_files(writer, (Content::Deletes, bucket))
                    .await?,
            );
            let new = new_deletes.remove(&bucket).unwrap_or_default();
            let change = change_bucket(data, deletes, removes, adds, new);
            changed.deleted += change.data.leaving();
            changed.retired_deletes += change.deletes.leaving();
            changed.added_deletes += change.deletes.arriving();
            rewritten.insert((Content::Data, bucket), change.data);
            rewritten.insert((Content::Deletes, bucket), change.deletes);
        }

        // Write the changed bucket manifests, several at once (each is a PUT: on S3 its
        // latency, not the encoding, is what a bootstrap of many buckets waits for).
        let partition_type = self.spec.partition_type(&self.schema)?;
        let bucket_writer = BucketWriter {
            writer,
            snapshot_id,
            sequence_number,
            data_sequence_numbers: &data_sequence_numbers,
            schema: self.schema.clone(),
            spec: self.spec.as_ref().clone(),
            partition_type,
            v3: self.format_version == FormatVersion::V3,
            progress: ManifestProgress::new(
                rewritten
                    .values()
                    .filter(|c| !(c.kept.is_empty() && c.added.is_empty()))
                    .count(),
            ),
        };
        let mut written: Vec<WrittenBucket> = futures::stream::iter(rewritten)
            .map(|(key, change)| bucket_writer.write(key, change))
            .buffer_unordered(MANIFESTS_AT_ONCE)
            .try_collect()
            .await?;
        written.sort_by_key(|(key, _, _)| *key);
        // After a snapshot that replaced everything (a bootstrap) every bucket is new: its
        // files are let go, and a later snapshot of this run reads the buckets it touches
        // from their manifests, as the next run would. (v3 keeps them: their row IDs are
        // assigned below.)
        let keep_loaded = !plan.replace_all || self.format_version == FormatVersion::V3;
        let mut new_manifests = Vec::new();
        for (key, manifest, next_live) in written {
            if layers.contains(&key) {
                // The layer's files are the bucket's new ones: a bucket read before (in
                // this run) gets them too, one not read stays unread.
                if let Some(manifest) = manifest {
                    self.manifests
                        .entry(key)
                        .or_default()
                        .push(manifest.clone());
                    new_manifests.push(manifest);
                }
                if let Some(live) = self.loaded.get_mut(&key) {
                    live.extend(next_live);
                }
                continue;
            }
            match manifest {
                // Nothing live: the bucket leaves the manifest list.
                None => {
                    self.manifests.remove(&key);
                }
                Some(manifest) => {
                    self.manifests.insert(key, vec![manifest.clone()]);
                    new_manifests.push(manifest);
                }
            }
            if keep_loaded || !self.manifests.contains_key(&key) {
                self.loaded.insert(key, next_live);
            } else {
                self.loaded.remove(&key);
            }
        }
        changed.manifests_written = new_manifests.len();
        Ok(changed)
    }

    /// Takes the manifests the parts of a fanned-out bootstrap wrote as the buckets of a
    /// table replaced in `buckets` buckets.
    pub(super) async fn take_parts(
        &mut self,
        writer: &MetadataWriter,
        plan: &mut SnapshotPlan,
        snapshot_id: i64,
        buckets: u32,
        manifests: Vec<ManifestFile>,
    ) -> Result<Changed> {
        self.take_definition(writer, plan).await?;
        self.bucket_count = buckets;
        self.manifests.clear();
        self.loaded.clear();
        let mut changed = Changed {
            manifests_written: manifests.len(),
            ..Changed::default()
        };
        changed.replacing(std::mem::take(&mut self.totals));
        for mut manifest in manifests {
            let content = match manifest.content {
                ManifestContentType::Deletes => Content::Deletes,
                ManifestContentType::Data => Content::Data,
            };
            let bucket = bucket_of_manifest(&manifest.manifest_path, content)
                .filter(|b| *b < buckets && manifest.added_snapshot_id == snapshot_id)
                .ok_or_else(|| {
                    Error::CatalogState(format!(
                        "{} is not a manifest of this fan-out (snapshot {snapshot_id}, {buckets} buckets): plan the fan-out again",
                        manifest.manifest_path
                    ))
                })?;
            let files = u64::from(manifest.added_files_count.unwrap_or(0));
            let rows = manifest.added_rows_count.unwrap_or(0);
            match content {
                Content::Data => changed.added += (files, rows),
                Content::Deletes => changed.added_deletes += (files, rows),
            }
            // The list written here gives them this snapshot's sequence number.
            manifest.sequence_number = iceberg::spec::UNASSIGNED_SEQUENCE_NUMBER;
            manifest.min_sequence_number = iceberg::spec::UNASSIGNED_SEQUENCE_NUMBER;
            manifest.first_row_id = None;
            if let Some(other) = self.manifests.insert((content, bucket), vec![manifest]) {
                return Err(Error::CatalogState(format!(
                    "two parts wrote bucket {bucket} ({} and another): plan the fan-out again",
                    other.first().map_or("?", |m| m.manifest_path.as_str())
                )));
            }
        }
        Ok(changed)
    }

    /// Writes the manifest list of every bucket's newest manifest and adds the snapshot.
    pub(super) async fn commit_snapshot(
        &mut self,
        writer: &MetadataWriter,
        plan: &SnapshotPlan,
        snapshot_id: i64,
        changed: Changed,
    ) -> Result<SnapshotOutcome> {
        let sequence_number = self.next_sequence_number(plan);

        // The manifest list: every bucket's newest manifest.
        let list_location =
            writer.metadata_location(&format!("snap-{snapshot_id}-{}.avro", uuid::Uuid::new_v4()));
        let output = writer.staging.new_output(&list_location)?.writer().await?;
        let first_row_id = self.next_row_id;
        let mut list = if self.format_version == FormatVersion::V3 {
            self.next_row_id = match plan.row_lineage {
                // Delta's row IDs: every data file states its own; the table's next row ID
                // follows Delta's high-water mark.
                Some(lineage) => {
                    explicit_row_ids(&mut self.manifests, first_row_id, lineage.high_water_mark)?
                }
                None => assign_row_ids(&mut self.manifests, &mut self.loaded, first_row_id)?,
            };
            ManifestListWriter::v3(
                output,
                snapshot_id,
                self.parent_snapshot_id,
                sequence_number,
                Some(first_row_id),
            )
        } else {
            ManifestListWriter::v2(
                output,
                snapshot_id,
                self.parent_snapshot_id,
                sequence_number,
            )
        };
        list.add_manifests(self.manifests.values().flatten().cloned())?;
        list.close().await?;
        writer.publish_from_staging(&list_location).await?;
        crash::point("glue-after-manifest-list");
        // The list writer assigned sequence numbers to the new manifests; keep its view.
        for manifest in self.manifests.values_mut().flatten() {
            if manifest.sequence_number < 0 {
                manifest.sequence_number = sequence_number;
            }
            if manifest.min_sequence_number < 0 {
                manifest.min_sequence_number = sequence_number;
            }
        }

        self.totals = self.totals.after(&changed);
        // The Delta commit's time, so that time travel by timestamp finds the same version in
        // Iceberg as in Delta; never in the future, and strictly increasing (as Delta's own
        // commit timestamps are made for time travel).
        let timestamp_ms = plan
            .commit_timestamp_ms
            .min(chrono::Utc::now().timestamp_millis())
            .max(self.last_timestamp_ms + 1);
        let summary = snapshot_summary(plan, &changed, &self.totals);
        let snapshot = Snapshot::builder()
            .with_snapshot_id(snapshot_id)
            .with_parent_snapshot_id(self.parent_snapshot_id)
            .with_sequence_number(sequence_number)
            .with_timestamp_ms(timestamp_ms)
            .with_manifest_list(list_location)
            .with_summary(summary)
            .with_schema_id(self.schema.schema_id());
        let snapshot = if self.format_version == FormatVersion::V3 {
            snapshot
                .with_row_range(first_row_id, self.next_row_id - first_row_id)
                .build()
        } else {
            snapshot.build()
        };
        self.builder = Some(
            self.take_builder()?
                .set_branch_snapshot(snapshot, MAIN_BRANCH)?,
        );
        self.parent_snapshot_id = Some(snapshot_id);
        self.last_sequence_number = sequence_number;
        self.last_timestamp_ms = timestamp_ms;
        Ok(SnapshotOutcome {
            snapshot_id,
            delta_version: plan.delta_version,
            operation: plan.operation.as_str().to_string(),
            added_files: changed.added.files as usize,
            removed_files: changed.removed().files as usize,
        })
    }

    /// The sequence number of the next snapshot: the one after the last, or with row lineage
    /// (as UniForm writes it) the Delta version, so that data sequence numbers are the versions
    /// that committed the files: the first snapshot of a table (no parent) takes the version
    /// even when it is not past the last (version 0 gets 0, which Iceberg allows for a
    /// snapshot without a parent), a later one the version when it is past the last.
    fn next_sequence_number(&self, plan: &SnapshotPlan) -> i64 {
        let next = self.last_sequence_number + 1;
        match plan.row_lineage {
            Some(_) if self.parent_snapshot_id.is_none() => plan.delta_version.max(0),
            Some(_) => next.max(plan.delta_version),
            None => next,
        }
    }

    pub(super) fn take_builder(&mut self) -> Result<TableMetadataBuilder> {
        self.builder
            .take()
            .ok_or_else(|| Error::CatalogState("metadata builder used after a failed step".into()))
    }

    /// Writes the metadata file with `snapshots` written, the history thinned and expired
    /// as the policy and Delta's retention say.
    pub(super) async fn finish(
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
        crash::point("glue-after-metadata");
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

/// The table properties that describe how data files name columns, from a plan that
/// changes them: the name mapping, the physical names of column-mapped fields, and the
/// columns left out for Java's sake.
pub(super) fn set_definition_properties(
    properties: &mut HashMap<String, String>,
    plan: &mut SnapshotPlan,
) -> Result<()> {
    if let Some(id) = plan.delta_table_id.take() {
        properties.insert(DELTA_TABLE_ID_PROPERTY.to_string(), id);
    }
    match plan.row_lineage {
        Some(_) => {
            properties.insert(ROW_LINEAGE_PROPERTY.to_string(), "true".to_string());
        }
        None => {
            properties.remove(ROW_LINEAGE_PROPERTY);
        }
    }
    match plan.catalog_table_id.take() {
        Some(Some(id)) => {
            properties.insert(CATALOG_TABLE_ID_PROPERTY.to_string(), id);
        }
        Some(None) => {
            properties.remove(CATALOG_TABLE_ID_PROPERTY);
        }
        None => {}
    }
    if let Some(mapping) = plan.name_mapping.take() {
        properties.insert(
            iceberg::spec::DEFAULT_SCHEMA_NAME_MAPPING.to_string(),
            serde_json::to_string(&mapping)?,
        );
    }
    if !plan.physical_names.is_empty() {
        let sorted: BTreeMap<&i32, &String> = plan.physical_names.iter().collect();
        properties.insert(COLUMN_MAPPED_PROPERTY.to_string(), "true".to_string());
        properties.insert(
            PHYSICAL_NAMES_PROPERTY.to_string(),
            serde_json::to_string(&sorted)?,
        );
    }
    match plan.partition_zone.take() {
        Some(Some(zone)) => {
            properties.insert(PARTITION_TIMEZONE_PROPERTY.to_string(), zone);
        }
        Some(None) => {
            properties.remove(PARTITION_TIMEZONE_PROPERTY);
        }
        None => {}
    }
    if let Some(history) = plan.history.take() {
        for (key, value) in history.properties() {
            match value {
                Some(value) => properties.insert(key.to_string(), value.to_string()),
                None => properties.remove(key),
            };
        }
    }
    if !plan.v3_types.is_empty() {
        // Field IDs are never reused: every schema of the table reads its types from here.
        let mut types: BTreeMap<i32, String> = properties
            .get(V3_TYPES_PROPERTY)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        types.extend(std::mem::take(&mut plan.v3_types));
        properties.insert(
            V3_TYPES_PROPERTY.to_string(),
            serde_json::to_string(&types)?,
        );
    }
    match plan.omitted_columns.take() {
        Some(omitted) if omitted.is_empty() => {
            properties.remove(OMITTED_COLUMNS_PROPERTY);
        }
        Some(omitted) => {
            properties.insert(
                OMITTED_COLUMNS_PROPERTY.to_string(),
                serde_json::to_string(&omitted)?,
            );
        }
        None => {}
    }
    Ok(())
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
