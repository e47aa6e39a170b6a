//! glue-sync's batch policy: once the syncs of a batch's tables have ended, what becomes of
//! each message — done, delivered again, or parked in the dead-letter queue — on the
//! [`Failures`] every function shares. No IO here but logs and metrics; the handler parks.

use aws_lambda_events::event::sqs::SqsBatchResponse;
use lakemirror_events::trigger::{Delivery, TableTrigger, batch_response};
use lakemirror_runtime::metrics::{Metric, MetricRecord};
use lakemirror_runtime::{Failures, Kind};
use std::time::Duration;

use crate::SyncReport;
use crate::error::Error;

/// How one table's sync in a batch ended.
pub(crate) enum Outcome {
    Synced(SyncReport),
    /// Synced, but a staged commit the event announced is past the newest version its
    /// catalog ratified, after the ratification wait: asked again later.
    Undecided(SyncReport),
    Failed(Error),
    /// Too close to the deadline to start.
    NotStarted,
    /// Still running when its time (this budget) ran out.
    CutOff(Duration),
}

/// Why a message is parked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parking {
    pub(crate) reason: String,
    pub(crate) table: Option<String>,
    pub(crate) delta_version: Option<i64>,
}

/// An event delivered directly (not by SQS) is one message without an id; it goes by this.
const DIRECT: &str = "";

/// The messages of one batch and what became of them.
pub(crate) struct Batch {
    pub(crate) synced: Vec<SyncReport>,
    pub(crate) failures: Failures<Error, Parking>,
    is_sqs: bool,
    /// The sync queue's `maxReceiveCount`: an undecided staged commit on its last delivery
    /// is let go rather than parked for being early.
    max_receive_count: u32,
}

impl Batch {
    /// A batch of `deliveries`; the messages nobody can read are parked at once.
    pub(crate) fn new(deliveries: &[Delivery], is_sqs: bool, max_receive_count: u32) -> Self {
        let mut batch = Self {
            synced: Vec::new(),
            failures: Failures::default(),
            is_sqs,
            max_receive_count,
        };
        for d in deliveries {
            if let Some(reason) = &d.unreadable {
                tracing::error!(message_id = d.message_id.as_deref(), error = %reason, permanent = true, "unreadable message");
                let parking = Parking {
                    reason: reason.clone(),
                    table: None,
                    delta_version: None,
                };
                batch.failures.park(&[message_key(d)], parking);
            }
        }
        batch
    }

    /// The messages that announced `trigger`'s table.
    fn messages(&self, trigger: &TableTrigger) -> Vec<String> {
        if self.is_sqs {
            trigger.message_ids.clone()
        } else {
            vec![DIRECT.to_string()]
        }
    }

    /// Takes the `outcome` of `trigger`'s sync into the batch.
    pub(crate) fn settle(&mut self, trigger: &TableTrigger, outcome: Outcome) {
        let table = trigger.table_uri();
        let messages = self.messages(trigger);
        match outcome {
            Outcome::Synced(report) => self.synced.push(report),
            Outcome::Undecided(report) => {
                // Redelivered, but never parked for being early: the last delivery before
                // the queue would park it is let go.
                let last = trigger.on_last_delivery(&messages, self.max_receive_count);
                let again: Vec<String> = messages
                    .into_iter()
                    .filter(|id| !last.contains(id))
                    .collect();
                tracing::info!(%table, staged = ?trigger.staged, ratified = ?report.catalog_managed.as_ref().and_then(|c| c.ratified_version), redelivered = again.len(), let_go = last.len(), "a staged commit its catalog has not decided yet: the event comes again (one on its last delivery is let go; the commit's publication announces it again)");
                self.failures.again(&again);
                self.synced.push(report);
            }
            Outcome::NotStarted => {
                tracing::warn!(%table, delta_version = trigger.newest_version, "too close to the function timeout to start a sync; the event will be retried");
                let error = Error::OutOfTime(format!(
                    "{table}: not started, the invocation's time ran out; it is retried"
                ));
                self.failures.record("table", &table, &messages, error);
            }
            Outcome::CutOff(budget) => {
                tracing::warn!(%table, delta_version = trigger.newest_version, budget_ms = budget.as_millis(), "the sync did not finish before the function's deadline; the event will be retried");
                let error = Error::OutOfTime(format!(
                    "{table}: the sync did not finish within the {} s the invocation had left; nothing became visible and it is retried",
                    budget.as_secs()
                ));
                self.failures.record("table", &table, &messages, error);
            }
            Outcome::Failed(e) => {
                MetricRecord::new("Table", table.as_str())
                    .with(Metric::SyncFailed, 1)
                    .emit();
                if e.is_retryable() {
                    tracing::warn!(%table, delta_version = trigger.newest_version, error = %e, "sync failed; the event will be retried");
                    self.failures.record("table", &table, &messages, e);
                    return;
                }
                tracing::error!(%table, delta_version = trigger.newest_version, error = %e, permanent = true, "sync cannot succeed");
                if let Error::SourceMissing { catalog_table, .. } = &e {
                    MetricRecord::new("Table", catalog_table.as_str())
                        .with(Metric::SourceMissing, 1)
                        .emit();
                }
                let parking = Parking {
                    reason: e.to_string(),
                    table: Some(table.clone()),
                    delta_version: Some(trigger.newest_version),
                };
                self.failures
                    .record_permanent("table", &table, &messages, &e, parking);
            }
        }
    }

