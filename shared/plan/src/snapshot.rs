//! Pure planning: Delta actions + what Iceberg already holds -> one snapshot plan per Delta
//! version. No IO here; lakemirror-iceberg's writer carries the plans out.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{
    FormatVersion, Literal, MappedField, NameMapping, Operation, PrimitiveType, Schema, Struct,
    Type,
};

use crate::error::{Error, Result};
use crate::format_version::requested_format_version;
pub use crate::format_version::{FORMAT_VERSION_PROPERTY, parse_format_version};
use crate::history::HistorySettings;
use crate::metrics::{ColumnMetrics, column_metrics};
use crate::name_mapping::{DECOY_FLOOR, name_mapping};
use crate::partition::{PARTITION_TIMEZONE_PROPERTY, PartitionZone, partition_literal};
use crate::properties::OmittedDeclaration;
use crate::schema::{iceberg_schema, max_column_mapping_id, physical_names};
use lakemirror_delta::actions::{
    Add, Metadata, Protocol, deleted_file_retention_ms, num_records, unsupported_feature,
};
use lakemirror_delta::deletion_vector::DeletionVector;
use lakemirror_delta::schema::parse_schema;
use lakemirror_delta::{CatalogManaged, DeltaCommit, DeltaSnapshot, LogPath, TableScope};

/// What the planner needs to know of the Iceberg table as it is now.
#[derive(Debug, Clone)]
pub struct IcebergView {
    pub schema: Schema,
    pub last_column_id: i32,
    /// The ID the next new schema gets.
    pub next_schema_id: i32,
    /// Source column names of the identity partition fields, in order.
    pub partition_columns: Vec<String>,
    /// The keys of those columns in `add.partitionValues`: their physical names when
    /// column mapping is on, else the same names.
    pub partition_keys: Vec<String>,
    /// The Delta version of the current snapshot, if any.
    pub delta_version: Option<i64>,
    /// Whether the schema's IDs are Delta's column-mapping IDs.
    pub column_mapped: bool,
    /// Physical names of column-mapped fields by field ID: the keys of `add.stats`.
    pub physical_names: HashMap<i32, String>,
    /// The table's `schema.name-mapping.default`; it only grows (old files keep resolving).
    pub name_mapping: Option<NameMapping>,
    /// Columns the mirror leaves out, with why (`lakemirror.omitted-columns`).
    pub omitted_columns: Vec<OmittedDeclaration>,
    /// Columns widened from a smaller integer to long, whose older files Spark's vectorized
    /// reader cannot read (`lakemirror.widened-to-long`).
    pub widened_to_long: Vec<String>,
    /// Where `timestamp` partition values without an offset were written (None: UTC).
    pub partition_zone: Option<PartitionZone>,
    /// The Iceberg format version of the mirror: variant, geo and column defaults exist
    /// from 3 on.
    pub format_version: FormatVersion,
    /// Whether the mirror carries Delta's row tracking as its row lineage.
    pub row_lineage: bool,
}

/// A data file to add, as the Delta log describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedFile {
    /// Full URI with the real object key.
    pub location: String,
    pub partition: Struct,
    pub size: u64,
    /// From `add.stats.numRecords`; None means the Parquet footer must be read.
    pub record_count: Option<u64>,
    /// Rows Delta deleted from this file; they become an Iceberg position-delete file.
    pub deletion_vector: Option<DeletionVector>,
    /// Column bounds and counts proven by `add.stats`.
    pub metrics: ColumnMetrics,
    /// Row lineage of a row-tracking table in a v3 mirror: the row ID of the file's first
    /// row (`add.baseRowId`), Iceberg's `first_row_id`.
    pub first_row_id: Option<i64>,
    /// ... and the version that first committed the file (`add.defaultRowCommitVersion`),
    /// the data sequence number its rows' `_last_updated_sequence_number` reads.
    pub data_sequence_number: Option<i64>,
}

/// One Iceberg snapshot to write, for one Delta version.
#[derive(Debug, Clone, Default)]
pub struct SnapshotPlan {
    pub delta_version: i64,
    pub commit_timestamp_ms: i64,
    /// The hash of the Delta commit file (see [`DeltaCommit::content_hash`]), when read: the
    /// next sync checks that the log still holds this very commit.
    pub commit_hash: Option<u64>,
    /// The Delta table's `metaData.id`, when this version's metadata is known.
    pub delta_table_id: Option<String>,
    /// Whether the Delta table is catalog-managed, with its catalog's id, when the sync knows
    /// (set by the sync from how it read the log; planning leaves it None).
    pub catalog_table_id: Option<Option<String>>,
    /// The catalog's name of that table, when its catalog answered by name (set with
    /// `catalog_table_id`).
    pub catalog_table_name: Option<String>,
    /// The oldest `deletionTimestamp` of the files this version removed (else its commit
    /// time): VACUUM may delete them one retention period later.
    pub removed_at_ms: Option<i64>,
    pub operation: Operation,
    /// The schema (and partition columns) when they are new or changed at this version.
    pub schema: Option<Schema>,
    /// Physical names of column-mapped fields by field ID, when `schema` is set.
    pub physical_names: HashMap<i32, String>,
    /// The name mapping, when it changes at this version.
    pub name_mapping: Option<NameMapping>,
    /// The columns left out of `schema`, with why, when that list changes.
    pub omitted_columns: Option<Vec<OmittedDeclaration>>,
    /// The columns widened from a smaller integer to long, when that list changes: while
    /// there are any, the mirror asks Spark to read it row by row
    /// ([`crate::properties::SPARK_VECTORIZATION_PROPERTY`]).
    pub widened_to_long: Option<Vec<String>>,
    /// The fields of `schema` of Iceberg v3 types iceberg-rust cannot express (held as a
    /// placeholder), by field ID, when `schema` is set.
    pub v3_types: BTreeMap<i32, String>,
    /// `lakemirror.partition-values.timezone` as this version's metadata states it (inner
    /// None: not set); None when the version has no metadata.
    pub partition_zone: Option<Option<String>>,
    pub partition_columns: Vec<String>,
    pub added: Vec<PlannedFile>,
    /// Locations of data files that leave the table.
    pub removed: Vec<String>,
    /// The snapshot holds exactly `added`: nothing of the previous snapshot carries over.
    pub replace_all: bool,
    /// `delta.deletedFileRetentionDuration` in ms, when this version's metadata is known.
    pub deleted_file_retention_ms: Option<i64>,
    /// The Iceberg format version the Delta table asks for (`lakemirror.iceberg.format-version`);
    /// only a new table takes it.
    pub format_version: Option<FormatVersion>,
    /// The `lakemirror.history.*` settings, when this version's metadata is known.
    pub history: Option<HistorySettings>,
    /// Row lineage from Delta's row tracking, when the mirror carries it (a v3 mirror of a
    /// table with `delta.enableRowTracking`): sequence numbers follow Delta versions, data
    /// files keep Delta's row IDs, and the table's next row ID follows this high-water mark.
    pub row_lineage: Option<RowLineage>,
}

