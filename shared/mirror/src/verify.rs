//! `verify`: proves that a mirror holds what its Delta table holds at a version, from
//! metadata alone (the Delta log, the Iceberg metadata, manifest list and manifests; no data
//! rows, no footers):
//!
//! - the Iceberg snapshot of that version has exactly the Delta version's active files, with
//!   the same sizes, record counts (where the log states them) and partition values;
//! - each file's deleted rows (its deletion vector's cardinality) equal the rows of the
//!   delete files that name it, and no delete file names a file that is not there;
//! - the snapshot mirrors that very commit (its recorded hash) of that very table (its id),
//!   under the schema the mapping rules give;
//! - every snapshot of the history names a Delta version, each newer than its parent's.
//!
//! Comparing is pure ([`compare_files`], [`check_history`]); [`verify`] only reads.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use iceberg::spec::{DataContentType, DataFile, Literal, PrimitiveLiteral, SnapshotRef, Struct};

use lakemirror_plan::layout::referenced_data_file;
use lakemirror_plan::properties::{DELTA_COMMIT_HASH, DELTA_VERSION, OmittedDeclaration};
use lakemirror_plan::target::default_table_name;
use lakemirror_plan::{CommittedTable, PlannedFile, SnapshotPlan, plan_full};
use lakemirror_storage::{IoCounters, IoTotals, TableStorage};

use crate::error::{Error, Result};
use crate::status::CatalogManagedStatus;
use crate::sync::mirror_stores;
use lakemirror_delta::{CatalogManaged, DeltaLog, DeltaSnapshot};
use lakemirror_iceberg::catalog::{CatalogTable, Lakehouse};
use lakemirror_iceberg::writer::MetadataWriter;

/// Differences listed in a report; the rest are only counted.
pub const DEFAULT_MAX_DIFFERENCES: usize = 20;

/// What to verify.
#[derive(Debug, Clone)]
pub struct VerifyRequest {
    /// The Delta table root: `s3://bucket/path`, `file:///path` or a local path.
    pub table_uri: String,
    pub database: String,
    /// Glue table name [default: the table folder's name, as glue-sync names it].
    pub table: Option<String>,
    /// Where the mirror's Iceberg metadata lives [default: `<table>/_lakemirror/iceberg`].
    pub metadata_uri: Option<String>,
    /// The Delta version to verify [default: the one the mirror's current snapshot mirrors].
    pub version: Option<i64>,
    /// How many differences the report lists.
    pub max_differences: usize,
}

/// One way the mirror differs from the Delta table.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    pub kind: DifferenceKind,
    /// The data file concerned, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DifferenceKind {
    /// Active in Delta, not in the snapshot.
    MissingFile,
    /// In the snapshot, not active in Delta.
    ExtraFile,
    FileSize,
    RecordCount,
    PartitionValues,
    /// A file's deleted rows differ from the rows of the delete files naming it.
    DeletedRows,
    /// A delete file names a data file the snapshot does not hold.
    DanglingDeletes,
    /// The snapshots' Delta versions, commit or table do not match the log.
    History,
    Schema,
}

impl Difference {
    /// `file: message`, or the message alone.
    pub fn message_with_file(&self) -> String {
        match &self.file {
            Some(file) => format!("{file}: {}", self.message),
            None => self.message.clone(),
        }
    }

    fn new(kind: DifferenceKind, file: Option<&str>, message: String) -> Self {
        Self {
            kind,
            file: file.map(str::to_string),
            message,
        }
    }
}

