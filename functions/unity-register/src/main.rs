//! The unity-register Lambda function: wiring only. Configuration is read once at cold
//! start; every event goes to `lakemirror::unity::function`.
//!
//! | env var | meaning |
//! |---|---|
//! | `UC_URL` | the Unity Catalog server's base URL, without `/api/2.1/unity-catalog` (required) |
//! | `UC_TOKEN_SECRET_ARN` | Secrets Manager secret holding the bearer token (plain or JSON `token`) |
//! | `UC_CATALOG`, `UC_SCHEMA` | where tables go unless their `lakemirror.unity.*` properties say otherwise |
//! | `TABLE_PREFIXES` | comma-separated `s3://bucket/prefix` roots to register; empty = all |
//! | `AWS_LAMBDA_LOG_FORMAT` | `JSON` for structured logs (set by Lambda's logging config) |

use lakemirror::trigger::LambdaInput;
use lakemirror::unity::function::{UnityConfig, UnityRegisterFunction, UnityResponse};
use lambda_runtime::{Error, LambdaEvent, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let function = UnityRegisterFunction::from_config(UnityConfig::from_env()?).await;
    run(service_fn(|event: LambdaEvent<LambdaInput>| {
        let function = &function;
        async move { Ok::<UnityResponse, Error>(function.handle(&event.payload).await?) }
    }))
    .await
}
