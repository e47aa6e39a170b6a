//! Carries out snapshot plans: writes manifests, manifest lists and the metadata file.
//!
//! The manifest layout (which bucket a file is in, when buckets grow) is the planner's
//! (`lakemirror_plan::layout`): a commit rewrites only the buckets its files fall in and a
//! manifest list of `B` entries, so its cost follows the commit, not the table. `B` grows
//! (all buckets rewritten once) when buckets outgrow [`FILES_PER_BUCKET`] twice over.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, FormatVersion, Literal,
    MAIN_BRANCH, ManifestContentType, ManifestFile, ManifestListWriter, ManifestWriterBuilder,
    PartitionSpec, PartitionSpecRef, PrimitiveLiteral, PrimitiveType, SchemaRef, Snapshot,
    SortOrder, Struct, StructType, Summary, TableMetadata, TableMetadataBuilder, Transform,
    UnboundPartitionSpec,
};
use roaring::RoaringTreemap;

use lakemirror_delta::deletion_vector::{DeletionVector, read_positions};
use lakemirror_plan::expiry::{expirable, lakemirror_history};
use lakemirror_plan::history::{
    HistoryPolicy, THINNED_REMOVALS_PROPERTY, carried_removals, gapless_tail, recorded_removals,
    thinned,
};
use lakemirror_plan::layout::{
    BucketChange, Content, FILES_PER_BUCKET, FanOutPart, LiveFile, bucket_of, bucket_of_manifest,
    buckets_for, change_bucket, referenced_data_file,
};
use lakemirror_plan::metrics::set_metrics_modes;
use lakemirror_plan::name_mapping::name_mapping;
use lakemirror_plan::partition::{PARTITION_TIMEZONE_PROPERTY, partition_field_name};
use lakemirror_plan::properties::*;
use lakemirror_plan::{CommittedTable, PlannedFile, SnapshotPlan};
use lakemirror_storage::{TableStorage, crash};

use crate::avro_header;
use crate::error::{Error, Result};
use crate::puffin::deletion_vector_file;

/// What one written snapshot did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SnapshotOutcome {
    pub snapshot_id: i64,
    pub delta_version: i64,
    pub operation: String,
    pub added_files: usize,
    pub removed_files: usize,
}

/// Metadata written but not yet committed to the catalog.
#[derive(Debug, Clone)]
pub struct StagedTable {
    pub table: CommittedTable,
    pub snapshots: Vec<SnapshotOutcome>,
    /// Snapshots this metadata no longer has because Delta VACUUM may delete their files
    /// (see [`expirable`]).
    pub expired_snapshots: Vec<i64>,
    /// Snapshots this metadata no longer has because the history policy thins them (see
    /// [`thinned`]).
    pub thinned_snapshots: Vec<i64>,
    /// Metadata files only the removed snapshots used, and metadata files that fell off the
    /// metadata log: delete them once the catalog points at the new metadata, never before.
    pub removed_files: Vec<String>,
}

/// A bucket after a snapshot: its manifest (None: nothing live, none written) and its live
/// files.
type WrittenBucket = ((Content, u32), Option<ManifestFile>, Vec<LiveFile>);

/// Bucket manifests written at once.
const MANIFESTS_AT_ONCE: usize = 8;
/// Append layers a bucket holds at most beside its manifest: the next change to it rewrites
/// the bucket into one manifest.
const MAX_LAYERS: usize = 8;
/// Manifest lists read at once when snapshots are removed.
const LISTS_AT_ONCE: usize = 16;
/// Iceberg's table properties bounding the metadata log (`metadata-log`), and whether the
/// metadata files that fall off it are deleted.
const METADATA_VERSIONS_MAX: &str = "write.metadata.previous-versions-max";
const METADATA_VERSIONS_MAX_DEFAULT: &str = "100";
const METADATA_DELETE_AFTER_COMMIT: &str = "write.metadata.delete-after-commit.enabled";

/// What writing one bucket's manifest of a snapshot needs.
struct BucketWriter<'a> {
    writer: &'a MetadataWriter,
    snapshot_id: i64,
    sequence_number: i64,
    schema: SchemaRef,
    spec: PartitionSpec,
    partition_type: StructType,
    v3: bool,
    progress: ManifestProgress,
}

/// Manifests written so far in one snapshot, logged at every tenth of a large snapshot (a
/// bootstrap): a line per stage in Lambda's log, progress on the CLI's stderr.
struct ManifestProgress {
    total: usize,
    done: std::sync::atomic::AtomicUsize,
    started: std::time::Instant,
}

/// Snapshots of at least this many manifests report their progress.
const PROGRESS_MANIFESTS: usize = 100;

impl ManifestProgress {
    fn new(total: usize) -> Self {
        Self {
            total,
            done: Default::default(),
            started: std::time::Instant::now(),
        }
    }

