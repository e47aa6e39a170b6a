//! The lakebase-sync function's handler: a schedule tick or `_delta_log` commit events in,
//! [`LakebaseSyncFunction::sync`] of the tables due (or announced), the response out. An SQS
//! batch is answered with the messages of the tables that failed, for redelivery; any other
//! event fails when one table failed, so the schedule's retries take over.

use aws_lambda_events::event::sqs::SqsBatchResponse;
use lakemirror_events::trigger::{LambdaInput, batch_response, table_triggers};
use lakemirror_lakebase::LakebaseReport;
use lakemirror_lakebase::function::LakebaseSyncFunction;
use lambda_runtime::{Error, LambdaEvent};

/// What lakebase-sync answers.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum LakebaseResponse {
    /// To an SQS batch: the messages to redeliver; the others are done.
    Batch(SqsBatchResponse),
    /// To a schedule tick or an event delivered directly.
    Synced {
        synced: Vec<LakebaseReport>,
        failed: Vec<serde_json::Value>,
        skipped: usize,
    },
}

/// Handles one invocation.
pub async fn handle(
    function: &LakebaseSyncFunction,
    event: LambdaEvent<LambdaInput>,
) -> Result<LakebaseResponse, Error> {
    let announced: Vec<_> = table_triggers(&event.payload.deliveries(), &[])
        .iter()
        .map(|t| t.announced())
        .collect();
    let deadline = event.context.deadline();
    let outcome = function.sync(&announced, Some(deadline)).await?;
    if event.payload.is_sqs() {
        return Ok(LakebaseResponse::Batch(batch_response(
            outcome.failures.redeliver(),
        )));
    }
    match outcome.failures.first_error {
        Some(e) => Err(e.into()),
        None => Ok(LakebaseResponse::Synced {
            synced: outcome.synced,
            failed: outcome.failures.failed,
            skipped: outcome.skipped,
        }),
    }
}

#[cfg(test)]
mod tests {
    //! The handler without a database: commit events of tables not synced here end before a
    //! connection is opened; an unreachable database fails the invocation, so that Lambda
    //! delivers the batch again.

    use lakemirror_lakebase::function::{ConfigSource, LakebaseSyncConfig};
    use lakemirror_storage::ObjectStores;
    use lambda_runtime::Context;

    use lakemirror_events::test_events::sqs_commits;

    use super::*;

    /// `s3://lake/orders` synced into a database no one listens for (a closed loopback port).
    fn function() -> LakebaseSyncFunction {
        let config = LakebaseSyncConfig {
            config: ConfigSource::Text("[[tables]]\nsource.path = \"s3://lake/orders\"\n".into()),
            postgres_url: Some("postgres://app@127.0.0.1:1/shop?sslmode=disable".into()),
            password_secret_arn: None,
            unity: None,
            table_prefixes: vec!["s3://lake".into()],
            allow_replace: false,
            allowed_schemas: None,
            ca_pem: None,
            ca_secret_arn: None,
            allow_insecure: true,
            libpq: Default::default(),
        };
        LakebaseSyncFunction::new(config, ObjectStores::in_memory(), None)
    }

    /// An SQS batch announcing commit 3 of each (message ID, table folder).
    fn commits(tables: &[(&str, &str)]) -> LambdaEvent<LambdaInput> {
        let messages: Vec<_> = tables.iter().map(|(id, table)| (*id, *table, 3)).collect();
        LambdaEvent::new(sqs_commits(&messages).unwrap(), Context::default())
    }

    #[tokio::test]
    async fn commits_of_tables_not_synced_here_open_no_connection() {
        let response = handle(&function(), commits(&[("m1", "returns"), ("m2", "events")]))
            .await
            .unwrap();
        let LakebaseResponse::Batch(batch) = response else {
            panic!("an SQS batch is answered with a batch response: {response:?}");
        };
        assert!(batch.batch_item_failures.is_empty());
    }

    #[tokio::test]
    async fn an_unreachable_database_fails_the_batch_for_redelivery() {
        let err = handle(&function(), commits(&[("m1", "orders")]))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("127.0.0.1:1"), "{err}");
    }

    #[tokio::test]
    async fn a_config_the_deployment_does_not_allow_is_refused_before_connecting() {
        let mut function = function();
        function.config.config = ConfigSource::Text(
            "[[tables]]\nsource.path = \"s3://lake/orders\"\nsync.conflict_on_existing = \"replace\"\n"
                .into(),
        );
        let err = handle(&function, commits(&[("m1", "orders")]))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("LAKEBASE_ALLOW_REPLACE"), "{err}");
    }
}
