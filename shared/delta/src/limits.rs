//! How much of a log one process reads into memory, from the memory it has.
//!
//! A sync holds each log file it reads as bytes and each data file of the table as an
//! action (about 2 KB with its column stats). Both are bounded by the memory of the process
//! (a Lambda function's `MemorySize`), so a log too large for it is refused with what to do,
//! or read in groups, instead of the process being killed for its memory with every other
//! table of its batch.

use std::sync::OnceLock;

/// Memory one held data file takes (its add with column stats and the path keys).
pub const BYTES_PER_HELD_FILE: u64 = 2 * 1024;
/// The largest log file read into memory however much memory there is (a commit of a
/// million files with stats is about 1 GB).
const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;
const MIB: u64 = 1024 * 1024;

/// What one process reads of a log at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLimits {
    /// The memory these limits were derived from (None: not bounded by memory).
    pub memory_mb: Option<u64>,
    /// The largest commit, checkpoint part or sidecar read into memory.
    pub file_bytes: u64,
    /// The most data files one replay holds.
    pub held_files: u64,
}

impl LogLimits {
    /// No bound but the largest log file (tests, and a process that was given no memory).
    pub const UNBOUNDED: LogLimits = LogLimits {
        memory_mb: None,
        file_bytes: MAX_FILE_BYTES,
        held_files: u64::MAX,
    };

    /// The limits of a process with `memory_mb` of memory: a log file at most a quarter of
    /// it, and the files held at most 60% of it (the rest is the runtime, the bytes of the
    /// file being read and the metadata being written).
    pub fn for_memory_mb(memory_mb: u64) -> Self {
        let memory = memory_mb.saturating_mul(MIB);
        LogLimits {
            memory_mb: Some(memory_mb),
            file_bytes: (memory / 4).clamp(MIB, MAX_FILE_BYTES),
            held_files: (memory / 10 * 6 / BYTES_PER_HELD_FILE).max(1),
        }
    }

    /// Sets the limits of this process (once, at start-up; later calls are ignored): also
    /// the bound of every whole-object read ([`lakemirror_storage::object_bytes`]).
    pub fn install(self) {
        let _ = INSTALLED.set(self);
        lakemirror_storage::install_object_bytes(self.file_bytes);
    }

    /// The limits installed for this process, [`LogLimits::UNBOUNDED`] when none were.
    pub fn current() -> Self {
        INSTALLED.get().copied().unwrap_or(Self::UNBOUNDED)
    }

    /// The memory size as the error messages name it.
    pub fn memory_text(&self) -> String {
        match self.memory_mb {
            Some(mb) => format!("{mb} MB of memory"),
            None => "this memory".to_string(),
        }
    }
}

static INSTALLED: OnceLock<LogLimits> = OnceLock::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limits_grow_with_memory_and_the_default_function_fits_a_group() {
        let small = LogLimits::for_memory_mb(128);
        let default = LogLimits::for_memory_mb(1024);
        let large = LogLimits::for_memory_mb(10240);
        assert_eq!(small.file_bytes, 32 * MIB);
        assert_eq!(default.file_bytes, 256 * MIB);
        assert_eq!(large.file_bytes, MAX_FILE_BYTES);
        // The default bootstrap group (250,000 files) fits the default function.
        assert!(default.held_files > 250_000, "{}", default.held_files);
        assert!(small.held_files < default.held_files && default.held_files < large.held_files);
        // Files held and the log file read stay inside the memory.
        for limits in [small, default, large] {
            let mb = limits.memory_mb.unwrap();
            assert!(limits.held_files * BYTES_PER_HELD_FILE + limits.file_bytes < mb * MIB);
        }
    }

    #[test]
    fn even_a_tiny_memory_reads_something() {
        let tiny = LogLimits::for_memory_mb(0);
        assert_eq!(tiny.file_bytes, MIB);
        assert_eq!(tiny.held_files, 1);
    }
}