    fn one_more(&self) {
        let done = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if self.total < PROGRESS_MANIFESTS || !done.is_multiple_of(self.total / 10) {
            return;
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let per_second = done as f64 / elapsed.max(1e-3);
        tracing::info!(
            manifests = done,
            of = self.total,
            per_second = per_second.round() as u64,
            eta_s = ((self.total - done) as f64 / per_second).round() as u64,
            "writing manifests"
        );
    }
}

impl BucketWriter<'_> {
    /// Writes the manifest of one changed bucket (None when nothing is live in it, and
    /// nothing is written) and answers the bucket's live files after this snapshot.
    async fn write(&self, key: (Content, u32), change: BucketChange) -> Result<WrittenBucket> {
        let BucketChange {
            kept,
            deleted,
            added: adds,
        } = change;
        let (content, bucket) = key;
        if kept.is_empty() && adds.is_empty() {
            // A deletes bucket that never held anything writes nothing either.
            return Ok((key, None, kept));
        }
        let location = self.writer.metadata_location(&format!(
            "{}{}{bucket}.avro",
            uuid::Uuid::new_v4(),
            content.marker()
        ));
        let output = self.writer.staging.new_output(&location)?;
        let builder = ManifestWriterBuilder::new(
            output,
            Some(self.snapshot_id),
            self.schema.clone(),
            self.spec.clone(),
        );
        let mut manifest = match (content, self.v3) {
            (Content::Data, false) => builder.build_v2_data(),
            (Content::Deletes, false) => builder.build_v2_deletes(),
            (Content::Data, true) => builder.build_v3_data(),
            (Content::Deletes, true) => builder.build_v3_deletes(),
        };
        let spec_id = self.spec.spec_id();
        for live in &kept {
            manifest.add_existing_file(
                carried_over(live, spec_id, &self.partition_type)?,
                live.snapshot_id,
                live.sequence_number,
                Some(live.file_sequence_number),
            )?;
        }
        for gone in &deleted {
            manifest.add_delete_file(
                carried_over(gone, spec_id, &self.partition_type)?,
                gone.sequence_number,
                Some(gone.file_sequence_number),
            )?;
        }
        let mut next_live = kept;
        for file in adds {
            manifest.add_file(file.clone(), self.sequence_number)?;
            next_live.push(LiveFile {
                data_file: file,
                snapshot_id: self.snapshot_id,
                sequence_number: self.sequence_number,
                file_sequence_number: self.sequence_number,
                first_row_id: None,
            });
        }
        let written = manifest.write_manifest_file().await?;
        self.writer.publish_from_staging(&location).await?;
        crash::point("glue-after-manifest");
        self.progress.one_more();
        Ok((key, Some(written), next_live))
    }
}

/// Writes Iceberg metadata for a Delta table.
#[derive(Clone)]
pub struct MetadataWriter {
    /// Where metadata files go: `<root>/_lakemirror/iceberg` by default.
    metadata_store: TableStorage,
    /// The Delta table, to read Parquet footers of files without stats.
    data_store: TableStorage,
    /// In-memory staging for the iceberg writers, which want a FileIO.
    staging: FileIO,
    /// The format version of tables this writer creates, unless the plan asks for another.
    format_version: FormatVersion,
    /// The history kept, unless the table's own `lakemirror.history.*` properties say.
    history: HistoryPolicy,
}

impl MetadataWriter {
    pub fn new(metadata_store: TableStorage, data_store: TableStorage) -> Self {
        Self {
            metadata_store,
            data_store,
            staging: FileIO::new_with_memory(),
            format_version: FormatVersion::V2,
            history: HistoryPolicy::default(),
        }
    }

    /// Keeps history as `policy` says, unless a table's own properties say otherwise.
    pub fn with_history(mut self, policy: HistoryPolicy) -> Self {
        self.history = policy;
        self
    }

    /// Creates new tables in `format_version` (2 unless told otherwise).
    pub fn with_format_version(mut self, format_version: FormatVersion) -> Self {
        self.format_version = format_version;
        self
    }

    /// Writes one snapshot per plan on top of `current` (None: a new table) and the metadata
    /// file that makes them current. Nothing is visible until the catalog points at it.
    pub async fn stage(
        &self,
        current: Option<&CommittedTable>,
        plans: Vec<SnapshotPlan>,
    ) -> Result<StagedTable> {
        let mut plans = plans;
        let mut state = match current {
            Some(table) => TableState::load(self, table).await?,
            None => {
                let first = plans.first_mut().ok_or_else(|| {
                    Error::Bug("a new table was staged without a snapshot plan".into())
                })?;
                TableState::create(self, first)?
            }
        };
        let mut outcomes = Vec::with_capacity(plans.len());
        for plan in plans {
            outcomes.push(state.apply(self, plan).await?);
        }
        state.finish(self, outcomes).await
    }

    /// One part of a fanned-out bootstrap: writes the bucket manifests of `plan`'s files
    /// (the files of the buckets `part` owns: the plan of a snapshot read through
    /// [`FanOutPart::owns`]) and then a manifest list of them, last, so that its presence
    /// means the part is complete. Run again, a part writes new manifests and a new list in
    /// the same place.
    pub async fn stage_part(
        &self,
        mut plan: SnapshotPlan,
        part: &FanOutPart,
    ) -> Result<PartWritten> {
        if !plan.replace_all {
            return Err(Error::Bug(
                "a fanned-out part was handed a change, not a whole table".into(),
            ));
        }
        let mut state = TableState::create(self, &mut plan)?;
        let changed = state
            .write_manifests(self, &mut plan, part.snapshot_id, Some(part))
            .await?;
        let location = self.part_list_location(part.snapshot_id, part.part, part.parts);
        let output = self.staging.new_output(&location)?.writer().await?;
        let mut list = ManifestListWriter::v2(output, part.snapshot_id, None, 1);
        list.add_manifests(state.manifests.values().flatten().cloned())?;
        list.close().await?;
        crash::point("fan-out-before-part-list");
        self.publish_from_staging(&location).await?;
        Ok(PartWritten {
            part: part.part,
            files: changed.added_files,
            manifests: state.manifests.values().map(Vec::len).sum(),
            manifest_list: location,
        })
    }

    /// The finishing step of a fanned-out bootstrap: a new table (a new history, as a
    /// rebuild) whose one snapshot holds the manifests every part wrote. `plan` is the
    /// plan of the same Delta version without files. Fails, naming the part, when a part
    /// has not finished.
    pub async fn stage_parts(
        &self,
        mut plan: SnapshotPlan,
        snapshot_id: i64,
        buckets: u32,
        parts: u32,
    ) -> Result<StagedTable> {
        let mut manifests = Vec::new();
        for part in 0..parts {
            let location = self.part_list_location(snapshot_id, part, parts);
            let Some(bytes) = self.metadata_store.get_if_exists(&location).await? else {
                return Err(Error::FanOut(format!(
                    "part {part} of {parts} has not finished ({location} is missing): run that part (again), then finish"
                )));
            };
            manifests.extend(self.own_manifests(&bytes, FormatVersion::V2)?);
        }
        let mut state = TableState::create(self, &mut plan)?;
        let changed = state
            .take_parts(self, &mut plan, snapshot_id, buckets, manifests)
            .await?;
        let outcome = state
            .commit_snapshot(self, &plan, snapshot_id, changed)
            .await?;
        state.finish(self, vec![outcome]).await
    }

