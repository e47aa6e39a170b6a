//! How much of a log one table's work reads into memory: its share of the process's memory
//! budget ([`lakemirror_storage::budget`]).
//!
//! A sync holds each log file it reads as bytes (their room taken from the share while they
//! live) and each data file of the table as an action (about 2 KB with its column stats,
//! bounded by count from the rest of the share). A log too large for the share is refused
//! with what to do, or read in groups, instead of the process being killed for its memory
//! with every other table of its batch.

use lakemirror_storage::MemoryShare;
use lakemirror_storage::budget;

pub use lakemirror_storage::budget::BYTES_PER_HELD_FILE;

/// What one table's work reads of a log at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// The memory these limits were derived from (None: not bounded by memory).
    pub memory_mb: Option<u64>,
    /// How many tables share that memory at once.
    pub shared_by: u32,
    /// The largest commit, checkpoint part or sidecar read into memory.
    pub file_bytes: u64,
    /// The most data files one replay holds.
    pub held_files: u64,
}

impl LogLimits {
    /// No bound but the largest log file (tests, and a process that was given no memory).
    pub fn unbounded() -> Self {
        Self::of(&MemoryShare::unbounded())
    }

    /// The limits of work within `share`.
    pub fn of(share: &MemoryShare) -> Self {
        LogLimits {
            memory_mb: share.memory_mb(),
            shared_by: share.shared_by(),
            file_bytes: share.read_bytes(),
            held_files: share.held_files(),
        }
    }

    /// The limits of the work running now: its share of the budget.
    pub fn current() -> Self {
        Self::of(&budget::current())
    }

    /// The memory the held files may take (about [`BYTES_PER_HELD_FILE`] each).
    pub fn held_bytes(&self) -> u64 {
        self.held_files.saturating_mul(BYTES_PER_HELD_FILE)
    }

    /// The memory size as the error messages name it.
    pub fn memory_text(&self) -> String {
        let memory = match self.memory_mb {
            Some(mb) => format!("{mb} MB of memory"),
            None => "this memory".to_string(),
        };
        match self.shared_by {
            0 | 1 => memory,
            n => format!("{memory}, shared by {n} tables at once"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limits_grow_with_memory_and_the_default_function_fits_a_group() {
        let small = LogLimits::of(&MemoryShare::for_memory_mb(128));
        let default = LogLimits::of(&MemoryShare::for_memory_mb(1024));
        let large = LogLimits::of(&MemoryShare::for_memory_mb(10240));
        // The default function holds about 236,000 files: most of a default bootstrap group
        // (250,000, cut to what the budget holds).
        assert!(default.held_files > 200_000, "{}", default.held_files);
        assert!(small.held_files < default.held_files && default.held_files < large.held_files);
        assert!(small.file_bytes < default.file_bytes && default.file_bytes < large.file_bytes);
        let part = LogLimits::of(&MemoryShare::for_memory_mb(1024).part(4));
        assert!(part.held_files * 4 <= default.held_files + 4);
        assert_eq!(
            part.memory_text(),
            "1024 MB of memory, shared by 4 tables at once"
        );
    }
}
