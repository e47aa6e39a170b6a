//! Writing the bucket manifests: the data files and delete files a plan changes sorted into
//! buckets, each touched bucket given an append layer or rewritten, and the manifests the
//! parts of a fanned-out bootstrap wrote taken as the buckets.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataFile, FormatVersion, ManifestContentType, ManifestFile};

use lakemirror_plan::SnapshotPlan;
use lakemirror_plan::layout::{
    BucketChange, Content, FILES_PER_BUCKET, FanOutPart, bucket_of, bucket_of_manifest,
    buckets_for, change_bucket,
};

use crate::error::{Error, Result};
use crate::writer::*;

use super::TableState;

/// How each changed bucket changes, by content and bucket.
type BucketChanges = BTreeMap<(Content, u32), BucketChange>;

/// The buckets a plan touches, and what it changes in each.
struct Touched {
    /// The locations of the data files removed, and the data files added.
    files: BTreeMap<u32, (Vec<String>, Vec<DataFile>)>,
    /// The delete files written for the deletion vectors of the data files added.
    deletes: BTreeMap<u32, Vec<DataFile>>,
}

impl TableState {
    /// Writes the bucket manifests `plan` changes (with `part`, only the buckets that part
    /// owns, of a table replaced in `part.buckets` buckets) and answers what changed.
    pub(in crate::writer) async fn write_manifests(
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
        self.replace_or_grow_buckets(writer, plan, part, &mut changed)
            .await?;
        let touched = self.files_by_bucket(writer, plan).await?;
        let (rewritten, layers) = self
            .change_buckets(writer, plan, part, touched, &mut changed)
            .await?;
        let written = self
            .write_bucket_manifests(
                writer,
                snapshot_id,
                sequence_number,
                &data_sequence_numbers,
                rewritten,
            )
            .await?;
        changed.manifests_written = self.take_written_manifests(plan, written, &layers);
        Ok(changed)
    }

    /// Makes the buckets ready for the plan's files: all new and empty (of the buckets `part`
    /// owns) when the plan replaces the table, its totals leaving with `changed`; else more
    /// of them, every live file redistributed, when the files outgrow them.
    async fn replace_or_grow_buckets(
        &mut self,
        writer: &MetadataWriter,
        plan: &SnapshotPlan,
        part: Option<&FanOutPart>,
        changed: &mut Changed,
    ) -> Result<()> {
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
        Ok(())
    }

    /// The buckets the plan touches: the data files it removes and adds in each, and the
    /// delete files written for the deletion vectors of the added ones; buckets a rebucket
    /// loaded are touched too.
    async fn files_by_bucket(
        &self,
        writer: &MetadataWriter,
        plan: &mut SnapshotPlan,
    ) -> Result<Touched> {
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
        Ok(Touched {
            files: touched,
            deletes: new_deletes,
        })
    }

    /// How each touched bucket changes: an append layer of its new data files, or its data
    /// and delete files rewritten with the removals, additions and new delete files (counted
    /// in `changed`). Answers the changes by bucket, and the buckets that take a layer.
    async fn change_buckets(
        &mut self,
        writer: &MetadataWriter,
        plan: &SnapshotPlan,
        part: Option<&FanOutPart>,
        touched: Touched,
        changed: &mut Changed,
    ) -> Result<(BucketChanges, BTreeSet<(Content, u32)>)> {
        let Touched {
            files: touched,
            deletes: mut new_deletes,
        } = touched;
        let mut rewritten: BucketChanges = BTreeMap::new();
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
        Ok((rewritten, layers))
    }

    /// Writes the manifest of each changed bucket (None: nothing live is left in it).
    async fn write_bucket_manifests(
        &self,
        writer: &MetadataWriter,
        snapshot_id: i64,
        sequence_number: i64,
        data_sequence_numbers: &HashMap<String, i64>,
        rewritten: BucketChanges,
    ) -> Result<Vec<WrittenBucket>> {
        // Write the changed bucket manifests, several at once (each is a PUT: on S3 its
        // latency, not the encoding, is what a bootstrap of many buckets waits for).
        let partition_type = self.spec.partition_type(&self.schema)?;
        let bucket_writer = BucketWriter {
            writer,
            snapshot_id,
            sequence_number,
            data_sequence_numbers,
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
        Ok(written)
    }

    /// Takes the written manifests as the buckets' (a layer after the bucket's others, else
    /// the bucket's only one) with their live files; answers how many manifests were new.
    fn take_written_manifests(
        &mut self,
        plan: &SnapshotPlan,
        written: Vec<WrittenBucket>,
        layers: &BTreeSet<(Content, u32)>,
    ) -> usize {
        // After a snapshot that replaced everything (a bootstrap) every bucket is new: its
        // files are let go, and a later snapshot of this run reads the buckets it touches
        // from their manifests, as the next run would. (v3 keeps them: their row IDs are
        // assigned as the snapshot is added, by `commit_snapshot`.)
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
        new_manifests.len()
    }

    /// Takes the manifests the parts of a fanned-out bootstrap wrote as the buckets of a
    /// table replaced in `buckets` buckets.
    pub(in crate::writer) async fn take_parts(
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
}
