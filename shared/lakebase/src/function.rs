//! The `lakebase-sync` function's logic: a schedule tick, or the Delta tables that
//! `_delta_log` commit events announced (read by the function's handler), in; the synced
//! tables that are due (or announced) brought up to date.
//!
//! One schedule serves every table: on each tick a table is synced when its `sync.interval`
//! has passed since `lakemirror.sync_state` last recorded it, so adding a table or changing
//! its interval is a config change, not a new schedule. Commit events of a table's
//! `source.path` sync it at once, whatever its interval.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lakemirror_runtime::deadline::{self, Timed};

use lakemirror_events::trigger::AnnouncedTable;
use lakemirror_runtime::Failures;
use lakemirror_runtime::metrics::{Metric, MetricRecord};
use lakemirror_runtime::settings::Variable;
use lakemirror_storage::uri::{TABLE_PREFIXES, plain_location, table_prefixes};
use lakemirror_storage::{IoCounters, ObjectStores, SecretSource, canonical_uri};
use lakemirror_unity::UnityCatalog;
use lakemirror_unity::function::{UC_URL, UnityConfig};

use crate::config::{Conflict, SyncedTable, parse_config};
use crate::error::{Error, Result};
use crate::postgres::{Connection, pg_error};
use crate::state::STATE_TABLE;
use crate::sync::{LakebaseReport, lakebase_sync};

/// A tick this much early still syncs a table: schedules fire to the minute, not the second.
const SCHEDULE_SLACK: Duration = Duration::from_secs(60);

/// Configuration of the lakebase-sync function, from its environment.
///
/// Who may change it is who may make the function write to the database: the config is
/// text in the stack (`LAKEBASE_CONFIG`) or one S3 object the stack names
/// (`LAKEBASE_CONFIG_URI`) outside the data prefixes, which whoever writes Delta tables may
/// write; and what it may ask is bounded by the stack (`LAKEBASE_ALLOW_REPLACE`,
/// `LAKEBASE_ALLOWED_SCHEMAS`). Not `Debug`: the PostgreSQL URL may hold a password.
#[derive(Clone)]
pub struct LakebaseSyncConfig {
    /// Where the synced tables are listed.
    pub config: ConfigSource,
    /// `POSTGRES_URL`; without it the libpq environment (`PGHOST`, `PGUSER`, ...).
    pub postgres_url: Option<String>,
    /// `POSTGRES_PASSWORD_SECRET_ARN`: a Secrets Manager secret holding the password (plain,
    /// or JSON with a `password` field as RDS writes it); read on every invocation, so a
    /// rotated password or a refreshed Lakebase OAuth token is picked up.
    pub password_secret_arn: Option<String>,
    /// `UC_URL` and its token: resolves `source.catalog/schema/table` sources.
    pub unity: Option<UnityConfig>,
    /// `TABLE_PREFIXES`: where Delta tables (and so their writers) live; the config object
    /// may not lie there.
    pub table_prefixes: Vec<String>,
    /// `LAKEBASE_ALLOW_REPLACE`: whether a table may ask `sync.conflict_on_existing =
    /// "replace"` (drop a table lakemirror did not create). Off unless the stack allows it.
    pub allow_replace: bool,
    /// `LAKEBASE_ALLOWED_SCHEMAS`: the PostgreSQL schemas targets may lie in (None: any).
    pub allowed_schemas: Option<Vec<String>>,
    /// `POSTGRES_CA_PEM`: the CA of the server's certificate, as PEM (a Lakebase or RDS
    /// region bundle); else `POSTGRES_CA_SECRET_ARN`, a secret holding it; else the
    /// system's roots.
    pub ca_pem: Option<String>,
    pub ca_secret_arn: Option<String>,
    /// `POSTGRES_ALLOW_INSECURE`: allow an sslmode that may fall back to plaintext
    /// (`disable`, `prefer`). Off: the function connects with `verify-full` by default.
    pub allow_insecure: bool,
    /// The libpq environment (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`,
    /// `PGSSLMODE`, `PGSSLROOTCERT`), for a connection without `POSTGRES_URL`.
    pub libpq: HashMap<String, String>,
}

/// `LAKEBASE_CONFIG`.
pub const LAKEBASE_CONFIG: Variable = Variable {
    name: "LAKEBASE_CONFIG",
    default: None,
    values: &[],
    help: "The tables lakebase-sync copies into PostgreSQL: TOML [[tables]] text (or LAKEBASE_CONFIG_URI).",
};

