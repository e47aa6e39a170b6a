//! The glue-sync function's handler: a Lambda event in, one sync per announced table
//! ([`GlueSyncFunction::handle`], with the invocation's deadline), the response out.

use std::sync::Arc;

use lakemirror_aws::config::{self, rest};
use lakemirror_aws::{DeadLetterQueue, SecretsManager};
use lakemirror_events::DeadLetters;
use lakemirror_events::trigger::LambdaInput;
use lakemirror_iceberg::Lakehouse;
use lakemirror_mirror::function::{GlueSyncConfig, GlueSyncFunction, GlueSyncResponse};
use lakemirror_mirror::{function, settings as sync};
use lakemirror_runtime::crash;
use lakemirror_runtime::settings::{self, Environment, Wired};
use lakemirror_storage::uri;
use lakemirror_unity::commits::commit_catalog;
use lakemirror_unity::function as unity;
use lambda_runtime::{Error, LambdaEvent};

/// Every environment variable glue-sync reads, each declared once in the room that reads it,
/// and what sets it (`shared/cli/src/environment.rs` holds `template.yaml`,
/// `docs/deployment.md` and the CLI to it; its test `reads` records what the wiring reads).
pub const ENVIRONMENT: Environment = &[
    Wired::parameter(&function::GLUE_DATABASE, "GlueDatabase"),
    Wired::parameter(&uri::TABLE_PREFIXES, "TablePrefixes"),
    Wired::parameter(&config::ALLOWED_EXTERNAL_ROOTS, "AllowedExternalRoots"),
    Wired::parameter(&config::MEMORY_SIZE, "MemorySize"),
    Wired::lambda(&config::AWS_LAMBDA_FUNCTION_MEMORY_SIZE),
    Wired::resource(&function::DEAD_LETTER_QUEUE_URL, "SyncDeadLetterQueue"),
    Wired::parameter(&function::MAX_RECEIVE_COUNT, "MaxReceiveCount"),
    Wired::parameter(&sync::ICEBERG_FORMAT_VERSION, "IcebergFormatVersion"),
    Wired::parameter(&sync::ON_MISSING_SOURCE, "OnMissingSource"),
    Wired::parameter(&sync::ALLOWED_GLUE_DATABASES, "AllowedGlueDatabases"),
    Wired::parameter(&sync::TABLE_NAME_FROM_PATH, "TableNameFromPath"),
    Wired::parameter(&sync::BOOTSTRAP_GROUP_FILES, "BootstrapGroupFiles"),
    Wired::parameter(&sync::HISTORY_RECENT_VERSIONS, "HistoryRecentVersions"),
    Wired::parameter(&sync::HISTORY_HOURLY_FOR, "HistoryHourlyFor"),
    Wired::parameter(&rest::REST_CATALOG_URI, "RestCatalogUri"),
    Wired::parameter(&rest::REST_CATALOG_WAREHOUSE, "RestCatalogWarehouse"),
    Wired::parameter(
        &config::REST_CATALOG_TOKEN_SECRET_ARN,
        "RestCatalogTokenSecretArn",
    ),
    Wired::parameter(
        &config::REST_CATALOG_CREDENTIAL_SECRET_ARN,
        "RestCatalogCredentialSecretArn",
    ),
    Wired::local(&rest::REST_CATALOG_TOKEN),
    Wired::local(&rest::REST_CATALOG_CREDENTIAL),
    Wired::parameter(
        &rest::REST_CATALOG_OAUTH2_SERVER_URI,
        "RestCatalogOAuth2ServerUri",
    ),
    Wired::parameter(&rest::REST_CATALOG_SCOPE, "RestCatalogScope"),
    Wired::parameter(&rest::REST_CATALOG_SIGNING_NAME, "RestCatalogSigningName"),
    Wired::parameter(
        &rest::REST_CATALOG_SIGNING_REGION,
        "RestCatalogSigningRegion",
    ),
    Wired::parameter(&unity::UC_URL, "UcUrl"),
    Wired::parameter(&unity::UC_TOKEN_SECRET_ARN, "UcTokenSecretArn"),
    Wired::local(&unity::UC_TOKEN),
    Wired::local(&config::AWS_ENDPOINT_URL_S3),
    Wired::local(&config::AWS_ALLOW_HTTP),
    Wired::local(&crash::CRASH_AT),
    Wired::parameter(&settings::RUST_LOG, "LogLevel"),
    Wired::lambda(&settings::AWS_LAMBDA_LOG_FORMAT),
];

