//! The `lakemirror` command line: the same code as the Lambda functions, for back-fills,
//! checks and local runs. One file per subcommand; this one parses the command line, builds
//! the AWS configuration and the object stores once, and prints errors with the flags that
//! fix them.

use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use lakemirror_aws::config;
use lakemirror_iceberg::Lakehouse;
use lakemirror_iceberg::catalog::Catalog;
use lakemirror_runtime::crash;
use lakemirror_storage::ObjectStores;

mod environment;
mod error;
mod fan_out;
mod invoke;
mod lakebase_sync;
mod status;
mod sync;
mod unity;
mod unity_register;
mod verify;

pub use error::{Error, Result};

#[derive(Parser)]
#[command(
    name = "lakemirror",
    version,
    about = "Keep a Delta Lake table readable everywhere: as an Iceberg table in AWS Glue over the same Parquet files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Comma-separated s3://bucket/prefix roots whose files a table's log may name besides
    /// its own (a shallow clone's source); any other path outside a table's root is refused
    /// [default: none].
    #[arg(
        long,
        global = true,
        env = "ALLOWED_EXTERNAL_ROOTS",
        value_delimiter = ','
    )]
    allowed_external_roots: Vec<String>,
    /// Memory in MB the process may use: three quarters of it are its memory budget, 40% of
    /// that for objects being read (at most 512 MB at once; a read waits for room) and the
    /// rest for what parsing keeps (about 2 KB per data file held); a larger table is
    /// refused with what to do, or a new mirror bootstrapped in groups, instead of running
    /// out of memory [default: this machine's memory].
    #[arg(long, global = true, env = "MEMORY_SIZE")]
    memory_size: Option<u64>,
    #[command(flatten)]
    rest: RestArgs,
    #[command(flatten)]
    unity: unity::UnityArgs,
}

/// The Iceberg REST catalog that receives mirrors instead of Glue (glue-sync, verify,
/// status, fan-out): its database is a namespace there. Unset: Glue.
#[derive(clap::Args)]
#[command(next_help_heading = "Iceberg REST catalog (instead of Glue)")]
struct RestArgs {
    /// Mirror into this Iceberg REST catalog instead of Glue: its base URL without /v1
    /// (https://glue.<region>.amazonaws.com/iceberg, a Polaris or Lakekeeper server, or
    /// http://127.0.0.1:<port> for one on this machine).
    #[arg(long, global = true, env = "REST_CATALOG_URI")]
    rest_catalog_uri: Option<String>,
    /// The warehouse sent to the catalog's /v1/config (Glue: the account id).
    #[arg(long, global = true, env = "REST_CATALOG_WAREHOUSE")]
    rest_catalog_warehouse: Option<String>,
    /// A bearer token for the REST catalog.
    #[arg(
        long,
        global = true,
        env = "REST_CATALOG_TOKEN",
        hide_env_values = true
    )]
    rest_catalog_token: Option<String>,
    /// OAuth2 client credentials (client_id:client_secret), exchanged for a token that is
    /// refreshed before it expires.
    #[arg(
        long,
        global = true,
        env = "REST_CATALOG_CREDENTIAL",
        hide_env_values = true
    )]
    rest_catalog_credential: Option<String>,
    /// The OAuth2 token endpoint [default: <uri>/v1/oauth/tokens].
    #[arg(long, global = true, env = "REST_CATALOG_OAUTH2_SERVER_URI")]
    rest_catalog_oauth2_server_uri: Option<String>,
    /// The OAuth2 scope [default: catalog].
    #[arg(long, global = true, env = "REST_CATALOG_SCOPE")]
    rest_catalog_scope: Option<String>,
    /// Sign requests with AWS SigV4 for this service (glue for Glue's Iceberg endpoint,
    /// s3tables, execute-api), with the AWS credentials every other call uses.
    #[arg(long, global = true, env = "REST_CATALOG_SIGNING_NAME")]
    rest_catalog_signing_name: Option<String>,
    /// The region SigV4 signs for [default: the AWS region].
    #[arg(long, global = true, env = "REST_CATALOG_SIGNING_REGION")]
    rest_catalog_signing_region: Option<String>,
}

