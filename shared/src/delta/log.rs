//! The `_delta_log` folder on storage: which versions exist, commits and checkpoints.
//!
//! Only `_delta_log/` is ever listed; data files come from the log alone.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt, stream};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::{Field, Row};
use serde::Deserialize;
use serde_json::Value;

use super::actions::{ActionLine, DeltaCommit, Metadata, Protocol};
use super::replay::{ActiveFileSet, FileFilter};
use crate::error::{Error, Result};
use crate::storage::TableStorage;

/// Commit files read at once.
const FETCH_CONCURRENCY: usize = 16;
/// The largest commit file read into memory (a commit of a million files with stats is
/// about 1 GB): above it the sync stops with a clear error instead of running out of memory
/// and holding up every other table of its batch.
pub const MAX_COMMIT_BYTES: u64 = 512 * 1024 * 1024;

/// What a file in `_delta_log/` is, judged by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFileKind {
    Commit(i64),
    /// Classic checkpoint; `parts` is `Some((part, of))` for multi-part checkpoints.
    Checkpoint {
        version: i64,
        parts: Option<(u32, u32)>,
    },
    /// UUID-named (v2) checkpoint.
    V2Checkpoint(i64),
    /// `.crc`, `_last_checkpoint`, compacted logs, temporary files, sidecars...
    Other,
}

/// Classifies a file name (the last path segment) in `_delta_log/`.
pub fn classify(name: &str) -> LogFileKind {
    let Some((digits, rest)) = name.split_at_checked(20) else {
        return LogFileKind::Other;
    };
    let Ok(version) = digits.parse::<i64>() else {
        return LogFileKind::Other;
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return LogFileKind::Other;
    }
    match rest {
        ".json" => LogFileKind::Commit(version),
        ".checkpoint.parquet" => LogFileKind::Checkpoint {
            version,
            parts: None,
        },
        _ => {
            let Some(tail) = rest.strip_prefix(".checkpoint.") else {
                return LogFileKind::Other;
            };
            let stem = tail
                .strip_suffix(".parquet")
                .or_else(|| tail.strip_suffix(".json"));
            let Some(stem) = stem else {
                return LogFileKind::Other;
            };
            let numbers: Vec<_> = stem.split('.').collect();
            match numbers.as_slice() {
                [part, of] if tail.ends_with(".parquet") => match (part.parse(), of.parse()) {
                    (Ok(part), Ok(of)) => LogFileKind::Checkpoint {
                        version,
                        parts: Some((part, of)),
                    },
                    _ => LogFileKind::Other,
                },
                [_uuid] => LogFileKind::V2Checkpoint(version),
                _ => LogFileKind::Other,
            }
        }
    }
}

/// The table at one version, rebuilt from a checkpoint and commits.
#[derive(Debug, Clone)]
pub struct DeltaSnapshot {
    pub version: i64,
    pub timestamp_ms: i64,
    pub active: ActiveFileSet,
    /// [`DeltaCommit::content_hash`] of commit `version`, when it was read (not when the
    /// version exists only as a checkpoint).
    pub commit_hash: Option<u64>,
}

impl DeltaSnapshot {
    pub fn metadata(&self) -> Option<&Metadata> {
        self.active.metadata.as_ref()
    }
    pub fn protocol(&self) -> Option<&Protocol> {
        self.active.protocol.as_ref()
    }
}

/// Commits found after a version.
#[derive(Debug)]
pub enum CommitsSince {
    /// Every commit from the next version up to the target, in order (maybe none).
    Contiguous(Vec<DeltaCommit>),
    /// The commit right after the version is gone (log cleanup): rebuild from a checkpoint.
    Gap { first_available: Option<i64> },
}

#[derive(Deserialize)]
struct LastCheckpoint {
    version: i64,
    /// Actions in the checkpoint (optional in the protocol).
    size: Option<u64>,
}

/// Reads the `_delta_log` of one table.
#[derive(Debug, Clone)]
pub struct DeltaLog {
    table: TableStorage,
}

impl DeltaLog {
    pub fn new(table: TableStorage) -> Self {
        Self { table }
    }

    pub fn table(&self) -> &TableStorage {
        &self.table
    }

    fn log_dir(&self) -> String {
        self.table.location("_delta_log/")
    }

    fn log_file(&self, name: &str) -> String {
        self.table.location(&format!("_delta_log/{name}"))
    }

    /// The location of the commit file of `version`.
    pub fn commit_file(&self, version: i64) -> String {
        self.log_file(&format!("{version:020}.json"))
    }

    fn malformed(&self, reason: impl std::fmt::Display) -> Error {
        Error::malformed(self.table.root_uri(), reason)
    }

    /// Log files after version `after` (all when None), classified, in version order.
    async fn list(
        &self,
        after: Option<i64>,
    ) -> Result<Vec<(LogFileKind, object_store::ObjectMeta)>> {
        // Keys sort by their zero-padded version, so `<after>.zzz` sorts after every file
        // of version `after` and before those of `after + 1`.
        let offset = after.map(|v| self.log_file(&format!("{v:020}.zzz")));
        let listed = self
            .table
            .list_after(&self.log_dir(), offset.as_deref())
            .await?;
        Ok(listed
            .into_iter()
            .filter_map(|meta| {
                let name = meta.location.filename()?.to_string();
                // Only direct children of _delta_log (not _sidecars/, _commits/).
                let parent_is_log = meta.location.as_ref().rsplit('/').nth(1) == Some("_delta_log");
                let kind = classify(&name);
                (parent_is_log && kind != LogFileKind::Other).then_some((kind, meta))
            })
            .collect())
    }