    /// The answer to an SQS batch: the messages to deliver again; the others are done. A
    /// message without an id (SQS always gives one) cannot be named, and an empty name would
    /// fail the whole batch.
    pub(crate) fn sqs_response(&self) -> SqsBatchResponse {
        batch_response(
            self.failures
                .redeliver()
                .into_iter()
                .filter(|id| id != DIRECT),
        )
    }
}

/// The key of a delivered message in the batch's failures.
pub(crate) fn message_key(delivery: &Delivery) -> String {
    delivery
        .message_id
        .clone()
        .unwrap_or_else(|| DIRECT.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn trigger(root: &str, messages: &[(&str, u32)]) -> TableTrigger {
        TableTrigger {
            bucket: "lake".into(),
            root: root.into(),
            newest_version: 3,
            staged: Vec::new(),
            first_event_time_ms: None,
            message_ids: messages.iter().map(|(id, _)| id.to_string()).collect(),
            receive_counts: messages
                .iter()
                .map(|(id, n)| (id.to_string(), *n))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn delivery(id: Option<&str>, unreadable: Option<&str>) -> Delivery {
        Delivery {
            message_id: id.map(str::to_string),
            receive_count: Some(1),
            commits: Vec::new(),
            unreadable: unreadable.map(str::to_string),
            body: "body".into(),
        }
    }

    fn report() -> SyncReport {
        SyncReport::of("db", "a", lakemirror_plan::target::NamedBy::Folder, None, 1)
    }

    fn permanent() -> Error {
        Error::NotAllowed("s3://lake/a is not under TABLE_PREFIXES".into())
    }

    fn retryable() -> Error {
        Error::OutOfTime("throttled".into())
    }

    #[test]
    fn a_message_announcing_a_table_that_may_pass_is_redelivered_not_parked() {
        let mut batch = Batch::new(&[], true, 5);
        batch.settle(&trigger("a", &[("m1", 1)]), Outcome::Failed(permanent()));
        batch.settle(
            &trigger("b", &[("m1", 1), ("m2", 1)]),
            Outcome::Failed(retryable()),
        );
        batch.settle(&trigger("c", &[("m3", 1)]), Outcome::Failed(permanent()));
        let parked: Vec<String> = batch
            .failures
            .to_park()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(parked, ["m3"]);
        assert_eq!(batch.failures.redeliver(), ["m1", "m2"]);
        let parking = &batch.failures.to_park()[0].1;
        assert_eq!(parking.table.as_deref(), Some("s3://lake/c"));
        assert_eq!(parking.delta_version, Some(3));
    }

    #[test]
    fn an_unreadable_message_is_parked_and_a_direct_event_goes_by_one_key() {
        let deliveries = [
            delivery(Some("m1"), Some("not JSON")),
            delivery(Some("m2"), None),
        ];
        let batch = Batch::new(&deliveries, true, 5);
        let parked = batch.failures.to_park();
        assert_eq!(parked.len(), 1);
        assert_eq!(parked[0].0, "m1");
        assert_eq!(parked[0].1.reason, "not JSON");
        assert!(
            batch.failures.is_empty(),
            "an unreadable message is no table's failure"
        );

        let mut direct = Batch::new(&[delivery(None, None)], false, 5);
        direct.settle(&trigger("a", &[]), Outcome::Failed(permanent()));
        assert_eq!(
            direct.failures.to_park()[0].0,
            message_key(&delivery(None, None))
        );
    }

    #[test]
    fn a_sync_not_started_or_cut_off_is_retried_and_fails_a_direct_event() {
        let mut batch = Batch::new(&[], true, 5);
        batch.settle(&trigger("a", &[("m1", 1)]), Outcome::NotStarted);
        batch.settle(
            &trigger("b", &[("m2", 1)]),
            Outcome::CutOff(Duration::from_secs(9)),
        );
        assert_eq!(batch.failures.redeliver(), ["m1", "m2"]);
        assert!(batch.failures.to_park().is_empty());
        assert!(matches!(
            batch.failures.first_error,
            Some(Error::OutOfTime(_))
        ));
        let response = serde_json::to_value(batch.sqs_response()).unwrap();
        assert_eq!(
            response,
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m1"}, {"itemIdentifier": "m2"}]})
        );
    }

    #[test]
    fn an_undecided_staged_commit_comes_again_until_its_last_delivery_and_is_never_parked() {
        let mut batch = Batch::new(&[], true, 3);
        batch.settle(
            &trigger("a", &[("early", 1), ("last", 3)]),
            Outcome::Undecided(report()),
        );
        assert_eq!(batch.failures.redeliver(), ["early"]);
        assert!(batch.failures.to_park().is_empty());
        assert!(
            batch.failures.first_error.is_none(),
            "being early is no failure"
        );
        assert_eq!(batch.synced.len(), 1);
    }
}
