//! The reverse sync's one error type.

use lakemirror_runtime::{ErrorKind, Kind};
use std::fmt;

/// Result alias of lakemirror-lakebase.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop a reverse sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading an object of the Delta table failed.
    #[error(transparent)]
    Storage(#[from] lakemirror_storage::Error),

    /// The Delta log could not be read, or holds what lakemirror cannot read.
    #[error(transparent)]
    Delta(#[from] lakemirror_delta::Error),

    /// A data file path or type the planner refuses.
    #[error(transparent)]
    Plan(#[from] lakemirror_plan::Error),

    /// A Unity Catalog source could not be resolved.
    #[error(transparent)]
    Unity(#[from] lakemirror_unity::Error),

    /// The synced tables' configuration (or a deployment setting) cannot be used.
    #[error("{0}")]
    Config(String),

    /// The PostgreSQL connection settings cannot be used.
    #[error("{0}")]
    Connection(String),

    /// A panic in one table's work: a bug in lakemirror (or bytes it did not foresee). Only
    /// that table failed; the others of the invocation went on.
    #[error(
        "lakemirror hit a bug while {what} {table}: {message}. Please report it with this message; nothing of it was applied"
    )]
    Bug {
        what: &'static str,
        table: String,
        message: String,
    },

    /// A table's sync did not finish (or start) within the invocation's time; nothing of
    /// it was changed, and it is retried.
    #[error("{0}")]
    OutOfTime(String),

    /// The target table is not in a state this sync can continue from.
    #[error("{0}")]
    Target(String),

    /// The source rows cannot be stored as they are (a duplicate key, a value PostgreSQL
    /// refuses). Nothing was changed.
    #[error("{0}")]
    Rows(String),

    /// A data file could not be read.
    #[error("{location}: {reason}")]
    Data { location: String, reason: String },

    /// A PostgreSQL statement or connection failed.
    #[error("PostgreSQL: {message}")]
    Postgres { message: String, retryable: bool },

    /// Parquet could not be decoded.
    #[error("Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),

    /// Reading Delta rows into Arrow failed.
    #[error("reading rows: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),

    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),

    /// An error one setting fixes; the message names it as the config file does, a front
    /// end (the CLI) may add its own name for it.
    #[error("{source}")]
    FixedBy {
        setting: Setting,
        source: Box<Error>,
    },
}

/// A setting of the reverse sync that fixes an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `sync.mode`: a full refresh rebuilds what an incremental sync cannot continue.
    FullRefresh,
    /// `sync.conflict_on_existing`: replace a table lakemirror did not create.
    ConflictOnExisting,
    /// The PostgreSQL URL (`POSTGRES_URL`).
    PostgresUrl,
    /// The Unity Catalog server and token (`UC_URL`, `UC_TOKEN`).
    UnityCatalog,
    /// Rows in errors show their values instead of a hash of them.
    ShowValues,
}

impl Error {
    /// Whether an object the sync read does not exist (a vacuumed data file).
    pub fn is_not_found(&self) -> bool {
        match self {
            Error::Storage(e) => e.is_not_found(),
            Error::Delta(e) => e.is_not_found(),
            Error::FixedBy { source, .. } => source.is_not_found(),
            _ => false,
        }
    }

    /// The setting that fixes this error, when one does.
    pub fn setting(&self) -> Option<Setting> {
        match self {
            Error::FixedBy { setting, .. } => Some(*setting),
            _ => None,
        }
    }

    /// This error, marked as fixed by `setting`.
    pub(crate) fn fixed_by(self, setting: Setting) -> Self {
        Error::FixedBy {
            setting,
            source: Box::new(self),
        }
    }

    pub(crate) fn malformed(table: impl fmt::Display, reason: impl fmt::Display) -> Self {
        Error::Delta(lakemirror_delta::Error::malformed(table, reason))
    }

    pub(crate) fn data(location: &str, reason: impl fmt::Display) -> Self {
        Error::Data {
            location: location.to_string(),
            reason: reason.to_string(),
        }
    }
}

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Postgres { retryable, .. } => ErrorKind::retry_if(*retryable),
            Error::OutOfTime(_) => ErrorKind::Retry,
            Error::FixedBy { source, .. } => source.kind().fixed_by_setting(),
            Error::Storage(e) => e.kind(),
            Error::Delta(e) => e.kind(),
            Error::Unity(e) => e.kind(),
            Error::Config(_) => ErrorKind::Configuration,
            Error::Bug { .. } => ErrorKind::Bug,
            _ => ErrorKind::Table,
        }
    }
}
