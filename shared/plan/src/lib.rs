//! lakemirror-plan: pure planning, no IO and no async. Delta actions and the current
//! Iceberg view go in; snapshot plans come out ([`snapshot`]), with the schema and partition
//! mapping ([`schema`], [`partition`], [`name_mapping`]), column metrics from Delta stats
//! ([`metrics`]), the manifest bucket layout ([`layout`]), which snapshots expire
//! ([`expiry`]), how much history it keeps ([`history`]), where a mirror is named ([`target`]) and the names the mirror writes into
//! Iceberg metadata ([`properties`]).

pub mod committed;
mod error;
pub mod expiry;
pub mod format_version;
pub mod history;
pub mod layout;
pub mod metrics;
pub mod name_mapping;
pub mod partition;
pub mod properties;
pub mod schema;
pub mod snapshot;
pub mod target;

pub use committed::CommittedTable;
pub use error::{Error, Result};
pub use snapshot::{
    IcebergView, PlannedFile, SnapshotPlan, data_file_location, parse_format_version, plan_commits,
    plan_full, plan_full_taking,
};
