//! `lakemirror lakebase-sync`: Delta tables copied into PostgreSQL, from a config file or
//! one table given by flags.

use lakemirror_lakebase::config::{PrimaryKey, SourceKeys, SyncKeys, TableKeys, TargetKeys};
use lakemirror_lakebase::{Connection, SyncedTable, lakebase_sync, read_config};
use lakemirror_unity::UnityCatalog;

use crate::{Context, Error, Result, environment};

/// The flags of `lakemirror lakebase-sync`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// A TOML file with [[tables]] entries (keys source.path, source.catalog/schema/table,
    /// sync.mode, sync.primary_key, sync.conflict_on_existing, sync.interval,
    /// target.table_name). Cannot be combined with the one-table flags.
    #[arg(long, conflicts_with_all = ["source_path", "source_table"])]
    pub config: Option<std::path::PathBuf>,
    /// source.path: the Delta table URI (s3://…, file://… or a local path).
    #[arg(long)]
    pub source_path: Option<String>,
    /// source.catalog.schema.table: a Unity Catalog table, resolved to its storage
    /// location (and vended read credentials) through --uc-url.
    #[arg(long)]
    pub source_table: Option<String>,
    /// sync.mode: full_refresh or incremental (needs --primary-key) [default: full_refresh].
    #[arg(long)]
    pub mode: Option<String>,
    /// sync.primary_key: key column(s), comma-separated; becomes the PRIMARY KEY.
    #[arg(long)]
    pub primary_key: Option<String>,
    /// sync.conflict_on_existing: error or replace, when the target exists and lakemirror
    /// did not create it [default: error].
    #[arg(long)]
    pub conflict_on_existing: Option<String>,
    /// target.table_name: table or schema.table, parts optionally "double-quoted"
    /// [default: the source folder's name in public].
    #[arg(long)]
    pub target_table: Option<String>,
    /// sync.interval: how often a scheduled deployment syncs, e.g. "15 minutes".
    #[arg(long)]
    pub interval: Option<String>,
    /// postgres://user[:password]@host:port/database?sslmode=verify-full (the default
    /// sslmode: the server's certificate and name are checked before the password is sent).
    #[arg(long, env = "POSTGRES_URL", hide_env_values = true)]
    pub postgres_url: Option<String>,
    /// The CA of the server's certificate as PEM text, for verify-full [default: the URL's
    /// sslrootcert, PGSSLROOTCERT, else the system's roots].
    #[arg(long, env = "POSTGRES_CA_PEM", hide_env_values = true)]
    pub postgres_ca_pem: Option<String>,
    /// Allow an sslmode that does not verify the server (disable, allow, prefer, require):
    /// the password and the rows may reach whoever answers [default: refused].
    #[arg(long, env = "POSTGRES_ALLOW_INSECURE")]
    pub postgres_allow_insecure: bool,
    /// Sync up to this Delta version instead of the newest (every table).
    #[arg(long)]
    pub to_version: Option<i64>,
    /// Name rows by their key values in errors (a duplicate key, a value PostgreSQL
    /// cannot store) [default: the key columns and a hash of the values: keys are user
    /// data, and errors end in logs].
    #[arg(long)]
    pub show_values: bool,
}

/// Syncs each table in turn; every table is tried, the first error is returned at the end.
pub(crate) async fn run(context: &Context, args: Args) -> Result<String> {
    let mut tables = match &args.config {
        Some(path) => read_config(path)?,
        None => one_table(&args)?,
    };
    for table in &mut tables {
        table.show_values = args.show_values;
    }
    let uc = context.unity.client()?;
    let connection = Connection::new(args.postgres_url.as_deref(), None, &environment)?
        .verified(args.postgres_ca_pem.clone(), args.postgres_allow_insecure)?;
    sync_tables(context, &tables, connection, args.to_version, uc.as_ref()).await
}

/// The one table the flags describe.
fn one_table(args: &Args) -> Result<Vec<SyncedTable>> {
    let mut source = SourceKeys {
        path: args.source_path.clone(),
        ..Default::default()
    };
    if let Some(name) = &args.source_table {
        let parts: Vec<&str> = name.split('.').collect();
        let [catalog, schema, table] = parts.as_slice() else {
            return Err(Error::Usage(format!(
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
            interval: args.interval.clone(),
            mode: args.mode.clone(),
            conflict_on_existing: args.conflict_on_existing.clone(),
            primary_key: args.primary_key.clone().map(PrimaryKey::One),
        },
        target: TargetKeys {
            table_name: args.target_table.clone(),
        },
    };
    Ok(vec![keys.check()?])
}

async fn sync_tables(
    context: &Context,
    tables: &[SyncedTable],
    connection: Connection,
    to_version: Option<i64>,
    unity: Option<&UnityCatalog>,
) -> Result<String> {
    let mut client = connection.connect().await?;
    let mut lines = Vec::new();
    let mut first_error = None;
    for table in tables {
        match lakebase_sync(&context.stores, &mut client, table, to_version, unity).await {
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
        Some(e) if lines.is_empty() => Err(e.into()),
        Some(e) => {
            println!("{}", lines.join("\n"));
            Err(e.into())
        }
        None => Ok(lines.join("\n")),
    }
}
