//! The mirror crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};

/// Result alias of lakemirror-mirror.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop a sync, a step of one, or a function's invocation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Writing or committing the Iceberg metadata failed, or what lies below it (the Delta
    /// log, the plan, the store).
    #[error(transparent)]
    Iceberg(#[from] lakemirror_iceberg::Error),

    /// A mirror exists but its Delta table is gone. Permanent until the table comes back.
    #[error(
        "the Delta table at {table} is missing (no commit and no checkpoint in its _delta_log), but catalog table {catalog_table} still mirrors it. The catalog table was left as it is: restore the Delta table, or sync with on-missing-source=drop to delete it"
    )]
    SourceMissing {
        table: String,
        catalog_table: String,
    },

    /// A Delta table inside another table's folder: the outer table's writer controls it.
    /// Permanent.
    #[error(
        "the Delta table at {table} lies inside the Delta table at {outer} (its folder holds a _delta_log): a table inside another's folder is not mirrored, since the outer table's writer can write it and take a name that way; move the table out of {outer}. Nothing was written{}",
        match disowned {
            Some(name) => format!("; its mirror {name} was removed from the catalog (its metadata files stay), and the name is free for a table that is not nested"),
            None => String::new(),
        }
    )]
    NestedTable {
        table: String,
        outer: String,
        /// The catalog table the nested table mirrored, removed from the catalog.
        disowned: Option<String>,
    },

    /// A table that is not a mirror lakemirror wrote, where one was asked for.
    #[error("{0}")]
    NotAMirror(String),

    /// A folder could not be listed while looking for Delta tables.
    #[error("cannot list {folder} to find Delta tables: {source}")]
    Discovery {
        folder: String,
        source: lakemirror_storage::Error,
    },

    /// The local spill files of a bootstrap in groups could not be written or read.
    #[error("the bootstrap's spill files in {dir}: {reason}")]
    Spill { dir: String, reason: String },

    /// A step of a fanned-out bootstrap that cannot run as asked.
    #[error("{0}")]
    FanOut(String),

    /// A setting (an environment variable of the function) that is missing or wrong.
    #[error("{name} {reason}")]
    Setting { name: &'static str, reason: String },

    /// An event names a table or database this deployment may not write.
    #[error("{0}")]
    NotAllowed(String),

    /// Sending a failed event to the dead-letter queue failed (the event is redelivered).
    #[error(transparent)]
    DeadLetter(#[from] lakemirror_events::Error),

    /// An event that can never succeed, reported failed because no dead-letter queue is
    /// configured to park it in (the platform's redrive policy parks it eventually).
    #[error("{0}")]
    Unparked(String),

    /// The invocation's time ran out before the sync started or finished. Retried: a sync
    /// cut off made nothing visible.
    #[error("{0}")]
    OutOfTime(String),

    /// lakemirror itself failed (a panic). Permanent: retrying runs the same code.
    #[error(
        "lakemirror hit a bug while syncing {table}: {message}. Please report it with this message; the event was not applied"
    )]
    Bug { table: String, message: String },
}

impl Error {
    /// The Delta log of `table` is not usable, for `reason`.
    pub fn malformed(table: impl std::fmt::Display, reason: impl std::fmt::Display) -> Self {
        Error::from(lakemirror_delta::Error::malformed(table, reason))
    }

    /// Whether the table holds more files than one read of its log holds in memory.
    pub fn is_too_many_files(&self) -> bool {
        matches!(
            self,
            Error::Iceberg(lakemirror_iceberg::Error::Delta(
                lakemirror_delta::Error::TooManyFiles { .. }
            ))
        )
    }

    /// Whether the sync needed more than its share of the function's memory budget (an
    /// object, or a replay, larger than the share holds) and may succeed alone.
    pub fn needs_whole_budget(&self) -> bool {
        match self {
            Error::Iceberg(lakemirror_iceberg::Error::Storage(e)) => e.needs_whole_budget(),
            Error::Iceberg(lakemirror_iceberg::Error::Delta(e)) => e.needs_whole_budget(),
            _ => false,
        }
    }

    /// No Delta table where one was asked for.
    pub fn is_not_a_delta_table(&self) -> bool {
        matches!(
            self,
            Error::Iceberg(lakemirror_iceberg::Error::Delta(
                lakemirror_delta::Error::NotADeltaTable(_)
            ))
        )
    }

    /// The catalog table exists but is not one lakemirror can continue.
    pub(crate) fn catalog_state(message: String) -> Self {
        Error::Iceberg(lakemirror_iceberg::Error::CatalogState(message))
    }

    pub(crate) fn setting(name: &'static str, reason: impl std::fmt::Display) -> Self {
        Error::Setting {
            name,
            reason: reason.to_string(),
        }
    }
}

/// The floors below report through the metadata writer's error, so that one classification
/// (retryable or not) holds for them all.
macro_rules! through_iceberg {
    ($($from:ty),*) => {$(
        impl From<$from> for Error {
            fn from(e: $from) -> Self {
                Error::Iceberg(e.into())
            }
        }
    )*};
}

through_iceberg!(
    lakemirror_storage::Error,
    lakemirror_delta::Error,
    lakemirror_plan::Error,
    iceberg::Error,
    serde_json::Error
);

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            Error::Iceberg(e) => e.kind(),
            Error::DeadLetter(e) => e.kind(),
            Error::OutOfTime(_) => ErrorKind::Retry,
            Error::Setting { .. } | Error::NotAllowed(_) => ErrorKind::Configuration,
            Error::Bug { .. } => ErrorKind::Bug,
            Error::SourceMissing { .. }
            | Error::NestedTable { .. }
            | Error::NotAMirror(_)
            | Error::Discovery { .. }
            | Error::Spill { .. }
            | Error::FanOut(_)
            | Error::Unparked(_) => ErrorKind::Table,
        }
    }
}