/// `LAKEBASE_CONFIG_URI`.
pub const LAKEBASE_CONFIG_URI: Variable = Variable {
    name: "LAKEBASE_CONFIG_URI",
    default: None,
    values: &[],
    help: "Instead of LAKEBASE_CONFIG: the s3://bucket/key of the TOML file.",
};

/// `POSTGRES_URL`.
pub const POSTGRES_URL: Variable = Variable {
    name: "POSTGRES_URL",
    default: None,
    values: &[],
    help: "postgres://user@host:5432/db?sslmode=verify-full, without the password; unset: the libpq variables (PGHOST, ...).",
};

/// `POSTGRES_PASSWORD_SECRET_ARN`.
pub const POSTGRES_PASSWORD_SECRET_ARN: Variable = Variable {
    name: "POSTGRES_PASSWORD_SECRET_ARN",
    default: None,
    values: &[],
    help: "Secrets Manager secret holding the password (plain or JSON password).",
};

/// `LAKEBASE_ALLOW_REPLACE`.
pub const LAKEBASE_ALLOW_REPLACE: Variable = Variable {
    name: "LAKEBASE_ALLOW_REPLACE",
    default: Some("false"),
    values: &["true", "false"],
    help: "Whether a config may ask sync.conflict_on_existing = \"replace\".",
};

/// `LAKEBASE_ALLOWED_SCHEMAS`.
pub const LAKEBASE_ALLOWED_SCHEMAS: Variable = Variable {
    name: "LAKEBASE_ALLOWED_SCHEMAS",
    default: None,
    values: &[],
    help: "The schemas (comma-separated) a config's targets may lie in; unset: any (the template sets public).",
};

/// `POSTGRES_CA_PEM`.
pub const POSTGRES_CA_PEM: Variable = Variable {
    name: "POSTGRES_CA_PEM",
    default: None,
    values: &[],
    help: "The CA of the server's certificate, as PEM (a Lakebase or RDS region bundle); unset: POSTGRES_CA_SECRET_ARN, else the system's roots.",
};

/// `POSTGRES_CA_SECRET_ARN`.
pub const POSTGRES_CA_SECRET_ARN: Variable = Variable {
    name: "POSTGRES_CA_SECRET_ARN",
    default: None,
    values: &[],
    help: "Secrets Manager secret holding the database's CA as PEM.",
};

/// `POSTGRES_ALLOW_INSECURE`.
pub const POSTGRES_ALLOW_INSECURE: Variable = Variable {
    name: "POSTGRES_ALLOW_INSECURE",
    default: Some("false"),
    values: &["true", "false"],
    help: "Allow an sslmode that does not verify the server (require, or one that may fall back to plaintext).",
};

/// Where the lakebase-sync function's table list comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// `LAKEBASE_CONFIG`: the TOML text itself.
    Text(String),
    /// `LAKEBASE_CONFIG_URI`: the `s3://` URI of one TOML file.
    Object(String),
}

impl LakebaseSyncConfig {
    /// The configuration from `setting` (the function's environment variables).
    pub fn from_settings(setting: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let config = match (
            LAKEBASE_CONFIG.value(setting),
            LAKEBASE_CONFIG_URI.value(setting),
        ) {
            (Some(text), None) => ConfigSource::Text(text),
            (None, Some(uri)) => ConfigSource::Object(uri),
            (Some(_), Some(_)) => {
                return Err(Error::Config(
                    "both LAKEBASE_CONFIG and LAKEBASE_CONFIG_URI are set: give the tables as TOML text or as the s3:// URI of a file, not both".into(),
                ));
            }
            (None, None) => {
                return Err(Error::Config(
                    "LAKEBASE_CONFIG is not set: give the synced tables as TOML ([[tables]] entries, the format of the CLI's config file), or the s3:// URI of such a file as LAKEBASE_CONFIG_URI".into(),
                ));
            }
        };
        Ok(Self {
            config,
            postgres_url: POSTGRES_URL.value(setting),
            password_secret_arn: POSTGRES_PASSWORD_SECRET_ARN.value(setting),
            unity: match UC_URL.value(setting) {
                Some(_) => Some(UnityConfig::connection(setting)?),
                None => None,
            },
            table_prefixes: table_prefixes(TABLE_PREFIXES.value(setting).as_deref()),
            allow_replace: flag(
                LAKEBASE_ALLOW_REPLACE.name,
                LAKEBASE_ALLOW_REPLACE.value(setting),
            )?,
            allowed_schemas: allowed_schemas(LAKEBASE_ALLOWED_SCHEMAS.value(setting).as_deref()),
            ca_pem: POSTGRES_CA_PEM.value(setting),
            ca_secret_arn: POSTGRES_CA_SECRET_ARN.value(setting),
            allow_insecure: flag(
                POSTGRES_ALLOW_INSECURE.name,
                POSTGRES_ALLOW_INSECURE.value(setting),
            )?,
            libpq: crate::postgres::LIBPQ_VARIABLES
                .iter()
                .filter_map(|v| v.value(setting).map(|value| (v.name.to_string(), value)))
                .collect(),
        })
    }
}

