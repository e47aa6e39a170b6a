//! lakemirror-delta: the Delta transaction log, read the way the protocol says and never by
//! listing data folders. Actions ([`actions`]), the table schema ([`schema`]) and its column
//! defaults read as Spark reads them ([`defaults`]), log replay into the active file set
//! ([`replay`]), deletion vectors ([`deletion_vector`]), checkpoints ([`checkpoint`]), the
//! log folder on storage ([`log`]), and the checks that a Parquet footer nobody vouches for
//! is safe to decode ([`footer`]).

pub mod actions;
pub mod bounded;
pub mod catalog_managed;
pub mod checkpoint;
mod checkpoint_columns;
pub mod defaults;
pub mod deletion_vector;
mod error;
pub mod footer;
pub mod log;
pub mod replay;
pub mod schema;
#[cfg(any(test, feature = "test-tables"))]
pub mod test_tables;

pub use actions::{Add, DeltaCommit, Metadata, Protocol, Remove};
pub use catalog_managed::{CatalogManaged, CommitCatalog, Ratified};
pub use error::{Error, Result};
pub use lakemirror_storage::{LogPath, TableScope};
pub use log::LogLimits;
pub use log::{CommitsSince, DeltaLog, DeltaSnapshot, TableDefinition};
pub use replay::{ActiveFileSet, FileAction, FileFilter};
