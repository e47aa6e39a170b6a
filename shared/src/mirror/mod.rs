//! The Delta -> Iceberg mirror: schema and partition mapping, planning, metadata writing.

pub mod metrics;
pub mod name_mapping;
pub mod partition;
pub mod plan;
pub mod puffin;
pub mod schema;
pub mod writer;

pub use plan::{IcebergView, SnapshotPlan, plan_commits, plan_full, plan_full_taking};
pub use writer::{CommittedTable, MetadataWriter, StagedTable};
