//! `lakemirror status`: which mirrors are behind or failing.

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;

use lakemirror_aws::DeadLetterQueue;
use lakemirror_mirror::status::{status, table_text};
use lakemirror_storage::IoCounters;

use crate::{Context, Error};

/// The flags of `lakemirror status`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Glue database of the mirrors.
    #[arg(long, visible_alias = "database", env = "GLUE_DATABASE")]
    pub glue_database: String,
    /// Only mirrors of Delta tables under these roots (s3://bucket/prefix, comma-separated).
    #[arg(long, env = "TABLE_PREFIXES", value_delimiter = ',')]
    pub table_prefixes: Vec<String>,
    /// The glue-sync dead-letter queue's URL, for each table's last error.
    #[arg(long, env = "DEAD_LETTER_QUEUE_URL")]
    pub dead_letter_queue_url: Option<String>,
    /// Print one JSON document ({"tables": [...]}) instead of the text table.
    #[arg(long)]
    pub json: bool,
}

/// 0: the status was read (whatever it says), 2: it could not be.
pub(crate) async fn run(context: &Context, args: Args) -> ExitCode {
    let counters = Arc::new(IoCounters::default());
    let parked = match &args.dead_letter_queue_url {
        Some(url) => match DeadLetterQueue::new(&context.aws, url.clone())
            .last_errors()
            .await
        {
            Ok(parked) => parked,
            Err(e) => {
                Error::from(e).print();
                return ExitCode::from(2);
            }
        },
        None => HashMap::new(),
    };
    let database = &args.glue_database;
    let statuses = match status(
        &context.lake(),
        database,
        &args.table_prefixes,
        &parked,
        &counters,
    )
    .await
    {
        Ok(statuses) => statuses,
        Err(e) => {
            Error::from(e).print();
            return ExitCode::from(2);
        }
    };
    if args.json {
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
        println!("{}", table_text(&statuses));
    }
    ExitCode::SUCCESS
}
