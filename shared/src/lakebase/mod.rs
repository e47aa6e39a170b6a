//! Reverse sync: Delta tables into PostgreSQL / Databricks Lakebase tables for low-latency
//! application reads.

pub mod changes;
pub mod config;
pub mod copy;
pub mod function;
pub mod postgres;
pub mod read;
pub mod sync;
pub mod types;

pub use config::{SyncedTable, TableKeys, read_config};
pub use postgres::Connection;
pub use sync::{LakebaseReport, lakebase_sync};
