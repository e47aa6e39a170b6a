//! A bootstrap fanned out over several workers, for tables one process cannot mirror in
//! time or memory: `plan` fixes the Delta version, the snapshot ID and the bucket layout;
//! each `part` reads the log keeping only the files of its buckets and writes their
//! manifests (parts run anywhere, in any order, again after a failure); `finish` joins the
//! parts' manifests into one snapshot of a new table (a new history, as a rebuild) and
//! commits it to the catalog with the usual compare-and-swap (`crate::commit`). A table
//! too large for one read but not for one process is bootstrapped in groups instead
//! (`crate::grouped`). Step Functions runs the parts as a
//! Distributed Map (`template.yaml`), the CLI as parallel processes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use iceberg::spec::FormatVersion;

use lakemirror_delta::{DeltaSnapshot, FileFilter};
pub use lakemirror_plan::layout::FanOutPlan;
use lakemirror_plan::layout::{FanOutPart, bucket_count_for};
use lakemirror_plan::target::TargetProperties;
use lakemirror_plan::{data_file_location, plan_full_taking};
use lakemirror_storage::{IoCounters, ObjectStores, TableStorage};

use crate::commit::{Commit, commit_staged};
use crate::error::{Error, Result};
use crate::sync::{SyncAction, SyncReport, SyncRequest, mirror_stores, target_defaults};
use lakemirror_iceberg::catalog::Lakehouse;
use lakemirror_iceberg::writer::{MetadataWriter, PartWritten, new_snapshot_id};

/// The stores of the planned table: its data and its metadata folder.
fn plan_stores(
    plan: &FanOutPlan,
    stores: &ObjectStores,
    counters: &Arc<IoCounters>,
) -> Result<(TableStorage, TableStorage)> {
    mirror_stores(
        stores,
        &plan.table_uri,
        plan.metadata_uri.as_deref(),
        counters,
    )
}

/// Part `part` of `plan`, or why it does not exist.
fn part_of(plan: &FanOutPlan, part: u32) -> Result<FanOutPart> {
    plan.part(part).ok_or_else(|| {
        Error::FanOut(format!(
            "part {part} does not exist: this fan-out has parts 0 to {}",
            plan.parts.saturating_sub(1)
        ))
    })
}

/// Fixes what the parts share: the Delta version (the newest, or `request.to_version`), the
/// Glue table, the snapshot ID and the bucket layout. Reads the whole log once, holding no
/// file. `parts` is capped at the number of buckets.
pub async fn plan(
    lake: &Lakehouse,
    request: &SyncRequest,
    parts: u32,
    counters: Arc<IoCounters>,
) -> Result<FanOutPlan> {
    if parts == 0 {
        return Err(Error::FanOut("a fan-out needs at least one part".into()));
    }
    let (data, _) = mirror_stores(
        &lake.stores,
        &request.table_uri,
        request.metadata_uri.as_deref(),
        &counters,
    )?;
    // A filtered read is made once: a catalog-managed table is known before it.
    let log = lake.delta_log(data.clone()).with_its_tail().await?;
    let files = Arc::new(AtomicU64::new(0));
    let counted = files.clone();
    let count_only = FileFilter::adds(move |_| {
        counted.fetch_add(1, Ordering::Relaxed);
        false
    });
    let snapshot = log.snapshot_of(request.to_version, count_only).await?;
    let files = files.load(Ordering::Relaxed);
    let (target, named_by) =
        target_defaults(request).resolve(&TargetProperties::of(snapshot.metadata()))?;
    let delta_version = snapshot.version;
    let empty = plan_full_taking(
        data.scope(),
        None,
        snapshot,
        request.settings.format_version,
    )?;
    let format_version = match empty
        .format_version
        .unwrap_or(request.settings.format_version)
    {
        FormatVersion::V3 => 3,
        _ => 2,
    };
    let buckets = bucket_count_for(files);
    let parts = parts.min(buckets);
    Ok(FanOutPlan {
        table_uri: data.root_uri().to_string(),
        metadata_uri: request.metadata_uri.clone(),
        database: target.database,
        table: target.table,
        named_by,
        delta_version,
        format_version,
        snapshot_id: new_snapshot_id(),
        files,
        buckets,
        parts,
        part_numbers: (0..parts).collect(),
    })
}

