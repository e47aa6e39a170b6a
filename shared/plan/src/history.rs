//! How much history a mirror keeps. A streaming table commits every few seconds for months;
//! one Iceberg snapshot per Delta version forever would make every sync rewrite a metadata
//! file that grows with the history. So the newest versions keep one snapshot each, and older
//! history is thinned: one snapshot per UTC hour (the hour's last version), further back one
//! per UTC day, until Delta's retention expires it ([`crate::expiry`]).
//!
//! A circle with [`crate::snapshot`], on purpose: history merges the snapshot plans it thins
//! (`SnapshotPlan`), and a plan carries the table's own history settings
//! ([`HistorySettings`]) read from its Delta properties; both are plain data, no logic
//! crosses back.
//!
//! Thinning only ever removes: a snapshot the policy lets go is never wanted again, because
//! the tiers only grow coarser with age (the last version of a day is the last of its hour).
//! Decisions here are pure; the writer removes the snapshots and their files.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{Operation, Snapshot};
use lakemirror_delta::actions::Metadata;

use crate::properties::{DELTA_COMMIT_TIMESTAMP, DELTA_REMOVED_AT, DELTA_VERSION};
use crate::snapshot::{RowLineage, SnapshotPlan};

/// Delta table property (and Iceberg table property of the mirror): how many of the newest
/// Delta versions keep a snapshot each.
pub const RECENT_VERSIONS_PROPERTY: &str = "lakemirror.history.recent-versions";
/// Delta table property (and Iceberg table property of the mirror): for how long before the
/// newest commit older versions keep one snapshot per hour; older still, one per day.
pub const HOURLY_FOR_PROPERTY: &str = "lakemirror.history.hourly-for";
/// Iceberg table property: the earliest removal of files by versions thinned away, by the
/// snapshot that now stands for them (JSON object, snapshot ID to ms). Expiry reads it so a
/// kept snapshot still goes before VACUUM may delete what a thinned version removed.
pub const THINNED_REMOVALS_PROPERTY: &str = "lakemirror.history.removed-at";

pub const DEFAULT_RECENT_VERSIONS: u64 = 100;
pub const DEFAULT_HOURLY_FOR_MS: i64 = DAY_MS;

const HOUR_MS: i64 = 3_600_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// Snapshots removed by one sync at most (expired and thinned): a mirror written before
/// history was thinned sheds its old snapshots over several syncs, each reading a bounded
/// number of manifest lists.
pub const MAX_REMOVED_PER_SYNC: usize = 1_000;

/// What history a mirror keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryPolicy {
    /// The newest this many Delta versions keep a snapshot each (at least 1).
    pub recent_versions: u64,
    /// Older versions committed within this long before the newest keep one snapshot per
    /// UTC hour, the hour's last; older still, one per UTC day, the day's last.
    pub hourly_for_ms: i64,
}

impl Default for HistoryPolicy {
    fn default() -> Self {
        Self {
            recent_versions: DEFAULT_RECENT_VERSIONS,
            hourly_for_ms: DEFAULT_HOURLY_FOR_MS,
        }
    }
}

impl HistoryPolicy {
    /// This policy with a table's own settings (the Delta table properties, as the mirror's
    /// Iceberg table properties keep them) in place of the deployment's.
    pub fn overridden_by(self, properties: &HashMap<String, String>) -> Result<Self, String> {
        let mut policy = self;
        if let Some(value) = properties.get(RECENT_VERSIONS_PROPERTY) {
            policy.recent_versions = parse_recent_versions(value)?;
        }
        if let Some(value) = properties.get(HOURLY_FOR_PROPERTY) {
            policy.hourly_for_ms = parse_hourly_for(value)?;
        }
        Ok(policy)
    }