    fn part_list_location(&self, snapshot_id: i64, part: u32, parts: u32) -> String {
        self.metadata_location(&format!(
            "fan-out-{snapshot_id}/part-{part}-of-{parts}.avro"
        ))
    }

    /// Deletes the files of removed snapshots and old metadata files: the manifest lists
    /// first (a list gone leaves its manifests unreachable), then the rest, each in batches.
    /// Best effort: a file left over is garbage, never a problem for readers.
    pub async fn delete_expired(&self, files: &[String]) {
        let (lists, rest): (Vec<String>, Vec<String>) = files.iter().cloned().partition(|f| {
            f.rsplit('/')
                .next()
                .is_some_and(|name| name.starts_with("snap-"))
        });
        for batch in [lists, rest] {
            if let Err(e) = self.metadata_store.delete_all(&batch).await {
                tracing::warn!(files = batch.len(), error = %e, "could not delete all files of removed snapshots");
            }
            crash::point("glue-during-expiry");
        }
    }

    /// The files only the `removed` snapshots of `history` (oldest first) use: their manifest
    /// lists, the manifests neither kept neighbour of their run lists (a bucket manifest is
    /// listed by a run of consecutive snapshots, so that is exact), and the delete files those
    /// manifests name that neither neighbour has live (a delete file is live in a run of
    /// consecutive snapshots too). A run whose neighbour's list is missing keeps its files.
    async fn removed_files(
        &self,
        metadata: &TableMetadata,
        history: &[&Snapshot],
        removed: &HashSet<i64>,
    ) -> Result<Vec<String>> {
        // Runs of removed snapshots, each with the kept snapshot before it (none for the
        // oldest) and after it (the current snapshot is never removed).
        let mut runs: Vec<(Option<i64>, Vec<i64>, Option<i64>)> = Vec::new();
        let mut before = None;
        let mut run = Vec::new();
        for snapshot in history {
            let id = snapshot.snapshot_id();
            if removed.contains(&id) {
                run.push(id);
                continue;
            }
            if !run.is_empty() {
                runs.push((before, std::mem::take(&mut run), Some(id)));
            }
            before = Some(id);
        }
        if !run.is_empty() {
            runs.push((before, run, None));
        }
        let wanted: BTreeSet<i64> = runs
            .iter()
            .flat_map(|(before, run, after)| before.iter().chain(run).chain(after).copied())
            .collect();
        let lists: HashMap<i64, Option<Vec<ManifestFile>>> =
            futures::stream::iter(wanted.into_iter().filter_map(|id| {
                let list = metadata.snapshot_by_id(id)?.manifest_list().to_string();
                Some(async move { Ok::<_, Error>((id, self.manifests_of(&list, metadata).await?)) })
            }))
            .buffer_unordered(LISTS_AT_ONCE)
            .try_collect()
            .await?;
        let manifests = |id: &i64| lists.get(id).and_then(Option::as_ref);
        let mut files = BTreeSet::new();
        let mut removed_deletes: Vec<(Vec<&ManifestFile>, Vec<&ManifestFile>)> = Vec::new();
        for (before, run, after) in &runs {
            let neighbours: Option<Vec<&ManifestFile>> = before
                .iter()
                .chain(after)
                .map(|id| manifests(id).map(|m| m.iter().collect::<Vec<_>>()))
                .collect::<Option<Vec<_>>>()
                .map(|lists| lists.into_iter().flatten().collect());
            // Without a kept neighbour's list nothing can be shown unused.
            let Some(kept) = neighbours else {
                tracing::warn!(
                    ?before,
                    ?after,
                    "a kept snapshot's manifest list is missing; deleting no files of the snapshots removed beside it"
                );
                continue;
            };
            let kept_paths: HashSet<&str> = kept.iter().map(|m| m.manifest_path.as_str()).collect();
            let mut gone_deletes = Vec::new();
            for id in run {
                if let Some(snapshot) = metadata.snapshot_by_id(*id) {
                    files.insert(snapshot.manifest_list().to_string());
                }
                // A list another sync already removed lists nothing left to delete.
                for manifest in manifests(id).into_iter().flatten() {
                    if !kept_paths.contains(manifest.manifest_path.as_str())
                        && files.insert(manifest.manifest_path.clone())
                        && manifest.content == ManifestContentType::Deletes
                    {
                        gone_deletes.push(manifest);
                    }
                }
            }
            if !gone_deletes.is_empty() {
                let kept_deletes = kept
                    .into_iter()
                    .filter(|m| m.content == ManifestContentType::Deletes)
                    .collect();
                removed_deletes.push((kept_deletes, gone_deletes));
            }
        }
        for (kept, gone) in removed_deletes {
            let mut live = HashSet::new();
            for manifest in kept {
                for entry in read_entries(self, manifest).await? {
                    if entry.is_alive() {
                        live.insert(entry.data_file().file_path().to_string());
                    }
                }
            }
            for manifest in gone {
                for entry in read_entries(self, manifest).await? {
                    let path = entry.data_file().file_path();
                    if self.metadata_store.contains(path) && !live.contains(path) {
                        files.insert(path.to_string());
                    }
                }
            }
        }
        // Only ever this table's own metadata files: never a data file, never another
        // table's (the lists and manifests read above were checked; the delete files they
        // name are filtered here).
        Ok(files
            .into_iter()
            .filter(|f| self.metadata_store.contains(f))
            .collect())
    }