impl SnapshotPlan {
    /// Records how the Delta table was read (`tail`, the log's): catalog-managed, with its
    /// catalog's id and the name the catalog answered by, or not. Every plan that ends a
    /// sync, grouped or fanned out too, records it: a mirror that lacks the id is never
    /// asked about again and stays at its published log without saying so.
    pub fn record_catalog(&mut self, tail: Option<&CatalogManaged>) {
        self.catalog_table_id = Some(tail.and_then(|c| c.table_id().map(str::to_string)));
        self.catalog_table_name = tail.and_then(|c| c.catalog_name().map(str::to_string));
    }
}

/// Delta's row tracking as a snapshot carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLineage {
    /// The highest row ID Delta assigned (`delta.rowTracking` `rowIdHighWaterMark`, else the
    /// last row of the files this version holds or adds), at least.
    pub high_water_mark: i64,
}

/// Plans the first snapshot of a table, or a rebuild after the log before the synced
/// version was cleaned up: the whole active file set at `snapshot.version`.
///
/// A new mirror (`current` None) is in `default_format` unless the Delta table asks for
/// another (`lakemirror.iceberg.format-version`); an existing one keeps its own.
pub fn plan_full(
    scope: &TableScope,
    current: Option<&IcebergView>,
    snapshot: &DeltaSnapshot,
    default_format: FormatVersion,
) -> Result<SnapshotPlan> {
    plan_full_of(
        scope,
        current,
        snapshot,
        snapshot.active.files.values(),
        default_format,
    )
}

/// [`plan_full`], letting go of each Delta add as its planned file is made: a bootstrap
/// never holds both forms of every file.
pub fn plan_full_taking(
    scope: &TableScope,
    current: Option<&IcebergView>,
    mut snapshot: DeltaSnapshot,
    default_format: FormatVersion,
) -> Result<SnapshotPlan> {
    let files = std::mem::take(&mut snapshot.active.files);
    plan_full_of(
        scope,
        current,
        &snapshot,
        files.into_values(),
        default_format,
    )
}

