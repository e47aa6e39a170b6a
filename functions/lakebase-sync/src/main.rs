//! The lakebase-sync Lambda function: wiring only. Configuration, the object stores and the
//! secret source are built once at cold start; every event goes to
//! [`lakebase_sync::handle`].
//!
//! | env var | meaning |
//! |---|---|
//! | `LAKEBASE_CONFIG` | the synced tables as TOML (`[[tables]]`) (or `LAKEBASE_CONFIG_URI`, the `s3://` URI of such a file) |
//! | `POSTGRES_URL` | `postgres://user@host:5432/db?sslmode=verify-full`, without the password |
//! | `POSTGRES_PASSWORD_SECRET_ARN` | Secrets Manager secret holding the password (plain or JSON `password`) |
//! | `POSTGRES_CA_PEM`, `POSTGRES_CA_SECRET_ARN`, `POSTGRES_ALLOW_INSECURE`, `LAKEBASE_ALLOW_REPLACE`, `LAKEBASE_ALLOWED_SCHEMAS`, `TABLE_PREFIXES`, `UC_URL`, `UC_TOKEN_SECRET_ARN` | see README, "Configuration" |
//! | `AWS_LAMBDA_LOG_FORMAT` | `JSON` for structured logs (set by Lambda's logging config) |

use std::sync::Arc;

use lakemirror_aws::{SecretsManager, config};
use lakemirror_lakebase::function::{LakebaseSyncConfig, LakebaseSyncFunction};
use lakemirror_runtime::crash;
use lakemirror_storage::SecretSource;
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let setting = |name: &str| std::env::var(name).ok();
    crash::arm(setting(crash::CRASH_AT));
    config::install_memory_budget(&setting)?;
    let function_config = LakebaseSyncConfig::from_settings(&setting)?;
    let aws = config::load().await;
    let secrets = LakebaseSyncFunction::needs_secrets(&function_config)
        .then(|| Arc::new(SecretsManager::new(&aws)) as Arc<dyn SecretSource>);
    let function = LakebaseSyncFunction::new(
        function_config,
        config::object_stores(&aws, &setting),
        secrets,
    );
    run(service_fn(|event| lakebase_sync::handle(&function, event))).await
}