/// The outcome of a verification, printed as the last line of the CLI.
#[derive(Debug, Clone, serde::Serialize)]
pub struct VerifyReport {
    /// True when nothing differs.
    pub equal: bool,
    pub database: String,
    pub table: String,
    pub delta_version: i64,
    pub snapshot_id: i64,
    pub metadata_location: String,
    /// Active files of the Delta version.
    pub delta_files: usize,
    /// Live data and delete files of the snapshot.
    pub data_files: usize,
    pub delete_files: usize,
    /// Files whose record count the log does not state (checked only by readers).
    pub record_counts_unchecked: usize,
    pub snapshots_checked: usize,
    /// All differences found; `differences` lists the first `max_differences`.
    pub difference_count: usize,
    pub differences: Vec<Difference>,
    pub elapsed_ms: u64,
    pub io: IoTotals,
    /// Of a catalog-managed Delta table: the versions its catalog ratified and published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catalog_managed: Option<CatalogManagedStatus>,
}

/// Reads the Delta log at the version and the mirror's snapshot of it, and compares them.
pub async fn verify(
    lake: &Lakehouse,
    request: &VerifyRequest,
    counters: Arc<IoCounters>,
) -> Result<VerifyReport> {
    let started = Instant::now();
    let (data, metadata_store) = mirror_stores(
        &lake.stores,
        &request.table_uri,
        request.metadata_uri.as_deref(),
        &counters,
    )?;
    let name = request
        .table
        .clone()
        .unwrap_or_else(|| default_table_name(&request.table_uri));
    let read = lake
        .load(&request.database, &name, data.root_uri(), &metadata_store)
        .await?;
    let Some(committed) = read.current.as_ref() else {
        return Err(Error::NotAMirror(format!(
            "{} is not a mirror lakemirror can read (no Glue table, or its metadata is gone): run glue-sync first, or name the Glue table",
            read.full_name()
        )));
    };
    let metadata = &committed.metadata;
    let chain: Vec<SnapshotVersion> = ancestry(metadata);
    let mut differences = check_history(&chain);
    // Another engine's snapshot on top (a pyiceberg add_files, an Athena INSERT) is a
    // difference found by `check_history`; the newest mirrored version is still checked.
    let (version, mirrored) = mirrored_version(request, &read, committed, &chain)?;
    let snapshot = metadata
        .snapshot_by_id(mirrored.snapshot_id)
        .ok_or_else(|| {
            Error::catalog_state(format!("snapshot {} vanished", mirrored.snapshot_id))
        })?;

    let (log, catalog_managed) =
        catalog_managed_status(lake.delta_log(data.clone()), committed).await?;
    let delta = match log.snapshot(Some(version)).await {
        Ok(delta) => delta,
        // Not a difference: a reader without the catalog cannot see the ratified versions.
        Err(lakemirror_delta::Error::NoSuchVersion { .. })
            if matches!(log.tail(), Some(CatalogManaged::PublishedOnly { .. })) =>
        {
            return Err(Error::catalog_state(format!(
                "cannot verify {} at Delta version {version}: the table is catalog-managed and that version is past its published log; without its catalog the ratified versions cannot be read. Give the Unity Catalog URL (UC_URL) and its token",
                read.full_name()
            )));
        }
        Err(e @ lakemirror_delta::Error::NoSuchVersion { .. }) if request.version.is_none() => {
            let reason = e.to_string();
            // The mirror claims a version the log does not have.
            differences.push(Difference::new(
                DifferenceKind::History,
                None,
                format!("the current snapshot mirrors Delta version {version}, but {reason}"),
            ));
            return Ok(VerifyReport {
                catalog_managed,
                ..report(
                    request,
                    (&read.database, &read.name),
                    committed,
                    (version, mirrored.snapshot_id),
                    Counts::default(),
                    differences,
                    started,
                    &counters,
                )
            });
        }
        Err(e) => return Err(e.into()),
    };
    differences.extend(identity_differences(mirrored, &delta, committed, version));

    let writer = MetadataWriter::new(metadata_store, data.clone());
    let (found, counts) =
        content_differences(&writer, &data, committed, snapshot, &delta, chain.len()).await?;
    differences.extend(found);
    Ok(VerifyReport {
        catalog_managed,
        ..report(
            request,
            (&read.database, &read.name),
            committed,
            (version, mirrored.snapshot_id),
            counts,
            differences,
            started,
            &counters,
        )
    })
}

