//! The `glue-sync` function: an event in, one sync per announced table, a response out.
//! Used by the Lambda function and by `lakemirror invoke glue-sync`.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::glue::GlueCatalog;
use crate::storage::IoCounters;
use crate::sync::{GlueSyncRequest, SyncReport, glue_sync};
use crate::trigger::{TableTrigger, deliveries, table_triggers};

/// Configuration of the glue-sync function, from its environment.
#[derive(Debug, Clone)]
pub struct GlueSyncConfig {
    /// `GLUE_DATABASE`: where mirrored tables go.
    pub database: String,
    /// `TABLE_PREFIXES`: comma-separated `s3://bucket/prefix` roots to mirror; empty = all.
    pub table_prefixes: Vec<String>,
}

impl GlueSyncConfig {
    pub fn from_env() -> Result<Self> {
        let database = std::env::var("GLUE_DATABASE")
            .ok()
            .filter(|d| !d.is_empty())
            .ok_or_else(|| Error::InvalidInput("GLUE_DATABASE is not set: name the Glue database that receives mirrored tables".into()))?;
        let table_prefixes = std::env::var("TABLE_PREFIXES")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect();
        Ok(Self {
            database,
            table_prefixes,
        })
    }
}

/// Handles one event. For SQS batches the response lists the messages to redeliver
/// (`batchItemFailures`), so one bad table does not hold back the others; other events
/// fail as a whole so the platform retries them.
pub async fn handle_glue_sync_event(
    glue: &GlueCatalog,
    config: &GlueSyncConfig,
    event: &Value,
) -> Result<Value> {
    let deliveries = deliveries(event);
    let is_sqs = deliveries.iter().any(|d| d.message_id.is_some());
    let mut failed: Vec<String> = Vec::new();
    for unreadable in deliveries.iter().filter(|d| d.unreadable.is_some()) {
        tracing::error!(message_id = ?unreadable.message_id, reason = ?unreadable.unreadable, permanent = true, "unreadable message");
        failed.extend(unreadable.message_id.clone());
    }
    let mut synced = Vec::new();
    let mut first_error = None;
    for trigger in table_triggers(&deliveries, &config.table_prefixes) {
        match sync_one(glue, config, &trigger).await {
            Ok(report) => synced.push(report),
            Err(e) => {
                tracing::error!(
                    table = %trigger.table_uri(),
                    delta_version = trigger.newest_version,
                    retryable = e.is_retryable(),
                    error = %e,
                    "sync failed"
                );
                failed.extend(trigger.message_ids.iter().cloned());
                first_error.get_or_insert(e);
            }
        }
    }
    if is_sqs {
        failed.sort();
        failed.dedup();
        let failures: Vec<Value> = failed
            .iter()
            .map(|id| json!({ "itemIdentifier": id }))
            .collect();
        return Ok(json!({ "batchItemFailures": failures }));
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(json!({ "synced": synced })),
    }
}

async fn sync_one(
    glue: &GlueCatalog,
    config: &GlueSyncConfig,
    trigger: &TableTrigger,
) -> Result<SyncReport> {
    let counters = Arc::new(IoCounters::default());
    let request = GlueSyncRequest {
        table_uri: trigger.table_uri(),
        database: config.database.clone(),
        table: None,
        metadata_uri: None,
        to_version: None,
    };
    let report = glue_sync(glue, &request, counters).await?;
    let lag_ms = trigger.first_event_time_ms.map(|t| {
        chrono::Utc::now()
            .timestamp_millis()
            .saturating_sub(t)
            .max(0)
    });
    tracing::info!(
        table = %trigger.table_uri(),
        glue_table = %format!("{}.{}", report.database, report.table),
        delta_version = ?report.delta_version,
        snapshots = report.snapshots_committed,
        added_files = report.added_files,
        removed_files = report.removed_files,
        duration_ms = report.elapsed_ms,
        lag_ms = ?lag_ms,
        "synced"
    );
    println!("{}", metric_line(&report, lag_ms));
    Ok(report)
}

/// A CloudWatch embedded-metric-format record: sync duration and event-to-committed lag.
fn metric_line(report: &SyncReport, lag_ms: Option<i64>) -> Value {
    let mut metrics = vec![json!({ "Name": "SyncDuration", "Unit": "Milliseconds" })];
    let mut record = json!({
        "_aws": {
            "Timestamp": chrono::Utc::now().timestamp_millis(),
            "CloudWatchMetrics": [{ "Namespace": "lakemirror", "Dimensions": [["Table"]], "Metrics": [] }]
        },
        "Table": format!("{}.{}", report.database, report.table),
        "SyncDuration": report.elapsed_ms,
        "SnapshotsCommitted": report.snapshots_committed,
    });
    if let Some(lag) = lag_ms {
        metrics.push(json!({ "Name": "SyncLag", "Unit": "Milliseconds" }));
        record["SyncLag"] = json!(lag);
    }
    record["_aws"]["CloudWatchMetrics"][0]["Metrics"] = Value::Array(metrics);
    record
}
