//! The lakebase-sync Lambda function: wiring only. The crash point and the memory budget are
//! set (`ProcessSettings`), then the function ([`lakebase_sync::function`]: configuration, object stores, secret
//! source) is built once at cold start; every event goes to [`lakebase_sync::handle`]. The
//! variables it reads: [`lakebase_sync::ENVIRONMENT`] (and docs/deployment.md).

use lakemirror_aws::config;
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let setting = |name: &str| std::env::var(name).ok();
    config::ProcessSettings::from_settings(&setting)?.install();
    let aws = config::load().await;
    let function = lakebase_sync::function(&aws, &setting)?;
    run(service_fn(|event| lakebase_sync::handle(&function, event))).await
}
