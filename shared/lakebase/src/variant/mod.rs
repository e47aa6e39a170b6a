//! Delta `variant` values as the JSON text PostgreSQL stores in `jsonb`.
//!
//! A Parquet variant column is a group of `metadata` and `value` binaries (Databricks 15.3
//! writes `value` first, so children are found by name), optionally shredded (Spark 4 /
//! Delta 4): `typed_value` holds values of one type in a column of that type, an object's
//! fields as a group of (`value`, `typed_value`) pairs, an array's elements as a list of
//! them, and `value` what did not fit (Parquet's `VariantShredding.md`). Both forms give the
//! same JSON: a shredded value is written as the same value unshredded would be.
//!
//! The JSON is Spark's `to_json` of a variant, in UTC: objects, arrays, strings, booleans,
//! null and numbers as JSON (decimals with every digit of their scale, `1.50`; doubles and
//! floats as the shortest text that reads back the same); dates `"2024-01-31"`; timestamps
//! `"2024-01-31 12:34:56.5+00:00"` (Spark writes its session's zone; a Delta table records
//! none, so UTC), timestamp_ntz without the offset; binary as base64; UUIDs as
//! `"01234567-89ab-…"`. Where Spark writes text that is not JSON (NaN and the infinities,
//! unquoted), the strings `"NaN"`, `"Infinity"`, `"-Infinity"` are written, as Jackson
//! writes them for a double column. A variant null is the JSON `null`; a SQL NULL (no value)
//! stays NULL.

mod encoding;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type,
    Int64Type, Time64MicrosecondType, TimestampMicrosecondType, TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};

use crate::json_text::write_string;
use encoding::{
    Metadata, too_deep, write_base64, write_date, write_decimal, write_f32, write_f64, write_int,
    write_object_fields, write_time, write_timestamp, write_uuid, write_value,
};

/// The deepest nesting of objects and arrays decoded (Jackson's default limit, which
/// Spark's `parse_json` writes within): deeper values fail their row instead of the stack.
const MAX_DEPTH: usize = 1000;

/// Appends the JSON text of row `row` of a variant column (not null there).
pub(crate) fn write_variant(
    column: &dyn Array,
    row: usize,
    out: &mut String,
) -> Result<(), String> {
    let group = column
        .as_struct_opt()
        .ok_or("a variant column was not read as a group of metadata and value")?;
    let metadata = group
        .column_by_name("metadata")
        .map(|m| binary_at(m.as_ref(), row))
        .transpose()?
        .flatten()
        .ok_or("holds a variant without metadata")?;
    let metadata = Metadata::parse(metadata)?;
    let (value, typed) = (
        group.column_by_name("value"),
        group.column_by_name("typed_value"),
    );
    if value.is_none() && typed.is_none() {
        return Err("a variant column has neither value nor typed_value".into());
    }
    // Neither at the top: the variant null (VariantShredding.md).
    if !write_shredded(value, typed, row, &metadata, out, 0)? {
        out.push_str("null");
    }
    Ok(())
}

/// Appends the value a (`value`, `typed_value`) pair holds at `row`; false when it holds
/// none (a field missing from a shredded object).
fn write_shredded(
    value: Option<&ArrayRef>,
    typed: Option<&ArrayRef>,
    row: usize,
    metadata: &Metadata,
    out: &mut String,
    depth: usize,
) -> Result<bool, String> {
    let residual = value
        .map(|v| binary_at(v.as_ref(), row))
        .transpose()?
        .flatten();
    match (residual, typed.filter(|t| t.is_valid(row))) {
        (None, None) => Ok(false),
        (Some(bytes), None) => {
            write_value(bytes, metadata, out, depth)?;
            Ok(true)
        }
        (residual, Some(typed)) => {
            write_typed(typed.as_ref(), row, residual, metadata, out, depth)?;
            Ok(true)
        }
    }
}

const VALUE_BESIDE_TYPED: &str =
    "holds a malformed shredded variant: a value beside a typed_value that is not an object";