impl RestArgs {
    /// The flags by their settings' names, for the function's parser.
    fn setting(&self, name: &str) -> Option<String> {
        match name {
            "REST_CATALOG_URI" => self.rest_catalog_uri.clone(),
            "REST_CATALOG_WAREHOUSE" => self.rest_catalog_warehouse.clone(),
            "REST_CATALOG_TOKEN" => self.rest_catalog_token.clone(),
            "REST_CATALOG_CREDENTIAL" => self.rest_catalog_credential.clone(),
            "REST_CATALOG_OAUTH2_SERVER_URI" => self.rest_catalog_oauth2_server_uri.clone(),
            "REST_CATALOG_SCOPE" => self.rest_catalog_scope.clone(),
            "REST_CATALOG_SIGNING_NAME" => self.rest_catalog_signing_name.clone(),
            "REST_CATALOG_SIGNING_REGION" => self.rest_catalog_signing_region.clone(),
            _ => None,
        }
    }
}

/// This machine's memory in MB (`MemTotal` of /proc/meminfo), when it says.
fn machine_memory_mb() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

#[derive(Subcommand)]
enum Command {
    /// Bring the Iceberg table in AWS Glue (or in the Iceberg REST catalog of
    /// --rest-catalog-uri) to the Delta table's newest version, one Iceberg snapshot per Delta
    /// version. Safe to re-run and to run concurrently. `glue-sync`, its first name, still
    /// works.
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
    #[command(
        visible_alias = "glue-sync",
        about = "Mirror a Delta table (or a prefix's tables) to Iceberg in AWS Glue or a REST catalog"
    )]
    Sync(sync::Args),
    /// Prove that a mirror equals its Delta table at a version, from metadata alone (the
    /// Delta log, the Iceberg metadata, manifest list and manifests; no data rows): the
    /// snapshot of that version holds exactly the active files, with their sizes, record
    /// counts and partition values; each file's deleted rows equal its delete files' rows;
    /// the snapshot mirrors that very commit of that very table under the mapped schema; and
    /// every snapshot's delta.version is newer than its parent's.
    ///
    /// The last line on stdout is a JSON report listing each difference. Exit status: 0 equal,
    /// 1 a difference (drift), 2 could not verify (no mirror, no such version, a read failed).
    #[command(about = "Prove a mirror equal to its Delta table, from metadata alone")]
    Verify(verify::Args),
    /// Which mirrors are behind or failing: one line per mirror in the Glue database (a
    /// Glue Iceberg table whose metadata names its Delta table): the Delta version it holds
    /// and when that was committed, the newest Delta version (probed by name, commit files
    /// only, never a listing), the lag in versions and time (how long the oldest commit the
    /// mirror lacks has waited), and the newest error the dead-letter queue holds for it.
    ///
    /// States: caught-up, behind, source-missing (the Delta log is gone), unreadable.
    /// Reading the dead-letter queue is a peek: the messages stay in it, visible to others.
    #[command(about = "Which mirrors of a Glue database are behind or failing")]
    Status(status::Args),
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
    /// PGPASSWORD, PGDATABASE, PGSSLMODE, PGSSLROOTCERT). sslmode verify-full (the default)
    /// checks the server's certificate and name before the password is sent; any other mode
    /// needs --postgres-allow-insecure. A Lakebase OAuth token works as the password. The
    /// password never appears in output.
    #[command(about = "Copy Delta tables into PostgreSQL (Lakebase), by primary key")]
    LakebaseSync(lakebase_sync::Args),
    /// Register a Delta table in Unity Catalog as an EXTERNAL DELTA table (columns from the
    /// Delta schema, partition columns, the Delta table properties), or bring its entry in
    /// line after a schema change: the OSS API cannot update columns, so the entry is deleted
    /// and re-created with its properties and comment (the data is never touched). Safe to
    /// re-run and to run concurrently. The Delta table properties lakemirror.unity.catalog,
    /// .schema and .table choose the name; lakemirror.unity.enabled=false opts out.
    /// The last line on stdout is a JSON report.
    #[command(about = "Register a Delta table in Unity Catalog")]
    UnityRegister(unity_register::Args),
    /// Bootstrap one very large mirror in parts that run in parallel (processes here, a
    /// Step Functions Distributed Map in AWS): `plan` fixes the Delta version, the Glue
    /// table and the bucket layout and prints the plan as JSON; each `part` (any order, on
    /// any machine, again after a failure) writes the manifests of its buckets; `finish`
    /// commits one snapshot of all of them to Glue, as a new history (like a rebuild).
    ///
    ///   lakemirror fan-out plan --table-uri s3://lake/t --glue-database db --parts 8 > plan.json
    ///   for p in $(seq 0 7); do lakemirror fan-out part --plan plan.json --part $p & done; wait
    ///   lakemirror fan-out finish --plan plan.json
    #[command(about = "Bootstrap one very large mirror in parallel parts")]
    FanOut {
        #[command(subcommand)]
        step: fan_out::Step,
    },
    /// Run a Lambda function's handler here on an event file: the same code
    /// the deployed function runs, without Docker or `sam local`.
    #[command(about = "Run a Lambda function's handler here on an event file")]
    Invoke {
        #[command(subcommand)]
        function: invoke::Function,
    },
}

