//! The unity-register Lambda function: wiring only. The crash point and the memory budget are
//! set (`ProcessSettings`), then the function ([`unity_register::function`]: configuration, object stores, secret
//! source) is built once at cold start; every event goes to [`unity_register::handle`]. The
//! variables it reads: [`unity_register::ENVIRONMENT`] (and docs/deployment.md).

use lakemirror_aws::config;
use lambda_runtime::{Error, run, service_fn};

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let setting = |name: &str| std::env::var(name).ok();
    config::ProcessSettings::from_settings(&setting)?.install();
    let aws = config::load().await;
    let function = unity_register::function(&aws, &setting)?;
    run(service_fn(|event| unity_register::handle(&function, event))).await
}
