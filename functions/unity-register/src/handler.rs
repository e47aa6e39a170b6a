//! The unity-register function's handler: `_delta_log` commit events in (the same events as
//! glue-sync's), [`UnityRegisterFunction::register`] of the announced tables, the response
//! out. It runs beside glue-sync, never inside it: an unreachable or unauthorised Unity
//! Catalog fails this function's invocation and leaves the Iceberg mirror alone. An SQS batch
//! is answered with the messages of the tables that failed, for redelivery; any other event
//! fails as a whole when one table failed, so the event source retries it.

use std::sync::Arc;

use aws_lambda_events::event::sqs::SqsBatchResponse;
use lakemirror_aws::SecretsManager;
use lakemirror_aws::config;
use lakemirror_events::trigger::{LambdaInput, batch_response, table_triggers};
use lakemirror_runtime::crash;
use lakemirror_runtime::settings::{self, Environment, Wired};
use lakemirror_storage::SecretSource;
use lakemirror_storage::uri;
use lakemirror_unity::UnityReport;
use lakemirror_unity::function as unity;
use lakemirror_unity::function::{UnityConfig, UnityRegisterFunction};
use lambda_runtime::{Error, LambdaEvent};

/// What unity-register answers.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum UnityResponse {
    /// To an SQS batch: the messages to redeliver; the others are done.
    Batch(SqsBatchResponse),
    /// To an event delivered directly.
    Registered {
        registered: Vec<UnityReport>,
        failed: Vec<serde_json::Value>,
    },
}

/// Every environment variable unity-register reads, each declared once in the room that reads
/// it, and what sets it (`shared/cli/src/environment.rs` holds `template.yaml`,
/// `docs/deployment.md` and the CLI to it; its test `reads` records what the wiring reads).
pub const ENVIRONMENT: Environment = &[
    Wired::parameter(&unity::UC_URL, "UcUrl"),
    Wired::parameter(&config::MEMORY_SIZE, "MemorySize"),
    Wired::lambda(&config::AWS_LAMBDA_FUNCTION_MEMORY_SIZE),
    Wired::parameter(&unity::UC_TOKEN_SECRET_ARN, "UcTokenSecretArn"),
    Wired::local(&unity::UC_TOKEN),
    Wired::parameter(&unity::UC_CATALOG, "UcCatalog"),
    Wired::parameter(&unity::UC_SCHEMA, "UcSchema"),
    Wired::parameter(&unity::ALLOWED_UC_CATALOGS, "AllowedUcCatalogs"),
    Wired::parameter(&config::ALLOWED_EXTERNAL_ROOTS, "AllowedExternalRoots"),
    Wired::parameter(&uri::TABLE_PREFIXES, "TablePrefixes"),
    Wired::local(&config::AWS_ENDPOINT_URL_S3),
    Wired::local(&config::AWS_ALLOW_HTTP),
    Wired::local(&crash::CRASH_AT),
    Wired::parameter(&settings::RUST_LOG, "LogLevel"),
    Wired::lambda(&settings::AWS_LAMBDA_LOG_FORMAT),
];

/// The function as `setting` (the process's environment) configures it, with `aws`'s clients:
/// its configuration, the object stores and, with a token secret, Secrets Manager. Built
/// once, at cold start.
pub fn function(
    aws: &aws_config::SdkConfig,
    setting: &dyn Fn(&str) -> Option<String>,
) -> Result<UnityRegisterFunction, Error> {
    let function_config = UnityConfig::from_settings(setting)?;
    let secrets = function_config
        .token_secret_arn
        .is_some()
        .then(|| Arc::new(SecretsManager::new(aws)) as Arc<dyn SecretSource>);
    Ok(UnityRegisterFunction::new(
        function_config,
        config::object_stores(aws, setting),
        secrets,
    ))
}

/// Handles one invocation.
pub async fn handle(
    function: &UnityRegisterFunction,
    event: LambdaEvent<LambdaInput>,
) -> Result<UnityResponse, Error> {
    let announced: Vec<_> =
        table_triggers(&event.payload.deliveries(), &function.config.table_prefixes)
            .iter()
            .map(|t| t.announced())
            .collect();
    let deadline = event.context.deadline();
    let outcome = function.register(&announced, Some(deadline)).await?;
    if event.payload.is_sqs() {
        return Ok(UnityResponse::Batch(batch_response(
            outcome.failures.redeliver(),
        )));
    }
    match outcome.failures.first_error {
        Some(e) => Err(e.into()),
        None => Ok(UnityResponse::Registered {
            registered: outcome.registered,
            failed: outcome.failures.failed,
        }),
    }
}

#[cfg(test)]
mod tests {
    //! The handler against an unreachable Unity Catalog (a closed loopback port): the table's
    //! messages are redelivered, and tables outside the prefixes are never tried.

    use lakemirror_delta::test_tables::{metadata, protocol, write_commit};
    use lakemirror_storage::ObjectStores;
    use lakemirror_unity::function::UnityConfig;
    use lambda_runtime::Context;

    use lakemirror_events::test_events::sqs_commits;

    use super::*;

    fn function(stores: ObjectStores) -> UnityRegisterFunction {
        let config = UnityConfig {
            url: "http://127.0.0.1:1".into(),
            token: Some("t0k3n".into()),
            token_secret_arn: None,
            catalog: Some("main".into()),
            schema: Some("sales".into()),
            table_prefixes: vec!["s3://lake/sales".into()],
            allowed_catalogs: None,
        };
        UnityRegisterFunction::new(config, stores, None)
    }

    /// An SQS batch announcing commit 0 of each (message ID, table folder).
    fn commits(tables: &[(&str, &str)]) -> LambdaEvent<LambdaInput> {
        let messages: Vec<_> = tables.iter().map(|(id, table)| (*id, *table, 0)).collect();
        LambdaEvent::new(sqs_commits(&messages).unwrap(), Context::default())
    }

    #[tokio::test]
    async fn a_table_that_cannot_be_registered_is_redelivered_alone() {
        let stores = ObjectStores::in_memory();
        for table in ["sales/orders", "raw/events"] {
            let storage = stores
                .open(&format!("s3://lake/{table}"), Default::default())
                .unwrap();
            write_commit(
                &storage,
                0,
                &[protocol(), metadata(table, &[("id", "long")], &[])],
            )
            .await;
        }
        let response = handle(
            &function(stores),
            commits(&[("m1", "sales/orders"), ("m2", "raw/events")]),
        )
        .await
        .unwrap();
        let UnityResponse::Batch(batch) = response else {
            panic!("an SQS batch is answered with a batch response: {response:?}");
        };
        let ids: Vec<&str> = batch
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(ids, ["m1"], "raw/events lies outside TABLE_PREFIXES");
    }
}

#[cfg(test)]
mod reads {
    //! What the wiring reads is what [`super::ENVIRONMENT`] declares: every name it asks for,
    //! unset and set, is declared, and every declared name is asked for.

    use lakemirror_aws::config::{ProcessSettings, offline};
    use lakemirror_runtime::settings::{disagreements, names_read};

    #[tokio::test]
    async fn the_wiring_reads_the_declared_variables_and_no_other() {
        let given: &[&[(&str, &str)]] = &[&[("UC_URL", "http://127.0.0.1:9")]];
        // What `main` reads: the process's settings, then the function.
        let read = names_read(given, async |setting| {
            ProcessSettings::from_settings(setting).unwrap();
            let aws = offline(None).await;
            super::function(&aws, setting).unwrap();
        })
        .await;
        assert_eq!(
            disagreements(super::ENVIRONMENT, &read),
            Vec::<String>::new()
        );
    }
}
