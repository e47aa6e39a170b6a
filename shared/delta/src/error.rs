//! The Delta crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};
use std::fmt;

/// Result alias of lakemirror-delta.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reading the Delta log failed, or the log holds what lakemirror cannot read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading an object of the table failed.
    #[error(transparent)]
    Storage(#[from] lakemirror_storage::Error),

    /// The Delta table uses a protocol feature lakemirror does not handle yet. Permanent.
    #[error(
        "Delta table {table} uses the {feature} feature, which lakemirror does not mirror yet; nothing was written. Mirror another table or upgrade lakemirror"
    )]
    UnsupportedFeature { table: String, feature: String },

    /// The Delta log is unreadable or contradicts itself. Permanent until the log is repaired.
    #[error("Delta log of {table} is not usable: {reason}")]
    MalformedLog { table: String, reason: String },

    /// No Delta table at the given location.
    #[error(
        "no Delta table at {0}: there is no _delta_log with commits there; the table URI must be the folder that contains _delta_log"
    )]
    NotADeltaTable(String),

    /// A version asked for that the log does not hold.
    #[error("Delta version {version} of {table} {}", match newest { Some(n) => format!("does not exist (newest is {n})"), None => "is not in the log".to_string() })]
    NoSuchVersion {
        table: String,
        version: i64,
        newest: Option<i64>,
    },

    /// The table holds more data files at a version than one sync holds with the memory it
    /// has. Permanent until the memory grows.
    #[error(
        "Delta table {table} holds more than {limit} data files at version {version}, more than one sync holds at once with {memory} (about 2 KB each); nothing was written. Give the function more memory (MemorySize, MEMORY_SIZE); a new mirror of a table this large is bootstrapped in groups (BOOTSTRAP_GROUP_FILES) or by the FanOutBootstrap state machine"
    )]
    TooManyFiles {
        table: String,
        version: i64,
        limit: u64,
        memory: String,
        /// Whether the limit is a share of a budget other tables use at once: alone, the
        /// work may hold more.
        shared: bool,
    },

    /// The catalog of a catalog-managed table did not say which commits it ratified; asking
    /// again may help.
    #[error(
        "cannot read catalog-managed Delta table {table}: {reason}; nothing was written, the sync is retried"
    )]
    CatalogUnavailable { table: String, reason: String },

    /// The catalog of a catalog-managed table refused, or answered about another table.
    /// Permanent until the catalog or the table changes.
    #[error("cannot read catalog-managed Delta table {table}: {reason}; nothing was written")]
    CatalogRefused { table: String, reason: String },

    /// A Parquet file (a checkpoint) could not be decoded.
    #[error("Parquet: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
}

impl Error {
    /// The log of `table` is not usable, for `reason`.
    pub fn malformed(table: impl fmt::Display, reason: impl fmt::Display) -> Self {
        Error::MalformedLog {
            table: table.to_string(),
            reason: reason.to_string(),
        }
    }

    /// Whether the object asked for does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Storage(e) if e.is_not_found())
    }

    /// Whether the read needed more than the work's share of the memory budget, and may
    /// succeed alone, with the whole budget.
    pub fn needs_whole_budget(&self) -> bool {
        match self {
            Error::Storage(e) => e.needs_whole_budget(),
            Error::TooManyFiles { shared, .. } => *shared,
            _ => false,
        }
    }
}

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Storage(e) => e.kind(),
            Error::CatalogUnavailable { .. } => ErrorKind::Retry,
            Error::UnsupportedFeature { .. }
            | Error::MalformedLog { .. }
            | Error::NotADeltaTable(_)
            | Error::NoSuchVersion { .. }
            | Error::TooManyFiles { .. }
            | Error::CatalogRefused { .. }
            | Error::Parquet(_) => ErrorKind::Table,
        }
    }
}
