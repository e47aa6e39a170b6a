//! The `lakemirror` command line: the same code as the Lambda functions, for back-fills,
//! checks and local runs.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use lakemirror::glue::GlueCatalog;
use lakemirror::handler::{GlueSyncConfig, GlueSyncFunction};
use lakemirror::storage::IoCounters;
use lakemirror::sync::{GlueSyncRequest, OnMissingSource, glue_sync};
use lakemirror::target::NameFrom;

#[derive(Parser)]
#[command(
    name = "lakemirror",
    version,
    about = "Keep a Delta Lake table readable everywhere: as an Iceberg table in AWS Glue over the same Parquet files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Bring the Iceberg table in AWS Glue to the Delta table's newest version, one Iceberg
    /// snapshot per Delta version. Safe to re-run and to run concurrently.
    ///
    /// AWS settings come from the standard chain and environment: AWS_REGION,
    /// AWS_ENDPOINT_URL (e.g. a local moto), AWS_ALLOW_HTTP=true for plain http.
    /// The last line on stdout is a JSON report; progress goes to stderr.
    ///
    /// With --discover s3://bucket/prefix instead of --table-uri: find every Delta table
    /// under the prefix (folders holding _delta_log/; the walk never enters a table, nor
    /// hidden _… or .… folders, nor key=value partition folders) and mirror each, with a
    /// progress bar on a terminal (plain lines otherwise), a summary table at the end, and
    /// exit status 1 when any table failed. --dry-run lists them and their Glue names.
    GlueSync {
        /// The Delta table root (the folder holding _delta_log): s3://bucket/path, file:///path or a local path.
        #[arg(long, env = "TABLE_URI", required_unless_present = "discover")]
        table_uri: Option<String>,
        /// Mirror every Delta table under this prefix (s3://bucket/prefix, file:///path or a
        /// local path) instead of one --table-uri.
        #[arg(long, value_name = "PREFIX", conflicts_with_all = ["table_uri", "glue_table", "metadata_uri", "to_version"])]
        discover: Option<String>,
        /// With --discover: how many tables sync (and folders are listed) at once.
        #[arg(long, default_value_t = 4, requires = "discover", value_parser = clap::value_parser!(u16).range(1..=64))]
        concurrency: u16,
        /// With --discover: list the tables found and the Glue table each would get; mirror
        /// nothing.
        #[arg(long, requires = "discover")]
        dry_run: bool,
        /// Glue database that receives the Iceberg table (must exist). Without --glue-table,
        /// the Delta table property lakemirror.glue.database overrides it, as in the function.
        #[arg(long, visible_alias = "database", env = "GLUE_DATABASE")]
        glue_database: String,
        /// Glue table name, used as given [default: the Delta table property
        /// lakemirror.glue.table, else the table folder's name, lower-cased, other characters as _].
        #[arg(long, visible_alias = "table", env = "GLUE_TABLE")]
        glue_table: Option<String>,
        /// Where Iceberg metadata files go [default: <table-uri>/_lakemirror/iceberg, which Delta VACUUM leaves alone].
        #[arg(long, env = "METADATA_URI")]
        metadata_uri: Option<String>,
        /// Sync up to this Delta version instead of the newest.
        #[arg(long)]
        to_version: Option<i64>,
        /// Iceberg format version of a newly created mirror: 2 (deletion vectors become
        /// position-delete files; Athena reads it) or 3 (Puffin deletion vectors). The Delta
        /// table property lakemirror.iceberg.format-version overrides it; an existing mirror
        /// keeps its version.
        #[arg(long, env = "ICEBERG_FORMAT_VERSION", default_value = "2", value_parser = ["2", "3"])]
        iceberg_format_version: String,
        /// When the Delta table is gone (no _delta_log with a commit or checkpoint) but its
        /// Glue table is there: keep (fail with "source table missing" and leave the Glue
        /// table as it is) or drop (delete the Glue table; the Iceberg metadata files stay).
        #[arg(long, env = "ON_MISSING_SOURCE", default_value = "keep", value_parser = ["keep", "drop"])]
        on_missing_source: String,
        /// The Glue databases a Delta table's own lakemirror.glue.database /
        /// lakemirror.glue.table properties may choose, as a regex over the whole name
        /// [default: none: those properties are ignored, with a warning].
        #[arg(long, env = "ALLOWED_GLUE_DATABASES")]
        allowed_glue_databases: Option<String>,
        /// The default Glue table name: folder (the folder's name) or path (the whole path
        /// below the bucket, unique per location).
        #[arg(long, env = "TABLE_NAME_FROM_PATH", default_value = "folder", value_parser = ["folder", "path"])]
        table_name_from_path: String,
        /// A new mirror of a table whose checkpoint holds more actions is bootstrapped in
        /// groups of about this many files, one group after another, from spill files in the
        /// temp folder (TMPDIR): memory stays near 2 KB per file of a group, not of the table.
        #[arg(long, env = "BOOTSTRAP_GROUP_FILES", default_value_t = lakemirror::fanout::BOOTSTRAP_GROUP_FILES, value_parser = clap::value_parser!(u64).range(1..))]
        bootstrap_group_files: u64,
    },
    /// Prove that a mirror equals its Delta table at a version, from metadata alone (the
    /// Delta log, the Iceberg metadata, manifest list and manifests; no data rows): the
    /// snapshot of that version holds exactly the active files, with their sizes, record
    /// counts and partition values; each file's deleted rows equal its delete files' rows;
    /// the snapshot mirrors that very commit of that very table under the mapped schema; and
    /// every snapshot's delta.version is newer than its parent's.
    ///
    /// The last line on stdout is a JSON report listing each difference. Exit status: 0 equal,
    /// 1 a difference (drift), 2 could not verify (no mirror, no such version, a read failed).
    Verify {
        /// The Delta table root (the folder holding _delta_log): s3://bucket/path, file:///path or a local path.
        #[arg(long, env = "TABLE_URI")]
        table_uri: String,
        /// Glue database of the mirror.
        #[arg(long, visible_alias = "database", env = "GLUE_DATABASE")]
        glue_database: String,
        /// Glue table of the mirror [default: the table folder's name, lower-cased, other
        /// characters as _, as glue-sync names it without lakemirror.glue.* properties].
        #[arg(long, visible_alias = "table", env = "GLUE_TABLE")]
        glue_table: Option<String>,
        /// Where the mirror's Iceberg metadata lives [default: <table-uri>/_lakemirror/iceberg].
        #[arg(long, env = "METADATA_URI")]
        metadata_uri: Option<String>,
        /// The Delta version to verify [default: the one the mirror's current snapshot
        /// mirrors]. Older versions verify while their snapshots are kept.
        #[arg(long)]
        version: Option<i64>,
        /// How many differences the report lists (all are counted).
        #[arg(long, default_value_t = lakemirror::verify::DEFAULT_MAX_DIFFERENCES)]
        max_differences: usize,
    },
    /// Which mirrors are behind or failing: one line per mirror in the Glue database (a
    /// Glue Iceberg table whose metadata names its Delta table): the Delta version it holds
    /// and when that was committed, the newest Delta version (probed by name, commit files
    /// only, never a listing), the lag in versions and time (how long the oldest commit the
    /// mirror lacks has waited), and the newest error the dead-letter queue holds for it.
    ///
    /// States: caught-up, behind, source-missing (the Delta log is gone), unreadable.
    /// Reading the dead-letter queue is a peek: the messages stay in it, visible to others.
    Status {
        /// Glue database of the mirrors.
        #[arg(long, visible_alias = "database", env = "GLUE_DATABASE")]
        glue_database: String,
        /// Only mirrors of Delta tables under these roots (s3://bucket/prefix, comma-separated).
        #[arg(long, env = "TABLE_PREFIXES", value_delimiter = ',')]
        table_prefixes: Vec<String>,
        /// The glue-sync dead-letter queue's URL, for each table's last error.
        #[arg(long, env = "DEAD_LETTER_QUEUE_URL")]
        dead_letter_queue_url: Option<String>,
        /// Print one JSON document ({"tables": [...]}) instead of the text table.
        #[arg(long)]
        json: bool,
    },
    /// Copy Delta tables into PostgreSQL (Databricks Lakebase or any PostgreSQL 14+) for
    /// low-latency reads: all tables of a TOML config file (--config), or one table given by
    /// flags. A full refresh loads the newest Delta version with binary COPY into a new table
    /// and swaps it in within one transaction (grants kept). An incremental sync applies the
    /// commits since the synced version by primary key (deletes, inserts, updates, added
    /// columns) in one transaction; it refreshes fully the first time and when the commits
    /// are gone from the log. lakemirror.sync_state records the version in the same
    /// transaction. One JSON report line per table on stdout.
    ///
    /// Connection: --postgres-url, else the libpq environment (PGHOST, PGPORT, PGUSER,
    /// PGPASSWORD, PGDATABASE, PGSSLMODE, PGSSLROOTCERT). sslmode require encrypts,
    /// verify-full also checks the server's certificate and name. A Lakebase OAuth token works
    /// as the password. The password never appears in output.
    LakebaseSync {
        /// A TOML file with [[tables]] entries (keys source.path, source.catalog/schema/table,
        /// sync.mode, sync.primary_key, sync.conflict_on_existing, sync.interval,
        /// target.table_name). Cannot be combined with the one-table flags.
        #[arg(long, conflicts_with_all = ["source_path", "source_table"])]
        config: Option<std::path::PathBuf>,
        /// source.path: the Delta table URI (s3://…, file://… or a local path).
        #[arg(long)]
        source_path: Option<String>,
        /// source.catalog.schema.table: a Unity Catalog table, resolved to its storage
        /// location (and vended read credentials) through --uc-url.
        #[arg(long)]
        source_table: Option<String>,
        /// sync.mode: full_refresh or incremental (needs --primary-key) [default: full_refresh].
        #[arg(long)]
        mode: Option<String>,
        /// sync.primary_key: key column(s), comma-separated; becomes the PRIMARY KEY.
        #[arg(long)]
        primary_key: Option<String>,
        /// sync.conflict_on_existing: error or replace, when the target exists and lakemirror
        /// did not create it [default: error].
        #[arg(long)]
        conflict_on_existing: Option<String>,
        /// target.table_name: table or schema.table, parts optionally "double-quoted"
        /// [default: the source folder's name in public].
        #[arg(long)]
        target_table: Option<String>,
        /// sync.interval: how often a scheduled deployment syncs, e.g. "15 minutes".
        #[arg(long)]
        interval: Option<String>,
        /// postgres://user[:password]@host:port/database?sslmode=verify-full
        #[arg(long, env = "POSTGRES_URL", hide_env_values = true)]
        postgres_url: Option<String>,
        /// Sync up to this Delta version instead of the newest (every table).
        #[arg(long)]
        to_version: Option<i64>,
        /// Name rows by their key values in errors (a duplicate key, a value PostgreSQL
        /// cannot store) [default: the key columns and a hash of the values: keys are user
        /// data, and errors end in logs].
        #[arg(long)]
        show_values: bool,
        #[command(flatten)]
        unity: UnityArgs,
    },
    /// Register a Delta table in Unity Catalog as an EXTERNAL DELTA table (columns from the
    /// Delta schema, partition columns, the Delta table properties), or bring its entry in
    /// line after a schema change: the OSS API cannot update columns, so the entry is deleted
    /// and re-created with its properties and comment (the data is never touched). Safe to
    /// re-run and to run concurrently. The Delta table properties lakemirror.unity.catalog,
    /// .schema and .table choose the name; lakemirror.unity.enabled=false opts out.
    /// The last line on stdout is a JSON report.
    UnityRegister {
        /// The Delta table root (the folder holding _delta_log): s3://bucket/path, file:///path or a local path.
        #[arg(long, env = "TABLE_URI")]
        table_uri: String,
        /// Unity Catalog catalog (must exist) [default: the Delta table property
        /// lakemirror.unity.catalog].
        #[arg(long, env = "UC_CATALOG")]
        catalog: Option<String>,
        /// Unity Catalog schema (must exist) [default: the Delta table property
        /// lakemirror.unity.schema].
        #[arg(long, env = "UC_SCHEMA")]
        schema: Option<String>,
        /// Table name, used as given (the lakemirror.unity.* properties are then ignored)
        /// [default: lakemirror.unity.table, else the table folder's name, lower-cased].
        #[arg(long)]
        table: Option<String>,
        /// The catalogs a Delta table's own lakemirror.unity.catalog / .schema / .table
        /// properties may choose, as a regex over the whole name [default: none: those
        /// properties are ignored, with a warning].
        #[arg(long, env = "ALLOWED_UC_CATALOGS")]
        allowed_uc_catalogs: Option<String>,
        #[command(flatten)]
        unity: UnityArgs,
    },
    /// Bootstrap one very large mirror in parts that run in parallel (processes here, a
    /// Step Functions Distributed Map in AWS): `plan` fixes the Delta version, the Glue
    /// table and the bucket layout and prints the plan as JSON; each `part` (any order, on
    /// any machine, again after a failure) writes the manifests of its buckets; `finish`
    /// commits one snapshot of all of them to Glue, as a new history (like a rebuild).
    ///
    ///   lakemirror fan-out plan --table-uri s3://lake/t --glue-database db --parts 8 > plan.json
    ///   for p in $(seq 0 7); do lakemirror fan-out part --plan plan.json --part $p & done; wait
    ///   lakemirror fan-out finish --plan plan.json
    FanOut {
        #[command(subcommand)]
        step: FanOutStep,
    },
    /// Run a Lambda function's handler in this process on an event file: the same code
    /// the deployed function runs, without Docker or `sam local`.
    Invoke {
        #[command(subcommand)]
        function: Function,
    },
}

