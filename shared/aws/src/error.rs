//! The AWS crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};

/// Result alias of lakemirror-aws.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop an AWS call of the adapters that do not speak for a seam of their own
/// (Glue answers with the catalog's errors, Secrets Manager with the storage's).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the dead-letter queue failed.
    #[error(
        "could not read the dead-letter queue ({0}). Check DEAD_LETTER_QUEUE_URL and the caller's sqs:ReceiveMessage and sqs:ChangeMessageVisibility permissions"
    )]
    DeadLetter(String),
}

impl Kind for Error {
    fn kind(&self) -> ErrorKind {
        match self {
            // The queue may come back, the permission may be granted.
            Error::DeadLetter(_) => ErrorKind::Retry,
        }
    }
}
