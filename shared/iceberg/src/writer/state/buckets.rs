//! The live files of the buckets: read from a bucket's manifest and append layers once per
//! run, and redistributed over more buckets when they outgrow them.

use lakemirror_plan::layout::{Content, LiveFile, bucket_of, buckets_for, referenced_data_file};

use crate::error::{Error, Result};
use crate::writer::*;

use super::TableState;

impl TableState {
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
}
