//! `lakemirror invoke <function>`: a Lambda function's handler run in this process on an
//! event file, the very code the deployed function runs, without Docker or `sam local`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::Subcommand;
use lakemirror_aws::{DeadLetterQueue, SecretsManager};
use lakemirror_events::DeadLetters;
use lakemirror_events::trigger::LambdaInput;
use lakemirror_lakebase::function::{
    ConfigSource, LakebaseSyncConfig, LakebaseSyncFunction, allowed_schemas,
};
use lakemirror_lakebase::postgres::LIBPQ_VARIABLES;
use lakemirror_mirror::function::{DEFAULT_MAX_RECEIVE_COUNT, GlueSyncConfig, GlueSyncFunction};
use lakemirror_plan::target::allowed_names;
use lakemirror_storage::SecretSource;
use lakemirror_unity::commits::commit_catalog;
use lakemirror_unity::function::UnityRegisterFunction;
use lambda_runtime::LambdaEvent;

use crate::sync::SyncArgs;
use crate::unity::missing_uc_url;
use crate::{Context, Error, Result, environment};

#[derive(Subcommand)]
pub(crate) enum Function {
    /// The glue-sync function: S3, SQS or EventBridge events announcing Delta commits.
    /// Prints the function's response as the last line.
    GlueSync {
        /// A JSON event, e.g. functions/glue-sync/events/sqs-s3-notification.json.
        #[arg(long)]
        event: std::path::PathBuf,
        /// Glue database that receives the mirrored tables.
        #[arg(long, env = "GLUE_DATABASE")]
        glue_database: String,
        /// Only mirror tables under these roots (s3://bucket/prefix, comma-separated).
        #[arg(long, env = "TABLE_PREFIXES", value_delimiter = ',')]
        table_prefixes: Vec<String>,
        /// SQS queue URL where events that can never succeed are parked [default: none:
        /// they are reported as failed].
        #[arg(long, env = "DEAD_LETTER_QUEUE_URL")]
        dead_letter_queue_url: Option<String>,
        /// The sync queue's maxReceiveCount: a staged commit its catalog has not decided is
        /// redelivered until its last delivery, then let go instead of parked.
        #[arg(long, env = "MAX_RECEIVE_COUNT", default_value_t = DEFAULT_MAX_RECEIVE_COUNT)]
        max_receive_count: u32,
        #[command(flatten)]
        sync: SyncArgs,
        /// Secrets Manager secret holding the Unity Catalog token (plain text, or JSON with a
        /// "token" field), for catalog-managed tables (with --uc-url).
        #[arg(long, env = "UC_TOKEN_SECRET_ARN")]
        uc_token_secret_arn: Option<String>,
        /// Run as a function invocation with this many seconds (the function's Timeout):
        /// a sync still running near the end is cut off and its messages retried
        /// [default: no deadline].
        #[arg(long)]
        timeout_seconds: Option<u64>,
    },
    /// The lakebase-sync function: a schedule tick syncs the tables that are due (their
    /// sync.interval passed since lakemirror.sync_state last recorded them); S3, SQS or
    /// EventBridge commit events sync the tables whose source.path they announce. Prints the
    /// function's response as the last line.
    LakebaseSync {
        /// A JSON event, e.g. functions/lakebase-sync/events/schedule.json.
        #[arg(long)]
        event: std::path::PathBuf,
        /// The synced tables as TOML text ([[tables]] entries, as for lakebase-sync
        /// --config).
        #[arg(
            long,
            env = "LAKEBASE_CONFIG",
            required_unless_present = "lakebase_config_uri",
            conflicts_with = "lakebase_config_uri"
        )]
        lakebase_config: Option<String>,
        /// The s3:// URI of the TOML file listing the synced tables; it may not lie under
        /// --table-prefixes, where whoever writes Delta tables may write it.
        #[arg(long, env = "LAKEBASE_CONFIG_URI")]
        lakebase_config_uri: Option<String>,
        /// Where Delta tables live (s3://bucket/prefix, comma-separated).
        #[arg(long, env = "TABLE_PREFIXES", value_delimiter = ',')]
        table_prefixes: Vec<String>,
        /// Let a table ask sync.conflict_on_existing = "replace" (drop and replace a table
        /// lakemirror did not create) [default: refused].
        #[arg(long, env = "LAKEBASE_ALLOW_REPLACE")]
        lakebase_allow_replace: bool,
        /// The PostgreSQL schemas targets may lie in, comma-separated [default: any].
        #[arg(long, env = "LAKEBASE_ALLOWED_SCHEMAS")]
        lakebase_allowed_schemas: Option<String>,
        /// The CA of the server's certificate as PEM text (verify-full, the function's
        /// default sslmode) [default: the system's roots].
        #[arg(long, env = "POSTGRES_CA_PEM", hide_env_values = true)]
        postgres_ca_pem: Option<String>,
        /// Secrets Manager secret holding the CA as PEM (plain, or JSON with a "ca" field).
        #[arg(long, env = "POSTGRES_CA_SECRET_ARN")]
        postgres_ca_secret_arn: Option<String>,
        /// Allow an sslmode that may fall back to plaintext (disable, allow, prefer)
        /// [default: refused].
        #[arg(long, env = "POSTGRES_ALLOW_INSECURE")]
        postgres_allow_insecure: bool,
        /// postgres://user@host:port/database?sslmode=verify-full [default: the libpq
        /// environment].
        #[arg(long, env = "POSTGRES_URL", hide_env_values = true)]
        postgres_url: Option<String>,
        /// Secrets Manager secret holding the password (plain text, or JSON with a
        /// "password" field).
        #[arg(long, env = "POSTGRES_PASSWORD_SECRET_ARN")]
        postgres_password_secret_arn: Option<String>,
        /// Secrets Manager secret holding the Unity Catalog token (plain text, or JSON with a
        /// "token" field).
        #[arg(long, env = "UC_TOKEN_SECRET_ARN")]
        uc_token_secret_arn: Option<String>,
        /// Run as a function invocation with this many seconds (the function's Timeout): no
        /// table starts near the end, one still running is cut off (rolled back) and retried
        /// [default: no deadline].
        #[arg(long)]
        timeout_seconds: Option<u64>,
    },
    /// The unity-register function: S3, SQS or EventBridge events announcing Delta commits;
    /// each announced table is registered in Unity Catalog. Prints the function's response
    /// as the last line.
    UnityRegister {
        /// A JSON event, e.g. functions/unity-register/events/eventbridge.json.
        #[arg(long)]
        event: std::path::PathBuf,
        /// Secrets Manager secret holding the Unity Catalog token (plain text, or JSON with a
        /// "token" field).
        #[arg(long, env = "UC_TOKEN_SECRET_ARN")]
        uc_token_secret_arn: Option<String>,
        /// Catalog of tables that do not name one (lakemirror.unity.catalog).
        #[arg(long, env = "UC_CATALOG")]
        uc_catalog: Option<String>,
        /// Schema of tables that do not name one (lakemirror.unity.schema).
        #[arg(long, env = "UC_SCHEMA")]
        uc_schema: Option<String>,
        /// Only register tables under these roots (s3://bucket/prefix, comma-separated).
        #[arg(long, env = "TABLE_PREFIXES", value_delimiter = ',')]
        table_prefixes: Vec<String>,
        /// The catalogs a Delta table's own lakemirror.unity.catalog / .schema / .table
        /// properties may choose, as a regex over the whole name [default: none: those
        /// properties are ignored, with a warning].
        #[arg(long, env = "ALLOWED_UC_CATALOGS")]
        allowed_uc_catalogs: Option<String>,
        /// Run as a function invocation with this many seconds (the function's Timeout): no
        /// registration starts near the end, one still running is cut off and retried
        /// [default: no deadline].
        #[arg(long)]
        timeout_seconds: Option<u64>,
    },
}

