//! Catalog-managed tables (Delta's `catalogManaged` feature, protocol RFC
//! `protocol_rfcs/accepted/catalog-managed.md`): the catalog, not the file system, decides
//! which commit is version N.
//!
//! A writer stages a commit as `_delta_log/_staged_commits/<version>.<uuid>.json`, the catalog
//! ratifies one staged file per version, and the ratified commit is published to
//! `_delta_log/<version>.json` later. The table at version N is the published log plus the
//! commits the catalog lists as ratified ([`Ratified`]); a staged file it does not list is not
//! part of the table and is never read. The catalog is asked through the [`CommitCatalog`]
//! seam (Unity Catalog in `lakemirror-unity`); without one, a catalog-managed table is read up
//! to its newest published version, which is ratified by definition.

use std::collections::BTreeMap;

use crate::actions::{Metadata, Protocol};

/// The reader-writer feature of a catalog-managed table, and its name in Delta's previews.
pub const FEATURES: [&str; 2] = ["catalogManaged", "catalogOwned-preview"];

/// The configuration keys that name the table's id in its catalog: Unity Catalog's, then the
/// spellings of Delta 4.0's connectors.
pub const TABLE_ID_KEYS: [&str; 3] = [
    "io.unitycatalog.tableId",
    "catalogManaged.unityCatalog.tableId",
    "ucTableId",
];

/// Folder of `_delta_log/` where writers stage commits for the catalog to ratify.
pub const STAGED_COMMITS: &str = "_staged_commits";

/// Whether the protocol makes the table catalog-managed.
pub fn is_catalog_managed(protocol: &Protocol) -> bool {
    protocol
        .reader_features
        .iter()
        .flatten()
        .any(|f| FEATURES.contains(&f.as_str()))
}

/// The table's id in its catalog, as its configuration states it.
pub fn catalog_table_id(metadata: &Metadata) -> Option<&str> {
    TABLE_ID_KEYS
        .iter()
        .find_map(|key| metadata.configuration.get(*key)?.as_deref())
        .map(str::trim)
        .filter(|id| !id.is_empty())
}

pub use crate::log::staged_commit_version;

/// A staged commit of a catalog-managed Delta table
/// (`_delta_log/_staged_commits/<version>.<uuid>.json`), as an event announced it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StagedCommitFile {
    pub version: i64,
    pub file_name: String,
}

/// A commit the catalog ratified: its staged file, by name, in `_delta_log/_staged_commits/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RatifiedCommit {
    pub version: i64,
    /// `<version:020>.<uuid>.json`, a name only: it can lie nowhere but in this table's
    /// `_delta_log/_staged_commits/`.
    pub file_name: String,
    pub size: u64,
    /// The staged file's modification time, in ms.
    pub modified_ms: i64,
}

/// What the catalog says of a catalog-managed table: its newest ratified version, and the
/// ratified commits it still lists (those not yet published, and maybe some that are).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ratified {
    /// Who was asked (`Unity Catalog at https://…`), for messages.
    pub catalog: String,
    /// The table's id in the catalog.
    pub table_id: String,
    /// The newest version the catalog ratified: versions past it do not exist, even where a
    /// file in `_delta_log/` names one.
    pub latest_version: i64,
    pub commits: BTreeMap<i64, RatifiedCommit>,
    /// The catalog's name of the table (`catalog.schema.table`), when it answered by name:
    /// recorded in the mirror, it lets the next process ask by name at once
    /// ([`CommitCatalog::known_as`]).
    pub name: Option<String>,
}

impl Ratified {
    /// The catalog's answer, checked: every commit's file is a staged commit's name for its
    /// own version (never a path, which could lead out of the table), and commits past the
    /// newest version are dropped.
    pub fn new(
        catalog: String,
        table_id: String,
        latest_version: i64,
        commits: impl IntoIterator<Item = RatifiedCommit>,
    ) -> Result<Self, String> {
        let mut listed = BTreeMap::new();
        for commit in commits {
            if staged_commit_version(&commit.file_name) != Some(commit.version) {
                return Err(format!(
                    "{catalog} names {:?} as the staged commit of version {}: not a staged commit file of that version (<version:020>.<uuid>.json in _delta_log/_staged_commits/); nothing was read",
                    commit.file_name, commit.version
                ));
            }
            if commit.version <= latest_version {
                listed.insert(commit.version, commit);
            }
        }
        Ok(Self {
            catalog,
            table_id,
            latest_version,
            commits: listed,
            name: None,
        })
    }

    /// The same answer, given by the table of this name.
    pub fn named(self, name: Option<String>) -> Self {
        Self { name, ..self }
    }
}

/// Why a catalog could not say which commits it ratified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogError {
    /// The catalog did not answer, or answered with a server error: asking again may help.
    Unavailable(String),
    /// The catalog refused, or its answer cannot be used for this table: it will not change
    /// by itself. The message names the table, the catalog and what to do.
    Refused(String),
}

impl std::fmt::Display for CatalogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CatalogError::Unavailable(m) | CatalogError::Refused(m) => f.write_str(m),
        }
    }
}

/// The catalog that ratifies a catalog-managed table's commits.
#[async_trait::async_trait]
pub trait CommitCatalog: Send + Sync + std::fmt::Debug {
    /// The catalog in words, for messages: `Unity Catalog at https://uc.example.com`.
    fn describe(&self) -> String;

    /// The commits the catalog ratified for its table `table_id`, whose storage location
    /// must be `table_root`: an answer about a table stored elsewhere is refused.
    async fn ratified(&self, table_id: &str, table_root: &str) -> Result<Ratified, CatalogError>;

