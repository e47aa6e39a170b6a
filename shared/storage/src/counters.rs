//! Requests and bytes moved: every request a sync makes is counted, for its report and the
//! benchmarks, and named: which call it was and what it was for (`S3 GET Delta commit`,
//! `Glue UpdateTable`), so that a benchmark can account for every request.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Requests and bytes moved, for the sync report and benchmarks.
#[derive(Debug, Default)]
pub struct IoCounters {
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Requests by what they were: the call and the kind of object or catalog entry.
    calls: Mutex<BTreeMap<String, u64>>,
}

/// Counts as plain numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoTotals {
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// The requests by call and purpose (`S3 GET Delta commit: 1`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub calls: BTreeMap<String, u64>,
}

impl IoCounters {
    pub fn totals(&self) -> IoTotals {
        IoTotals {
            requests: self.requests.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
            calls: self.calls.lock().map(|c| c.clone()).unwrap_or_default(),
        }
    }

    /// One request that moved these bytes, of a call not named.
    pub fn request(&self, read: usize, written: usize) {
        self.call("other", read, written);
    }

    /// One request, `call` (what it was and what for), that moved these bytes.
    pub fn call(&self, call: &str, read: usize, written: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes_read.fetch_add(read as u64, Ordering::Relaxed);
        self.bytes_written
            .fetch_add(written as u64, Ordering::Relaxed);
        if let Ok(mut calls) = self.calls.lock() {
            *calls.entry(call.to_string()).or_default() += 1;
        }
    }
}

/// What an object of a table is, by its location: the purpose a request for it names.
pub(crate) fn object_kind(location: &str) -> &'static str {
    let name = location.rsplit('/').next().unwrap_or(location);
    if location.contains("/_delta_log/_staged_commits/") {
        "staged commit"
    } else if location.contains("/_delta_log/") || location.ends_with("/_delta_log") {
        match name {
            "" => "Delta log listing",
            "_last_checkpoint" => "_last_checkpoint",
            n if n.contains(".checkpoint.") => "Delta checkpoint",
            n if n.ends_with(".json") => "Delta commit",
            _ => "Delta log file",
        }
    } else if location.contains("/_lakemirror/") {
        match name {
            "glue-target.json" => "remembered target",
            "" => "mirror folder listing",
            n if n.ends_with(".metadata.json") => "mirror metadata",
            n if n.starts_with("snap-") => "manifest list",
            n if n.ends_with(".avro") => "manifest",
            n if n.ends_with(".puffin") || n.ends_with(".parquet") => "delete file",
            _ => "mirror file",
        }
    } else if name.ends_with(".parquet") {
        "data file"
    } else if name.is_empty() {
        "folder listing"
    } else {
        "object"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_named_by_the_object_it_is_for() {
        let kind = |l: &str| object_kind(l);
        assert_eq!(
            kind("s3://b/t/_delta_log/00000000000000000007.json"),
            "Delta commit"
        );
        assert_eq!(kind("s3://b/t/_delta_log/"), "Delta log listing");
        assert_eq!(kind("s3://b/_delta_log/"), "Delta log listing");
        assert_eq!(
            kind("s3://b/t/_delta_log/_last_checkpoint"),
            "_last_checkpoint"
        );
        assert_eq!(
            kind("s3://b/t/_delta_log/00000000000000000010.checkpoint.parquet"),
            "Delta checkpoint"
        );
        assert_eq!(
            kind("s3://b/t/_delta_log/_staged_commits/00000000000000000001.u.json"),
            "staged commit"
        );
        assert_eq!(
            kind("s3://b/t/_lakemirror/iceberg/glue-target.json"),
            "remembered target"
        );
        assert_eq!(
            kind("s3://b/t/_lakemirror/iceberg/metadata/00001-a.metadata.json"),
            "mirror metadata"
        );
        assert_eq!(
            kind("s3://b/t/_lakemirror/iceberg/metadata/snap-1-a.avro"),
            "manifest list"
        );
        assert_eq!(
            kind("s3://b/t/_lakemirror/iceberg/metadata/a-m0.avro"),
            "manifest"
        );
        assert_eq!(kind("s3://b/t/part-0.parquet"), "data file");
        let counters = IoCounters::default();
        counters.call("S3 GET Delta commit", 10, 0);
        counters.call("S3 GET Delta commit", 5, 0);
        counters.request(0, 0);
        let totals = counters.totals();
        assert_eq!((totals.requests, totals.bytes_read), (3, 15));
        assert_eq!(totals.calls["S3 GET Delta commit"], 2);
        assert_eq!(totals.calls["other"], 1);
    }
}
