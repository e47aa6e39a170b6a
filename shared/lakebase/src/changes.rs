//! What a range of Delta commits did to a table's rows, by file: the plan of an incremental
//! sync. Pure: no IO.
//!
//! Files are immutable, so the rows of a table are the rows of its active files minus their
//! deletion vectors. Between two versions, a file active at both ends with the same deletion
//! vector holds the same rows and is left alone; every other file that was active at either
//! end is read: the rows of files active only at the start are deleted by key (unless the key
//! is also among the rows at the end), the rows of files active only at the end are upserted,
//! and a file at both ends with another deletion vector contributes just the rows whose
//! deletion changed. Files added and removed inside the range never held rows at either end.
//!
//! Every action counts, `dataChange = false` ones (OPTIMIZE, ZORDER) too: skipping them would
//! break the chain of files (an update written into a file that a later compaction rewrote).
//! A range of nothing but `dataChange = false` actions changes no rows and reads nothing.

use std::collections::BTreeMap;

use lakemirror_delta::actions::{Add, DeltaCommit, Remove, num_records};
use lakemirror_delta::deletion_vector::DeletionVector;
use lakemirror_delta::replay::decode_path;

/// The row changes of a range of commits, by file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileChanges {
    /// Files active at the start only: their live rows' keys leave the table.
    pub removed: Vec<Add>,
    /// Files active at the end only: their live rows are upserted.
    pub added: Vec<Add>,
    /// Files active at both ends with different deletion vectors: (start, end).
    pub redeleted: Vec<(Add, Add)>,
}

impl FileChanges {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.added.is_empty() && self.redeleted.is_empty()
    }

    /// Rows an increment reads, from the files' stats (None when a file has none): the rows
    /// of the files at the end, and as many keys again from the files they replace (Delta
    /// rewrites whole files, so a removed file holds about the rows of its successor); a file
    /// with a changed deletion vector is read once.
    pub fn rows_read(&self) -> Option<u64> {
        let rows = |add: &Add| num_records(add.stats.as_deref());
        let added: Option<u64> = self.added.iter().map(rows).sum();
        let redeleted: Option<u64> = self.redeleted.iter().map(|(_, end)| rows(end)).sum();
        Some(added?.saturating_mul(2).saturating_add(redeleted?))
    }
}

/// Tables smaller than this are always synced incrementally: either plan is quick.
pub const PLAN_CHOICE_MIN_ROWS: u64 = 100_000;
/// What applying one row read by an increment costs, in rows loaded by a full refresh
/// (measured by tests/bench/lakebase_refresh.py: 3.6 µs against 1.06 µs per row).
pub const INCREMENT_COST_PER_ROW: u64 = 3;

/// Whether reloading a table of `table_rows` costs less than an increment reading
/// `rows_read` rows (an update scattered over every file rewrites every file).
pub fn full_refresh_is_cheaper(rows_read: u64, table_rows: u64) -> bool {
    table_rows >= PLAN_CHOICE_MIN_ROWS
        && rows_read.saturating_mul(INCREMENT_COST_PER_ROW) > table_rows
}

/// Why a range cannot be applied from its commits alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotIncremental {
    /// A remove without `partitionValues` (no `extendedFileMetadata`) on a partitioned table:
    /// the rows it held cannot be rebuilt.
    RemoveWithoutPartitionValues(String),
    /// A remove's deletion vector does not parse.
    BadDeletionVector(String),
}

impl std::fmt::Display for NotIncremental {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RemoveWithoutPartitionValues(path) => write!(
                f,
                "the remove of {path} carries no partitionValues (written without extendedFileMetadata)"
            ),
            Self::BadDeletionVector(path) => {
                write!(
                    f,
                    "the deletion vector in the remove of {path} does not parse"
                )
            }
        }
    }
}

