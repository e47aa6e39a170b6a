//! Delta tables opened by their Unity Catalog names: the storage location Unity Catalog has
//! for them, read with the credentials it vends.

use std::sync::Arc;

use lakemirror_storage::{IoCounters, ObjectStores, TableStorage};

use crate::client::UnityCatalog;
use crate::error::{Error, Result, Setting};

/// Opens the Delta table Unity Catalog knows as `full_name` (`catalog.schema.table`): its
/// storage location, read with the credentials the server vends for it (READ), or with this
/// process's own when it vends none.
pub async fn open_table(
    stores: &ObjectStores,
    uc: &UnityCatalog,
    full_name: &str,
    counters: Arc<IoCounters>,
) -> Result<TableStorage> {
    let table = uc.get_table(full_name).await?.ok_or_else(|| {
        Error::Unity {
            message: format!(
                "Unity Catalog at {} has no table {full_name}; check source.catalog, source.schema and source.table",
                uc.url()
            ),
            retryable: false,
        }
        .fixed_by(Setting::SourceTable)
    })?;
    let format = table.data_source_format.as_deref().unwrap_or("DELTA");
    if !format.eq_ignore_ascii_case("DELTA") {
        return Err(Error::CatalogState(format!(
            "Unity Catalog table {full_name} is a {format} table; lakemirror reads Delta tables only"
        )));
    }
    let location = table
        .storage_location
        .as_deref()
        .filter(|l| !l.trim().is_empty())
        .ok_or_else(|| {
            Error::CatalogState(format!(
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
    Ok(stores.open_with_credentials(location, counters, credentials.as_ref())?)
}
