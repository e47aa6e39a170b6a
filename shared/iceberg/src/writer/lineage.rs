//! v3 row lineage: the row IDs a snapshot assigns. Every data manifest without row IDs gets
//! the next range of them (a rewritten bucket gets new ones; Delta's row tracking is not
//! carried over), and its files inherit theirs from it, in order.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{ManifestContentType, ManifestFile};
use lakemirror_plan::layout::{Content, LiveFile};

use crate::error::{Error, Result};

/// Assigns row IDs from `next_row_id` on to every data manifest in `manifests` that has none
/// and to the live files of its bucket that have none (known now, for a later snapshot of
/// the same run that carries them over). Answers the next unassigned row ID.
pub(super) fn assign_row_ids(
    manifests: &mut BTreeMap<(Content, u32), Vec<ManifestFile>>,
    loaded: &mut HashMap<(Content, u32), Vec<LiveFile>>,
    mut next_row_id: u64,
) -> Result<u64> {
    let too_many = || Error::Bug("row IDs past 2^63 cannot be assigned".into());
    for (key, layers) in manifests.iter_mut() {
        for manifest in layers.iter_mut() {
            if manifest.content != ManifestContentType::Data || manifest.first_row_id.is_some() {
                continue;
            }
            manifest.first_row_id = Some(next_row_id);
            let mut next = i64::try_from(next_row_id).map_err(|_| too_many())?;
            for live in loaded.get_mut(key).into_iter().flatten() {
                if live.first_row_id.is_none() {
                    live.first_row_id = Some(next);
                    let rows =
                        i64::try_from(live.data_file.record_count()).map_err(|_| too_many())?;
                    next = next.checked_add(rows).ok_or_else(too_many)?;
                }
            }
            let rows =
                manifest.existing_rows_count.unwrap_or(0) + manifest.added_rows_count.unwrap_or(0);
            next_row_id = next_row_id.checked_add(rows).ok_or_else(too_many)?;
        }
    }
    Ok(next_row_id)
}