/// The file changes of `commits` (contiguous, oldest first) on a table with
/// `partition_columns` (at the end of the range).
pub fn file_changes(
    commits: &[DeltaCommit],
    partitioned: bool,
) -> Result<FileChanges, NotIncremental> {
    let all_rearranging = commits
        .iter()
        .all(|c| c.adds.iter().all(|a| !a.data_change) && c.removes.iter().all(|r| !r.data_change));
    if all_rearranging {
        return Ok(FileChanges::default());
    }
    // Per decoded path: the file's entry at the start (known from its first action being a
    // remove) and at the end (its last add, unless removed after it).
    #[derive(Default)]
    struct Ends {
        first_seen: bool,
        start: Option<Add>,
        end: Option<Add>,
    }
    let mut files: BTreeMap<String, Ends> = BTreeMap::new();
    for commit in commits {
        for remove in &commit.removes {
            let ends = files.entry(decode_path(&remove.path)).or_default();
            if !ends.first_seen {
                ends.start = Some(removed_entry(remove, partitioned)?);
            }
            ends.first_seen = true;
            ends.end = None;
        }
        for add in &commit.adds {
            let ends = files.entry(decode_path(&add.path)).or_default();
            ends.first_seen = true;
            ends.end = Some(add.clone());
        }
    }
    let mut changes = FileChanges::default();
    for (_, ends) in files {
        match (ends.start, ends.end) {
            (None, None) => {}
            (None, Some(end)) => changes.added.push(end),
            (Some(start), None) => changes.removed.push(start),
            (Some(start), Some(end)) => {
                if dv_id(&start.deletion_vector) != dv_id(&end.deletion_vector) {
                    changes.redeleted.push((start, end));
                }
            }
        }
    }
    Ok(changes)
}

/// A remove as the add it cancels: path, partition values, deletion vector.
fn removed_entry(remove: &Remove, partitioned: bool) -> Result<Add, NotIncremental> {
    let partition_values = match (&remove.partition_values, partitioned) {
        (Some(values), _) => values.clone(),
        (None, false) => Default::default(),
        (None, true) => {
            return Err(NotIncremental::RemoveWithoutPartitionValues(
                remove.path.clone(),
            ));
        }
    };
    let deletion_vector = remove.deletion_vector.clone();
    Ok(Add {
        path: remove.path.clone(),
        partition_values,
        size: remove.size.unwrap_or(0),
        data_change: remove.data_change,
        stats: None,
        deletion_vector,
        base_row_id: None,
        default_row_commit_version: None,
    })
}