/// The Delta version to verify (asked for, or the one the mirror holds) and the snapshot
/// of the `chain` that mirrors it.
fn mirrored_version<'c>(
    request: &VerifyRequest,
    read: &CatalogTable,
    committed: &CommittedTable,
    chain: &'c [SnapshotVersion],
) -> Result<(i64, &'c SnapshotVersion)> {
    let newest_mirrored = chain.iter().find_map(|s| s.delta_version);
    let version = match request
        .version
        .or_else(|| committed.delta_version())
        .or(newest_mirrored)
    {
        Some(version) => version,
        None => {
            return Err(Error::NotAMirror(format!(
                "{} has no snapshot that names a Delta version: it was not written by lakemirror",
                read.full_name()
            )));
        }
    };
    let Some(mirrored) = chain.iter().find(|s| s.delta_version == Some(version)) else {
        return Err(Error::NotAMirror(format!(
            "{} holds no snapshot of Delta version {version} (expired, or not mirrored yet); the oldest it holds is {}",
            read.full_name(),
            chain
                .iter()
                .filter_map(|s| s.delta_version)
                .min()
                .map_or("none".to_string(), |v| v.to_string())
        )));
    };
    Ok((version, mirrored))
}

/// Of a catalog-managed Delta table: the log with the commits its catalog ratified as its
/// tail, and what its catalog ratified and what is published.
async fn catalog_managed_status(
    log: DeltaLog,
    committed: &CommittedTable,
) -> Result<(DeltaLog, Option<CatalogManagedStatus>)> {
    let Some(id) = committed.catalog_table_id() else {
        return Ok((log, None));
    };
    let log = log
        .ask_catalog_known_as(id, committed.catalog_table_name())
        .await?;
    let read = log.tail();
    let status = CatalogManagedStatus {
        table_id: Some(id.to_string()),
        ratified_version: read.and_then(|r| r.ratified_version()),
        published_version: log.published_version().await?,
        limited: read.and_then(|r| r.limited()),
    };
    Ok((log, Some(status)))
}

/// Whether the `mirrored` snapshot was made from this very commit of this very table (a
/// re-created table reuses version numbers).
fn identity_differences(
    mirrored: &SnapshotVersion,
    delta: &DeltaSnapshot,
    committed: &CommittedTable,
    version: i64,
) -> Vec<Difference> {
    let mut found = Vec::new();
    if let (Some(recorded), Some(read_hash)) = (mirrored.commit_hash, delta.commit_hash)
        && recorded != read_hash
    {
        found.push(Difference::new(
            DifferenceKind::History,
            None,
            format!(
                "snapshot {} mirrors another commit {version} than the log holds (the table was re-created, or the snapshot was written from another log): sync again to rebuild it",
                mirrored.snapshot_id
            ),
        ));
    }
    if let (Some(recorded), Some(id)) = (
        committed.delta_table_id(),
        delta.metadata().and_then(|m| m.id.as_deref()),
    ) && recorded != id
    {
        found.push(Difference::new(
            DifferenceKind::History,
            None,
            format!("the mirror was made from Delta table {recorded}, the log is of table {id}"),
        ));
    }
    found
}

/// The columns `lakemirror.omitted-columns` declares left out (`declared`) against those the
/// Delta version's schema leaves out (`plan`'s): a property changed by hand, or by someone
/// else, tells readers of columns that are there, or hides why one is missing.
fn omitted_difference(
    declared: &[OmittedDeclaration],
    plan: &SnapshotPlan,
    version: i64,
) -> Option<Difference> {
    let names = |columns: &mut dyn Iterator<Item = &OmittedDeclaration>| -> BTreeSet<String> {
        columns.map(|c| c.column.clone()).collect()
    };
    let declared = names(&mut declared.iter());
    let left_out = names(&mut plan.omitted_columns.iter().flatten());
    (declared != left_out).then(|| {
        Difference::new(
            DifferenceKind::Schema,
            None,
            format!(
                "lakemirror.omitted-columns declares {declared:?} left out, but Delta version {version}'s schema leaves out {left_out:?}: the property was changed by someone else; a rebuild (delete the catalog table, sync again) repairs it"
            ),
        )
    })
}

