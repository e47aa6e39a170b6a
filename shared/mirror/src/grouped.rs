//! A bootstrap in groups, in one process with bounded memory: a new mirror of a table whose
//! checkpoint holds more files than one read of the log may is written group of buckets by
//! group, each group a part of a fan-out ([`crate::fanout`]) run in this process, from spill
//! files on local disk.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use lakemirror_delta::{
    ActiveFileSet, Add, DeltaLog, DeltaSnapshot, FileAction, FileFilter, Metadata,
};
use lakemirror_iceberg::Error as IcebergError;
use lakemirror_iceberg::writer::{MetadataWriter, StagedTable, new_snapshot_id};
use lakemirror_plan::layout::{FanOutPart, bucket_count_for};
use lakemirror_plan::{data_file_location, plan_full_taking};
use lakemirror_storage::{TableScope, budget};

use crate::error::{Error, Result};

/// Files a bootstrap holds at once by default (`BOOTSTRAP_GROUP_FILES`): a table with more
/// is bootstrapped in groups of buckets, one group after another (about 2 KB of memory per
/// file held).
pub const BOOTSTRAP_GROUP_FILES: u64 = 250_000;

/// A bootstrap in groups of buckets, in one process with bounded memory: the log is read
/// twice holding no file, first to count the files (which fixes the buckets and groups),
/// then to write each file action to its group's spill file on local disk (in log order, so
/// a remove after the checkpoint still cancels its add); each group is then replayed from
/// its spill, planned and written as one part of a fan-out, and one snapshot of all groups
/// is staged as a new table.
pub struct GroupedBootstrap {
    /// The Delta table's root and what its log may name.
    scope: TableScope,
    /// The table at the version, without its files.
    snapshot: DeltaSnapshot,
    spill: SpillDir,
    files: u64,
    buckets: u32,
    groups: u32,
    /// Groups written at once (one per core, at most 4).
    at_once: usize,
}

