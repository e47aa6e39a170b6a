//! Reading checkpoints: `_last_checkpoint`'s hint, the newest complete checkpoint in a
//! listing, and its parts and sidecars applied row by row (or only its definition).

use serde::Deserialize;

use crate::actions::ActionLine;
use crate::checkpoint::{
    SparseFile, definition_actions, definition_chunk_ranges, footer_start,
    for_each_checkpoint_action, json_actions,
};
use crate::error::Result;
use crate::replay::ActiveFileSet;

use super::{DeltaLog, FETCH_CONCURRENCY, LogFileKind};

#[derive(Deserialize)]
struct LastCheckpoint {
    version: i64,
    /// Actions in the checkpoint (optional in the protocol).
    size: Option<u64>,
}

/// Bytes read from a checkpoint's end at first: a footer is rarely bigger.
const TAIL_READ: u64 = 64 * 1024;

/// What a snapshot reads of its checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reading {
    Everything,
    /// metaData and protocol only.
    Definition,
}

impl DeltaLog {
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

    /// A checkpoint part or sidecar, read whole within the limits.
    async fn checkpoint_bytes(&self, location: &str) -> Result<bytes::Bytes> {
        let (bytes, _) = self
            .table
            .get_at_most(location, self.limits.file_bytes)
            .await?
            .ok_or_else(|| self.malformed(format!("{location} vanished while reading")))?;
        Ok(bytes)
    }

    pub(super) async fn read_checkpoint_part(
        &self,
        meta: &object_store::ObjectMeta,
        active: &mut ActiveFileSet,
        reading: Reading,
    ) -> Result<()> {
        let location = self.table.location_of_key(&meta.location);
        // A v2 checkpoint keeps its file actions in sidecars (metaData and protocol never).
        let mut sidecars: Vec<String> = Vec::new();
        // Applies one action; answers the sidecar it names.
        let held = usize::try_from(self.limits.held_files).unwrap_or(usize::MAX);
        let held_bytes = self.limits.held_bytes();
        let mut apply = |line: ActionLine| -> Option<String> {
            // Past the limits the rest is let go: the caller refuses the replay.
            if let Some(add) = line.add
                && active.files.len() <= held
                && active.held_bytes <= held_bytes
            {
                active.add(add);
            }
            if let Some(m) = line.meta_data {
                active.metadata = Some(m);
            }
            if let Some(p) = line.protocol {
                active.protocol = Some(p);
            }
            if let Some(mark) = line
                .domain_metadata
                .as_ref()
                .and_then(crate::actions::DomainMetadata::row_id_high_water_mark)
            {
                active.row_id_high_water_mark = Some(mark);
            }
            line.sidecar
                .filter(|_| reading == Reading::Everything)
                .map(|sidecar| sidecar.path)
        };
        let mut apply_part = |line: ActionLine| sidecars.extend(apply(line));
        // Rows are applied as they are decoded: the checkpoint is never held as actions.
        if location.ends_with(".json") {
            let bytes = self.checkpoint_bytes(&location).await?;
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
            let bytes = self.checkpoint_bytes(&location).await?;
            for_each_checkpoint_action(bytes, &mut apply_part)
                .map_err(|e| self.malformed(format!("checkpoint {location}: {e}")))?;
        }
        for path in sidecars {
            let sidecar = self
                .table
                .scope()
                .resolve(crate::LogPath::Sidecar, &path)
                .map_err(|why| self.malformed(why))?;
            let bytes = self.checkpoint_bytes(&sidecar).await?;
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
        let mut ranges = match definition_chunk_ranges(&footer, footer_start) {
            Ok(ranges) => ranges,
            Err(e) => return Ok(Err(e)),
        };
        // The chunks and the footer are held together until decoded: their room is taken
        // at once. A footer larger than the tail read is read again with them rather than
        // held while their room is waited for; the tail's is small.
        let footer = match footer_start < tail_start {
            true => {
                drop(footer);
                drop(tail);
                ranges.push(footer_start..size);
                None
            }
            false => Some(footer),
        };
        let starts: Vec<u64> = ranges.iter().map(|r| r.start).collect();
        let chunks = self
            .table
            .get_ranges(location, ranges, FETCH_CONCURRENCY)
            .await?;
        let mut parts: Vec<(u64, bytes::Bytes)> = starts.into_iter().zip(chunks).collect();
        parts.extend(footer.map(|footer| (footer_start, footer)));
        Ok(definition_actions(SparseFile { len: size, parts }))
    }
}

/// The oldest complete checkpoint in `listed` from `from` to `to`.
pub(super) fn first_complete_checkpoint(
    listed: &[(LogFileKind, object_store::ObjectMeta)],
    from: i64,
    to: i64,
) -> Option<i64> {
    let mut candidates: Vec<i64> = listed
        .iter()
        .filter_map(|(k, _)| match k {
            LogFileKind::Checkpoint { version: v, .. } | LogFileKind::V2Checkpoint(v) => Some(*v),
            _ => None,
        })
        .filter(|v| (from..=to).contains(v))
        .collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates
        .into_iter()
        .find(|v| newest_complete_checkpoint(listed, *v).is_some_and(|(cp, _)| cp == *v))
}

/// The newest checkpoint at or before `version` whose parts are all present.
pub(super) fn newest_complete_checkpoint(
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
