//! A Parquet checkpoint read by column: arrow's reader decodes the projected columns a batch
//! of rows at a time, and each `add` is built from its columns' values. The row API that
//! read it before built a tree of `Field`s, then a JSON value, then the action, for every
//! file: most of a 1,000,000-file bootstrap's reading time (docs/performance.md). Rows of
//! the rarer columns (the table's definition, sidecars, domain metadata) still go through
//! JSON, as a commit's lines do.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch, StructArray};
use arrow_schema::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::file::reader::ChunkReader;
use serde_json::{Map, Value};

use crate::actions::{ActionLine, Add};
use crate::bounded::MAX_ENTRIES;
use crate::deletion_vector::DeletionVector;

/// Rows decoded at once.
const BATCH_ROWS: usize = 8192;

/// Hands each row of the checkpoint's `columns` (top-level names) to `each` as an action
/// line, in file order.
pub(crate) fn for_each_row<T: ChunkReader + 'static>(
    file: T,
    columns: &[&str],
    mut each: impl FnMut(ActionLine),
) -> Result<(), String> {
    // The file's own Parquet types decide the arrow types, not an embedded arrow schema.
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
        .map_err(|e| e.to_string())?;
    let roots: Vec<usize> = builder
        .parquet_schema()
        .root_schema()
        .get_fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| columns.contains(&f.name()))
        .map(|(i, _)| i)
        .collect();
    let projection = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(projection)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| e.to_string())?;
    for batch in reader {
        let batch = batch.map_err(|e| e.to_string())?;
        for_each_row_of(&batch, &mut each)?;
    }
    Ok(())
}

fn for_each_row_of(batch: &RecordBatch, each: &mut impl FnMut(ActionLine)) -> Result<(), String> {
    let adds = match batch.column_by_name("add") {
        Some(column) => Some(Adds::of(column)?),
        None => None,
    };
    let others: Vec<(&str, &ArrayRef)> = batch
        .schema_ref()
        .fields()
        .iter()
        .zip(batch.columns())
        .filter(|(field, _)| field.name() != "add")
        .map(|(field, column)| (field.name().as_str(), column))
        .collect();
    for row in 0..batch.num_rows() {
        let present: Map<String, Value> = others
            .iter()
            .filter(|(_, column)| column.is_valid(row))
            .map(|(name, column)| Ok(((*name).to_string(), to_json(column, row)?)))
            .collect::<Result<_, String>>()?;
        let mut line: ActionLine = match present.is_empty() {
            true => ActionLine::default(),
            false => serde_json::from_value(Value::Object(present)).map_err(|e| e.to_string())?,
        };
        if let Some(adds) = &adds
            && adds.all.is_valid(row)
        {
            line.add = Some(adds.add(row)?);
        }
        each(line);
    }
    Ok(())
}

/// The columns of a batch's `add` struct that an [`Add`] holds.
struct Adds<'a> {
    all: &'a StructArray,
    path: Strings<'a>,
    partition_values: Option<&'a arrow_array::MapArray>,
    size: Option<Longs<'a>>,
    data_change: Option<&'a arrow_array::BooleanArray>,
    stats: Option<Strings<'a>>,
    stats_parsed: Option<&'a ArrayRef>,
    deletion_vector: Option<DeletionVectors<'a>>,
    base_row_id: Option<Longs<'a>>,
    default_row_commit_version: Option<Longs<'a>>,
}

impl<'a> Adds<'a> {
    fn of(column: &'a ArrayRef) -> Result<Self, String> {
        let all = column
            .as_struct_opt()
            .ok_or("the add column is not a struct")?;
        let child = |name: &str| all.column_by_name(name);
        Ok(Self {
            all,
            path: Strings::of(child("path").ok_or("add has no path column")?, "add.path")?,
            partition_values: child("partitionValues")
                .map(|c| c.as_map_opt().ok_or("add.partitionValues is not a map"))
                .transpose()?,
            size: child("size")
                .map(|c| Longs::of(c, "add.size"))
                .transpose()?,
            data_change: child("dataChange")
                .map(|c| c.as_boolean_opt().ok_or("add.dataChange is not a boolean"))
                .transpose()?,
            stats: child("stats")
                .map(|c| Strings::of(c, "add.stats"))
                .transpose()?,
            stats_parsed: child("stats_parsed"),
            deletion_vector: child("deletionVector")
                .map(DeletionVectors::of)
                .transpose()?,
            base_row_id: child("baseRowId")
                .map(|c| Longs::of(c, "add.baseRowId"))
                .transpose()?,
            default_row_commit_version: child("defaultRowCommitVersion")
                .map(|c| Longs::of(c, "add.defaultRowCommitVersion"))
                .transpose()?,
        })
    }