    /// The manifests a manifest list names; None when the list is gone.
    pub async fn manifests_of(
        &self,
        list: &str,
        metadata: &TableMetadata,
    ) -> Result<Option<Vec<ManifestFile>>> {
        self.own(list)?;
        let Some(bytes) = self.metadata_store.get_if_exists(list).await? else {
            return Ok(None);
        };
        self.own_manifests(&bytes, metadata.format_version())
            .map(Some)
    }

    /// The live data and delete files of `snapshot` (`lakemirror verify`), its manifests read
    /// 16 at a time; like every read of the mirror's metadata, only from its own folder.
    pub async fn live_files_of(
        &self,
        metadata: &TableMetadata,
        snapshot: &iceberg::spec::Snapshot,
    ) -> Result<Vec<DataFile>> {
        let list = snapshot.manifest_list();
        let Some(manifests) = self.manifests_of(list, metadata).await? else {
            return Err(Error::CatalogState(format!(
                "the manifest list {list} of snapshot {} is gone: the mirror's metadata was deleted; sync again to rebuild it",
                snapshot.snapshot_id()
            )));
        };
        let live: Vec<Vec<LiveFile>> =
            futures::stream::iter(manifests.iter().map(|m| read_live_files(self, m)))
                .buffered(16)
                .try_collect()
                .await?;
        Ok(live.into_iter().flatten().map(|l| l.data_file).collect())
    }

    /// The manifests a manifest list's bytes name, each of this table's own.
    fn own_manifests(&self, list: &[u8], version: FormatVersion) -> Result<Vec<ManifestFile>> {
        let list = iceberg::spec::ManifestList::parse_with_version(list, version)?;
        let manifests: Vec<ManifestFile> = list.consume_entries().into_iter().collect();
        for manifest in &manifests {
            self.own(&manifest.manifest_path)?;
        }
        Ok(manifests)
    }

    /// Refuses a metadata file outside this table's metadata folder. The mirror writes only
    /// there; a manifest list or manifest naming another place was written by someone else
    /// (whoever may write the Delta table's files may write there too), and following it
    /// could read, or expire and delete, another table's metadata.
    fn own(&self, location: &str) -> Result<()> {
        if self.metadata_store.contains(location) {
            return Ok(());
        }
        Err(Error::CatalogState(format!(
            "the mirror's metadata names {location}, which is outside its metadata folder {}: someone else changed the table's Iceberg metadata, and lakemirror does not follow it; nothing was written. Delete the Glue table and sync again to rebuild the mirror",
            self.metadata_store.root_uri()
        )))
    }

    fn metadata_location(&self, name: &str) -> String {
        self.metadata_store.location(&format!("metadata/{name}"))
    }

    async fn publish_from_staging(&self, location: &str) -> Result<()> {
        let bytes = self.staging.new_input(location)?.read().await?;
        let bytes = avro_header::with_unique_type_names(bytes)
            .map_err(|e| Error::Bug(format!("{location}: {e}")))?;
        self.metadata_store.put(location, bytes).await?;
        self.staging.delete(location).await?;
        Ok(())
    }

    /// Fills in record counts the log did not give by reading Parquet footers.
    async fn complete_record_counts(&self, files: &mut [PlannedFile]) -> Result<()> {
        let missing: Vec<usize> = (0..files.len())
            .filter(|i| files[*i].record_count.is_none())
            .collect();
        let counts: Vec<(usize, u64)> = futures::stream::iter(missing)
            .map(|i| {
                let (location, size) = (files[i].location.clone(), files[i].size);
                async move {
                    Ok::<_, Error>((
                        i,
                        footer_record_count(&self.data_store, &location, size).await?,
                    ))
                }
            })
            .buffer_unordered(16)
            .try_collect()
            .await?;
        for (i, n) in counts {
            files[i].record_count = Some(n);
        }
        Ok(())
    }
}

impl MetadataWriter {
    /// Writes the rows `file`'s deletion vector deletes as an Iceberg delete file, under the
    /// metadata folder (which Delta VACUUM leaves alone): a position-delete Parquet file in
    /// format v2, a Puffin deletion vector in v3. None for an empty vector.
    async fn write_deletes(
        &self,
        file: &PlannedFile,
        dv: &DeletionVector,
        spec_id: i32,
        format_version: FormatVersion,
    ) -> Result<Option<DataFile>> {
        let positions = read_positions(&self.data_store, &file.location, dv).await?;
        let count = positions.len();
        if i64::try_from(count).ok() != Some(dv.cardinality) {
            return Err(Error::malformed(
                self.data_store.root_uri(),
                format!(
                    "the deletion vector of {} holds {count} rows, the log says {}",
                    file.location, dv.cardinality
                ),
            ));
        }
        if count == 0 {
            return Ok(None);
        }
        if format_version == FormatVersion::V3 {
            return self
                .write_deletion_vector(file, &positions, spec_id)
                .await
                .map(Some);
        }
        let bytes = position_delete_parquet(&file.location, &positions)?;
        let location = self
            .metadata_store
            .location(&format!("deletes/{}.parquet", uuid::Uuid::new_v4()));
        let size = bytes.len() as u64;
        self.metadata_store.put(&location, bytes.into()).await?;
        // Equal file_path bounds tell readers the one data file these deletes apply to.
        let bound = Datum::string(&file.location);
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(location.clone())
            .file_format(DataFileFormat::Parquet)
            .partition(file.partition.clone())
            .partition_spec_id(spec_id)
            .record_count(count)
            .file_size_in_bytes(size)
            .lower_bounds(HashMap::from([(DELETE_FILE_PATH_ID, bound.clone())]))
            .upper_bounds(HashMap::from([(DELETE_FILE_PATH_ID, bound)]))
            .referenced_data_file(Some(file.location.clone()))
            .build()
            .map(Some)
            .map_err(|e| Error::data_file(location, e))
    }