    async fn read_commit(
        &self,
        version: i64,
        meta: &object_store::ObjectMeta,
    ) -> Result<DeltaCommit> {
        let location = self.table.location_of_key(&meta.location);
        let (bytes, _) = self
            .table
            .get_at_most(&location, MAX_COMMIT_BYTES)
            .await?
            .ok_or_else(|| self.malformed(format!("commit {version} vanished while reading")))?;
        DeltaCommit::parse(version, &bytes, meta.last_modified.timestamp_millis())
            .map_err(|reason| self.malformed(reason))
    }

    /// The commits after `version` up to `target` (newest when None). `known` is a version
    /// the log is known to hold (the commit an event announced): without a target, the
    /// commits up to it are read and newer ones are left to their own events.
    ///
    /// Commit files are fetched by name and the log is listed only when a name is missing
    /// (nothing new, or cleaned up) or more than one commit is new and nothing bounds them:
    /// a LIST costs more than a GET on S3, and some stores list in time that grows with
    /// the bucket, while the usual sync has one new commit.
    pub async fn commits_since(
        &self,
        version: i64,
        target: Option<i64>,
        known: Option<i64>,
    ) -> Result<CommitsSince> {
        if target.is_some_and(|t| t <= version) {
            return Ok(CommitsSince::Contiguous(Vec::new()));
        }
        let named = target.or(known.filter(|k| *k > version));
        if let Some(last) = named {
            if let Some(commits) = self.fetch_commits(version + 1, last).await? {
                return Ok(CommitsSince::Contiguous(commits));
            }
        } else if let Some(first) = self.fetch_commit(version + 1).await? {
            let Some(second) = self.fetch_commit(version + 2).await? else {
                return Ok(CommitsSince::Contiguous(vec![first]));
            };
            // Catching up on several commits: list the rest.
            if let CommitsSince::Contiguous(rest) =
                self.listed_commits_since(version + 2, None).await?
            {
                return Ok(CommitsSince::Contiguous(
                    [first, second].into_iter().chain(rest).collect(),
                ));
            }
        }
        self.listed_commits_since(version, target).await
    }

    /// Commit `version`, if its file exists.
    async fn fetch_commit(&self, version: i64) -> Result<Option<DeltaCommit>> {
        let location = self.log_file(&format!("{version:020}.json"));
        let Some((bytes, meta)) = self.table.get_at_most(&location, MAX_COMMIT_BYTES).await? else {
            return Ok(None);
        };
        DeltaCommit::parse(version, &bytes, meta.last_modified.timestamp_millis())
            .map(Some)
            .map_err(|reason| self.malformed(reason))
    }

    /// Commits `first..=last`, fetched by name; None when one of them does not exist.
    async fn fetch_commits(&self, first: i64, last: i64) -> Result<Option<Vec<DeltaCommit>>> {
        let fetched: Vec<Option<DeltaCommit>> = stream::iter(first..=last)
            .map(|v| self.fetch_commit(v))
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(fetched.into_iter().collect())
    }

    /// [`Self::commits_since`] from a listing of the log.
    async fn listed_commits_since(
        &self,
        version: i64,
        target: Option<i64>,
    ) -> Result<CommitsSince> {
        let listed = self.list(Some(version)).await?;
        let mut wanted = Vec::new();
        let mut expected = version + 1;
        for (kind, meta) in &listed {
            let LogFileKind::Commit(v) = *kind else {
                continue;
            };
            if target.is_some_and(|t| v > t) {
                break;
            }
            if v != expected {
                if wanted.is_empty() {
                    return Ok(CommitsSince::Gap {
                        first_available: Some(v),
                    });
                }
                return Err(self.malformed(format!("commit {expected} is missing but {v} exists")));
            }
            wanted.push((v, meta));
            expected += 1;
        }
        // A checkpoint past `version` without the commits before it: they were cleaned up.
        let in_range = |v: i64| v > version && target.is_none_or(|t| v <= t);
        if wanted.is_empty()
            && listed.iter().any(|(kind, _)| match *kind {
                LogFileKind::Checkpoint { version: v, .. } | LogFileKind::V2Checkpoint(v) => {
                    in_range(v)
                }
                _ => false,
            })
        {
            return Ok(CommitsSince::Gap {
                first_available: None,
            });
        }
        let commits: Vec<DeltaCommit> = stream::iter(wanted)
            .map(|(v, meta)| self.read_commit(v, meta))
            .buffered(FETCH_CONCURRENCY)
            .try_collect()
            .await?;
        if let Some(t) = target
            && commits.last().map(|c| c.version) != Some(t)
        {
            return Err(Error::InvalidInput(format!(
                "Delta version {t} of {} does not exist (newest is {})",
                self.table.root_uri(),
                commits.last().map_or(version, |c| c.version)
            )));
        }
        Ok(CommitsSince::Contiguous(commits))
    }

    /// Rebuilds the table at `target` (newest when None) from the newest complete
    /// checkpoint at or before it plus the JSON commits after that checkpoint.
    pub async fn snapshot(&self, target: Option<i64>) -> Result<DeltaSnapshot> {
        self.rebuild(target, Reading::Everything, ActiveFileSet::default())
            .await
    }

    /// [`Self::snapshot`] holding only the data files `filter` keeps (one part of a
    /// fanned-out bootstrap): the others are let go as they are read.
    pub async fn snapshot_of(
        &self,
        target: Option<i64>,
        filter: FileFilter,
    ) -> Result<DeltaSnapshot> {
        self.rebuild(target, Reading::Everything, ActiveFileSet::filtered(filter))
            .await
    }

    /// The newest version's metaData and protocol, without its files: of a Parquet
    /// checkpoint only the footer and those two columns are read (ranged requests), so the
    /// cost does not grow with the number of files in the table.
    pub async fn definition(&self) -> Result<TableDefinition> {
        let snapshot = self
            .rebuild(None, Reading::Definition, ActiveFileSet::default())
            .await?;
        match (snapshot.active.metadata, snapshot.active.protocol) {
            (Some(metadata), Some(protocol)) => Ok(TableDefinition {
                version: snapshot.version,
                metadata,
                protocol,
            }),
            _ => Err(self.malformed("no metaData or protocol action")),
        }
    }

