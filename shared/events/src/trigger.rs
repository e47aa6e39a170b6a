//! Lambda events -> the Delta tables they announce.
//!
//! Accepts every shape a deployment produces: SQS batches whose bodies are S3 notifications
//! or EventBridge events, EventBridge events delivered directly ("Object Created", or a
//! schedule tick that announces nothing), and S3 notifications delivered directly. SQS and
//! EventBridge envelopes are `aws_lambda_events` types; S3 notifications are read
//! tolerantly (see [`from_s3_notification`]). Only Delta commit files
//! (`<root>/_delta_log/<20 digits>.json`) and the staged commits of catalog-managed tables
//! (`<root>/_delta_log/_staged_commits/<20 digits>.<uuid>.json`) count; everything else is
//! ignored. lakemirror's own
//! requests (the scheduled verify, the steps of a fanned-out bootstrap) are a typed
//! [`Control`]; one whose name this version does not know is refused, not ignored.

use std::collections::BTreeMap;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lakemirror_delta::catalog_managed::StagedCommitFile;
use lakemirror_delta::log::{LogFileKind, classify};
use lakemirror_plan::layout::FanOutPlan;
use lakemirror_storage::uri::allowed_by;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// An event a lakemirror function receives.
#[derive(Debug, Clone)]
pub enum LambdaInput {
    /// A batch from an SQS event source mapping.
    Sqs(SqsEvent),
    /// An EventBridge event delivered directly: "Object Created" or a schedule tick.
    EventBridge(EventBridgeEvent),
    /// What lakemirror's own schedules and state machine ask: `{"lakemirror": ...}`.
    Control(Control),
    /// Anything else: an S3 notification delivered directly (or `s3:TestEvent`).
    Other(Value),
}

impl<'de> Deserialize<'de> for LambdaInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(deserializer)?;
        let records = value.get("Records").and_then(Value::as_array);
        let is_sqs = records.is_some_and(|rs| {
            rs.iter().any(|r| {
                r.get("eventSource").and_then(Value::as_str) == Some("aws:sqs")
                    || r.get("body").is_some()
            })
        });
        if let Some(name) = value.get("lakemirror") {
            let name = name.as_str().unwrap_or_default().to_string();
            let known = Control::NAMES.contains(&name.as_str());
            serde_json::from_value(value)
                .map(LambdaInput::Control)
                .map_err(|e| {
                    D::Error::custom(if known {
                        format!("the lakemirror control event {name:?} is malformed: {e}")
                    } else {
                        format!(
                            "{name:?}: not a lakemirror control event this version knows; the known ones are {}",
                            Control::NAMES.join(", ")
                        )
                    })
                })
        } else if is_sqs {
            serde_json::from_value(value)
                .map(LambdaInput::Sqs)
                .map_err(|e| D::Error::custom(format!("not an SQS event: {e}")))
        } else if value.get("detail-type").is_some() {
            serde_json::from_value(value)
                .map(LambdaInput::EventBridge)
                .map_err(|e| D::Error::custom(format!("not an EventBridge event: {e}")))
        } else {
            Ok(LambdaInput::Other(value))
        }
    }
}

impl LambdaInput {
    /// An event from a JSON file or string (`lakemirror invoke`).
    pub fn from_json(text: &str) -> serde_json::Result<Self> {
        serde_json::from_str(text)
    }

    /// What lakemirror itself asks, if the event is such a request.
    pub fn control(&self) -> Option<&Control> {
        match self {
            LambdaInput::Control(control) => Some(control),
            _ => None,
        }
    }

    pub fn is_sqs(&self) -> bool {
        matches!(self, LambdaInput::Sqs(_))
    }

