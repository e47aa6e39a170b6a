//! The CloudWatch metrics lakemirror emits, as embedded-metric-format (EMF) records: one JSON
//! line on stdout that Lambda's log pipeline turns into metrics in the `lakemirror` namespace.
//! Every metric is a [`Metric`], so this file is the list the SAM template's dashboard and
//! alarms are checked against (tests/acceptance/deployment/test_template_dashboard.py).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Number, Value, json};

/// The namespace of every lakemirror metric.
pub const NAMESPACE: &str = "lakemirror";

/// A metric lakemirror emits; its variant name is its CloudWatch name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// glue-sync: how long a sync took (ms).
    SyncDuration,
    /// glue-sync: from the Delta commit's S3 event to the Iceberg commit (ms).
    SyncLag,
    /// glue-sync: a sync that failed (1).
    SyncFailed,
    /// scheduled verify: 1 when the mirror differs from its Delta table, 0 when equal.
    MirrorDrift,
    /// glue-sync: a mirror whose Delta table is gone (1).
    SourceMissing,
    /// scheduled catch-up and verify: 1 when the mirror was behind its Delta table (its
    /// newest events lost or late; it is synced then), 0 when not; per `Database`: how
    /// many mirrors were behind.
    MirrorBehind,
    /// glue-sync: the columns a mirror leaves out (`lakemirror.omitted-columns`): a type or a
    /// widening its Iceberg format version cannot hold, or a column Java cannot read.
    OmittedColumns,
    /// glue-sync: 1 when a catalog-managed table is mirrored up to its newest published
    /// version only, for want of its catalog (UcUrl); 0 when its catalog was asked.
    PublishedOnly,
    /// lakebase-sync: rows a reverse sync inserted, updated or deleted.
    ReverseSyncRows,
    /// lakebase-sync: how long a reverse sync took (ms).
    ReverseSyncDuration,
    /// lakebase-sync: a reverse sync that failed (1).
    ReverseSyncFailed,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::SyncDuration => "SyncDuration",
            Metric::SyncLag => "SyncLag",
            Metric::SyncFailed => "SyncFailed",
            Metric::MirrorDrift => "MirrorDrift",
            Metric::SourceMissing => "SourceMissing",
            Metric::MirrorBehind => "MirrorBehind",
            Metric::OmittedColumns => "OmittedColumns",
            Metric::PublishedOnly => "PublishedOnly",
            Metric::ReverseSyncRows => "ReverseSyncRows",
            Metric::ReverseSyncDuration => "ReverseSyncDuration",
            Metric::ReverseSyncFailed => "ReverseSyncFailed",
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Metric::SyncDuration | Metric::SyncLag | Metric::ReverseSyncDuration => "Milliseconds",
            Metric::SyncFailed
            | Metric::MirrorDrift
            | Metric::SourceMissing
            | Metric::MirrorBehind
            | Metric::OmittedColumns
            | Metric::PublishedOnly
            | Metric::ReverseSyncRows
            | Metric::ReverseSyncFailed => "Count",
        }
    }
}

/// One EMF record: a dimension (e.g. `Table` = the Glue table) and the metrics measured for it.
#[derive(Debug)]
pub struct MetricRecord {
    dimension: &'static str,
    value: String,
    metrics: Vec<(Metric, Number)>,
    properties: Map<String, Value>,
}

impl MetricRecord {
    /// A record for `dimension` = `value` (e.g. `Table`, `sales.orders`).
    pub fn new(dimension: &'static str, value: impl Into<String>) -> Self {
        Self {
            dimension,
            value: value.into(),
            metrics: Vec::new(),
            properties: Map::new(),
        }
    }

    /// Adds a measured value of `metric`.
    pub fn with(mut self, metric: Metric, value: impl Into<Number>) -> Self {
        self.metrics.push((metric, value.into()));
        self
    }

    /// Adds a field that is logged with the record but is not a metric.
    pub fn with_property(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.properties.insert(key.to_string(), value.into());
        self
    }

    /// The record as of `timestamp_ms`, in EMF.
    pub fn to_json(&self, timestamp_ms: i64) -> Value {
        let definitions: Vec<Value> = self
            .metrics
            .iter()
            .map(|(m, _)| json!({ "Name": m.name(), "Unit": m.unit() }))
            .collect();
        let mut record = self.properties.clone();
        record.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp_ms,
                "CloudWatchMetrics": [{ "Namespace": NAMESPACE, "Dimensions": [[self.dimension]],
                                        "Metrics": definitions }]
            }),
        );
        record.insert(self.dimension.into(), json!(self.value));
        for (metric, value) in &self.metrics {
            record.insert(metric.name().into(), json!(value));
        }
        Value::Object(record)
    }

    /// Prints the record, stamped now, to stdout, where Lambda's log pipeline reads EMF.
    pub fn emit(&self) {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        println!("{}", self.to_json(now_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_defines_each_metric_it_carries_under_one_dimension() {
        let record = MetricRecord::new("Table", "sales.orders")
            .with(Metric::SyncDuration, 120)
            .with(Metric::SyncLag, 900)
            .with_property("SnapshotsCommitted", 2)
            .to_json(1_700_000_000_000);
        assert_eq!(
            record,
            json!({
                "_aws": {
                    "Timestamp": 1_700_000_000_000_i64,
                    "CloudWatchMetrics": [{ "Namespace": "lakemirror", "Dimensions": [["Table"]],
                                            "Metrics": [{ "Name": "SyncDuration", "Unit": "Milliseconds" },
                                                        { "Name": "SyncLag", "Unit": "Milliseconds" }] }]
                },
                "Table": "sales.orders",
                "SyncDuration": 120,
                "SyncLag": 900,
                "SnapshotsCommitted": 2,
            })
        );
    }

    #[test]
    fn counts_are_counts() {
        let record = MetricRecord::new("Target", "public.orders")
            .with(Metric::ReverseSyncFailed, 1)
            .to_json(0);
        assert_eq!(
            record["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            json!([{ "Name": "ReverseSyncFailed", "Unit": "Count" }])
        );
        assert_eq!(record["ReverseSyncFailed"], 1);
    }
}
