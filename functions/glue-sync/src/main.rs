//! The glue-sync Lambda function: wiring only. The crash point and the memory budget are set
//! ([`lakemirror_aws::config::ProcessSettings`]), then the function ([`glue_sync::function`]:
//! configuration, object stores, catalog, Unity Catalog, dead-letter queue) is built once at
//! cold start; every event goes to [`glue_sync::handle`]. The variables it reads:
//! [`glue_sync::ENVIRONMENT`] (and docs/deployment.md).

use lakemirror_aws::config;
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let setting = |name: &str| std::env::var(name).ok();
    config::ProcessSettings::from_settings(&setting)?.install();
    let aws = config::load().await;
    let function = glue_sync::function(&aws, &setting).await?;
    run(service_fn(|event| glue_sync::handle(&function, event))).await
}
