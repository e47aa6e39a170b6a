//! lakemirror-iceberg: the Iceberg metadata writer. It carries out the planner's snapshot
//! plans (manifests, manifest lists, delete files, the metadata file: [`writer`], [`puffin`]);
//! a [`Catalog`] (Glue, a REST catalog, or [`InMemoryCatalog`]) makes them current with a
//! compare-and-swap.
//! The sync that drives it lives in `lakemirror-mirror`.

mod avro_cost;
mod avro_header;
pub mod catalog;
pub mod changes;
mod error;
pub mod metadata_json;
pub mod puffin;
pub mod writer;

pub use catalog::{Catalog, CatalogTable, InMemoryCatalog, Lakehouse};
pub use error::{Error, Result};
pub use writer::{MetadataWriter, StagedTable};