#[derive(Subcommand)]
enum FanOutStep {
    /// Fix what the parts share and print it as JSON (the input of `part` and `finish`).
    /// Reads the whole Delta log once, holding no file.
    Plan {
        /// The Delta table root (the folder holding _delta_log): s3://bucket/path, file:///path or a local path.
        #[arg(long, env = "TABLE_URI")]
        table_uri: String,
        /// How many parts (at most one per bucket of 1,000 files; fewer are used when the
        /// table has fewer buckets).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10_000))]
        parts: u32,
        /// Glue database that receives the Iceberg table (must exist), as in glue-sync.
        #[arg(long, visible_alias = "database", env = "GLUE_DATABASE")]
        glue_database: String,
        /// Glue table name, as in glue-sync.
        #[arg(long, visible_alias = "table", env = "GLUE_TABLE")]
        glue_table: Option<String>,
        /// Where Iceberg metadata files go, as in glue-sync.
        #[arg(long, env = "METADATA_URI")]
        metadata_uri: Option<String>,
        /// Bootstrap this Delta version instead of the newest.
        #[arg(long)]
        to_version: Option<i64>,
        /// Iceberg format version of the new mirror, as in glue-sync.
        #[arg(long, env = "ICEBERG_FORMAT_VERSION", default_value = "2", value_parser = ["2", "3"])]
        iceberg_format_version: String,
        /// As in glue-sync.
        #[arg(long, env = "ALLOWED_GLUE_DATABASES")]
        allowed_glue_databases: Option<String>,
        /// As in glue-sync.
        #[arg(long, env = "TABLE_NAME_FROM_PATH", default_value = "folder", value_parser = ["folder", "path"])]
        table_name_from_path: String,
    },
    /// Write the manifests of one part's buckets. Prints what it wrote as JSON.
    Part {
        /// The JSON `fan-out plan` printed.
        #[arg(long)]
        plan: std::path::PathBuf,
        /// Which part, from 0 to parts - 1.
        #[arg(long)]
        part: u32,
    },
    /// Commit one snapshot of every part's manifests to Glue (fails, naming the part, when a
    /// part has not finished). Prints the sync report as JSON.
    Finish {
        /// The JSON `fan-out plan` printed.
        #[arg(long)]
        plan: std::path::PathBuf,
    },
}

