//! The `glue-sync` function's policy: an event in, one sync per announced table, a response
//! out. Used by the Lambda function and by `lakemirror invoke glue-sync`.

use lakemirror_runtime::deadline::{self, Timed};
pub use lakemirror_runtime::deadline::{RESPONSE_MARGIN, START_MARGIN};

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;

use aws_lambda_events::event::sqs::SqsBatchResponse;
use lakemirror_delta::catalog_managed::StagedCommitFile;
use lakemirror_events::trigger::{Delivery, LambdaInput, TableTrigger, table_triggers};
use lakemirror_events::{Control, DeadLetters, Parked};
use lakemirror_iceberg::Lakehouse;
use lakemirror_iceberg::writer::PartWritten;
use lakemirror_runtime::metrics::{Metric, MetricRecord};
use lakemirror_runtime::settings::Variable;
use lakemirror_storage::uri::{TABLE_PREFIXES, allowed_by, table_prefixes};
use lakemirror_storage::{IoCounters, SharedOut, budget};

use crate::batch::{Batch, Outcome, Parking, message_key};
use crate::error::{Error, Result};
use crate::fanout::{self, FanOutPlan};
use crate::settings::{SyncSettings, above_zero};
use crate::status::Mirror;
use crate::verify::{VerifyRequest, verify};
use crate::{SyncReport, SyncRequest, sync_table};

/// Configuration of the glue-sync function, from its environment.
#[derive(Debug, Clone)]
pub struct GlueSyncConfig {
    /// `GLUE_DATABASE`: where mirrored tables go (a Delta table's `lakemirror.glue.database`
    /// property overrides it).
    pub database: String,
    /// `TABLE_PREFIXES`: comma-separated `s3://bucket/prefix` roots to mirror; empty = all.
    pub table_prefixes: Vec<String>,
    /// `DEAD_LETTER_QUEUE_URL`: where events that can never succeed are parked. Without it
    /// they are reported as failures, and the queue's redrive policy parks them after
    /// `maxReceiveCount` attempts.
    pub dead_letter_queue_url: Option<String>,
    /// How its tables are mirrored.
    pub settings: SyncSettings,
    /// `MAX_RECEIVE_COUNT`: the sync queue's `maxReceiveCount` (SAM `MaxReceiveCount`). A
    /// staged commit its catalog has not decided yet is redelivered until its last delivery
    /// before the queue would park it, and then let go (its publication's event, or the next
    /// commit's, mirrors it).
    pub max_receive_count: u32,
}

/// SQS's redrive `maxReceiveCount` of the template's queues by default.
pub const DEFAULT_MAX_RECEIVE_COUNT: u32 = 5;

/// `GLUE_DATABASE`: where mirrors go.
pub const GLUE_DATABASE: Variable = Variable {
    name: "GLUE_DATABASE",
    default: None,
    values: &[],
    help: "The Glue database (or REST catalog namespace) that receives mirrored tables (required).",
};

/// `DEAD_LETTER_QUEUE_URL`: where events that can never succeed are parked.
pub const DEAD_LETTER_QUEUE_URL: Variable = Variable {
    name: "DEAD_LETTER_QUEUE_URL",
    default: None,
    values: &[],
    help: "SQS queue URL where events that can never succeed are parked (once, not retried); unset: they are reported as failed.",
};

/// `MAX_RECEIVE_COUNT`: the sync queue's `maxReceiveCount`.
pub const MAX_RECEIVE_COUNT: Variable = Variable {
    name: "MAX_RECEIVE_COUNT",
    default: Some("5"),
    values: &[],
    help: "The sync queue's maxReceiveCount: a staged commit its catalog has not decided is redelivered until its last delivery, then let go instead of parked.",
};

impl GlueSyncConfig {
    /// The sync of `table_uri` these settings describe.
    pub fn request(&self, table_uri: String) -> SyncRequest {
        self.settings.request(table_uri, self.database.clone())
    }

