//! Unity Catalog: Delta tables registered through the UC REST API as EXTERNAL DELTA tables
//! ([`register`]), and tables named `catalog.schema.table` opened for reading through
//! their storage location and vended credentials ([`open_table`]).

pub mod client;
pub mod columns;
pub mod function;
pub mod register;

use std::sync::Arc;

pub use client::{TableInfo, UnityCatalog};
pub use register::{UnityRegisterRequest, UnityReport, unity_register};

use crate::error::{Error, Result};
use crate::storage::{IoCounters, TableStorage};

/// Opens the Delta table Unity Catalog knows as `full_name` (`catalog.schema.table`): its
/// storage location, read with the credentials the server vends for it (READ), or with this
/// process's own when it vends none.
pub async fn open_table(
    uc: &UnityCatalog,
    full_name: &str,
    counters: Arc<IoCounters>,
) -> Result<TableStorage> {
    let table = uc.get_table(full_name).await?.ok_or_else(|| Error::Unity {
        message: format!(
            "Unity Catalog at {} has no table {full_name}; check source.catalog, source.schema and source.table (--source-table)",
            uc.url()
        ),
        retryable: false,
    })?;
    let format = table.data_source_format.as_deref().unwrap_or("DELTA");
    if !format.eq_ignore_ascii_case("DELTA") {
        return Err(Error::InvalidInput(format!(
            "Unity Catalog table {full_name} is a {format} table; lakemirror reads Delta tables only"
        )));
    }
    let location = table
        .storage_location
        .as_deref()
        .filter(|l| !l.trim().is_empty())
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "Unity Catalog table {full_name} has no storage_location (a view?); lakemirror reads tables with a location"
            ))
        })?;
    let credentials = match table.table_id.as_deref() {
        Some(id) if location.starts_with("s3://") || location.starts_with("s3a://") => {
            uc.temporary_table_credentials(id, full_name).await?
        }
        _ => None,
    };
    tracing::info!(table = full_name, %location, vended_credentials = credentials.is_some(), "resolved through Unity Catalog");
    TableStorage::open_with_credentials(location, counters, credentials.as_ref())
}
