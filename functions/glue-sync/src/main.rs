//! The glue-sync Lambda function: wiring only. Configuration and the Glue client are built
//! once at cold start; every event goes to `lakemirror::handler`.
//!
//! | env var | meaning |
//! |---|---|
//! | `GLUE_DATABASE` | Glue database that receives mirrored tables (required) |
//! | `TABLE_PREFIXES` | comma-separated `s3://bucket/prefix` roots to mirror (default: all) |
//! | `AWS_LAMBDA_LOG_FORMAT` | `JSON` for structured logs (set by Lambda's logging config) |

use std::sync::Arc;

use lakemirror::glue::GlueCatalog;
use lakemirror::handler::{GlueSyncConfig, handle_glue_sync_event};
use lakemirror::storage::IoCounters;
use lambda_runtime::{Error, LambdaEvent, run, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let config = GlueSyncConfig::from_env()?;
    let glue = GlueCatalog::from_env(Arc::new(IoCounters::default())).await;
    run(service_fn(|event: LambdaEvent<Value>| {
        let (glue, config) = (&glue, &config);
        async move { Ok::<Value, Error>(handle_glue_sync_event(glue, config, &event.payload).await?) }
    }))
    .await
}