    async fn rebuild(
        &self,
        target: Option<i64>,
        reading: Reading,
        mut active: ActiveFileSet,
    ) -> Result<DeltaSnapshot> {
        // `_last_checkpoint` is a hint that lets us list only the tail of the log.
        let hint = match target {
            None => self.last_checkpoint_version().await?,
            Some(_) => None,
        };
        let mut listed = self.list(hint.map(|v| v - 1)).await?;
        let has_base = |files: &[(LogFileKind, object_store::ObjectMeta)]| {
            files.iter().any(|(k, _)| {
                matches!(
                    k,
                    LogFileKind::Checkpoint { .. }
                        | LogFileKind::V2Checkpoint(_)
                        | LogFileKind::Commit(0)
                )
            })
        };
        if hint.is_some() && !has_base(&listed) {
            tracing::warn!(
                table = self.table.root_uri(),
                "_last_checkpoint points to a missing checkpoint; reading the whole log"
            );
            listed = self.list(None).await?;
        }
        // A version whose commit was cleaned up but whose checkpoint is there still counts.
        let newest = listed
            .iter()
            .filter_map(|(k, _)| match k {
                LogFileKind::Commit(v) => Some(*v),
                _ => None,
            })
            .chain(newest_complete_checkpoint(&listed, target.unwrap_or(i64::MAX)).map(|(v, _)| v))
            .filter(|v| target.is_none_or(|t| *v <= t))
            .max();
        let Some(version) = newest else {
            // With a target there was no hint, so `listed` is the whole log.
            return Err(match target {
                Some(t) if !listed.is_empty() => Error::InvalidInput(format!(
                    "Delta version {t} of {} is not in the log",
                    self.table.root_uri()
                )),
                _ => Error::NotADeltaTable(self.table.root_uri().to_string()),
            });
        };
        if let Some(t) = target
            && t != version
        {
            return Err(Error::InvalidInput(format!(
                "Delta version {t} of {} does not exist (newest is {version})",
                self.table.root_uri()
            )));
        }

        let checkpoint = newest_complete_checkpoint(&listed, version);
        let start = match &checkpoint {
            Some((cp_version, parts)) => {
                let started = std::time::Instant::now();
                for (n, meta) in parts.iter().enumerate() {
                    self.read_checkpoint_part(meta, &mut active, reading)
                        .await?;
                    // A large checkpoint reports each part read (a line per stage in
                    // Lambda's log, progress on the CLI's stderr).
                    if reading == Reading::Everything && started.elapsed() >= PROGRESS_AFTER {
                        tracing::info!(
                            table = self.table.root_uri(),
                            part = n + 1,
                            of = parts.len(),
                            files = active.files.len(),
                            elapsed_s = started.elapsed().as_secs(),
                            "read the checkpoint"
                        );
                    }
                }
                cp_version + 1
            }
            None => 0,
        };
        let mut timestamp_ms = 0;
        let mut commit_hash = None;
        for v in start..=version {
            let meta = listed
                .iter()
                .find_map(|(k, m)| (*k == LogFileKind::Commit(v)).then_some(m))
                .ok_or_else(|| {
                    self.malformed(format!(
                        "commit {v} is missing and no checkpoint covers it (log cleaned up without a checkpoint?)"
                    ))
                })?;
            let commit = self.read_commit(v, meta).await?;
            timestamp_ms = commit.timestamp_ms;
            commit_hash = Some(commit.content_hash);
            active.apply(&commit);
        }
        if start > version {
            // The snapshot is the checkpoint itself: take the time of its commit if listed.
            timestamp_ms = listed
                .iter()
                .find_map(|(k, m)| {
                    matches!(k, LogFileKind::Checkpoint { version: cv, .. } | LogFileKind::V2Checkpoint(cv) if *cv == version)
                        .then_some(m)
                })
                .map_or(0, |m| m.last_modified.timestamp_millis());
        }
        if active.metadata.is_none() || active.protocol.is_none() {
            return Err(self.malformed(format!(
                "no metaData or protocol action up to version {version}"
            )));
        }
        Ok(DeltaSnapshot {
            version,
            timestamp_ms,
            active,
            commit_hash,
        })
    }

    /// [`DeltaCommit::content_hash`] of commit `version`; None when its file is gone.
    pub async fn commit_hash(&self, version: i64) -> Result<Option<u64>> {
        let location = self.log_file(&format!("{version:020}.json"));
        Ok(self
            .table
            .get_if_exists(&location)
            .await?
            .map(|bytes| super::actions::content_hash(&bytes)))
    }

    /// The oldest version the log can rebuild the table at: 0 when its commit is there, else
    /// the oldest complete checkpoint with every commit after it up to the newest.
    pub async fn oldest_version(&self) -> Result<i64> {
        let listed = self.list(None).await?;
        let commits: std::collections::BTreeSet<i64> = listed
            .iter()
            .filter_map(|(k, _)| match k {
                LogFileKind::Commit(v) => Some(*v),
                _ => None,
            })
            .collect();
        let newest = commits.last().copied();
        let contiguous_after =
            |start: i64| newest.is_none_or(|n| (start + 1..=n).all(|v| commits.contains(&v)));
        if commits.contains(&0) && contiguous_after(0) {
            return Ok(0);
        }
        let mut checkpoints: Vec<i64> = listed
            .iter()
            .filter_map(|(k, _)| match *k {
                LogFileKind::Checkpoint { version, .. } | LogFileKind::V2Checkpoint(version) => {
                    Some(version)
                }
                _ => None,
            })
            .collect();
        checkpoints.sort_unstable();
        checkpoints.dedup();
        checkpoints
            .into_iter()
            .find(|v| {
                newest_complete_checkpoint(&listed, *v).is_some_and(|(cp, _)| cp == *v)
                    && contiguous_after(*v)
            })
            .ok_or_else(|| Error::NotADeltaTable(self.table.root_uri().to_string()))
    }