/// The files (and schema) of `snapshot` against those Delta's snapshot `delta` maps to.
async fn content_differences(
    writer: &MetadataWriter,
    data: &TableStorage,
    committed: &CommittedTable,
    snapshot: &SnapshotRef,
    delta: &DeltaSnapshot,
    snapshots_checked: usize,
) -> Result<(Vec<Difference>, Counts)> {
    let metadata = &committed.metadata;
    // What the mirror should hold, planned against the snapshot's own schema.
    let mut view = committed.view()?;
    if let Some(schema) = metadata.schema_by_id(snapshot.schema_id().unwrap_or_default()) {
        view.schema = schema.as_ref().clone();
    }
    let plan = plan_full(data.scope(), Some(&view), delta, view.format_version)?;
    let mut found = Vec::new();
    if plan.schema.is_some() {
        found.push(Difference::new(
            DifferenceKind::Schema,
            None,
            format!(
                "the schema of snapshot {} is not the one Delta version {}'s schema maps to (columns or field IDs differ)",
                snapshot.snapshot_id(),
                delta.version
            ),
        ));
    }
    // The property says what the current schema leaves out: an older snapshot's may differ.
    if metadata.current_snapshot_id() == Some(snapshot.snapshot_id()) {
        found.extend(omitted_difference(
            &view.omitted_columns,
            &plan,
            delta.version,
        ));
    }
    let live = writer.live_files_of(metadata, snapshot).await?;
    found.extend(compare_files(&plan.added, &live));
    let counts = Counts {
        delta_files: plan.added.len(),
        data_files: live
            .iter()
            .filter(|f| f.content_type() == DataContentType::Data)
            .count(),
        delete_files: live
            .iter()
            .filter(|f| f.content_type() != DataContentType::Data)
            .count(),
        record_counts_unchecked: plan
            .added
            .iter()
            .filter(|f| f.record_count.is_none())
            .count(),
        snapshots_checked,
    };
    Ok((found, counts))
}

#[derive(Debug, Default)]
struct Counts {
    delta_files: usize,
    data_files: usize,
    delete_files: usize,
    record_counts_unchecked: usize,
    snapshots_checked: usize,
}

#[allow(clippy::too_many_arguments)]
fn report(
    request: &VerifyRequest,
    (database, table): (&str, &str),
    committed: &CommittedTable,
    (delta_version, snapshot_id): (i64, i64),
    counts: Counts,
    mut differences: Vec<Difference>,
    started: Instant,
    counters: &IoCounters,
) -> VerifyReport {
    differences.sort_by(|a, b| (a.kind, &a.file).cmp(&(b.kind, &b.file)));
    let difference_count = differences.len();
    differences.truncate(request.max_differences);
    VerifyReport {
        equal: difference_count == 0,
        database: database.to_string(),
        table: table.to_string(),
        delta_version,
        snapshot_id,
        metadata_location: committed.metadata_location.clone(),
        delta_files: counts.delta_files,
        data_files: counts.data_files,
        delete_files: counts.delete_files,
        record_counts_unchecked: counts.record_counts_unchecked,
        snapshots_checked: counts.snapshots_checked,
        difference_count,
        differences,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        io: counters.totals(),
        catalog_managed: None,
    }
}

/// A snapshot of the mirror's history, as far as verification is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotVersion {
    pub snapshot_id: i64,
    /// Its `delta.version`; None when missing or not a number.
    pub delta_version: Option<i64>,
    /// Its `lakemirror.delta.commit-hash`, when recorded.
    pub commit_hash: Option<u64>,
    /// What its summary says it did (`operation=append, added-data-files=1, …`): names a
    /// snapshot another engine committed.
    pub summary: String,
}

