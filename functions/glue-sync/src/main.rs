//! The glue-sync Lambda function: wiring only. Configuration and the Glue client are built
//! once at cold start; every event goes to `lakemirror::handler`.
//!
//! | env var | meaning |
//! |---|---|
//! | `GLUE_DATABASE` | Glue database that receives mirrored tables (required) |
//! | `TABLE_PREFIXES` | comma-separated `s3://bucket/prefix` roots to mirror (default: all) |
//! | `DEAD_LETTER_QUEUE_URL` | SQS queue for events that can never succeed (parked once, not retried) |
//! | `AWS_LAMBDA_LOG_FORMAT` | `JSON` for structured logs (set by Lambda's logging config) |

use lakemirror::handler::{GlueSyncConfig, GlueSyncFunction, GlueSyncResponse};
use lakemirror::trigger::LambdaInput;
use lambda_runtime::{Error, LambdaEvent, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let function = GlueSyncFunction::from_config(GlueSyncConfig::from_env()?).await;
    run(service_fn(|event: LambdaEvent<LambdaInput>| {
        let function = &function;
        let deadline = event.context.deadline();
        async move {
            Ok::<GlueSyncResponse, Error>(function.handle(&event.payload, Some(deadline)).await?)
        }
    }))
    .await
}