    /// The event as deliveries: one per SQS message, or one for the whole event.
    pub fn deliveries(&self) -> Vec<Delivery> {
        match self {
            LambdaInput::Sqs(batch) => batch
                .records
                .iter()
                .map(|message| {
                    let body = message.body.clone().unwrap_or_default();
                    let (commits, unreadable) = match from_body(&body) {
                        Ok(commits) => (commits, None),
                        Err(reason) => (Vec::new(), Some(reason)),
                    };
                    Delivery {
                        message_id: message.message_id.clone(),
                        receive_count: message
                            .attributes
                            .get("ApproximateReceiveCount")
                            .and_then(|count| count.parse().ok()),
                        commits,
                        unreadable,
                        body,
                    }
                })
                .collect(),
            LambdaInput::EventBridge(event) => vec![Delivery {
                message_id: None,
                receive_count: None,
                commits: from_eventbridge(event),
                unreadable: None,
                body: serde_json::to_string(event).unwrap_or_default(),
            }],
            LambdaInput::Control(control) => vec![Delivery {
                message_id: None,
                receive_count: None,
                commits: Vec::new(),
                unreadable: None,
                body: serde_json::to_string(control).unwrap_or_default(),
            }],
            LambdaInput::Other(value) => vec![Delivery {
                message_id: None,
                receive_count: None,
                commits: from_s3_notification(value),
                unreadable: None,
                body: value.to_string(),
            }],
        }
    }
}

/// The response that asks SQS to redeliver `message_ids` (and deletes the rest).
pub fn batch_response(message_ids: impl IntoIterator<Item = String>) -> SqsBatchResponse {
    let mut response = SqsBatchResponse::default();
    response.set_failures(message_ids);
    response
}

/// One Delta commit file announced by an event: a published commit, or a catalog-managed
/// table's staged commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitObject {
    pub bucket: String,
    /// Key prefix of the table root, without trailing slash ("" for a bucket-root table).
    pub root: String,
    pub version: i64,
    /// The file name of a staged commit (`_delta_log/_staged_commits/<name>`); None for a
    /// published one.
    pub staged: Option<String>,
    /// When S3 saw the object, in milliseconds since the epoch (for sync lag).
    pub event_time_ms: Option<i64>,
}

/// What one delivered message (an SQS record, or the whole event otherwise) announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The SQS message ID, for partial batch failures.
    pub message_id: Option<String>,
    /// How often SQS has delivered the message, this time included
    /// (`ApproximateReceiveCount`).
    pub receive_count: Option<u32>,
    pub commits: Vec<CommitObject>,
    /// Why the message could not be read at all (it can never succeed).
    pub unreadable: Option<String>,
    /// The message as delivered (the SQS body, or the whole event), for the dead-letter queue.
    pub body: String,
}

/// A table to sync, with every message that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableTrigger {
    pub bucket: String,
    pub root: String,
    /// The newest commit version announced for this table in the batch.
    pub newest_version: i64,
    /// The staged commits announced (a catalog-managed table's), in version order.
    pub staged: Vec<StagedCommitFile>,
    /// The earliest event time in the batch, for sync lag.
    pub first_event_time_ms: Option<i64>,
    pub message_ids: Vec<String>,
    /// The messages SQS has delivered at least this often (`ApproximateReceiveCount`), by id.
    pub receive_counts: BTreeMap<String, u32>,
}

impl TableTrigger {
    /// The table as the lakebase-sync and unity-register functions take it.
    pub fn announced(&self) -> AnnouncedTable {
        AnnouncedTable {
            table_uri: self.table_uri(),
            newest_version: self.newest_version,
            staged: self.staged.clone(),
            message_ids: self.message_ids.clone(),
        }
    }

    /// The messages `messages` of this trigger that are on their last delivery before a queue
    /// of `max_receive_count` parks them (its redrive policy's `maxReceiveCount`).
    pub fn on_last_delivery(&self, messages: &[String], max_receive_count: u32) -> Vec<String> {
        messages
            .iter()
            .filter(|id| {
                self.receive_counts
                    .get(*id)
                    .is_some_and(|n| *n >= max_receive_count)
            })
            .cloned()
            .collect()
    }

    /// `s3://bucket/root`.
    pub fn table_uri(&self) -> String {
        if self.root.is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.root)
        }
    }
}

/// A Delta table that commit events announced (glue-sync, lakebase-sync and unity-register
/// all read the same events), with the messages that announced it, for redelivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnouncedTable {
    /// `s3://bucket/root`, canonical.
    pub table_uri: String,
    /// The newest commit version announced.
    pub newest_version: i64,
    /// The staged commits announced (of a catalog-managed table), which its catalog may not
    /// have ratified yet.
    pub staged: Vec<StagedCommitFile>,
    /// The SQS messages that announced it (none for an event delivered directly).
    pub message_ids: Vec<String>,
}

/// A Delta commit file's key: its table root, version, and for a staged commit its file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitKey {
    pub root: String,
    pub version: i64,
    pub staged: Option<String>,
}

