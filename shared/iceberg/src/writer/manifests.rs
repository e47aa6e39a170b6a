//! Bucket manifests: writing one bucket's manifest (a rewrite or an append layer) and
//! reading the live files of the manifests a snapshot lists.

use std::collections::HashSet;

use bytes::Bytes;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Literal, ManifestFile,
    ManifestWriterBuilder, PartitionSpec, PrimitiveLiteral, PrimitiveType, SchemaRef, Struct,
    StructType,
};

use lakemirror_plan::PlannedFile;
use lakemirror_plan::layout::{BucketChange, Content, LiveFile};
use lakemirror_runtime::crash;

use crate::error::{Error, Result};

use super::entries::EntryEncoder;

use super::*;

/// What writing one bucket's manifest of a snapshot needs.
pub(super) struct BucketWriter<'a> {
    pub(super) writer: &'a MetadataWriter,
    pub(super) snapshot_id: i64,
    pub(super) sequence_number: i64,
    /// Row lineage: the data sequence number of added files that keep an earlier one (the
    /// Delta version that first committed them), by location.
    pub(super) data_sequence_numbers: &'a HashMap<String, i64>,
    pub(super) schema: SchemaRef,
    pub(super) spec: PartitionSpec,
    pub(super) partition_type: StructType,
    pub(super) v3: bool,
    pub(super) progress: ManifestProgress,
}

/// Manifests written so far in one snapshot, logged at every tenth of a large snapshot (a
/// bootstrap): a line per stage in Lambda's log, progress on the CLI's stderr.
pub(super) struct ManifestProgress {
    pub(super) total: usize,
    pub(super) done: std::sync::atomic::AtomicUsize,
    pub(super) started: std::time::Instant,
}

/// Snapshots of at least this many manifests report their progress.
pub(super) const PROGRESS_MANIFESTS: usize = 100;

impl ManifestProgress {
    pub(super) fn new(total: usize) -> Self {
        Self {
            total,
            done: Default::default(),
            started: std::time::Instant::now(),
        }
    }

    pub(super) fn one_more(&self) {
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
    pub(super) async fn write(
        &self,
        key: (Content, u32),
        change: BucketChange,
    ) -> Result<WrittenBucket> {
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
        let builder = || -> Result<_> {
            let output = self.writer.staging.new_output(&location)?;
            let builder = ManifestWriterBuilder::new(
                output,
                Some(self.snapshot_id),
                self.schema.clone(),
                self.spec.clone(),
            );
            Ok(match (content, self.v3) {
                (Content::Data, false) => builder.build_v2_data(),
                (Content::Deletes, false) => builder.build_v2_deletes(),
                (Content::Data, true) => builder.build_v3_data(),
                (Content::Deletes, true) => builder.build_v3_deletes(),
            })
        };
        let (written, next_live) = match EntryEncoder::for_partition(content, &self.partition_type)
        {
            Some(mut encoder) => {
                let next_live = self.entries(kept, deleted, adds, &mut Encoded(&mut encoder))?;
                // iceberg writes the header and the descriptor; the entries are ours.
                let descriptor = builder()?.write_manifest_file().await?;
                let empty = self.writer.take_from_staging(&location).await?;
                let (bytes, written) = encoder.finish(empty, descriptor)?;
                self.writer.publish(&location, bytes).await?;
                (written, next_live)
            }
            None => {
                let mut manifest = builder()?;
                let next_live = self.entries(kept, deleted, adds, &mut Iceberg(&mut manifest))?;
                let written = manifest.write_manifest_file().await?;
                self.writer.publish_from_staging(&location).await?;
                (written, next_live)
            }
        };
        crash::point("mirror-after-manifest");
        self.progress.one_more();
        Ok((key, Some(written), next_live))
    }

    /// Hands the bucket's entries to `manifest` (kept, deleted, then added files) and
    /// answers its live files after this snapshot.
    fn entries(
        &self,
        kept: Vec<LiveFile>,
        deleted: Vec<LiveFile>,
        adds: Vec<DataFile>,
        manifest: &mut dyn Entries,
    ) -> Result<Vec<LiveFile>> {
        let spec_id = self.spec.spec_id();
        for live in &kept {
            manifest.existing(
                &carried_over(live, spec_id, &self.partition_type)?,
                live.snapshot_id,
                live.sequence_number,
                Some(live.file_sequence_number),
            )?;
        }
        for gone in &deleted {
            manifest.deleted(
                &carried_over(gone, spec_id, &self.partition_type)?,
                self.snapshot_id,
                gone.sequence_number,
                Some(gone.file_sequence_number),
            )?;
        }
        let mut next_live = kept;
        for file in adds {
            let first_row_id = file.first_row_id();
            let sequence_number = match self.data_sequence_numbers.get(file.file_path()) {
                // An earlier data sequence number is stated with the same file sequence
                // number: Java 1.10 reads `_last_updated_sequence_number` from the latter
                // (fixed by apache/iceberg#17039). Iceberg writes such an entry as EXISTING.
                Some(&earlier) if earlier < self.sequence_number => {
                    manifest.existing(&file, self.snapshot_id, earlier, Some(earlier))?;
                    earlier
                }
                _ => {
                    manifest.added(&file, self.snapshot_id, self.sequence_number)?;
                    self.sequence_number
                }
            };
            next_live.push(LiveFile {
                data_file: file,
                snapshot_id: self.snapshot_id,
                sequence_number,
                file_sequence_number: sequence_number,
                first_row_id,
            });
        }
        Ok(next_live)
    }
}

/// Where a bucket's manifest entries go: iceberg's writer, or [`EntryEncoder`].
trait Entries {
    fn existing(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence: i64,
        file_sequence: Option<i64>,
    ) -> Result<()>;
    /// A file deleted by the snapshot `snapshot_id` (the manifest's own).
    fn deleted(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence: i64,
        file_sequence: Option<i64>,
    ) -> Result<()>;
    fn added(&mut self, file: &DataFile, snapshot_id: i64, sequence: i64) -> Result<()>;
}

struct Iceberg<'a>(&'a mut iceberg::spec::ManifestWriter);

