//! The tables of one invocation that failed, as every function reports them: each table's
//! error for the response and the log, the SQS messages that announced it for redelivery,
//! and the first error for an event that fails as a whole.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
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

/// Runs one table's work so that a panic in it (a bug, or bytes nobody foresaw) becomes that
/// table's failure, with the panic's message, instead of ending the process and the batch
/// with it.
pub async fn isolated<T>(work: impl Future<Output = T>) -> Result<T, String> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .map_err(|panic| panic_message(panic.as_ref()))
}

/// The message a panic carried.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_one_tables_work_is_its_failure() {
        let fine = isolated(async { 7 }).await;
        assert_eq!(fine, Ok(7));
        let panicked = isolated(async {
            let sizes: Vec<usize> = Vec::new();
            sizes[3]
        })
        .await;
        assert!(panicked.unwrap_err().contains("index out of bounds"));
    }

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