    /// The number of actions `_last_checkpoint` says its checkpoint holds (about one per
    /// data file of a large table), when it says.
    pub async fn last_checkpoint_size(&self) -> Result<Option<u64>> {
        Ok(self.last_checkpoint().await?.and_then(|hint| hint.size))
    }

    /// The version `_last_checkpoint` names (a hint: the checkpoint may be incomplete).
    pub async fn last_checkpoint_version(&self) -> Result<Option<i64>> {
        Ok(self.last_checkpoint().await?.map(|hint| hint.version))
    }

    async fn last_checkpoint(&self) -> Result<Option<LastCheckpoint>> {
        let Some(bytes) = self
            .table
            .get_if_exists(&self.log_file("_last_checkpoint"))
            .await?
        else {
            return Ok(None);
        };
        match serde_json::from_slice::<LastCheckpoint>(&bytes) {
            Ok(hint) => Ok(Some(hint)),
            Err(e) => {
                tracing::warn!(table = self.table.root_uri(), error = %e, "_last_checkpoint is unreadable; reading the whole log");
                Ok(None)
            }
        }
    }

    async fn read_checkpoint_part(
        &self,
        meta: &object_store::ObjectMeta,
        active: &mut ActiveFileSet,
        reading: Reading,
    ) -> Result<()> {
        let location = self.table.location_of_key(&meta.location);
        // A v2 checkpoint keeps its file actions in sidecars (metaData and protocol never).
        let mut sidecars: Vec<String> = Vec::new();
        // Applies one action; answers the sidecar it names.
        let mut apply = |line: ActionLine| -> Option<String> {
            if let Some(add) = line.add {
                active.add(add);
            }
            if let Some(m) = line.meta_data {
                active.metadata = Some(m);
            }
            if let Some(p) = line.protocol {
                active.protocol = Some(p);
            }
            line.sidecar
                .filter(|_| reading == Reading::Everything)
                .map(|sidecar| sidecar.path)
        };
        let mut apply_part = |line: ActionLine| sidecars.extend(apply(line));
        // Rows are applied as they are decoded: the checkpoint is never held as actions.
        if location.ends_with(".json") {
            let (bytes, _) = self.table.get(&location).await?;
            json_actions(&bytes)
                .map_err(|e| self.malformed(format!("checkpoint {location}: {e}")))?
                .into_iter()
                .for_each(&mut apply_part);
        } else if reading == Reading::Definition {
            self.checkpoint_definition(&location, meta.size)
                .await?
                .map_err(|e| self.malformed(format!("checkpoint {location}: {e}")))?
                .into_iter()
                .for_each(&mut apply_part);
        } else {
            let (bytes, _) = self.table.get(&location).await?;
            for_each_checkpoint_action(bytes, &mut apply_part)
                .map_err(|e| self.malformed(format!("checkpoint {location}: {e}")))?;
        }
        for path in sidecars {
            let sidecar = if path.contains("://") {
                path
            } else {
                self.log_file(&format!("_sidecars/{path}"))
            };
            let (bytes, _) = self.table.get(&sidecar).await?;
            for_each_checkpoint_action(bytes, |line| {
                apply(line);
            })
            .map_err(|e| self.malformed(format!("sidecar {sidecar}: {e}")))?;
        }
        Ok(())
    }

    /// The metaData and protocol rows of a Parquet checkpoint: its footer and the chunks of
    /// those two columns, by ranged reads. The file actions, the bulk of it, stay unread.
    async fn checkpoint_definition(
        &self,
        location: &str,
        size: u64,
    ) -> Result<std::result::Result<Vec<ActionLine>, String>> {
        if size < 12 {
            return Ok(Err("too small to be Parquet".into()));
        }
        // One read usually holds the whole footer.
        let tail_start = size.saturating_sub(TAIL_READ);
        let tail = self.table.get_range(location, tail_start..size).await?;
        let footer_start = match footer_start(&tail, size) {
            Ok(start) => start,
            Err(e) => return Ok(Err(e)),
        };
        let footer = if footer_start < tail_start {
            self.table.get_range(location, footer_start..size).await?
        } else {
            tail.slice((footer_start - tail_start) as usize..)
        };
        let ranges = match definition_chunk_ranges(&footer, footer_start) {
            Ok(ranges) => ranges,
            Err(e) => return Ok(Err(e)),
        };
        let mut parts = stream::iter(ranges)
            .map(|range| async move {
                let start = range.start;
                self.table
                    .get_range(location, range)
                    .await
                    .map(|bytes| (start, bytes))
            })
            .buffered(FETCH_CONCURRENCY)
            .try_collect::<Vec<_>>()
            .await?;
        parts.push((footer_start, footer));
        Ok(definition_actions(SparseFile { len: size, parts }))
    }
}

/// Reading a checkpoint for longer than this reports its progress.
const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// Bytes read from a checkpoint's end at first: a footer is rarely bigger.
const TAIL_READ: u64 = 64 * 1024;

/// The checkpoint columns that hold a table's definition.
const DEFINITION_COLUMNS: [&str; 2] = ["metaData", "protocol"];

/// What a snapshot reads of its checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    Everything,
    /// metaData and protocol only.
    Definition,
}

/// A table's schema, properties and protocol at one version, without its files.
#[derive(Debug, Clone)]
pub struct TableDefinition {
    pub version: i64,
    pub metadata: Metadata,
    pub protocol: Protocol,
}

/// Some byte ranges of a Parquet file, at their offsets: enough to decode the columns whose
/// chunks are present. Reading anywhere else is an error, never a silent read.
#[derive(Debug)]
pub struct SparseFile {
    pub len: u64,
    pub parts: Vec<(u64, Bytes)>,
}