/// A `true`/`false` environment variable (unset: false).
fn flag(name: &str, value: Option<String>) -> Result<bool> {
    match value {
        None => Ok(false),
        Some(v) => v
            .trim()
            .parse::<bool>()
            .map_err(|_| Error::Config(format!("{name}={v:?}: allowed values are true and false"))),
    }
}

/// `LAKEBASE_ALLOWED_SCHEMAS`: comma-separated schema names; None (any schema) when unset.
pub fn allowed_schemas(value: Option<&str>) -> Option<Vec<String>> {
    value.map(|v| {
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    })
}

/// The lakebase-sync function: configuration and clients, built once per process.
/// Not `Debug`: its configuration may hold a password.
#[derive(Clone)]
pub struct LakebaseSyncFunction {
    pub config: LakebaseSyncConfig,
    stores: ObjectStores,
    secrets: Option<Arc<dyn SecretSource>>,
}

/// What one invocation synced, and what failed.
#[derive(Default)]
pub struct LakebaseOutcome {
    pub synced: Vec<LakebaseReport>,
    /// Tables neither due nor announced.
    pub skipped: usize,
    /// `{"target", "error"}` per table that failed, and the messages to redeliver.
    pub failures: Failures<Error>,
}

impl LakebaseOutcome {
    /// A table the invocation's time did not reach: announced, its messages are delivered
    /// again; due at a tick, it is due at the next one.
    fn not_reached(&mut self, table: &SyncedTable, message_ids: &[String]) {
        if message_ids.is_empty() {
            self.skipped += 1;
            return;
        }
        let error = Error::OutOfTime(format!(
            "{}: not started, the invocation's time ran out; it is retried",
            table.target
        ));
        self.failures
            .record("target", &table.target.to_string(), message_ids, error);
    }
}

impl LakebaseSyncFunction {
    /// `secrets` reads the password, the CA and the Unity Catalog token when their secrets
    /// are configured.
    pub fn new(
        config: LakebaseSyncConfig,
        stores: ObjectStores,
        secrets: Option<Arc<dyn SecretSource>>,
    ) -> Self {
        Self {
            config,
            stores,
            secrets,
        }
    }

    /// Whether any secret is configured (the handler builds a secret source only then).
    pub fn needs_secrets(config: &LakebaseSyncConfig) -> bool {
        config.password_secret_arn.is_some()
            || config.ca_secret_arn.is_some()
            || config
                .unity
                .as_ref()
                .is_some_and(|u| u.token_secret_arn.is_some())
    }