/// Runs the handler on the event and answers its response as JSON.
pub(crate) async fn run(context: &Context, function: Function) -> Result<String> {
    match function {
        Function::GlueSync {
            event,
            glue_database,
            table_prefixes,
            dead_letter_queue_url,
            max_receive_count,
            sync,
            uc_token_secret_arn,
            timeout_seconds,
        } => {
            let commit_catalog = match uc_token_secret_arn {
                Some(arn) => {
                    let secrets = secrets(context);
                    let setting = |name: &str| match name {
                        "UC_URL" => context.unity.uc_url.clone(),
                        "UC_TOKEN_SECRET_ARN" => Some(arn.clone()),
                        _ => None,
                    };
                    commit_catalog(&setting, Some(secrets.as_ref())).await?
                }
                None => context.commit_catalog.clone(),
            };
            let dead_letters = dead_letter_queue_url.clone().map(|url| {
                Arc::new(DeadLetterQueue::new(&context.aws, url)) as Arc<dyn DeadLetters>
            });
            let function = GlueSyncFunction {
                config: GlueSyncConfig {
                    database: glue_database,
                    table_prefixes,
                    dead_letter_queue_url,
                    settings: sync.settings()?,
                    max_receive_count,
                },
                lake: context.lake().with_commit_catalog(commit_catalog),
                dead_letters,
            };
            let event = lambda_event(&event, timeout_seconds)?;
            let response = glue_sync::handle(&function, event)
                .await
                .map_err(Error::Function)?;
            Ok(serde_json::to_string(&response)?)
        }
        Function::LakebaseSync {
            event,
            lakebase_config,
            lakebase_config_uri,
            table_prefixes,
            lakebase_allow_replace,
            lakebase_allowed_schemas,
            postgres_ca_pem,
            postgres_ca_secret_arn,
            postgres_allow_insecure,
            postgres_url,
            postgres_password_secret_arn,
            uc_token_secret_arn,
            timeout_seconds,
        } => {
            let config = LakebaseSyncConfig {
                config: match (lakebase_config, lakebase_config_uri) {
                    (Some(text), _) => ConfigSource::Text(text),
                    (None, uri) => ConfigSource::Object(uri.unwrap_or_default()),
                },
                postgres_url,
                password_secret_arn: postgres_password_secret_arn,
                unity: context
                    .unity
                    .config(uc_token_secret_arn, None, None, Vec::new(), None),
                table_prefixes,
                allow_replace: lakebase_allow_replace,
                allowed_schemas: allowed_schemas(lakebase_allowed_schemas.as_deref()),
                ca_pem: postgres_ca_pem,
                ca_secret_arn: postgres_ca_secret_arn,
                allow_insecure: postgres_allow_insecure,
                libpq: LIBPQ_VARIABLES
                    .iter()
                    .filter_map(|v| environment(v.name).map(|value| (v.name.to_string(), value)))
                    .collect(),
            };
            let secrets = LakebaseSyncFunction::needs_secrets(&config).then(|| secrets(context));
            let function = LakebaseSyncFunction::new(config, context.stores.clone(), secrets);
            let response = lakebase_sync::handle(&function, lambda_event(&event, timeout_seconds)?)
                .await
                .map_err(Error::Function)?;
            Ok(serde_json::to_string(&response)?)
        }
        Function::UnityRegister {
            event,
            uc_token_secret_arn,
            uc_catalog,
            uc_schema,
            table_prefixes,
            allowed_uc_catalogs,
            timeout_seconds,
        } => {
            let allowed = allowed_names(allowed_uc_catalogs.as_deref(), "--allowed-uc-catalogs")?;
            let config = context
                .unity
                .config(
                    uc_token_secret_arn,
                    uc_catalog,
                    uc_schema,
                    table_prefixes,
                    allowed,
                )
                .ok_or_else(missing_uc_url)?;
            let secrets = config.token_secret_arn.is_some().then(|| secrets(context));
            let function = UnityRegisterFunction::new(config, context.stores.clone(), secrets);
            let response =
                unity_register::handle(&function, lambda_event(&event, timeout_seconds)?)
                    .await
                    .map_err(Error::Function)?;
            Ok(serde_json::to_string(&response)?)
        }
    }
}

fn secrets(context: &Context) -> Arc<dyn SecretSource> {
    Arc::new(SecretsManager::new(&context.aws))
}

/// A Lambda event from a JSON file, with the deadline of an invocation of `timeout_seconds`
/// (none: a deadline already past, which the handlers read as no deadline).
fn lambda_event(
    event: &std::path::Path,
    timeout_seconds: Option<u64>,
) -> Result<LambdaEvent<LambdaInput>> {
    let text = std::fs::read_to_string(event)
        .map_err(|e| Error::Usage(format!("cannot read event file {}: {e}", event.display())))?;
    let payload = LambdaInput::from_json(&text).map_err(|e| {
        Error::Usage(format!(
            "event file {} is not an event lakemirror reads (an SQS batch, an EventBridge event, an S3 notification or a lakemirror control event such as {{\"lakemirror\": \"verify\"}}): {e}",
            event.display()
        ))
    })?;
    let mut invocation = lambda_runtime::Context::default();
    if let Some(seconds) = timeout_seconds {
        let deadline = SystemTime::now() + Duration::from_secs(seconds);
        invocation.deadline = deadline
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    }
    Ok(LambdaEvent::new(payload, invocation))
}