    /// The configuration from `setting` (the function's environment variables).
    pub fn from_settings(setting: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let database = GLUE_DATABASE.value(setting).ok_or_else(|| {
            Error::setting(
                GLUE_DATABASE.name,
                "is not set: name the Glue database that receives mirrored tables",
            )
        })?;
        let max_receive_count = match MAX_RECEIVE_COUNT.value(setting) {
            None => DEFAULT_MAX_RECEIVE_COUNT,
            Some(value) => above_zero(&value)
                .and_then(|n| u32::try_from(n).map_err(|_| format!("{value:?} is too large")))
                .map_err(|reason| Error::setting(MAX_RECEIVE_COUNT.name, reason))?,
        };
        Ok(Self {
            database,
            table_prefixes: table_prefixes(TABLE_PREFIXES.value(setting).as_deref()),
            dead_letter_queue_url: DEAD_LETTER_QUEUE_URL.value(setting),
            settings: SyncSettings::from_settings(setting)?,
            max_receive_count,
        })
    }
}

/// What glue-sync answers.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
pub enum GlueSyncResponse {
    /// To an SQS batch: the messages to redeliver; the others are done.
    Batch(SqsBatchResponse),
    /// To an event delivered directly (it fails as a whole when a retry may help).
    Synced {
        synced: Vec<SyncReport>,
        parked: usize,
    },
    /// To the scheduled verify: one line per mirror.
    Verified { verified: Vec<Verified> },
    /// To the scheduled catch-up: one line per mirror.
    CaughtUp { caught_up: Vec<CaughtUp> },
    /// To a fan-out plan step: the plan every part and the finishing step take.
    FanOutPlanned(FanOutPlan),
    /// To a fan-out part.
    FanOutPart(PartWritten),
    /// To the finishing step of a fan-out.
    FanOutFinished(Box<SyncReport>),
}

/// One mirror's outcome in the scheduled catch-up.
#[derive(Debug, serde::Serialize)]
pub struct CaughtUp {
    pub glue_table: String,
    pub delta_table: String,
    /// The Delta version the mirror held.
    pub mirrored_version: Option<i64>,
    /// Whether the Delta log held a newer commit (an event for it lost, or not yet handled).
    pub behind: bool,
    /// The version the catch-up synced the mirror to, when it was behind.
    pub synced_to: Option<i64>,
    pub error: Option<String>,
}

/// One mirror's outcome in the scheduled verify.
#[derive(Debug, serde::Serialize)]
pub struct Verified {
    pub glue_table: String,
    pub delta_table: String,
    /// None when it could not be verified (see `error`).
    pub equal: Option<bool>,
    pub delta_version: Option<i64>,
    pub difference_count: usize,
    /// The first differences, as `file: message`.
    pub differences: Vec<String>,
    /// The version a mirror found behind its Delta table was synced to before it was verified.
    pub caught_up_to: Option<i64>,
    pub error: Option<String>,
}

/// The glue-sync function: configuration and the two seams (stores and catalog), built once
/// per process, and where events that can never succeed are parked.
#[derive(Debug, Clone)]
pub struct GlueSyncFunction {
    pub config: GlueSyncConfig,
    pub lake: Lakehouse,
    pub dead_letters: Option<Arc<dyn DeadLetters>>,
}

