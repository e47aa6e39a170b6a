//! v3 row lineage: the row IDs a snapshot assigns. Without Delta's row tracking, every data
//! manifest without row IDs gets the next range of them (a rewritten bucket gets new ones),
//! and its files inherit theirs from it, in order. With it, every data file states the row ID
//! Delta gave its first row (`add.baseRowId`), as UniForm writes it (delta#7023).

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

/// Row IDs of a table whose data files state their own (Delta's row tracking): a data
/// manifest without a first row ID gets `next_row_id` (Java drops the files' own IDs under a
/// manifest without one), which nothing inherits; the table's next row ID becomes one past
/// Delta's `high_water_mark`, never less than it was. Answers that next row ID.
pub(super) fn explicit_row_ids(
    manifests: &mut BTreeMap<(Content, u32), Vec<ManifestFile>>,
    next_row_id: u64,
    high_water_mark: i64,
) -> Result<u64> {
    for manifest in manifests.values_mut().flatten() {
        if manifest.content == ManifestContentType::Data && manifest.first_row_id.is_none() {
            manifest.first_row_id = Some(next_row_id);
        }
    }
    let past_mark = u64::try_from(high_water_mark.saturating_add(1)).unwrap_or(0);
    Ok(next_row_id.max(past_mark))
}