/// A shredded value: an object (a group of fields, plus the unshredded fields in
/// `residual`), an array, or a primitive of the column's type.
fn write_typed(
    typed: &dyn Array,
    row: usize,
    residual: Option<&[u8]>,
    metadata: &Metadata,
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    if depth >= MAX_DEPTH {
        return Err(too_deep());
    }
    match typed.data_type() {
        DataType::Struct(_) => {
            let object = typed.as_struct();
            out.push('{');
            let mut first = true;
            for (field, column) in object.fields().iter().zip(object.columns()) {
                let pair = column
                    .as_struct_opt()
                    .ok_or("holds a malformed shredded variant: an object field is not a group of value and typed_value")?;
                if pair.is_null(row) {
                    continue;
                }
                let mark = out.len();
                if !first {
                    out.push(',');
                }
                write_string(out, field.name())?;
                out.push(':');
                let (value, typed) = (
                    pair.column_by_name("value"),
                    pair.column_by_name("typed_value"),
                );
                if write_shredded(value, typed, row, metadata, out, depth + 1)? {
                    first = false;
                } else {
                    out.truncate(mark);
                }
            }
            if let Some(bytes) = residual {
                write_object_fields(bytes, metadata, out, &mut first, depth + 1)?;
            }
            out.push('}');
        }
        DataType::List(_) | DataType::LargeList(_) => {
            if residual.is_some() {
                return Err(VALUE_BESIDE_TYPED.into());
            }
            let elements = match typed.data_type() {
                DataType::LargeList(_) => typed.as_list::<i64>().value(row),
                _ => typed.as_list::<i32>().value(row),
            };
            let pair = elements
                .as_struct_opt()
                .ok_or("holds a malformed shredded variant: an array element is not a group of value and typed_value")?;
            let (value, typed) = (
                pair.column_by_name("value"),
                pair.column_by_name("typed_value"),
            );
            out.push('[');
            for i in 0..pair.len() {
                if i > 0 {
                    out.push(',');
                }
                if pair.is_null(i) || !write_shredded(value, typed, i, metadata, out, depth + 1)? {
                    out.push_str("null");
                }
            }
            out.push(']');
        }
        _ => {
            if residual.is_some() {
                return Err(VALUE_BESIDE_TYPED.into());
            }
            write_typed_primitive(typed, row, out)?;
        }
    }
    Ok(())
}

/// A shredded primitive, written as the same value unshredded is.
fn write_typed_primitive(array: &dyn Array, row: usize, out: &mut String) -> Result<(), String> {
    use DataType as D;
    match array.data_type() {
        D::Boolean => out.push_str(if array.as_boolean().value(row) {
            "true"
        } else {
            "false"
        }),
        D::Int8 => write_int(out, array.as_primitive::<Int8Type>().value(row).into()),
        D::Int16 => write_int(out, array.as_primitive::<Int16Type>().value(row).into()),
        D::Int32 => write_int(out, array.as_primitive::<Int32Type>().value(row).into()),
        D::Int64 => write_int(out, array.as_primitive::<Int64Type>().value(row)),
        D::Float32 => write_f32(out, array.as_primitive::<Float32Type>().value(row)),
        D::Float64 => write_f64(out, array.as_primitive::<Float64Type>().value(row)),
        D::Decimal128(_, scale) => write_decimal(
            out,
            array.as_primitive::<Decimal128Type>().value(row),
            u8::try_from(*scale)
                .map_err(|_| "holds a shredded variant decimal of negative scale")?,
        )?,
        D::Date32 => write_date(out, array.as_primitive::<Date32Type>().value(row).into()),
        D::Time64(TimeUnit::Microsecond) => write_time(
            out,
            i128::from(array.as_primitive::<Time64MicrosecondType>().value(row)) * 1000,
        ),
        D::Timestamp(TimeUnit::Microsecond, zone) => write_timestamp(
            out,
            i128::from(array.as_primitive::<TimestampMicrosecondType>().value(row)) * 1000,
            zone.is_some(),
        ),
        D::Timestamp(TimeUnit::Nanosecond, zone) => write_timestamp(
            out,
            array
                .as_primitive::<TimestampNanosecondType>()
                .value(row)
                .into(),
            zone.is_some(),
        ),
        D::Utf8 => write_string(out, array.as_string::<i32>().value(row))?,
        D::LargeUtf8 => write_string(out, array.as_string::<i64>().value(row))?,
        D::Utf8View => write_string(out, array.as_string_view().value(row))?,
        D::Binary | D::LargeBinary | D::BinaryView => {
            write_base64(out, binary_at(array, row)?.unwrap_or_default())
        }
        D::FixedSizeBinary(16) => {
            let bytes = array.as_fixed_size_binary().value(row);
            write_uuid(
                out,
                bytes
                    .try_into()
                    .map_err(|_| "holds a malformed shredded variant UUID")?,
            )
        }
        other => {
            return Err(format!(
                "holds a shredded variant of Parquet/Arrow type {other}, which the Variant shredding spec does not allow"
            ));
        }
    }
    Ok(())
}