#[derive(Subcommand)]
enum Function {
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
        /// Iceberg format version of newly created mirrors (2 or 3), as for glue-sync.
        #[arg(long, env = "ICEBERG_FORMAT_VERSION", default_value = "2", value_parser = ["2", "3"])]
        iceberg_format_version: String,
        /// keep or drop the Glue table of a Delta table that is gone, as for glue-sync.
        #[arg(long, env = "ON_MISSING_SOURCE", default_value = "keep", value_parser = ["keep", "drop"])]
        on_missing_source: String,
        /// The Glue databases a Delta table's own lakemirror.glue.database /
        /// lakemirror.glue.table properties may choose, as a regex over the whole name
        /// [default: none: those properties are ignored, with a warning].
        #[arg(long, env = "ALLOWED_GLUE_DATABASES")]
        allowed_glue_databases: Option<String>,
        /// The default Glue table name: folder (the folder's name) or path (the whole path
        /// below the bucket, unique per location).
        #[arg(long, env = "TABLE_NAME_FROM_PATH", default_value = "folder", value_parser = ["folder", "path"])]
        table_name_from_path: String,
        /// As in glue-sync.
        #[arg(long, env = "BOOTSTRAP_GROUP_FILES", default_value_t = lakemirror::fanout::BOOTSTRAP_GROUP_FILES, value_parser = clap::value_parser!(u64).range(1..))]
        bootstrap_group_files: u64,
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
        #[command(flatten)]
        unity: UnityArgs,
        /// Secrets Manager secret holding the Unity Catalog token (plain text, or JSON with a
        /// "token" field).
        #[arg(long, env = "UC_TOKEN_SECRET_ARN")]
        uc_token_secret_arn: Option<String>,
    },
    /// The unity-register function: S3, SQS or EventBridge events announcing Delta commits;
    /// each announced table is registered in Unity Catalog. Prints the function's response
    /// as the last line.
    UnityRegister {
        /// A JSON event, e.g. functions/unity-register/events/eventbridge.json.
        #[arg(long)]
        event: std::path::PathBuf,
        #[command(flatten)]
        unity: UnityArgs,
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
    },
}