    /// Syncs the tables `announced` names (commit events), or with none announced (a
    /// schedule tick) the tables that are due; the others count as `skipped`. Every table is
    /// tried in turn, each within its share of the invocation's time left
    /// ([`deadline::run_in_turn`]): none starts (after the first) with less than
    /// [`deadline::START_MARGIN`] left, and one still running past its share is cut off (its
    /// transaction rolled back with the connection) and retried; the tables not reached are
    /// retried (announced) or due at the next tick.
    pub async fn sync(
        &self,
        announced: &[AnnouncedTable],
        deadline: Option<SystemTime>,
    ) -> Result<LakebaseOutcome> {
        let deadline = deadline::of_invocation(deadline);
        let tables = self.tables().await?;
        // Unity Catalog resolves sources by name and, for catalog-managed tables, names the
        // commits it ratified: the client is made whenever it is configured.
        let unity = match &self.config.unity {
            Some(unity) => Some(unity.client(self.secrets.as_deref()).await?),
            None => None,
        };
        // Commit events of tables not synced here end before any connection is opened: a
        // burst of commits elsewhere costs the database nothing. Each announced table keeps
        // the messages that announced it.
        let mut chosen = announced_tables(&tables, announced, unity.as_ref()).await?;
        if !announced.is_empty() && chosen.is_empty() {
            return Ok(LakebaseOutcome {
                skipped: tables.len(),
                ..LakebaseOutcome::default()
            });
        }
        let libpq = |name: &str| self.config.libpq.get(name).cloned();
        let connection = Connection::new(
            self.config.postgres_url.as_deref(),
            self.password().await?,
            &libpq,
        )?
        .verified(self.ca().await?, self.config.allow_insecure)?;
        let mut client = connection.connect().await?;
        if announced.is_empty() {
            chosen = due(&client, &tables)
                .await?
                .into_iter()
                .map(|t| (t, Vec::new()))
                .collect();
        }
        let mut outcome = LakebaseOutcome {
            skipped: tables.len() - chosen.len(),
            ..LakebaseOutcome::default()
        };
        // One after another on one session, each within its turn's share of the time left:
        // one slow table cannot push the others past the deadline. A table cut off at its
        // share goes again after the others, with all the time they left.
        let mut turns: std::collections::VecDeque<(&SyncedTable, &Vec<String>, bool)> =
            chosen.iter().map(|(t, ids)| (*t, ids, false)).collect();
        let mut first = true;
        while let Some((table, message_ids, again)) = turns.pop_front() {
            let sync = lakemirror_runtime::isolated(lakebase_sync(
                &self.stores,
                &mut client,
                table,
                None,
                unity.as_ref(),
            ));
            let timed = deadline::run_in_turn(deadline, first, turns.len() + 1, sync).await;
            first = false;
            let finished = match timed {
                Timed::Done(Ok(finished)) => finished,
                Timed::NotStarted => {
                    outcome.not_reached(table, message_ids);
                    continue;
                }
                Timed::Done(Err(_)) | Timed::CutOff(_) => {
                    // The session is mid-transaction: a new one rolls it back and serves
                    // the tables after it.
                    client = match connection.connect().await {
                        Ok(client) => client,
                        Err(e) => {
                            outcome.failures.record(
                                "target",
                                &table.target.to_string(),
                                message_ids,
                                e,
                            );
                            for (table, message_ids, _) in turns.drain(..) {
                                outcome.not_reached(table, message_ids);
                            }
                            break;
                        }
                    };
                    match timed {
                        Timed::CutOff(share) if !again && !turns.is_empty() => {
                            tracing::warn!(target = %table.target, share_ms = share.as_millis(), "the sync did not finish within its share of the invocation's time; it was rolled back and goes again after the other tables");
                            turns.push_back((table, message_ids, true));
                            continue;
                        }
                        Timed::CutOff(share) => Err(Error::OutOfTime(format!(
                            "{}: the sync did not finish within the {} s it had of the invocation's time; it was rolled back (nothing changed) and is retried",
                            table.target,
                            share.as_secs()
                        ))),
                        Timed::Done(Err(message)) => Err(Error::Bug {
                            what: "syncing",
                            table: table.target.to_string(),
                            message,
                        }),
                        _ => continue,
                    }
                }
            };
            outcome.finished(table, message_ids, finished);
        }
        outcome.failures.log();
        Ok(outcome)
    }

