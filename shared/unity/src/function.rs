//! The `unity-register` function's logic: the Delta tables that `_delta_log` commit events
//! announced (the same events as glue-sync's: S3 notifications, SQS messages, EventBridge;
//! read by the function's handler) registered in Unity Catalog.
//!
//! It runs beside glue-sync, never inside it: an unreachable or unauthorised Unity Catalog
//! fails this function's invocation (retried by Lambda, then the dead-letter queue) and
//! leaves the Iceberg mirror alone.

use std::sync::Arc;
use std::time::SystemTime;

use futures::StreamExt;
use lakemirror_runtime::deadline::{self, Timed};

use lakemirror_events::trigger::AnnouncedTable;
use lakemirror_runtime::Failures;
use lakemirror_runtime::settings::Variable;
use lakemirror_storage::uri::{TABLE_PREFIXES, table_prefixes};
use lakemirror_storage::{ObjectStores, SecretSource, SharedOut, budget};

use crate::client::UnityCatalog;
use crate::error::{Error, Result};
use crate::register::{UnityRegisterRequest, UnityReport, unity_register};

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

/// `UC_URL`.
pub const UC_URL: Variable = Variable {
    name: "UC_URL",
    default: None,
    values: &[],
    help: "The Unity Catalog server's base URL, without /api/2.1/unity-catalog: unity-register registers tables there, glue-sync and lakebase-sync read the commits it ratified of catalog-managed tables.",
};

/// `UC_TOKEN`.
pub const UC_TOKEN: Variable = Variable {
    name: "UC_TOKEN",
    default: None,
    values: &[],
    help: "The Unity Catalog bearer token (a deployment keeps it in UC_TOKEN_SECRET_ARN).",
};

/// `UC_TOKEN_SECRET_ARN`.
pub const UC_TOKEN_SECRET_ARN: Variable = Variable {
    name: "UC_TOKEN_SECRET_ARN",
    default: None,
    values: &[],
    help: "Secrets Manager secret holding the Unity Catalog bearer token (plain or JSON token).",
};

/// `UC_CATALOG`.
pub const UC_CATALOG: Variable = Variable {
    name: "UC_CATALOG",
    default: None,
    values: &[],
    help: "The Unity Catalog catalog of tables that do not name one (lakemirror.unity.catalog).",
};

/// `UC_SCHEMA`.
pub const UC_SCHEMA: Variable = Variable {
    name: "UC_SCHEMA",
    default: None,
    values: &[],
    help: "The Unity Catalog schema of tables that do not name one (lakemirror.unity.schema).",
};

/// `ALLOWED_UC_CATALOGS`.
pub const ALLOWED_UC_CATALOGS: Variable = Variable {
    name: "ALLOWED_UC_CATALOGS",
    default: None,
    values: &[],
    help: "The catalogs a Delta table's own lakemirror.unity.catalog / .schema / .table properties may choose, as a regex over the whole name; unset: those properties are ignored, with a warning.",
};

impl UnityConfig {
    /// The configuration from `setting` (the function's environment variables).
    pub fn from_settings(setting: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        Ok(Self {
            catalog: UC_CATALOG.value(setting),
            schema: UC_SCHEMA.value(setting),
            table_prefixes: table_prefixes(TABLE_PREFIXES.value(setting).as_deref()),
            allowed_catalogs: lakemirror_plan::target::allowed_names(
                ALLOWED_UC_CATALOGS.value(setting).as_deref(),
                ALLOWED_UC_CATALOGS.name,
            )?,
            ..Self::connection(setting)?
        })
    }

    /// Only the server and its token (`UC_URL`, `UC_TOKEN`, `UC_TOKEN_SECRET_ARN`): what a
    /// function that reads through Unity Catalog but registers nothing needs.
    pub fn connection(setting: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let url = UC_URL.value(setting).ok_or_else(|| Error::Url {
            url: String::new(),
            reason: "is not set: give the Unity Catalog server's base URL, e.g. https://uc.example.com:8080 (without /api/2.1/unity-catalog)".into(),
        })?;
        Ok(Self {
            url,
            token: UC_TOKEN.value(setting),
            token_secret_arn: UC_TOKEN_SECRET_ARN.value(setting),
            catalog: None,
            schema: None,
            table_prefixes: Vec::new(),
            allowed_catalogs: None,
        })
    }