/// Where Unity Catalog is.
#[derive(Args)]
struct UnityArgs {
    /// Unity Catalog server, without /api/2.1/unity-catalog: https://host[:port].
    #[arg(long, env = "UC_URL")]
    uc_url: Option<String>,
    /// Bearer token for Unity Catalog (a personal access token or OAuth token).
    #[arg(long, env = "UC_TOKEN", hide_env_values = true)]
    uc_token: Option<String>,
}

impl UnityArgs {
    /// The client, when --uc-url is given.
    fn client(&self) -> lakemirror::Result<Option<lakemirror::unity::UnityCatalog>> {
        self.uc_url
            .as_deref()
            .map(|url| lakemirror::unity::UnityCatalog::new(url, self.uc_token.clone()))
            .transpose()
    }

    fn config(
        self,
        token_secret_arn: Option<String>,
        catalog: Option<String>,
        schema: Option<String>,
        table_prefixes: Vec<String>,
        allowed_catalogs: Option<regex::Regex>,
    ) -> Option<lakemirror::unity::function::UnityConfig> {
        Some(lakemirror::unity::function::UnityConfig {
            url: self.uc_url?,
            token: self.uc_token,
            token_secret_arn,
            catalog,
            schema,
            table_prefixes,
            allowed_catalogs,
        })
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LAKEMIRROR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("lakemirror=info")),
        )
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    // One AWS configuration for every client and every S3 store of this run (profiles,
    // SSO, credential_process, web identity, container and instance credentials).
    lakemirror::aws::config().await;
    let outcome = match cli.command {
        Command::Verify {
            table_uri,
            glue_database,
            glue_table,
            metadata_uri,
            version,
            max_differences,
        } => {
            let request = lakemirror::verify::VerifyRequest {
                table_uri,
                database: glue_database,
                table: glue_table,
                metadata_uri,
                version,
                max_differences,
            };
            return run_verify(&request).await;
        }
        Command::FanOut { step } => run_fan_out(step).await,
        Command::Status {
            glue_database,
            table_prefixes,
            dead_letter_queue_url,
            json,
        } => {
            return run_status(&glue_database, &table_prefixes, dead_letter_queue_url, json).await;
        }
        Command::GlueSync {
            table_uri,
            discover,
            concurrency,
            dry_run,
            glue_database,
            glue_table,
            metadata_uri,
            to_version,
            iceberg_format_version,
            on_missing_source,
            allowed_glue_databases,
            table_name_from_path,
            bootstrap_group_files,
        } => match naming(allowed_glue_databases.as_deref(), &table_name_from_path) {
            Err(e) => Err(e),
            Ok((allowed_databases, name_from)) => {
                let request = GlueSyncRequest {
                    table_uri: table_uri.unwrap_or_default(),
                    database: glue_database,
                    table: glue_table,
                    metadata_uri,
                    to_version,
                    known_version: None,
                    format_version: format_version(&iceberg_format_version),
                    on_missing_source: missing_source_action(&on_missing_source),
                    allowed_databases,
                    name_from,
                    bootstrap_group_files,
                };
                match discover {
                    Some(prefix) => {
                        return run_discover(&prefix, &request, usize::from(concurrency), dry_run)
                            .await;
                    }
                    None => run_glue_sync(&request).await,
                }
            }
        },
        Command::LakebaseSync {
            config,
            source_path,
            source_table,
            mode,
            primary_key,
            conflict_on_existing,
            target_table,
            interval,
            postgres_url,
            to_version,
            show_values,
            unity,
        } => {
            let tables = match config {
                Some(path) => lakemirror::lakebase::read_config(&path),
                None => one_table(
                    source_path,
                    source_table,
                    mode,
                    primary_key,
                    conflict_on_existing,
                    target_table,
                    interval,
                ),
            };
            let tables = tables.map(|mut tables| {
                for table in &mut tables {
                    table.show_values = show_values;
                }
                tables
            });
            match tables {
                Ok(tables) => match unity.client() {
                    Ok(uc) => {
                        run_lakebase_sync(&tables, postgres_url.as_deref(), to_version, uc.as_ref())
                            .await
                    }
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
        Command::UnityRegister {
            table_uri,
            catalog,
            schema,
            table,
            allowed_uc_catalogs,
            unity,
        } => match lakemirror::target::allowed_names(
            allowed_uc_catalogs.as_deref(),
            "--allowed-uc-catalogs",
        ) {
            Err(e) => Err(e),
            Ok(allowed_catalogs) => {
                let request = lakemirror::unity::UnityRegisterRequest {
                    table_uri,
                    catalog,
                    schema,
                    table,
                    allowed_catalogs,
                };
                run_unity_register(&request, &unity).await
            }
        },
        Command::Invoke {
            function:
                Function::GlueSync {
                    event,
                    glue_database,
                    table_prefixes,
                    dead_letter_queue_url,
                    iceberg_format_version,
                    on_missing_source,
                    allowed_glue_databases,
                    table_name_from_path,
                    bootstrap_group_files,
                    timeout_seconds,
                },
        } => match naming(allowed_glue_databases.as_deref(), &table_name_from_path) {
            Err(e) => Err(e),
            Ok((allowed_databases, name_from)) => {
                let deadline = timeout_seconds
                    .map(|s| std::time::SystemTime::now() + std::time::Duration::from_secs(s));
                let config = GlueSyncConfig {
                    database: glue_database,
                    table_prefixes,
                    dead_letter_queue_url,
                    format_version: format_version(&iceberg_format_version),
                    on_missing_source: missing_source_action(&on_missing_source),
                    allowed_databases,
                    name_from,
                    bootstrap_group_files,
                };
                invoke_glue_sync(&event, config, deadline).await
            }
        },
        Command::Invoke {
            function:
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
                    unity,
                    uc_token_secret_arn,
                },
        } => {
            use lakemirror::lakebase::function::{
                ConfigSource, LakebaseSyncConfig, allowed_schemas,
            };
            let config = LakebaseSyncConfig {
                config: match (lakebase_config, lakebase_config_uri) {
                    (Some(text), _) => ConfigSource::Text(text),
                    (None, uri) => ConfigSource::Object(uri.unwrap_or_default()),
                },
                postgres_url,
                password_secret_arn: postgres_password_secret_arn,
                unity: unity.config(uc_token_secret_arn, None, None, Vec::new(), None),
                table_prefixes,
                allow_replace: lakebase_allow_replace,
                allowed_schemas: allowed_schemas(lakebase_allowed_schemas.as_deref()),
                ca_pem: postgres_ca_pem,
                ca_secret_arn: postgres_ca_secret_arn,
                allow_insecure: postgres_allow_insecure,
            };
            invoke_lakebase_sync(&event, config).await
        }
        Command::Invoke {
            function:
                Function::UnityRegister {
                    event,
                    unity,
                    uc_token_secret_arn,
                    uc_catalog,
                    uc_schema,
                    table_prefixes,
                    allowed_uc_catalogs,
                },
        } => match lakemirror::target::allowed_names(
            allowed_uc_catalogs.as_deref(),
            "--allowed-uc-catalogs",
        ) {
            Err(e) => Err(e),
            Ok(allowed) => match unity.config(
                uc_token_secret_arn,
                uc_catalog,
                uc_schema,
                table_prefixes,
                allowed,
            ) {
                Some(config) => invoke_unity_register(&event, config).await,
                None => Err(missing_uc_url()),
            },
        },
    };
    match outcome {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One step of a fanned-out bootstrap.
async fn run_fan_out(step: FanOutStep) -> lakemirror::Result<String> {
    use lakemirror::fanout;
    let counters = Arc::new(IoCounters::default());
    let read_plan = |path: &std::path::Path| -> lakemirror::Result<fanout::FanOutPlan> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            lakemirror::Error::InvalidInput(format!("--plan {}: {e}", path.display()))
        })?;
        serde_json::from_str(text.trim()).map_err(|e| {
            lakemirror::Error::InvalidInput(format!(
                "--plan {}: not a plan `lakemirror fan-out plan` printed: {e}",
                path.display()
            ))
        })
    };
    match step {
        FanOutStep::Plan {
            table_uri,
            parts,
            glue_database,
            glue_table,
            metadata_uri,
            to_version,
            iceberg_format_version,
            allowed_glue_databases,
            table_name_from_path,
        } => {
            let (allowed_databases, name_from) =
                naming(allowed_glue_databases.as_deref(), &table_name_from_path)?;
            let request = GlueSyncRequest {
                table_uri,
                database: glue_database,
                table: glue_table,
                metadata_uri,
                to_version,
                known_version: None,
                format_version: format_version(&iceberg_format_version),
                on_missing_source: OnMissingSource::default(),
                allowed_databases,
                name_from,
                bootstrap_group_files: fanout::BOOTSTRAP_GROUP_FILES,
            };
            let plan = fanout::plan(&request, parts, counters).await?;
            eprintln!(
                "{}.{}: Delta version {}, {} files in {} buckets, {} parts",
                plan.database, plan.table, plan.delta_version, plan.files, plan.buckets, plan.parts
            );
            Ok(serde_json::to_string(&plan)?)
        }
        FanOutStep::Part { plan, part } => {
            let plan = read_plan(&plan)?;
            let written = fanout::run_part(&plan, part, counters).await?;
            Ok(serde_json::to_string(&written)?)
        }
        FanOutStep::Finish { plan } => {
            let plan = read_plan(&plan)?;
            let glue = GlueCatalog::from_env(counters.clone()).await;
            let report = fanout::finish(&glue, &plan, counters).await?;
            Ok(serde_json::to_string(&report)?)
        }
    }
}

