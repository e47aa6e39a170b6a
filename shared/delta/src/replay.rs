//! Log replay: the active file set at a version, from a checkpoint and JSON commits.
//! Pure: no IO.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::actions::{Add, DeltaCommit, Metadata, Protocol};
use crate::bounded::HeapSize;

/// A file action as a replay meets it: an add, or the path (as the log writes it) of a
/// remove.
#[derive(Debug, Clone, Copy)]
pub enum FileAction<'a> {
    Add(&'a Add),
    Remove(&'a str),
}

impl FileAction<'_> {
    /// The path as the log writes it (URI-encoded).
    pub fn path(&self) -> &str {
        match self {
            FileAction::Add(add) => &add.path,
            FileAction::Remove(path) => path,
        }
    }
}

/// Which file actions a replay applies to the files it holds: one part of a fanned-out
/// bootstrap keeps the files of its buckets and lets the others go as they are read; a
/// bootstrap in groups hands every action to its group's spill file and holds none. A
/// filter sees every action, in log order.
#[derive(Clone)]
pub struct FileFilter(Arc<dyn Fn(FileAction<'_>) -> bool + Send + Sync>);

impl FileFilter {
    pub fn new(keep: impl Fn(FileAction<'_>) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(keep))
    }

    /// Keeps the adds whose path (as the log writes it) `keep` accepts; applies every remove.
    pub fn adds(keep: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        Self::new(move |action| match action {
            FileAction::Add(add) => keep(&add.path),
            FileAction::Remove(_) => true,
        })
    }

    pub fn keeps(&self, action: FileAction<'_>) -> bool {
        (self.0)(action)
    }
}

impl std::fmt::Debug for FileFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileFilter")
    }
}

/// The data files of a Delta table at one version, keyed by decoded path, with the table's
/// metadata and protocol at that version.
#[derive(Debug, Clone, Default)]
pub struct ActiveFileSet {
    pub files: BTreeMap<String, Add>,
    pub metadata: Option<Metadata>,
    pub protocol: Option<Protocol>,
    /// Metadata the replayed commits replaced, oldest first: the schemas older files may
    /// have been written with.
    pub earlier_metadata: Vec<Metadata>,
    /// Files the filter lets go are never held (None: every file).
    pub filter: Option<FileFilter>,
    /// The row ID high-water mark (`delta.rowTracking` domain), when the log states it.
    pub row_id_high_water_mark: Option<i64>,
    /// The memory the held files take ([`HeapSize`], with their keys).
    pub held_bytes: u64,
}

/// Memory one held file takes: its add, its decoded path as the key, the map's entry.
fn held_size(key_len: usize, add: &Add) -> u64 {
    (std::mem::size_of::<Add>() + 2 * std::mem::size_of::<String>() + key_len) as u64
        + add.heap_size()
}

impl ActiveFileSet {
    /// An empty set that keeps only the files `filter` keeps.
    pub fn filtered(filter: FileFilter) -> Self {
        Self {
            filter: Some(filter),
            ..Self::default()
        }
    }

    /// Adds (or replaces) one file, unless the filter lets it go.
    pub fn add(&mut self, add: Add) {
        if self
            .filter
            .as_ref()
            .is_none_or(|f| f.keeps(FileAction::Add(&add)))
        {
            let key = decode_path(&add.path);
            let key_len = key.len();
            self.held_bytes += held_size(key_len, &add);
            if let Some(replaced) = self.files.insert(key, add) {
                self.held_bytes = self
                    .held_bytes
                    .saturating_sub(held_size(key_len, &replaced));
            }
        }
    }

    /// Removes one file (by its path as the log writes it), unless the filter lets it go.
    pub fn remove(&mut self, path: &str) {
        if self
            .filter
            .as_ref()
            .is_none_or(|f| f.keeps(FileAction::Remove(path)))
        {
            let key = decode_path(path);
            if let Some(removed) = self.files.remove(&key) {
                self.held_bytes = self
                    .held_bytes
                    .saturating_sub(held_size(key.len(), &removed));
            }
        }
    }

    /// Applies one commit: removes cancel adds, a later add of the same path replaces it.
    pub fn apply(&mut self, commit: &DeltaCommit) {
        for remove in &commit.removes {
            self.remove(&remove.path);
        }
        for add in &commit.adds {
            self.add(add.clone());
        }
        if let Some(m) = &commit.metadata
            && let Some(replaced) = self.metadata.replace(m.clone())
            && replaced.schema_string != m.schema_string
        {
            self.earlier_metadata.push(replaced);
        }
        if let Some(p) = &commit.protocol {
            self.protocol = Some(p.clone());
        }
        if let Some(mark) = commit.row_id_high_water_mark {
            self.row_id_high_water_mark = Some(mark);
        }
    }
}

impl ActiveFileSet {
    /// Applies a commit file as it is parsed, in the order [`ActiveFileSet::apply`] keeps
    /// (its removes, then its adds), holding none of its file actions: the file is parsed
    /// twice, once for each. Answers the commit without its file actions.
    pub fn apply_parsed(
        &mut self,
        version: i64,
        bytes: &[u8],
        file_time_ms: i64,
    ) -> Result<DeltaCommit, String> {
        DeltaCommit::parse_each(version, bytes, file_time_ms, |line| {
            if let Some(remove) = &line.remove {
                self.remove(&remove.path);
            }
            line.add.is_none() && line.remove.is_none()
        })?;
        let commit = DeltaCommit::parse_each(version, bytes, file_time_ms, |line| {
            if let Some(add) = line.add.take() {
                self.add(add);
            }
            line.remove.is_none()
        })?;
        self.apply(&commit);
        Ok(commit)
    }
}

/// Decodes a Delta `add.path`/`remove.path` (a URI reference) exactly once.
pub fn decode_path(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(version: i64, lines: &str) -> DeltaCommit {
        DeltaCommit::parse(version, lines.as_bytes(), 0).unwrap()
    }

    fn add(path: &str) -> String {
        format!(
            r#"{{"add":{{"path":"{path}","partitionValues":{{}},"size":1,"modificationTime":1,"dataChange":true}}}}"#
        )
    }

    fn remove(path: &str) -> String {
        format!(r#"{{"remove":{{"path":"{path}","dataChange":true}}}}"#)
    }

    #[test]
    fn removes_cancel_adds_and_paths_decode_once() {
        let mut set = ActiveFileSet::default();
        set.apply(&commit(
            0,
            &[add("a"), add("x=A%252FA/b"), add("c%20d")].join("\n"),
        ));
        set.apply(&commit(1, &[remove("a"), add("e")].join("\n")));
        // a removed path spelled with different encoding still cancels the add
        set.apply(&commit(2, &remove("c d")));
        let paths: Vec<_> = set.files.keys().cloned().collect();
        assert_eq!(paths, vec!["e", "x=A%2FA/b"]);
    }

    #[test]
    fn a_filtered_set_holds_only_the_files_its_filter_keeps() {
        // The filter sees the path as the log writes it (here still encoded).
        let mut set = ActiveFileSet::filtered(FileFilter::adds(|path| path.starts_with('k')));
        set.apply(&commit(
            0,
            &[add("k1"), add("drop1"), add("k%202")].join("\n"),
        ));
        set.apply(&commit(
            1,
            &[remove("k1"), remove("drop1"), add("k3")].join("\n"),
        ));
        let paths: Vec<_> = set.files.keys().cloned().collect();
        assert_eq!(paths, vec!["k 2", "k3"]);
        assert!(set.metadata.is_none());
    }

    #[test]
    fn a_commit_applied_as_parsed_ends_as_one_applied_whole() {
        // A deletion vector replaced: the add of the path comes before its remove.
        let lines = [
            add("a"),
            add("b"),
            remove("a"),
            r#"{"metaData":{"id":"t","format":{"provider":"parquet","options":{}},"schemaString":"{}","partitionColumns":[],"configuration":{}}}"#.to_string(),
            r#"{"commitInfo":{"timestamp":77}}"#.to_string(),
        ]
        .join("\n");
        let mut whole = ActiveFileSet::default();
        whole.apply(&commit(0, &add("a")));
        let mut parsed = whole.clone();
        let whole_commit = commit(1, &lines);
        whole.apply(&whole_commit);
        let read = parsed.apply_parsed(1, lines.as_bytes(), 0).unwrap();
        assert_eq!(
            parsed.files.keys().collect::<Vec<_>>(),
            whole.files.keys().collect::<Vec<_>>()
        );
        assert_eq!(parsed.files.keys().collect::<Vec<_>>(), vec!["a", "b"]);
        assert!(parsed.metadata.is_some());
        assert!(read.adds.is_empty() && read.removes.is_empty());
        assert_eq!(read.timestamp_ms, 77);
        assert_eq!(read.content_hash, whole_commit.content_hash);
    }

    #[test]
    fn re_add_of_a_path_keeps_one_entry() {
        let mut set = ActiveFileSet::default();
        set.apply(&commit(0, &add("a")));
        set.apply(&commit(1, &add("a")));
        assert_eq!(set.files.len(), 1);
    }
}
