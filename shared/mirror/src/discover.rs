//! `lakemirror glue-sync --discover`: find every Delta table under a prefix and mirror
//! each, for the tables that existed before the stack.
//!
//! Discovery walks folders with delimited listings, which name sub-folders and never the
//! objects below them. A folder holding `_delta_log/` is a table, and the walk does not
//! enter it (its data folders are never listed). Hidden folders (`_…`, `.…`) and Hive
//! partition folders (`key=value`, the data of a table that is not Delta) are not entered.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;

use lakemirror_delta::DeltaLog;
use lakemirror_plan::target::{NamedBy, TargetProperties};
use lakemirror_storage::{IoCounters, ObjectStores, SharedOut, budget};

use crate::error::{Error, Result};
use crate::sync::{SyncReport, SyncRequest, sync_table, target_defaults};
use lakemirror_iceberg::catalog::Lakehouse;

/// Folder levels below the prefix that discovery walks at most.
pub const MAX_DEPTH: usize = 32;

/// The Delta tables under `prefix` (the prefix itself when it is one), in URI order.
/// `concurrency` listings run at once.
pub async fn discover_tables(
    stores: &ObjectStores,
    prefix: &str,
    concurrency: usize,
    counters: &Arc<IoCounters>,
) -> Result<Vec<String>> {
    let store = stores.open(prefix, counters.clone())?;
    let mut tables = Vec::new();
    let mut level = vec![store.root_uri().to_string()];
    for _ in 0..=MAX_DEPTH {
        if level.is_empty() {
            break;
        }
        let listed: Vec<(String, lakemirror_storage::Result<Vec<String>>)> =
            futures::stream::iter(level)
                .map(|folder| {
                    let store = store.clone();
                    async move {
                        let children = store.list_folders(&folder).await;
                        (folder, children)
                    }
                })
                .buffer_unordered(concurrency.max(1))
                .collect()
                .await;
        let mut next = Vec::new();
        for (folder, children) in listed {
            let children = children.map_err(|e| Error::Discovery {
                folder: folder.clone(),
                source: e,
            })?;
            if children.iter().any(|c| folder_name(c) == "_delta_log") {
                tables.push(folder);
            } else {
                next.extend(
                    children
                        .into_iter()
                        .filter(|c| worth_entering(folder_name(c))),
                );
            }
        }
        level = next;
    }
    tables.sort();
    Ok(tables)
}

fn folder_name(location: &str) -> &str {
    location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or_default()
}

/// Whether a folder may hold a Delta table: not hidden, not a Hive partition.
fn worth_entering(name: &str) -> bool {
    !(name.starts_with('_') || name.starts_with('.') || name.contains('='))
}

/// The Glue table a discovered table would be mirrored into.
#[derive(Debug, Clone, Serialize)]
pub struct PlannedMirror {
    pub table_uri: String,
    pub glue_table: String,
    pub named_by: NamedBy,
    /// Other discovered tables that would be mirrored into the same Glue table (only the
    /// first to sync gets it; `--table-name-from-path path` names each by its whole path).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub collides_with: Vec<String>,
}

/// Where each table would be mirrored. The Delta tables' `lakemirror.glue.*` properties
/// are read only when the request lets tables choose (`allowed_databases`).
pub async fn plan_names(
    stores: &ObjectStores,
    tables: &[String],
    request: &SyncRequest,
    counters: &Arc<IoCounters>,
) -> Result<Vec<PlannedMirror>> {
    let mut planned = Vec::new();
    for table_uri in tables {
        let request = SyncRequest {
            table_uri: table_uri.clone(),
            ..request.clone()
        };
        let defaults = target_defaults(&request);
        let properties = match (&request.settings.allowed_databases, defaults.fixed()) {
            (Some(_), None) => {
                let log = DeltaLog::new(stores.open(table_uri, counters.clone())?);
                match log.snapshot(None).await {
                    Ok(snapshot) => TargetProperties::of(snapshot.metadata()),
                    Err(_) => TargetProperties::default(),
                }
            }
            _ => TargetProperties::default(),
        };
        let (target, named_by) = defaults.resolve(&properties)?;
        planned.push(PlannedMirror {
            table_uri: table_uri.clone(),
            glue_table: format!("{}.{}", target.database, target.table),
            named_by,
            collides_with: Vec::new(),
        });
    }
    let names: Vec<(String, String)> = planned
        .iter()
        .map(|p| (p.glue_table.clone(), p.table_uri.clone()))
        .collect();
    for p in &mut planned {
        p.collides_with = names
            .iter()
            .filter(|(name, uri)| *name == p.glue_table && *uri != p.table_uri)
            .map(|(_, uri)| uri.clone())
            .collect();
    }
    Ok(planned)
}

/// One discovered table's sync.
#[derive(Debug)]
pub struct Backfilled {
    pub table_uri: String,
    pub outcome: Result<SyncReport>,
}