    /// The name the catalog gave `table_id` at `table_root` when last asked
    /// ([`Ratified::name`], as the mirror recorded it): a hint to ask by, which a catalog
    /// checks as it checks any answer (the table's id and location), never a fact. Ignored
    /// by default.
    fn known_as(&self, _table_id: &str, _table_root: &str, _name: &str) {}
}

impl Ratified {
    /// Whether the catalog decided which commit is `staged`'s version: false while that
    /// version is past the newest it ratified (the file may still win it, or lose it).
    pub fn decided(&self, staged: &StagedCommitFile) -> bool {
        staged.version <= self.latest_version
    }

    /// Whether `staged` is the commit the catalog ratified for its version (as far as the
    /// catalog still lists it: a published version is not listed).
    pub fn ratified(&self, staged: &StagedCommitFile) -> bool {
        self.commits
            .get(&staged.version)
            .is_some_and(|c| c.file_name == staged.file_name)
    }
}

/// How a log reads a catalog-managed table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogManaged {
    /// With the commits its catalog ratified.
    Ratified(std::sync::Arc<Ratified>),
    /// Without a catalog to ask: up to the newest published version only.
    PublishedOnly { table_id: Option<String> },
}

impl CatalogManaged {
    /// The table's id in its catalog.
    pub fn table_id(&self) -> Option<&str> {
        match self {
            CatalogManaged::Ratified(r) => Some(&r.table_id),
            CatalogManaged::PublishedOnly { table_id } => table_id.as_deref(),
        }
    }

    /// The catalog's name of the table, when it answered by name.
    pub fn catalog_name(&self) -> Option<&str> {
        match self {
            CatalogManaged::Ratified(r) => r.name.as_deref(),
            CatalogManaged::PublishedOnly { .. } => None,
        }
    }

    /// The newest version the catalog ratified, when it was asked.
    pub fn ratified_version(&self) -> Option<i64> {
        match self {
            CatalogManaged::Ratified(r) => Some(r.latest_version),
            CatalogManaged::PublishedOnly { .. } => None,
        }
    }

    /// Why the table is read only up to its newest published version, and what lifts that.
    pub fn limited(&self) -> Option<String> {
        match self {
            CatalogManaged::Ratified(_) => None,
            CatalogManaged::PublishedOnly { .. } => Some(
                "a catalog-managed table read without its catalog: mirrored up to its newest published version only; set the Unity Catalog URL (UcUrl, UC_URL) and its token so the commits the catalog ratified are read as well".into(),
            ),
        }
    }
}

/// How a catalog-managed table was read, for reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CatalogManagedReport {
    /// The table's id in its catalog.
    pub table_id: Option<String>,
    /// The newest version its catalog ratified; None when no catalog was asked.
    pub ratified_version: Option<i64>,
    /// Why only the published log was read, and which setting lifts that.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited: Option<String>,
}

impl From<&CatalogManaged> for CatalogManagedReport {
    fn from(read: &CatalogManaged) -> Self {
        Self {
            table_id: read.table_id().map(str::to_string),
            ratified_version: read.ratified_version(),
            limited: read.limited(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(version: i64, file_name: &str) -> RatifiedCommit {
        RatifiedCommit {
            version,
            file_name: file_name.into(),
            size: 10,
            modified_ms: 1,
        }
    }

    #[test]
    fn staged_commit_names_carry_their_version_and_nothing_else_counts() {
        assert_eq!(
            staged_commit_version("00000000000000000007.4cb9708e-b478-44de-b203-53f9ba9b2876.json"),
            Some(7)
        );
        for other in [
            "00000000000000000007.json",
            "00000000000000000007..json",
            "00000000000000000007.a/../../x.json",
            "00000000000000000007.a%2F.json",
            "0000000000000000007a.uuid.json",
            "../00000000000000000007.uuid.json",
            "00000000000000000007.uuid.json.tmp",
        ] {
            assert_eq!(staged_commit_version(other), None, "{other}");
        }
    }

    #[test]
    fn a_catalog_answer_naming_a_path_or_another_version_is_refused() {
        let good = "00000000000000000001.4cb9708e-b478-44de-b203-53f9ba9b2876.json";
        let ok = Ratified::new("UC".into(), "t".into(), 1, [commit(1, good)]).unwrap();
        assert_eq!(ok.commits.len(), 1);
        for bad in [
            commit(1, "../../other/_delta_log/00000000000000000001.json"),
            commit(2, good),
            commit(
                1,
                "s3://other/t/_delta_log/_staged_commits/00000000000000000001.x.json",
            ),
        ] {
            let err = Ratified::new("UC".into(), "t".into(), 2, [bad]).unwrap_err();
            assert!(err.contains("not a staged commit file"), "{err}");
        }
        // Commits past the newest version do not exist.
        let past = Ratified::new("UC".into(), "t".into(), 0, [commit(1, good)]).unwrap();
        assert!(past.commits.is_empty());
    }

    #[test]
    fn the_table_id_comes_from_any_spelling_and_the_feature_from_either_name() {
        let metadata = |key: &str| Metadata {
            id: None,
            schema_string: "{}".into(),
            partition_columns: vec![],
            configuration: [(key.to_string(), Some(" abc ".to_string()))].into(),
        };
        for key in TABLE_ID_KEYS {
            assert_eq!(catalog_table_id(&metadata(key)), Some("abc"), "{key}");
        }
        assert_eq!(catalog_table_id(&metadata("other")), None);
        let protocol = |features: &[&str]| Protocol {
            min_reader_version: 3,
            reader_features: Some(features.iter().map(|f| f.to_string()).collect()),
        };
        assert!(is_catalog_managed(&protocol(&[
            "vacuumProtocolCheck",
            "catalogManaged"
        ])));
        assert!(is_catalog_managed(&protocol(&["catalogOwned-preview"])));
        assert!(!is_catalog_managed(&protocol(&["deletionVectors"])));
    }
}
