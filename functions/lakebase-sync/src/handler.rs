//! The lakebase-sync function's handler: a schedule tick or `_delta_log` commit events in,
//! [`LakebaseSyncFunction::sync`] of the tables due (or announced), the response out. An SQS
//! batch is answered with the messages of the tables that failed, for redelivery; any other
//! event fails when one table failed, so the schedule's retries take over.

use aws_lambda_events::event::sqs::SqsBatchResponse;
use lakemirror_aws::trigger::{LambdaInput, batch_response, table_triggers};
use lakemirror_lakebase::LakebaseReport;
use lakemirror_lakebase::function::LakebaseSyncFunction;
use lambda_runtime::{Error, LambdaEvent};

/// What lakebase-sync answers.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum LakebaseResponse {
    /// To an SQS batch: the messages to redeliver; the others are done.
    Batch(SqsBatchResponse),
    /// To a schedule tick or an event delivered directly.
    Synced {
        synced: Vec<LakebaseReport>,
        failed: Vec<serde_json::Value>,
        skipped: usize,
    },
}

/// Handles one invocation.
pub async fn handle(
    function: &LakebaseSyncFunction,
    event: LambdaEvent<LambdaInput>,
) -> Result<LakebaseResponse, Error> {
    let announced: Vec<_> = table_triggers(&event.payload.deliveries(), &[])
        .iter()
        .map(|t| t.announced())
        .collect();
    let outcome = function.sync(&announced).await?;
    if event.payload.is_sqs() {
        return Ok(LakebaseResponse::Batch(batch_response(outcome.redeliver)));
    }
    match outcome.first_error {
        Some(e) => Err(e.into()),
        None => Ok(LakebaseResponse::Synced {
            synced: outcome.synced,
            failed: outcome.failed,
            skipped: outcome.skipped,
        }),
    }
}
