//! `lakemirror glue-sync`: one table (`--table-uri`) or every Delta table under a prefix
//! (`--discover`) mirrored into Glue.

use std::process::ExitCode;
use std::sync::Arc;

use lakemirror_mirror::discover::{Progress, backfill, discover_tables, plan_names};
use lakemirror_mirror::status::{one_line, text_table};
use lakemirror_mirror::{SyncRequest, SyncSettings, fanout, sync_table};
use lakemirror_plan::history;
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
    #[command(flatten)]
    pub sync: SyncArgs,
}

/// How a mirror is made, as the glue-sync function's settings of the same names say (one
/// parser for both: `SyncSettings::from_settings`). Shared by glue-sync and invoke
/// glue-sync; fan-out plan takes the new table's part ([`TableArgs`]).
#[derive(clap::Args, Clone)]
pub(crate) struct SyncArgs {
    #[command(flatten)]
    pub table: TableArgs,
    /// When the Delta table is gone (no _delta_log with a commit or checkpoint) but its
    /// Glue table is there: keep (fail with "source table missing" and leave the Glue
    /// table as it is) or drop (delete the Glue table; the Iceberg metadata files stay).
    #[arg(long, env = "ON_MISSING_SOURCE", default_value = "keep", value_parser = ["keep", "drop"])]
    pub on_missing_source: String,
    /// A new mirror of a table whose checkpoint holds more actions is bootstrapped in
    /// groups of about this many files, one group after another, from spill files in the
    /// temp folder (TMPDIR): memory stays near 2 KB per file of a group, not of the table.
    #[arg(long, env = "BOOTSTRAP_GROUP_FILES", default_value_t = fanout::BOOTSTRAP_GROUP_FILES, value_parser = clap::value_parser!(u64).range(1..))]
    pub bootstrap_group_files: u64,
    /// The newest this many Delta versions keep an Iceberg snapshot each (exact time travel);
    /// older ones are thinned to one snapshot per hour, then per day. The Delta table
    /// property lakemirror.history.recent-versions overrides it.
    #[arg(long, env = "HISTORY_RECENT_VERSIONS", default_value_t = history::DEFAULT_RECENT_VERSIONS, value_parser = clap::value_parser!(u64).range(1..))]
    pub history_recent_versions: u64,
    /// For how long before the newest commit the versions older than those keep one snapshot
    /// per UTC hour (the hour's last); older still, one per UTC day, until Delta's retention
    /// expires them. An interval such as '1 day', '12 hours', or 0. The Delta table property
    /// lakemirror.history.hourly-for overrides it.
    #[arg(long, env = "HISTORY_HOURLY_FOR", default_value = "1 day", value_parser = valid(history::parse_hourly_for))]
    pub history_hourly_for: String,
}

/// What a new mirror is and what it is called: the settings a fanned-out bootstrap's plan
/// takes too.
#[derive(clap::Args, Clone)]
pub(crate) struct TableArgs {
    /// Iceberg format version of a newly created mirror: 2 (deletion vectors become
    /// position-delete files; Athena reads it) or 3 (Puffin deletion vectors). The Delta
    /// table property lakemirror.iceberg.format-version overrides it; an existing mirror
    /// keeps its version.
    #[arg(long, env = "ICEBERG_FORMAT_VERSION", default_value = "2", value_parser = ["2", "3"])]
    pub iceberg_format_version: String,
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
}

/// A clap parser that checks a value with `parse` and keeps its text (for the one parser,
/// `SyncSettings::from_settings`, that reads it).
fn valid<T>(
    parse: fn(&str) -> std::result::Result<T, String>,
) -> impl Fn(&str) -> std::result::Result<String, String> + Clone {
    move |value| parse(value).map(|_| value.to_string())
}

impl SyncArgs {
    /// The settings these flags (or their environment variables) give.
    pub(crate) fn settings(&self) -> Result<SyncSettings> {
        let mut values = self.table.values();
        values.extend([
            ("ON_MISSING_SOURCE", Some(self.on_missing_source.clone())),
            (
                "BOOTSTRAP_GROUP_FILES",
                Some(self.bootstrap_group_files.to_string()),
            ),
            (
                "HISTORY_RECENT_VERSIONS",
                Some(self.history_recent_versions.to_string()),
            ),
            ("HISTORY_HOURLY_FOR", Some(self.history_hourly_for.clone())),
        ]);
        settings_of(&values)
    }
}

