//! lakemirror-lakebase, the reverse sync: Delta tables into PostgreSQL / Databricks Lakebase
//! tables for low-latency application reads. The synced tables' configuration ([`config`]),
//! Delta types as PostgreSQL types ([`types`]: variants as `jsonb` ([`variant`]), geospatial
//! types as PostGIS's or WKB ([`geo`]), column defaults as `DEFAULT` ([`defaults`])), rows
//! read by row group ([`read`]) and encoded for binary `COPY` ([`copy`], nested values as
//! JSON text by [`json`]), what changed between two versions ([`changes`]),
//! the connection ([`postgres`]), the sync itself ([`sync`]) and the lakebase-sync
//! function's logic ([`function`]).

pub mod changes;
pub mod config;
pub mod copy;
pub mod defaults;
mod error;
mod full_refresh;
pub mod function;
pub mod geo;
mod incremental;
mod json;
mod json_text;
pub mod postgres;
pub mod read;
mod state;
pub mod sync;
pub mod types;
mod variant;

pub use config::{SyncedTable, TableKeys, read_config};
pub use error::{Error, Result, Setting};
pub use postgres::Connection;
pub use sync::{LakebaseReport, lakebase_sync};
