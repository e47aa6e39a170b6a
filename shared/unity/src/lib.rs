//! lakemirror-unity: Unity Catalog through its OSS REST API ([`client`]). Delta tables are
//! registered as EXTERNAL DELTA tables ([`register`], their columns from the Delta schema in
//! [`columns`]), and tables named `catalog.schema.table` are opened for reading through
//! their storage location and vended credentials ([`sources`]). [`commits`] asks Unity Catalog
//! which commits of a catalog-managed Delta table it ratified. [`function`] is the
//! unity-register function's logic.

pub mod answers;
pub mod client;
pub mod columns;
pub mod commits;
mod error;
pub mod function;
pub mod register;
pub mod sources;

pub use client::{TableInfo, UnityCatalog};
pub use commits::UnityCommits;
pub use error::{Error, Result, Setting};
pub use register::{UnityRegisterRequest, UnityReport, unity_register};
pub use sources::open_table;
