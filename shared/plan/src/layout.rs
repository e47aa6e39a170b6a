//! The manifest layout: every data file lives in one of `B` *bucket* manifests, chosen by a
//! stable hash of its location, and its delete files in the delete manifest of the same
//! bucket. A commit rewrites only the buckets its files fall in, so its cost follows the
//! commit, not the table. `B` grows in powers of two. A fanned-out bootstrap splits the
//! buckets into contiguous ranges, one per part.

use iceberg::spec::{DataFile, FormatVersion, PrimitiveLiteral};
use serde::{Deserialize, Serialize};

use crate::properties::DELETE_FILE_PATH_ID;
use crate::target::NamedBy;

/// Target number of data files per bucket manifest.
pub const FILES_PER_BUCKET: usize = 1000;

/// Data manifests and delete manifests are bucketed alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Content {
    Data,
    Deletes,
}

impl Content {
    /// The marker in a manifest's file name: `...-b<bucket>.avro` or `...-d<bucket>.avro`.
    pub fn marker(self) -> &'static str {
        match self {
            Content::Data => "-b",
            Content::Deletes => "-d",
        }
    }
}

/// One part of a bootstrap fanned out over several processes (or Step Functions tasks): the
/// new table has `buckets` buckets, and part `part` of `parts` writes the manifests of one
/// contiguous range of them. Every part names the same snapshot. (Ranges, not `b % parts`:
/// FNV-1a's low bits follow the low bits of the path's bytes, so paths of one shape can
/// fill only odd buckets, and a modulo would leave whole parts empty.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FanOutPart {
    pub snapshot_id: i64,
    pub buckets: u32,
    pub part: u32,
    pub parts: u32,
}

impl FanOutPart {
    pub fn owns_bucket(&self, bucket: u32) -> bool {
        self.part_of_bucket(bucket) == self.part
    }

    /// Whether the data file at `location` (and its deletes) belongs to this part.
    pub fn owns(&self, location: &str) -> bool {
        self.part_of(location) == self.part
    }

    /// The part the data file at `location` (and its deletes) belongs to.
    pub fn part_of(&self, location: &str) -> u32 {
        self.part_of_bucket(bucket_of(location, self.buckets))
    }

    fn part_of_bucket(&self, bucket: u32) -> u32 {
        let part = u64::from(bucket) * u64::from(self.parts) / u64::from(self.buckets.max(1));
        u32::try_from(part).unwrap_or(u32::MAX)
    }
}

/// What every step of one fan-out shares (the plan step's answer, the parts' and the
/// finishing step's input): the Delta version, the Glue table, the snapshot ID and the
/// bucket layout. Plain data, as the Step Functions state machine passes it along.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FanOutPlan {
    pub table_uri: String,
    pub metadata_uri: Option<String>,
    pub database: String,
    pub table: String,
    pub named_by: NamedBy,
    pub delta_version: i64,
    /// The Iceberg format version of the new table: 2 or 3.
    pub format_version: u8,
    pub snapshot_id: i64,
    /// Data files at that version (counted from the log's adds: an upper bound when commits
    /// after the checkpoint remove files); they decide the bucket count.
    pub files: u64,
    pub buckets: u32,
    pub parts: u32,
    /// `0..parts`: the items a Step Functions Map iterates over.
    pub part_numbers: Vec<u32>,
}

impl FanOutPlan {
    /// Part `part` of the plan; None past the last part.
    pub fn part(&self, part: u32) -> Option<FanOutPart> {
        (part < self.parts).then_some(FanOutPart {
            snapshot_id: self.snapshot_id,
            buckets: self.buckets,
            part,
            parts: self.parts,
        })
    }

    /// The Iceberg format version of the new table.
    pub fn format_version(&self) -> FormatVersion {
        match self.format_version {
            3 => FormatVersion::V3,
            _ => FormatVersion::V2,
        }
    }
}

/// How many buckets a new table of about `files` data files gets (the same rule a
/// single-process bootstrap follows).
pub fn bucket_count_for(files: u64) -> u32 {
    buckets_for(usize::try_from(files).unwrap_or(usize::MAX))
}

/// FNV-1a: a hash that is the same on every machine and in every release.
pub fn bucket_of(location: &str, buckets: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in location.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (hash % u64::from(buckets.max(1))) as u32
}