    /// The synced tables, as the config lists them and the deployment allows them.
    async fn tables(&self) -> Result<Vec<SyncedTable>> {
        let tables = match &self.config.config {
            ConfigSource::Text(text) if text.trim().starts_with("s3://") => {
                return Err(Error::Config(format!(
                    "LAKEBASE_CONFIG is an S3 URI ({}): give it as LAKEBASE_CONFIG_URI (SAM LakebaseConfigUri), which the function may read, and nothing else there",
                    text.trim()
                )));
            }
            ConfigSource::Text(text) => parse_config(text, "LAKEBASE_CONFIG")?,
            ConfigSource::Object(uri) => {
                let plain = plain_location(uri)
                    .map_err(|why| Error::Config(format!("LAKEBASE_CONFIG_URI {why}")))?;
                if let Some(prefix) = self
                    .config
                    .table_prefixes
                    .iter()
                    .find(|p| plain.starts_with(&canonical_uri(p)))
                {
                    return Err(Error::Config(format!(
                        "LAKEBASE_CONFIG_URI {uri} lies under {prefix} (TABLE_PREFIXES), where whoever writes Delta tables may write it: keep the config where only the stack's owners can"
                    )));
                }
                let (parent, _) = plain.rsplit_once('/').unwrap_or((&plain, ""));
                let store = self.stores.open(parent, Arc::new(IoCounters::default()))?;
                let (bytes, _) = store.get(&plain).await?;
                let text = std::str::from_utf8(&bytes).map_err(|e| {
                    Error::Config(format!("LAKEBASE_CONFIG_URI {uri} is not UTF-8: {e}"))
                })?;
                parse_config(text, &format!("LAKEBASE_CONFIG_URI {uri}"))?
            }
        };
        for table in &tables {
            allowed(
                table,
                self.config.allow_replace,
                self.config.allowed_schemas.as_deref(),
            )?;
        }
        Ok(tables)
    }

    /// The CA of the server's certificate, from the environment or a secret.
    async fn ca(&self) -> Result<Option<String>> {
        if let Some(pem) = &self.config.ca_pem {
            return Ok(Some(pem.clone()));
        }
        let (Some(arn), Some(secrets)) = (&self.config.ca_secret_arn, &self.secrets) else {
            return Ok(None);
        };
        Ok(Some(
            secrets
                .secret(arn, "ca", "the PostgreSQL CA secret")
                .await?,
        ))
    }

    /// The password from Secrets Manager, when a secret is configured.
    async fn password(&self) -> Result<Option<String>> {
        let (Some(arn), Some(secrets)) = (&self.config.password_secret_arn, &self.secrets) else {
            return Ok(None);
        };
        Ok(Some(
            secrets
                .secret(arn, "password", "the password secret")
                .await?,
        ))
    }
}

/// Refuses what the deployment does not allow a config to ask: replacing a table lakemirror
/// did not create, or a target outside the allowed schemas.
fn allowed(table: &SyncedTable, allow_replace: bool, schemas: Option<&[String]>) -> Result<()> {
    if table.conflict_on_existing == Conflict::Replace && !allow_replace {
        return Err(Error::Config(format!(
            "the table {} asks sync.conflict_on_existing = \"replace\", which this deployment does not allow (LAKEBASE_ALLOW_REPLACE, SAM LakebaseAllowReplace); nothing was synced",
            table.target
        )));
    }
    if let Some(schemas) = schemas
        && !schemas.contains(&table.target.schema)
    {
        return Err(Error::Config(format!(
            "the target {} is outside the schemas this deployment allows ({}; LAKEBASE_ALLOWED_SCHEMAS, SAM LakebaseAllowedSchemas); nothing was synced",
            table.target,
            schemas.join(", ")
        )));
    }
    Ok(())
}

/// The tables whose interval has passed since their last sync (never synced: due).
async fn due<'a>(
    client: &tokio_postgres::Client,
    tables: &'a [SyncedTable],
) -> Result<Vec<&'a SyncedTable>> {
    let has_state: bool = client
        .query_one(
            "SELECT to_regclass('lakemirror.sync_state') IS NOT NULL",
            &[],
        )
        .await
        .map_err(|e| pg_error("looking for lakemirror.sync_state", e))?
        .get(0);
    let ages: Vec<(String, f64)> = if has_state {
        client
            .query(
                &format!(
                    "SELECT target, extract(epoch FROM now() - synced_at)::float8 FROM {STATE_TABLE}"
                ),
                &[],
            )
            .await
            .map_err(|e| pg_error("reading lakemirror.sync_state", e))?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect()
    } else {
        Vec::new()
    };
    Ok(tables
        .iter()
        .filter(|t| {
            let age = ages
                .iter()
                .find(|(target, _)| *target == t.target.sql())
                .map(|(_, seconds)| Duration::from_secs_f64(seconds.max(0.0)));
            is_due(age, t.interval)
        })
        .collect())
}

/// Due when never synced, or when the interval has passed (within [`SCHEDULE_SLACK`]).
fn is_due(since_last_sync: Option<Duration>, interval: Duration) -> bool {
    since_last_sync.is_none_or(|age| age + SCHEDULE_SLACK >= interval)
}