    /// The policy a plan's settings (as its Delta metadata states them) give a mirror kept
    /// by this deployment: each setting the table states replaces the deployment's.
    pub fn with_settings(self, settings: &HistorySettings) -> Self {
        let mut policy = self;
        if let Some(n) = settings
            .recent_versions
            .as_deref()
            .and_then(|v| parse_recent_versions(v).ok())
        {
            policy.recent_versions = n;
        }
        if let Some(ms) = settings
            .hourly_for
            .as_deref()
            .and_then(|v| parse_hourly_for(v).ok())
        {
            policy.hourly_for_ms = ms;
        }
        policy
    }

    /// How many thinnable snapshots wait before a sync thins them: a quarter of the
    /// per-version window, so most syncs remove nothing and read no old manifest list.
    fn slack(&self) -> usize {
        usize::try_from(self.recent_versions / 4).unwrap_or(usize::MAX)
    }
}

/// The `lakemirror.history.*` settings a Delta version's metadata states, checked (None: not
/// set there, the deployment's setting applies). The mirror keeps them as Iceberg table
/// properties of the same names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistorySettings {
    pub recent_versions: Option<String>,
    pub hourly_for: Option<String>,
}

impl HistorySettings {
    pub fn of(table: &str, metadata: &Metadata) -> crate::Result<Self> {
        let setting =
            |property: &'static str, check: fn(&str) -> Result<i64, String>| match metadata
                .configuration
                .get(property)
                .cloned()
                .flatten()
            {
                None => Ok(None),
                Some(value) => match check(&value) {
                    Ok(_) => Ok(Some(value.trim().to_string())),
                    Err(reason) => Err(crate::Error::TableProperty {
                        table: table.to_string(),
                        property,
                        reason,
                    }),
                },
            };
        Ok(Self {
            recent_versions: setting(RECENT_VERSIONS_PROPERTY, |v| {
                parse_recent_versions(v).map(|n| i64::try_from(n).unwrap_or(i64::MAX))
            })?,
            hourly_for: setting(HOURLY_FOR_PROPERTY, parse_hourly_for)?,
        })
    }

    /// The Iceberg table properties: each set to its value, or removed when None.
    pub fn properties(&self) -> [(&'static str, Option<&str>); 2] {
        [
            (RECENT_VERSIONS_PROPERTY, self.recent_versions.as_deref()),
            (HOURLY_FOR_PROPERTY, self.hourly_for.as_deref()),
        ]
    }
}

/// `lakemirror.history.recent-versions`: a whole number of versions, at least 1.
pub fn parse_recent_versions(value: &str) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| {
            format!("{value:?} is not a number of versions: give a whole number of at least 1")
        })
}

/// `lakemirror.history.hourly-for`: an interval as Delta writes them (`interval 1 day`,
/// `24 hours`, `2 days`), 0 for none (daily right after the per-version window).
pub fn parse_hourly_for(value: &str) -> Result<i64, String> {
    if value.trim() == "0" {
        return Ok(0);
    }
    lakemirror_delta::actions::parse_interval_ms(value)
        .filter(|ms| *ms >= 0)
        .ok_or_else(|| {
            format!("{value:?} is not an interval: give one like '1 day', '12 hours' or 'interval 2 days'")
        })
}

/// One version of the mirror's history, as thinning sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub delta_version: i64,
    /// The Delta commit's time (ms): the hours and days are of this clock.
    pub committed_ms: i64,
}

/// Which versions of `history` (oldest first) the policy keeps: the newest
/// `recent_versions`, and of the older ones the last of each UTC hour within `hourly_for`
/// of the newest commit, the last of each UTC day before that.
pub fn kept(history: &[Version], policy: &HistoryPolicy) -> Vec<bool> {
    let Some(newest) = history.last() else {
        return Vec::new();
    };
    let recent = usize::try_from(policy.recent_versions).unwrap_or(usize::MAX);
    let first_recent = history.len().saturating_sub(recent.max(1));
    history
        .iter()
        .enumerate()
        .map(|(i, version)| {
            let Some(next) = history.get(i + 1).filter(|_| i < first_recent) else {
                return true;
            };
            let period = if newest.committed_ms - version.committed_ms < policy.hourly_for_ms {
                HOUR_MS
            } else {
                DAY_MS
            };
            version.committed_ms.div_euclid(period) != next.committed_ms.div_euclid(period)
        })
        .collect()
}