/// The bytes of a binary column at `row` (None: null).
fn binary_at(array: &dyn Array, row: usize) -> Result<Option<&[u8]>, String> {
    if array.is_null(row) {
        return Ok(None);
    }
    Ok(Some(match array.data_type() {
        DataType::Binary => array.as_binary::<i32>().value(row),
        DataType::LargeBinary => array.as_binary::<i64>().value(row),
        DataType::BinaryView => array.as_binary_view().value(row),
        other => {
            return Err(format!(
                "a variant's metadata or value was read as {other}, not as binary"
            ));
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{BinaryBuilder, Int64Builder, StringBuilder};
    use arrow_array::{
        BinaryArray, Decimal128Array, Int64Array, ListArray, StringArray, StructArray,
        TimestampMicrosecondArray,
    };
    use arrow_buffer::{NullBuffer, OffsetBuffer};
    use arrow_schema::{Field, Fields};
    use std::sync::Arc;

    fn json(column: &dyn Array, row: usize) -> Result<String, String> {
        let mut out = String::new();
        write_variant(column, row, &mut out)?;
        Ok(out)
    }

    fn field(name: &str, array: &ArrayRef) -> Arc<Field> {
        Arc::new(Field::new(name, array.data_type().clone(), true))
    }

    fn group(children: Vec<(&str, ArrayRef)>, nulls: Option<NullBuffer>) -> ArrayRef {
        let fields: Fields = children.iter().map(|(n, a)| field(n, a)).collect();
        let arrays = children.into_iter().map(|(_, a)| a).collect();
        Arc::new(StructArray::new(fields, arrays, nulls))
    }

    fn binaries(values: Vec<Option<&[u8]>>) -> ArrayRef {
        Arc::new(BinaryArray::from(values))
    }

    /// Keys "id", "name", "tags" (the dictionary every test row shares).
    const METADATA: &[u8] = b"\x01\x03\x00\x02\x06\x0aidnametags";

    fn metadata(rows: usize) -> ArrayRef {
        binaries(vec![Some(METADATA); rows])
    }

    #[test]
    fn an_unshredded_variant_reads_with_value_before_metadata_as_databricks_writes_it() {
        // Databricks 15.3: value, then metadata; row 1 a SQL NULL, row 2 the variant null.
        let value = binaries(vec![
            Some(b"\x02\x01\x00\x00\x02\x0c\x01"),
            Some(b"\x00"),
            Some(b"\x00"),
        ]);
        let meta = binaries(vec![
            Some(b"\x01\x01\x00\x03col"),
            Some(b"\x01\x00\x00"),
            Some(b"\x01\x00\x00"),
        ]);
        let column = group(
            vec![("value", value), ("metadata", meta)],
            Some(NullBuffer::from(vec![true, false, true])),
        );
        assert_eq!(json(column.as_ref(), 0).unwrap(), r#"{"col":1}"#);
        assert_eq!(json(column.as_ref(), 2).unwrap(), "null");
        // Row 1 is SQL NULL: the caller writes NULL, never asking for JSON.
        let mut out = String::new();
        crate::json::write_json(
            column.as_ref(),
            1,
            &lakemirror_delta::schema::DeltaType::Primitive("variant".into()),
            &mut out,
        )
        .unwrap();
        assert_eq!(out, "null");
    }

    /// A (value, typed_value) pair over `rows` rows.
    fn pair(value: ArrayRef, typed: ArrayRef) -> ArrayRef {
        group(vec![("value", value), ("typed_value", typed)], None)
    }

    #[test]
    fn a_shredded_object_reads_as_the_same_object_unshredded() {
        // Rows: {"id":1,"name":"a"} fully shredded; {"id":2} with name missing;
        // {"id":"x","name":"b","tags":[true]}: id did not fit the int64 column (in value),
        // tags is not shredded (in the object's value); row 3: not an object at all (42).
        let id = pair(
            binaries(vec![None, None, Some(b"\x05x"), None]),
            Arc::new(Int64Array::from(vec![Some(1), Some(2), None, None])),
        );
        let name = pair(
            binaries(vec![None, None, None, None]),
            Arc::new(StringArray::from(vec![Some("a"), None, Some("b"), None])),
        );
        let typed = group(
            vec![("id", id), ("name", name)],
            Some(NullBuffer::from(vec![true, true, true, false])),
        );
        // {"tags":[true]}: key id 2.
        let residual_object: &[u8] = b"\x02\x01\x02\x00\x05\x03\x01\x00\x01\x04";
        let value = binaries(vec![None, None, Some(residual_object), Some(b"\x0c\x2a")]);
        let column = group(
            vec![
                ("metadata", metadata(4)),
                ("value", value),
                ("typed_value", typed),
            ],
            None,
        );
        let read = |row| {
            serde_json::from_str::<serde_json::Value>(&json(column.as_ref(), row).unwrap()).unwrap()
        };
        assert_eq!(read(0), serde_json::json!({"id": 1, "name": "a"}));
        assert_eq!(read(1), serde_json::json!({"id": 2}));
        assert_eq!(
            read(2),
            serde_json::json!({"id": "x", "name": "b", "tags": [true]})
        );
        assert_eq!(read(3), serde_json::json!(42));
    }

    #[test]
    fn a_shredded_array_reads_its_elements_typed_or_not() {
        // [1, "two", null-variant, 4] as a list of (value, typed_value int64).
        let mut typed = Int64Builder::new();
        let mut value = BinaryBuilder::new();
        for (v, t) in [
            (None, Some(1)),
            (Some(&b"\x0dtwo"[..]), None),
            (Some(b"\x00"), None),
            (None, Some(4)),
        ] {
            typed.append_option(t);
            value.append_option(v);
        }
        let elements = pair(Arc::new(value.finish()), Arc::new(typed.finish()));
        let list: ArrayRef = Arc::new(ListArray::new(
            field("element", &elements),
            OffsetBuffer::from_lengths([4]),
            elements,
            None,
        ));
        let column = group(
            vec![
                ("metadata", metadata(1)),
                ("value", binaries(vec![None])),
                ("typed_value", list),
            ],
            None,
        );
        assert_eq!(json(column.as_ref(), 0).unwrap(), r#"[1,"two",null,4]"#);
    }

    #[test]
    fn shredded_primitives_read_as_their_unshredded_encoding() {
        let utc = "+00:00";
        let cases: Vec<(ArrayRef, &str)> = vec![
            (
                Arc::new(
                    Decimal128Array::from(vec![150])
                        .with_precision_and_scale(9, 2)
                        .unwrap(),
                ),
                "1.50",
            ),
            (
                Arc::new(
                    TimestampMicrosecondArray::from(vec![946_684_800_500_000]).with_timezone(utc),
                ),
                "\"2000-01-01 00:00:00.5+00:00\"",
            ),
            (
                Arc::new(TimestampMicrosecondArray::from(vec![-1])),
                "\"1969-12-31 23:59:59.999999\"",
            ),
            (binaries(vec![Some(b"\x00\x01\xff")]), "\"AAH/\""),
            (
                Arc::new(arrow_array::Date32Array::from(vec![0])),
                "\"1970-01-01\"",
            ),
            (
                Arc::new(arrow_array::Float32Array::from(vec![1.1f32])),
                "1.1",
            ),
            (
                Arc::new(arrow_array::BooleanArray::from(vec![false])),
                "false",
            ),
        ];
        for (typed, expected) in cases {
            let column = group(
                vec![
                    ("metadata", metadata(1)),
                    ("value", binaries(vec![None])),
                    ("typed_value", typed),
                ],
                None,
            );
            assert_eq!(json(column.as_ref(), 0).as_deref(), Ok(expected));
        }
    }

    #[test]
    fn a_shredded_primitive_with_a_value_beside_it_is_refused() {
        let column = group(
            vec![
                ("metadata", metadata(1)),
                ("value", binaries(vec![Some(b"\x0c\x01")])),
                ("typed_value", Arc::new(Int64Array::from(vec![2]))),
            ],
            None,
        );
        assert!(
            json(column.as_ref(), 0)
                .unwrap_err()
                .contains("malformed shredded")
        );
    }

    #[test]
    fn variants_nested_in_arrays_maps_and_structs_read_inside_their_json() {
        use lakemirror_delta::schema::parse_schema;
        // array<variant> of [ {"col":1}, SQL NULL ] as Spark 4 writes them (unshredded).
        let elements = group(
            vec![
                (
                    "value",
                    binaries(vec![Some(b"\x02\x01\x00\x00\x02\x0c\x01"), None]),
                ),
                (
                    "metadata",
                    binaries(vec![Some(b"\x01\x01\x00\x03col"), None]),
                ),
            ],
            Some(NullBuffer::from(vec![true, false])),
        );
        let list = ListArray::new(
            field("element", &elements),
            OffsetBuffer::from_lengths([2]),
            elements,
            None,
        );
        let fields = parse_schema(
            r#"{"type":"struct","fields":[{"name":"a","type":{"type":"array","elementType":"variant","containsNull":true},"nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let mut out = String::new();
        crate::json::write_json(&list, 0, &fields[0].data_type, &mut out).unwrap();
        assert_eq!(out, r#"[{"col":1},null]"#);
        // A string typed_value holding a NUL: refused, as jsonb cannot hold it.
        let mut strings = StringBuilder::new();
        strings.append_value("a\0");
        let column = group(
            vec![
                ("metadata", metadata(1)),
                ("typed_value", Arc::new(strings.finish())),
            ],
            None,
        );
        assert!(json(column.as_ref(), 0).unwrap_err().contains("NUL"));
    }
}
