//! The AWS crate's one error type.

/// Result alias of lakemirror-aws.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can stop a function's invocation or an AWS call.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A sync (or a step of one) failed.
    #[error(transparent)]
    Iceberg(#[from] lakemirror_iceberg::Error),

    /// A deployment setting lakemirror cannot use.
    #[error(transparent)]
    Plan(#[from] lakemirror_plan::Error),

    /// A setting (an environment variable of the function) that is missing or wrong.
    #[error("{name} {reason}")]
    Setting { name: &'static str, reason: String },

    /// An event this function cannot read.
    #[error("{0}")]
    Event(String),

    /// An event names a table or database this deployment may not write.
    #[error("{0}")]
    NotAllowed(String),

    /// Sending a failed event to the dead-letter queue failed (the event is redelivered).
    #[error(
        "could not send the event to the dead-letter queue ({0}); it will be redelivered. Check DEAD_LETTER_QUEUE_URL and the function's sqs:SendMessage permission"
    )]
    DeadLetter(String),

    /// An event that can never succeed, reported failed because no dead-letter queue is
    /// configured to park it in (the platform's redrive policy parks it eventually).
    #[error("{0}")]
    Unparked(String),

    /// lakemirror itself failed (a panic). Permanent: retrying runs the same code.
    #[error(
        "lakemirror hit a bug while syncing {table}: {message}. Please report it with this message; the event was not applied"
    )]
    Bug { table: String, message: String },
}

impl Error {
    /// Whether running the same invocation again may succeed without anyone changing
    /// anything (throttling, conflicts, 5xx). Permanent errors go to a dead-letter queue.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Iceberg(e) => e.is_retryable(),
            Error::DeadLetter(_) => true,
            Error::Plan(e) => e.is_retryable(),
            Error::Setting { .. }
            | Error::Event(_)
            | Error::NotAllowed(_)
            | Error::Unparked(_)
            | Error::Bug { .. } => false,
        }
    }

    pub(crate) fn setting(name: &'static str, reason: impl std::fmt::Display) -> Self {
        Error::Setting {
            name,
            reason: reason.to_string(),
        }
    }
}
