//! The rows of a Delta table version as Arrow columns in the target's column order: data
//! files read by ranged requests, one row group at a time (memory does not grow with the
//! file: a 1 GB file after OPTIMIZE loads like a small one), deleted rows (deletion vectors) dropped, partition values filled in,
//! column-mapped files read by physical name, older files cast to the current (widened) types,
//! columns a file predates as nulls.

use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Date32Array, RecordBatch, StringArray,
    TimestampMicrosecondArray, new_null_array,
};
use arrow_schema::{DataType, FieldRef, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use parquet::arrow::ParquetRecordBatchStreamBuilder;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::basic::Type as PhysicalType;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use roaring::RoaringTreemap;

use crate::copy::CopyColumn;
use crate::defaults::{ColumnDefault, column_default, current_defaults};
use crate::error::{Error, Result};
use crate::types::{GeoStorage, PgType, TargetTypes, pg_type};
use lakemirror_delta::deletion_vector::read_positions;
use lakemirror_delta::schema::{DeltaField, DeltaType, parse_schema};
use lakemirror_delta::{Add, Metadata};
use lakemirror_plan::data_file_location;
use lakemirror_plan::partition::{date_days, partition_timestamp_micros};
use lakemirror_storage::TableStorage;

/// One column of the target: what it is called, its types, where a file keeps it.
#[derive(Debug, Clone)]
pub struct SourceColumn {
    pub copy: CopyColumn,
    /// The name in Parquet files and `partitionValues` (physical with column mapping).
    pub physical_name: String,
    pub partition: bool,
    /// Its `DEFAULT` in the target, from the Delta column default.
    pub default: ColumnDefault,
}

/// The columns of a Delta table version, in schema order, typed for a database with
/// `target`'s types.
pub fn source_columns(
    table: &str,
    metadata: &Metadata,
    target: &TargetTypes,
) -> Result<Vec<SourceColumn>> {
    let fields: Vec<DeltaField> =
        parse_schema(&metadata.schema_string).map_err(|e| Error::malformed(table, e))?;
    let defaults = current_defaults(&metadata.schema_string);
    fields
        .into_iter()
        .map(|f| {
            let pg = pg_type(&f.data_type, &f.name, target).map_err(Error::Config)?;
            Ok(SourceColumn {
                physical_name: f.physical_name().to_string(),
                partition: metadata.partition_columns.contains(&f.name),
                default: column_default(defaults.get(&f.name).map(String::as_str), &pg),
                copy: CopyColumn {
                    name: f.name,
                    pg,
                    delta: f.data_type,
                },
            })
        })
        .collect()
}

/// How the geospatial columns among `columns` are stored, when there are any.
pub fn geo_storage(columns: &[SourceColumn]) -> Option<GeoStorage> {
    columns.iter().find_map(|c| match &c.copy.pg {
        PgType::Geometry { .. } | PgType::Geography { .. } => Some(GeoStorage::Postgis),
        _ => match &c.copy.delta {
            DeltaType::Primitive(name) if crate::geo::parse_geo_type(name).is_some() => {
                Some(GeoStorage::WkbBytea)
            }
            _ => None,
        },
    })
}

/// Warnings for the Delta column defaults the target does not get (naming the columns).
pub fn default_warnings(columns: &[SourceColumn]) -> Vec<String> {
    columns
        .iter()
        .filter_map(|c| match &c.default {
            ColumnDefault::NotCarried(text) => Some(format!(
                "column {:?}: its Delta default {text} is not a literal lakemirror carries over to PostgreSQL; the column has no DEFAULT there",
                c.copy.name
            )),
            _ => None,
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
            let location = data_file_location(store.scope(), &add.path)?;
            Ok(read_positions(store, &location, dv).await?)
        }
        None => Ok(RoaringTreemap::new()),
    }
}

/// Rows decoded per batch: a batch is encoded into COPY data before the next is decoded.
const BATCH_ROWS: usize = 8192;

/// Reads `rows` of one data file: batches of columns in `columns` order, cast for encoding,
/// decoded one row group at a time from ranged reads (the footer, then each row group's
/// column chunks), so that memory holds one row group, not the file.
pub async fn read_file(
    store: &TableStorage,
    columns: &[SourceColumn],
    add: &Add,
    rows: &Rows,
) -> Result<BoxStream<'static, Result<Vec<ArrayRef>>>> {
    if let Rows::At(positions) = rows
        && positions.is_empty()
    {
        return Ok(futures::stream::empty().boxed());
    }
    let location = data_file_location(store.scope(), &add.path)?;
    // Positions to keep (`true`) or drop (`false`).
    let filter = match rows {
        Rows::Live if add.deletion_vector.is_some() => {
            Some((false, deleted_positions(store, add).await?))
        }
        Rows::Live => None,
        Rows::At(positions) => Some((true, positions.clone())),
    };
    // A remove action may leave its file's size out: then the store says it (a file that
    // is gone fails as not found, as its read would).
    let size = match u64::try_from(add.size) {
        Ok(size) if size > 0 => size,
        _ => store.head(&location).await?.size,
    };
    let mut file = RangedParquet {
        store: store.clone(),
        location: location.clone(),
        size,
    };
    let read = ArrowReaderMetadata::load_async(&mut file, ArrowReaderOptions::new())
        .await
        .map_err(|e| parquet_error(&location, e))?;
    let read = match int96_as_micros(&read) {
        Some(schema) => ArrowReaderMetadata::try_new(
            read.metadata().clone(),
            ArrowReaderOptions::new().with_schema(schema),
        )
        .map_err(|e| parquet_error(&location, e))?,
        None => read,
    };
    let batches = ParquetRecordBatchStreamBuilder::new_with_metadata(file, read)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| parquet_error(&location, e))?;
    let columns = columns.to_vec();
    let add = add.clone();
    let mut first_row: u64 = 0;
    Ok(batches
        .map(move |batch| {
            let batch = batch.map_err(|e| parquet_error(&location, e))?;
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
            columns
                .iter()
                .map(|c| column_of(&batch, c, &add))
                .collect::<Result<Vec<_>>>()
        })
        .boxed())
}