impl GlueSyncFunction {
    /// Handles one event. For SQS batches the response lists the messages to redeliver
    /// (`batchItemFailures`): only those whose sync failed for a reason that may pass
    /// (throttling, conflicts, 5xx). Messages that can never succeed are parked in the
    /// dead-letter queue and logged once. Other events fail as a whole when a retry may help.
    ///
    /// The tables sync side by side ([`SYNCS_AT_ONCE`]), each within an equal part of the
    /// function's memory budget; a table whose objects need more than its part is synced
    /// again alone, once the others are done. With a `deadline` (the
    /// invocation's), no sync starts later than [`START_MARGIN`] before it, and a sync still
    /// running [`RESPONSE_MARGIN`] before it is cut off: those tables are left for
    /// redelivery, the others' messages are done. A sync cut off has made nothing visible
    /// (the catalog points at new metadata only once all of it is written); what it wrote
    /// is unreferenced.
    pub async fn handle(
        &self,
        event: &LambdaInput,
        deadline: Option<SystemTime>,
    ) -> Result<GlueSyncResponse> {
        // A deadline already past as the invocation starts is not a real one (`cargo lambda
        // watch` hands out such deadlines); Lambda never does.
        let deadline = deadline::of_invocation(deadline);
        if let Some(control) = event.control() {
            return self.control(control.clone(), deadline).await;
        }
        let deliveries = event.deliveries();
        let mut batch = Batch::new(&deliveries, event.is_sqs(), self.config.max_receive_count);
        let triggers = table_triggers(&deliveries, &self.config.table_prefixes);
        // The tables of a batch sync side by side, each within its part of the memory
        // budget: one slow table does not keep the others waiting until the deadline cuts
        // them off, and one table's large objects do not take the others' memory.
        let shared = &SharedOut::new(budget::current(), SYNCS_AT_ONCE.min(triggers.len()));
        let outcomes: Vec<(TableTrigger, Outcome)> = futures::stream::iter(triggers)
            .enumerate()
            .map(|(n, trigger)| async move {
                // The first syncs always start, so that every invocation makes progress.
                let first = n < SYNCS_AT_ONCE;
                let outcome = self.sync_before(&trigger, deadline, first, shared).await;
                (trigger, outcome)
            })
            .buffer_unordered(SYNCS_AT_ONCE)
            .collect()
            .await;
        for (trigger, outcome) in outcomes {
            batch.settle(&trigger, outcome);
        }
        let mut parked = 0;
        for (id, parking) in batch.failures.to_park() {
            let body = deliveries
                .iter()
                .find(|d| message_key(d) == id)
                .map_or("", |d: &Delivery| d.body.as_str());
            match self.park(body, &parking).await {
                Ok(()) => parked += 1,
                Err(e) => batch.failures.not_parked(id, e),
            }
        }
        if event.is_sqs() {
            return Ok(GlueSyncResponse::Batch(batch.sqs_response()));
        }
        match batch.failures.first_error {
            Some(e) => Err(e),
            None => Ok(GlueSyncResponse::Synced {
                synced: batch.synced,
                parked,
            }),
        }
    }