impl Entries for Iceberg<'_> {
    fn existing(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence: i64,
        file_sequence: Option<i64>,
    ) -> Result<()> {
        Ok(self
            .0
            .add_existing_file(file.clone(), snapshot_id, sequence, file_sequence)?)
    }

    fn deleted(
        &mut self,
        file: &DataFile,
        _snapshot_id: i64,
        sequence: i64,
        file_sequence: Option<i64>,
    ) -> Result<()> {
        Ok(self
            .0
            .add_delete_file(file.clone(), sequence, file_sequence)?)
    }

    fn added(&mut self, file: &DataFile, _snapshot_id: i64, sequence: i64) -> Result<()> {
        Ok(self.0.add_file(file.clone(), sequence)?)
    }
}

struct Encoded<'a>(&'a mut EntryEncoder);

impl Entries for Encoded<'_> {
    fn existing(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence: i64,
        file_sequence: Option<i64>,
    ) -> Result<()> {
        self.0.existing(file, snapshot_id, sequence, file_sequence)
    }

    fn deleted(
        &mut self,
        file: &DataFile,
        snapshot_id: i64,
        sequence: i64,
        file_sequence: Option<i64>,
    ) -> Result<()> {
        self.0.deleted(file, snapshot_id, sequence, file_sequence)
    }

    fn added(&mut self, file: &DataFile, snapshot_id: i64, sequence: i64) -> Result<()> {
        self.0.added(file, snapshot_id, sequence)
    }
}

/// Every entry of a manifest, live or deleted; none when another sync already deleted it.
pub(super) async fn read_entries(
    writer: &MetadataWriter,
    manifest: &ManifestFile,
) -> Result<Vec<iceberg::spec::ManifestEntryRef>> {
    let location = &manifest.manifest_path;
    let Some(bytes) = writer.read_avro(location).await? else {
        return Ok(Vec::new());
    };
    Ok(parse_manifest(writer, manifest, bytes)
        .await?
        .entries()
        .to_vec())
}

/// A manifest read from `bytes`, through the in-memory staging the iceberg reader wants.
pub(super) async fn parse_manifest(
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
pub(super) async fn read_live_files(
    writer: &MetadataWriter,
    manifest: &ManifestFile,
) -> Result<Vec<LiveFile>> {
    let bytes = writer.read_avro_required(&manifest.manifest_path).await?;
    let parsed = parse_manifest(writer, manifest, bytes).await?;
    // First row ID inheritance (v3): a data file without one takes the manifest's plus the
    // record counts of the files before it that had none, live or not, in manifest order.
    let too_many = || {
        Error::CatalogState(format!(
            "{}: its row IDs pass 2^63; rebuild the mirror (delete the Glue table and sync again)",
            manifest.manifest_path
        ))
    };
    let mut next_row_id = match manifest.first_row_id {
        Some(id) => Some(i64::try_from(id).map_err(|_| too_many())?),
        None => None,
    };
    let mut live = Vec::new();
    for e in parsed.entries() {
        let file = e.data_file();
        let first_row_id = match (file.first_row_id(), next_row_id) {
            (Some(id), _) => Some(id),
            (None, Some(next)) if file.content_type() == DataContentType::Data => {
                let count = i64::try_from(file.record_count()).map_err(|_| too_many())?;
                next_row_id = Some(next.checked_add(count).ok_or_else(too_many)?);
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
pub(super) fn newest_entry_per_path(
    files: impl DoubleEndedIterator<Item = LiveFile>,
) -> Vec<LiveFile> {
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
pub(super) fn carried_over(
    live: &LiveFile,
    spec_id: i32,
    partition_type: &StructType,
) -> Result<DataFile> {
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
pub(super) fn promoted_partition(
    partition: &Struct,
    partition_type: &StructType,
) -> Option<Struct> {
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

pub(super) fn data_file(file: &PlannedFile, spec_id: i32) -> Result<DataFile> {
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
        .first_row_id(file.first_row_id)
        .build()
        .map_err(|e| Error::data_file(&file.location, e))
}