/// The current snapshot and its ancestors still in the metadata, newest first.
fn ancestry(metadata: &iceberg::spec::TableMetadata) -> Vec<SnapshotVersion> {
    let mut chain = Vec::new();
    let mut next = metadata.current_snapshot();
    while let Some(snapshot) = next {
        // A cycle is a corrupt table; stop rather than loop.
        if chain
            .iter()
            .any(|s: &SnapshotVersion| s.snapshot_id == snapshot.snapshot_id())
        {
            break;
        }
        let summary = &snapshot.summary().additional_properties;
        let mut said: Vec<String> = vec![format!(
            "operation={}",
            snapshot.summary().operation.as_str()
        )];
        for key in [
            "added-data-files",
            "deleted-data-files",
            "added-records",
            "deleted-records",
            "engine-name",
            "engine-version",
        ] {
            if let Some(value) = summary.get(key) {
                said.push(format!("{key}={value}"));
            }
        }
        chain.push(SnapshotVersion {
            summary: said.join(", "),
            snapshot_id: snapshot.snapshot_id(),
            delta_version: summary.get(DELTA_VERSION).and_then(|v| v.parse().ok()),
            commit_hash: summary
                .get(DELTA_COMMIT_HASH)
                .and_then(|h| u64::from_str_radix(h, 16).ok()),
        });
        next = snapshot
            .parent_snapshot_id()
            .and_then(|id| metadata.snapshot_by_id(id));
    }
    chain
}

/// Every snapshot names a Delta version, each newer than its parent's (`chain` newest first).
pub fn check_history(chain: &[SnapshotVersion]) -> Vec<Difference> {
    let mut differences = Vec::new();
    for (i, snapshot) in chain.iter().enumerate() {
        let Some(version) = snapshot.delta_version else {
            differences.push(Difference::new(
                DifferenceKind::History,
                None,
                format!(
                    "snapshot {} names no Delta version ({DELTA_VERSION}): another engine committed to the mirror ({}); the next glue-sync puts the Delta table's state back on top",
                    snapshot.snapshot_id, snapshot.summary
                ),
            ));
            continue;
        };
        if let Some(parent) = chain.get(i + 1)
            && let Some(parent_version) = parent.delta_version
            && parent_version >= version
        {
            differences.push(Difference::new(
                DifferenceKind::History,
                None,
                format!(
                    "snapshot {} mirrors Delta version {version}, not newer than its parent {}'s {parent_version}",
                    snapshot.snapshot_id, parent.snapshot_id
                ),
            ));
        }
    }
    differences
}

