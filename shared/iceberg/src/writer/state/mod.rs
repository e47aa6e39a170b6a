//! The table being written: created or loaded, each plan applied as one snapshot, the
//! metadata file finished with the history thinned and expired.
//!
//! By concern: `open` creates or loads the table, `definition` takes a plan's schema and
//! properties, `buckets` reads and redistributes the live files of the buckets,
//! `bucket_manifests` writes the bucket manifests a plan changes, `snapshot` writes the
//! manifest list and adds the snapshot, and `finish` writes the metadata file.

mod bucket_manifests;
mod buckets;
mod definition;
mod finish;
mod open;
mod snapshot;

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{
    FormatVersion, ManifestFile, PartitionSpecRef, SchemaRef, TableMetadataBuilder,
};

use lakemirror_plan::SnapshotPlan;
use lakemirror_plan::layout::{Content, LiveFile};

use crate::error::{Error, Result};

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

    pub(super) fn take_builder(&mut self) -> Result<TableMetadataBuilder> {
        self.builder
            .take()
            .ok_or_else(|| Error::CatalogState("metadata builder used after a failed step".into()))
    }
}
