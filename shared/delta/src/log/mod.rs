//! The `_delta_log` folder on storage: which versions exist, commits and checkpoints.
//!
//! Only `_delta_log/` is ever listed; data files come from the log alone.
//!
//! By concern: `file_kind` names the files, `listing` lists the folder, `commits` reads
//! commits, `checkpoints` reads checkpoints, `snapshot` replays them into the table at one
//! version, `history` into one snapshot per version, `catalog` reads a catalog-managed
//! table as its catalog ratified it, and `limits` says what one table's work reads into memory
//! (its share of the budget) and refuses what one read cannot hold.

mod catalog;
mod checkpoints;
mod commits;
mod file_kind;
mod history;
mod limits;
mod listing;
mod snapshot;

use std::sync::Arc;

use crate::catalog_managed::{CatalogManaged, CommitCatalog};
use crate::error::Error;
use lakemirror_storage::TableStorage;

pub use commits::CommitsSince;
pub use file_kind::{LogFileKind, classify, staged_commit_version};
pub use limits::LogLimits;
pub use snapshot::{DeltaSnapshot, TableDefinition};

/// Commit files read at once.
const FETCH_CONCURRENCY: usize = 16;

/// Reads the `_delta_log` of one table.
#[derive(Debug, Clone)]
pub struct DeltaLog {
    table: TableStorage,
    /// What one read holds in memory: log files above its bytes and replays above its files
    /// are refused instead of the process being killed for its memory.
    limits: LogLimits,
    /// Who ratifies a catalog-managed table's commits; None: only published commits are read.
    commit_catalog: Option<Arc<dyn CommitCatalog>>,
    /// The log's tail: how a catalog-managed table is read (the commits its catalog
    /// ratified, or its published log only), given when the log is made
    /// ([`Self::ask_catalog`], [`Self::with_tail`]). None: the table is not known to be one.
    tail: Option<CatalogManaged>,
}

impl DeltaLog {
    /// The log of `table`, read within the [`LogLimits`] of the work running now (its share
    /// of the process's memory budget).
    pub fn new(table: TableStorage) -> Self {
        Self::with_limits(table, LogLimits::current())
    }

    pub fn with_limits(table: TableStorage, limits: LogLimits) -> Self {
        Self {
            table,
            limits,
            commit_catalog: None,
            tail: None,
        }
    }

    pub fn limits(&self) -> LogLimits {
        self.limits
    }

    pub fn table(&self) -> &TableStorage {
        &self.table
    }

    fn log_dir(&self) -> String {
        self.table.location("_delta_log/")
    }

    fn log_file(&self, name: &str) -> String {
        self.table.location(&format!("_delta_log/{name}"))
    }

    /// The location of the commit file of `version`.
    pub fn commit_file(&self, version: i64) -> String {
        self.log_file(&format!("{version:020}.json"))
    }

    fn malformed(&self, reason: impl std::fmt::Display) -> Error {
        Error::malformed(self.table.root_uri(), reason)
    }
}