impl SparseFile {
    /// The part holding `start`, from `start` to the part's end.
    fn from(&self, start: u64) -> parquet::errors::Result<Bytes> {
        self.parts
            .iter()
            .find_map(|(at, bytes)| {
                let from = usize::try_from(start.checked_sub(*at)?).ok()?;
                (from < bytes.len()).then(|| bytes.slice(from..))
            })
            .ok_or_else(|| {
                parquet::errors::ParquetError::General(format!(
                    "byte {start} of the checkpoint was not read"
                ))
            })
    }
}

impl parquet::file::reader::Length for SparseFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl parquet::file::reader::ChunkReader for SparseFile {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self.from(start)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let bytes = self.from(start)?;
        if length > bytes.len() {
            return Err(parquet::errors::ParquetError::General(format!(
                "bytes {start}..+{length} of the checkpoint were not read"
            )));
        }
        Ok(bytes.slice(..length))
    }
}

/// Where the footer of a Parquet file of `size` bytes starts, from the file's last bytes.
fn footer_start(tail: &[u8], size: u64) -> std::result::Result<u64, String> {
    crate::parquet_footer::metadata_range(tail, size).map(|range| range.start)
}

/// The byte ranges of the metaData and protocol column chunks. `footer` is the file from
/// `footer_start` to its end.
fn definition_chunk_ranges(
    footer: &[u8],
    footer_start: u64,
) -> std::result::Result<Vec<std::ops::Range<u64>>, String> {
    let metadata_bytes = &footer[..footer.len().saturating_sub(8)];
    crate::parquet_footer::check_metadata(metadata_bytes)
        .map_err(|e| format!("corrupt Parquet footer: {e}"))?;
    let metadata = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(metadata_bytes)
        .map_err(|e| e.to_string())?;
    let mut ranges = Vec::new();
    for row_group in metadata.row_groups() {
        for column in row_group.columns() {
            let top = column.column_path().parts().first().map(String::as_str);
            if top.is_some_and(|t| DEFINITION_COLUMNS.contains(&t)) {
                let (start, len) = column.byte_range();
                let end = start
                    .checked_add(len)
                    .filter(|end| *end <= footer_start)
                    .ok_or("a column chunk lies outside the file")?;
                ranges.push(start..end);
            }
        }
    }
    Ok(coalesce(ranges, COALESCE_GAP))
}

/// Ranges closer than this are read in one request: a struct's leaf columns lie side by side.
const COALESCE_GAP: u64 = 4096;

/// `ranges` sorted and merged where they overlap or lie within `gap` bytes of each other.
fn coalesce(mut ranges: Vec<std::ops::Range<u64>>, gap: u64) -> Vec<std::ops::Range<u64>> {
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<std::ops::Range<u64>> = Vec::with_capacity(ranges.len());
    for range in ranges {
        match merged.last_mut() {
            Some(last) if range.start <= last.end.saturating_add(gap) => {
                last.end = last.end.max(range.end);
            }
            _ => merged.push(range),
        }
    }
    merged
}

/// The metaData and protocol rows of a checkpoint held whole in memory, decoded as ranged
/// reads see it: only the footer and those columns' chunks reach the decoder.
pub fn definition_actions_of(bytes: Bytes) -> std::result::Result<Vec<ActionLine>, String> {
    let size = bytes.len() as u64;
    let start = footer_start(&bytes, size)?;
    // Both fit in memory: `start` and every range end lie within `bytes`.
    let at = |offset: u64| offset as usize;
    let ranges = definition_chunk_ranges(&bytes[at(start)..], start)?;
    let mut parts: Vec<(u64, Bytes)> = ranges
        .iter()
        .map(|r| (r.start, bytes.slice(at(r.start)..at(r.end))))
        .collect();
    parts.push((start, bytes.slice(at(start)..)));
    definition_actions(SparseFile { len: size, parts })
}

/// The metaData and protocol rows of a checkpoint of which `file` holds the footer and
/// those columns' chunks.
pub fn definition_actions(file: SparseFile) -> std::result::Result<Vec<ActionLine>, String> {
    use parquet::schema::types::Type;
    let reader = SerializedFileReader::new(file).map_err(|e| e.to_string())?;
    let root = reader.metadata().file_metadata().schema();
    let fields: Vec<_> = root
        .get_fields()
        .iter()
        .filter(|f| DEFINITION_COLUMNS.contains(&f.name()))
        .cloned()
        .collect();
    let projection = Type::group_type_builder(root.name())
        .with_fields(fields)
        .build()
        .map_err(|e| e.to_string())?;
    let rows = reader
        .get_row_iter(Some(projection))
        .map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    for row in rows {
        let row = row.map_err(|e| e.to_string())?;
        let line: ActionLine =
            serde_json::from_value(row_to_json(&row)).map_err(|e| e.to_string())?;
        if line.meta_data.is_some() || line.protocol.is_some() {
            lines.push(line);
        }
    }
    Ok(lines)
}