    /// A v3 deletion vector: one Puffin file per data file.
    async fn write_deletion_vector(
        &self,
        file: &PlannedFile,
        positions: &RoaringTreemap,
        spec_id: i32,
    ) -> Result<DataFile> {
        let puffin = deletion_vector_file(&file.location, positions).await?;
        let location = self
            .metadata_store
            .location(&format!("deletes/{}.puffin", uuid::Uuid::new_v4()));
        let size = puffin.bytes.len() as u64;
        self.metadata_store
            .put(&location, puffin.bytes.into())
            .await?;
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(location.clone())
            .file_format(DataFileFormat::Puffin)
            .partition(file.partition.clone())
            .partition_spec_id(spec_id)
            .record_count(positions.len())
            .file_size_in_bytes(size)
            .referenced_data_file(Some(file.location.clone()))
            .content_offset(Some(puffin.content_offset))
            .content_size_in_bytes(Some(puffin.content_size_in_bytes))
            .build()
            .map_err(|e| Error::data_file(location, e))
    }
}

/// A position-delete Parquet file: `file_path`, `pos` (ascending), with Iceberg's reserved
/// field IDs.
fn position_delete_parquet(data_location: &str, positions: &RoaringTreemap) -> Result<Vec<u8>> {
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema as ArrowSchema};

    let field = |name: &str, ty: DataType, id: i32| {
        Field::new(name, ty, false).with_metadata(HashMap::from([(
            parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    };
    let schema = Arc::new(ArrowSchema::new(vec![
        field("file_path", DataType::Utf8, DELETE_FILE_PATH_ID),
        field("pos", DataType::Int64, DELETE_POS_ID),
    ]));
    let positions: Vec<i64> = positions
        .iter()
        .map(|p| i64::try_from(p).unwrap_or(i64::MAX))
        .collect();
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, schema.clone(), None)?;
    for chunk in positions.chunks(1 << 16) {
        let paths: ArrayRef = Arc::new(StringArray::from(vec![data_location; chunk.len()]));
        let pos: ArrayRef = Arc::new(Int64Array::from(chunk.to_vec()));
        let batch = RecordBatch::try_new(schema.clone(), vec![paths, pos])?;
        writer.write(&batch)?;
    }
    writer.close()?;
    Ok(out)
}

/// `num_rows` from a Parquet file's footer: two ranged reads.
async fn footer_record_count(store: &TableStorage, location: &str, size: u64) -> Result<u64> {
    if size < 12 {
        return Err(Error::data_file(
            location,
            format!("is too small ({size} bytes) to be Parquet"),
        ));
    }
    let tail = store.get_range(location, size - 8..size).await?;
    let range = lakemirror_delta::footer::metadata_range(&tail, size)
        .map_err(|e| Error::data_file(location, format!("{e}; is add.size right?")))?;
    let footer = store.get_range(location, range).await?;
    lakemirror_delta::footer::check_metadata(&footer)
        .map_err(|e| Error::data_file(location, format!("corrupt Parquet footer: {e}")))?;
    let metadata = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&footer)?;
    u64::try_from(metadata.file_metadata().num_rows())
        .map_err(|_| Error::data_file(location, "negative row count in footer"))
}

/// What one part of a fanned-out bootstrap wrote.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PartWritten {
    pub part: u32,
    pub files: usize,
    pub manifests: usize,
    /// The manifest list of this part's manifests, which the finishing step reads.
    pub manifest_list: String,
}

/// What writing one snapshot's manifests changed: files and records in and out.
struct Changed {
    added_files: usize,
    added_records: u64,
    removed_files: u64,
    removed_records: u64,
    /// Data files (and their records) deleted from the buckets rewritten.
    deleted_counts: (u64, u64),
    removed_delete_files: u64,
    removed_position_deletes: u64,
    retired_delete_files: u64,
    retired_position_deletes: u64,
    added_delete_files: u64,
    added_position_deletes: u64,
    manifests_written: usize,
}

/// The table being written: metadata builder plus the manifests of the newest snapshot.
struct TableState {
    /// Always Some between calls; taken while a builder method consumes it.
    builder: Option<TableMetadataBuilder>,
    schema: SchemaRef,
    /// Every schema the metadata holds, to find the ID the builder gives a new one.
    schemas: Vec<SchemaRef>,
    spec: PartitionSpecRef,
    properties: HashMap<String, String>,
    /// The property keys the table had when loaded.
    loaded_properties: HashSet<String>,
    format_version: FormatVersion,
    /// v3 row lineage: the first row ID the next snapshot assigns.
    next_row_id: u64,
    last_sequence_number: i64,
    last_timestamp_ms: i64,
    parent_snapshot_id: Option<i64>,
    bucket_count: u32,
    /// The manifests of each non-empty bucket in the newest snapshot: the one written when
    /// the bucket was last rewritten, then the append layers written since, oldest first.
    manifests: BTreeMap<(Content, u32), Vec<ManifestFile>>,
    /// Live files of buckets read or written in this run.
    loaded: HashMap<(Content, u32), Vec<LiveFile>>,
    total_files: u64,
    total_records: u64,
    total_delete_files: u64,
    total_position_deletes: u64,
}

