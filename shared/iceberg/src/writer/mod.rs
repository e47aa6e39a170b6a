//! Carries out snapshot plans: writes manifests, manifest lists and the metadata file.
//!
//! The manifest layout (which bucket a file is in, when buckets grow) is the planner's
//! (`lakemirror_plan::layout`): a commit rewrites only the buckets its files fall in and a
//! manifest list of `B` entries, so its cost follows the commit, not the table. `B` grows
//! (all buckets rewritten once) when buckets outgrow [`FILES_PER_BUCKET`](lakemirror_plan::layout::FILES_PER_BUCKET) twice over.
//!
//! By concern: `state` is the table being written (create or load, apply a plan, finish
//! the metadata file); `manifests` writes and reads bucket manifests (rebucketing, append
//! layers); `deletes` turns deletion vectors into delete files; `summary` counts what a
//! snapshot changed; `lineage` assigns v3 row IDs.

mod deletes;
mod entries;
mod footers;
mod lineage;
mod manifests;
mod state;
mod summary;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};

use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, FormatVersion, ManifestContentType, ManifestFile, ManifestListWriter, Snapshot,
    TableMetadata,
};

use lakemirror_plan::history::HistoryPolicy;
use lakemirror_plan::layout::{Content, FanOutPart, LiveFile};
use lakemirror_plan::{CommittedTable, SnapshotPlan};
use lakemirror_runtime::crash;
use lakemirror_storage::TableStorage;

use crate::avro_header;
use crate::error::{Error, Result};

use manifests::*;
use state::*;
use summary::*;

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
    /// (see [`expirable`](lakemirror_plan::expiry::expirable)).
    pub expired_snapshots: Vec<i64>,
    /// Snapshots this metadata no longer has because the history policy thins them (see
    /// [`thinned`](lakemirror_plan::history::thinned)).
    pub thinned_snapshots: Vec<i64>,
    /// Metadata files only the removed snapshots used, and metadata files that fell off the
    /// metadata log: delete them once the catalog points at the new metadata, never before.
    pub removed_files: Vec<String>,
}

/// A bucket after a snapshot: its manifest (None: nothing live, none written) and its live
/// files.
type WrittenBucket = ((Content, u32), Option<ManifestFile>, Vec<LiveFile>);

/// Delete files (of deletion vectors) written at once.
const DELETE_FILES_AT_ONCE: usize = 8;
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

    /// The format version new tables are created in.
    pub fn format_version(&self) -> FormatVersion {
        self.format_version
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
            files: changed.added.files as usize,
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
            let Some(bytes) = self.read_avro(&location).await? else {
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
            crash::point("mirror-during-expiry");
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
        let Some(bytes) = self.read_avro(list).await? else {
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

    /// One of the mirror's own Avro files (a manifest, a manifest list), read within the
    /// work's memory share with room for decoding it, after checking that it is one
    /// lakemirror wrote ([`crate::avro_cost`]); None when it is gone. The bytes hold the
    /// room until they are dropped.
    pub(crate) async fn read_avro(&self, location: &str) -> Result<Option<bytes::Bytes>> {
        let copies = crate::avro_cost::COPIES;
        let Some(read) = self.metadata_store.get_to_parse(location, copies).await? else {
            return Ok(None);
        };
        let cost = crate::avro_cost::decoded_cost(&read.bytes).map_err(|why| {
            Error::CatalogState(format!(
                "{location} is not a manifest or manifest list lakemirror wrote ({why}): someone else changed the table's Iceberg metadata; nothing was written. Delete the catalog table and sync again to rebuild the mirror"
            ))
        })?;
        let mut room = read.room;
        let size = read.bytes.len() as u64;
        lakemirror_storage::budget::current()
            .grow(location, size, &mut room, cost)
            .await?;
        Ok(Some(room.holding(read.bytes)))
    }

    /// [`Self::read_avro`] of a file that must be there.
    pub(crate) async fn read_avro_required(&self, location: &str) -> Result<bytes::Bytes> {
        self.read_avro(location)
            .await?
            .ok_or_else(|| lakemirror_storage::Error::not_found(location).into())
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
        let bytes = self.take_from_staging(location).await?;
        self.publish(location, bytes).await
    }

    /// What an iceberg writer wrote to `location` in the in-memory staging, removed from it.
    async fn take_from_staging(&self, location: &str) -> Result<bytes::Bytes> {
        let bytes = self.staging.new_input(location)?.read().await?;
        self.staging.delete(location).await?;
        Ok(bytes)
    }

    /// Writes an Avro file of the mirror's metadata to `location`.
    async fn publish(&self, location: &str, bytes: bytes::Bytes) -> Result<()> {
        let bytes = avro_header::with_unique_type_names(bytes)
            .map_err(|e| Error::Bug(format!("{location}: {e}")))?;
        self.metadata_store.put(location, bytes).await?;
        Ok(())
    }
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

/// A random positive snapshot ID.
pub fn new_snapshot_id() -> i64 {
    let (high, low) = uuid::Uuid::new_v4().as_u64_pair();
    ((high ^ low) & (i64::MAX as u64)) as i64
}
