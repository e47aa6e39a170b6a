//! The Unity Catalog crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};

/// Result alias of lakemirror-unity.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop a registration or the opening of a table by its Unity Catalog name.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the Delta table's objects failed.
    #[error(transparent)]
    Storage(#[from] lakemirror_storage::Error),

    /// The Delta log could not be read.
    #[error(transparent)]
    Delta(#[from] lakemirror_delta::Error),

    /// A deployment setting that cannot be used.
    #[error(transparent)]
    Plan(#[from] lakemirror_plan::Error),

    /// A Unity Catalog request failed; the message says what to do.
    #[error("Unity Catalog: {message}")]
    Unity { message: String, retryable: bool },

    /// The server's URL (`UC_URL`) cannot be used.
    #[error("UC_URL {}{reason}", if url.is_empty() { String::new() } else { format!("{url:?} ") })]
    Url { url: String, reason: String },

    /// The name or definition of the entry a Delta table asks for cannot be used.
    #[error("{0}")]
    Entry(String),

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

    /// A table's registration did not finish (or start) within the invocation's time; it
    /// is retried.
    #[error("{0}")]
    OutOfTime(String),

    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),

    /// Unity Catalog holds an entry lakemirror may not change, or a table it cannot read.
    #[error("{0}")]
    CatalogState(String),

    /// An error one setting fixes; the message names it as the deployment does, a front
    /// end (the CLI) may add its own name for it.
    #[error("{source}")]
    FixedBy {
        setting: Setting,
        source: Box<Error>,
    },
}

/// A setting of the registration that fixes an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The catalog entries go to (`UC_CATALOG`).
    Catalog,
    /// The schema entries go to (`UC_SCHEMA`).
    Schema,
    /// The entry's table name.
    Table,
    /// The token lakemirror sends (`UC_TOKEN`).
    Token,
    /// The Unity Catalog table a reverse sync reads (`source.catalog/schema/table`).
    SourceTable,
}

impl Error {
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
}

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Unity { retryable, .. } => ErrorKind::retry_if(*retryable),
            Error::FixedBy { source, .. } => source.kind().fixed_by_setting(),
            Error::Storage(e) => e.kind(),
            Error::Delta(e) => e.kind(),
            Error::Bug { .. } => ErrorKind::Bug,
            _ => ErrorKind::Table,
        }
    }
}