/// The function as `setting` (the process's environment) configures it, with `aws`'s clients:
/// its configuration, the object stores, the catalog (Glue, or the REST catalog named), Unity
/// Catalog for catalog-managed tables, the dead-letter queue. Built once, at cold start.
pub async fn function(
    aws: &aws_config::SdkConfig,
    setting: &dyn Fn(&str) -> Option<String>,
) -> Result<GlueSyncFunction, Error> {
    let function_config = GlueSyncConfig::from_settings(setting)?;
    let secrets = SecretsManager::new(aws);
    let lake = Lakehouse::new(
        config::object_stores(aws, setting),
        config::catalog(aws, setting).await?,
    )
    .with_commit_catalog(commit_catalog(setting, Some(&secrets)).await?);
    let dead_letters = function_config
        .dead_letter_queue_url
        .clone()
        .map(|url| Arc::new(DeadLetterQueue::new(aws, url)) as Arc<dyn DeadLetters>);
    Ok(GlueSyncFunction {
        config: function_config,
        lake,
        dead_letters,
    })
}

/// Handles one invocation.
pub async fn handle(
    function: &GlueSyncFunction,
    event: LambdaEvent<LambdaInput>,
) -> Result<GlueSyncResponse, Error> {
    let deadline = event.context.deadline();
    Ok(function.handle(&event.payload, Some(deadline)).await?)
}

#[cfg(test)]
mod tests {
    //! The handler against the in-memory store and catalog: what a batch of SQS messages
    //! makes of the mirrors, and which messages it asks to have redelivered.

    use std::sync::Arc;

    use lakemirror_delta::test_tables::{
        add, delete_commit, metadata, protocol, protocol_with_reader_features, write_checkpoint,
        write_commit,
    };
    use lakemirror_events::{DeadLetters, InMemoryDeadLetters};
    use lakemirror_iceberg::{InMemoryCatalog, Lakehouse};
    use lakemirror_mirror::SyncSettings;
    use lakemirror_mirror::function::{GlueSyncConfig, GlueSyncFunction, GlueSyncResponse};
    use lakemirror_storage::{MemoryShare, ObjectStores, TableStorage, budget};
    use lambda_runtime::{Context, LambdaEvent};
    use serde_json::{Value, json};

    use lakemirror_delta::test_tables::{
        InMemoryCommitCatalog, catalog_managed_commit, commit_info, write_staged,
    };
    use lakemirror_events::test_events::{sqs_commits, sqs_staged_commits};

    use super::*;

    struct Rig {
        function: GlueSyncFunction,
        catalog: Arc<InMemoryCatalog>,
        dead_letters: Arc<InMemoryDeadLetters>,
        /// Unity Catalog's stand-in: which staged commits of catalog-managed tables count.
        commits: Arc<InMemoryCommitCatalog>,
    }

    fn rig() -> Rig {
        let catalog = Arc::new(InMemoryCatalog::with_databases(&["lake"]));
        let dead_letters = Arc::new(InMemoryDeadLetters::default());
        let commits = Arc::new(InMemoryCommitCatalog::default());
        let function = GlueSyncFunction {
            config: GlueSyncConfig {
                database: "lake".into(),
                table_prefixes: vec!["s3://lake".into()],
                dead_letter_queue_url: Some("memory://dead-letters".into()),
                settings: SyncSettings::default(),
                max_receive_count: 3,
            },
            lake: Lakehouse::new(ObjectStores::in_memory(), catalog.clone())
                .with_commit_catalog(Some(commits.clone())),
            dead_letters: Some(dead_letters.clone() as Arc<dyn DeadLetters>),
        };
        Rig {
            function,
            catalog,
            dead_letters,
            commits,
        }
    }

    impl Rig {
        fn table(&self, name: &str) -> TableStorage {
            self.function
                .lake
                .stores
                .open(&format!("s3://lake/{name}"), Arc::default())
                .unwrap()
        }

        /// A table of one `id` column and its first commit of `files` files.
        async fn create(&self, name: &str, files: usize) -> TableStorage {
            let table = self.table(name);
            let mut actions = vec![protocol(), metadata(name, &[("id", "long")], &[])];
            actions.extend((0..files).map(|f| add(&format!("part-{f}.parquet"), 10, &[])));
            write_commit(&table, 0, &actions).await;
            table
        }

        async fn handle(&self, messages: &[(&str, &str, i64)]) -> GlueSyncResponse {
            handle(
                &self.function,
                LambdaEvent::new(sqs_commits(messages).unwrap(), Context::default()),
            )
            .await
            .unwrap()
        }