/// The Delta version's active files (as planned) against the snapshot's live data and
/// delete files.
pub fn compare_files(expected: &[PlannedFile], live: &[DataFile]) -> Vec<Difference> {
    let mut differences = Vec::new();
    let mut data: BTreeMap<&str, &DataFile> = BTreeMap::new();
    let mut deleted_rows: HashMap<String, u64> = HashMap::new();
    for file in live {
        if file.content_type() == DataContentType::Data {
            if data.insert(file.file_path(), file).is_some() {
                differences.push(Difference::new(
                    DifferenceKind::ExtraFile,
                    Some(file.file_path()),
                    "the snapshot holds this data file twice".into(),
                ));
            }
        } else {
            match referenced_data_file(file) {
                Some(path) => *deleted_rows.entry(path).or_default() += file.record_count(),
                None => differences.push(Difference::new(
                    DifferenceKind::DanglingDeletes,
                    Some(file.file_path()),
                    "a delete file that names no data file: lakemirror writes only position deletes for one file".into(),
                )),
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    for want in expected {
        let path = want.location.as_str();
        seen.insert(path);
        let Some(have) = data.get(path) else {
            differences.push(Difference::new(
                DifferenceKind::MissingFile,
                Some(path),
                "active in Delta, missing from the snapshot".into(),
            ));
            continue;
        };
        if have.file_size_in_bytes() != want.size {
            differences.push(Difference::new(
                DifferenceKind::FileSize,
                Some(path),
                format!(
                    "{} bytes in Delta, {} in the snapshot",
                    want.size,
                    have.file_size_in_bytes()
                ),
            ));
        }
        if let Some(records) = want.record_count
            && records != have.record_count()
        {
            differences.push(Difference::new(
                DifferenceKind::RecordCount,
                Some(path),
                format!(
                    "{records} records in Delta, {} in the snapshot",
                    have.record_count()
                ),
            ));
        }
        if partition_values(&want.partition) != partition_values(have.partition()) {
            differences.push(Difference::new(
                DifferenceKind::PartitionValues,
                Some(path),
                format!(
                    "partition values {:?} in Delta, {:?} in the snapshot",
                    partition_values(&want.partition),
                    partition_values(have.partition())
                ),
            ));
        }
        let want_deleted = want
            .deletion_vector
            .as_ref()
            .map_or(0, |dv| u64::try_from(dv.cardinality).unwrap_or(0));
        let have_deleted = deleted_rows.get(path).copied().unwrap_or(0);
        if want_deleted != have_deleted {
            differences.push(Difference::new(
                DifferenceKind::DeletedRows,
                Some(path),
                format!(
                    "{want_deleted} rows deleted in Delta (deletion vector), {have_deleted} by the snapshot's delete files"
                ),
            ));
        }
    }
    for path in data.keys().filter(|p| !seen.contains(*p)) {
        differences.push(Difference::new(
            DifferenceKind::ExtraFile,
            Some(path),
            "in the snapshot, not active in Delta".into(),
        ));
    }
    let mut dangling: Vec<&String> = deleted_rows
        .keys()
        .filter(|p| !data.contains_key(p.as_str()))
        .collect();
    dangling.sort();
    for path in dangling {
        differences.push(Difference::new(
            DifferenceKind::DanglingDeletes,
            Some(path),
            "delete files name this data file, which the snapshot does not hold".into(),
        ));
    }
    differences
}

/// Partition values as compared: a value written before its column was widened (`int` in
/// an old manifest, `long` now) is the same value.
fn partition_values(partition: &Struct) -> Vec<Option<Literal>> {
    partition
        .iter()
        .map(|value| {
            value.map(|literal| match literal {
                Literal::Primitive(PrimitiveLiteral::Int(v)) => {
                    Literal::Primitive(PrimitiveLiteral::Long(i64::from(*v)))
                }
                other => other.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{DataFileBuilder, DataFileFormat};
    use lakemirror_delta::deletion_vector::DeletionVector;
    use lakemirror_plan::metrics::ColumnMetrics;

    fn planned(path: &str, records: Option<u64>, day: i32, deleted: Option<i64>) -> PlannedFile {
        PlannedFile {
            location: format!("s3://b/t/{path}"),
            partition: Struct::from_iter([Some(Literal::int(day))]),
            size: 100,
            record_count: records,
            deletion_vector: deleted.map(|cardinality| DeletionVector {
                storage_type: "u".into(),
                path_or_inline_dv: "ab".into(),
                offset: Some(1),
                size_in_bytes: 10,
                cardinality,
            }),
            metrics: ColumnMetrics::default(),
            first_row_id: None,
            data_sequence_number: None,
        }
    }

    fn data(path: &str, records: u64, day: i64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("s3://b/t/{path}"))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter([Some(Literal::long(day))]))
            .record_count(records)
            .file_size_in_bytes(100)
            .build()
            .unwrap()
    }

    fn deletes(path: &str, rows: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(format!(
                "s3://b/t/_lakemirror/iceberg/deletes/{path}.parquet"
            ))
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::from_iter([Some(Literal::long(1))]))
            .record_count(rows)
            .file_size_in_bytes(10)
            .referenced_data_file(Some(format!("s3://b/t/{path}")))
            .build()
            .unwrap()
    }

    fn kinds(differences: &[Difference]) -> Vec<(DifferenceKind, Option<String>)> {
        differences
            .iter()
            .map(|d| {
                (
                    d.kind,
                    d.file
                        .as_deref()
                        .map(|f| f.rsplit('/').next().unwrap_or(f).to_string()),
                )
            })
            .collect()
    }

    fn table() -> (Vec<PlannedFile>, Vec<DataFile>) {
        (
            vec![
                planned("a.parquet", Some(5), 1, None),
                planned("b.parquet", Some(7), 2, Some(3)),
                planned("c.parquet", None, 3, None),
            ],
            vec![
                data("a.parquet", 5, 1),
                data("b.parquet", 7, 2),
                deletes("b.parquet", 3),
                data("c.parquet", 9, 3),
            ],
        )
    }

    #[test]
    fn an_equal_mirror_has_no_differences() {
        let (expected, live) = table();
        // The partition value in the manifest is the widened long of Delta's int: equal.
        assert_eq!(compare_files(&expected, &live), vec![]);
    }

    #[test]
    fn a_removed_entry_is_a_missing_file() {
        let (expected, mut live) = table();
        live.remove(0);
        assert_eq!(
            kinds(&compare_files(&expected, &live)),
            vec![(DifferenceKind::MissingFile, Some("a.parquet".into()))]
        );
    }

    #[test]
    fn a_changed_record_count_is_named() {
        let (expected, mut live) = table();
        live[0] = data("a.parquet", 6, 1);
        let found = compare_files(&expected, &live);
        assert_eq!(
            kinds(&found),
            vec![(DifferenceKind::RecordCount, Some("a.parquet".into()))]
        );
        assert!(
            found[0]
                .message
                .contains("5 records in Delta, 6 in the snapshot"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn a_dropped_delete_file_shows_as_deleted_rows() {
        let (expected, mut live) = table();
        live.remove(2);
        let found = compare_files(&expected, &live);
        assert_eq!(
            kinds(&found),
            vec![(DifferenceKind::DeletedRows, Some("b.parquet".into()))]
        );
        assert!(
            found[0].message.starts_with("3 rows deleted in Delta"),
            "{}",
            found[0].message
        );
    }

    #[test]
    fn extra_files_other_partitions_and_orphan_deletes_are_named() {
        let (expected, mut live) = table();
        live[0] = data("a.parquet", 5, 4);
        live.push(data("z.parquet", 1, 1));
        live.push(deletes("gone.parquet", 2));
        assert_eq!(
            kinds(&compare_files(&expected, &live)),
            vec![
                (DifferenceKind::PartitionValues, Some("a.parquet".into())),
                (DifferenceKind::ExtraFile, Some("z.parquet".into())),
                (DifferenceKind::DanglingDeletes, Some("gone.parquet".into())),
            ]
        );
    }

    fn snapshot(id: i64, version: Option<i64>) -> SnapshotVersion {
        SnapshotVersion {
            snapshot_id: id,
            delta_version: version,
            commit_hash: None,
            summary: "operation=append".into(),
        }
    }

    #[test]
    fn a_history_must_grow_with_the_delta_versions() {
        assert_eq!(
            check_history(&[
                snapshot(3, Some(7)),
                snapshot(2, Some(5)),
                snapshot(1, Some(0))
            ]),
            vec![]
        );
        let found = check_history(&[
            snapshot(3, Some(5)),
            snapshot(2, Some(5)),
            snapshot(1, None),
        ]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].message.contains("not newer than its parent 2's 5"),
            "{}",
            found[0].message
        );
        assert!(
            found[1]
                .message
                .contains("snapshot 1 names no Delta version"),
            "{}",
            found[1].message
        );
    }
}
