//! The storage crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};

/// Result alias of lakemirror-storage.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Reading or writing an object failed, or a location cannot name one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object store refused or failed a request.
    #[error("storage: {0}")]
    Store(#[from] object_store::Error),

    /// A URI or location that cannot name an object of the store.
    #[error("{location} {reason}")]
    Location { location: String, reason: String },

    /// A location outside the table a store serves: one table's log naming another's
    /// objects. Permanent.
    #[error(
        "{location} lies outside the table {root}: lakemirror reads a table's own objects only (and ALLOWED_EXTERNAL_ROOTS), writes below its root only; nothing was written"
    )]
    Outside { location: String, root: String },

    /// An object is larger than the memory a table's work may read at once: its share of
    /// the function's memory budget. Permanent, unless the share is part of a budget shared
    /// by several tables at once and the whole budget holds it (`fits_alone`): run alone, it
    /// is read.
    #[error(
        "{location} is {size} bytes, more than the {limit} bytes one table's work may read into memory at once with {memory}; {}",
        match fits_alone {
            true => "alone, the work has the whole budget (glue-sync runs such a table of a batch again alone; otherwise it is retried)",
            false => "nothing was written. Give the function more memory (MemorySize, MEMORY_SIZE: 40% of three quarters of it, at most 512 MB, is read at once), or split such operations into smaller commits",
        }
    )]
    TooLarge {
        location: String,
        size: u64,
        limit: u64,
        /// The memory the limit comes from, as the message names it.
        memory: String,
        /// Whether the whole budget, not shared with other tables, holds the object.
        fits_alone: bool,
    },

    /// An object would take more memory parsed than a table's work may hold at once.
    /// Permanent, unless the whole budget holds it (`fits_alone`), as [`Error::TooLarge`].
    #[error(
        "{location} is {size} bytes and would take {parsed} bytes of memory parsed, more than the {limit} bytes one table's work may hold at once with {memory}; {}",
        match fits_alone {
            true => "alone, the work has the whole budget (glue-sync runs such a table of a batch again alone; otherwise it is retried)",
            false => "nothing was written. It is not a file lakemirror or a catalog writes at this size: give the function more memory (MemorySize, MEMORY_SIZE) if it is the table's own",
        }
    )]
    TooLargeParsed {
        location: String,
        size: u64,
        parsed: u64,
        limit: u64,
        memory: String,
        fits_alone: bool,
    },

    /// A secret could not be read (see the message for the permission or value it needs).
    #[error("cannot read {what} {id}: {reason}")]
    Secret {
        what: String,
        id: String,
        reason: String,
    },
}

impl Error {
    /// `location` does not exist (as the store says it).
    pub fn not_found(location: &str) -> Self {
        Error::Store(object_store::Error::NotFound {
            path: location.to_string(),
            source: "the object does not exist".into(),
        })
    }

    pub(crate) fn location(location: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Location {
            location: location.into(),
            reason: reason.into(),
        }
    }

    /// Whether the object did not fit a table's share of the memory budget but fits the
    /// whole budget: run alone, the work reads it.
    pub fn needs_whole_budget(&self) -> bool {
        matches!(
            self,
            Error::TooLarge {
                fits_alone: true,
                ..
            } | Error::TooLargeParsed {
                fits_alone: true,
                ..
            }
        )
    }

    /// Whether the store refused the request for lack of rights.
    pub fn is_permission_denied(&self) -> bool {
        matches!(
            self,
            Error::Store(object_store::Error::PermissionDenied { .. })
        )
    }

    /// Whether the object asked for does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Store(object_store::Error::NotFound { .. }))
    }
}

/// An error with its causes, each once: "outer: cause: root cause".
pub fn with_causes(error: &dyn std::error::Error) -> String {
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

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            // NotFound stays retryable: a commit cleaned up between listing and reading is
            // found missing on the next try, which takes the rebuild path.
            Error::Store(
                object_store::Error::InvalidPath { .. }
                | object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. },
            ) => ErrorKind::Table,
            Error::Store(_) => ErrorKind::Retry,
            // An object that fits the whole budget is read again, alone.
            Error::TooLarge { fits_alone, .. } | Error::TooLargeParsed { fits_alone, .. } => {
                ErrorKind::retry_if(*fits_alone)
            }
            Error::Location { .. } | Error::Outside { .. } => ErrorKind::Table,
            Error::Secret { .. } => ErrorKind::Configuration,
        }
    }
}