/// What every subcommand shares, built once per run: one AWS configuration for every client
/// and every S3 store (profiles, SSO, credential_process, web identity, container and instance
/// credentials), and the stores themselves.
pub struct Context {
    pub aws: lakemirror_aws::SdkConfig,
    pub stores: ObjectStores,
    /// Glue, or the REST catalog the --rest-catalog-* flags name.
    pub catalog: Arc<dyn Catalog>,
    /// Unity Catalog (--uc-url, --uc-token), when given.
    pub(crate) unity: unity::UnityArgs,
    /// Unity Catalog as the commit catalog of catalog-managed tables, when given.
    pub commit_catalog: Option<Arc<dyn lakemirror_delta::CommitCatalog>>,
}

impl Context {
    /// The stores and the catalog.
    pub fn lake(&self) -> Lakehouse {
        Lakehouse::new(self.stores.clone(), self.catalog.clone())
            .with_commit_catalog(self.commit_catalog.clone())
    }
}

/// The process's environment, where the AWS settings and the functions' variables come from.
pub fn environment(name: &str) -> Option<String> {
    std::env::var(name).ok()
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
    crash::arm(crash::CRASH_AT.value(&environment));
    let is_empty =
        |name: &std::ffi::OsStr| std::env::var_os(name).is_some_and(|value| value.is_empty());
    let cli =
        Cli::from_arg_matches(&without_empty_variables(Cli::command(), &is_empty).get_matches())
            .unwrap_or_else(|e| e.exit());
    if let Some(mb) = cli.memory_size.or_else(machine_memory_mb) {
        lakemirror_storage::budget::install(lakemirror_storage::MemoryShare::for_memory_mb(mb));
    }
    let aws = config::load().await;
    let catalog = match config::catalog(&aws, &|name| cli.rest.setting(name)).await {
        Ok(catalog) => catalog,
        Err(e) => {
            Error::from(e).print();
            return ExitCode::FAILURE;
        }
    };
    let commit_catalog = match cli.unity.commit_catalog() {
        Ok(commit_catalog) => commit_catalog,
        Err(e) => {
            e.print();
            return ExitCode::FAILURE;
        }
    };
    let context = Context {
        stores: config::object_stores(&aws, &environment)
            .with_external_roots(cli.allowed_external_roots.clone()),
        aws,
        catalog,
        unity: cli.unity.clone(),
        commit_catalog,
    };
    let outcome = match cli.command {
        Command::Sync(args) => return sync::run(&context, args).await,
        Command::Verify(args) => return verify::run(&context, args).await,
        Command::Status(args) => return status::run(&context, args).await,
        Command::LakebaseSync(args) => lakebase_sync::run(&context, args).await,
        Command::UnityRegister(args) => unity_register::run(&context, args).await,
        Command::FanOut { step } => fan_out::run(&context, step).await,
        Command::Invoke { function } => invoke::run(&context, function).await,
    };
    match outcome {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            e.print();
            ExitCode::FAILURE
        }
    }
}

