//! `lakemirror glue-sync`: one table (`--table-uri`) or every Delta table under a prefix
//! (`--discover`) mirrored into Glue.

use std::process::ExitCode;
use std::sync::Arc;

use lakemirror_mirror::discover::{
    Backfilled, PlannedMirror, Progress, backfill, discover_tables, plan_names,
};
use lakemirror_mirror::settings::{SETTINGS, Setting};
use lakemirror_mirror::status::{one_line, text_table};
use lakemirror_mirror::{SyncRequest, SyncSettings, sync_table};
use lakemirror_storage::IoCounters;
use std::collections::BTreeMap;

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

/// How a mirror is made: a flag per glue-sync setting, built from its one declaration
/// ([`SETTINGS`]: flag, environment variable, default, values, help) and read by the
/// function's own parser. Shared by sync and invoke glue-sync.
#[derive(Clone, Debug, Default)]
pub(crate) struct SyncArgs {
    values: BTreeMap<&'static str, String>,
}

/// What a new mirror is and what it is called: the settings a fanned-out bootstrap's plan
/// takes (those declared `of_new_table`).
#[derive(Clone, Debug, Default)]
pub(crate) struct TableArgs {
    values: BTreeMap<&'static str, String>,
}

/// The declared settings a command takes: all, or a new mirror's only.
fn declared(new_table_only: bool) -> impl Iterator<Item = &'static Setting> {
    SETTINGS
        .iter()
        .filter(move |s| !new_table_only || s.of_new_table)
}

/// The flag of `setting`: it reads the function's variable, shows the declared default and
/// values, and refuses a value the function would refuse.
fn flag(setting: &'static Setting) -> clap::Arg {
    let arg = clap::Arg::new(setting.name)
        .long(setting.flag().trim_start_matches('-').to_string())
        .env(setting.name)
        .help(setting.help)
        .default_value(setting.default);
    if setting.values.is_empty() {
        arg.value_parser(move |value: &str| setting.check(value).map(|()| value.to_string()))
    } else {
        arg.value_parser(clap::builder::PossibleValuesParser::new(setting.values))
    }
}

fn with_flags(command: clap::Command, new_table_only: bool) -> clap::Command {
    declared(new_table_only).fold(command, |command, setting| command.arg(flag(setting)))
}

fn values_of(matches: &clap::ArgMatches, new_table_only: bool) -> BTreeMap<&'static str, String> {
    declared(new_table_only)
        .filter_map(|s| Some((s.name, matches.get_one::<String>(s.name)?.clone())))
        .collect()
}

macro_rules! setting_args {
    ($args:ty, $new_table_only:expr) => {
        impl clap::Args for $args {
            fn augment_args(command: clap::Command) -> clap::Command {
                with_flags(command, $new_table_only)
            }
            fn augment_args_for_update(command: clap::Command) -> clap::Command {
                with_flags(command, $new_table_only)
            }
        }

        impl clap::FromArgMatches for $args {
            fn from_arg_matches(
                matches: &clap::ArgMatches,
            ) -> std::result::Result<Self, clap::Error> {
                Ok(Self {
                    values: values_of(matches, $new_table_only),
                })
            }
            fn update_from_arg_matches(
                &mut self,
                matches: &clap::ArgMatches,
            ) -> std::result::Result<(), clap::Error> {
                self.values.extend(values_of(matches, $new_table_only));
                Ok(())
            }
        }

        impl $args {
            /// The settings these flags (or their environment variables) give; the others
            /// at their defaults.
            pub(crate) fn settings(&self) -> Result<SyncSettings> {
                Ok(SyncSettings::from_settings(&|name| {
                    self.values.get(name).cloned()
                })?)
            }
        }
    };
}

setting_args!(SyncArgs, false);
setting_args!(TableArgs, true);

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
        print_dry_run(&planned);
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
    print_results(&finished);
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

/// The tables a dry run would mirror, and the Glue table each would take, as a table on
/// stderr.
fn print_dry_run(planned: &[PlannedMirror]) {
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
}

/// What the back-fill did to each table, as a table on stderr.
fn print_results(finished: &[Backfilled]) {
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
    use lakemirror_mirror::settings::SETTINGS;

    use super::{SyncArgs, TableArgs};

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        sync: SyncArgs,
    }

    #[derive(Parser)]
    struct NewTableFlags {
        #[command(flatten)]
        table: TableArgs,
    }

    fn read_variables(command: &clap::Command) -> Vec<String> {
        command
            .get_arguments()
            .filter_map(|a| a.get_env())
            .map(|env| env.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn each_declared_setting_is_a_flag_reading_its_variable_and_a_new_tables_only_its_own() {
        let all: Vec<&str> = SETTINGS.iter().map(|s| s.name).collect();
        assert_eq!(read_variables(&Flags::command()), all);
        let of_new_table: Vec<&str> = SETTINGS
            .iter()
            .filter(|s| s.of_new_table)
            .map(|s| s.name)
            .collect();
        assert_eq!(read_variables(&NewTableFlags::command()), of_new_table);
        for argument in Flags::command().get_arguments() {
            let env = argument.get_env().unwrap().to_string_lossy().into_owned();
            let flag = format!("--{}", argument.get_long().unwrap());
            assert_eq!(crate::error::flag_of(&env).as_deref(), Some(flag.as_str()));
        }
    }

    #[test]
    fn a_value_the_function_would_refuse_is_refused_by_the_flag() {
        for (flag, value) in [
            ("--iceberg-format-version", "4"),
            ("--bootstrap-group-files", "0"),
            ("--history-recent-versions", "none"),
            ("--history-hourly-for", "soon"),
            ("--table-name-from-path", "random"),
            ("--allowed-glue-databases", "("),
        ] {
            assert!(
                Flags::try_parse_from(["lakemirror", flag, value]).is_err(),
                "{flag} {value}"
            );
        }
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
        assert_eq!(
            flags.sync.settings().unwrap().bootstrap_group_files,
            250_000
        );
    }
}