impl GroupedBootstrap {
    pub async fn read(log: &DeltaLog, to_version: Option<i64>, group_files: u64) -> Result<Self> {
        let started = Instant::now();
        // The log is read filtered, once: a catalog-managed table is known before it.
        let log = &log.with_its_tail().await?;
        // A group holds no more than one read of the log may.
        let group_files = group_files.min(log.limits().held_files);
        let counted = Arc::new(AtomicU64::new(0));
        let counter = counted.clone();
        let count_only = FileFilter::adds(move |_| {
            counter.fetch_add(1, Ordering::Relaxed);
            false
        });
        let counting = log.snapshot_of(to_version, count_only).await?;
        let files = counted.load(Ordering::Relaxed);
        let buckets = bucket_count_for(files);
        // The files held at once are shared by the groups written at once.
        let at_once = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(1, 4));
        let per_group = (group_files / at_once as u64).max(1);
        let groups = u32::try_from(files.div_ceil(per_group))
            .unwrap_or(u32::MAX)
            .clamp(1, buckets);
        let spill = SpillDir::new(groups)?;
        let scope = log.table().scope().clone();
        let writers = spill.writers.clone();
        let failure: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
        let failed = failure.clone();
        let spilled = FileFilter::new(move |action| {
            // A path the plan refuses goes to group 0, whose plan reports it.
            let layout = FanOutPart {
                snapshot_id: 0,
                buckets,
                part: 0,
                parts: groups,
            };
            let group = data_file_location(&scope, action.path())
                .map_or(0, |location| layout.part_of(&location));
            let line = match action {
                FileAction::Add(add) => serde_json::to_vec(&SpilledRef::Add(add)),
                FileAction::Remove(path) => serde_json::to_vec(&SpilledRef::Remove(path)),
            };
            let written = line.map_err(|e| e.to_string()).and_then(|mut line| {
                line.push(b'\n');
                let mut writers = writers
                    .lock()
                    .map_err(|_| "spill writer poisoned".to_string())?;
                writers
                    .get_mut(group as usize)
                    .ok_or_else(|| format!("no spill file for group {group}"))?
                    .write_all(&line)
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = written
                && let Ok(mut slot) = failed.lock()
            {
                slot.get_or_insert(e);
            }
            false
        });
        let mut snapshot = log.snapshot_of(Some(counting.version), spilled).await?;
        // Each group is replayed into a copy of this set: with no filter, it holds them.
        snapshot.active.filter = None;
        if let Some(e) = failure.lock().ok().and_then(|mut slot| slot.take()) {
            return Err(Error::Spill {
                dir: spill.dir.display().to_string(),
                reason: format!(
                    "cannot be written: {e} (give it more local disk: TMPDIR, or Lambda's ephemeral storage)"
                ),
            });
        }
        spill.flush()?;
        tracing::info!(
            table = %log.table().root_uri(),
            files,
            buckets,
            groups,
            at_once,
            elapsed_s = started.elapsed().as_secs(),
            "read the log for a bootstrap in groups"
        );
        Ok(Self {
            scope: log.table().scope().clone(),
            snapshot,
            spill,
            files,
            buckets,
            groups,
            at_once,
        })
    }

    /// The Delta metadata at the version read.
    /// How the table was read: its log's tail, for a catalog-managed table.
    pub fn catalog_managed(&self) -> Option<&lakemirror_delta::CatalogManaged> {
        self.snapshot.catalog_managed.as_ref()
    }

    pub fn metadata(&self) -> Option<&Metadata> {
        self.snapshot.metadata()
    }

    /// Plans and writes each group ([`GroupedBootstrap::at_once`] at a time, each on its
    /// own thread: planning and manifest encoding are CPU work), then stages one snapshot of
    /// them all as a new table.
    pub async fn stage(&self, writer: &MetadataWriter) -> Result<StagedTable> {
        let snapshot_id = new_snapshot_id();
        let started = Instant::now();
        // The groups run on tasks of their own, within this work's share of the budget.
        let share = budget::current();
        let groups = (0..self.groups).map(|group| {
            let share = share.clone();
            let scope = self.scope.clone();
            let mut snapshot = self.snapshot.clone();
            let spill = self.spill.dir.clone();
            let writer = writer.clone();
            let part = FanOutPart {
                snapshot_id,
                buckets: self.buckets,
                part: group,
                parts: self.groups,
            };
            async move {
                let mut task = AbortOnDrop(tokio::spawn(budget::within(share, async move {
                    replay(&spill, group, &mut snapshot.active)?;
                    let planned =
                        plan_full_taking(&scope, None, snapshot, writer.format_version())?;
                    Ok::<_, Error>(writer.stage_part(planned, &part).await?)
                })));
                (&mut task.0).await.map_err(|e| {
                    Error::Iceberg(IcebergError::Bug(format!(
                        "group {group} of the bootstrap stopped: {e}"
                    )))
                })?
            }
        });
        let mut done = 0;
        let mut written = futures::stream::iter(groups).buffer_unordered(self.at_once);
        while let Some(part) = written.try_next().await? {
            done += 1;
            tracing::info!(
                group = part.part + 1,
                done,
                of = self.groups,
                files = part.files,
                elapsed_s = started.elapsed().as_secs(),
                "wrote a group of the bootstrap"
            );
        }
        let mut definition = plan_full_taking(
            &self.scope,
            None,
            self.snapshot.clone(),
            writer.format_version(),
        )?;
        definition.record_catalog(self.snapshot.catalog_managed.as_ref());
        let staged = writer
            .stage_parts(definition, snapshot_id, self.buckets, self.groups)
            .await?;
        tracing::info!(
            files = self.files,
            groups = self.groups,
            elapsed_s = started.elapsed().as_secs(),
            "staged the bootstrap in groups"
        );
        Ok(staged)
    }
}

/// A spawned task that is aborted when this is dropped: a bootstrap cut off at the
/// invocation's deadline (its future dropped) stops its groups instead of leaving them
/// writing after the function answered.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One file action in a group's spill file, as read back.
#[derive(Deserialize)]
enum Spilled {
    #[serde(rename = "a")]
    Add(Add),
    #[serde(rename = "r")]
    Remove(String),
}

/// [`Spilled`] as written, borrowing the action.
#[derive(Serialize)]
enum SpilledRef<'a> {
    #[serde(rename = "a")]
    Add(&'a Add),
    #[serde(rename = "r")]
    Remove(&'a str),
}

/// The spill files of a bootstrap in groups, one per group, in a folder of the local temp
/// directory that is deleted when this is dropped.
struct SpillDir {
    dir: std::path::PathBuf,
    writers: Arc<std::sync::Mutex<Vec<std::io::BufWriter<std::fs::File>>>>,
}

impl SpillDir {
    fn new(groups: u32) -> Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("lakemirror-bootstrap-{}", uuid::Uuid::new_v4()));
        let cannot = |e: std::io::Error| Error::Spill {
            dir: dir.display().to_string(),
            reason: format!("cannot be created: {e} (set TMPDIR to a writable folder)"),
        };
        std::fs::create_dir_all(&dir).map_err(cannot)?;
        let writers = (0..groups)
            .map(|g| {
                std::fs::File::create(dir.join(format!("group-{g}.jsonl")))
                    .map(|f| std::io::BufWriter::with_capacity(1 << 20, f))
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(cannot)?;
        Ok(Self {
            dir,
            writers: Arc::new(std::sync::Mutex::new(writers)),
        })
    }

    fn flush(&self) -> Result<()> {
        let mut writers = self.writers.lock().map_err(|_| {
            Error::Iceberg(IcebergError::Bug(
                "a spill writer was poisoned by a panic".into(),
            ))
        })?;
        for w in writers.iter_mut() {
            w.flush().map_err(|e| Error::Spill {
                dir: self.dir.display().to_string(),
                reason: format!("cannot be written: {e} (give it more local disk)"),
            })?;
        }
        Ok(())
    }
}

impl Drop for SpillDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not delete the bootstrap's spill files");
        }
    }
}

