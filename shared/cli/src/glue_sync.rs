//! `lakemirror glue-sync`: one table (`--table-uri`) or every Delta table under a prefix
//! (`--discover`) mirrored into Glue.

use std::process::ExitCode;
use std::sync::Arc;

use lakemirror_mirror::discover::{Progress, backfill, discover_tables, plan_names};
use lakemirror_mirror::status::{one_line, text_table};
use lakemirror_mirror::{GlueSyncRequest, OnMissingSource, fanout, glue_sync};
use lakemirror_plan::history::{self, HistoryPolicy};
use lakemirror_plan::target::{NameFrom, allowed_names};
use lakemirror_storage::IoCounters;

use crate::{Context, Error, Result};

/// The flags of `lakemirror glue-sync`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The Delta table root (the folder holding _delta_log): s3://bucket/path, file:///path or a local path.
    #[arg(long, env = "TABLE_URI", required_unless_present = "discover")]
    pub table_uri: Option<String>,
    /// Mirror every Delta table under this prefix (s3://bucket/prefix, file:///path or a
    /// local path) instead of one --table-uri.
    #[arg(long, value_name = "PREFIX", conflicts_with_all = ["table_uri", "glue_table", "metadata_uri", "to_version"])]
    pub discover: Option<String>,
    /// With --discover: how many tables sync (and folders are listed) at once.
    #[arg(long, default_value_t = 4, requires = "discover", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub concurrency: u16,
    /// With --discover: list the tables found and the Glue table each would get; mirror
    /// nothing.
    #[arg(long, requires = "discover")]
    pub dry_run: bool,
    /// Glue database that receives the Iceberg table (must exist). Without --glue-table,
    /// the Delta table property lakemirror.glue.database overrides it, as in the function.
    #[arg(long, visible_alias = "database", env = "GLUE_DATABASE")]
    pub glue_database: String,
    /// Glue table name, used as given [default: the Delta table property
    /// lakemirror.glue.table, else the table folder's name, lower-cased, other characters as _].
    #[arg(long, visible_alias = "table", env = "GLUE_TABLE")]
    pub glue_table: Option<String>,
    /// Where Iceberg metadata files go [default: <table-uri>/_lakemirror/iceberg, which Delta VACUUM leaves alone].
    #[arg(long, env = "METADATA_URI")]
    pub metadata_uri: Option<String>,
    /// Sync up to this Delta version instead of the newest.
    #[arg(long)]
    pub to_version: Option<i64>,
    /// Iceberg format version of a newly created mirror: 2 (deletion vectors become
    /// position-delete files; Athena reads it) or 3 (Puffin deletion vectors). The Delta
    /// table property lakemirror.iceberg.format-version overrides it; an existing mirror
    /// keeps its version.
    #[arg(long, env = "ICEBERG_FORMAT_VERSION", default_value = "2", value_parser = ["2", "3"])]
    pub iceberg_format_version: String,
    /// When the Delta table is gone (no _delta_log with a commit or checkpoint) but its
    /// Glue table is there: keep (fail with "source table missing" and leave the Glue
    /// table as it is) or drop (delete the Glue table; the Iceberg metadata files stay).
    #[arg(long, env = "ON_MISSING_SOURCE", default_value = "keep", value_parser = ["keep", "drop"])]
    pub on_missing_source: String,
    /// The Glue databases a Delta table's own lakemirror.glue.database /
    /// lakemirror.glue.table properties may choose, as a regex over the whole name
    /// [default: none: those properties are ignored, with a warning].
    #[arg(long, env = "ALLOWED_GLUE_DATABASES")]
    pub allowed_glue_databases: Option<String>,
    /// The default Glue table name: folder (the folder's name), path (the whole path below
    /// the bucket) or unique-path (the path, plus a digest when it is not plain lower-case
    /// letters and digits, so no two locations of a bucket share a name).
    #[arg(long, env = "TABLE_NAME_FROM_PATH", default_value = "folder", value_parser = ["folder", "path", "unique-path"])]
    pub table_name_from_path: String,
    /// A new mirror of a table whose checkpoint holds more actions is bootstrapped in
    /// groups of about this many files, one group after another, from spill files in the
    /// temp folder (TMPDIR): memory stays near 2 KB per file of a group, not of the table.
    #[arg(long, env = "BOOTSTRAP_GROUP_FILES", default_value_t = fanout::BOOTSTRAP_GROUP_FILES, value_parser = clap::value_parser!(u64).range(1..))]
    pub bootstrap_group_files: u64,
    #[command(flatten)]
    pub history: HistoryArgs,
}

