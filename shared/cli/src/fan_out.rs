//! `lakemirror fan-out plan|part|finish`: one very large mirror bootstrapped in parts that
//! run in parallel (processes here, a Step Functions Distributed Map in AWS).

use std::sync::Arc;

use clap::Subcommand;
use lakemirror_mirror::SyncRequest;
use lakemirror_mirror::fanout::{self, FanOutPlan};
use lakemirror_storage::IoCounters;

use crate::sync::TableArgs;
use crate::{Context, Error, Result};

#[derive(Subcommand)]
pub(crate) enum Step {
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
        #[command(flatten)]
        table: TableArgs,
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

/// One step of a fanned-out bootstrap.
pub(crate) async fn run(context: &Context, step: Step) -> Result<String> {
    let counters = Arc::new(IoCounters::default());
    let read_plan = |path: &std::path::Path| -> Result<FanOutPlan> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Usage(format!("--plan {}: {e}", path.display())))?;
        serde_json::from_str(text.trim()).map_err(|e| {
            Error::Usage(format!(
                "--plan {}: not a plan `lakemirror fan-out plan` printed: {e}",
                path.display()
            ))
        })
    };
    match step {
        Step::Plan {
            table_uri,
            parts,
            glue_database,
            glue_table,
            metadata_uri,
            to_version,
            table,
        } => {
            let request = SyncRequest {
                table: glue_table,
                metadata_uri,
                to_version,
                ..table.settings()?.request(table_uri, glue_database)
            };
            let plan = fanout::plan(&context.lake(), &request, parts, counters).await?;
            eprintln!(
                "{}.{}: Delta version {}, {} files in {} buckets, {} parts",
                plan.database, plan.table, plan.delta_version, plan.files, plan.buckets, plan.parts
            );
            Ok(serde_json::to_string(&plan)?)
        }
        Step::Part { plan, part } => {
            let plan = read_plan(&plan)?;
            let written = fanout::run_part(&context.lake(), &plan, part, counters).await?;
            Ok(serde_json::to_string(&written)?)
        }
        Step::Finish { plan } => {
            let plan = read_plan(&plan)?;
            let report = fanout::finish(&context.lake(), &plan, counters).await?;
            Ok(serde_json::to_string(&report)?)
        }
    }
}
