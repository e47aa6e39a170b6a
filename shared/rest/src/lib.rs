//! An Iceberg REST catalog (Polaris, Lakekeeper, Unity Catalog, Glue's and S3 Tables'
//! Iceberg endpoints, rustberg) as a second target of the mirror: [`RestCatalog`] is one more
//! implementation of the catalog seam, held to the same contract as Glue's
//! (`tests/catalog_contract.rs`).

pub mod auth;
pub mod catalog;
pub mod config;
pub mod error;

pub use catalog::{AwsSigning, RestCatalog};
pub use config::{AuthSettings, ClientCredentials, RestCatalogSettings};
pub use error::{Error, Result};