/// The table root and version of a Delta commit file key (`<root>/_delta_log/<v>.json`, or a
/// staged commit `<root>/_delta_log/_staged_commits/<v>.<uuid>.json`), or None for any other
/// key.
pub fn commit_object_key(key: &str) -> Option<CommitKey> {
    if let Some((log, name)) = key.rsplit_once("/_staged_commits/") {
        let root = match log.strip_suffix("/_delta_log") {
            Some(root) => root,
            None if log == "_delta_log" => "",
            None => return None,
        };
        let LogFileKind::StagedCommit(version) = classify(name) else {
            return None;
        };
        return Some(CommitKey {
            root: root.to_string(),
            version,
            staged: Some(name.to_string()),
        });
    }
    let (root, name) = match key.rsplit_once("/_delta_log/") {
        Some((root, name)) => (root, name),
        None => ("", key.strip_prefix("_delta_log/")?),
    };
    let LogFileKind::Commit(version) = classify(name) else {
        return None;
    };
    Some(CommitKey {
        root: root.to_string(),
        version,
        staged: None,
    })
}

/// Decodes an S3 notification key: form encoding (`+` is a space), decoded exactly once.
fn decode_notification_key(key: &str) -> String {
    let spaced = key.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

fn time_ms(value: Option<&Value>) -> Option<i64> {
    let text = value?.as_str()?;
    chrono::DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

fn commit(bucket: Option<&str>, key: String, time_ms: Option<i64>) -> Option<CommitObject> {
    let CommitKey {
        root,
        version,
        staged,
    } = commit_object_key(&key)?;
    Some(CommitObject {
        bucket: bucket?.to_string(),
        root,
        version,
        staged,
        event_time_ms: time_ms,
    })
}

/// Commit files in an S3 notification (`{"Records":[{"s3":...}]}`) or an S3 test event.
///
/// Read as JSON, not as `aws_lambda_events`' `S3Event`: its records require `userIdentity`,
/// `requestParameters` and `eventTime`, and moto 5.2's notifications have neither of the
/// first two (`missing field userIdentity` on `events/sqs-moto-s3-notification.json`, as the
/// test `the_typed_s3_event_refuses_what_moto_sends` shows; when it passes, use the type).
/// Only the bucket, key, event name and time are read.
fn from_s3_notification(value: &Value) -> Vec<CommitObject> {
    let records = value.get("Records").and_then(Value::as_array);
    records
        .into_iter()
        .flatten()
        .filter(|r| {
            r.get("eventName")
                .and_then(Value::as_str)
                .is_none_or(|name| name.starts_with("ObjectCreated"))
        })
        .filter_map(|r| {
            let s3 = r.get("s3")?;
            let bucket = s3.pointer("/bucket/name").and_then(Value::as_str);
            let key = decode_notification_key(s3.pointer("/object/key")?.as_str()?);
            commit(bucket, key, time_ms(r.get("eventTime")))
        })
        .collect()
}

/// The `detail` of an S3 "Object Created" EventBridge event (not in `aws_lambda_events`).
#[derive(Debug, Deserialize)]
struct ObjectCreated {
    bucket: Named,
    object: ObjectKey,
}

#[derive(Debug, Deserialize)]
struct Named {
    name: String,
}

#[derive(Debug, Deserialize)]
struct ObjectKey {
    key: String,
}

/// Commit files in an EventBridge "Object Created" event. Its keys are not encoded.
fn from_eventbridge(event: &EventBridgeEvent) -> Vec<CommitObject> {
    if event.detail_type != "Object Created" {
        return Vec::new();
    }
    let Ok(detail) = ObjectCreated::deserialize(&event.detail) else {
        return Vec::new();
    };
    let time = event.time.map(|t| t.timestamp_millis());
    commit(Some(&detail.bucket.name), detail.object.key, time)
        .into_iter()
        .collect()
}

/// Commit files in an SQS message body: an S3 notification or an EventBridge event.
fn from_body(body: &str) -> Result<Vec<CommitObject>, String> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| format!("SQS message body is not JSON: {e}"))?;
    if value.get("detail-type").is_some() {
        let event: EventBridgeEvent = serde_json::from_value(value)
            .map_err(|e| format!("SQS message body is not an EventBridge event: {e}"))?;
        Ok(from_eventbridge(&event))
    } else {
        // S3 notifications; `s3:TestEvent` has no Records and yields nothing.
        Ok(from_s3_notification(&value))
    }
}