/// The naming policy of glue-sync's flags.
fn naming(
    allowed: Option<&str>,
    name_from: &str,
) -> lakemirror::Result<(Option<regex::Regex>, NameFrom)> {
    let allowed = lakemirror::target::allowed_names(allowed, "--allowed-glue-databases")?;
    Ok((allowed, name_from.parse().unwrap_or_default()))
}

/// keep or drop, as clap allows only those.
fn missing_source_action(value: &str) -> OnMissingSource {
    value.parse().unwrap_or_default()
}

/// The one table the flags describe.
fn one_table(
    source_path: Option<String>,
    source_table: Option<String>,
    mode: Option<String>,
    primary_key: Option<String>,
    conflict_on_existing: Option<String>,
    target_table: Option<String>,
    interval: Option<String>,
) -> lakemirror::Result<Vec<lakemirror::lakebase::SyncedTable>> {
    use lakemirror::lakebase::config::{PrimaryKey, SourceKeys, SyncKeys, TableKeys, TargetKeys};
    let mut source = SourceKeys {
        path: source_path,
        ..Default::default()
    };
    if let Some(name) = source_table {
        let parts: Vec<&str> = name.split('.').collect();
        let [catalog, schema, table] = parts.as_slice() else {
            return Err(lakemirror::Error::InvalidInput(format!(
                "--source-table {name:?}: write catalog.schema.table"
            )));
        };
        source.catalog = Some(catalog.to_string());
        source.schema = Some(schema.to_string());
        source.table = Some(table.to_string());
    }
    let keys = TableKeys {
        source,
        sync: SyncKeys {
            interval,
            mode,
            conflict_on_existing,
            primary_key: primary_key.map(PrimaryKey::One),
        },
        target: TargetKeys {
            table_name: target_table,
        },
    };
    Ok(vec![keys.check()?])
}

