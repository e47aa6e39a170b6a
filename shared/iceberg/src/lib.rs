//! lakemirror-iceberg: the Iceberg side of the mirror. The writer carries out the planner's
//! snapshot plans (manifests, manifest lists, delete files, the metadata file: [`writer`],
//! [`puffin`]); a [`Catalog`] (Glue, or [`InMemoryCatalog`]) makes them current with a
//! compare-and-swap. [`glue_sync`] ties the floors below into one sync; [`fanout`] bootstraps
//! very large tables in parts; [`verify`], [`status`] and [`discover`] are the operator's
//! tools.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

mod avro_header;
pub mod catalog;
pub mod discover;
mod error;
pub mod fanout;
pub mod glue_sync;
pub mod puffin;
pub mod status;
pub mod verify;
pub mod writer;

pub use catalog::{Catalog, CatalogTable, InMemoryCatalog, Lakehouse};
pub use error::{Error, Result};
pub use glue_sync::{GlueSyncRequest, OnMissingSource, SyncAction, SyncReport, glue_sync};
/// What one sync reads of a Delta log at once, set by each function from its memory.
pub use lakemirror_delta::LogLimits;
pub use writer::{MetadataWriter, StagedTable};
