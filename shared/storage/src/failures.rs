//! The tables of one invocation that failed, as every function reports them: each table's
//! error for the response and the log, the SQS messages that announced it for redelivery,
//! and the first error for an event that fails as a whole.

use std::collections::BTreeSet;
use std::fmt::Display;

use serde_json::{Value, json};

/// The failures of one batch of tables; every table of the batch is still tried.
#[derive(Debug)]
pub struct Failures<E> {
    /// `{<what>: <table>, "error": <message>}` per table that failed.
    pub failed: Vec<Value>,
    redeliver: BTreeSet<String>,
    /// The first failure, for an event that fails as a whole.
    pub first_error: Option<E>,
}

impl<E> Default for Failures<E> {
    fn default() -> Self {
        Self {
            failed: Vec::new(),
            redeliver: BTreeSet::new(),
            first_error: None,
        }
    }
}

impl<E: Display> Failures<E> {
    /// `table` (named under the key `what`) failed with `error`; the messages that announced
    /// it are delivered again.
    pub fn record(&mut self, what: &str, table: &str, message_ids: &[String], error: E) {
        self.failed
            .push(json!({ what: table, "error": error.to_string() }));
        self.redeliver.extend(message_ids.iter().cloned());
        self.first_error.get_or_insert(error);
    }

    /// Logs the failed tables together, when any failed.
    pub fn log(&self) {
        if !self.is_empty() {
            let failed = Value::Array(self.failed.clone());
            tracing::error!(%failed, "some tables failed");
        }
    }
}

impl<E> Failures<E> {
    pub fn is_empty(&self) -> bool {
        self.failed.is_empty()
    }

    /// The messages to redeliver: sorted, each once.
    pub fn redeliver(&self) -> Vec<String> {
        self.redeliver.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_announcing_two_failed_tables_is_redelivered_once_and_the_first_error_kept() {
        let mut failures = Failures::default();
        failures.record(
            "target",
            "public.orders",
            &["m2".into(), "m1".into()],
            "timed out",
        );
        failures.record("target", "public.events", &["m1".into()], "refused");
        assert_eq!(failures.redeliver(), ["m1", "m2"]);
        assert_eq!(failures.first_error, Some("timed out"));
        assert_eq!(
            failures.failed[1],
            json!({"target": "public.events", "error": "refused"})
        );
        assert!(!failures.is_empty() && Failures::<String>::default().is_empty());
    }
}