/// A variable set to "" does not stand for its flag: Lambda passes a SAM parameter left empty
/// as "", which the functions read as unset, and the same `env.json` must mean the same to
/// `lakemirror invoke` (else `LAKEBASE_CONFIG_URI=""` beside `LAKEBASE_CONFIG` conflicts).
fn without_empty_variables(
    mut command: clap::Command,
    is_empty: &dyn Fn(&std::ffi::OsStr) -> bool,
) -> clap::Command {
    let empty: Vec<clap::Id> = command
        .get_arguments()
        .filter(|arg| arg.get_env().is_some_and(is_empty))
        .map(|arg| arg.get_id().clone())
        .collect();
    for id in empty {
        command = command.mut_arg(id, |arg| arg.env(None::<&'static str>));
    }
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|sub| sub.get_name().to_owned())
        .collect();
    for name in subcommands {
        command = command.mut_subcommand(name, |sub| without_empty_variables(sub, is_empty));
    }
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_set_to_nothing_is_no_flag() {
        fn env_of(command: &clap::Command, path: &[&str], id: &str) -> Option<String> {
            let command = path.iter().fold(command, |c, name| {
                c.find_subcommand(name).expect("a subcommand")
            });
            let arg = command.get_arguments().find(|arg| arg.get_id() == id);
            arg.expect("the flag")
                .get_env()
                .map(|name| name.to_string_lossy().into_owned())
        }
        let lakebase = ["invoke", "lakebase-sync"];
        let none = |_: &std::ffi::OsStr| false;
        let kept = without_empty_variables(Cli::command(), &none);
        assert_eq!(
            env_of(&kept, &lakebase, "lakebase_config_uri").as_deref(),
            Some("LAKEBASE_CONFIG_URI")
        );
        assert_eq!(
            env_of(&kept, &[], "memory_size").as_deref(),
            Some("MEMORY_SIZE")
        );

        let empty = |name: &std::ffi::OsStr| name == "LAKEBASE_CONFIG_URI" || name == "MEMORY_SIZE";
        let dropped = without_empty_variables(Cli::command(), &empty);
        assert_eq!(env_of(&dropped, &lakebase, "lakebase_config_uri"), None);
        assert_eq!(env_of(&dropped, &[], "memory_size"), None);
        assert_eq!(
            env_of(&dropped, &lakebase, "lakebase_config").as_deref(),
            Some("LAKEBASE_CONFIG")
        );
        // The command still parses what the function's variables would give it.
        let parsed = dropped.try_get_matches_from([
            "lakemirror",
            "invoke",
            "lakebase-sync",
            "--event",
            "e.json",
            "--lakebase-config",
            "[[tables]]",
        ]);
        assert!(parsed.is_ok(), "{parsed:?}");
    }

    #[test]
    fn the_top_level_help_gives_each_command_one_line() {
        let help = Cli::command().term_width(100).render_help().to_string();
        let listed: Vec<&str> = help
            .lines()
            .skip_while(|line| !line.starts_with("Commands:"))
            .skip(1)
            .take_while(|line| !line.trim().is_empty())
            .collect();
        let commands = Cli::command().get_subcommands().count();
        // Each command and `help`, one line each.
        assert_eq!(listed.len(), commands + 1, "{help}");
        for mut command in Cli::command().get_subcommands().cloned() {
            let long = command.render_long_help().to_string();
            assert!(
                long.lines().count() > 4,
                "{} --help explains more",
                command.get_name()
            );
        }
    }
}