    fn add(&self, row: usize) -> Result<Add, String> {
        let path = self
            .path
            .get(row)
            .ok_or("an add without a path")?
            .to_string();
        let size = self
            .size
            .as_ref()
            .and_then(|s| s.get(row))
            .ok_or_else(|| format!("add {path} has no size"))?;
        let stats = match self.stats.as_ref().and_then(|s| s.get(row)) {
            Some(stats) => Some(stats.to_string()),
            // Written with `delta.checkpoint.writeStatsAsJson=false`, a checkpoint keeps the
            // stats only as a struct: read it rather than every data file's footer.
            None => match self.stats_parsed {
                Some(parsed) if parsed.is_valid(row) => {
                    Some(stats_object(parsed, row)?.to_string())
                }
                _ => None,
            },
        };
        Ok(Add {
            partition_values: self.partition_values(row, &path)?,
            size,
            data_change: self
                .data_change
                .filter(|c| c.is_valid(row))
                .is_none_or(|c| c.value(row)),
            stats,
            deletion_vector: match &self.deletion_vector {
                Some(dvs) => dvs.get(row)?,
                None => None,
            },
            base_row_id: self.base_row_id.as_ref().and_then(|c| c.get(row)),
            default_row_commit_version: self
                .default_row_commit_version
                .as_ref()
                .and_then(|c| c.get(row)),
            path,
        })
    }

    fn partition_values(
        &self,
        row: usize,
        path: &str,
    ) -> Result<HashMap<String, Option<String>>, String> {
        let Some(map) = self.partition_values.filter(|m| m.is_valid(row)) else {
            return Ok(HashMap::new());
        };
        let offsets = map.value_offsets();
        let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
        if end - start > MAX_ENTRIES {
            return Err(format!(
                "add {path} has {} partition values, more than the {MAX_ENTRIES} a table may have",
                end - start
            ));
        }
        let keys = Strings::of(map.keys(), "add.partitionValues keys")?;
        let values = Strings::of(map.values(), "add.partitionValues values")?;
        (start..end)
            .map(|i| {
                let key = keys.get(i).ok_or("a null partition column name")?;
                Ok((key.to_string(), values.get(i).map(str::to_string)))
            })
            .collect()
    }
}

/// A column of deletion vector descriptors.
struct DeletionVectors<'a> {
    all: &'a StructArray,
    storage_type: Strings<'a>,
    path_or_inline_dv: Strings<'a>,
    offset: Option<Longs<'a>>,
    size_in_bytes: Longs<'a>,
    cardinality: Longs<'a>,
}

impl<'a> DeletionVectors<'a> {
    fn of(column: &'a ArrayRef) -> Result<Self, String> {
        let all = column
            .as_struct_opt()
            .ok_or("add.deletionVector is not a struct")?;
        let child = |name: &str| {
            all.column_by_name(name)
                .ok_or_else(|| format!("add.deletionVector has no {name}"))
        };
        Ok(Self {
            all,
            storage_type: Strings::of(child("storageType")?, "storageType")?,
            path_or_inline_dv: Strings::of(child("pathOrInlineDv")?, "pathOrInlineDv")?,
            offset: all
                .column_by_name("offset")
                .map(|c| Longs::of(c, "offset"))
                .transpose()?,
            size_in_bytes: Longs::of(child("sizeInBytes")?, "sizeInBytes")?,
            cardinality: Longs::of(child("cardinality")?, "cardinality")?,
        })
    }

    fn get(&self, row: usize) -> Result<Option<DeletionVector>, String> {
        if !self.all.is_valid(row) {
            return Ok(None);
        }
        let incomplete = || "a deletion vector without its storage type, path, size or cardinality";
        Ok(Some(DeletionVector {
            storage_type: self
                .storage_type
                .get(row)
                .ok_or_else(incomplete)?
                .to_string(),
            path_or_inline_dv: self
                .path_or_inline_dv
                .get(row)
                .ok_or_else(incomplete)?
                .to_string(),
            offset: self.offset.as_ref().and_then(|o| o.get(row)),
            size_in_bytes: self.size_in_bytes.get(row).ok_or_else(incomplete)?,
            cardinality: self.cardinality.get(row).ok_or_else(incomplete)?,
        }))
    }
}

/// A string column, whatever its offsets' width.
enum Strings<'a> {
    Utf8(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
}

impl<'a> Strings<'a> {
    fn of(column: &'a ArrayRef, name: &str) -> Result<Self, String> {
        match column.data_type() {
            DataType::Utf8 => Ok(Self::Utf8(column.as_string::<i32>())),
            DataType::LargeUtf8 => Ok(Self::Large(column.as_string::<i64>())),
            DataType::Utf8View => Ok(Self::View(column.as_string_view())),
            other => Err(format!("{name} is {other}, not a string")),
        }
    }