    /// A client, with the token from Secrets Manager when a secret is configured.
    pub async fn client(&self, secrets: Option<&dyn SecretSource>) -> Result<UnityCatalog> {
        let token = match (&self.token_secret_arn, secrets) {
            (Some(arn), Some(secrets)) => Some(
                secrets
                    .secret(arn, "token", "the Unity Catalog token secret")
                    .await?,
            ),
            _ => self.token.clone(),
        };
        UnityCatalog::new(&self.url, token)
    }
}

/// The unity-register function: configuration and clients, built once per process.
#[derive(Clone)]
pub struct UnityRegisterFunction {
    pub config: UnityConfig,
    stores: ObjectStores,
    secrets: Option<Arc<dyn SecretSource>>,
}

impl std::fmt::Debug for UnityRegisterFunction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnityRegisterFunction")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// What one invocation registered, and what failed.
#[derive(Debug, Default)]
pub struct Registered {
    pub registered: Vec<UnityReport>,
    /// `{"table_uri", "error"}` per table that failed, and the messages to redeliver.
    pub failures: Failures<Error>,
}

/// Registrations that run side by side in one invocation.
pub const REGISTRATIONS_AT_ONCE: usize = 4;

impl UnityRegisterFunction {
    /// `secrets` reads the token when `UC_TOKEN_SECRET_ARN` is set.
    pub fn new(
        config: UnityConfig,
        stores: ObjectStores,
        secrets: Option<Arc<dyn SecretSource>>,
    ) -> Self {
        Self {
            config,
            stores,
            secrets,
        }
    }

    /// Registers every announced table, [`REGISTRATIONS_AT_ONCE`] side by side, each under
    /// the invocation's `deadline`: none starts (after the first) with less than
    /// [`deadline::START_MARGIN`] left, and one still running [`deadline::RESPONSE_MARGIN`] before it is cut off;
    /// their messages are delivered again, the others' are done, so one slow table cannot
    /// make the whole batch come back.
    pub async fn register(
        &self,
        tables: &[AnnouncedTable],
        deadline: Option<SystemTime>,
    ) -> Result<Registered> {
        let mut outcome = Registered::default();
        if tables.is_empty() {
            return Ok(outcome);
        }
        let deadline = deadline::of_invocation(deadline);
        let uc = self.config.client(self.secrets.as_deref()).await?;
        // Each registration within its part of the memory budget.
        let shared = &SharedOut::new(budget::current(), REGISTRATIONS_AT_ONCE.min(tables.len()));
        let registrations = tables.iter().enumerate().map(|(n, table)| {
            let uc = &uc;
            async move {
                let registered = shared
                    .within_part(self.register_one(uc, table, deadline, n == 0))
                    .await;
                (table, registered)
            }
        });
        let mut finished =
            futures::stream::iter(registrations).buffer_unordered(REGISTRATIONS_AT_ONCE);
        while let Some((table, registered)) = finished.next().await {
            match registered {
                Ok(report) => outcome.registered.push(report),
                Err(e) => {
                    tracing::error!(table = %table.table_uri, error = %e, "registration failed");
                    let uri = &table.table_uri;
                    outcome
                        .failures
                        .record("table_uri", uri, &table.message_ids, e);
                }
            }
        }
        outcome.failures.log();
        Ok(outcome)
    }

    /// One table's registration, started (unless `first`) only while [`deadline::START_MARGIN`] is
    /// left before the deadline, and cut off [`deadline::RESPONSE_MARGIN`] before it.
    async fn register_one(
        &self,
        uc: &UnityCatalog,
        table: &AnnouncedTable,
        deadline: Option<SystemTime>,
        first: bool,
    ) -> Result<UnityReport> {
        let request = UnityRegisterRequest {
            table_uri: table.table_uri.clone(),
            catalog: self.config.catalog.clone(),
            schema: self.config.schema.clone(),
            table: None,
            allowed_catalogs: self.config.allowed_catalogs.clone(),
        };
        // A panic in this table's registration fails this table only.
        let registration = lakemirror_runtime::isolated(unity_register(&self.stores, uc, &request));
        match deadline::run_before(deadline, first, registration).await {
            Timed::Done(Ok(registered)) => registered,
            Timed::Done(Err(message)) => Err(Error::Bug {
                what: "registering",
                table: request.table_uri.clone(),
                message,
            }),
            Timed::NotStarted => Err(Error::OutOfTime(format!(
                "{}: not started, the invocation's time ran out; it is retried",
                table.table_uri
            ))),
            Timed::CutOff(budget) => Err(Error::OutOfTime(format!(
                "{}: the registration did not finish within the {} s the invocation had left; it is retried",
                request.table_uri,
                budget.as_secs()
            ))),
        }
    }
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