/// The snapshots of `metadata` to thin away (oldest first), none of `expired`: only when
/// more than the policy's slack wait, and at most [`MAX_REMOVED_PER_SYNC`] with `expired`.
/// `snapshots` is the history oldest first ([`crate::expiry::lakemirror_history`]).
pub fn thinned(snapshots: &[&Snapshot], policy: &HistoryPolicy, expired: &[i64]) -> Vec<i64> {
    let expired: HashSet<i64> = expired.iter().copied().collect();
    let remaining: Vec<&Snapshot> = snapshots
        .iter()
        .copied()
        .filter(|s| !expired.contains(&s.snapshot_id()))
        .collect();
    let versions: Option<Vec<Version>> = remaining.iter().map(|s| version_of(s)).collect();
    // A snapshot without a Delta version (another tool's) stops thinning altogether.
    let Some(versions) = versions else {
        return Vec::new();
    };
    let thinnable: Vec<i64> = kept(&versions, policy)
        .into_iter()
        .zip(&remaining)
        .filter(|(keep, _)| !keep)
        .map(|(_, s)| s.snapshot_id())
        .collect();
    if thinnable.len() <= policy.slack() {
        return Vec::new();
    }
    let room = MAX_REMOVED_PER_SYNC.saturating_sub(expired.len());
    thinnable.into_iter().take(room).collect()
}