/// How many buckets `files` data files need.
pub fn buckets_for(files: usize) -> u32 {
    let wanted = files.div_ceil(FILES_PER_BUCKET).max(1);
    u32::try_from(wanted.next_power_of_two()).unwrap_or(u32::MAX)
}

/// The bucket a manifest holds, from its file name `...-b<bucket>.avro` (data) or
/// `...-d<bucket>.avro` (deletes).
pub fn bucket_of_manifest(path: &str, content: Content) -> Option<u32> {
    path.rsplit_once(content.marker())?
        .1
        .strip_suffix(".avro")?
        .parse()
        .ok()
}

/// A live manifest entry, with what it inherited from its manifest.
#[derive(Debug, Clone)]
pub struct LiveFile {
    pub data_file: DataFile,
    pub snapshot_id: i64,
    pub sequence_number: i64,
    pub file_sequence_number: i64,
    /// v3 row lineage: the first row ID the file has, given or inherited from its manifest.
    /// Written out explicitly when the entry is carried into another manifest, so that its
    /// rows keep their `_row_id` (the spec's rule for EXISTING and DELETED entries).
    pub first_row_id: Option<i64>,
}

/// The new content of one bucket manifest: of data files, or of the delete files that apply
/// to the data files of the same bucket.
#[derive(Debug, Default)]
pub struct BucketChange {
    /// Live files that stay (EXISTING entries).
    pub kept: Vec<LiveFile>,
    /// Live files that leave in this snapshot (DELETED entries).
    pub deleted: Vec<LiveFile>,
    /// Files this snapshot adds (ADDED entries).
    pub added: Vec<DataFile>,
}

impl BucketChange {
    /// Files and records that leave.
    pub fn leaving(&self) -> (u64, u64) {
        let records = self
            .deleted
            .iter()
            .map(|d| d.data_file.record_count())
            .sum();
        (self.deleted.len() as u64, records)
    }

    /// Files and records that arrive.
    pub fn arriving(&self) -> (u64, u64) {
        let records = self.added.iter().map(DataFile::record_count).sum();
        (self.added.len() as u64, records)
    }
}

/// What one snapshot does to one bucket's data and delete manifests.
#[derive(Debug)]
pub struct BucketChanges {
    pub data: BucketChange,
    pub deletes: BucketChange,
}

/// One bucket's change: its live data files `data` and delete files `deletes`, less the
/// data files `removed` (locations), plus `added` and their `new_deletes`. A file re-added
/// with the same path replaces the old entry (never twice), and the delete files of a
/// leaving (or re-added) data file are retired with it, in the same snapshot.
pub fn change_bucket(
    data: Vec<LiveFile>,
    deletes: Vec<LiveFile>,
    removed: Vec<String>,
    added: Vec<DataFile>,
    new_deletes: Vec<DataFile>,
) -> BucketChanges {
    let leaving: std::collections::HashSet<String> = removed
        .into_iter()
        .chain(added.iter().map(|a| a.file_path().to_string()))
        .collect();
    let (deleted, kept): (Vec<LiveFile>, Vec<LiveFile>) = data
        .into_iter()
        .partition(|live| leaving.contains(live.data_file.file_path()));
    let (retired, staying): (Vec<LiveFile>, Vec<LiveFile>) =
        deletes.into_iter().partition(|live| {
            referenced_data_file(&live.data_file).is_some_and(|p| leaving.contains(&p))
        });
    BucketChanges {
        data: BucketChange {
            kept,
            deleted,
            added,
        },
        deletes: BucketChange {
            kept: staying,
            deleted: retired,
            added: new_deletes,
        },
    }
}