fn plan_full_of(
    scope: &TableScope,
    current: Option<&IcebergView>,
    snapshot: &DeltaSnapshot,
    files: impl Iterator<Item = impl std::borrow::Borrow<Add>>,
    default_format: FormatVersion,
) -> Result<SnapshotPlan> {
    let table = scope.root();
    let (Some(metadata), Some(protocol)) = (snapshot.metadata(), snapshot.protocol()) else {
        return Err(Error::malformed(table, "no metaData or protocol action"));
    };
    check_features(table, protocol, Some(metadata))?;
    // Over an existing mirror, a change it cannot follow starts a new history here.
    let existing = current.filter(|c| c.delta_version.is_some());
    if existing.is_some_and(|c| !c.column_mapped && column_mapped(metadata)) {
        return Err(renumbered(table, snapshot.version));
    }
    let requested_format = requested_format_version(table, metadata)?;
    let format_version = match current {
        Some(c) => c.format_version,
        None => requested_format.unwrap_or(default_format),
    };
    let history = names_through_history(
        table,
        current,
        &snapshot.active.earlier_metadata,
        format_version,
    );
    let next = next_schema(
        table,
        history.as_ref().or(current),
        metadata,
        format_version,
    )?;
    if let Some(c) = existing
        && (!same_partitioning(c, metadata, &next.partition_keys)
            || c.partition_zone != next.partition_zone)
    {
        return Err(repartitioned(table, snapshot.version, c, metadata));
    }
    let schema = next.schema;
    let changed = current.is_none_or(|c| c.schema.as_struct() != schema.as_struct());
    let partitions = PartitionReading {
        columns: &metadata.partition_columns,
        keys: &next.partition_keys,
        zone: next.partition_zone.as_ref(),
    };
    let tracked = row_lineage_carried(format_version, metadata);
    let added = files
        .map(|add| {
            planned_file(
                scope,
                &schema,
                &partitions,
                &next.physical_names,
                add.borrow(),
                tracked,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let row_lineage =
        tracked.then(|| RowLineage::of(snapshot.active.row_id_high_water_mark, &added));
    let operation = if current.is_some_and(|c| c.delta_version.is_some()) {
        Operation::Overwrite
    } else {
        Operation::Append
    };
    Ok(SnapshotPlan {
        delta_version: snapshot.version,
        commit_timestamp_ms: snapshot.timestamp_ms,
        commit_hash: snapshot.commit_hash,
        delta_table_id: metadata.id.clone(),
        catalog_table_id: None,
        catalog_table_name: None,
        // Over an existing mirror, the files this replaces left the Delta table at times
        // the checkpoint does not tell: date their removal as early as can be, so that the
        // snapshots before expire at once.
        removed_at_ms: current
            .is_some_and(|c| c.delta_version.is_some())
            .then_some(0),
        operation,
        schema: (changed || current.is_none()).then_some(schema),
        physical_names: next.physical_names,
        name_mapping: Some(next.name_mapping),
        omitted_columns: Some(next.omitted_columns),
        widened_to_long: Some(next.widened_to_long),
        v3_types: next.v3_types,
        partition_zone: Some(zone_setting(metadata)),
        partition_columns: metadata.partition_columns.clone(),
        added,
        removed: Vec::new(),
        replace_all: true,
        deleted_file_retention_ms: Some(retention(table, metadata)?),
        format_version: match current {
            Some(_) => requested_format,
            None => Some(format_version),
        },
        history: Some(HistorySettings::of(table, metadata)?),
        row_lineage,
    })
}

/// The view a column-mapped table's name mapping would have if it had been mirrored commit by
/// commit through `earlier` (the metadata the replayed log still shows, oldest first): files
/// written before a column was dropped or renamed hold its old physical name, and readers
/// that map such a file by name (pyiceberg does when any of its fields lacks an ID) need it.
/// Schemas before column mapping was turned on are skipped: their IDs meant other columns.
/// Columns dropped before the oldest checkpoint replayed are not known here.
fn names_through_history(
    table: &str,
    current: Option<&IcebergView>,
    earlier: &[Metadata],
    format_version: FormatVersion,
) -> Option<IcebergView> {
    let mut view = match current {
        Some(view) => view.clone(),
        None => IcebergView {
            schema: Schema::builder().build().ok()?,
            last_column_id: 0,
            next_schema_id: 0,
            partition_columns: Vec::new(),
            partition_keys: Vec::new(),
            delta_version: None,
            column_mapped: true,
            physical_names: HashMap::new(),
            name_mapping: None,
            omitted_columns: Vec::new(),
            widened_to_long: Vec::new(),
            partition_zone: None,
            format_version,
            row_lineage: false,
        },
    };
    let mut grown = false;
    for metadata in earlier.iter().filter(|m| column_mapped(m)) {
        // A schema this sync cannot mirror only loses its names; the newest one decides.
        let Ok(next) = next_schema(table, Some(&view), metadata, view.format_version) else {
            continue;
        };
        view.last_column_id = view.last_column_id.max(next.schema.highest_field_id());
        view.schema = next.schema;
        view.name_mapping = Some(next.name_mapping);
        grown = true;
    }
    grown.then_some(view)
}

/// With column mapping a partition column is its physical name: renaming it keeps the
/// partitioning (Iceberg partitions by field ID).
fn same_partitioning(view: &IcebergView, metadata: &Metadata, keys: &[String]) -> bool {
    if view.column_mapped {
        keys == view.partition_keys
    } else {
        metadata.partition_columns == view.partition_columns
    }
}

/// Delta numbered the columns anew: the mirror's IDs no longer mean the same.
fn renumbered(table: &str, version: i64) -> Error {
    Error::RebuildNeeded {
        table: table.to_string(),
        from_version: version,
        reason: "column mapping was turned on, which gives every column a new ID".into(),
    }
}

/// Iceberg's partitioning is the mirror's first spec: another one starts a new history.
fn repartitioned(table: &str, version: i64, view: &IcebergView, metadata: &Metadata) -> Error {
    Error::RebuildNeeded {
        table: table.to_string(),
        from_version: version,
        reason: format!(
            "the partition columns changed from {:?} to {:?}",
            view.partition_columns, metadata.partition_columns
        ),
    }
}

/// Whether the schema of `metadata` carries Delta's column-mapping IDs.
fn column_mapped(metadata: &Metadata) -> bool {
    parse_schema(&metadata.schema_string).is_ok_and(|fields| max_column_mapping_id(&fields) > 0)
}

impl IcebergView {
    /// The view of a table that holds just `first` (a [`plan_full`] plan with its schema):
    /// the start of a history planned in one go, before anything is written.
    pub fn of_new_table(first: &SnapshotPlan) -> Option<IcebergView> {
        let schema = first.schema.clone()?;
        let partition_keys = first
            .partition_columns
            .iter()
            .map(|c| {
                schema
                    .field_id_by_name(c)
                    .and_then(|id| first.physical_names.get(&id))
                    .cloned()
                    .unwrap_or_else(|| c.clone())
            })
            .collect();
        Some(IcebergView {
            last_column_id: schema.highest_field_id(),
            next_schema_id: schema.schema_id() + 1,
            partition_columns: first.partition_columns.clone(),
            partition_keys,
            delta_version: Some(first.delta_version),
            column_mapped: !first.physical_names.is_empty(),
            physical_names: first.physical_names.clone(),
            name_mapping: first.name_mapping.clone(),
            omitted_columns: first.omitted_columns.clone().unwrap_or_default(),
            widened_to_long: first.widened_to_long.clone().unwrap_or_default(),
            partition_zone: first
                .partition_zone
                .clone()
                .flatten()
                .and_then(|zone| PartitionZone::parse(&zone).ok()),
            format_version: first.format_version.unwrap_or(FormatVersion::V2),
            row_lineage: first.row_lineage.is_some(),
            schema,
        })
    }
}

/// Plans one snapshot per commit, each relative to the previous one.
pub fn plan_commits(
    scope: &TableScope,
    current: &IcebergView,
    commits: &[DeltaCommit],
) -> Result<Vec<SnapshotPlan>> {
    let table = scope.root();
    let mut view = current.clone();
    let mut plans = Vec::with_capacity(commits.len());
    for commit in commits {
        let default_protocol = Protocol {
            min_reader_version: 1,
            reader_features: None,
        };
        check_features(
            table,
            commit.protocol.as_ref().unwrap_or(&default_protocol),
            commit.metadata.as_ref(),
        )?;
        let changed = match &commit.metadata {
            Some(metadata) => metadata_change(table, &mut view, metadata, commit.version)?,
            None => MetadataChange::default(),
        };
        let partitions = PartitionReading {
            columns: &view.partition_columns,
            keys: &view.partition_keys,
            zone: view.partition_zone.as_ref(),
        };
        let added = commit
            .adds
            .iter()
            .map(|add| {
                planned_file(
                    scope,
                    &view.schema,
                    &partitions,
                    &view.physical_names,
                    add,
                    view.row_lineage,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let row_lineage = view
            .row_lineage
            .then(|| RowLineage::of(commit.row_id_high_water_mark, &added));
        let removed = commit
            .removes
            .iter()
            .map(|r| data_file_location(scope, &r.path))
            .collect::<Result<Vec<_>>>()?;
        let operation = match (added.is_empty(), removed.is_empty()) {
            _ if commit.is_rearrangement() => Operation::Replace,
            (false, true) | (true, true) => Operation::Append,
            (true, false) => Operation::Delete,
            (false, false) => Operation::Overwrite,
        };
        view.delta_version = Some(commit.version);
        plans.push(SnapshotPlan {
            delta_version: commit.version,
            commit_timestamp_ms: commit.timestamp_ms,
            commit_hash: Some(commit.content_hash),
            delta_table_id: commit.metadata.as_ref().and_then(|m| m.id.clone()),
            catalog_table_id: None,
            catalog_table_name: None,
            removed_at_ms: (!commit.removes.is_empty()).then(|| {
                commit
                    .removes
                    .iter()
                    .map(|r| r.deletion_timestamp.unwrap_or(commit.timestamp_ms))
                    .min()
                    .unwrap_or(commit.timestamp_ms)
                    .min(commit.timestamp_ms)
            }),
            operation,
            schema: changed.schema,
            physical_names: changed.physical_names,
            name_mapping: changed.name_mapping,
            omitted_columns: changed.omitted_columns,
            widened_to_long: changed.widened_to_long,
            v3_types: changed.v3_types,
            partition_zone: commit.metadata.as_ref().map(zone_setting),
            partition_columns: view.partition_columns.clone(),
            added,
            removed,
            replace_all: false,
            deleted_file_retention_ms: commit
                .metadata
                .as_ref()
                .map(|m| retention(table, m))
                .transpose()?,
            format_version: None,
            history: commit
                .metadata
                .as_ref()
                .map(|m| HistorySettings::of(table, m))
                .transpose()?,
            row_lineage,
        });
    }
    Ok(plans)
}

/// What one commit's metaData changes of the mirror: each field is None (empty) when it
/// stays as the view has it.
#[derive(Default)]
struct MetadataChange {
    schema: Option<Schema>,
    physical_names: HashMap<i32, String>,
    name_mapping: Option<NameMapping>,
    omitted_columns: Option<Vec<OmittedDeclaration>>,
    widened_to_long: Option<Vec<String>>,
    v3_types: BTreeMap<i32, String>,
}

/// The change commit `version`'s `metadata` makes, applied to `view`; refused when the
/// mirror cannot follow it (column mapping turned on, a new partitioning).
fn metadata_change(
    table: &str,
    view: &mut IcebergView,
    metadata: &Metadata,
    version: i64,
) -> Result<MetadataChange> {
    let mut change = MetadataChange::default();
    if view.delta_version.is_some() && !view.column_mapped && column_mapped(metadata) {
        return Err(renumbered(table, version));
    }
    let next = next_schema(table, Some(&*view), metadata, view.format_version)?;
    if !same_partitioning(view, metadata, &next.partition_keys)
        || view.partition_zone != next.partition_zone
    {
        return Err(repartitioned(table, version, view, metadata));
    }
    view.row_lineage = row_lineage_carried(view.format_version, metadata);
    view.partition_columns = metadata.partition_columns.clone();
    view.partition_keys = next.partition_keys;
    view.physical_names = next.physical_names.clone();
    if view.name_mapping.as_ref() != Some(&next.name_mapping) {
        view.name_mapping = Some(next.name_mapping.clone());
        change.name_mapping = Some(next.name_mapping);
    }
    if view.omitted_columns != next.omitted_columns {
        view.omitted_columns = next.omitted_columns.clone();
        change.omitted_columns = Some(next.omitted_columns);
    }
    if view.widened_to_long != next.widened_to_long {
        view.widened_to_long = next.widened_to_long.clone();
        change.widened_to_long = Some(next.widened_to_long);
    }
    change.physical_names = next.physical_names;
    if next.changed {
        change.v3_types = next.v3_types;
        view.last_column_id = view.last_column_id.max(next.schema.highest_field_id());
        view.schema = next.schema.clone();
        view.next_schema_id += 1;
        change.schema = Some(next.schema);
    }
    Ok(change)
}

/// The retention in ms; one that cannot be read counts as 0 (expire eagerly: old snapshots
/// then never point at files VACUUM may already have deleted).
fn retention(table: &str, metadata: &Metadata) -> Result<i64> {
    Ok(deleted_file_retention_ms(metadata).unwrap_or_else(|e| {
        tracing::warn!(table, error = %e, "expiring old Iceberg snapshots as if the retention were 0");
        0
    }))
}

fn check_features(table: &str, protocol: &Protocol, metadata: Option<&Metadata>) -> Result<()> {
    match unsupported_feature(protocol, metadata) {
        Some(feature) => Err(lakemirror_delta::Error::UnsupportedFeature {
            table: table.to_string(),
            feature,
        }
        .into()),
        None => Ok(()),
    }
}

/// The Iceberg schema of a Delta version.
struct NextSchema {
    schema: Schema,
    /// Whether it differs from the current one.
    changed: bool,
    physical_names: HashMap<i32, String>,
    /// `partitionValues` keys of the partition columns.
    partition_keys: Vec<String>,
    name_mapping: NameMapping,
    omitted_columns: Vec<OmittedDeclaration>,
    widened_to_long: Vec<String>,
    /// Fields of v3 types held as a placeholder, by field ID.
    v3_types: BTreeMap<i32, String>,
    partition_zone: Option<PartitionZone>,
}

/// Delta table property: keep the columns Java Iceberg cannot read in the mirror's schema
/// (for tables read by pyiceberg only). Off by default.
pub const KEEP_UNREADABLE_PROPERTY: &str = "lakemirror.iceberg.keep-unreadable-columns";

/// The Iceberg schema for `metadata`, and whether it differs from the current one.
fn next_schema(
    table: &str,
    current: Option<&IcebergView>,
    metadata: &Metadata,
    format_version: FormatVersion,
) -> Result<NextSchema> {
    let fields = parse_schema(&metadata.schema_string).map_err(|e| Error::malformed(table, e))?;
    let (previous, mapping, last_id, next_id) = match current {
        Some(c) => (
            Some(&c.schema),
            c.name_mapping.as_ref(),
            c.last_column_id,
            c.next_schema_id,
        ),
        None => (None, None, 0, 0),
    };
    let converted = iceberg_schema(&fields, previous, mapping, last_id, next_id, format_version)
        .map_err(|e| Error::Schema {
            table: table.to_string(),
            reason: e.to_string(),
        })?;
    let keep = match metadata
        .configuration
        .get(KEEP_UNREADABLE_PROPERTY)
        .cloned()
        .flatten()
    {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("true") => true,
        Some(v) if v.eq_ignore_ascii_case("false") => false,
        Some(v) => {
            return Err(Error::TableProperty {
                table: table.to_string(),
                property: KEEP_UNREADABLE_PROPERTY,
                reason: format!("{v:?} is not allowed; allowed: true or false"),
            });
        }
    };
    let (schema, omitted) = converted.mirrored(keep).map_err(|e| Error::Schema {
        table: table.to_string(),
        reason: e.to_string(),
    })?;
    let omitted_columns = omitted
        .iter()
        .map(|c| OmittedDeclaration {
            column: c.path.clone(),
            reason: c.reason.to_string(),
        })
        .collect();
    for column in &metadata.partition_columns {
        match schema.field_by_name(column).map(|f| f.field_type.as_ref()) {
            Some(Type::Primitive(_)) => {}
            _ => {
                return Err(Error::malformed(
                    table,
                    format!("partition column {column} is not a primitive column of the schema"),
                ));
            }
        }
    }
    let changed = match previous {
        Some(p) => p.as_struct() != schema.as_struct(),
        None => true,
    };
    let partition_keys = metadata
        .partition_columns
        .iter()
        .map(|c| {
            fields
                .iter()
                .find(|f| f.name == *c)
                .map_or_else(|| c.clone(), |f| f.physical_name().to_string())
        })
        .collect();
    let physical_names = physical_names(&fields);
    let mut name_mapping = with_materialized_row_tracking(
        name_mapping(
            mapping,
            &converted.schema,
            &physical_names,
            &converted.void_ids,
        ),
        metadata,
        row_lineage_carried(format_version, metadata),
    );
    if format_version < FormatVersion::V3 {
        name_mapping = with_variant_members(name_mapping, &converted.variant_ids);
    }
    let partition_zone = zone_setting(metadata)
        .map(|zone| PartitionZone::parse(&zone))
        .transpose()
        .map_err(|e| Error::Schema {
            table: table.to_string(),
            reason: e.to_string(),
        })?;
    Ok(NextSchema {
        schema,
        changed,
        physical_names,
        partition_keys,
        name_mapping,
        omitted_columns,
        widened_to_long: converted.widened_to_long,
        v3_types: converted.v3_types,
        partition_zone,
    })
}

/// How the planner reads `add.partitionValues`: the partition columns, their keys there
/// (physical names with column mapping), and the zone of timestamps without an offset.
struct PartitionReading<'a> {
    columns: &'a [String],
    keys: &'a [String],
    zone: Option<&'a PartitionZone>,
}

/// `lakemirror.partition-values.timezone` as `metadata` sets it.
fn zone_setting(metadata: &Metadata) -> Option<String> {
    metadata
        .configuration
        .get(PARTITION_TIMEZONE_PROPERTY)
        .cloned()
        .flatten()
        .filter(|zone| !zone.trim().is_empty())
}

fn planned_file(
    scope: &TableScope,
    schema: &Schema,
    partitions: &PartitionReading,
    physical_names: &HashMap<i32, String>,
    add: &Add,
    row_lineage: bool,
) -> Result<PlannedFile> {
    let root_uri = scope.root();
    let location = data_file_location(scope, &add.path)?;
    let partition = partitions
        .columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let key = partitions.keys.get(i).unwrap_or(column);
            let ty = match schema.field_by_name(column).map(|f| f.field_type.as_ref()) {
                Some(Type::Primitive(p)) => p.clone(),
                _ => PrimitiveType::String,
            };
            partition_literal(column, &ty, add.partition_value(key), partitions.zone)
        })
        .collect::<Result<Vec<Option<Literal>>, String>>()
        .map_err(|e| Error::malformed(root_uri, format!("{}: {e}", add.path)))?;
    Ok(PlannedFile {
        location,
        partition: Struct::from_iter(partition),
        size: u64::try_from(add.size)
            .map_err(|_| Error::malformed(root_uri, format!("{}: negative size", add.path)))?,
        record_count: num_records(add.stats.as_deref()),
        deletion_vector: add.deletion_vector.clone(),
        metrics: column_metrics(add.stats.as_deref(), schema, physical_names),
        first_row_id: add.base_row_id.filter(|_| row_lineage),
        data_sequence_number: add.default_row_commit_version.filter(|_| row_lineage),
    })
}

/// `mapping` with the columns in which Delta materializes row IDs and row commit versions
/// (rows UPDATE, MERGE or OPTIMIZE moved into another file keep theirs there): a mirror that
/// carries the row lineage maps them to Iceberg's `_row_id` and
/// `_last_updated_sequence_number` field IDs, which readers take a materialized value from;
/// any other maps them to decoys nobody reads, so that readers that want every file column
/// mapped (pyiceberg) read those files too.
fn with_materialized_row_tracking(
    mapping: NameMapping,
    metadata: &Metadata,
    carried: bool,
) -> NameMapping {
    let columns = [
        (MATERIALIZED_ROW_ID_COLUMN, ROW_ID_FIELD_ID, DECOY_FLOOR + 1),
        (
            MATERIALIZED_ROW_COMMIT_VERSION_COLUMN,
            LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID,
            DECOY_FLOOR + 2,
        ),
    ];
    let mut fields = mapping.fields().to_vec();
    for (property, reserved, decoy) in columns {
        let Some(name) = metadata.configuration.get(property).cloned().flatten() else {
            continue;
        };
        if fields.iter().any(|f| f.names().contains(&name)) {
            continue;
        }
        let id = if carried { reserved } else { decoy };
        fields.push(MappedField::new(Some(id), vec![name], vec![]));
    }
    NameMapping::new(fields)
}

/// `mapping` with the members of each variant group (`metadata`, `value`) mapped to IDs
/// nobody reads, in a mirror that leaves variant columns out: pyiceberg maps every column of
/// a data file through the name mapping and refuses one it cannot find, even of a column the
/// table does not have. (A shredded file's `typed_value` holds fields of its own, which only
/// its footer names: pyiceberg 0.12 cannot read such files of a format version 2 mirror.)
fn with_variant_members(mapping: NameMapping, variant_ids: &HashSet<i32>) -> NameMapping {
    fn walk(
        fields: &[impl std::borrow::Borrow<MappedField>],
        variant_ids: &HashSet<i32>,
        next: &mut i32,
    ) -> Vec<MappedField> {
        fields
            .iter()
            .map(|f| {
                let f = f.borrow();
                let mut children = walk(f.fields(), variant_ids, next);
                if f.field_id().is_some_and(|id| variant_ids.contains(&id)) && children.is_empty() {
                    for member in ["metadata", "value"] {
                        *next -= 1;
                        children.push(MappedField::new(Some(*next), vec![member.into()], vec![]));
                    }
                }
                MappedField::new(f.field_id(), f.names().to_vec(), children)
            })
            .collect()
    }
    if variant_ids.is_empty() {
        return mapping;
    }
    // Decoys counted down from below the row tracking ones.
    let mut next = DECOY_FLOOR + 1_000;
    NameMapping::new(walk(mapping.fields(), variant_ids, &mut next))
}

/// Delta table properties naming the columns row tracking materializes its values in.
pub const MATERIALIZED_ROW_ID_COLUMN: &str = "delta.rowTracking.materializedRowIdColumnName";
pub const MATERIALIZED_ROW_COMMIT_VERSION_COLUMN: &str =
    "delta.rowTracking.materializedRowCommitVersionColumnName";
/// Iceberg's reserved field IDs of `_row_id` and `_last_updated_sequence_number`.
pub const ROW_ID_FIELD_ID: i32 = i32::MAX - 107;
pub const LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID: i32 = i32::MAX - 108;

/// Delta table property that turns row tracking on.
pub const ENABLE_ROW_TRACKING: &str = "delta.enableRowTracking";

/// Whether a mirror in `format_version` carries the row tracking `metadata` turns on: only
/// format version 3 has row lineage, and Delta's row IDs are stable only while the property
/// is on (a table that merely supports the feature may have files without them).
pub fn row_lineage_carried(format_version: FormatVersion, metadata: &Metadata) -> bool {
    format_version >= FormatVersion::V3
        && metadata
            .configuration
            .get(ENABLE_ROW_TRACKING)
            .cloned()
            .flatten()
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

impl RowLineage {
    /// The high-water mark the log states, raised to the last row ID of `files` (a bound a
    /// log whose domain metadata the reader did not see still gives).
    fn of(stated: Option<i64>, files: &[PlannedFile]) -> Self {
        let last_row = files
            .iter()
            .filter_map(|f| {
                let rows = i64::try_from(f.record_count?).ok()?;
                f.first_row_id?.checked_add(rows - 1)
            })
            .max();
        Self {
            high_water_mark: stated.max(last_row).unwrap_or(-1),
        }
    }
}

/// The full location of a data file from its Delta path (URI-encoded, relative or absolute),
/// decoded exactly once. A path outside the table's root (and its allowed external roots) is
/// refused: one table's log may not list or read another table's files.
pub fn data_file_location(scope: &TableScope, path: &str) -> Result<String> {
    scope
        .resolve(LogPath::DataFile, path)
        .map_err(|why| Error::malformed(scope.root(), why))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT_URI: &str = "s3://lake/t";
    static ROOT: std::sync::LazyLock<TableScope> =
        std::sync::LazyLock::new(|| TableScope::new(ROOT_URI));
    const SCHEMA: &str = r#"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}},{\"name\":\"p\",\"type\":\"date\",\"nullable\":true,\"metadata\":{}}]}"#;

    fn commit(version: i64, lines: &[String]) -> DeltaCommit {
        DeltaCommit::parse(version, lines.join("\n").as_bytes(), 1000 + version).unwrap()
    }

    fn metadata(schema: &str) -> String {
        format!(
            r#"{{"metaData":{{"id":"x","format":{{"provider":"parquet","options":{{}}}},"schemaString":"{schema}","partitionColumns":["p"],"configuration":{{}}}}}}"#
        )
    }

    fn protocol(reader: i32, features: &str) -> String {
        format!(
            r#"{{"protocol":{{"minReaderVersion":{reader},"minWriterVersion":7,"readerFeatures":[{features}]}}}}"#
        )
    }

    fn add(path: &str, p: &str, stats: bool, data_change: bool) -> String {
        let stats = if stats {
            r#","stats":"{\"numRecords\":4}""#
        } else {
            ""
        };
        format!(
            r#"{{"add":{{"path":"{path}","partitionValues":{{"p":"{p}"}},"size":100,"modificationTime":1,"dataChange":{data_change}{stats}}}}}"#
        )
    }

    fn remove(path: &str, data_change: bool) -> String {
        format!(r#"{{"remove":{{"path":"{path}","dataChange":{data_change}}}}}"#)
    }

    fn view_after_create() -> IcebergView {
        let snapshot = snapshot_of(&[commit(0, &[protocol(1, ""), metadata(SCHEMA)])]);
        let plan = plan_full(&ROOT, None, &snapshot, FormatVersion::V2).unwrap();
        let schema = plan.schema.unwrap();
        IcebergView {
            last_column_id: schema.highest_field_id(),
            next_schema_id: schema.schema_id() + 1,
            schema,
            partition_columns: vec!["p".into()],
            partition_keys: vec!["p".into()],
            delta_version: Some(0),
            column_mapped: false,
            physical_names: HashMap::new(),
            name_mapping: plan.name_mapping,
            omitted_columns: Vec::new(),
            widened_to_long: Vec::new(),
            partition_zone: None,
            format_version: FormatVersion::V2,
            row_lineage: false,
        }
    }

    fn snapshot_of(commits: &[DeltaCommit]) -> DeltaSnapshot {
        let mut active = lakemirror_delta::ActiveFileSet::default();
        commits.iter().for_each(|c| active.apply(c));
        let last = commits.last().unwrap();
        DeltaSnapshot {
            version: last.version,
            timestamp_ms: last.timestamp_ms,
            active,
            commit_hash: Some(last.content_hash),
            catalog_managed: None,
        }
    }

    #[test]
    fn first_sync_plans_the_active_set_with_typed_partitions() {
        let commits = [
            commit(
                0,
                &[
                    protocol(1, ""),
                    metadata(SCHEMA),
                    add("p=2021-01-02/a%20b.parquet", "2021-01-02", true, true),
                ],
            ),
            commit(
                1,
                &[
                    add("p=2021-01-03/c.parquet", "2021-01-03", false, true),
                    remove("p=2021-01-02/a%20b.parquet", true),
                ],
            ),
        ];
        let plan = plan_full(&ROOT, None, &snapshot_of(&commits), FormatVersion::V2).unwrap();
        assert_eq!(plan.delta_version, 1);
        assert!(plan.replace_all);
        assert_eq!(plan.operation, Operation::Append);
        assert_eq!(plan.added.len(), 1);
        let file = &plan.added[0];
        assert_eq!(file.location, "s3://lake/t/p=2021-01-03/c.parquet");
        assert_eq!(file.record_count, None, "no stats: the footer must be read");
        assert_eq!(
            file.partition,
            Struct::from_iter([Some(Literal::date(18630))])
        );
    }

    #[test]
    fn each_commit_becomes_one_snapshot_with_the_right_operation() {
        let view = view_after_create();
        let commits = [
            commit(
                1,
                &[add("p=2021-01-02/a.parquet", "2021-01-02", true, true)],
            ),
            commit(
                2,
                &[
                    add("p=2021-01-02/b.parquet", "2021-01-02", true, true),
                    remove("p=2021-01-02/a.parquet", true),
                ],
            ),
            commit(3, &[remove("p=2021-01-02/b.parquet", true)]),
            commit(
                4,
                &[
                    add("p=2021-01-02/c.parquet", "2021-01-02", true, false),
                    remove("p=2021-01-02/x.parquet", false),
                ],
            ),
            commit(5, &[r#"{"commitInfo":{"timestamp":77}}"#.to_string()]),
        ];
        let plans = plan_commits(&ROOT, &view, &commits).unwrap();
        let ops: Vec<_> = plans
            .iter()
            .map(|p| (p.delta_version, p.operation.clone()))
            .collect();
        assert_eq!(
            ops,
            vec![
                (1, Operation::Append),
                (2, Operation::Overwrite),
                (3, Operation::Delete),
                (4, Operation::Replace),
                (5, Operation::Append)
            ]
        );
        assert_eq!(plans[1].removed, vec!["s3://lake/t/p=2021-01-02/a.parquet"]);
        assert_eq!(plans[0].added[0].record_count, Some(4));
        assert_eq!(plans[4].commit_timestamp_ms, 77);
        assert!(plans.iter().all(|p| p.schema.is_none() && !p.replace_all));
    }

    #[test]
    fn added_column_becomes_a_new_schema_keeping_ids() {
        let view = view_after_create();
        let grown = SCHEMA.replace(
            r#"{\"name\":\"p\""#,
            r#"{\"name\":\"extra\",\"type\":\"string\",\"nullable\":true,\"metadata\":{}},{\"name\":\"p\""#,
        );
        let plans = plan_commits(&ROOT, &view, &[commit(1, &[metadata(&grown)])]).unwrap();
        let schema = plans[0].schema.clone().expect("schema change");
        assert_eq!(
            schema.field_id_by_name("id"),
            view.schema.field_id_by_name("id")
        );
        assert_eq!(
            schema.field_id_by_name("p"),
            view.schema.field_id_by_name("p")
        );
        assert_eq!(
            schema.field_id_by_name("extra"),
            Some(view.last_column_id + 1)
        );
        assert_eq!(schema.schema_id(), view.next_schema_id);
        // re-stating the same metadata is not a schema change
        let same = plan_commits(&ROOT, &view, &[commit(1, &[metadata(SCHEMA)])]).unwrap();
        assert!(same[0].schema.is_none());
    }

    #[test]
    fn a_renamed_partition_column_keeps_the_partitioning_with_column_mapping() {
        let cm_schema = |p: &str| {
            format!(
                r#"{{\"type\":\"struct\",\"fields\":[{{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{{\"delta.columnMapping.id\":1,\"delta.columnMapping.physicalName\":\"col-1\"}}}},{{\"name\":\"{p}\",\"type\":\"date\",\"nullable\":true,\"metadata\":{{\"delta.columnMapping.id\":2,\"delta.columnMapping.physicalName\":\"col-2\"}}}}]}}"#
            )
        };
        let cm_metadata = |p: &str| {
            metadata(&cm_schema(p))
                .replace(r#"["p"]"#, &format!(r#"["{p}"]"#))
                .replace(
                    r#""configuration":{}"#,
                    r#""configuration":{"delta.columnMapping.mode":"name"}"#,
                )
        };
        let created = snapshot_of(&[commit(0, &[protocol(2, ""), cm_metadata("p")])]);
        let plan = plan_full(&ROOT, None, &created, FormatVersion::V2).unwrap();
        let schema = plan.schema.unwrap();
        let view = IcebergView {
            last_column_id: schema.highest_field_id(),
            next_schema_id: schema.schema_id() + 1,
            schema,
            partition_columns: vec!["p".into()],
            partition_keys: vec!["col-2".into()],
            delta_version: Some(0),
            column_mapped: true,
            physical_names: plan.physical_names,
            name_mapping: plan.name_mapping,
            omitted_columns: Vec::new(),
            widened_to_long: Vec::new(),
            partition_zone: None,
            format_version: FormatVersion::V2,
            row_lineage: false,
        };
        let add = r#"{"add":{"path":"f.parquet","partitionValues":{"col-2":"2024-01-02"},"size":10,"modificationTime":1,"dataChange":true}}"#;
        let plans = plan_commits(
            &ROOT,
            &view,
            &[commit(1, &[cm_metadata("day"), add.into()])],
        )
        .unwrap();
        let schema = plans[0]
            .schema
            .as_ref()
            .expect("the rename is a schema change");
        assert_eq!(schema.field_id_by_name("day"), Some(2));
        assert_eq!(plans[0].partition_columns, vec!["day".to_string()]);
        assert_eq!(
            plans[0].added[0].partition,
            Struct::from_iter([Some(Literal::date(19724))])
        );
        // Without column mapping, another partition column is another partitioning.
        let err = plan_commits(
            &ROOT,
            &view_after_create(),
            &[commit(
                1,
                &[metadata(SCHEMA).replace(r#"["p"]"#, r#"["id"]"#)],
            )],
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::RebuildNeeded { from_version: 1, reason, .. } if reason.contains("partition columns changed")),
            "{err}"
        );
    }

    #[test]
    fn column_mapping_turned_on_after_mirroring_asks_for_a_new_history_from_that_version() {
        let cm = metadata(SCHEMA)
            .replace(
                r#"\"metadata\":{}"#,
                r#"\"metadata\":{\"delta.columnMapping.id\":1,\"delta.columnMapping.physicalName\":\"id\"}"#,
            )
            .replace(
                r#""configuration":{}"#,
                r#""configuration":{"delta.columnMapping.mode":"name"}"#,
            );
        assert!(cm.contains("columnMapping.id"), "{cm}");
        let commits = [
            commit(
                1,
                &[add("p=2021-01-02/a.parquet", "2021-01-02", true, true)],
            ),
            commit(2, &[protocol(2, ""), cm]),
        ];
        let err = plan_commits(&ROOT, &view_after_create(), &commits).unwrap_err();
        assert!(
            matches!(&err, Error::RebuildNeeded { from_version: 2, reason, .. } if reason.contains("column mapping")),
            "{err}"
        );
    }

    #[test]
    fn a_plan_taking_the_snapshot_equals_one_borrowing_it() {
        let snapshot = snapshot_of(&[commit(
            0,
            &[
                protocol(1, ""),
                metadata(SCHEMA),
                add("p=2021-01-02/a.parquet", "2021-01-02", true, true),
                add("p=2021-01-03/b.parquet", "2021-01-03", false, true),
            ],
        )]);
        let borrowed = plan_full(&ROOT, None, &snapshot, FormatVersion::V2).unwrap();
        let taken = plan_full_taking(&ROOT, None, snapshot, FormatVersion::V2).unwrap();
        let files = |plan: &SnapshotPlan| {
            let mut files: Vec<String> = plan
                .added
                .iter()
                .map(|f| format!("{} {:?} {:?}", f.location, f.partition, f.record_count))
                .collect();
            files.sort();
            files
        };
        assert_eq!(files(&taken), files(&borrowed));
        assert_eq!(taken.added.len(), 2);
        assert_eq!(taken.schema, borrowed.schema);
        assert_eq!(taken.delta_version, borrowed.delta_version);
    }

    #[test]
    fn a_history_planned_in_one_go_starts_from_the_view_of_its_first_plan() {
        let snapshot = snapshot_of(&[commit(0, &[protocol(1, ""), metadata(SCHEMA)])]);
        let first = plan_full(&ROOT, None, &snapshot, FormatVersion::V2).unwrap();
        let view = IcebergView::of_new_table(&first).unwrap();
        assert_eq!(view.delta_version, Some(0));
        assert_eq!(view.partition_keys, vec!["p".to_string()]);
        let plans = plan_commits(
            &ROOT,
            &view,
            &[commit(
                1,
                &[add("p=2021-01-02/a.parquet", "2021-01-02", true, true)],
            )],
        )
        .unwrap();
        assert_eq!(
            plans[0].added[0].partition,
            Struct::from_iter([Some(Literal::date(18629))])
        );
    }

    #[test]
    fn a_deletion_vector_travels_with_its_file() {
        let view = view_after_create();
        let dv = r#"{"storageType":"u","pathOrInlineDv":"0X9F0q2<2yJ-f)Gm2!e0","offset":1,"sizeInBytes":34,"cardinality":1}"#;
        let lines = [
            protocol(3, r#""deletionVectors""#),
            remove("p=2024-01-01/f.parquet", true),
            format!(
                r#"{{"add":{{"path":"p=2024-01-01/f.parquet","partitionValues":{{"p":"2024-01-01"}},"size":10,"modificationTime":1,"dataChange":true,"deletionVector":{dv}}}}}"#
            ),
        ];
        let plans = plan_commits(&ROOT, &view, &[commit(1, &lines)]).unwrap();
        let added = &plans[0].added[0];
        assert_eq!(
            added.deletion_vector.as_ref().map(|d| d.cardinality),
            Some(1)
        );
        assert_eq!(plans[0].removed, vec![added.location.clone()]);
    }

    #[test]
    fn unsupported_features_are_refused_naming_the_feature() {
        let view = view_after_create();
        let err = plan_commits(
            &ROOT,
            &view,
            &[commit(1, &[protocol(3, r#""featureFromTheFuture""#)])],
        )
        .unwrap_err();
        assert!(
            matches!(&err, Error::Delta(lakemirror_delta::Error::UnsupportedFeature { feature, .. }) if feature == "featureFromTheFuture"),
            "{err}"
        );
        let snapshot = snapshot_of(&[commit(
            0,
            &[protocol(3, r#""anotherFutureFeature""#), metadata(SCHEMA)],
        )]);
        assert!(
            plan_full(&ROOT, None, &snapshot, FormatVersion::V2)
                .unwrap_err()
                .to_string()
                .contains("anotherFutureFeature")
        );
    }

    #[test]
    fn paths_decode_once_and_may_not_escape() {
        assert_eq!(
            data_file_location(&ROOT, "x=A%252FA/p.parquet").unwrap(),
            "s3://lake/t/x=A%2FA/p.parquet"
        );
        assert_eq!(
            data_file_location(&TableScope::new("file:///d/t"), "file:/d/t/a.parquet").unwrap(),
            "file:///d/t/a.parquet"
        );
        assert!(data_file_location(&ROOT, "../escape.parquet").is_err());
        assert!(data_file_location(&ROOT, "a/%2E%2E/b.parquet").is_err());
        let other = "s3://other/abs%20olute.parquet";
        assert!(data_file_location(&ROOT, other).is_err());
        let clones = ROOT
            .clone()
            .with_external_roots(&["s3://other".to_string()]);
        assert_eq!(
            data_file_location(&clones, other).unwrap(),
            "s3://other/abs olute.parquet"
        );
    }

    #[test]
    fn a_v3_mirror_of_a_row_tracking_table_keeps_deltas_row_ids_and_maps_materialized_ones() {
        let metadata = r#"{"metaData":{"id":"x","format":{"provider":"parquet","options":{}},"schemaString":"{\"type\":\"struct\",\"fields\":[{\"name\":\"id\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}}]}","partitionColumns":[],"configuration":{"delta.enableRowTracking":"true","delta.rowTracking.materializedRowIdColumnName":"_row-id-col-1","delta.rowTracking.materializedRowCommitVersionColumnName":"_row-commit-version-col-1"}}}"#;
        let add = r#"{"add":{"path":"a.parquet","partitionValues":{},"size":100,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":4}","baseRowId":10,"defaultRowCommitVersion":3}}"#;
        let mark = r#"{"domainMetadata":{"domain":"delta.rowTracking","configuration":"{\"rowIdHighWaterMark\":20}","removed":false}}"#;
        let snapshot = snapshot_of(&[commit(
            3,
            &[protocol(1, ""), metadata.into(), add.into(), mark.into()],
        )]);
        let v3 = plan_full(&ROOT, None, &snapshot, FormatVersion::V3).unwrap();
        assert_eq!(v3.row_lineage.unwrap().high_water_mark, 20);
        assert_eq!(v3.added[0].first_row_id, Some(10));
        assert_eq!(v3.added[0].data_sequence_number, Some(3));
        let mapped = |plan: &SnapshotPlan, name: &str| {
            plan.name_mapping
                .as_ref()
                .unwrap()
                .fields()
                .iter()
                .find(|f| f.names().iter().any(|n| n == name))
                .and_then(|f| f.field_id())
        };
        assert_eq!(mapped(&v3, "_row-id-col-1"), Some(ROW_ID_FIELD_ID));
        assert_eq!(
            mapped(&v3, "_row-commit-version-col-1"),
            Some(LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID)
        );
        // A v2 mirror has no row lineage: the columns map to IDs nobody reads.
        let v2 = plan_full(&ROOT, None, &snapshot, FormatVersion::V2).unwrap();
        assert_eq!(v2.row_lineage, None);
        assert_eq!(v2.added[0].first_row_id, None);
        let decoy = mapped(&v2, "_row-id-col-1").unwrap();
        assert!(decoy >= DECOY_FLOOR && decoy != ROW_ID_FIELD_ID, "{decoy}");
    }
}
