//! `lakemirror verify`: a mirror proved equal to its Delta table at a version, from metadata
//! alone.

use std::process::ExitCode;
use std::sync::Arc;

use lakemirror_mirror::verify::{DEFAULT_MAX_DIFFERENCES, VerifyRequest, verify};
use lakemirror_storage::IoCounters;

use crate::{Context, Error};

/// The flags of `lakemirror verify`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The Delta table root (the folder holding _delta_log): s3://bucket/path, file:///path or a local path.
    #[arg(long, env = "TABLE_URI")]
    pub table_uri: String,
    /// Glue database of the mirror.
    #[arg(long, visible_alias = "database", env = "GLUE_DATABASE")]
    pub glue_database: String,
    /// Glue table of the mirror [default: the table folder's name, lower-cased, other
    /// characters as _, as glue-sync names it without lakemirror.glue.* properties].
    #[arg(long, visible_alias = "table", env = "GLUE_TABLE")]
    pub glue_table: Option<String>,
    /// Where the mirror's Iceberg metadata lives [default: <table-uri>/_lakemirror/iceberg].
    #[arg(long, env = "METADATA_URI")]
    pub metadata_uri: Option<String>,
    /// The Delta version to verify [default: the one the mirror's current snapshot
    /// mirrors]. Older versions verify while their snapshots are kept.
    #[arg(long)]
    pub version: Option<i64>,
    /// How many differences the report lists (all are counted).
    #[arg(long, default_value_t = DEFAULT_MAX_DIFFERENCES)]
    pub max_differences: usize,
}

/// 0: equal, 1: a difference, 2: could not verify.
pub(crate) async fn run(context: &Context, args: Args) -> ExitCode {
    let request = VerifyRequest {
        table_uri: args.table_uri,
        database: args.glue_database,
        table: args.glue_table,
        metadata_uri: args.metadata_uri,
        version: args.version,
        max_differences: args.max_differences,
    };
    let counters = Arc::new(IoCounters::default());
    let report = match verify(&context.lake(), &request, counters).await {
        Ok(report) => report,
        Err(e) => {
            Error::from(e).print();
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
