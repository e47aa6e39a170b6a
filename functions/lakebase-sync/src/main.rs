//! The lakebase-sync Lambda function: wiring only. Configuration is read once at cold start;
//! every event goes to `lakemirror::lakebase::function`.
//!
//! | env var | meaning |
//! |---|---|
//! | `LAKEBASE_CONFIG` | the synced tables as TOML (`[[tables]]`), or the `s3://` URI of such a file (required) |
//! | `POSTGRES_URL` | `postgres://user@host:5432/db?sslmode=verify-full`, without the password |
//! | `POSTGRES_PASSWORD_SECRET_ARN` | Secrets Manager secret holding the password (plain or JSON `password`) |
//! | `AWS_LAMBDA_LOG_FORMAT` | `JSON` for structured logs (set by Lambda's logging config) |

use lakemirror::lakebase::function::{LakebaseResponse, LakebaseSyncConfig, LakebaseSyncFunction};
use lakemirror::trigger::LambdaInput;
use lambda_runtime::{Error, LambdaEvent, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let function = LakebaseSyncFunction::from_config(LakebaseSyncConfig::from_env()?).await;
    run(service_fn(|event: LambdaEvent<LambdaInput>| {
        let function = &function;
        async move { Ok::<LakebaseResponse, Error>(function.handle(&event.payload).await?) }
    }))
    .await
}