    fn get(&self, row: usize) -> Option<&'a str> {
        match self {
            Self::Utf8(a) => a.is_valid(row).then(|| a.value(row)),
            Self::Large(a) => a.is_valid(row).then(|| a.value(row)),
            Self::View(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }
}

/// An integer column, as longs.
enum Longs<'a> {
    Int64(&'a arrow_array::Int64Array),
    Int32(&'a arrow_array::Int32Array),
}

impl<'a> Longs<'a> {
    fn of(column: &'a ArrayRef, name: &str) -> Result<Self, String> {
        match column.data_type() {
            DataType::Int64 => Ok(Self::Int64(column.as_primitive::<Int64Type>())),
            DataType::Int32 => Ok(Self::Int32(column.as_primitive::<Int32Type>())),
            other => Err(format!("{name} is {other}, not an integer")),
        }
    }

    fn get(&self, row: usize) -> Option<i64> {
        match self {
            Self::Int64(a) => a.is_valid(row).then(|| a.value(row)),
            Self::Int32(a) => a.is_valid(row).then(|| i64::from(a.value(row))),
        }
    }
}

/// `add.stats_parsed` at `row` as the JSON `add.stats` would hold: dates as `YYYY-MM-DD`.
/// Values whose JSON form differs otherwise (timestamps, decimals, binary) are left out, so
/// that they prove no bounds rather than wrong ones.
fn stats_object(column: &ArrayRef, row: usize) -> Result<Value, String> {
    let Some(fields) = column.as_struct_opt() else {
        return Ok(Value::Null);
    };
    let mut object = Map::new();
    for (field, child) in fields.fields().iter().zip(fields.columns()) {
        if !child.is_valid(row) {
            continue;
        }
        let value = match child.data_type() {
            DataType::Struct(_) => stats_object(child, row)?,
            DataType::Date32 => {
                let days = child
                    .as_primitive::<arrow_array::types::Date32Type>()
                    .value(row);
                chrono::NaiveDate::default()
                    .checked_add_signed(chrono::Duration::days(i64::from(days)))
                    .map_or(Value::Null, |d| {
                        Value::String(d.format("%Y-%m-%d").to_string())
                    })
            }
            DataType::Timestamp(..) => continue,
            _ => to_json(child, row)?,
        };
        if !value.is_null() {
            object.insert(field.name().clone(), value);
        }
    }
    Ok(Value::Object(object))
}

/// The value at `row` as the JSON the same action has in a commit file: structs as objects,
/// lists as arrays, maps as objects; types a log action does not use as null.
fn to_json(column: &ArrayRef, row: usize) -> Result<Value, String> {
    use arrow_array::types::*;
    if !column.is_valid(row) {
        return Ok(Value::Null);
    }
    Ok(match column.data_type() {
        DataType::Boolean => Value::Bool(column.as_boolean().value(row)),
        DataType::Int8 => Value::from(column.as_primitive::<Int8Type>().value(row)),
        DataType::Int16 => Value::from(column.as_primitive::<Int16Type>().value(row)),
        DataType::Int32 => Value::from(column.as_primitive::<Int32Type>().value(row)),
        DataType::Int64 => Value::from(column.as_primitive::<Int64Type>().value(row)),
        DataType::UInt8 => Value::from(column.as_primitive::<UInt8Type>().value(row)),
        DataType::UInt16 => Value::from(column.as_primitive::<UInt16Type>().value(row)),
        DataType::UInt32 => Value::from(column.as_primitive::<UInt32Type>().value(row)),
        DataType::UInt64 => Value::from(column.as_primitive::<UInt64Type>().value(row)),
        DataType::Float32 => Value::from(column.as_primitive::<Float32Type>().value(row)),
        DataType::Float64 => Value::from(column.as_primitive::<Float64Type>().value(row)),
        DataType::Date32 => Value::from(column.as_primitive::<Date32Type>().value(row)),
        DataType::Timestamp(unit, _) => {
            use arrow_schema::TimeUnit;
            Value::from(match unit {
                TimeUnit::Second => column.as_primitive::<TimestampSecondType>().value(row),
                TimeUnit::Millisecond => {
                    column.as_primitive::<TimestampMillisecondType>().value(row)
                }
                TimeUnit::Microsecond => {
                    column.as_primitive::<TimestampMicrosecondType>().value(row)
                }
                TimeUnit::Nanosecond => column.as_primitive::<TimestampNanosecondType>().value(row),
            })
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Value::String(
            Strings::of(column, "a string")?
                .get(row)
                .unwrap_or_default()
                .to_string(),
        ),
        DataType::Struct(_) => {
            let fields = column.as_struct();
            Value::Object(
                fields
                    .fields()
                    .iter()
                    .zip(fields.columns())
                    .map(|(f, c)| Ok((f.name().clone(), to_json(c, row)?)))
                    .collect::<Result<_, String>>()?,
            )
        }
        DataType::List(_) => {
            let list = column.as_list::<i32>().value(row);
            Value::Array(
                (0..list.len())
                    .map(|i| to_json(&list, i))
                    .collect::<Result<_, _>>()?,
            )
        }
        DataType::LargeList(_) => {
            let list = column.as_list::<i64>().value(row);
            Value::Array(
                (0..list.len())
                    .map(|i| to_json(&list, i))
                    .collect::<Result<_, _>>()?,
            )
        }
        DataType::Map(..) => {
            let map = column.as_map();
            let offsets = map.value_offsets();
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            let (keys, values) = (map.keys(), map.values());
            Value::Object(
                (start..end)
                    .map(|i| {
                        let key = match to_json(keys, i)? {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        Ok((key, to_json(values, i)?))
                    })
                    .collect::<Result<_, String>>()?,
            )
        }
        // Not used by the actions lakemirror reads.
        _ => Value::Null,
    })
}
