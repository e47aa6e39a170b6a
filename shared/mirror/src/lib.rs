//! lakemirror-mirror: the Delta -> Iceberg sync. [`sync`] ties the floors below into one
//! sync of one table (read the log, plan, write, commit with compare-and-swap, retry);
//! [`fanout`] bootstraps very large tables in parts; [`verify`], [`status`] and [`discover`]
//! are the operator's tools; [`function`] is the glue-sync function's policy: a batch of
//! events in, one sync per announced table, a response out.

mod batch;
mod commit;
mod decide;
pub mod discover;
mod error;
pub mod fanout;
pub mod function;
pub mod grouped;
mod report;
pub mod settings;
pub mod status;
pub mod sync;
pub mod verify;

pub use error::{Error, Result};
pub use settings::SyncSettings;
pub use sync::{OnMissingSource, SyncAction, SyncReport, SyncRequest, sync_table};