        /// The mirror's current snapshot summary, when there is a mirror.
        async fn summary(&self, name: &str) -> Option<Value> {
            let parameters = self.catalog.parameters("lake", name)?;
            let location = &parameters["metadata_location"];
            let store = self
                .function
                .lake
                .stores
                .open(location, Arc::default())
                .unwrap();
            let (bytes, _) = store.get(location).await.unwrap();
            let metadata: Value = serde_json::from_slice(&bytes).unwrap();
            let current = metadata["current-snapshot-id"].clone();
            metadata["snapshots"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["snapshot-id"] == current)
                .map(|s| s["summary"].clone())
        }

        async fn mirrored_version(&self, name: &str) -> Option<i64> {
            let summary = self.summary(name).await?;
            summary["delta.version"].as_str()?.parse().ok()
        }
    }

    fn redelivered(response: &GlueSyncResponse) -> Vec<String> {
        let GlueSyncResponse::Batch(batch) = response else {
            panic!("an SQS batch is answered with a batch response, not {response:?}");
        };
        let mut ids: Vec<String> = batch
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        ids.sort();
        ids
    }

    #[tokio::test]
    async fn a_batch_mirrors_each_table_and_parks_the_one_that_can_never_succeed() {
        let rig = rig();
        rig.create("orders", 3).await;
        let future = rig.table("future");
        write_commit(
            &future,
            0,
            &[
                protocol_with_reader_features(&["featureFromTheFuture"]),
                metadata("future", &[("id", "long")], &[]),
            ],
        )
        .await;
        let response = rig
            .handle(&[
                ("m-orders", "orders", 0),
                ("m-future", "future", 0),
                ("m-bad", "", 0),
            ])
            .await;
        assert!(redelivered(&response).is_empty(), "{response:?}");
        assert_eq!(rig.mirrored_version("orders").await, Some(0));
        assert_eq!(
            rig.summary("orders").await.unwrap()["total-data-files"],
            "3"
        );
        assert!(rig.catalog.parameters("lake", "future").is_none());
        let parked = rig.dead_letters.parked();
        assert_eq!(parked.len(), 2, "{parked:?}");
        let future_parked = parked
            .iter()
            .find(|p| p.table.as_deref() == Some("s3://lake/future"))
            .unwrap();
        assert!(
            future_parked.reason.contains("featureFromTheFuture"),
            "{future_parked:?}"
        );
        assert_eq!(future_parked.delta_version, Some(0));
        assert!(parked.iter().any(|p| p.body == "this is not an event"));
    }

    /// Commit 1 of `name`: one file, and a `commitInfo` padded to about `bytes`.
    async fn padded_commit(rig: &Rig, name: &str, bytes: usize) {
        let table = rig.table(name);
        let line = |v: Value| serde_json::to_string(&v).unwrap();
        let text = [
            line(json!({"commitInfo": {"timestamp": 1, "padding": "x".repeat(bytes)}})),
            line(add("second.parquet", 10, &[])),
        ]
        .join("\n");
        let location = table.location(&format!("_delta_log/{:020}.json", 1));
        table.put(&location, text.into()).await.unwrap();
    }