    /// What lakemirror itself asks: the scheduled verify, or one step of a fanned-out
    /// bootstrap (the `FanOutBootstrap` state machine), for a table under `TABLE_PREFIXES`
    /// mirrored into this function's database (or one `ALLOWED_GLUE_DATABASES` lets a table
    /// choose).
    async fn control(
        &self,
        control: Control,
        deadline: Option<SystemTime>,
    ) -> Result<GlueSyncResponse> {
        let counters = Arc::new(IoCounters::default());
        let refused = |table_uri: &str| {
            Error::NotAllowed(format!(
                "{table_uri} is not under TABLE_PREFIXES ({}): this function does not mirror it",
                self.config.table_prefixes.join(",")
            ))
        };
        let allowed = |uri: &str| allowed_by(&self.config.table_prefixes, uri);
        let checked = |plan: &FanOutPlan| -> Result<()> {
            if !allowed(&plan.table_uri) {
                return Err(refused(&plan.table_uri));
            }
            let database_allowed = plan.database == self.config.database
                || self
                    .config
                    .settings
                    .allowed_databases
                    .as_ref()
                    .is_some_and(|re| re.is_match(&plan.database));
            if !database_allowed {
                return Err(Error::NotAllowed(format!(
                    "the fan-out plan names Glue database {}, which this function may not write (GLUE_DATABASE={}, ALLOWED_GLUE_DATABASES)",
                    plan.database, self.config.database
                )));
            }
            // The function keeps a mirror's metadata in its table's own folder only: a plan
            // naming another folder (another table's) would write there and continue that
            // table's Glue entry, whose metadata lies in it.
            if let Some(folder) = &plan.metadata_uri {
                return Err(Error::NotAllowed(format!(
                    "the fan-out plan names metadata folder {folder}: this function writes a mirror's metadata only in its table's own _lakemirror/iceberg folder; plan again with fan-out-plan; nothing was written"
                )));
            }
            Ok(())
        };
        let request = |table_uri: String| self.config.request(table_uri);
        match control {
            Control::Verify => self.verify_mirrors(deadline).await,
            Control::CatchUp => self.catch_up_mirrors(deadline).await,
            Control::FanOutPlan { table_uri, parts } => {
                if !allowed(&table_uri) {
                    return Err(refused(&table_uri));
                }
                let request = request(table_uri);
                let plan = fanout::plan(&self.lake, &request, parts, counters).await?;
                tracing::info!(table = %plan.table_uri, glue_table = %format!("{}.{}", plan.database, plan.table), delta_version = plan.delta_version, files = plan.files, buckets = plan.buckets, parts = plan.parts, "planned a fanned-out bootstrap");
                Ok(GlueSyncResponse::FanOutPlanned(plan))
            }
            Control::FanOutPart { plan, part } => {
                checked(&plan)?;
                let written = fanout::run_part(&self.lake, &plan, part, counters).await?;
                Ok(GlueSyncResponse::FanOutPart(written))
            }
            Control::FanOutFinish { plan } => {
                checked(&plan)?;
                // The Glue table is the one thing a part does not write: checked before the
                // commit, against the table's own definition and this function's naming.
                let request = request(plan.table_uri.clone());
                fanout::check_target(&self.lake, &request, &plan, counters.clone()).await?;
                let report = fanout::finish(&self.lake, &plan, counters).await?;
                tracing::info!(table = %plan.table_uri, glue_table = %format!("{}.{}", report.database, report.table), action = ?report.action, delta_version = ?report.delta_version, added_files = report.added_files, "finished a fanned-out bootstrap");
                Ok(GlueSyncResponse::FanOutFinished(Box::new(report)))
            }
        }
    }

    /// `work` on every mirror of the function's Glue database under its table prefixes, a few
    /// at once; a mirror not started [`START_MARGIN`] before the deadline is left to the next
    /// tick (`doing` says what in the log). Also the mirrors whose metadata is unreadable.
    async fn each_mirror<T>(
        &self,
        deadline: Option<SystemTime>,
        doing: &'static str,
        work: impl AsyncFn(&Mirror) -> T,
    ) -> Result<(Vec<T>, Vec<crate::status::Unreadable>)> {
        let counters = Arc::new(IoCounters::default());
        let (mirrors, unreadable) = crate::status::mirrors(
            &self.lake,
            &self.config.database,
            &self.config.table_prefixes,
            &counters,
        )
        .await?;
        let work = &work;
        let shared = &SharedOut::new(budget::current(), SYNCS_AT_ONCE.min(mirrors.len()));
        let done = futures::stream::iter(&mirrors)
            .map(|mirror| async move {
                let left =
                    deadline.map(|d| d.duration_since(SystemTime::now()).unwrap_or_default());
                if left.is_some_and(|left| left < START_MARGIN) {
                    tracing::warn!(glue_table = %mirror.glue_table(), "too close to the function timeout to {doing}; left to the next tick");
                    return None;
                }
                // Each mirror's work within its part of the memory budget.
                Some(shared.within_part(work(mirror)).await)
            })
            .buffer_unordered(SYNCS_AT_ONCE)
            .filter_map(|done| async move { done })
            .collect()
            .await;
        Ok((done, unreadable))
    }