/// The file's Arrow schema with its INT96 timestamp columns read as microseconds, when it
/// has any. Arrow reads INT96 as nanoseconds by default, which hold only the years 1677 to
/// 2262: older Spark and Databricks wrote INT96, and a year 0099 or 1582 value would wrap
/// around; Delta readers read INT96 as microseconds, as PostgreSQL holds them.
fn int96_as_micros(read: &ArrowReaderMetadata) -> Option<SchemaRef> {
    let int96: Vec<&str> = read
        .metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .filter(|c| c.physical_type() == PhysicalType::INT96)
        .filter_map(|c| match c.path().parts() {
            [name] => Some(name.as_str()),
            _ => None,
        })
        .collect();
    if int96.is_empty() {
        return None;
    }
    let schema = read.schema();
    let fields: Vec<FieldRef> = schema
        .fields()
        .iter()
        .map(|field| match field.data_type() {
            DataType::Timestamp(TimeUnit::Nanosecond, None)
                if int96.contains(&field.name().as_str()) =>
            {
                Arc::new(
                    field
                        .as_ref()
                        .clone()
                        .with_data_type(DataType::Timestamp(TimeUnit::Microsecond, None)),
                )
            }
            _ => field.clone(),
        })
        .collect();
    Some(Arc::new(Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    )))
}

/// Bytes read from a data file's end at first: its footer is rarely bigger.
const TAIL_READ: u64 = 64 * 1024;
/// Column chunks of a row group fetched at once.
const CHUNKS_AT_ONCE: usize = 8;

/// A Parquet data file read by ranges through the table's storage. Its footer is checked
/// before it is decoded (a corrupt footer may declare gigabytes: see `parquet_footer`).
struct RangedParquet {
    store: TableStorage,
    location: String,
    size: u64,
}