/// The newest checkpoint at or before `version` whose parts are all present.
fn newest_complete_checkpoint(
    listed: &[(LogFileKind, object_store::ObjectMeta)],
    version: i64,
) -> Option<(i64, Vec<object_store::ObjectMeta>)> {
    let mut candidates: Vec<i64> = listed
        .iter()
        .filter_map(|(k, _)| match k {
            LogFileKind::Checkpoint { version: v, .. } | LogFileKind::V2Checkpoint(v)
                if *v <= version =>
            {
                Some(*v)
            }
            _ => None,
        })
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates.into_iter().rev().find_map(|cv| {
        // One file holds the whole checkpoint: classic single-file, or v2 (UUID-named).
        let single = listed.iter().find(|(k, _)| {
            *k == LogFileKind::Checkpoint {
                version: cv,
                parts: None,
            } || *k == LogFileKind::V2Checkpoint(cv)
        });
        if let Some((_, meta)) = single {
            return Some((cv, vec![meta.clone()]));
        }
        // Multi-part: take the first `of` for which every part 1..=of is listed.
        let mut parts: Vec<(u32, u32, object_store::ObjectMeta)> = listed
            .iter()
            .filter_map(|(k, m)| match k {
                LogFileKind::Checkpoint {
                    version: v,
                    parts: Some((p, of)),
                } if *v == cv => Some((*p, *of, m.clone())),
                _ => None,
            })
            .collect();
        parts.sort_by_key(|(p, of, _)| (*of, *p));
        let total = parts.first().map(|(_, of, _)| *of)?;
        let of_total: Vec<_> = parts
            .into_iter()
            .filter(|(_, of, _)| *of == total)
            .collect();
        let complete = of_total.len() == total as usize
            && of_total
                .iter()
                .enumerate()
                .all(|(i, (p, _, _))| *p as usize == i + 1);
        complete.then(|| (cv, of_total.into_iter().map(|(_, _, m)| m).collect()))
    })
}

/// Reads a JSON checkpoint (v2): one action per line, as in a commit.
pub fn json_actions(bytes: &[u8]) -> Result<Vec<ActionLine>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| e.to_string()))
        .collect()
}

/// Reads a Parquet checkpoint (classic, v2 or sidecar) into action lines.
pub fn checkpoint_actions(bytes: Bytes) -> Result<Vec<ActionLine>, String> {
    let mut lines = Vec::new();
    for_each_checkpoint_action(bytes, |line| lines.push(line))?;
    Ok(lines)
}

/// The checkpoint columns a snapshot reads: file actions, the table's definition, and a v2
/// checkpoint's sidecars. Tombstones (`remove`), `txn` and `domainMetadata` are not decoded.
const SNAPSHOT_COLUMNS: [&str; 4] = ["add", "metaData", "protocol", "sidecar"];

/// Hands each action of a Parquet checkpoint (classic, v2 or sidecar) to `each` as it is
/// decoded, reading only [`SNAPSHOT_COLUMNS`].
pub fn for_each_checkpoint_action(
    bytes: Bytes,
    mut each: impl FnMut(ActionLine),
) -> Result<(), String> {
    // A Parquet file starts and ends with PAR1. Checked before the footer is decoded: the
    // parquet crate's footer decoder allocates whatever a corrupt footer declares (found by
    // fuzzing: 34 bytes ending in a 9-byte "footer" asked for gigabytes).
    let magic = b"PAR1";
    if bytes.len() < 12 || !bytes.starts_with(magic) || !bytes.ends_with(magic) {
        return Err("not a Parquet file (PAR1 missing at the start or end)".into());
    }
    crate::parquet_footer::check(&bytes).map_err(|e| format!("corrupt Parquet footer: {e}"))?;
    let reader = SerializedFileReader::new(bytes).map_err(|e| e.to_string())?;
    let schema = reader.metadata().file_metadata().schema();
    let projection = parquet::schema::types::Type::group_type_builder(schema.name())
        .with_fields(
            schema
                .get_fields()
                .iter()
                .filter(|f| SNAPSHOT_COLUMNS.contains(&f.name()))
                .cloned()
                .collect(),
        )
        .build()
        .map_err(|e| e.to_string())?;
    let rows = reader
        .get_row_iter(Some(projection))
        .map_err(|e| e.to_string())?;
    for row in rows {
        let row = row.map_err(|e| e.to_string())?;
        let mut line: ActionLine =
            serde_json::from_value(row_to_json(&row)).map_err(|e| e.to_string())?;
        // Written with `delta.checkpoint.writeStatsAsJson=false`, a checkpoint keeps the
        // stats only as a struct: read it rather than every data file's footer.
        if let Some(add) = line.add.as_mut()
            && add.stats.is_none()
        {
            add.stats = stats_from_parsed(&row);
        }
        each(line);
    }
    Ok(())
}

/// `add.stats_parsed` of a checkpoint row as the JSON `add.stats` would hold: dates as
/// `YYYY-MM-DD`. Values whose JSON form differs otherwise (timestamps, decimals, binary)
/// are left out, so that they prove no bounds rather than wrong ones.
fn stats_from_parsed(row: &Row) -> Option<String> {
    let group = |row: &Row, name: &str| -> Option<Row> {
        row.get_column_iter().find_map(|(n, f)| match f {
            Field::Group(inner) if n == name => Some(inner.clone()),
            _ => None,
        })
    };
    let parsed = group(&group(row, "add")?, "stats_parsed")?;
    Some(stats_object(&parsed).to_string())
}

fn stats_object(row: &Row) -> Value {
    Value::Object(
        row.get_column_iter()
            .filter_map(|(name, field)| {
                let value = match field {
                    Field::Group(inner) => stats_object(inner),
                    Field::Date(days) => Value::String(
                        chrono::NaiveDate::default()
                            .checked_add_signed(chrono::Duration::days(i64::from(*days)))?
                            .format("%Y-%m-%d")
                            .to_string(),
                    ),
                    Field::TimestampMillis(_) | Field::TimestampMicros(_) => return None,
                    other => field_to_json(other),
                };
                (!value.is_null()).then(|| (name.clone(), value))
            })
            .collect(),
    )
}

/// A checkpoint row as the JSON object the same action has in a commit file.
fn row_to_json(row: &Row) -> Value {
    Value::Object(
        row.get_column_iter()
            .map(|(name, field)| (name.clone(), field_to_json(field)))
            .collect(),
    )
}

