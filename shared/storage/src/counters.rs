//! Requests and bytes moved: every request a sync makes is counted, for its report and the
//! benchmarks.

use std::sync::atomic::{AtomicU64, Ordering};

/// Requests and bytes moved, for the sync report and benchmarks.
#[derive(Debug, Default)]
pub struct IoCounters {
    pub requests: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_written: AtomicU64,
}

/// Counts as plain numbers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoTotals {
    pub requests: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl IoCounters {
    pub fn totals(&self) -> IoTotals {
        IoTotals {
            requests: self.requests.load(Ordering::Relaxed),
            bytes_read: self.bytes_read.load(Ordering::Relaxed),
            bytes_written: self.bytes_written.load(Ordering::Relaxed),
        }
    }

    /// One request that moved these bytes.
    pub fn request(&self, read: usize, written: usize) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.bytes_read.fetch_add(read as u64, Ordering::Relaxed);
        self.bytes_written
            .fetch_add(written as u64, Ordering::Relaxed);
    }
}