fn storage_error(e: lakemirror_storage::Error) -> ParquetError {
    ParquetError::External(Box::new(e))
}

/// A read error of the data file at `location`: a storage error as itself (it may be
/// retryable), anything else naming the file.
fn parquet_error(location: &str, e: ParquetError) -> Error {
    match e {
        ParquetError::External(inner) => match inner.downcast::<lakemirror_storage::Error>() {
            Ok(storage) => Error::Storage(*storage),
            Err(other) => Error::data(location, other),
        },
        other => Error::data(location, other),
    }
}

impl AsyncFileReader for RangedParquet {
    fn get_bytes(
        &mut self,
        range: std::ops::Range<u64>,
    ) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        async move {
            self.store
                .get_range(&self.location, range)
                .await
                .map_err(storage_error)
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<std::ops::Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        // The chunks of a row group are held together until it is decoded: their room is
        // taken at once.
        let store = &self.store;
        let location = &self.location;
        async move {
            store
                .get_ranges(location, ranges, CHUNKS_AT_ONCE)
                .await
                .map_err(storage_error)
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let tail_start = size.saturating_sub(TAIL_READ);
            let tail = self.get_bytes(tail_start..size).await?;
            // TableStorage::get_range answers every byte asked for or fails: the size the
            // Delta log states cannot make the slices below run past the bytes read.
            let range = lakemirror_delta::footer::metadata_range(&tail, size)
                .map_err(ParquetError::General)?;
            let footer = if range.start >= tail_start {
                tail.slice((range.start - tail_start) as usize..(range.end - tail_start) as usize)
            } else {
                self.get_bytes(range).await?
            };
            lakemirror_delta::footer::check_metadata(&footer)
                .map_err(|e| ParquetError::General(format!("corrupt Parquet footer: {e}")))?;
            Ok(Arc::new(ParquetMetaDataReader::decode_metadata(&footer)?))
        }
        .boxed()
    }
}

/// A target column from a file's batch, or from the file's partition values.
fn column_of(batch: &RecordBatch, column: &SourceColumn, add: &Add) -> Result<ArrayRef> {
    let rows = batch.num_rows();
    let target = column.copy.pg.arrow();
    if column.partition {
        let value = add.partition_value(&column.physical_name);
        if let Some(array) = temporal_partition(value, column, rows)? {
            return Ok(array);
        }
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

/// A date or timestamp partition value as the mirror reads it (plan::partition): any year
/// Delta allows, `-0001-01-01 00:00:00` too, which Arrow's string cast refuses. None for
/// other types. An empty value is null, as the protocol says.
fn temporal_partition(
    value: Option<&str>,
    column: &SourceColumn,
    rows: usize,
) -> Result<Option<ArrayRef>> {
    let value = value.filter(|v| !v.is_empty());
    // Errors name the column, never a value (values may be personal data).
    let bad = |what: &str| {
        Error::Rows(format!(
            "partition column {}: a file's partition value ({} characters) is not a valid {what}",
            column.copy.name,
            value.map_or(0, |v| v.chars().count())
        ))
    };
    Ok(Some(match &column.copy.pg {
        PgType::Date => {
            let days = value
                .map(|v| date_days(v).ok_or_else(|| bad("date")))
                .transpose()?;
            Arc::new(Date32Array::from(vec![days; rows]))
        }
        PgType::Timestamp | PgType::Timestamptz => {
            let micros = value
                .map(|v| partition_timestamp_micros(v).ok_or_else(|| bad("timestamp")))
                .transpose()?;
            let zone = match column.copy.pg {
                PgType::Timestamptz => Some("+00:00"),
                _ => None,
            };
            Arc::new(TimestampMicrosecondArray::from(vec![micros; rows]).with_timezone_opt(zone))
        }
        _ => return Ok(None),
    }))
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
        Error::Rows(format!(
            "column {column}: values stored as {} cannot be read as {target}: {e}",
            array.data_type()
        ))
    })
}
