//! Reading the Delta transaction log: actions, schema, replay, and the log files on storage.

pub mod actions;
pub mod deletion_vector;
pub mod log;
pub mod replay;
pub mod schema;

pub use actions::{Add, DeltaCommit, Metadata, Protocol, Remove};
pub use log::{CommitsSince, DeltaLog, DeltaSnapshot, TableDefinition};
pub use replay::{ActiveFileSet, FileAction, FileFilter};
