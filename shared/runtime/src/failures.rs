//! The tables of one invocation that failed, as every function reports them: each table's
//! error for the response and the log, the SQS messages that announced it for redelivery
//! or, when it can never succeed, for the dead-letter queue, and the first error for an
//! event that fails as a whole.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::{Value, json};

/// The failures of one batch of tables; every table of the batch is still tried. `P` is
/// what a function keeps of a message it parks (why, and for which table).
///
/// A message announces one table or several: it is delivered again when any of its tables
/// failed for a reason that may pass, and parked only when every failure it announced can
/// never succeed.
#[derive(Debug)]
pub struct Failures<E, P = ()> {
    /// `{<what>: <table>, "error": <message>}` per table that failed.
    pub failed: Vec<Value>,
    redeliver: BTreeSet<String>,
    park: BTreeMap<String, P>,
    /// The first failure that may pass, for an event that fails as a whole.
    pub first_error: Option<E>,
}

impl<E, P> Default for Failures<E, P> {
    fn default() -> Self {
        Self {
            failed: Vec::new(),
            redeliver: BTreeSet::new(),
            park: BTreeMap::new(),
            first_error: None,
        }
    }
}

impl<E: Display, P: Clone> Failures<E, P> {
    /// `table` (named under the key `what`) failed with `error`; the messages that announced
    /// it are delivered again.
    pub fn record(&mut self, what: &str, table: &str, message_ids: &[String], error: E) {
        self.failed
            .push(json!({ what: table, "error": error.to_string() }));
        self.redeliver.extend(message_ids.iter().cloned());
        self.first_error.get_or_insert(error);
    }

    /// `table` (named under the key `what`) can never succeed with `error`: the messages that
    /// announced it are parked with `parking` (the first parking of a message is kept).
    pub fn record_permanent(
        &mut self,
        what: &str,
        table: &str,
        message_ids: &[String],
        error: &E,
        parking: P,
    ) {
        self.failed
            .push(json!({ what: table, "error": error.to_string() }));
        self.park(message_ids, parking);
    }

    /// Logs the failed tables together, when any failed.
    pub fn log(&self) {
        if !self.is_empty() {
            let failed = Value::Array(self.failed.clone());
            tracing::error!(%failed, "some tables failed");
        }
    }
}

impl<E, P: Clone> Failures<E, P> {
    pub fn is_empty(&self) -> bool {
        self.failed.is_empty()
    }

    /// The messages are parked with `parking` (a message nobody can read, say), unless
    /// another of their tables is delivered again.
    pub fn park(&mut self, message_ids: &[String], parking: P) {
        for id in message_ids {
            self.park
                .entry(id.clone())
                .or_insert_with(|| parking.clone());
        }
    }

    /// The messages come again though nothing failed: their work waits on something not
    /// decided yet.
    pub fn again(&mut self, message_ids: &[String]) {
        self.redeliver.extend(message_ids.iter().cloned());
    }

    /// The messages to park, each with its parking: those no table of theirs delivers again.
    pub fn to_park(&self) -> Vec<(String, P)> {
        self.park
            .iter()
            .filter(|(id, _)| !self.redeliver.contains(*id))
            .map(|(id, parking)| (id.clone(), parking.clone()))
            .collect()
    }

    /// Parking `message_id` failed with `error`: it is delivered again instead.
    pub fn not_parked(&mut self, message_id: String, error: E) {
        self.redeliver.insert(message_id);
        self.first_error.get_or_insert(error);
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
        let mut failures: Failures<&str> = Failures::default();
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

    #[test]
    fn a_message_is_parked_only_when_none_of_its_tables_comes_again() {
        let mut failures: Failures<&str, &str> = Failures::default();
        failures.record_permanent(
            "table",
            "s3://b/a",
            &["m1".into(), "m2".into()],
            &"unknown feature",
            "a",
        );
        failures.record("table", "s3://b/b", &["m2".into()], "throttled");
        failures.park(&["m3".into()], "unreadable");
        failures.park(&["m1".into()], "a later parking");
        failures.again(&["m4".into()]);
        assert_eq!(
            failures.to_park(),
            [("m1".to_string(), "a"), ("m3".to_string(), "unreadable")]
        );
        assert_eq!(failures.redeliver(), ["m2", "m4"]);
        assert_eq!(failures.first_error, Some("throttled"));
        assert_eq!(
            failures.failed.len(),
            2,
            "an unreadable message is no table's failure"
        );

        failures.not_parked("m3".into(), "the dead-letter queue refused");
        assert_eq!(failures.to_park(), [("m1".to_string(), "a")]);
        assert_eq!(failures.redeliver(), ["m2", "m3", "m4"]);
        assert_eq!(
            failures.first_error,
            Some("throttled"),
            "the first error stays"
        );
    }
}
