//! The `unity-register` function: `_delta_log` commit events in (the same events as
//! glue-sync: S3 notifications, SQS messages, EventBridge), the announced Delta tables
//! registered in Unity Catalog, a response out. Used by the Lambda function and by
//! `lakemirror invoke unity-register`.
//!
//! It runs beside glue-sync, never inside it: an unreachable or unauthorised Unity Catalog
//! fails this function's invocation (retried by Lambda, then the dead-letter queue) and
//! leaves the Iceberg mirror alone.

use serde_json::{Value, json};

use super::client::UnityCatalog;
use super::register::{UnityRegisterRequest, UnityReport, unity_register};
use crate::error::{Error, Result};
use crate::secrets::{read_secret, secrets_client};
use crate::trigger::{LambdaInput, batch_response, table_prefixes, table_triggers};
use aws_lambda_events::event::sqs::SqsBatchResponse;

/// Configuration of the unity-register function, from its environment.
#[derive(Clone)]
pub struct UnityConfig {
    /// `UC_URL`: the server's base URL, without `/api/2.1/unity-catalog`.
    pub url: String,
    /// `UC_TOKEN`: a bearer token (for local runs; Lambda uses the secret).
    pub token: Option<String>,
    /// `UC_TOKEN_SECRET_ARN`: Secrets Manager secret holding the token (plain, or JSON
    /// with a `token` field); read on every invocation, so a rotated token is picked up.
    pub token_secret_arn: Option<String>,
    /// `UC_CATALOG`: the catalog of tables that do not name one.
    pub catalog: Option<String>,
    /// `UC_SCHEMA`: the schema of tables that do not name one.
    pub schema: Option<String>,
    /// `TABLE_PREFIXES`: only tables under these `s3://bucket/prefix` roots; empty = all.
    pub table_prefixes: Vec<String>,
    /// `ALLOWED_UC_CATALOGS`: the catalogs a table's `lakemirror.unity.*` properties may
    /// choose (a regex); unset: the properties are ignored.
    pub allowed_catalogs: Option<regex::Regex>,
}

impl std::fmt::Debug for UnityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnityConfig")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("token_secret_arn", &self.token_secret_arn)
            .field("catalog", &self.catalog)
            .field("schema", &self.schema)
            .field("table_prefixes", &self.table_prefixes)
            .field("allowed_catalogs", &self.allowed_catalogs)
            .finish()
    }
}

impl UnityConfig {
    pub fn from_env() -> Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let url = var("UC_URL").ok_or_else(|| {
            Error::InvalidInput(
                "UC_URL is not set: give the Unity Catalog server's base URL, e.g. https://uc.example.com:8080 (without /api/2.1/unity-catalog)".into(),
            )
        })?;
        Ok(Self {
            url,
            token: var("UC_TOKEN"),
            token_secret_arn: var("UC_TOKEN_SECRET_ARN"),
            catalog: var("UC_CATALOG"),
            schema: var("UC_SCHEMA"),
            table_prefixes: table_prefixes(var("TABLE_PREFIXES").as_deref()),
            allowed_catalogs: crate::target::allowed_names(
                var("ALLOWED_UC_CATALOGS").as_deref(),
                "ALLOWED_UC_CATALOGS",
            )?,
        })
    }

    /// A client, with the token from Secrets Manager when a secret is configured.
    pub async fn client(
        &self,
        secrets: Option<&aws_sdk_secretsmanager::Client>,
    ) -> Result<UnityCatalog> {
        let token = match (&self.token_secret_arn, secrets) {
            (Some(arn), Some(secrets)) => {
                Some(read_secret(secrets, arn, "token", "the Unity Catalog token secret").await?)
            }
            _ => self.token.clone(),
        };
        UnityCatalog::new(&self.url, token)
    }
}

/// The unity-register function: configuration and clients, built once per process.
#[derive(Debug, Clone)]
pub struct UnityRegisterFunction {
    pub config: UnityConfig,
    secrets: Option<aws_sdk_secretsmanager::Client>,
}

impl UnityRegisterFunction {
    pub async fn from_config(config: UnityConfig) -> Self {
        // S3 (the Delta tables) and Secrets Manager take the process's AWS configuration.
        crate::aws::config().await;
        let secrets = match &config.token_secret_arn {
            Some(_) => Some(secrets_client().await),
            None => None,
        };
        Self { config, secrets }
    }

    /// Registers every table the event announces. Every table is tried. An SQS batch is
    /// answered with the messages of the tables that failed, for redelivery; any other
    /// event fails as a whole when one table failed, so the event source retries it.
    pub async fn handle(&self, event: &LambdaInput) -> Result<UnityResponse> {
        let triggers = table_triggers(&event.deliveries(), &self.config.table_prefixes);
        let mut registered: Vec<UnityReport> = Vec::new();
        let mut failed = Vec::new();
        let mut redeliver = Vec::new();
        let mut first_error = None;
        if !triggers.is_empty() {
            let uc = self.config.client(self.secrets.as_ref()).await?;
            for trigger in &triggers {
                let request = UnityRegisterRequest {
                    table_uri: trigger.table_uri(),
                    catalog: self.config.catalog.clone(),
                    schema: self.config.schema.clone(),
                    table: None,
                    allowed_catalogs: self.config.allowed_catalogs.clone(),
                };
                match unity_register(&uc, &request).await {
                    Ok(report) => registered.push(report),
                    Err(e) => {
                        tracing::error!(table = %request.table_uri, error = %e, "registration failed");
                        failed.push(
                            json!({ "table_uri": request.table_uri, "error": e.to_string() }),
                        );
                        redeliver.extend(trigger.message_ids.iter().cloned());
                        first_error.get_or_insert(e);
                    }
                }
            }
        }
        if event.is_sqs() {
            redeliver.sort();
            redeliver.dedup();
            return Ok(UnityResponse::Batch(batch_response(redeliver)));
        }
        match first_error {
            Some(e) => {
                tracing::error!(failed = %serde_json::Value::Array(failed), "some tables failed");
                Err(e)
            }
            None => Ok(UnityResponse::Registered { registered, failed }),
        }
    }
}

/// What unity-register answers.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum UnityResponse {
    /// To an SQS batch: the messages to redeliver; the others are done.
    Batch(SqsBatchResponse),
    /// To an event delivered directly.
    Registered {
        registered: Vec<UnityReport>,
        failed: Vec<Value>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_never_shows_in_debug_output() {
        let config = UnityConfig {
            url: "http://h".into(),
            token: Some("s3cr3t".into()),
            token_secret_arn: None,
            catalog: None,
            schema: None,
            table_prefixes: Vec::new(),
            allowed_catalogs: None,
        };
        assert!(!format!("{config:?}").contains("s3cr3t"));
    }
}