/// Mirrors each table with `request` (its `table_uri` replaced), `concurrency` at once;
/// `on_done` sees each table as it finishes. Every table is tried.
pub async fn backfill(
    lake: &Lakehouse,
    tables: &[String],
    request: &SyncRequest,
    concurrency: usize,
    mut on_done: impl FnMut(&Backfilled),
) -> Vec<Backfilled> {
    let mut finished = Vec::new();
    // Each table within its part of the memory budget (alone when it needs all of it).
    let shared = &SharedOut::new(budget::current(), concurrency.max(1));
    let mut syncs = futures::stream::iter(tables)
        .map(|table_uri| async move {
            let request = SyncRequest {
                table_uri: table_uri.clone(),
                ..request.clone()
            };
            let outcome = shared
                .run(
                    || sync_table(lake, &request, Arc::new(IoCounters::default())),
                    Error::needs_whole_budget,
                )
                .await;
            Backfilled {
                table_uri: table_uri.clone(),
                outcome,
            }
        })
        .buffer_unordered(concurrency.max(1));
    while let Some(done) = syncs.next().await {
        on_done(&done);
        finished.push(done);
    }
    finished.sort_by(|a, b| a.table_uri.cmp(&b.table_uri));
    finished
}

/// Progress of a back-fill, as one line.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub total: usize,
    pub done: usize,
    pub failed: usize,
    pub elapsed: Duration,
}

impl Progress {
    /// `[#########...........] 9/20 tables  1 failed  0:42 elapsed  ETA 0:51`
    pub fn bar(&self) -> String {
        const WIDTH: usize = 20;
        let filled = (self.done * WIDTH).checked_div(self.total).unwrap_or(WIDTH);
        let eta = match self.done {
            0 => "ETA -".to_string(),
            done if done >= self.total => "done".to_string(),
            done => {
                let per_table = self.elapsed.as_secs_f64() / done as f64;
                let left = per_table * (self.total - done) as f64;
                format!("ETA {}", clock(Duration::from_secs_f64(left)))
            }
        };
        format!(
            "[{}{}] {}/{} tables  {} failed  {} elapsed  {}",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            self.done,
            self.total,
            self.failed,
            clock(self.elapsed),
            eta
        )
    }
}

/// `m:ss`, or `h:mm:ss` from an hour.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s % 3600) / 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_that_may_hold_tables_are_entered() {
        assert!(worth_entering("orders"));
        assert!(worth_entering("sales-2026"));
        for skipped in [
            "_lakemirror",
            "_spark_metadata",
            ".hidden",
            "day=2026-12-01",
        ] {
            assert!(!worth_entering(skipped), "{skipped}");
        }
        assert_eq!(folder_name("s3://lake/a/_delta_log"), "_delta_log");
        assert_eq!(folder_name("file:///x/orders/"), "orders");
    }

    #[test]
    fn progress_reads_done_of_total_with_an_estimate() {
        let p = Progress {
            total: 20,
            done: 9,
            failed: 1,
            elapsed: Duration::from_secs(42),
        };
        assert_eq!(
            p.bar(),
            "[#########...........] 9/20 tables  1 failed  0:42 elapsed  ETA 0:51"
        );
        let start = Progress {
            done: 0,
            failed: 0,
            elapsed: Duration::ZERO,
            ..p
        };
        assert!(start.bar().ends_with("ETA -"), "{}", start.bar());
        let end = Progress { done: 20, ..p };
        assert!(end.bar().starts_with("[####################] 20/20"));
        assert!(end.bar().ends_with("done"));
        let none = Progress {
            total: 0,
            done: 0,
            ..p
        };
        assert!(none.bar().contains("0/0 tables"));
    }

    #[tokio::test]
    async fn tables_are_found_without_entering_them() {
        let root = std::env::temp_dir().join(format!("lakemirror-{}", uuid::Uuid::new_v4()));
        for dir in [
            "sales/orders/_delta_log",
            "sales/orders/nested/_delta_log",
            "sales/orders/day=1",
            "sales/returns/_delta_log",
            "raw/events/day=1/hour=2",
            "_lakemirror/ghost/_delta_log",
            "top/_delta_log",
        ] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join("x"), b"x").unwrap();
        }
        let counters = Arc::new(IoCounters::default());
        let found = discover_tables(
            &ObjectStores::in_memory(),
            root.to_str().unwrap(),
            4,
            &counters,
        )
        .await
        .unwrap();
        let names: Vec<String> = found
            .iter()
            .map(|t| {
                t.rsplit_once(root.file_name().unwrap().to_str().unwrap())
                    .unwrap()
                    .1
                    .to_string()
            })
            .collect();
        assert_eq!(names, ["/sales/orders", "/sales/returns", "/top"]);
        // root, raw, sales, top, _-less children: raw/events, sales/orders, sales/returns.
        assert_eq!(counters.totals().requests, 7);
        let table = discover_tables(&ObjectStores::in_memory(), found[0].as_str(), 4, &counters)
            .await
            .unwrap();
        assert_eq!(
            table,
            [found[0].clone()],
            "a prefix that is a table is that table"
        );
        std::fs::remove_dir_all(root).unwrap();
    }
}