impl TableState {
    /// A new table with the first plan's schema and partitioning. The schema is taken out of
    /// the plan: the metadata builder assigns the IDs of a new table itself.
    fn create(writer: &MetadataWriter, first: &mut SnapshotPlan) -> Result<Self> {
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
            total_files: 0,
            total_records: 0,
            total_delete_files: 0,
            total_position_deletes: 0,
            builder: Some(TableMetadataBuilder::new_from_metadata(created, None)),
        })
    }

    async fn load(writer: &MetadataWriter, table: &CommittedTable) -> Result<Self> {
        let m = &table.metadata;
        let mut manifests = BTreeMap::new();
        let mut bucket_count = m
            .properties()
            .get(BUCKETS_PROPERTY)
            .and_then(|b| b.parse().ok())
            .unwrap_or(1u32);
        let mut totals = [0u64; 4];
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
            let summary = &snapshot.summary().additional_properties;
            for (total, key) in totals.iter_mut().zip([
                "total-data-files",
                "total-records",
                "total-delete-files",
                "total-position-deletes",
            ]) {
                *total = summary.get(key).and_then(|v| v.parse().ok()).unwrap_or(0);
            }
        }
        let [
            total_files,
            total_records,
            total_delete_files,
            total_position_deletes,
        ] = totals;
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
            total_files,
            total_records,
            total_delete_files,
            total_position_deletes,
        };
        if bucket_count == 0 {
            state.rebucket(writer, None).await?;
        }
        Ok(state)
    }

    /// Reads the live files of a bucket (once per run): of its manifest and append layers,
    /// a path the newer layer names again replaces the older entry.
    async fn bucket_files(
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
    async fn rebucket(&mut self, writer: &MetadataWriter, count: Option<u32>) -> Result<()> {
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

    async fn apply(
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
    async fn take_definition(
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
    async fn write_manifests(
        &mut self,
        writer: &MetadataWriter,
        plan: &mut SnapshotPlan,
        snapshot_id: i64,
        part: Option<&FanOutPart>,
    ) -> Result<Changed> {
        self.take_definition(writer, plan).await?;
        let sequence_number = self.last_sequence_number + 1;
        let added_records: u64 = plan.added.iter().filter_map(|f| f.record_count).sum();
        let added_files = plan.added.len();

        let mut rewritten: BTreeMap<(Content, u32), BucketChange> = BTreeMap::new();
        // Files and records leaving: the whole previous snapshot when it is replaced, else
        // the entries deleted from the buckets below.
        let (mut removed_files, mut removed_records) = (0u64, 0u64);
        let mut deleted_counts = (0u64, 0u64);
        // Delete files leaving: all of them on a replace (already out of the totals), plus
        // those retired with their data files below (still in the totals).
        let (mut removed_delete_files, mut removed_position_deletes) = (0u64, 0u64);
        let (mut retired_delete_files, mut retired_position_deletes) = (0u64, 0u64);
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
            removed_files = std::mem::take(&mut self.total_files);
            removed_records = std::mem::take(&mut self.total_records);
            removed_delete_files = std::mem::take(&mut self.total_delete_files);
            removed_position_deletes = std::mem::take(&mut self.total_position_deletes);
        } else if self.total_files as usize + plan.added.len()
            > self.bucket_count as usize * FILES_PER_BUCKET * 2
        {
            let wanted = buckets_for(self.total_files as usize + plan.added.len());
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
        for file in std::mem::take(&mut plan.added) {
            let bucket = bucket_of(&file.location, count);
            let data_file = data_file(&file, self.spec.spec_id())?;
            touched.entry(bucket).or_default().1.push(data_file);
            if let Some(dv) = &file.deletion_vector
                && let Some(deletes) = writer
                    .write_deletes(&file, dv, self.spec.spec_id(), self.format_version)
                    .await?
            {
                new_deletes.entry(bucket).or_default().push(deletes);
            }
        }
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
        let (mut added_delete_files, mut added_position_deletes) = (0u64, 0u64);
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
            let (files, records) = change.data.leaving();
            deleted_counts.0 += files;
            deleted_counts.1 += records;
            let (files, records) = change.deletes.leaving();
            retired_delete_files += files;
            retired_position_deletes += records;
            let (files, records) = change.deletes.arriving();
            added_delete_files += files;
            added_position_deletes += records;
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
        Ok(Changed {
            added_files,
            added_records,
            removed_files,
            removed_records,
            deleted_counts,
            removed_delete_files,
            removed_position_deletes,
            retired_delete_files,
            retired_position_deletes,
            added_delete_files,
            added_position_deletes,
            manifests_written: new_manifests.len(),
        })
    }

    /// Takes the manifests the parts of a fanned-out bootstrap wrote as the buckets of a
    /// table replaced in `buckets` buckets.
    async fn take_parts(
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
            added_files: 0,
            added_records: 0,
            removed_files: std::mem::take(&mut self.total_files),
            removed_records: std::mem::take(&mut self.total_records),
            deleted_counts: (0, 0),
            removed_delete_files: std::mem::take(&mut self.total_delete_files),
            removed_position_deletes: std::mem::take(&mut self.total_position_deletes),
            retired_delete_files: 0,
            retired_position_deletes: 0,
            added_delete_files: 0,
            added_position_deletes: 0,
            manifests_written: manifests.len(),
        };
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
                Content::Data => {
                    changed.added_files += files as usize;
                    changed.added_records += rows;
                }
                Content::Deletes => {
                    changed.added_delete_files += files;
                    changed.added_position_deletes += rows;
                }
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
    async fn commit_snapshot(
        &mut self,
        writer: &MetadataWriter,
        plan: &SnapshotPlan,
        snapshot_id: i64,
        changed: Changed,
    ) -> Result<SnapshotOutcome> {
        let Changed {
            added_files,
            added_records,
            mut removed_files,
            mut removed_records,
            deleted_counts,
            mut removed_delete_files,
            mut removed_position_deletes,
            retired_delete_files,
            retired_position_deletes,
            added_delete_files,
            added_position_deletes,
            manifests_written,
        } = changed;
        let sequence_number = self.last_sequence_number + 1;

        // The manifest list: every bucket's newest manifest.
        let list_location =
            writer.metadata_location(&format!("snap-{snapshot_id}-{}.avro", uuid::Uuid::new_v4()));
        let output = writer.staging.new_output(&list_location)?.writer().await?;
        let first_row_id = self.next_row_id;
        let mut list = if self.format_version == FormatVersion::V3 {
            // Row lineage: every data manifest without row IDs gets a range of them (a
            // rewritten bucket gets new ones; Delta's row tracking is not carried over).
            for (key, manifest) in self
                .manifests
                .iter_mut()
                .flat_map(|(key, layers)| layers.iter_mut().map(move |m| (key, m)))
            {
                if manifest.content == ManifestContentType::Data && manifest.first_row_id.is_none()
                {
                    manifest.first_row_id = Some(self.next_row_id);
                    // The files this manifest added inherit their IDs from it, in order;
                    // known now, for a later snapshot of this run that carries them over.
                    let mut next = i64::try_from(self.next_row_id).unwrap_or(i64::MAX);
                    for live in self.loaded.get_mut(key).into_iter().flatten() {
                        if live.first_row_id.is_none() {
                            live.first_row_id = Some(next);
                            next = next.saturating_add(
                                i64::try_from(live.data_file.record_count()).unwrap_or(i64::MAX),
                            );
                        }
                    }
                    let rows = manifest.existing_rows_count.unwrap_or(0)
                        + manifest.added_rows_count.unwrap_or(0);
                    self.next_row_id = self.next_row_id.saturating_add(rows);
                }
            }
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

        self.total_files = (self.total_files + added_files as u64).saturating_sub(deleted_counts.0);
        self.total_records = (self.total_records + added_records).saturating_sub(deleted_counts.1);
        self.total_delete_files =
            (self.total_delete_files + added_delete_files).saturating_sub(retired_delete_files);
        self.total_position_deletes = (self.total_position_deletes + added_position_deletes)
            .saturating_sub(retired_position_deletes);
        removed_delete_files += retired_delete_files;
        removed_position_deletes += retired_position_deletes;
        removed_files += deleted_counts.0;
        removed_records += deleted_counts.1;
        // The Delta commit's time, so that time travel by timestamp finds the same version in
        // Iceberg as in Delta; never in the future, and strictly increasing (as Delta's own
        // commit timestamps are made for time travel).
        let timestamp_ms = plan
            .commit_timestamp_ms
            .min(chrono::Utc::now().timestamp_millis())
            .max(self.last_timestamp_ms + 1);
        let summary = Summary {
            operation: plan.operation.clone(),
            additional_properties: HashMap::from([
                (DELTA_VERSION.to_string(), plan.delta_version.to_string()),
                (
                    DELTA_COMMIT_TIMESTAMP.to_string(),
                    plan.commit_timestamp_ms.to_string(),
                ),
                ("added-data-files".to_string(), added_files.to_string()),
                ("deleted-data-files".to_string(), removed_files.to_string()),
                ("added-records".to_string(), added_records.to_string()),
                ("deleted-records".to_string(), removed_records.to_string()),
                ("total-data-files".to_string(), self.total_files.to_string()),
                ("total-records".to_string(), self.total_records.to_string()),
                (
                    "added-delete-files".to_string(),
                    added_delete_files.to_string(),
                ),
                (
                    "removed-delete-files".to_string(),
                    removed_delete_files.to_string(),
                ),
                (
                    "added-position-deletes".to_string(),
                    added_position_deletes.to_string(),
                ),
                (
                    "removed-position-deletes".to_string(),
                    removed_position_deletes.to_string(),
                ),
                (
                    "total-delete-files".to_string(),
                    self.total_delete_files.to_string(),
                ),
                (
                    "total-position-deletes".to_string(),
                    self.total_position_deletes.to_string(),
                ),
                ("total-equality-deletes".to_string(), "0".to_string()),
                (
                    "lakemirror.manifests-written".to_string(),
                    manifests_written.to_string(),
                ),
            ]),
        };
        let mut summary = summary;
        if let Some(hash) = plan.commit_hash {
            summary
                .additional_properties
                .insert(DELTA_COMMIT_HASH.to_string(), format!("{hash:016x}"));
        }
        if let Some(removed_at) = plan.removed_at_ms {
            summary
                .additional_properties
                .insert(DELTA_REMOVED_AT.to_string(), removed_at.to_string());
        }
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
            added_files,
            removed_files: removed_files as usize,
        })
    }

    fn take_builder(&mut self) -> Result<TableMetadataBuilder> {
        self.builder
            .take()
            .ok_or_else(|| Error::CatalogState("metadata builder used after a failed step".into()))
    }

    /// Writes the metadata file with `snapshots` written, the history thinned and expired
    /// as the policy and Delta's retention say.
    async fn finish(
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
            .put(&location, Bytes::from(serde_json::to_vec(&metadata)?))
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
fn set_definition_properties(
    properties: &mut HashMap<String, String>,
    plan: &mut SnapshotPlan,
) -> Result<()> {
    if let Some(id) = plan.delta_table_id.take() {
        properties.insert(DELTA_TABLE_ID_PROPERTY.to_string(), id);
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
fn since_last_snapshot(metadata: &TableMetadata) -> Result<TableMetadata> {
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
fn with_history(
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

/// Every entry of a manifest, live or deleted; none when another sync already deleted it.
async fn read_entries(
    writer: &MetadataWriter,
    manifest: &ManifestFile,
) -> Result<Vec<iceberg::spec::ManifestEntryRef>> {
    let location = &manifest.manifest_path;
    let Some(bytes) = writer.metadata_store.get_if_exists(location).await? else {
        return Ok(Vec::new());
    };
    Ok(parse_manifest(writer, manifest, bytes)
        .await?
        .entries()
        .to_vec())
}

/// A manifest read from `bytes`, through the in-memory staging the iceberg reader wants.
async fn parse_manifest(
    writer: &MetadataWriter,
    manifest: &ManifestFile,
    bytes: Bytes,
) -> Result<iceberg::spec::Manifest> {
    let location = &manifest.manifest_path;
    writer.staging.new_output(location)?.write(bytes).await?;
    let loaded = manifest.load_manifest(&writer.staging).await;
    writer.staging.delete(location).await?;
    Ok(loaded?)
}

/// The live files of a manifest, with the snapshot and sequence numbers they inherit.
async fn read_live_files(
    writer: &MetadataWriter,
    manifest: &ManifestFile,
) -> Result<Vec<LiveFile>> {
    let (bytes, _) = writer.metadata_store.get(&manifest.manifest_path).await?;
    let parsed = parse_manifest(writer, manifest, bytes).await?;
    // First row ID inheritance (v3): a data file without one takes the manifest's plus the
    // record counts of the files before it that had none, live or not, in manifest order.
    let mut next_row_id = manifest.first_row_id.and_then(|id| i64::try_from(id).ok());
    let mut live = Vec::new();
    for e in parsed.entries() {
        let file = e.data_file();
        let first_row_id = match (file.first_row_id(), next_row_id) {
            (Some(id), _) => Some(id),
            (None, Some(next)) if file.content_type() == DataContentType::Data => {
                let count = i64::try_from(file.record_count()).unwrap_or(i64::MAX);
                next_row_id = Some(next.saturating_add(count));
                Some(next)
            }
            (None, _) => None,
        };
        if e.is_alive() {
            live.push(LiveFile {
                data_file: file.clone(),
                snapshot_id: e.snapshot_id().unwrap_or(manifest.added_snapshot_id),
                sequence_number: e.sequence_number().unwrap_or(manifest.sequence_number),
                file_sequence_number: e.file_sequence_number.unwrap_or(manifest.sequence_number),
                first_row_id,
            });
        }
    }
    Ok(live)
}

/// Live files of a bucket's manifest and layers (oldest first), with only the newest entry
/// of a path that several name: a layer's add replaced it.
fn newest_entry_per_path(files: impl DoubleEndedIterator<Item = LiveFile>) -> Vec<LiveFile> {
    let mut seen = HashSet::new();
    let mut newest: Vec<LiveFile> = files
        .rev()
        .filter(|live| seen.insert(live.data_file.file_path().to_string()))
        .collect();
    newest.reverse();
    newest
}

/// A live entry as it goes into a rewritten manifest: its partition values in the current
/// partition type (a widened partition column, `int` to `long`, is written as the wider
/// type, which the manifest writer requires of every entry) and its first row ID written
/// out. Unchanged when neither applies.
fn carried_over(live: &LiveFile, spec_id: i32, partition_type: &StructType) -> Result<DataFile> {
    let file = &live.data_file;
    let promoted = promoted_partition(file.partition(), partition_type);
    let first_row_id = live.first_row_id.filter(|_| file.first_row_id().is_none());
    if promoted.is_none() && first_row_id.is_none() {
        return Ok(file.clone());
    }
    let mut builder = DataFileBuilder::default();
    builder
        .content(file.content_type())
        .file_path(file.file_path().to_string())
        .file_format(file.file_format())
        .partition(promoted.unwrap_or_else(|| file.partition().clone()))
        .partition_spec_id(spec_id)
        .record_count(file.record_count())
        .file_size_in_bytes(file.file_size_in_bytes())
        .column_sizes(file.column_sizes().clone())
        .value_counts(file.value_counts().clone())
        .null_value_counts(file.null_value_counts().clone())
        .nan_value_counts(file.nan_value_counts().clone())
        .lower_bounds(file.lower_bounds().clone())
        .upper_bounds(file.upper_bounds().clone())
        .key_metadata(file.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(file.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(file.equality_ids())
        .first_row_id(first_row_id.or(file.first_row_id()))
        .referenced_data_file(file.referenced_data_file())
        .content_offset(file.content_offset())
        .content_size_in_bytes(file.content_size_in_bytes());
    if let Some(id) = file.sort_order_id() {
        builder.sort_order_id(id);
    }
    builder
        .build()
        .map_err(|e| Error::data_file(file.file_path(), e))
}

/// The partition tuple with each value widened to the partition field's type where Iceberg's
/// type promotion widened the column (int to long, float to double); None when nothing
/// changes. Decimal values keep their unscaled value (promotion keeps the scale).
fn promoted_partition(partition: &Struct, partition_type: &StructType) -> Option<Struct> {
    let mut changed = false;
    let values: Vec<Option<Literal>> = partition
        .iter()
        .zip(partition_type.fields())
        .map(|(value, field)| {
            let target = field.field_type.as_primitive_type();
            match (value, target) {
                (Some(Literal::Primitive(PrimitiveLiteral::Int(v))), Some(PrimitiveType::Long)) => {
                    changed = true;
                    Some(Literal::long(i64::from(v.to_owned())))
                }
                (
                    Some(Literal::Primitive(PrimitiveLiteral::Float(v))),
                    Some(PrimitiveType::Double),
                ) => {
                    changed = true;
                    Some(Literal::double(f64::from(v.0)))
                }
                (value, _) => value.cloned(),
            }
        })
        .collect();
    changed.then(|| Struct::from_iter(values))
}

fn data_file(file: &PlannedFile, spec_id: i32) -> Result<DataFile> {
    let record_count = file
        .record_count
        .ok_or_else(|| Error::data_file(&file.location, "record count unknown"))?;
    DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(file.location.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(file.partition.clone())
        .partition_spec_id(spec_id)
        .record_count(record_count)
        .file_size_in_bytes(file.size)
        .value_counts(file.metrics.value_counts.clone())
        .null_value_counts(file.metrics.null_value_counts.clone())
        .lower_bounds(file.metrics.lower_bounds.clone())
        .upper_bounds(file.metrics.upper_bounds.clone())
        .build()
        .map_err(|e| Error::data_file(&file.location, e))
}

/// A random positive snapshot ID.
pub fn new_snapshot_id() -> i64 {
    let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
    ((high ^ low) & (i64::MAX as u64)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_ids_are_positive() {
        assert!((0..1000).all(|_| new_snapshot_id() > 0));
    }
}