/// The data file a position-delete file applies to (its equal `file_path` bounds).
pub fn referenced_data_file(delete_file: &DataFile) -> Option<String> {
    delete_file.referenced_data_file().or_else(|| {
        match delete_file
            .lower_bounds()
            .get(&DELETE_FILE_PATH_ID)?
            .literal()
        {
            PrimitiveLiteral::String(path) => Some(path.clone()),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_stable_and_grow_in_powers_of_two() {
        assert_eq!(bucket_of("s3://b/t/a.parquet", 1), 0);
        let b = bucket_of("s3://b/t/a.parquet", 64);
        assert_eq!(
            b,
            bucket_of("s3://b/t/a.parquet", 64),
            "same input, same bucket"
        );
        assert!(b < 64);
        assert_eq!(buckets_for(0), 1);
        assert_eq!(buckets_for(1000), 1);
        assert_eq!(buckets_for(1001), 2);
        assert_eq!(buckets_for(100_000), 128);
        assert_eq!(
            bucket_of_manifest(
                "s3://b/t/_lakemirror/iceberg/metadata/0f-aa-b17.avro",
                Content::Data
            ),
            Some(17)
        );
        assert_eq!(
            bucket_of_manifest(
                "s3://b/t/_lakemirror/iceberg/metadata/0f-aa-d3.avro",
                Content::Deletes
            ),
            Some(3)
        );
        assert_eq!(
            bucket_of_manifest("s3://b/t/metadata/snap-1-x.avro", Content::Data),
            None
        );
    }

    #[test]
    fn files_spread_over_buckets() {
        let mut counts = [0usize; 8];
        for i in 0..8000 {
            counts[bucket_of(&format!("s3://b/t/part-{i:05}.parquet"), 8) as usize] += 1;
        }
        assert!(counts.iter().all(|c| (800..1200).contains(c)), "{counts:?}");
    }

    fn file(path: &str, records: u64) -> DataFile {
        iceberg::spec::DataFileBuilder::default()
            .content(iceberg::spec::DataContentType::Data)
            .file_path(path.to_string())
            .file_format(iceberg::spec::DataFileFormat::Parquet)
            .partition(iceberg::spec::Struct::empty())
            .record_count(records)
            .file_size_in_bytes(100)
            .build()
            .unwrap()
    }

    fn deletes_of(path: &str, rows: u64) -> DataFile {
        iceberg::spec::DataFileBuilder::default()
            .content(iceberg::spec::DataContentType::PositionDeletes)
            .file_path(format!("{path}.deletes.parquet"))
            .file_format(iceberg::spec::DataFileFormat::Parquet)
            .partition(iceberg::spec::Struct::empty())
            .record_count(rows)
            .file_size_in_bytes(10)
            .referenced_data_file(Some(path.to_string()))
            .build()
            .unwrap()
    }

    fn live(data_file: DataFile) -> LiveFile {
        LiveFile {
            data_file,
            snapshot_id: 1,
            sequence_number: 1,
            file_sequence_number: 1,
            first_row_id: None,
        }
    }

    fn paths(files: &[LiveFile]) -> Vec<&str> {
        files.iter().map(|f| f.data_file.file_path()).collect()
    }

    #[test]
    fn a_delete_file_leaves_with_its_data_file_and_a_new_vector_replaces_the_old_one() {
        let data = vec![
            live(file("a", 10)),
            live(file("b", 20)),
            live(file("c", 30)),
        ];
        let deletes = vec![
            live(deletes_of("a", 1)),
            live(deletes_of("b", 2)),
            live(deletes_of("c", 3)),
        ];
        // b is removed; c is re-added with a new deletion vector (remove + add of one path).
        let change = change_bucket(
            data,
            deletes,
            vec!["b".into()],
            vec![file("c", 30), file("d", 40)],
            vec![deletes_of("c", 5)],
        );
        assert_eq!(paths(&change.data.kept), ["a"]);
        assert_eq!(paths(&change.data.deleted), ["b", "c"]);
        assert_eq!(change.data.leaving(), (2, 50));
        assert_eq!(change.data.arriving(), (2, 70));
        assert_eq!(paths(&change.deletes.kept), ["a.deletes.parquet"]);
        assert_eq!(
            paths(&change.deletes.deleted),
            ["b.deletes.parquet", "c.deletes.parquet"]
        );
        assert_eq!(change.deletes.leaving(), (2, 5));
        assert_eq!(change.deletes.arriving(), (1, 5));
    }

    #[test]
    fn an_untouched_bucket_keeps_everything() {
        let change = change_bucket(
            vec![live(file("a", 10))],
            vec![live(deletes_of("a", 1))],
            Vec::new(),
            Vec::new(),
            Vec::new(),
        );
        assert_eq!(paths(&change.data.kept), ["a"]);
        assert_eq!(paths(&change.deletes.kept), ["a.deletes.parquet"]);
        assert!(change.data.deleted.is_empty() && change.deletes.deleted.is_empty());
    }
}
