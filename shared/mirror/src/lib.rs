//! lakemirror-mirror: the Delta -> Iceberg sync. [`glue_sync`] ties the floors below into one
//! sync of one table (read the log, plan, write, commit with compare-and-swap, retry);
//! [`fanout`] bootstraps very large tables in parts; [`verify`], [`status`] and [`discover`]
//! are the operator's tools; [`function`] is the glue-sync function's policy: a batch of
//! events in, one sync per announced table, a response out.

mod decide;
pub mod discover;
mod error;
pub mod fanout;
pub mod function;
pub mod glue_sync;
pub mod settings;
pub mod status;
pub mod verify;

pub use error::{Error, Result};
pub use glue_sync::{GlueSyncRequest, OnMissingSource, SyncAction, SyncReport, glue_sync};
pub use settings::SyncSettings;
