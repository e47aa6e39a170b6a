//! Adding the snapshot: the manifest list of every bucket's newest manifest, v3 row IDs,
//! and the snapshot's sequence number, time and summary.

use iceberg::spec::{FormatVersion, MAIN_BRANCH, ManifestListWriter, Snapshot};

use lakemirror_plan::SnapshotPlan;
use lakemirror_runtime::crash;

use crate::error::Result;
use crate::writer::lineage::{assign_row_ids, explicit_row_ids};
use crate::writer::*;

use super::TableState;

impl TableState {
    /// Writes the manifest list of every bucket's newest manifest and adds the snapshot.
    pub(in crate::writer) async fn commit_snapshot(
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
        crash::point("mirror-after-manifest-list");
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
    pub(super) fn next_sequence_number(&self, plan: &SnapshotPlan) -> i64 {
        let next = self.last_sequence_number + 1;
        match plan.row_lineage {
            Some(_) if self.parent_snapshot_id.is_none() => plan.delta_version.max(0),
            Some(_) => next.max(plan.delta_version),
            None => next,
        }
    }
}