/// What lakemirror's own schedules and state machine ask of the glue-sync function, tagged
/// by `lakemirror` (`template.yaml`: `VerifySchedule`, `FanOutBootstrap`). Other functions
/// take them as events that announce no commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "lakemirror", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Control {
    /// Verify every mirror of the function's database (`{"lakemirror": "verify"}`), each
    /// caught up first.
    Verify,
    /// Bring every mirror of the function's database that is behind its Delta table (its
    /// newest events lost or late) to the newest version (`{"lakemirror": "catch-up"}`).
    CatchUp,
    /// Steps of a fanned-out bootstrap (see `lakemirror_mirror::fanout`):
    /// Plan the bootstrap of `table_uri` in (at most) `parts` parts.
    FanOutPlan { table_uri: String, parts: u32 },
    /// Write part `part` of `plan`.
    FanOutPart { plan: FanOutPlan, part: u32 },
    /// Commit every part of `plan`.
    FanOutFinish { plan: FanOutPlan },
}

impl Control {
    /// The names `lakemirror` takes (the tags above).
    pub const NAMES: [&'static str; 5] = [
        "verify",
        "catch-up",
        "fan-out-plan",
        "fan-out-part",
        "fan-out-finish",
    ];
}

/// Groups deliveries into one trigger per table (the newest version wins), keeping only
/// tables under one of `prefixes` (`s3://bucket/prefix`; empty means every table).
pub fn table_triggers(deliveries: &[Delivery], prefixes: &[String]) -> Vec<TableTrigger> {
    let mut by_table: BTreeMap<(String, String), TableTrigger> = BTreeMap::new();
    for delivery in deliveries {
        for c in &delivery.commits {
            let trigger = by_table
                .entry((c.bucket.clone(), c.root.clone()))
                .or_insert_with(|| TableTrigger {
                    bucket: c.bucket.clone(),
                    root: c.root.clone(),
                    newest_version: c.version,
                    staged: Vec::new(),
                    first_event_time_ms: c.event_time_ms,
                    message_ids: Vec::new(),
                    receive_counts: BTreeMap::new(),
                });
            trigger.newest_version = trigger.newest_version.max(c.version);
            if let Some(file_name) = &c.staged {
                let staged = StagedCommitFile {
                    version: c.version,
                    file_name: file_name.clone(),
                };
                if let Err(at) = trigger.staged.binary_search(&staged) {
                    trigger.staged.insert(at, staged);
                }
            }
            trigger.first_event_time_ms = match (trigger.first_event_time_ms, c.event_time_ms) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if let Some(id) = &delivery.message_id
                && !trigger.message_ids.contains(id)
            {
                trigger.message_ids.push(id.clone());
                if let Some(count) = delivery.receive_count {
                    trigger.receive_counts.insert(id.clone(), count);
                }
            }
        }
    }
    by_table
        .into_values()
        .filter(|t| allowed_by(prefixes, &t.table_uri()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_text(name: &str) -> String {
        let path = format!(
            "{}/../../functions/glue-sync/events/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap()
    }

    fn fixture(name: &str) -> LambdaInput {
        LambdaInput::from_json(&fixture_text(name)).unwrap()
    }

    fn deliveries(event: &LambdaInput) -> Vec<Delivery> {
        event.deliveries()
    }

    #[test]
    fn commit_keys_are_recognised_and_everything_else_ignored() {
        let published = |root: &str, version| {
            Some(CommitKey {
                root: root.into(),
                version,
                staged: None,
            })
        };
        assert_eq!(
            commit_object_key("warehouse/orders/_delta_log/00000000000000000042.json"),
            published("warehouse/orders", 42)
        );
        assert_eq!(
            commit_object_key("_delta_log/00000000000000000000.json"),
            published("", 0)
        );
        let staged = "00000000000000000011.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json";
        assert_eq!(
            commit_object_key(&format!("t/_delta_log/_staged_commits/{staged}")),
            Some(CommitKey {
                root: "t".into(),
                version: 11,
                staged: Some(staged.into()),
            })
        );
        assert_eq!(
            commit_object_key(&format!("_delta_log/_staged_commits/{staged}")).map(|k| k.root),
            Some(String::new())
        );
        for ignored in [
            "t/_delta_log/00000000000000000010.checkpoint.parquet",
            "t/_delta_log/00000000000000000010.crc",
            "t/_delta_log/_last_checkpoint",
            "t/_delta_log/00000000000000000004.00000000000000000006.compacted.json",
            "t/_delta_log/.00000000000000000011.json.tmp",
            "t/_delta_log/_commits/00000000000000000011.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json",
            "t/_staged_commits/00000000000000000011.3a0d65cd-4056-49b8-937b-95f9e3ee90e5.json",
            "t/_delta_log/_staged_commits/00000000000000000011.json",
            "t/_delta_log/_staged_commits/x/00000000000000000011.u.json",
            "t/_delta_log/0000000000000000011.json",
            "t/part-00000.parquet",
        ] {
            assert_eq!(commit_object_key(ignored), None, "{ignored}");
        }
    }

    #[test]
    fn direct_s3_notification_from_aws() {
        let d = deliveries(&fixture("s3-notification.json"));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].commits.len(), 1);
        let c = &d[0].commits[0];
        assert_eq!(
            (c.bucket.as_str(), c.root.as_str(), c.version),
            ("lake", "warehouse/my orders", 3)
        );
        assert_eq!(c.event_time_ms, Some(1_764_500_000_000));
    }

    #[test]
    fn control_events_are_told_apart_and_checked() {
        let plan = fixture("fan-out-plan.json");
        assert!(
            matches!(plan.control(), Some(Control::FanOutPlan { parts: 16, table_uri }) if table_uri == "s3://my-lake/warehouse/orders")
        );
        assert_eq!(fixture("verify.json").control(), Some(&Control::Verify));
        assert_eq!(fixture("catch-up.json").control(), Some(&Control::CatchUp));
        assert!(fixture("verify.json").deliveries()[0].commits.is_empty());
        for other in [
            "eventbridge.json",
            "s3-notification.json",
            "sqs-s3-notification.json",
        ] {
            assert_eq!(fixture(other).control(), None, "{other}");
        }
        for (unknown, named) in [
            (
                r#"{"lakemirror": "fan-out-everything"}"#,
                "fan-out-everything",
            ),
            (r#"{"lakemirror": "sync"}"#, "sync"),
            (r#"{"lakemirror": 7}"#, ""),
        ] {
            let error = LambdaInput::from_json(unknown).unwrap_err().to_string();
            assert!(error.contains(&format!("{named:?}")), "{error}");
            assert!(error.contains("fan-out-finish"), "{error}");
        }
        let extra = LambdaInput::from_json(
            r#"{"lakemirror": "fan-out-plan", "table_uri": "s3://b/t", "parts": 2, "part": 1}"#,
        );
        assert!(extra.is_err(), "unknown fields are refused");
    }

    #[test]
    fn sqs_wrapped_notifications_and_eventbridge_events() {
        let d = deliveries(&fixture("sqs-s3-notification.json"));
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].message_id.as_deref(), Some("m-1"));
        assert_eq!(d[0].commits[0].version, 7);
        assert!(d[1].commits.is_empty(), "s3:TestEvent announces nothing");
        assert!(d[2].unreadable.is_some());

        let e = deliveries(&fixture("sqs-eventbridge.json"));
        assert_eq!(e[0].commits[0].root, "warehouse/orders");
        assert_eq!(e[0].commits[0].version, 12);
    }

    #[test]
    fn direct_eventbridge_event_keys_are_not_decoded() {
        let d = deliveries(&fixture("eventbridge.json"));
        assert_eq!(d[0].commits[0].root, "warehouse/a+b");
    }

    #[test]
    fn moto_notifications_decode_percent_2f_once() {
        let event: LambdaInput = serde_json::from_value(serde_json::json!({"Records": [{
            "eventSource": "aws:s3", "eventName": "ObjectCreated:Put", "eventTime": "2026-11-30T10:00:00.000Z",
            "s3": {"bucket": {"name": "lake"}, "object": {"key": "warehouse%2Fx%253Dy%2F_delta_log%2F00000000000000000001.json"}}
        }]}))
        .unwrap();
        let d = deliveries(&event);
        assert_eq!(d[0].commits[0].root, "warehouse/x%3Dy");
    }

    #[test]
    fn moto_sqs_batch_as_captured() {
        // Captured from moto 5.2.5: a test event, a commit whose key holds `=` and a space
        // (encoded as %3D and +), and a .crc beside it.
        let d = deliveries(&fixture("sqs-moto-s3-notification.json"));
        assert_eq!(d.len(), 3);
        let commits: Vec<_> = d.iter().flat_map(|d| d.commits.iter()).collect();
        assert_eq!(commits.len(), 1, "{d:?}");
        assert_eq!(commits[0].root, "warehouse/region=us east");
        assert_eq!(commits[0].version, 5);
        assert!(d.iter().all(|d| d.unreadable.is_none()));
    }

    #[test]
    fn the_typed_s3_event_refuses_what_moto_sends() {
        use aws_lambda_events::event::s3::S3Event;
        // A record as AWS sends it reads as the crate's type ...
        let aws: serde_json::Value =
            serde_json::from_str(&fixture_text("s3-notification.json")).unwrap();
        let record = serde_json::json!({"Records": [aws["Records"][0]]});
        let typed: S3Event = serde_json::from_value(record).unwrap();
        assert_eq!(typed.records.len(), 1);
        // ... but moto's bodies do not: that is why S3 notifications are read as JSON.
        let LambdaInput::Sqs(batch) = fixture("sqs-moto-s3-notification.json") else {
            panic!("an SQS batch");
        };
        let body = batch.records[1].body.clone().unwrap();
        let refused = serde_json::from_str::<S3Event>(&body).unwrap_err();
        assert!(
            refused.to_string().contains("missing field `userIdentity`"),
            "{refused}"
        );
    }

    #[test]
    fn schedule_ticks_and_unknown_shapes_announce_nothing_and_bad_envelopes_are_refused() {
        let tick = format!(
            "{}/../../functions/lakebase-sync/events/schedule.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let tick = LambdaInput::from_json(&std::fs::read_to_string(tick).unwrap()).unwrap();
        assert!(matches!(tick, LambdaInput::EventBridge(_)));
        assert!(tick.deliveries()[0].commits.is_empty());
        let refused = LambdaInput::from_json(r#"{"detail-type": "Object Created"}"#).unwrap_err();
        assert!(
            refused.to_string().contains("missing field `source`"),
            "{refused}"
        );
        let refused =
            LambdaInput::from_json(r#"{"Records": [{"eventSource": "aws:sqs", "body": 7}]}"#)
                .unwrap_err();
        assert!(
            refused.to_string().starts_with("not an SQS event"),
            "{refused}"
        );
    }

    #[test]
    fn the_sam_local_sample_event_announces_a_commit_in_the_placeholder_bucket() {
        let d = deliveries(&fixture("commit.json"));
        let c = &d[0].commits[0];
        assert_eq!(
            (c.bucket.as_str(), c.root.as_str(), c.version),
            ("amzn-s3-demo-bucket", "warehouse/orders", 0)
        );
    }

    #[test]
    fn the_batch_response_lists_the_messages_to_redeliver() {
        let response = batch_response(["m-1".to_string(), "m-3".to_string()]);
        assert_eq!(
            serde_json::to_value(&response).unwrap(),
            serde_json::json!({"batchItemFailures": [{"itemIdentifier": "m-1"}, {"itemIdentifier": "m-3"}]})
        );
    }

    #[test]
    fn a_batch_becomes_one_trigger_per_table_at_the_newest_version() {
        let mut batch = deliveries(&fixture("sqs-s3-notification.json"));
        batch.extend(deliveries(&fixture("sqs-eventbridge.json")));
        batch.extend(deliveries(&fixture("s3-notification.json")));
        let triggers = table_triggers(&batch, &[]);
        assert_eq!(triggers.len(), 2);
        let orders = triggers
            .iter()
            .find(|t| t.root == "warehouse/orders")
            .unwrap();
        assert_eq!(orders.newest_version, 12);
        assert_eq!(orders.message_ids, vec!["m-1", "m-4"]);
        assert_eq!(orders.table_uri(), "s3://lake/warehouse/orders");
        let only = table_triggers(&batch, &["s3://lake/warehouse/orders".into()]);
        assert_eq!(only.len(), 1);
        assert!(table_triggers(&batch, &["s3://lake/warehouse/ord".into()]).is_empty());
    }
}