/// The Glue table `plan` must name, resolved again as [`plan`] resolves it (the request's
/// naming mode, and the table's `lakemirror.glue.*` properties at its newest version; only
/// the log's definition is read): a plan naming another is refused, so a crafted plan cannot
/// write a table into another's Glue name.
pub async fn check_target(
    lake: &Lakehouse,
    request: &SyncRequest,
    plan: &FanOutPlan,
    counters: Arc<IoCounters>,
) -> Result<()> {
    let (data, _) = mirror_stores(&lake.stores, &plan.table_uri, None, &counters)?;
    let definition = lake.delta_log(data).definition().await?;
    let (target, named_by) =
        target_defaults(request).resolve(&TargetProperties::of(Some(&definition.metadata)))?;
    if (&target.database, &target.table, named_by) != (&plan.database, &plan.table, plan.named_by) {
        return Err(Error::FanOut(format!(
            "the fan-out plan names Glue table {}.{}, but {} is mirrored to {}.{}: plan again with fan-out-plan; nothing was written",
            plan.database, plan.table, plan.table_uri, target.database, target.table
        )));
    }
    Ok(())
}

/// One part: reads the log at the plan's version keeping only the files of this part's
/// buckets, and writes their manifests and the part's manifest list.
pub async fn run_part(
    lake: &Lakehouse,
    plan: &FanOutPlan,
    part: u32,
    counters: Arc<IoCounters>,
) -> Result<PartWritten> {
    let part = part_of(plan, part)?;
    let (data, metadata_store) = plan_stores(plan, &lake.stores, &counters)?;
    let scope = data.scope().clone();
    let owned = FileFilter::adds(move |path| {
        // A path the plan refuses is kept, so that the plan reports it.
        data_file_location(&scope, path).map_or(true, |location| part.owns(&location))
    });
    let snapshot = read_version(lake, &data, plan, owned).await?;
    let planned = plan_full_taking(data.scope(), None, snapshot, plan.format_version())?;
    let writer =
        MetadataWriter::new(metadata_store, data).with_format_version(plan.format_version());
    let written = writer.stage_part(planned, &part).await?;
    tracing::info!(
        table = %plan.table_uri,
        part = part.part,
        of = part.parts,
        files = written.files,
        manifests = written.manifests,
        "wrote a part of the fan-out"
    );
    Ok(written)
}

/// The finishing step: one snapshot of every part's manifests, committed to Glue as a new
/// history. A mirror already at a newer Delta version, or already at this fan-out, is left
/// as it is.
pub async fn finish(
    lake: &Lakehouse,
    plan: &FanOutPlan,
    counters: Arc<IoCounters>,
) -> Result<SyncReport> {
    let started = Instant::now();
    let (data, metadata_store) = plan_stores(plan, &lake.stores, &counters)?;
    let snapshot = read_version(lake, &data, plan, FileFilter::new(|_| false)).await?;
    let tail = snapshot.catalog_managed.clone();
    let mut definition = plan_full_taking(data.scope(), None, snapshot, plan.format_version())?;
    definition.record_catalog(tail.as_ref());
    let writer = MetadataWriter::new(metadata_store.clone(), data.clone())
        .with_format_version(plan.format_version());
    let staged = writer
        .stage_parts(definition, plan.snapshot_id, plan.buckets, plan.parts)
        .await?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let read = lake
            .load(
                &plan.database,
                &plan.table,
                data.root_uri(),
                &metadata_store,
            )
            .await?;
        let current = read.current.as_ref();
        let mut report =
            SyncReport::of(&plan.database, &plan.table, plan.named_by, current, attempt);
        let done = current.is_some_and(|c| {
            c.metadata.current_snapshot_id() == Some(plan.snapshot_id)
                || c.delta_version().is_some_and(|v| v > plan.delta_version)
        });
        if done {
            report.reason = Some(format!(
                "the mirror is already at Delta version {} (this fan-out: {}); left as it is",
                report.delta_version.unwrap_or_default(),
                plan.delta_version
            ));
        } else {
            let committed = commit_staged(lake, &writer, &read, &staged, &mut report, &counters);
            if committed.await? == Commit::LostRace {
                continue;
            }
            report.action = match current {
                Some(_) => SyncAction::Rebuilt,
                None => SyncAction::Created,
            };
            report.reason = Some(format!("bootstrapped in {} parts", plan.parts));
        }
        return Ok(report.finished(started, &counters));
    }
}

