//! The names the mirror writes into Iceberg metadata: table properties and snapshot summary
//! keys that tie an Iceberg table to its Delta table, version by version.

/// Table property: the number of bucket manifests.
pub const BUCKETS_PROPERTY: &str = "lakemirror.manifest-buckets";
/// Snapshot summary keys linking a snapshot to its Delta version.
pub const DELTA_VERSION: &str = "delta.version";
pub const DELTA_COMMIT_TIMESTAMP: &str = "delta.commit-timestamp";
/// Table property naming the Delta table that is mirrored.
pub const DELTA_TABLE_PROPERTY: &str = "lakemirror.delta.table-uri";
/// Table property: the mirrored Delta table's `metaData.id`. Another ID at the same location
/// means the table was re-created there.
pub const DELTA_TABLE_ID_PROPERTY: &str = "lakemirror.delta.table-id";
/// Snapshot summary key: [`lakemirror_delta::DeltaCommit::content_hash`] of the version's commit
/// file, in hex. A sync checks the log still holds this commit before adding to it.
pub const DELTA_COMMIT_HASH: &str = "lakemirror.delta.commit-hash";
/// Snapshot summary key: when the files this version removed were removed (the oldest
/// `deletionTimestamp`, in ms); VACUUM may delete them one retention period later.
pub const DELTA_REMOVED_AT: &str = "lakemirror.delta.removed-at";
/// Table property: the catalog's id of a catalog-managed Delta table, whose commits past its
/// published log are read as its catalog ratified them (`lakemirror_delta::catalog_managed`).
pub const CATALOG_TABLE_ID_PROPERTY: &str = "lakemirror.delta.catalog-table-id";
/// Table property: the catalog's name of that table (`catalog.schema.table`), when its catalog
/// answered by name: the next process asks by it at once instead of looking the id up. A hint
/// only: the catalog's answer is checked against the id and the location either way.
pub const CATALOG_TABLE_NAME_PROPERTY: &str = "lakemirror.delta.catalog-table-name";
/// Table property, set when the mirror carries Delta's row tracking as its row lineage.
pub const ROW_LINEAGE_PROPERTY: &str = "lakemirror.delta.row-lineage";
/// Table property, set when the schema's IDs are Delta's column-mapping IDs.
pub const COLUMN_MAPPED_PROPERTY: &str = "lakemirror.delta.column-mapping";
/// Table property: the physical name of each column-mapped field, by field ID (JSON).
pub const PHYSICAL_NAMES_PROPERTY: &str = "lakemirror.delta.physical-names";
/// Table property: the columns left out of the schema, each with why (a JSON list of
/// `{"column": <logical path>, "reason": <text>}`; mirrors written before the reasons hold a
/// list of paths), absent when none are.
pub const OMITTED_COLUMNS_PROPERTY: &str = "lakemirror.omitted-columns";
/// Table property: the columns widened from a smaller integer to long whose older files hold
/// the narrower integer (a JSON list of logical paths), absent when none are. While there
/// are any, [`SPARK_VECTORIZATION_PROPERTY`] is false.
pub const WIDENED_TO_LONG_PROPERTY: &str = "lakemirror.widened-to-long";
/// Iceberg's table property that turns Spark's vectorized Parquet reader off. Iceberg 1.10's
/// fails on a long column whose file holds an annotated 32-bit integer
/// (`ClassCastException: BigIntVector cannot be cast to IntVector`, apache/iceberg#16341,
/// fixed after 1.10 by #16343); Spark honours the property unless its session sets
/// `spark.sql.iceberg.vectorization.enabled` itself.
pub const SPARK_VECTORIZATION_PROPERTY: &str = "read.parquet.vectorization.enabled";

/// Table property: the fields of Iceberg v3 types that iceberg-rust holds as a placeholder
/// (variant, geometry, geography), by field ID, as the metadata file names them (JSON).
pub const V3_TYPES_PROPERTY: &str = "lakemirror.iceberg.v3-types";

/// A column the mirror leaves out, as `lakemirror.omitted-columns` declares it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OmittedDeclaration {
    /// The logical path (`s.l`, `m.value.x`).
    pub column: String,
    pub reason: String,
}

/// The declarations of `lakemirror.omitted-columns`, in either of its forms; none when it
/// cannot be read.
pub fn omitted_declarations(json: &str) -> Vec<OmittedDeclaration> {
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Declared(OmittedDeclaration),
        /// Before the reasons: Java Iceberg's lists and maps only.
        Path(String),
    }
    serde_json::from_str::<Vec<Entry>>(json)
        .unwrap_or_default()
        .into_iter()
        .map(|entry| match entry {
            Entry::Declared(declared) => declared,
            Entry::Path(column) => OmittedDeclaration {
                column,
                reason: crate::schema::OmitReason::UnreadableByJava.to_string(),
            },
        })
        .collect()
}
/// Table property: the Delta table's `delta.deletedFileRetentionDuration`, in ms.
pub const RETENTION_PROPERTY: &str = "lakemirror.delta.deleted-file-retention-ms";
/// Iceberg table property: whether maintenance may delete files; off for a mirror.
pub const GC_ENABLED: &str = "gc.enabled";
/// Reserved Iceberg field IDs of a position-delete file's columns.
pub const DELETE_FILE_PATH_ID: i32 = 2_147_483_546;
pub const DELETE_POS_ID: i32 = 2_147_483_545;