/// What identifies a deletion vector: where it is stored (and its size, for inline ones).
fn dv_id(dv: &Option<DeletionVector>) -> Option<(String, String, Option<i64>)> {
    dv.as_ref().map(|d| {
        (
            d.storage_type.clone(),
            d.path_or_inline_dv.clone(),
            d.offset,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(version: i64, lines: &[String]) -> DeltaCommit {
        DeltaCommit::parse(version, lines.join("\n").as_bytes(), 0).unwrap()
    }

    /// The `deletionVector` field of an action (empty without one).
    fn dv_field(dv: Option<&str>) -> String {
        dv.map_or(String::new(), |d| {
            format!(
                r#","deletionVector":{{"storageType":"u","pathOrInlineDv":"{d}","offset":1,"sizeInBytes":10,"cardinality":1}}"#
            )
        })
    }

    fn add(path: &str, dv: Option<&str>, data_change: bool) -> String {
        let dv = dv_field(dv);
        format!(
            r#"{{"add":{{"path":"{path}","partitionValues":{{"p":"1"}},"size":1,"modificationTime":1,"dataChange":{data_change}{dv}}}}}"#
        )
    }

    fn remove(path: &str, dv: Option<&str>, data_change: bool) -> String {
        let dv = dv_field(dv);
        format!(
            r#"{{"remove":{{"path":"{path}","partitionValues":{{"p":"1"}},"dataChange":{data_change}{dv}}}}}"#
        )
    }

    fn paths(files: &[Add]) -> Vec<&str> {
        files.iter().map(|a| a.path.as_str()).collect()
    }

    #[test]
    fn an_update_removes_the_old_file_and_adds_the_new() {
        let changes = file_changes(
            &[commit(
                1,
                &[
                    remove("a.parquet", None, true),
                    add("b.parquet", None, true),
                ],
            )],
            true,
        )
        .unwrap();
        assert_eq!(paths(&changes.removed), ["a.parquet"]);
        assert_eq!(paths(&changes.added), ["b.parquet"]);
        assert_eq!(changes.removed[0].partition_value("p"), Some("1"));
    }

    #[test]
    fn a_file_added_and_removed_inside_the_range_is_not_read() {
        let changes = file_changes(
            &[
                commit(1, &[add("b.parquet", None, true)]),
                commit(2, &[remove("b.parquet", None, true)]),
            ],
            false,
        )
        .unwrap();
        assert!(changes.is_empty());
    }

    #[test]
    fn a_compaction_inside_the_range_keeps_the_chain() {
        // Update writes b; OPTIMIZE rewrites b into c (dataChange=false); a delete drops c.
        let changes = file_changes(
            &[
                commit(
                    1,
                    &[
                        remove("a.parquet", None, true),
                        add("b.parquet", None, true),
                    ],
                ),
                commit(
                    2,
                    &[
                        remove("b.parquet", None, false),
                        add("c.parquet", None, false),
                    ],
                ),
                commit(
                    3,
                    &[
                        remove("c.parquet", None, true),
                        add("d.parquet", None, true),
                    ],
                ),
            ],
            false,
        )
        .unwrap();
        assert_eq!(paths(&changes.removed), ["a.parquet"]);
        assert_eq!(paths(&changes.added), ["d.parquet"]);
    }

    #[test]
    fn a_range_of_compactions_changes_nothing() {
        let changes = file_changes(
            &[commit(
                1,
                &[
                    remove("a.parquet", None, false),
                    remove("b.parquet", None, false),
                    add("c.parquet", None, false),
                ],
            )],
            false,
        )
        .unwrap();
        assert!(changes.is_empty());
    }

    #[test]
    fn a_new_deletion_vector_reads_only_that_file() {
        let changes = file_changes(
            &[
                commit(
                    1,
                    &[
                        remove("a.parquet", None, true),
                        add("a.parquet", Some("x"), true),
                    ],
                ),
                commit(
                    2,
                    &[
                        remove("a.parquet", Some("x"), true),
                        add("a.parquet", Some("y"), true),
                    ],
                ),
            ],
            false,
        )
        .unwrap();
        assert!(changes.removed.is_empty() && changes.added.is_empty());
        let (start, end) = &changes.redeleted[0];
        assert!(start.deletion_vector.is_none());
        assert_eq!(end.deletion_vector.as_ref().unwrap().path_or_inline_dv, "y");
    }

    #[test]
    fn a_deletion_vector_set_and_cleared_inside_the_range_changes_nothing() {
        let changes = file_changes(
            &[
                commit(
                    1,
                    &[
                        remove("a.parquet", Some("x"), true),
                        add("a.parquet", Some("y"), true),
                    ],
                ),
                commit(
                    2,
                    &[
                        remove("a.parquet", Some("y"), true),
                        add("a.parquet", Some("x"), true),
                    ],
                ),
            ],
            false,
        )
        .unwrap();
        assert!(changes.is_empty());
    }

    #[test]
    fn a_full_refresh_is_chosen_when_the_changed_files_hold_much_of_a_large_table() {
        // A 1% update in one of ten files reads 2 x 500,000 rows of a 5,000,000-row table.
        assert!(!full_refresh_is_cheaper(1_000_000, 5_000_000));
        // The same update scattered over every file rewrites every file.
        assert!(full_refresh_is_cheaper(10_000_000, 5_000_000));
        // Small tables are always synced incrementally.
        assert!(!full_refresh_is_cheaper(20, 3));
    }

    #[test]
    fn rows_read_come_from_the_stats_of_the_files_at_the_end() {
        let with_stats = |path: &str, rows: u64| {
            serde_json::from_str::<Add>(&format!(
                r#"{{"path":"{path}","partitionValues":{{}},"size":1,"dataChange":true,"stats":"{{\"numRecords\":{rows}}}"}}"#
            ))
            .unwrap()
        };
        let changes = FileChanges {
            removed: vec![with_stats("a", 7)],
            added: vec![with_stats("b", 10), with_stats("c", 5)],
            redeleted: vec![(with_stats("d", 4), with_stats("d", 4))],
        };
        assert_eq!(changes.rows_read(), Some(2 * 15 + 4));
        let mut no_stats = changes.clone();
        no_stats.added[0].stats = None;
        assert_eq!(no_stats.rows_read(), None);
    }

    #[test]
    fn paths_are_compared_decoded() {
        let changes = file_changes(
            &[
                commit(1, &[add("p%3D1/b.parquet", None, true)]),
                commit(2, &[remove("p=1/b.parquet", None, true)]),
            ],
            false,
        )
        .unwrap();
        assert!(changes.is_empty());
    }

    #[test]
    fn a_partitioned_remove_without_partition_values_is_refused() {
        let lines = [r#"{"remove":{"path":"a.parquet","dataChange":true}}"#.to_string()];
        assert_eq!(
            file_changes(&[commit(1, &lines)], true),
            Err(NotIncremental::RemoveWithoutPartitionValues(
                "a.parquet".into()
            ))
        );
        assert_eq!(
            paths(&file_changes(&[commit(1, &lines)], false).unwrap().removed),
            ["a.parquet"]
        );
    }
}