/// The snapshots the snapshot log lists (`snapshots` oldest first, all kept): the newest run
/// without a gap, where each snapshot's parent is the one before and, between snapshots of
/// lakemirror's, the Delta versions follow one another. Time travel by timestamp reads the
/// log: inside the run it finds the very version Delta finds, and before it readers fail
/// ("no snapshot older than ...") instead of answering a thinned-away time with an older
/// version, as the Iceberg spec asks of a history with gaps. Older snapshots stay readable
/// by snapshot ID.
pub fn gapless_tail<'a>(snapshots: &'a [&'a Snapshot]) -> &'a [&'a Snapshot] {
    let start = snapshots
        .windows(2)
        .rposition(|pair| {
            let versions = (version_of(pair[0]), version_of(pair[1]));
            let consecutive = match versions {
                (Some(a), Some(b)) => b.delta_version == a.delta_version + 1,
                _ => true,
            };
            pair[1].parent_snapshot_id() != Some(pair[0].snapshot_id()) || !consecutive
        })
        .map_or(0, |gap| gap + 1);
    &snapshots[start..]
}

/// A snapshot's Delta version and commit time; None for a snapshot lakemirror did not write.
fn version_of(snapshot: &Snapshot) -> Option<Version> {
    let summary = &snapshot.summary().additional_properties;
    let delta_version = summary.get(DELTA_VERSION)?.parse().ok()?;
    let committed_ms = summary
        .get(DELTA_COMMIT_TIMESTAMP)
        .and_then(|t| t.parse().ok())
        .unwrap_or(snapshot.timestamp_ms());
    Some(Version {
        delta_version,
        committed_ms,
    })
}

/// The removal times to record for the snapshots that stay ([`THINNED_REMOVALS_PROPERTY`]):
/// each removed snapshot's earliest removal (its own, or one recorded for it) goes to the
/// next snapshot kept, where it is earlier than what that one records already. `snapshots`
/// is the history oldest first; `recorded` what the property holds now.
pub fn carried_removals(
    snapshots: &[&Snapshot],
    removed: &HashSet<i64>,
    recorded: &BTreeMap<i64, i64>,
) -> BTreeMap<i64, i64> {
    let mut carried = BTreeMap::new();
    let mut pending: Option<i64> = None;
    for snapshot in snapshots {
        let id = snapshot.snapshot_id();
        let own = earliest(removed_at(snapshot), recorded.get(&id).copied());
        if removed.contains(&id) {
            pending = earliest(pending, own);
            continue;
        }
        if let Some(at) = earliest(pending.take(), own) {
            // Only what the summary alone does not say.
            if removed_at(snapshot).is_none_or(|summary| at < summary) {
                carried.insert(id, at);
            }
        }
    }
    carried
}

fn earliest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// When the files a snapshot's version removed were removed, per its summary: the removes'
/// own `deletionTimestamp` (a MERGE or OPTIMIZE that ran for hours removed files long before
/// it committed), else, for snapshots written before that was recorded, its commit time.
pub fn removed_at(snapshot: &Snapshot) -> Option<i64> {
    let summary = &snapshot.summary().additional_properties;
    let number = |key: &str| summary.get(key).and_then(|v| v.parse::<i64>().ok());
    number(DELTA_REMOVED_AT).or_else(|| {
        let removed = number("deleted-data-files").unwrap_or(0) > 0
            || number("removed-delete-files").unwrap_or(0) > 0;
        removed.then(|| number(DELTA_COMMIT_TIMESTAMP).unwrap_or(snapshot.timestamp_ms()))
    })
}

/// [`THINNED_REMOVALS_PROPERTY`] as a map; empty when absent or unreadable.
pub fn recorded_removals(properties: &HashMap<String, String>) -> BTreeMap<i64, i64> {
    properties
        .get(THINNED_REMOVALS_PROPERTY)
        .and_then(|json| serde_json::from_str::<BTreeMap<String, i64>>(json).ok())
        .map(|map| {
            map.into_iter()
                .filter_map(|(id, at)| Some((id.parse().ok()?, at)))
                .collect()
        })
        .unwrap_or_default()
}

/// A sync that applies many commits writes a snapshot only for the versions the policy
/// keeps: each other version's change is carried into the next version's plan, so a
/// catch-up of thousands of versions writes manifests, lists and metadata for the kept ones
/// alone. The first `expiring` plans (see [`crate::expiry::expiring_plans`]) are carried
/// forward too. The newest plans (the per-version window) stay their own.
pub fn merge_thinned(
    plans: Vec<SnapshotPlan>,
    policy: &HistoryPolicy,
    expiring: usize,
) -> Vec<SnapshotPlan> {
    let versions: Vec<Version> = plans
        .iter()
        .map(|p| Version {
            delta_version: p.delta_version,
            committed_ms: p.commit_timestamp_ms,
        })
        .collect();
    let keep = kept(&versions, policy);
    let mut merged: Vec<SnapshotPlan> = Vec::with_capacity(plans.len());
    let mut carried: Option<SnapshotPlan> = None;
    for (i, (plan, keep)) in plans.into_iter().zip(keep).enumerate() {
        let plan = match carried.take() {
            Some(earlier) => absorb(earlier, plan),
            None => plan,
        };
        if keep && i >= expiring {
            merged.push(plan);
        } else {
            carried = Some(plan);
        }
    }
    merged.extend(carried);
    merged
}

/// One plan for two consecutive versions: `later`'s change applied on top of `earlier`'s.
/// What `later` states of the definition (schema, names, properties) replaces `earlier`'s:
/// it was planned on top of it, and `earlier`'s files keep their field IDs under it as files
/// carried into a later snapshot do. A `later` that replaces everything stands alone.
fn absorb(earlier: SnapshotPlan, later: SnapshotPlan) -> SnapshotPlan {
    if later.replace_all {
        return SnapshotPlan {
            removed_at_ms: earliest(earlier.removed_at_ms, later.removed_at_ms),
            ..later
        };
    }
    let later_removes: HashSet<&str> = later.removed.iter().map(String::as_str).collect();
    let later_adds: HashSet<&str> = later.added.iter().map(|f| f.location.as_str()).collect();
    // A file the earlier version added and the later one removes or adds again is replaced.
    // Its removal stays in `removed` even when the earlier version brought it in new: the
    // plan cannot tell whether an add replaced a file already there, and removing what is
    // not there changes nothing.
    let mut added: Vec<_> = earlier
        .added
        .into_iter()
        .filter(|f| {
            !later_removes.contains(f.location.as_str())
                && !later_adds.contains(f.location.as_str())
        })
        .collect();
    let mut removed = earlier.removed;
    removed.extend(later.removed);
    removed.sort();
    removed.dedup();
    added.extend(later.added);
    let rearranged =
        earlier.operation == Operation::Replace && later.operation == Operation::Replace;
    let operation = match (added.is_empty(), removed.is_empty()) {
        _ if earlier.replace_all => earlier.operation,
        _ if rearranged => Operation::Replace,
        (_, true) => Operation::Append,
        (true, false) => Operation::Delete,
        (false, false) => Operation::Overwrite,
    };
    let defined = later.partition_zone.is_some();
    let mut v3_types = earlier.v3_types;
    v3_types.extend(later.v3_types);
    SnapshotPlan {
        delta_version: later.delta_version,
        commit_timestamp_ms: later.commit_timestamp_ms,
        commit_hash: later.commit_hash,
        delta_table_id: later.delta_table_id.or(earlier.delta_table_id),
        catalog_table_id: later.catalog_table_id.or(earlier.catalog_table_id),
        catalog_table_name: later.catalog_table_name.or(earlier.catalog_table_name),
        removed_at_ms: earliest(earlier.removed_at_ms, later.removed_at_ms),
        operation,
        schema: later.schema.or(earlier.schema),
        physical_names: if defined {
            later.physical_names
        } else {
            earlier.physical_names
        },
        name_mapping: later.name_mapping.or(earlier.name_mapping),
        omitted_columns: later.omitted_columns.or(earlier.omitted_columns),
        widened_to_long: later.widened_to_long.or(earlier.widened_to_long),
        v3_types,
        partition_zone: later.partition_zone.or(earlier.partition_zone),
        partition_columns: later.partition_columns,
        added,
        removed: if earlier.replace_all {
            Vec::new()
        } else {
            removed
        },
        replace_all: earlier.replace_all,
        deleted_file_retention_ms: later
            .deleted_file_retention_ms
            .or(earlier.deleted_file_retention_ms),
        format_version: later.format_version.or(earlier.format_version),
        history: later.history.or(earlier.history),
        row_lineage: match (earlier.row_lineage, later.row_lineage) {
            (Some(a), Some(b)) => Some(RowLineage {
                high_water_mark: a.high_water_mark.max(b.high_water_mark),
            }),
            (_, later) => later,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use iceberg::spec::Struct;
    use proptest::prelude::*;

    use super::*;
    use crate::metrics::ColumnMetrics;
    use crate::snapshot::PlannedFile;

    const MINUTE_MS: i64 = 60_000;

    fn policy(recent_versions: u64, hourly_for_ms: i64) -> HistoryPolicy {
        HistoryPolicy {
            recent_versions,
            hourly_for_ms,
        }
    }

    /// Versions committed at these minutes (since the epoch, a UTC midnight).
    fn at_minutes(minutes: &[i64]) -> Vec<Version> {
        minutes
            .iter()
            .enumerate()
            .map(|(v, m)| Version {
                delta_version: v as i64,
                committed_ms: m * MINUTE_MS,
            })
            .collect()
    }

    fn kept_versions(history: &[Version], policy: &HistoryPolicy) -> Vec<i64> {
        kept(history, policy)
            .into_iter()
            .zip(history)
            .filter(|(keep, _)| *keep)
            .map(|(_, v)| v.delta_version)
            .collect()
    }

    #[test]
    fn the_newest_versions_stay_then_the_last_of_each_hour_then_of_each_day() {
        // Day 0: 00:10, 00:50, 01:20 (v0-v2); day 1: 10:05, 10:40, 11:30, 23:59 (v3-v6);
        // day 2: 00:01 .. 00:03 (v7-v9).
        let day = 24 * 60;
        let history = at_minutes(&[
            10,
            50,
            80,
            day + 605,
            day + 640,
            day + 690,
            day + 1439,
            2 * day + 1,
            2 * day + 2,
            2 * day + 3,
        ]);
        // The newest three stay; within 12 hours of the newest (after day 1 12:03) the last
        // of each hour: v6; before that the last of each day: v2 (v5 is not day 1's last).
        assert_eq!(
            kept_versions(&history, &policy(3, 12 * 60 * MINUTE_MS)),
            vec![2, 6, 7, 8, 9]
        );
        // With the hourly tier reaching back two days: the last of every hour.
        assert_eq!(
            kept_versions(&history, &policy(3, 2 * DAY_MS)),
            vec![1, 2, 4, 5, 6, 7, 8, 9]
        );
        // A window as long as the history keeps every version.
        assert_eq!(
            kept_versions(&history, &policy(10, 0)),
            (0..10).collect::<Vec<_>>()
        );
        // The newest always stays.
        assert_eq!(kept_versions(&history[..1], &policy(1, 0)), vec![0]);
    }

    #[test]
    fn settings_are_read_as_delta_writes_intervals_and_refused_when_unusable() {
        assert_eq!(parse_hourly_for("1 day"), Ok(DAY_MS));
        assert_eq!(parse_hourly_for("interval 12 hours"), Ok(12 * HOUR_MS));
        assert_eq!(parse_hourly_for("0"), Ok(0));
        assert!(parse_hourly_for("a while").is_err());
        assert!(parse_hourly_for("-1 days").is_err());
        assert_eq!(parse_recent_versions(" 500 "), Ok(500));
        assert!(parse_recent_versions("0").is_err());
        assert!(parse_recent_versions("many").is_err());
        let table = HashMap::from([
            (RECENT_VERSIONS_PROPERTY.to_string(), "7".to_string()),
            (HOURLY_FOR_PROPERTY.to_string(), "2 days".to_string()),
        ]);
        assert_eq!(
            HistoryPolicy::default().overridden_by(&table),
            Ok(policy(7, 2 * DAY_MS))
        );
    }

    proptest! {
        /// Thinned commit by commit (as syncs do, whatever their slack) or all at once, a
        /// history keeps the same snapshots: what thinning lets go is never wanted again.
        #[test]
        fn thinning_commit_by_commit_keeps_what_thinning_at_once_keeps(
            gaps in proptest::collection::vec(0i64..(3 * HOUR_MS), 1..300),
            recent in 1u64..20,
            hourly_hours in 0i64..48,
            slack in 0usize..10,
        ) {
            let policy = policy(recent, hourly_hours * HOUR_MS);
            let mut all = Vec::new();
            let mut mirror: Vec<Version> = Vec::new();
            let mut t = 0;
            for (v, gap) in gaps.iter().enumerate() {
                t += gap;
                let version = Version { delta_version: v as i64, committed_ms: t };
                all.push(version);
                mirror.push(version);
                let keep = kept(&mirror, &policy);
                if keep.iter().filter(|k| !**k).count() > slack {
                    mirror = mirror.into_iter().zip(keep).filter(|(_, k)| *k).map(|(v, _)| v).collect();
                }
            }
            let keep = kept(&mirror, &policy);
            mirror = mirror.into_iter().zip(keep).filter(|(_, k)| *k).map(|(v, _)| v).collect();
            let at_once: Vec<Version> = all.iter().zip(kept(&all, &policy)).filter(|(_, k)| *k).map(|(v, _)| *v).collect();
            prop_assert_eq!(mirror, at_once);
        }

        /// Plans merged for the versions thinning lets go leave the same table as every
        /// plan applied in turn.
        #[test]
        fn merged_plans_leave_the_table_every_plan_leaves(
            steps in proptest::collection::vec((0u8..6, 0u8..6, 0i64..(2 * HOUR_MS)), 1..120),
            recent in 1u64..10,
            expiring in 0usize..20,
        ) {
            let mut plans = Vec::new();
            let mut t = 0;
            for (v, (add, remove, gap)) in steps.iter().enumerate() {
                t += gap;
                let mut added = Vec::new();
                let mut removed = Vec::new();
                // Paths repeat: re-adds (a changed deletion vector), removes of new files.
                if *add < 4 {
                    added.push(file(&format!("f{}", add + (v as u8 % 3)), v as u64));
                }
                if *remove < 3 {
                    removed.push(format!("s3://b/t/f{}", remove + (v as u8 % 2)));
                }
                plans.push(plan(v as i64, t, added, removed));
            }
            // Only what is there can be removed, as in a Delta log.
            let mut table = BTreeMap::new();
            for plan in &mut plans {
                plan.removed.retain(|path| table.contains_key(path));
                apply(&mut table, plan);
            }
            let merged = merge_thinned(plans.clone(), &policy(recent, HOUR_MS), expiring);
            prop_assert!(merged.len() <= plans.len());
            prop_assert_eq!(merged.last().map(|p| p.delta_version), plans.last().map(|p| p.delta_version));
            let mut again = BTreeMap::new();
            for plan in &merged {
                apply(&mut again, plan);
            }
            prop_assert_eq!(again, table);
        }
    }

    fn file(name: &str, size: u64) -> PlannedFile {
        PlannedFile {
            location: format!("s3://b/t/{name}"),
            partition: Struct::empty(),
            size,
            record_count: Some(1),
            deletion_vector: None,
            metrics: ColumnMetrics::default(),
            first_row_id: None,
            data_sequence_number: None,
        }
    }

    fn plan(
        version: i64,
        committed_ms: i64,
        added: Vec<PlannedFile>,
        removed: Vec<String>,
    ) -> SnapshotPlan {
        SnapshotPlan {
            delta_version: version,
            commit_timestamp_ms: committed_ms,
            commit_hash: None,
            delta_table_id: None,
            catalog_table_id: None,
            catalog_table_name: None,
            removed_at_ms: (!removed.is_empty()).then_some(committed_ms),
            operation: Operation::Overwrite,
            schema: None,
            physical_names: HashMap::new(),
            name_mapping: None,
            omitted_columns: None,
            widened_to_long: None,
            v3_types: BTreeMap::new(),
            partition_zone: None,
            partition_columns: Vec::new(),
            added,
            removed,
            replace_all: false,
            deleted_file_retention_ms: None,
            format_version: None,
            history: None,
            row_lineage: None,
        }
    }

    /// The table as the writer changes it: removed files leave (one not there changes
    /// nothing), added ones come (a path added again replaces its entry).
    fn apply(table: &mut BTreeMap<String, u64>, plan: &SnapshotPlan) {
        if plan.replace_all {
            table.clear();
        }
        for path in &plan.removed {
            table.remove(path);
        }
        for file in &plan.added {
            table.insert(file.location.clone(), file.size);
        }
    }

    #[test]
    fn merged_plans_carry_the_earliest_removal_and_the_newest_definition() {
        let hour = HOUR_MS;
        let mut plans = vec![
            plan(0, 0, vec![file("a", 1)], vec![]),
            plan(1, hour / 2, vec![file("b", 1)], vec!["s3://b/t/a".into()]),
            plan(2, 2 * hour, vec![file("c", 1)], vec![]),
            plan(3, 3 * hour, vec![file("d", 1)], vec![]),
        ];
        plans[1].removed_at_ms = Some(7);
        plans[1].schema = Some(iceberg::spec::Schema::builder().build().unwrap());
        // v0 and v1 share an hour: v0 goes into v1, which keeps its schema and removal time.
        let merged = merge_thinned(plans.clone(), &policy(1, DAY_MS), 0);
        let versions: Vec<i64> = merged.iter().map(|p| p.delta_version).collect();
        assert_eq!(versions, vec![1, 2, 3]);
        let added: Vec<&str> = merged[0]
            .added
            .iter()
            .map(|f| f.location.as_str())
            .collect();
        assert_eq!(added, vec!["s3://b/t/b"], "a came and went");
        assert_eq!(merged[0].removed_at_ms, Some(7));
        assert!(merged[0].schema.is_some());
        // Versions that would expire at once go into the first one kept.
        let merged = merge_thinned(plans, &policy(10, DAY_MS), 2);
        let versions: Vec<i64> = merged.iter().map(|p| p.delta_version).collect();
        assert_eq!(versions, vec![2, 3]);
        assert_eq!(merged[0].removed_at_ms, Some(7));
        assert!(
            merged[0].schema.is_some(),
            "the earlier definition carries over"
        );
    }

    /// A snapshot of Delta `version` (None: another tool's), parented on `parent`.
    fn snapshot_of(id: i64, parent: Option<i64>, version: Option<i64>) -> Snapshot {
        let mut summary = HashMap::new();
        if let Some(v) = version {
            summary.insert(DELTA_VERSION.to_string(), v.to_string());
        }
        Snapshot::builder()
            .with_snapshot_id(id)
            .with_parent_snapshot_id(parent)
            .with_sequence_number(id)
            .with_timestamp_ms(id * 1000)
            .with_manifest_list(format!("s3://b/t/snap-{id}.avro"))
            .with_summary(iceberg::spec::Summary {
                operation: Operation::Append,
                additional_properties: summary,
            })
            .build()
    }

    #[test]
    fn the_snapshot_log_starts_after_the_last_gap_in_versions_or_parents() {
        let ids = |tail: &[&Snapshot]| tail.iter().map(|s| s.snapshot_id()).collect::<Vec<_>>();
        // Versions 3, 7 (3..6 thinned or merged into 7), 8, 9.
        let thinned = [
            snapshot_of(1, None, Some(3)),
            snapshot_of(2, Some(1), Some(7)),
            snapshot_of(3, Some(2), Some(8)),
            snapshot_of(4, Some(3), Some(9)),
        ];
        let refs: Vec<&Snapshot> = thinned.iter().collect();
        assert_eq!(ids(gapless_tail(&refs)), vec![2, 3, 4]);
        // A parent thinned away (its version is the one before) is a gap too.
        let parentless = [
            snapshot_of(1, None, Some(3)),
            snapshot_of(3, Some(2), Some(4)),
            snapshot_of(4, Some(3), Some(5)),
        ];
        let refs: Vec<&Snapshot> = parentless.iter().collect();
        assert_eq!(ids(gapless_tail(&refs)), vec![3, 4]);
        // Another tool's snapshot on top continues the run; an unbroken history is whole.
        let foreign = [
            snapshot_of(1, None, Some(0)),
            snapshot_of(2, Some(1), Some(1)),
            snapshot_of(3, Some(2), None),
        ];
        let refs: Vec<&Snapshot> = foreign.iter().collect();
        assert_eq!(ids(gapless_tail(&refs)), vec![1, 2, 3]);
    }

    #[test]
    fn a_thinned_snapshots_removal_time_goes_to_the_next_snapshot_kept() {
        let snapshot = |id: i64, removed_at: Option<i64>| -> Snapshot {
            let mut summary = HashMap::new();
            if let Some(at) = removed_at {
                summary.insert(DELTA_REMOVED_AT.to_string(), at.to_string());
            }
            Snapshot::builder()
                .with_snapshot_id(id)
                .with_sequence_number(id)
                .with_timestamp_ms(id * 1000)
                .with_manifest_list(format!("s3://b/t/snap-{id}.avro"))
                .with_summary(iceberg::spec::Summary {
                    operation: Operation::Append,
                    additional_properties: summary,
                })
                .build()
        };
        let history = [
            snapshot(1, None),
            snapshot(2, Some(500)),
            snapshot(3, Some(900)),
            snapshot(4, None),
            snapshot(5, Some(100)),
            snapshot(6, None),
        ];
        let refs: Vec<&Snapshot> = history.iter().collect();
        let removed = HashSet::from([2, 5]);
        // 3 records 900 itself: 500 is earlier and carried; 6 takes 5's 100; snapshot 4
        // keeps what was recorded for it.
        let recorded = BTreeMap::from([(4, 300), (5, 50)]);
        assert_eq!(
            carried_removals(&refs, &removed, &recorded),
            BTreeMap::from([(3, 500), (4, 300), (6, 50)])
        );
    }
}
