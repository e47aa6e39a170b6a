//! The planning crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};
use std::fmt;

/// Result alias of lakemirror-plan.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a plan cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Delta log (or what it says) cannot be used: a feature lakemirror does not handle,
    /// a malformed action.
    #[error(transparent)]
    Delta(#[from] lakemirror_delta::Error),

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

    /// The Delta schema does not map to an Iceberg schema.
    #[error("Delta table {table}: {reason}")]
    Schema { table: String, reason: String },

    /// A `lakemirror.*` property of the Delta table has a value lakemirror cannot use.
    #[error("Delta table {table} has {property} {reason}")]
    TableProperty {
        table: String,
        property: &'static str,
        reason: String,
    },

    /// A deployment setting (or a table property it governs) that cannot be used.
    #[error("{name}: {reason}")]
    Setting { name: String, reason: String },

    /// The mirror's own Iceberg metadata is not what lakemirror wrote.
    #[error("{0}")]
    MirrorMetadata(String),

    /// Building Iceberg metadata failed.
    #[error("Iceberg metadata: {0}")]
    Iceberg(#[from] iceberg::Error),

    /// JSON (de)serialization failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl Error {
    /// The Delta log of `table` is not usable, for `reason`.
    pub fn malformed(table: impl fmt::Display, reason: impl fmt::Display) -> Self {
        Error::Delta(lakemirror_delta::Error::malformed(table, reason))
    }
}

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Delta(e) => e.kind(),
            Error::Setting { .. } => ErrorKind::Configuration,
            // A plan is a pure function of what was read: planning again gives the same.
            _ => ErrorKind::Table,
        }
    }
}