/// How much history each mirror keeps; the Delta table properties lakemirror.history.*
/// override these for their table.
#[derive(clap::Args, Clone, Copy)]
pub(crate) struct HistoryArgs {
    /// The newest this many Delta versions keep an Iceberg snapshot each (exact time travel);
    /// older ones are thinned to one snapshot per hour, then per day. The Delta table
    /// property lakemirror.history.recent-versions overrides it.
    #[arg(long, env = "HISTORY_RECENT_VERSIONS", default_value_t = history::DEFAULT_RECENT_VERSIONS, value_parser = clap::value_parser!(u64).range(1..))]
    pub history_recent_versions: u64,
    /// For how long before the newest commit the versions older than those keep one snapshot
    /// per UTC hour (the hour's last); older still, one per UTC day, until Delta's retention
    /// expires them. An interval such as '1 day', '12 hours', or 0. The Delta table property
    /// lakemirror.history.hourly-for overrides it.
    #[arg(long, env = "HISTORY_HOURLY_FOR", default_value = "1 day", value_parser = history::parse_hourly_for)]
    pub history_hourly_for: i64,
}

impl HistoryArgs {
    pub(crate) fn policy(&self) -> HistoryPolicy {
        HistoryPolicy {
            recent_versions: self.history_recent_versions,
            hourly_for_ms: self.history_hourly_for,
        }
    }
}

impl Args {
    /// The request these flags describe (`table_uri` empty with --discover).
    fn request(&self) -> Result<GlueSyncRequest> {
        let (allowed_databases, name_from) = naming(
            self.allowed_glue_databases.as_deref(),
            &self.table_name_from_path,
        )?;
        Ok(GlueSyncRequest {
            table: self.glue_table.clone(),
            metadata_uri: self.metadata_uri.clone(),
            to_version: self.to_version,
            format_version: format_version(&self.iceberg_format_version),
            on_missing_source: missing_source_action(&self.on_missing_source),
            allowed_databases,
            name_from,
            bootstrap_group_files: self.bootstrap_group_files,
            history: self.history.policy(),
            ..GlueSyncRequest::new(
                self.table_uri.clone().unwrap_or_default(),
                self.glue_database.clone(),
            )
        })
    }
}

/// 0: mirrored; 1: failed (with --discover: some table failed); 2: discovery failed.
pub(crate) async fn run(context: &Context, args: Args) -> ExitCode {
    let request = match args.request() {
        Ok(request) => request,
        Err(e) => {
            e.print();
            return ExitCode::FAILURE;
        }
    };
    if let Some(prefix) = &args.discover {
        return run_discover(
            context,
            prefix,
            &request,
            usize::from(args.concurrency),
            args.dry_run,
        )
        .await;
    }
    match sync_one(context, &request).await {
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

async fn sync_one(context: &Context, request: &GlueSyncRequest) -> Result<String> {
    let counters = Arc::new(IoCounters::default());
    let report = glue_sync(&context.lake(), request, counters).await?;
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

/// The naming policy of glue-sync's flags.
pub(crate) fn naming(
    allowed: Option<&str>,
    name_from: &str,
) -> Result<(Option<regex::Regex>, NameFrom)> {
    let allowed = allowed_names(allowed, "--allowed-glue-databases")?;
    Ok((allowed, name_from.parse().unwrap_or_default()))
}

/// keep or drop, as clap allows only those.
fn missing_source_action(value: &str) -> OnMissingSource {
    value.parse().unwrap_or_default()
}

/// The format version clap already checked to be "2" or "3".
pub(crate) fn format_version(value: &str) -> iceberg::spec::FormatVersion {
    lakemirror_plan::parse_format_version(value).unwrap_or(iceberg::spec::FormatVersion::V2)
}

/// Finds the Delta tables under `prefix` and mirrors each (or, with `dry_run`, lists them).
/// 0: every table mirrored, 1: some failed, 2: discovery failed.
async fn run_discover(
    context: &Context,
    prefix: &str,
    request: &GlueSyncRequest,
    concurrency: usize,
    dry_run: bool,
) -> ExitCode {
    use std::io::{IsTerminal, Write};
    let counters = Arc::new(IoCounters::default());
    let tables = match discover_tables(&context.stores, prefix, concurrency, &counters).await {
        Ok(tables) => tables,
        Err(e) => {
            Error::from(e).print();
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "found {} Delta table(s) under {prefix} ({} listing requests)",
        tables.len(),
        counters.totals().requests
    );
    if dry_run {
        let planned = match plan_names(&context.stores, &tables, request, &counters).await {
            Ok(planned) => planned,
            Err(e) => {
                Error::from(e).print();
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
    let lake = context.lake();
    let terminal = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let mut progress = Progress {
        total: tables.len(),
        done: 0,
        failed: 0,
        elapsed: std::time::Duration::ZERO,
    };
    let finished = backfill(&lake, &tables, request, concurrency, |done| {
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
                one_line(&e.to_string(), 100),
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
pub(crate) fn print_json(value: &serde_json::Value) -> ExitCode {
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
