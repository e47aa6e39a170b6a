//! What Unity Catalog answers about the commits of a catalog-managed table, as both of its
//! APIs spell it: the wire types the client reads (`client.rs`) and the commit catalog
//! interprets (`commits.rs`), apart from both so that neither reaches into the other.

use serde::Deserialize;

/// One ratified commit as either API describes it (snake_case in the managed-tables API,
/// kebab-case in the Delta API).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CommitInfo {
    pub version: i64,
    #[serde(default)]
    pub timestamp: i64,
    #[serde(alias = "file-name")]
    pub file_name: String,
    #[serde(alias = "file-size")]
    pub file_size: i64,
    #[serde(alias = "file-modification-timestamp")]
    pub file_modification_timestamp: i64,
}

/// The ratified commits the catalog tracks and its newest version.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CommitsAnswer {
    #[serde(default)]
    pub commits: Vec<CommitInfo>,
    pub latest_table_version: i64,
}

/// What `GET /delta/preview/commits` answered.
#[derive(Debug)]
pub enum PreviewAnswer {
    Answered(CommitsAnswer),
    /// The server has the route but no such table at that location.
    NoSuchTable(String),
    /// The server has no such route: ask through `loadTable`.
    NoRoute,
}

/// `loadTable`'s answer (the UC Delta API, kebab-case), what lakemirror reads of it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DeltaLoadTable {
    pub metadata: DeltaTableMetadata,
    #[serde(default)]
    pub commits: Vec<CommitInfo>,
    #[serde(default)]
    pub latest_table_version: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DeltaTableMetadata {
    pub table_uuid: String,
    pub location: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_apis_spellings_of_a_commit_read_alike() {
        let preview: CommitsAnswer = serde_json::from_str(
            r#"{"commits":[{"version":1,"timestamp":5,"file_name":"00000000000000000001.u.json","file_size":706,"file_modification_timestamp":7}],"latest_table_version":1}"#,
        )
        .unwrap();
        let loaded: DeltaLoadTable = serde_json::from_str(
            r#"{"metadata":{"etag":"e","table-type":"MANAGED","table-uuid":"id","location":"s3://b/t","columns":{}},
                "commits":[{"version":1,"timestamp":5,"file-name":"00000000000000000001.u.json","file-size":706,"file-modification-timestamp":7}],
                "latest-table-version":1}"#,
        )
        .unwrap();
        assert_eq!(preview.commits, loaded.commits);
        assert_eq!(loaded.latest_table_version, Some(1));
        assert_eq!(loaded.metadata.table_uuid, "id");
        // An external table: no commits, no version.
        let external: DeltaLoadTable =
            serde_json::from_str(r#"{"metadata":{"table-uuid":"id","location":"s3://b/t"}}"#)
                .unwrap();
        assert_eq!(external.latest_table_version, None);
    }
}