/// The metrics of a finished reverse sync: rows changed and duration, per target.
fn reverse_sync_metrics(report: &LakebaseReport) -> MetricRecord {
    MetricRecord::new("Target", report.target.clone())
        .with(
            Metric::ReverseSyncRows,
            report.rows_inserted + report.rows_updated + report.rows_deleted,
        )
        .with(Metric::ReverseSyncDuration, report.elapsed_ms)
}

/// The configured tables that `announced` names (commit events), each with the messages that
/// announced it; none when nothing was announced (a schedule tick). A Unity Catalog source is
/// matched by its storage location as the catalog has it now.
async fn announced_tables<'t>(
    tables: &'t [SyncedTable],
    announced: &[AnnouncedTable],
    unity: Option<&UnityCatalog>,
) -> Result<Vec<(&'t SyncedTable, Vec<String>)>> {
    let mut chosen = Vec::new();
    if announced.is_empty() {
        return Ok(chosen);
    }
    for table in tables {
        let location = match (table.source_path(), unity) {
            (Some(path), _) => Some(path.to_string()),
            (None, Some(uc)) => uc
                .get_table(&table.source.to_string())
                .await?
                .and_then(|t| t.storage_location),
            (None, None) => None,
        };
        let Some(location) = location.map(|l| canonical_uri(&l)) else {
            continue;
        };
        if let Some(commits) = announced.iter().find(|t| t.table_uri == location) {
            chosen.push((table, commits.message_ids.clone()));
        }
    }
    Ok(chosen)
}

impl LakebaseOutcome {
    /// What one table's sync came to: its report (logged, its metrics emitted), or its
    /// failure, recorded with the messages that announced it.
    fn finished(
        &mut self,
        table: &SyncedTable,
        message_ids: &[String],
        finished: Result<LakebaseReport>,
    ) {
        match finished {
            Ok(report) => {
                tracing::info!(target = %report.target, delta_version = report.delta_version, mode = report.mode, inserted = report.rows_inserted, updated = report.rows_updated, deleted = report.rows_deleted, "synced");
                reverse_sync_metrics(&report).emit();
                self.synced.push(report);
            }
            Err(e) => {
                tracing::error!(target = %table.target, error = %e, "sync failed");
                MetricRecord::new("Target", table.target.to_string())
                    .with(Metric::ReverseSyncFailed, 1)
                    .emit();
                let target = table.target.to_string();
                self.failures.record("target", &target, message_ids, e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_due_when_its_interval_has_passed() {
        let quarter = Duration::from_secs(900);
        assert!(is_due(None, quarter));
        assert!(is_due(Some(Duration::from_secs(900)), quarter));
        assert!(
            is_due(Some(Duration::from_secs(850)), quarter),
            "a tick a little early still counts"
        );
        assert!(!is_due(Some(Duration::from_secs(600)), quarter));
    }

    #[test]
    fn a_config_may_ask_only_what_the_deployment_allows() {
        let table = |extra: &str| {
            parse_config(
                &format!("[[tables]]\nsource.path = \"s3://lake/t\"\n{extra}"),
                "test",
            )
            .unwrap()
            .remove(0)
        };
        let replace = table("sync.conflict_on_existing = \"replace\"");
        let err = allowed(&replace, false, None).unwrap_err().to_string();
        assert!(err.contains("LAKEBASE_ALLOW_REPLACE"), "{err}");
        assert!(allowed(&replace, true, None).is_ok());
        let elsewhere = table("target.table_name = \"admin.users\"");
        let schemas = allowed_schemas(Some("public, app")).unwrap();
        let err = allowed(&elsewhere, false, Some(&schemas))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("admin") && err.contains("LAKEBASE_ALLOWED_SCHEMAS"),
            "{err}"
        );
        assert!(
            allowed(
                &table("target.table_name = \"app.t\""),
                false,
                Some(&schemas)
            )
            .is_ok()
        );
        assert!(
            allowed(&table(""), false, Some(&schemas)).is_ok(),
            "public by default"
        );
    }

    #[test]
    fn s3a_and_trailing_slashes_match_the_event_spelling() {
        assert_eq!(canonical_uri("s3a://lake/t/"), "s3://lake/t");
        assert_eq!(canonical_uri("s3://lake/t"), "s3://lake/t");
    }
}