async fn read_version(
    lake: &Lakehouse,
    data: &TableStorage,
    plan: &FanOutPlan,
    filter: FileFilter,
) -> Result<DeltaSnapshot> {
    // A filtered read is made once: a catalog-managed table is known before it.
    let log = lake.delta_log(data.clone()).with_its_tail().await?;
    Ok(log.snapshot_of(Some(plan.delta_version), filter).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lakemirror_plan::target::NamedBy;

    fn plan(parts: u32, buckets: u32) -> FanOutPlan {
        FanOutPlan {
            table_uri: "s3://lake/t".into(),
            metadata_uri: None,
            database: "db".into(),
            table: "t".into(),
            named_by: NamedBy::Folder,
            delta_version: 3,
            format_version: 2,
            snapshot_id: 7,
            files: 10,
            buckets,
            parts,
            part_numbers: (0..parts).collect(),
        }
    }

    #[test]
    fn every_bucket_belongs_to_exactly_one_part_and_parts_get_as_many_as_can_be() {
        for (parts, buckets) in [(3, 8), (4, 1024), (7, 7), (1, 4)] {
            let plan = plan(parts, buckets);
            let mut owned = vec![0; parts as usize];
            for bucket in 0..plan.buckets {
                let owners: Vec<u32> = (0..plan.parts)
                    .filter(|p| plan.part(*p).unwrap().owns_bucket(bucket))
                    .collect();
                assert_eq!(owners.len(), 1, "bucket {bucket} of {buckets}");
                owned[owners[0] as usize] += 1;
            }
            let (fewest, most) = (owned.iter().min().unwrap(), owned.iter().max().unwrap());
            assert!(
                most - fewest <= 1,
                "{parts} parts of {buckets} buckets: {owned:?}"
            );
        }
    }

    #[test]
    fn files_of_one_shape_spread_over_every_part() {
        // These paths fill only odd buckets (FNV-1a's low bit is the parity of the odd bytes,
        // and each number appears twice): a modulo over the buckets left half the parts empty.
        let plan = plan(4, 1024);
        let mut per_part = [0; 4];
        for i in 0..20_000 {
            let location = format!("file:///t/part-{i:09}-7d3c0d55-{i:012}.c000.snappy.parquet");
            let part = (0..4)
                .find(|p| plan.part(*p).unwrap().owns(&location))
                .unwrap();
            per_part[part as usize] += 1;
        }
        assert!(per_part.iter().all(|n| *n > 4_000), "{per_part:?}");
    }

    #[test]
    fn every_file_belongs_to_exactly_one_part() {
        let plan = plan(4, 16);
        for n in 0..1000 {
            let location = format!("s3://lake/t/p={}/part-{n}.parquet", n % 7);
            let owners = (0..plan.parts)
                .filter(|p| plan.part(*p).unwrap().owns(&location))
                .count();
            assert_eq!(owners, 1, "{location}");
        }
    }

    #[test]
    fn a_part_outside_the_plan_is_refused() {
        let error = part_of(&plan(2, 4), 2).unwrap_err().to_string();
        assert!(error.contains("parts 0 to 1"), "{error}");
    }

    #[test]
    fn the_plan_round_trips_through_json() {
        let plan = plan(2, 4);
        let json = serde_json::to_string(&plan).unwrap();
        assert_eq!(serde_json::from_str::<FanOutPlan>(&json).unwrap(), plan);
    }
}
