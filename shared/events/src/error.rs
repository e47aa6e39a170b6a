//! The events crate's one error type.

use lakemirror_runtime::{ErrorKind, Kind};

/// Result alias of lakemirror-events.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop parking an event.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Sending a failed event to the dead-letter queue failed (the event is redelivered).
    #[error(
        "could not send the event to the dead-letter queue ({0}); it will be redelivered. Check DEAD_LETTER_QUEUE_URL and the function's sqs:SendMessage permission"
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
