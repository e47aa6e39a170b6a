//! The rows of a Delta table version as Arrow columns in the target's column order: data
//! files read whole, deleted rows (deletion vectors) dropped, partition values filled in,
//! column-mapped files read by physical name, older files cast to the current (widened) types,
//! columns a file predates as nulls.

use std::sync::Arc;

use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch, StringArray, new_null_array};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use roaring::RoaringTreemap;

use super::copy::CopyColumn;
use super::types::pg_type;
use crate::delta::deletion_vector::read_positions;
use crate::delta::schema::{DeltaField, parse_schema};
use crate::delta::{Add, Metadata};
use crate::error::{Error, Result};
use crate::mirror::plan::data_file_location;
use crate::storage::TableStorage;

/// One column of the target: what it is called, its types, where a file keeps it.
#[derive(Debug, Clone)]
pub struct SourceColumn {
    pub copy: CopyColumn,
    /// The name in Parquet files and `partitionValues` (physical with column mapping).
    pub physical_name: String,
    pub partition: bool,
}

/// The columns of a Delta table version, in schema order.
pub fn source_columns(table: &str, metadata: &Metadata) -> Result<Vec<SourceColumn>> {
    let fields: Vec<DeltaField> =
        parse_schema(&metadata.schema_string).map_err(|e| Error::malformed(table, e))?;
    fields
        .into_iter()
        .map(|f| {
            let pg = pg_type(&f.data_type, &f.name).map_err(Error::InvalidInput)?;
            Ok(SourceColumn {
                physical_name: f.physical_name().to_string(),
                partition: metadata.partition_columns.contains(&f.name),
                copy: CopyColumn {
                    name: f.name,
                    pg,
                    delta: f.data_type,
                },
            })
        })
        .collect()
}

/// Which rows of a data file to read.
#[derive(Debug, Clone)]
pub enum Rows {
    /// The rows its deletion vector leaves.
    Live,
    /// Exactly these row positions.
    At(RoaringTreemap),
}

/// The row positions `add`'s deletion vector deletes (empty without one).
pub async fn deleted_positions(store: &TableStorage, add: &Add) -> Result<RoaringTreemap> {
    match &add.deletion_vector {
        Some(dv) => {
            let location = data_file_location(store.root_uri(), &add.path)?;
            read_positions(store, &location, dv).await
        }
        None => Ok(RoaringTreemap::new()),
    }
}

/// Reads `rows` of one data file: batches of columns in `columns` order, cast for encoding.
pub async fn read_file(
    store: &TableStorage,
    columns: &[SourceColumn],
    add: &Add,
    rows: &Rows,
) -> Result<Vec<Vec<ArrayRef>>> {
    if let Rows::At(positions) = rows
        && positions.is_empty()
    {
        return Ok(Vec::new());
    }
    let location = data_file_location(store.root_uri(), &add.path)?;
    let (bytes, _) = store.get(&location).await?;
    // Positions to keep (`true`) or drop (`false`).
    let filter = match rows {
        Rows::Live if add.deletion_vector.is_some() => {
            Some((false, deleted_positions(store, add).await?))
        }
        Rows::Live => None,
        Rows::At(positions) => Some((true, positions.clone())),
    };
    crate::parquet_footer::check(&bytes)
        .map_err(|e| Error::InvalidInput(format!("{location}: corrupt Parquet footer: {e}")))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(bytes)?.build()?;
    let mut batches = Vec::new();
    let mut first_row: u64 = 0;
    for batch in reader {
        let batch = batch?;
        let rows = batch.num_rows() as u64;
        let batch = match &filter {
            Some((listed_kept, positions)) => {
                let keep: BooleanArray = (first_row..first_row + rows)
                    .map(|p| Some(positions.contains(p) == *listed_kept))
                    .collect();
                arrow_select::filter::filter_record_batch(&batch, &keep)?
            }
            None => batch,
        };
        first_row += rows;
        batches.push(
            columns
                .iter()
                .map(|c| column_of(&batch, c, add))
                .collect::<Result<Vec<_>>>()?,
        );
    }
    Ok(batches)
}

/// A target column from a file's batch, or from the file's partition values.
fn column_of(batch: &RecordBatch, column: &SourceColumn, add: &Add) -> Result<ArrayRef> {
    let rows = batch.num_rows();
    let target = column.copy.pg.arrow();
    if column.partition {
        let value = add.partition_value(&column.physical_name);
        let strings: ArrayRef = Arc::new(StringArray::from(vec![value; rows]));
        return cast_to(&strings, target.as_ref(), &column.copy.name);
    }
    let found = batch
        .schema()
        .fields()
        .iter()
        .position(|f| f.name() == &column.physical_name)
        .or_else(|| {
            batch
                .schema()
                .fields()
                .iter()
                .position(|f| f.name().eq_ignore_ascii_case(&column.physical_name))
        });
    match found {
        Some(i) => cast_to(batch.column(i), target.as_ref(), &column.copy.name),
        // A column added after this file was written.
        None => Ok(new_null_array(&target.unwrap_or(DataType::Null), rows)),
    }
}

fn cast_to(array: &ArrayRef, target: Option<&DataType>, column: &str) -> Result<ArrayRef> {
    let Some(target) = target else {
        return Ok(array.clone());
    };
    if array.data_type() == target {
        return Ok(array.clone());
    }
    let options = arrow_cast::CastOptions {
        safe: false,
        ..Default::default()
    };
    arrow_cast::cast_with_options(array.as_ref(), target, &options).map_err(|e| {
        Error::InvalidInput(format!(
            "column {column}: values stored as {} cannot be read as {target}: {e}",
            array.data_type()
        ))
    })
}