fn field_to_json(field: &Field) -> Value {
    match field {
        Field::Null => Value::Null,
        Field::Bool(b) => Value::Bool(*b),
        Field::Byte(n) => Value::from(*n),
        Field::Short(n) => Value::from(*n),
        Field::Int(n) => Value::from(*n),
        Field::Long(n) => Value::from(*n),
        Field::UByte(n) => Value::from(*n),
        Field::UShort(n) => Value::from(*n),
        Field::UInt(n) => Value::from(*n),
        Field::ULong(n) => Value::from(*n),
        Field::Float(x) => Value::from(*x),
        Field::Double(x) => Value::from(*x),
        Field::Str(s) => Value::String(s.clone()),
        Field::Date(d) => Value::from(*d),
        Field::TimestampMillis(t) => Value::from(*t),
        Field::TimestampMicros(t) => Value::from(*t),
        Field::Group(row) => row_to_json(row),
        Field::ListInternal(list) => {
            Value::Array(list.elements().iter().map(field_to_json).collect())
        }
        Field::MapInternal(map) => Value::Object(
            map.entries()
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Field::Str(s) => s.clone(),
                        other => field_to_json(other).to_string(),
                    };
                    (key, field_to_json(v))
                })
                .collect(),
        ),
        // Not used by the actions lakemirror reads.
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_not_parquet_are_refused_before_the_footer_is_decoded() {
        // Found by tests/fuzz (target checkpoint): decoding this "footer" ran out of memory.
        let oom = Bytes::from_static(b"\x7b\x2b\x22\x34\xef\xda\xf6\x29\x5c\x22\x49\x49\x49\x33\x22\x29\x5c\x2b\xf6\xca\xf6\xf6\x0d\x00\xff\xbf\x09\x00\x00\x00\x50\x41\x52\x31");
        let err = checkpoint_actions(oom).unwrap_err();
        assert!(err.contains("not a Parquet file"), "{err}");
        assert!(checkpoint_actions(Bytes::from_static(b"PAR1PAR1")).is_err());
        assert!(checkpoint_actions(Bytes::new()).is_err());
    }

    #[test]
    fn a_parquet_footer_declaring_more_than_it_holds_is_refused_before_decoding() {
        // Found by tests/fuzz (target checkpoint): PAR1 at both ends, and a key-value list
        // the parquet crate reserved ~4.6 GB for, aborting the process.
        for oom in [
            &include_bytes!("../testdata/oom-key-value-list.parquet")[..],
            &include_bytes!("../testdata/oom-key-value-list-typed-bool.parquet")[..],
        ] {
            let err = checkpoint_actions(Bytes::from_static(oom)).unwrap_err();
            assert!(err.contains("corrupt Parquet footer"), "{err}");
        }
    }

    /// A checkpoint as Spark lays it out: one row per action, one struct column per kind;
    /// the protocol and metaData rows first, then `adds` add rows.
    fn checkpoint(adds: usize) -> Vec<u8> {
        use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray, StructArray};
        use arrow_schema::{DataType, Field};
        use std::sync::Arc;
        let rows = adds + 2;
        let strings = |f: &dyn Fn(usize) -> Option<String>| -> ArrayRef {
            Arc::new(StringArray::from((0..rows).map(f).collect::<Vec<_>>()))
        };
        let nulls_but = |row: usize| {
            arrow_buffer::NullBuffer::from((0..rows).map(|r| r == row).collect::<Vec<_>>())
        };
        let protocol = StructArray::new(
            vec![Field::new("minReaderVersion", DataType::Int32, true)].into(),
            vec![Arc::new(Int32Array::from(
                (0..rows).map(|r| (r == 0).then_some(1)).collect::<Vec<_>>(),
            )) as ArrayRef],
            Some(nulls_but(0)),
        );
        let schema = r#"{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}"#;
        let meta_data = StructArray::new(
            vec![Field::new("schemaString", DataType::Utf8, true)].into(),
            vec![strings(&|r| (r == 1).then(|| schema.to_string()))],
            Some(nulls_but(1)),
        );
        let add = StructArray::new(
            vec![Field::new("path", DataType::Utf8, true)].into(),
            vec![strings(&|r| {
                (r >= 2).then(|| format!("part-{r:05}-a-long-name-as-spark-writes.parquet"))
            })],
            Some(arrow_buffer::NullBuffer::from(
                (0..rows).map(|r| r >= 2).collect::<Vec<_>>(),
            )),
        );
        let batch = RecordBatch::try_from_iter([
            ("protocol", Arc::new(protocol) as ArrayRef),
            ("metaData", Arc::new(meta_data) as ArrayRef),
            ("add", Arc::new(add) as ArrayRef),
        ])
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        bytes
    }

    #[test]
    fn only_the_columns_a_snapshot_needs_are_decoded() {
        use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, StructArray};
        use std::sync::Arc;
        let add = StructArray::new(
            vec![
                arrow_schema::Field::new("path", arrow_schema::DataType::Utf8, true),
                arrow_schema::Field::new("size", arrow_schema::DataType::Int64, true),
            ]
            .into(),
            vec![
                Arc::new(StringArray::from(vec![Some("a.parquet"), None])) as ArrayRef,
                Arc::new(Int64Array::from(vec![Some(10), None])),
            ],
            Some(arrow_buffer::NullBuffer::from(vec![true, false])),
        );
        // Not even an action: decoding this column would fail the whole checkpoint.
        let remove = StringArray::from(vec![None, Some("a tombstone lakemirror never reads")]);
        let batch = RecordBatch::try_from_iter([
            ("add", Arc::new(add) as ArrayRef),
            ("remove", Arc::new(remove) as ArrayRef),
        ])
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let mut paths = Vec::new();
        for_each_checkpoint_action(Bytes::from(bytes), |line| {
            paths.extend(line.add.map(|a| a.path));
        })
        .unwrap();
        assert_eq!(paths, ["a.parquet"]);
    }

    #[test]
    fn a_checkpoints_definition_is_read_from_its_footer_and_two_column_chunks() {
        let bytes = Bytes::from(checkpoint(20_000));
        let size = bytes.len() as u64;
        let start = footer_start(&bytes, size).unwrap();
        let ranges = definition_chunk_ranges(&bytes[start as usize..], start).unwrap();
        let read = size - start + ranges.iter().map(|r| r.end - r.start).sum::<u64>();
        assert!(read * 20 < size, "read {read} of {size} bytes");

        let lines = definition_actions_of(bytes.clone()).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].protocol.as_ref().unwrap().min_reader_version, 1);
        assert!(
            lines[1]
                .meta_data
                .as_ref()
                .unwrap()
                .schema_string
                .contains("\"id\"")
        );
        let whole = SerializedFileReader::new(bytes).unwrap();
        assert_eq!(whole.metadata().file_metadata().num_rows(), 20_002);
    }

    #[test]
    fn stats_kept_only_as_a_struct_are_read_from_the_checkpoint() {
        use arrow_array::{
            ArrayRef, Date32Array, Int64Array, RecordBatch, StringArray, StructArray,
            TimestampMicrosecondArray,
        };
        use arrow_schema::{DataType, Field, Fields, TimeUnit};
        use std::sync::Arc;
        let columns = |id: i64, day: i32, at: i64| {
            let fields: Fields = vec![
                Field::new("id", DataType::Int64, true),
                Field::new("day", DataType::Date32, true),
                Field::new("at", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            ]
            .into();
            StructArray::new(
                fields,
                vec![
                    Arc::new(Int64Array::from(vec![id])) as ArrayRef,
                    Arc::new(Date32Array::from(vec![day])),
                    Arc::new(TimestampMicrosecondArray::from(vec![at])),
                ],
                None,
            )
        };
        let min = columns(1, 19_723, 0);
        let max = columns(9, 19_724, 1);
        let parsed = StructArray::try_from(vec![
            (
                "numRecords",
                Arc::new(Int64Array::from(vec![3])) as ArrayRef,
            ),
            ("minValues", Arc::new(min) as ArrayRef),
            ("maxValues", Arc::new(max) as ArrayRef),
        ])
        .unwrap();
        let add = StructArray::try_from(vec![
            (
                "path",
                Arc::new(StringArray::from(vec!["part-0.parquet"])) as ArrayRef,
            ),
            ("size", Arc::new(Int64Array::from(vec![10]))),
            ("stats", Arc::new(StringArray::from(vec![None::<&str>]))),
            ("stats_parsed", Arc::new(parsed)),
        ])
        .unwrap();
        let batch = RecordBatch::try_from_iter([("add", Arc::new(add) as ArrayRef)]).unwrap();
        let mut bytes = Vec::new();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();

        let lines = checkpoint_actions(Bytes::from(bytes)).unwrap();
        let stats: Value =
            serde_json::from_str(lines[0].add.as_ref().unwrap().stats.as_deref().unwrap()).unwrap();
        assert_eq!(
            stats,
            serde_json::json!({
                "numRecords": 3,
                "minValues": {"id": 1, "day": "2024-01-01"},
                "maxValues": {"id": 9, "day": "2024-01-02"},
            })
        );
    }

    #[test]
    fn neighbouring_ranges_are_read_in_one_request() {
        assert_eq!(
            coalesce(vec![30..40, 0..10, 12..20, 5..8], 4),
            vec![0..20, 30..40]
        );
        assert_eq!(coalesce(vec![0..10, 15..20], 4), vec![0..10, 15..20]);
        assert_eq!(coalesce(Vec::new(), 4), Vec::<std::ops::Range<u64>>::new());
    }

    #[test]
    fn a_sparse_file_refuses_reads_outside_what_was_fetched() {
        use parquet::file::reader::ChunkReader;
        let file = SparseFile {
            len: 100,
            parts: vec![(10, Bytes::from_static(b"0123456789"))],
        };
        assert_eq!(file.get_bytes(12, 3).unwrap().as_ref(), b"234");
        assert!(file.get_bytes(12, 9).is_err());
        assert!(file.get_bytes(5, 1).is_err());
        assert!(file.get_read(20).is_err());
    }

    #[test]
    fn v2_json_checkpoint_lines_name_their_sidecars() {
        let text = br#"{"checkpointMetadata":{"version":2}}
{"sidecar":{"path":"00000000000000000002.checkpoint.0000000001.0000000002.055454d8.parquet","sizeInBytes":9268,"modificationTime":1}}
{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["v2Checkpoint"]}}
"#;
        let lines = json_actions(text).unwrap();
        assert_eq!(lines.len(), 3);
        assert!(
            lines[1]
                .sidecar
                .as_ref()
                .unwrap()
                .path
                .ends_with("055454d8.parquet")
        );
        assert!(lines[2].protocol.is_some());
        assert_eq!(
            classify("00000000000000000002.checkpoint.e8fa2696-9728-4e9c-b285-634743fdd4fb.json"),
            LogFileKind::V2Checkpoint(2)
        );
    }

    #[test]
    fn classifies_log_file_names() {
        assert_eq!(
            classify("00000000000000000042.json"),
            LogFileKind::Commit(42)
        );
        assert_eq!(
            classify("00000000000000000010.checkpoint.parquet"),
            LogFileKind::Checkpoint {
                version: 10,
                parts: None
            }
        );
        assert_eq!(
            classify("00000000000000000001.checkpoint.0000000002.0000000002.parquet"),
            LogFileKind::Checkpoint {
                version: 1,
                parts: Some((2, 2))
            }
        );
        assert_eq!(
            classify(
                "00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet"
            ),
            LogFileKind::V2Checkpoint(2)
        );
        for other in [
            "_last_checkpoint",
            "00000000000000000042.crc",
            ".00000000000000000042.json.crc",
            "00000000000000000004.00000000000000000006.compacted.json",
            ".00000000000000000042.json.tmp",
            "0000000000000000004a.json",
        ] {
            assert_eq!(classify(other), LogFileKind::Other, "{other}");
        }
    }
}
