//! Log replay: the active file set at a version, from a checkpoint and JSON commits.
//! Pure: no IO.

use std::collections::BTreeMap;

use super::actions::{Add, DeltaCommit, Metadata, Protocol};

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
}

impl ActiveFileSet {
    /// Applies one commit: removes cancel adds, a later add of the same path replaces it.
    pub fn apply(&mut self, commit: &DeltaCommit) {
        for remove in &commit.removes {
            self.files.remove(&decode_path(&remove.path));
        }
        for add in &commit.adds {
            self.files.insert(decode_path(&add.path), add.clone());
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
    fn re_add_of_a_path_keeps_one_entry() {
        let mut set = ActiveFileSet::default();
        set.apply(&commit(0, &add("a")));
        set.apply(&commit(1, &add("a")));
        assert_eq!(set.files.len(), 1);
    }
}
