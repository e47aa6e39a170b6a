//! What the runtime does with an error, decided once for every crate: each crate's error
//! says which [`ErrorKind`] it is ([`Kind::kind`]), and the functions act on the kind: work
//! that may pass is retried (its messages redelivered), a table that cannot succeed as it
//! is fails alone (its messages parked), a deployment's wrong setting and a bug of
//! lakemirror's are told apart in logs and messages.

/// What an error is, for whoever handles it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The same work may succeed later without anyone changing anything (throttling, a 5xx,
    /// a lost race, a catalog that is down, out of time): it is retried.
    Retry,
    /// This table (or this request) cannot succeed as it is: it fails alone, and the rest of
    /// the batch goes on. Its error says what to change.
    Table,
    /// The deployment's configuration is wrong (a setting, a permission it sets): nothing it
    /// serves succeeds until an operator changes it.
    Configuration,
    /// lakemirror itself went wrong: a panic, a state it never writes. Reported as a bug.
    Bug,
}

impl ErrorKind {
    /// A failure that `may_pass` by itself (a throttled or unavailable service says so) is
    /// retried; otherwise it is this table's alone.
    pub fn retry_if(may_pass: bool) -> Self {
        match may_pass {
            true => ErrorKind::Retry,
            false => ErrorKind::Table,
        }
    }

    /// The kind of an error that a setting fixes, caused by one of this kind: it is the
    /// configuration's, unless it may pass by itself.
    pub fn fixed_by_setting(self) -> Self {
        match self {
            ErrorKind::Retry => ErrorKind::Retry,
            _ => ErrorKind::Configuration,
        }
    }
}

/// An error that knows its [`ErrorKind`]: the one thing each crate's error decides.
pub trait Kind {
    fn kind(&self) -> ErrorKind;

    /// Whether running the same work again may succeed without anyone changing anything.
    fn is_retryable(&self) -> bool {
        self.kind() == ErrorKind::Retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Throttled;
    impl Kind for Throttled {
        fn kind(&self) -> ErrorKind {
            ErrorKind::Retry
        }
    }
    struct Refused;
    impl Kind for Refused {
        fn kind(&self) -> ErrorKind {
            ErrorKind::Configuration
        }
    }

    #[test]
    fn only_a_retry_is_retried() {
        assert!(Throttled.is_retryable());
        assert!(!Refused.is_retryable());
    }
}