impl TableArgs {
    /// The settings these flags give; the others at their defaults.
    pub(crate) fn settings(&self) -> Result<SyncSettings> {
        settings_of(&self.values())
    }

    /// The flags' values by setting name.
    fn values(&self) -> Vec<(&'static str, Option<String>)> {
        vec![
            (
                "ICEBERG_FORMAT_VERSION",
                Some(self.iceberg_format_version.clone()),
            ),
            (
                "ALLOWED_GLUE_DATABASES",
                self.allowed_glue_databases.clone(),
            ),
            (
                "TABLE_NAME_FROM_PATH",
                Some(self.table_name_from_path.clone()),
            ),
        ]
    }
}

/// The function's parser over flag values by setting name.
fn settings_of(values: &[(&str, Option<String>)]) -> Result<SyncSettings> {
    Ok(SyncSettings::from_settings(&|name| {
        values
            .iter()
            .find(|(known, _)| *known == name)
            .and_then(|(_, value)| value.clone())
    })?)
}

impl Args {
    /// The request these flags describe (`table_uri` empty with --discover).
    fn request(&self) -> Result<SyncRequest> {
        Ok(SyncRequest {
            table: self.glue_table.clone(),
            metadata_uri: self.metadata_uri.clone(),
            to_version: self.to_version,
            ..self.sync.settings()?.request(
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

async fn sync_one(context: &Context, request: &SyncRequest) -> Result<String> {
    let counters = Arc::new(IoCounters::default());
    let report = sync_table(&context.lake(), request, counters).await?;
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

/// Finds the Delta tables under `prefix` and mirrors each (or, with `dry_run`, lists them).
/// 0: every table mirrored, 1: some failed, 2: discovery failed.
async fn run_discover(
    context: &Context,
    prefix: &str,
    request: &SyncRequest,
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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};
    use lakemirror_mirror::SyncSettings;

    use super::SyncArgs;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        sync: SyncArgs,
    }

    #[test]
    fn each_flag_reads_the_functions_setting_of_the_same_name() {
        let command = Flags::command();
        let read: Vec<String> = command
            .get_arguments()
            .filter_map(|a| a.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .collect();
        let mut expected = SyncSettings::VARIABLES.to_vec();
        let mut read: Vec<&str> = read.iter().map(String::as_str).collect();
        expected.sort_unstable();
        read.sort_unstable();
        assert_eq!(read, expected);
        for argument in command.get_arguments().filter(|a| a.get_long().is_some()) {
            let flag = format!("--{}", argument.get_long().unwrap());
            let env = argument.get_env().unwrap().to_string_lossy().into_owned();
            assert_eq!(crate::error::flag_of(&env), Some(flag.as_str()), "{env}");
        }
    }

    #[test]
    fn the_flags_defaults_are_the_functions_defaults() {
        // From the declared defaults, not a parse: a parse would read the environment.
        let command = Flags::command();
        let defaults: Vec<(String, String)> = command
            .get_arguments()
            .filter_map(|a| {
                let env = a.get_env()?.to_string_lossy().into_owned();
                let value = a
                    .get_default_values()
                    .first()?
                    .to_string_lossy()
                    .into_owned();
                Some((env, value))
            })
            .collect();
        let settings = SyncSettings::from_settings(&|name| {
            defaults
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        })
        .unwrap();
        assert_eq!(
            format!("{settings:?}"),
            format!("{:?}", SyncSettings::default())
        );
    }

    #[test]
    fn flags_reach_the_settings() {
        let flags = Flags::try_parse_from([
            "lakemirror",
            "--iceberg-format-version",
            "3",
            "--history-hourly-for",
            "2 hours",
            "--allowed-glue-databases",
            "team_.*",
        ])
        .unwrap();
        let settings = flags.sync.settings().unwrap();
        assert_eq!(settings.format_version, iceberg::spec::FormatVersion::V3);
        assert_eq!(settings.history.hourly_for_ms, 2 * 3_600_000);
        assert!(settings.allowed_databases.unwrap().is_match("team_x"));
        assert!(Flags::try_parse_from(["lakemirror", "--history-hourly-for", "soon"]).is_err());
    }
}
