//! The unity-register Lambda function: wiring only. Configuration, the object stores and the
//! secret source are built once at cold start; every event goes to
//! [`unity_register::handle`].
//!
//! | env var | meaning |
//! |---|---|
//! | `UC_URL` | the Unity Catalog server's base URL, without `/api/2.1/unity-catalog` (required) |
//! | `UC_TOKEN_SECRET_ARN` | Secrets Manager secret holding the bearer token (plain or JSON `token`) |
//! | `UC_CATALOG`, `UC_SCHEMA` | where tables go unless their `lakemirror.unity.*` properties say otherwise |
//! | `TABLE_PREFIXES` | comma-separated `s3://bucket/prefix` roots to register; empty = all |
//! | `ALLOWED_UC_CATALOGS` | the catalogs a table's `lakemirror.unity.*` properties may choose |
//! | `AWS_LAMBDA_LOG_FORMAT` | `JSON` for structured logs (set by Lambda's logging config) |

use std::sync::Arc;

use lakemirror_aws::{SecretsManager, config};
use lakemirror_runtime::crash;
use lakemirror_storage::SecretSource;
use lakemirror_unity::function::{UnityConfig, UnityRegisterFunction};
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let setting = |name: &str| std::env::var(name).ok();
    crash::arm(setting(crash::CRASH_AT));
    config::install_memory_budget(&setting)?;
    let function_config = UnityConfig::from_settings(&setting)?;
    let aws = config::load().await;
    let secrets = function_config
        .token_secret_arn
        .is_some()
        .then(|| Arc::new(SecretsManager::new(&aws)) as Arc<dyn SecretSource>);
    let function = UnityRegisterFunction::new(
        function_config,
        config::object_stores(&aws, &setting),
        secrets,
    );
    run(service_fn(|event| unity_register::handle(&function, event))).await
}
