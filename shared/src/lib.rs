//! lakemirror: keeps a Delta Lake table readable as an Apache Iceberg table in AWS Glue,
//! over the very same Parquet files.
//!
//! - [`delta`] reads the Delta log (checkpoints and commits; never a directory listing).
//! - [`mirror`] plans Iceberg snapshots from Delta actions (pure) and writes them.
//! - [`glue`] commits to AWS Glue with a `VersionId` compare-and-swap.
//! - [`sync`] ties them together: one `glue-sync`.
//! - [`trigger`] and [`handler`] turn Lambda events into syncs.
//! - [`status`] tells which mirrors are behind or failing; [`discover`] finds the Delta
//!   tables under a prefix for a back-fill.
//! - [`verify`] proves a mirror equal to its Delta table at a version, from metadata alone.
//! - [`lakebase`] copies Delta tables into PostgreSQL; [`unity`] registers them in Unity Catalog.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod aws;
pub mod crash;
pub mod dead_letter;
pub mod delta;
pub mod discover;
pub mod error;
pub mod fanout;
pub mod glue;
pub mod handler;
pub mod lakebase;
pub mod mirror;
pub mod parquet_footer;
pub mod secrets;
pub mod status;
pub mod storage;
pub mod sync;
pub mod target;
pub mod trigger;
pub mod unity;
pub mod verify;

pub use error::{Error, Result};