/// Syncs each table in turn; every table is tried, the first error is returned at the end.
async fn run_lakebase_sync(
    tables: &[lakemirror::lakebase::SyncedTable],
    postgres_url: Option<&str>,
    to_version: Option<i64>,
    unity: Option<&lakemirror::unity::UnityCatalog>,
) -> lakemirror::Result<String> {
    let connection = lakemirror::lakebase::Connection::new(postgres_url, None)?;
    let mut client = connection.connect().await?;
    let mut lines = Vec::new();
    let mut first_error = None;
    for table in tables {
        match lakemirror::lakebase::lakebase_sync(&mut client, table, to_version, unity).await {
            Ok(report) => {
                eprintln!(
                    "{} is at Delta version {} ({}: +{} ~{} -{} rows){}",
                    report.target,
                    report.delta_version,
                    report.mode,
                    report.rows_inserted,
                    report.rows_updated,
                    report.rows_deleted,
                    if report.up_to_date {
                        ", already up to date"
                    } else {
                        ""
                    }
                );
                lines.push(serde_json::to_string(&report)?);
            }
            Err(e) => {
                if tables.len() > 1 {
                    eprintln!("error: {}: {e}", table.target);
                }
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if lines.is_empty() => Err(e),
        Some(e) => {
            println!("{}", lines.join("\n"));
            Err(e)
        }
        None => Ok(lines.join("\n")),
    }
}

/// The format version clap already checked to be "2" or "3".
fn format_version(value: &str) -> iceberg::spec::FormatVersion {
    lakemirror::mirror::plan::parse_format_version(value)
        .unwrap_or(iceberg::spec::FormatVersion::V2)
}

/// 0: equal, 1: a difference, 2: could not verify.
async fn run_verify(request: &lakemirror::verify::VerifyRequest) -> ExitCode {
    let counters = Arc::new(IoCounters::default());
    let glue = GlueCatalog::from_env(counters.clone()).await;
    let report = match lakemirror::verify::verify(&glue, request, counters).await {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if report.equal {
        eprintln!(
            "{}.{} equals Delta version {} ({} files)",
            report.database, report.table, report.delta_version, report.delta_files
        );
    } else {
        eprintln!(
            "{}.{} differs from Delta version {} in {} way(s):",
            report.database, report.table, report.delta_version, report.difference_count
        );
        for d in &report.differences {
            eprintln!("  {}", d.message_with_file());
        }
    }
    match serde_json::to_string(&report) {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    if report.equal {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// 0: the status was read (whatever it says), 2: it could not be.
async fn run_status(
    database: &str,
    prefixes: &[String],
    dead_letter_queue_url: Option<String>,
    json: bool,
) -> ExitCode {
    let counters = Arc::new(IoCounters::default());
    let glue = GlueCatalog::from_env(counters.clone()).await;
    let aws = lakemirror::aws::config().await;
    let dead_letters = dead_letter_queue_url.map(|url| {
        lakemirror::dead_letter::DeadLetterQueue::new(aws_sdk_sqs::Client::new(aws), url)
    });
    let statuses = match lakemirror::status::status(
        &glue,
        database,
        prefixes,
        dead_letters.as_ref(),
        &counters,
    )
    .await
    {
        Ok(statuses) => statuses,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if json {
        match serde_json::to_string(&serde_json::json!({ "tables": statuses })) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    } else if statuses.is_empty() {
        eprintln!("no mirrors in Glue database {database}");
    } else {
        println!("{}", lakemirror::status::table_text(&statuses));
    }
    ExitCode::SUCCESS
}

/// Finds the Delta tables under `prefix` and mirrors each (or, with `dry_run`, lists them).
/// 0: every table mirrored, 1: some failed, 2: discovery failed.
async fn run_discover(
    prefix: &str,
    request: &GlueSyncRequest,
    concurrency: usize,
    dry_run: bool,
) -> ExitCode {
    use lakemirror::discover::{Progress, backfill, discover_tables, plan_names};
    use lakemirror::status::text_table;
    use std::io::{IsTerminal, Write};
    let counters = Arc::new(IoCounters::default());
    let tables = match discover_tables(prefix, concurrency, &counters).await {
        Ok(tables) => tables,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "found {} Delta table(s) under {prefix} ({} listing requests)",
        tables.len(),
        counters.totals().requests
    );
    if dry_run {
        let planned = match plan_names(&tables, request, &counters).await {
            Ok(planned) => planned,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        let rows = planned
            .iter()
            .map(|p| {
                vec![
                    p.table_uri.clone(),
                    p.glue_table.clone(),
                    if p.collides_with.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "same Glue table as {} (use --table-name-from-path path)",
                            p.collides_with.join(", ")
                        )
                    },
                ]
            })
            .collect();
        eprintln!(
            "{}",
            text_table(&["DELTA TABLE", "GLUE TABLE", "NOTE"], rows)
        );
        return print_json(&serde_json::json!({ "dry_run": true, "tables": planned }));
    }
    let glue = GlueCatalog::from_env(Arc::new(IoCounters::default())).await;
    let terminal = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let mut progress = Progress {
        total: tables.len(),
        done: 0,
        failed: 0,
        elapsed: std::time::Duration::ZERO,
    };
    let finished = backfill(&glue, &tables, request, concurrency, |done| {
        progress.done += 1;
        progress.elapsed = started.elapsed();
        let line = match &done.outcome {
            Ok(report) => format!(
                "ok      {} -> {}.{} at Delta version {} ({})",
                done.table_uri,
                report.database,
                report.table,
                report
                    .delta_version
                    .map_or("-".to_string(), |v| v.to_string()),
                serde_json::to_value(report.action)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ),
            Err(e) => {
                progress.failed += 1;
                format!("FAILED  {}: {e}", done.table_uri)
            }
        };
        let mut err = std::io::stderr().lock();
        if terminal {
            // Failures stay on screen above the bar; the bar is redrawn in place.
            if done.outcome.is_err() {
                let _ = writeln!(err, "\r\x1b[2K{line}");
            }
            let _ = write!(err, "\r\x1b[2K{}", progress.bar());
        } else {
            let _ = writeln!(err, "[{}/{}] {line}", progress.done, progress.total);
        }
        let _ = err.flush();
    })
    .await;
    if terminal {
        eprintln!();
    }
    let rows = finished
        .iter()
        .map(|f| match &f.outcome {
            Ok(report) => vec![
                f.table_uri.clone(),
                format!("{}.{}", report.database, report.table),
                serde_json::to_value(report.action)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                report
                    .delta_version
                    .map_or("-".to_string(), |v| v.to_string()),
                String::new(),
            ],
            Err(e) => vec![
                f.table_uri.clone(),
                "-".into(),
                "failed".into(),
                "-".into(),
                lakemirror::status::one_line(&e.to_string(), 100),
            ],
        })
        .collect();
    eprintln!(
        "{}",
        text_table(
            &["DELTA TABLE", "GLUE TABLE", "RESULT", "VERSION", "ERROR"],
            rows
        )
    );
    let failed = finished.iter().filter(|f| f.outcome.is_err()).count();
    eprintln!(
        "{} of {} table(s) mirrored, {failed} failed, in {:.1} s",
        finished.len() - failed,
        finished.len(),
        started.elapsed().as_secs_f64()
    );
    let tables: Vec<serde_json::Value> = finished
        .iter()
        .map(|f| match &f.outcome {
            Ok(report) => serde_json::json!({ "table_uri": f.table_uri, "report": report }),
            Err(e) => serde_json::json!({ "table_uri": f.table_uri, "error": e.to_string() }),
        })
        .collect();
    let printed = print_json(&serde_json::json!({
        "discovered": finished.len(),
        "mirrored": finished.len() - failed,
        "failed": failed,
        "tables": tables,
    }));
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        printed
    }
}

/// Prints `value` as the last line on stdout.
fn print_json(value: &serde_json::Value) -> ExitCode {
    match serde_json::to_string(value) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

async fn run_glue_sync(request: &GlueSyncRequest) -> lakemirror::Result<String> {
    let counters = Arc::new(IoCounters::default());
    let glue = GlueCatalog::from_env(counters.clone()).await;
    let report = glue_sync(&glue, request, counters).await?;
    eprintln!(
        "{}.{} is at Delta version {} ({} snapshot(s) committed, +{} / -{} files)",
        report.database,
        report.table,
        report
            .delta_version
            .map_or("-".to_string(), |v| v.to_string()),
        report.snapshots_committed,
        report.added_files,
        report.removed_files
    );
    Ok(serde_json::to_string(&report)?)
}

async fn invoke_lakebase_sync(
    event: &std::path::Path,
    config: lakemirror::lakebase::function::LakebaseSyncConfig,
) -> lakemirror::Result<String> {
    let event = read_event(event)?;
    let function = lakemirror::lakebase::function::LakebaseSyncFunction::from_config(config).await;
    let response = function.handle(&event).await?;
    Ok(serde_json::to_string(&response)?)
}

fn missing_uc_url() -> lakemirror::Error {
    lakemirror::Error::InvalidInput(
        "no Unity Catalog server: give --uc-url (UC_URL), the server's base URL without /api/2.1/unity-catalog".into(),
    )
}

async fn run_unity_register(
    request: &lakemirror::unity::UnityRegisterRequest,
    unity: &UnityArgs,
) -> lakemirror::Result<String> {
    let uc = unity.client()?.ok_or_else(missing_uc_url)?;
    let report = lakemirror::unity::unity_register(&uc, request).await?;
    match &report.full_name {
        Some(name) => eprintln!(
            "{name}: {} (Delta version {}, {} columns)",
            report.action.replace('_', " "),
            report.delta_version,
            report.columns
        ),
        None => eprintln!(
            "{}: not registered (lakemirror.unity.enabled=false)",
            report.table_uri
        ),
    }
    Ok(serde_json::to_string(&report)?)
}

async fn invoke_unity_register(
    event: &std::path::Path,
    config: lakemirror::unity::function::UnityConfig,
) -> lakemirror::Result<String> {
    let event = read_event(event)?;
    let function = lakemirror::unity::function::UnityRegisterFunction::from_config(config).await;
    let response = function.handle(&event).await?;
    Ok(serde_json::to_string(&response)?)
}

/// A Lambda event from a JSON file.
fn read_event(event: &std::path::Path) -> lakemirror::Result<lakemirror::trigger::LambdaInput> {
    let text = std::fs::read_to_string(event).map_err(|e| {
        lakemirror::Error::InvalidInput(format!("cannot read event file {}: {e}", event.display()))
    })?;
    lakemirror::trigger::LambdaInput::from_json(&text).map_err(|e| {
        lakemirror::Error::InvalidInput(format!(
            "event file {} is not an event lakemirror reads (an SQS batch, an EventBridge event or an S3 notification): {e}",
            event.display()
        ))
    })
}

async fn invoke_glue_sync(
    event: &std::path::Path,
    config: GlueSyncConfig,
    deadline: Option<std::time::SystemTime>,
) -> lakemirror::Result<String> {
    let event = read_event(event)?;
    let function = GlueSyncFunction::from_config(config).await;
    let response = function.handle(&event, deadline).await?;
    Ok(serde_json::to_string(&response)?)
}