    #[tokio::test]
    async fn a_table_needing_more_than_its_part_of_the_memory_runs_again_alone_and_the_other_syncs()
    {
        let rig = rig();
        for name in ["large", "small"] {
            rig.create(name, 1).await;
            rig.handle(&[(name, name, 0)]).await;
        }
        // An 8 MB function: a part of two tables reads 1.2 MB at once, the whole budget 2.4.
        let memory = Arc::new(MemoryShare::for_memory_mb(8));
        let part = memory.part(2).read_bytes();
        padded_commit(&rig, "large", part as usize + 100_000).await;
        write_commit(&rig.table("small"), 1, &[add("second.parquet", 10, &[])]).await;
        let response = budget::within(
            memory.clone(),
            rig.handle(&[("m-large", "large", 1), ("m-small", "small", 1)]),
        )
        .await;
        assert!(redelivered(&response).is_empty(), "{response:?}");
        assert_eq!(rig.mirrored_version("large").await, Some(1));
        assert_eq!(rig.mirrored_version("small").await, Some(1));

        // Larger than the whole budget reads: that table alone fails, and for good.
        let table = rig.table("large");
        let location = table.location(&format!("_delta_log/{:020}.json", 2));
        let text = serde_json::to_string(
            &json!({"commitInfo": {"timestamp": 1, "padding": "x".repeat(memory.read_bytes() as usize + 1)}}),
        )
        .unwrap();
        table.put(&location, text.into()).await.unwrap();
        write_commit(&rig.table("small"), 2, &[add("third.parquet", 10, &[])]).await;
        let response = budget::within(
            memory,
            rig.handle(&[("m-large", "large", 2), ("m-small", "small", 2)]),
        )
        .await;
        assert!(
            redelivered(&response).is_empty(),
            "parked, not redelivered: {response:?}"
        );
        assert_eq!(rig.mirrored_version("large").await, Some(1));
        assert_eq!(rig.mirrored_version("small").await, Some(2));
        let parked = rig.dead_letters.parked();
        assert_eq!(parked.len(), 1, "{parked:?}");
        assert!(parked[0].reason.contains("MEMORY_SIZE"), "{:?}", parked[0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lost_race_is_retried_and_the_commit_lands_once() {
        let rig = rig();
        let orders = rig.create("orders", 1).await;
        rig.handle(&[("m0", "orders", 0)]).await;
        write_commit(&orders, 1, &[add("part-9.parquet", 10, &[])]).await;
        rig.catalog.interfere("lake", "orders", 2);
        let response = rig.handle(&[("m1", "orders", 1)]).await;
        assert!(redelivered(&response).is_empty(), "{response:?}");
        let summary = rig.summary("orders").await.unwrap();
        assert_eq!(summary["delta.version"], "1");
        assert_eq!(summary["total-data-files"], "2", "the file was added once");
        assert!(rig.dead_letters.parked().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_table_that_keeps_losing_its_race_is_redelivered_alone() {
        let rig = rig();
        let orders = rig.create("orders", 1).await;
        let returns = rig.create("returns", 1).await;
        rig.handle(&[("m0", "orders", 0), ("m1", "returns", 0)])
            .await;
        write_commit(&orders, 1, &[add("part-1.parquet", 10, &[])]).await;
        write_commit(&returns, 1, &[add("part-1.parquet", 10, &[])]).await;
        rig.catalog.interfere("lake", "orders", u32::MAX);
        let response = rig
            .handle(&[("m-orders", "orders", 1), ("m-returns", "returns", 1)])
            .await;
        assert_eq!(redelivered(&response), ["m-orders"]);
        assert_eq!(rig.mirrored_version("orders").await, Some(0));
        assert_eq!(rig.mirrored_version("returns").await, Some(1));
        assert!(
            rig.dead_letters.parked().is_empty(),
            "a retryable failure is not parked"
        );
    }

    #[tokio::test]
    async fn commits_cleaned_from_the_log_are_caught_up_from_the_checkpoint() {
        let rig = rig();
        let orders = rig.create("orders", 1).await;
        rig.handle(&[("m0", "orders", 0)]).await;
        assert_eq!(rig.mirrored_version("orders").await, Some(0));
        write_commit(&orders, 1, &[add("part-1.parquet", 10, &[])]).await;
        write_commit(&orders, 2, &[add("part-2.parquet", 10, &[])]).await;
        write_checkpoint(
            &orders,
            2,
            &[
                protocol(),
                metadata("orders", &[("id", "long")], &[]),
                add("part-0.parquet", 10, &[]),
                add("part-1.parquet", 10, &[]),
                add("part-2.parquet", 10, &[]),
            ],
        )
        .await;
        delete_commit(&orders, 0).await;
        delete_commit(&orders, 1).await;
        let response = rig.handle(&[("m2", "orders", 2)]).await;
        assert!(redelivered(&response).is_empty(), "{response:?}");
        let summary = rig.summary("orders").await.unwrap();
        assert_eq!(summary["delta.version"], "2");
        assert_eq!(summary["total-data-files"], "3");
        assert_eq!(summary["total-records"], "30");
    }

    #[tokio::test]
    async fn an_event_for_a_version_mirrored_already_changes_nothing() {
        let rig = rig();
        rig.create("orders", 2).await;
        rig.handle(&[("m0", "orders", 0)]).await;
        let before = rig.catalog.parameters("lake", "orders").unwrap();
        let response = rig.handle(&[("m0-again", "orders", 0)]).await;
        assert!(redelivered(&response).is_empty());
        assert_eq!(rig.catalog.parameters("lake", "orders").unwrap(), before);
    }

    #[tokio::test(start_paused = true)]
    async fn a_staged_commit_is_mirrored_once_ratified_and_redelivered_but_never_parked_before() {
        let rig = rig();
        let managed = rig.table("managed");
        write_commit(
            &managed,
            0,
            &catalog_managed_commit("m", "uc-7", &[("id", "long")]),
        )
        .await;
        rig.commits.create("uc-7", "s3://lake/managed");
        let stage = |version: i64, uuid: &'static str| {
            let managed = managed.clone();
            async move {
                write_staged(
                    &managed,
                    version,
                    uuid,
                    &[
                        commit_info(1_700_000_000_000),
                        add(&format!("{uuid}.parquet"), 10, &[]),
                    ],
                )
                .await
            }
        };
        let first = stage(1, "00000000-0000-4000-8000-000000000001").await;
        let handle = |messages: Vec<(&'static str, String, u32)>| {
            let rig = &rig;
            async move {
                let messages: Vec<(&str, &str, &str, u32)> = messages
                    .iter()
                    .map(|(id, file, n)| (*id, "managed", file.as_str(), *n))
                    .collect();
                let event = sqs_staged_commits(&messages).unwrap();
                handle(&rig.function, LambdaEvent::new(event, Context::default()))
                    .await
                    .unwrap()
            }
        };
        // Staged, not yet ratified: asked again within the invocation, then redelivered.
        let asked = rig.commits.asked();
        let early = handle(vec![("m1", first.file_name.clone(), 1)]).await;
        assert_eq!(redelivered(&early), ["m1"]);
        assert!(
            rig.commits.asked() > asked + 1,
            "asked again before giving up"
        );
        assert_eq!(rig.mirrored_version("managed").await, Some(0));
        // On its last delivery (MAX_RECEIVE_COUNT 3) it is let go, never parked.
        let last = handle(vec![("m1", first.file_name.clone(), 3)]).await;
        assert!(redelivered(&last).is_empty(), "{last:?}");
        assert!(rig.dead_letters.parked().is_empty());
        // Ratified: mirrored at once.
        rig.commits.ratify("uc-7", first.clone());
        let ratified = handle(vec![("m1", first.file_name.clone(), 2)]).await;
        assert!(redelivered(&ratified).is_empty(), "{ratified:?}");
        assert_eq!(rig.mirrored_version("managed").await, Some(1));
        // A staged file that lost version 1 to another is done with, and mirrors nothing.
        let loser = stage(1, "ffffffff-0000-4000-8000-000000000001").await;
        let lost = handle(vec![("m2", loser.file_name.clone(), 1)]).await;
        assert!(redelivered(&lost).is_empty(), "{lost:?}");
        assert_eq!(
            rig.summary("managed").await.unwrap()["total-data-files"],
            "1"
        );
        assert!(rig.dead_letters.parked().is_empty());
    }

    #[tokio::test]
    async fn tables_outside_the_prefixes_are_not_mirrored() {
        let rig = rig();
        let elsewhere = rig
            .function
            .lake
            .stores
            .open("s3://other/orders", Arc::default())
            .unwrap();
        write_commit(
            &elsewhere,
            0,
            &[protocol(), metadata("orders", &[("id", "long")], &[])],
        )
        .await;
        let records = json!({"Records": [{"messageId": "m", "receiptHandle": "r", "eventSource": "aws:sqs",
            "body": json!({"Records": [{"eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": "other"}, "object": {"key": "orders/_delta_log/00000000000000000000.json"}}}]}).to_string()}]});
        let event = LambdaEvent::new(
            LambdaInput::from_json(&records.to_string()).unwrap(),
            Context::default(),
        );
        let response = handle(&rig.function, event).await.unwrap();
        assert!(redelivered(&response).is_empty());
        assert!(rig.catalog.parameters("lake", "orders").is_none());
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
        let given: &[&[(&str, &str)]] = &[
            &[("GLUE_DATABASE", "mirrors")],
            &[
                ("GLUE_DATABASE", "mirrors"),
                ("REST_CATALOG_URI", "http://127.0.0.1:9/v1"),
                ("REST_CATALOG_CREDENTIAL", "id:secret"),
                ("UC_URL", "http://127.0.0.1:9"),
                ("DEAD_LETTER_QUEUE_URL", "http://127.0.0.1:9/queue/parked"),
            ],
            &[
                ("GLUE_DATABASE", "mirrors"),
                ("REST_CATALOG_URI", "http://127.0.0.1:9/v1"),
                ("REST_CATALOG_SIGNING_NAME", "glue"),
            ],
        ];
        // What `main` reads: the process's settings, then the function.
        let read = names_read(given, async |setting| {
            ProcessSettings::from_settings(setting).unwrap();
            let aws = offline(None).await;
            super::function(&aws, setting).await.unwrap();
        })
        .await;
        assert_eq!(
            disagreements(super::ENVIRONMENT, &read),
            Vec::<String>::new()
        );
    }
}
