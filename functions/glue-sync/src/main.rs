//! The glue-sync Lambda function: wiring only. Configuration, the AWS configuration, the
//! object stores, the Glue catalog and the dead-letter queue are built once at cold start;
//! every event goes to [`glue_sync::handle`].
//!
//! | env var | meaning |
//! |---|---|
//! | `GLUE_DATABASE` | Glue database that receives mirrored tables (required) |
//! | `TABLE_PREFIXES` | comma-separated `s3://bucket/prefix` roots to mirror (default: all) |
//! | `DEAD_LETTER_QUEUE_URL` | SQS queue for events that can never succeed (parked once, not retried) |
//! | `REST_CATALOG_URI`, `REST_CATALOG_WAREHOUSE`, `REST_CATALOG_TOKEN`, `REST_CATALOG_CREDENTIAL`, `REST_CATALOG_OAUTH2_SERVER_URI`, `REST_CATALOG_SCOPE`, `REST_CATALOG_SIGNING_NAME`, `REST_CATALOG_SIGNING_REGION`, `REST_CATALOG_TOKEN_SECRET_ARN`, `REST_CATALOG_CREDENTIAL_SECRET_ARN` | mirror into an Iceberg REST catalog instead of Glue (see docs/rest-catalog.md) |
//! | `ICEBERG_FORMAT_VERSION`, `ON_MISSING_SOURCE`, `ALLOWED_GLUE_DATABASES`, `TABLE_NAME_FROM_PATH`, `BOOTSTRAP_GROUP_FILES`, `HISTORY_RECENT_VERSIONS`, `HISTORY_HOURLY_FOR` | the sync settings, each declared once in `lakemirror_mirror::settings::SETTINGS` (variable, SAM parameter, default, flag); see docs/deployment.md |
//! | `UC_URL`, `UC_TOKEN_SECRET_ARN` | the Unity Catalog that ratifies catalog-managed Delta tables' commits (without it they are mirrored up to their newest published version; see docs/catalog-managed.md) |
//! | `AWS_LAMBDA_LOG_FORMAT` | `JSON` for structured logs (set by Lambda's logging config) |

use std::sync::Arc;

use lakemirror_aws::{DeadLetterQueue, SecretsManager, config};
use lakemirror_events::DeadLetters;
use lakemirror_iceberg::Lakehouse;
use lakemirror_mirror::function::{GlueSyncConfig, GlueSyncFunction};
use lakemirror_runtime::crash;
use lakemirror_unity::commits::commit_catalog;
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let setting = |name: &str| std::env::var(name).ok();
    crash::arm(setting(crash::CRASH_AT));
    config::install_memory_budget(&setting)?;
    let function_config = GlueSyncConfig::from_settings(&setting)?;
    let aws = config::load().await;
    let secrets = SecretsManager::new(&aws);
    let lake = Lakehouse::new(
        config::object_stores(&aws, &setting),
        config::catalog(&aws, &setting).await?,
    )
    .with_commit_catalog(commit_catalog(&setting, Some(&secrets)).await?);
    let dead_letters = function_config
        .dead_letter_queue_url
        .clone()
        .map(|url| Arc::new(DeadLetterQueue::new(&aws, url)) as Arc<dyn DeadLetters>);
    let function = GlueSyncFunction {
        config: function_config,
        lake,
        dead_letters,
    };
    run(service_fn(|event| glue_sync::handle(&function, event))).await
}