/// Applies group `group`'s file actions, in log order, to `active`.
fn replay(dir: &std::path::Path, group: u32, active: &mut ActiveFileSet) -> Result<()> {
    use std::io::BufRead;
    let path = dir.join(format!("group-{group}.jsonl"));
    let unreadable = |e: String| Error::Spill {
        dir: path.display().to_string(),
        reason: format!("cannot be read: {e}"),
    };
    let file = std::fs::File::open(&path).map_err(|e| unreadable(e.to_string()))?;
    for line in std::io::BufReader::with_capacity(1 << 20, file).lines() {
        let line = line.map_err(|e| unreadable(e.to_string()))?;
        match serde_json::from_str(&line).map_err(|e| unreadable(e.to_string()))? {
            Spilled::Add(add) => active.add(add),
            Spilled::Remove(path) => active.remove(&path),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_group_task_dropped_with_its_bootstrap_is_aborted() {
        let (held, released) = tokio::sync::oneshot::channel::<()>();
        let task = AbortOnDrop(tokio::spawn(async move {
            let _held = held;
            std::future::pending::<()>().await
        }));
        drop(task);
        // The task is gone, and what it held with it (a hang guard, not a timing check).
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), released).await;
        assert!(matches!(outcome, Ok(Err(_))), "{outcome:?}");
    }

    #[test]
    fn a_spilled_action_reads_back_as_it_was() {
        let line = r#"{"add":{"path":"p=a%20b/f.parquet","partitionValues":{"p":"a b","q":null},"size":7,"modificationTime":1,"dataChange":true,"stats":"{\"numRecords\":3}","deletionVector":{"storageType":"u","pathOrInlineDv":"ab^-aqEH.-t@S}K{vb[*k^","offset":4,"sizeInBytes":40,"cardinality":2}}}"#;
        let commit = lakemirror_delta::DeltaCommit::parse(1, line.as_bytes(), 0).unwrap();
        let add = &commit.adds[0];
        let spilled = serde_json::to_string(&SpilledRef::Add(add)).unwrap();
        match serde_json::from_str(&spilled).unwrap() {
            Spilled::Add(back) => assert_eq!(&back, add),
            Spilled::Remove(_) => panic!("an add read back as a remove"),
        }
        let spilled = serde_json::to_string(&SpilledRef::Remove("p=a%20b/f.parquet")).unwrap();
        assert!(
            matches!(serde_json::from_str(&spilled).unwrap(), Spilled::Remove(p) if p == "p=a%20b/f.parquet")
        );
    }
}
