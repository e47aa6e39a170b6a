//! The one error type of the crate. Every variant says what went wrong and what to do.

use std::fmt;

/// Result alias used throughout lakemirror.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can stop a sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Delta table uses a protocol feature lakemirror cannot mirror yet. Permanent.
    #[error(
        "Delta table {table} uses the {feature} feature, which lakemirror does not mirror yet; nothing was written. Mirror another table or upgrade lakemirror"
    )]
    UnsupportedFeature { table: String, feature: String },

    /// The Delta table holds something Iceberg cannot express. Permanent: no version of
    /// lakemirror can mirror the table as it is; its owner can change it.
    #[error(
        "Delta table {table} cannot be mirrored to Iceberg: {reason}. No lakemirror version can mirror it as it is; nothing was written. {remedy}"
    )]
    NotMirrorable {
        table: String,
        reason: String,
        remedy: String,
    },

    /// The mirror cannot follow the Delta table commit by commit (column mapping turned on,
    /// partition columns changed): it is rebuilt as a new history from `from_version`. The
    /// sync does this by itself; the error escapes only if the rebuild meets it again.
    #[error(
        "the mirror of Delta table {table} must be rebuilt from version {from_version}: {reason}"
    )]
    RebuildNeeded {
        table: String,
        from_version: i64,
        reason: String,
    },

    /// A mirror exists but its Delta table is gone. Permanent until the table comes back.
    #[error(
        "the Delta table at {table} is missing (no commit and no checkpoint in its _delta_log), but Glue table {glue_table} still mirrors it. The Glue table was left as it is: restore the Delta table, or sync with --on-missing-source=drop (ON_MISSING_SOURCE=drop) to delete the Glue table"
    )]
    SourceMissing { table: String, glue_table: String },

    /// The Delta log is unreadable or contradicts itself. Permanent until the log is repaired.
    #[error("Delta log of {table} is not usable: {reason}")]
    MalformedLog { table: String, reason: String },

    /// No Delta table at the given location.
    #[error(
        "no Delta table at {0}: there is no _delta_log with commits there. Check --table-uri (it must be the folder that contains _delta_log)"
    )]
    NotADeltaTable(String),

    /// The caller asked for something that cannot be done.
    #[error("{0}")]
    InvalidInput(String),

    /// The Glue table exists but is not an Iceberg table lakemirror can continue.
    #[error("{0}")]
    CatalogState(String),

    /// Another writer changed the Glue table between our read and our update. Retryable.
    #[error(
        "Glue table {0} was changed by another writer while we committed; re-run to retry (lakemirror retries this by itself a few times)"
    )]
    CommitConflict(String),

    /// A call to AWS Glue failed.
    #[error("AWS Glue {operation} failed: {message}")]
    Glue {
        operation: &'static str,
        message: String,
        retryable: bool,
    },

    /// Sending a failed event to the dead-letter queue failed (the event is redelivered).
    #[error(
        "could not send the event to the dead-letter queue ({0}); it will be redelivered. Check DEAD_LETTER_QUEUE_URL and the function's sqs:SendMessage permission"
    )]
    DeadLetter(String),

    /// lakemirror itself failed (a panic). Permanent: retrying runs the same code.
    #[error(
        "lakemirror hit a bug while syncing {table}: {message}. Please report it with this message; the event was not applied"
    )]
    Bug { table: String, message: String },

    /// An object is larger than lakemirror reads into memory. Permanent.
    #[error(
        "{location} is {size} bytes, more than the {limit} bytes lakemirror reads into memory at once; nothing was written. A Delta commit this large cannot be mirrored: split such operations into smaller commits"
    )]
    TooLarge {
        location: String,
        size: u64,
        limit: u64,
    },

    /// Reading or writing an object failed.
    #[error("storage: {0}")]
    Storage(#[from] object_store::Error),

    /// Building Iceberg metadata failed.
    #[error("Iceberg metadata: {0}")]
    Iceberg(#[from] iceberg::Error),

    /// Parquet footer could not be read.
    #[error("Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),

    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),

    /// Reading Delta rows into Arrow failed.
    #[error("reading rows: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),

    /// A Unity Catalog request failed; the message says what to do.
    #[error("Unity Catalog: {message}")]
    Unity { message: String, retryable: bool },

    /// A PostgreSQL statement or connection failed.
    #[error("PostgreSQL: {message}")]
    Postgres { message: String, retryable: bool },
}

/// An error with its causes, each once: "outer: cause: root cause".
pub(crate) fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

impl Error {
    /// Whether running the same sync again may succeed without anyone changing anything
    /// (throttling, conflicts, 5xx). Permanent errors should go to a dead-letter queue.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::CommitConflict(_) | Error::DeadLetter(_) => true,
            Error::Glue { retryable, .. }
            | Error::Postgres { retryable, .. }
            | Error::Unity { retryable, .. } => *retryable,
            // NotFound stays retryable: a commit cleaned up between listing and reading is
            // found missing on the next try, which takes the rebuild path.
            Error::Storage(e) => !matches!(
                e,
                object_store::Error::InvalidPath { .. }
                    | object_store::Error::PermissionDenied { .. }
                    | object_store::Error::Unauthenticated { .. }
            ),
            _ => false,
        }
    }

    pub(crate) fn malformed(table: impl fmt::Display, reason: impl fmt::Display) -> Self {
        Error::MalformedLog {
            table: table.to_string(),
            reason: reason.to_string(),
        }
    }
}
