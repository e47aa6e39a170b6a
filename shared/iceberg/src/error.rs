//! The Iceberg crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};

/// Result alias of lakemirror-iceberg.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can stop writing or committing a mirror.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing an object failed.
    #[error(transparent)]
    Storage(#[from] lakemirror_storage::Error),

    /// The Delta log could not be read, or holds what lakemirror cannot read.
    #[error(transparent)]
    Delta(#[from] lakemirror_delta::Error),

    /// The Delta table cannot be planned as an Iceberg snapshot.
    #[error(transparent)]
    Plan(#[from] lakemirror_plan::Error),

    /// The catalog table exists but is not an Iceberg table lakemirror can continue.
    #[error("{0}")]
    CatalogState(String),

    /// The catalog table mirrors another Delta table (`holder`, when its metadata says
    /// which): its name is taken. Permanent, unless the holder may not keep it (a table
    /// inside another table's folder).
    #[error("{message}")]
    NameTaken {
        message: String,
        holder: Option<String>,
        /// The metadata file the catalog table points at.
        metadata_location: String,
    },

    /// The catalog has no such database.
    #[error(
        "database {0} does not exist in the catalog; create it (Glue: aws glue create-database --database-input Name={0}; a REST catalog: create the namespace {0}) or choose another database"
    )]
    NoSuchDatabase(String),

    /// Another writer changed the catalog table between our read and our update: the table,
    /// named with its catalog ("Glue table db.t"). Retryable.
    #[error(
        "{0} was changed by another writer while we committed; re-run to retry (lakemirror retries this by itself a few times)"
    )]
    CommitConflict(String),

    /// A call to the catalog failed.
    #[error("{operation} failed: {message}")]
    Catalog {
        operation: &'static str,
        message: String,
        retryable: bool,
    },

    /// A data file the Delta log names cannot be described in Iceberg metadata.
    #[error("{location}: {reason}")]
    DataFile { location: String, reason: String },

    /// A step of a fanned-out bootstrap that cannot run as asked.
    #[error("{0}")]
    FanOut(String),

    /// lakemirror broke one of its own rules. Permanent: retrying runs the same code.
    #[error("lakemirror hit a bug: {0}. Please report it with this message; nothing was committed")]
    Bug(String),

    /// Building Iceberg metadata failed.
    #[error("Iceberg metadata: {0}")]
    Iceberg(#[from] iceberg::Error),

    /// A Parquet file could not be written or its footer read.
    #[error("Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),

    /// Arrow could not build a batch.
    #[error("Arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),

    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// The Delta log of `table` is not usable, for `reason`.
    pub fn malformed(table: impl std::fmt::Display, reason: impl std::fmt::Display) -> Self {
        Error::Delta(lakemirror_delta::Error::malformed(table, reason))
    }

    pub(crate) fn data_file(location: impl AsRef<str>, reason: impl std::fmt::Display) -> Self {
        Error::DataFile {
            location: location.as_ref().to_string(),
            reason: reason.to_string(),
        }
    }
}

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::CommitConflict(_) => ErrorKind::Retry,
            Error::Catalog { retryable, .. } => ErrorKind::retry_if(*retryable),
            Error::Storage(e) => e.kind(),
            Error::Delta(e) => e.kind(),
            Error::Plan(e) => e.kind(),
            Error::Bug(_) => ErrorKind::Bug,
            _ => ErrorKind::Table,
        }
    }
}
