//! The unity-register function's handler: `_delta_log` commit events in (the same events as
//! glue-sync's), [`UnityRegisterFunction::register`] of the announced tables, the response
//! out. It runs beside glue-sync, never inside it: an unreachable or unauthorised Unity
//! Catalog fails this function's invocation and leaves the Iceberg mirror alone. An SQS batch
//! is answered with the messages of the tables that failed, for redelivery; any other event
//! fails as a whole when one table failed, so the event source retries it.

use aws_lambda_events::event::sqs::SqsBatchResponse;
use lakemirror_aws::trigger::{LambdaInput, batch_response, table_triggers};
use lakemirror_unity::UnityReport;
use lakemirror_unity::function::UnityRegisterFunction;
use lambda_runtime::{Error, LambdaEvent};

/// What unity-register answers.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum UnityResponse {
    /// To an SQS batch: the messages to redeliver; the others are done.
    Batch(SqsBatchResponse),
    /// To an event delivered directly.
    Registered {
        registered: Vec<UnityReport>,
        failed: Vec<serde_json::Value>,
    },
}

/// Handles one invocation.
pub async fn handle(
    function: &UnityRegisterFunction,
    event: LambdaEvent<LambdaInput>,
) -> Result<UnityResponse, Error> {
    let announced: Vec<_> =
        table_triggers(&event.payload.deliveries(), &function.config.table_prefixes)
            .iter()
            .map(|t| t.announced())
            .collect();
    let outcome = function.register(&announced).await?;
    if event.payload.is_sqs() {
        return Ok(UnityResponse::Batch(batch_response(outcome.redeliver)));
    }
    match outcome.first_error {
        Some(e) => Err(e.into()),
        None => Ok(UnityResponse::Registered {
            registered: outcome.registered,
            failed: outcome.failed,
        }),
    }
}