    /// The scheduled verify (`VerifySchedule`): every mirror of the function's Glue
    /// database under its table prefixes is verified at its current version, side by side,
    /// and each emits the `MirrorDrift` metric (0 equal, 1 a difference). A mirror that
    /// cannot be verified is logged and answered with its error; mirrors not started
    /// [`START_MARGIN`] before the deadline are left to the next tick.
    async fn verify_mirrors(&self, deadline: Option<SystemTime>) -> Result<GlueSyncResponse> {
        let (mut verified, unreadable) = self
            .each_mirror(deadline, "verify", async |mirror| {
                self.verify_one(mirror).await
            })
            .await?;
        for u in unreadable {
            tracing::error!(glue_table = %u.table, error = %u.error, "cannot verify: the mirror's metadata is unreadable");
            verified.push(Verified {
                glue_table: u.table,
                delta_table: String::new(),
                equal: None,
                delta_version: None,
                difference_count: 0,
                differences: Vec::new(),
                caught_up_to: None,
                error: Some(u.error),
            });
        }
        verified.sort_by(|a, b| a.glue_table.cmp(&b.glue_table));
        Ok(GlueSyncResponse::Verified { verified })
    }

    /// The scheduled catch-up (`CatchUpSchedule`): every mirror of the function's Glue
    /// database under its table prefixes is checked by one request (the name of the commit
    /// after the one it holds), and each one behind its Delta table, because an event was
    /// lost or is still on its way, is synced to the newest version. Each emits
    /// `MirrorBehind` (1 behind, 0 not), and the run one record with the number behind.
    async fn catch_up_mirrors(&self, deadline: Option<SystemTime>) -> Result<GlueSyncResponse> {
        let (mut lines, unreadable) = self
            .each_mirror(deadline, "catch up", async |mirror| {
                let mut line = CaughtUp {
                    glue_table: mirror.glue_table(),
                    delta_table: mirror.delta_table_uri.clone(),
                    mirrored_version: mirror.committed.delta_version(),
                    behind: false,
                    synced_to: None,
                    error: None,
                };
                match self.catch_up(mirror).await {
                    Ok(Some(report)) => {
                        line.behind = true;
                        line.synced_to = report.delta_version;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(glue_table = %line.glue_table, error = %e, "cannot catch the mirror up");
                        line.behind = true;
                        line.error = Some(e.to_string());
                    }
                }
                line
            })
            .await?;
        for u in unreadable {
            tracing::error!(glue_table = %u.table, error = %u.error, "cannot catch up: the mirror's metadata is unreadable");
            lines.push(CaughtUp {
                glue_table: u.table,
                delta_table: String::new(),
                mirrored_version: None,
                behind: false,
                synced_to: None,
                error: Some(u.error),
            });
        }
        lines.sort_by(|a, b| a.glue_table.cmp(&b.glue_table));
        MetricRecord::new("Database", self.config.database.as_str())
            .with(
                Metric::MirrorBehind,
                lines.iter().filter(|l| l.behind).count(),
            )
            .emit();
        Ok(GlueSyncResponse::CaughtUp { caught_up: lines })
    }

    /// A mirror behind its Delta table, synced to the newest version; None when it was not
    /// behind (one request: the next commit's name in the published log; a catalog-managed
    /// table's commits ratified but not published come with their own events). Emits
    /// `MirrorBehind` for the mirror.
    async fn catch_up(&self, mirror: &Mirror) -> Result<Option<SyncReport>> {
        let Some(mirrored) = mirror.committed.delta_version() else {
            return Ok(None);
        };
        let counters = Arc::new(IoCounters::default());
        let data = self
            .lake
            .stores
            .open(&mirror.delta_table_uri, counters.clone())?;
        let next = lakemirror_delta::DeltaLog::new(data.clone()).commit_file(mirrored + 1);
        let behind = data.head_if_exists(&next).await?.is_some();
        MetricRecord::new("Table", mirror.glue_table())
            .with(Metric::MirrorBehind, u64::from(behind))
            .emit();
        if !behind {
            return Ok(None);
        }
        tracing::warn!(glue_table = %mirror.glue_table(), mirrored, "the mirror is behind its Delta table (an event was lost or is still on its way): syncing it to the newest version");
        // Into the very Glue table found, whatever the naming settings would choose now.
        let request = SyncRequest {
            database: mirror.database.clone(),
            table: Some(mirror.table.clone()),
            ..self.config.request(mirror.delta_table_uri.clone())
        };
        let report = sync_table(&self.lake, &request, counters).await?;
        sync_metrics(&report, None).emit();
        Ok(Some(report))
    }

    async fn verify_one(&self, mirror: &Mirror) -> Verified {
        let request = VerifyRequest {
            table_uri: mirror.delta_table_uri.clone(),
            database: mirror.database.clone(),
            table: Some(mirror.table.clone()),
            metadata_uri: Some(mirror.metadata_uri.clone()),
            version: None,
            max_differences: 5,
        };
        let counters = Arc::new(IoCounters::default());
        let mut line = Verified {
            glue_table: mirror.glue_table(),
            delta_table: mirror.delta_table_uri.clone(),
            equal: None,
            delta_version: None,
            difference_count: 0,
            differences: Vec::new(),
            caught_up_to: None,
            error: None,
        };
        // A mirror behind its Delta table is caught up first: verified at the version it
        // holds, it would look equal while it lacks the newest commits.
        match self.catch_up(mirror).await {
            Ok(caught_up) => line.caught_up_to = caught_up.and_then(|r| r.delta_version),
            Err(e) => {
                tracing::error!(glue_table = %line.glue_table, error = %e, "cannot catch the mirror up before verifying it");
                line.error = Some(e.to_string());
                return line;
            }
        }
        match verify(&self.lake, &request, counters).await {
            Ok(report) => {
                MetricRecord::new("Table", line.glue_table.as_str())
                    .with(Metric::MirrorDrift, i64::from(!report.equal))
                    .emit();
                if report.equal {
                    tracing::info!(glue_table = %line.glue_table, delta_version = report.delta_version, files = report.delta_files, "mirror verified equal");
                } else {
                    tracing::error!(glue_table = %line.glue_table, delta_version = report.delta_version, differences = report.difference_count, first = report.differences.first().map(|d| d.message_with_file()).as_deref(), "mirror drift: it differs from its Delta table; lakemirror verify lists how, and a rebuild (delete the Glue table, sync again) repairs it");
                }
                line.equal = Some(report.equal);
                line.delta_version = Some(report.delta_version);
                line.difference_count = report.difference_count;
                line.differences = report
                    .differences
                    .iter()
                    .map(|d| d.message_with_file())
                    .collect();
            }
            Err(e) => {
                tracing::error!(glue_table = %line.glue_table, error = %e, "cannot verify the mirror");
                line.error = Some(e.to_string());
            }
        }
        line
    }

    /// One table's sync, started (unless `first`) only while [`START_MARGIN`] is left before
    /// the deadline, and cut off [`RESPONSE_MARGIN`] before it; a panic becomes a
    /// classified error.
    async fn sync_before(
        &self,
        trigger: &TableTrigger,
        deadline: Option<SystemTime>,
        first: bool,
        shared: &SharedOut,
    ) -> Outcome {
        // Within its part of the memory budget; again alone, with all of it, when an object
        // of the table needs more than its part.
        // Boxed: a sync's future is large, and two of them (in a part, then alone) would
        // sit on the stack of the task that runs the batch.
        let sync = lakemirror_runtime::isolated(shared.run(
            || Box::pin(sync_one(&self.lake, &self.config, trigger)),
            Error::needs_whole_budget,
        ));
        let finished = match deadline::run_before(deadline, first, sync).await {
            Timed::Done(finished) => finished,
            Timed::NotStarted => return Outcome::NotStarted,
            Timed::CutOff(budget) => return Outcome::CutOff(budget),
        };
        match finished {
            Ok(Ok(report)) if undecided(&report, trigger).is_some() => Outcome::Undecided(report),
            Ok(Ok(report)) => Outcome::Synced(report),
            Ok(Err(e)) => Outcome::Failed(e),
            Err(message) => Outcome::Failed(Error::Bug {
                table: trigger.table_uri(),
                message,
            }),
        }
    }

    /// Parks a message that can never succeed, logging it once. Without a dead-letter queue
    /// the failure is returned, so the platform's redrive policy parks it eventually.
    async fn park(&self, body: &str, parking: &Parking) -> Result<()> {
        let Some(queue) = &self.dead_letters else {
            tracing::warn!(
                "no DEAD_LETTER_QUEUE_URL: the event that cannot succeed is reported failed"
            );
            return Err(Error::Unparked(parking.reason.clone()));
        };
        queue
            .park(&Parked {
                body,
                reason: &parking.reason,
                table: parking.table.as_deref(),
                delta_version: parking.delta_version,
            })
            .await?;
        tracing::info!(table = parking.table.as_deref(), delta_version = parking.delta_version, dead_letter_queue = %queue.url(), "event parked in the dead-letter queue");
        Ok(())
    }
}

/// Syncs of one batch that run at once.
pub const SYNCS_AT_ONCE: usize = 4;

/// How long a sync waits, asking again, for the catalog to decide a staged commit an event
/// announced before the event is left for redelivery.
pub const RATIFICATION_WAIT: Duration = Duration::from_secs(4);
/// The first pause of that wait; each next one is twice as long.
const RATIFICATION_FIRST_PAUSE: Duration = Duration::from_millis(250);

/// The first staged commit of `trigger` past the newest version the catalog ratified, as the
/// sync `report` saw it; None when every one is decided (ratified, or lost to another
/// commit) or no catalog was asked (the mirror then follows the published log only).
fn undecided<'t>(report: &SyncReport, trigger: &'t TableTrigger) -> Option<&'t StagedCommitFile> {
    let ratified = report.catalog_managed.as_ref()?.ratified_version?;
    trigger
        .staged
        .iter()
        .find(|staged| staged.version > ratified)
}

async fn sync_one(
    lake: &Lakehouse,
    config: &GlueSyncConfig,
    trigger: &TableTrigger,
) -> Result<SyncReport> {
    let counters = Arc::new(IoCounters::default());
    let request = SyncRequest {
        known_version: Some(trigger.newest_version),
        ..config.request(trigger.table_uri())
    };
    let mut report = sync_table(lake, &request, counters.clone()).await?;
    // A staged commit's event arrives before the catalog ratifies it: ask again, briefly.
    let waiting = Instant::now();
    let mut pause = RATIFICATION_FIRST_PAUSE;
    while undecided(&report, trigger).is_some() && waiting.elapsed() + pause <= RATIFICATION_WAIT {
        tokio::time::sleep(pause).await;
        pause *= 2;
        report = sync_table(lake, &request, counters.clone()).await?;
    }
    let lag_ms = trigger.first_event_time_ms.map(|t| {
        chrono::Utc::now()
            .timestamp_millis()
            .saturating_sub(t)
            .max(0)
    });
    tracing::info!(
        table = %trigger.table_uri(),
        glue_table = %format!("{}.{}", report.database, report.table),
        delta_version = report.delta_version,
        snapshots = report.snapshots_committed,
        added_files = report.added_files,
        removed_files = report.removed_files,
        duration_ms = report.elapsed_ms,
        lag_ms,
        "synced"
    );
    sync_metrics(&report, lag_ms).emit();
    Ok(report)
}

/// The metrics of a committed sync: its duration and, for an S3 event, event-to-committed lag.
fn sync_metrics(report: &SyncReport, lag_ms: Option<i64>) -> MetricRecord {
    let mut record = MetricRecord::new("Table", format!("{}.{}", report.database, report.table))
        .with(Metric::SyncDuration, report.elapsed_ms)
        .with(Metric::OmittedColumns, report.omitted_columns.len())
        .with_property("SnapshotsCommitted", report.snapshots_committed);
    if let Some(managed) = &report.catalog_managed {
        record = record.with(Metric::PublishedOnly, u64::from(managed.limited.is_some()));
    }
    match lag_ms {
        Some(lag) => record.with(Metric::SyncLag, lag),
        None => record,
    }
}
