//! Arrow columns -> PostgreSQL binary `COPY` rows. Pure: bytes in, bytes out.
//!
//! Format: <https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4>. Each row
//! is a field count and, per field, a length (-1 for NULL) and the value in the type's binary
//! send format.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    TimestampMicrosecondType,
};
use arrow_array::{Array, ArrayRef};
use bytes::{BufMut, BytesMut};
use serde_json::{Map, Value};

use crate::types::PgType;
use lakemirror_delta::schema::DeltaType;

/// The binary COPY header: signature, flags, header extension length.
pub const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";
/// The end-of-data marker.
pub const TRAILER: &[u8] = &[0xff, 0xff];

/// Microseconds and days between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;
const PG_EPOCH_DAYS: i32 = 10_957;

/// A column to encode: its PostgreSQL type, and its Delta type (names inside JSON).
#[derive(Debug, Clone)]
pub struct CopyColumn {
    pub name: String,
    pub pg: PgType,
    pub delta: DeltaType,
}

/// A value PostgreSQL would refuse: the row (index in the batch) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub row: usize,
    pub column: String,
    pub reason: String,
}

/// Appends every row of `arrays` (one per column, already cast to `PgType::arrow`) to `out`.
pub fn encode_rows(
    columns: &[CopyColumn],
    arrays: &[ArrayRef],
    out: &mut BytesMut,
) -> Result<(), Rejected> {
    let rows = arrays.first().map_or(0, |a| a.len());
    let fields = i16::try_from(columns.len()).unwrap_or(i16::MAX);
    for row in 0..rows {
        out.put_i16(fields);
        for (column, array) in columns.iter().zip(arrays) {
            encode_value(column, array.as_ref(), row, out).map_err(|reason| Rejected {
                row,
                column: column.name.clone(),
                reason,
            })?;
        }
    }
    Ok(())
}

fn encode_value(
    column: &CopyColumn,
    array: &dyn Array,
    row: usize,
    out: &mut BytesMut,
) -> Result<(), String> {
    // A column a file predates is read as a NullArray, whose is_null() says false.
    if array.is_null(row) || array.data_type() == &arrow_schema::DataType::Null {
        out.put_i32(-1);
        return Ok(());
    }
    let wrong = || {
        format!(
            "read as {} where {} was expected",
            array.data_type(),
            column.pg.sql()
        )
    };
    match &column.pg {
        PgType::Boolean => {
            let a = array.as_boolean_opt().ok_or_else(wrong)?;
            out.put_i32(1);
            out.put_u8(u8::from(a.value(row)));
        }
        PgType::SmallInt => {
            out.put_i32(2);
            out.put_i16(
                array
                    .as_primitive_opt::<Int16Type>()
                    .ok_or_else(wrong)?
                    .value(row),
            );
        }
        PgType::Integer => {
            out.put_i32(4);
            out.put_i32(
                array
                    .as_primitive_opt::<Int32Type>()
                    .ok_or_else(wrong)?
                    .value(row),
            );
        }
        PgType::BigInt => {
            out.put_i32(8);
            out.put_i64(
                array
                    .as_primitive_opt::<Int64Type>()
                    .ok_or_else(wrong)?
                    .value(row),
            );
        }
        PgType::Real => {
            out.put_i32(4);
            out.put_f32(
                array
                    .as_primitive_opt::<Float32Type>()
                    .ok_or_else(wrong)?
                    .value(row),
            );
        }
        PgType::Double => {
            out.put_i32(8);
            out.put_f64(
                array
                    .as_primitive_opt::<Float64Type>()
                    .ok_or_else(wrong)?
                    .value(row),
            );
        }
        PgType::Numeric { scale, .. } => {
            let unscaled = array
                .as_primitive_opt::<Decimal128Type>()
                .ok_or_else(wrong)?
                .value(row);
            put_with_length(out, &numeric(unscaled, *scale));
        }
        PgType::Text => {
            let value = array.as_string_opt::<i32>().ok_or_else(wrong)?.value(row);
            if value.contains('\0') {
                return Err("holds a NUL byte, which PostgreSQL text cannot store".into());
            }
            put_with_length(out, value.as_bytes());
        }
        PgType::Bytea => {
            put_with_length(
                out,
                array.as_binary_opt::<i32>().ok_or_else(wrong)?.value(row),
            );
        }
        PgType::Date => {
            let days = array
                .as_primitive_opt::<Date32Type>()
                .ok_or_else(wrong)?
                .value(row);
            out.put_i32(4);
            out.put_i32(days - PG_EPOCH_DAYS);
        }
        PgType::Timestamptz | PgType::Timestamp => {
            let micros = array
                .as_primitive_opt::<TimestampMicrosecondType>()
                .ok_or_else(wrong)?
                .value(row);
            out.put_i32(8);
            out.put_i64(micros - PG_EPOCH_MICROS);
        }
        PgType::Jsonb => {
            let json = json_value(array, row, &column.delta)?;
            let text = serde_json::to_string(&json).map_err(|e| e.to_string())?;
            out.put_i32(i32::try_from(text.len() + 1).map_err(|_| "value over 2 GiB")?);
            out.put_u8(1); // jsonb binary format version
            out.put_slice(text.as_bytes());
        }
    }
    Ok(())
}

fn put_with_length(out: &mut BytesMut, bytes: &[u8]) {
    out.put_i32(i32::try_from(bytes.len()).unwrap_or(i32::MAX));
    out.put_slice(bytes);
}

/// PostgreSQL's binary `numeric`: digit count, weight, sign, display scale, then base-10000
/// digits, from an unscaled integer and its scale.
pub fn numeric(unscaled: i128, scale: u32) -> Vec<u8> {
    let negative = unscaled < 0;
    let digits = unscaled.unsigned_abs().to_string();
    let scale = scale as usize;
    // Split into integer and fraction digits, then pad both to whole groups of four.
    let (int_part, frac_part) = if digits.len() > scale {
        digits.split_at(digits.len() - scale)
    } else {
        ("", digits.as_str())
    };
    let frac = format!("{}{frac_part}", "0".repeat(scale - frac_part.len()));
    let int_pad = (4 - int_part.len() % 4) % 4;
    let int = format!("{}{int_part}", "0".repeat(int_pad));
    let frac_pad = (4 - frac.len() % 4) % 4;
    let frac = format!("{frac}{}", "0".repeat(frac_pad));
    let group = |s: &str| -> Vec<i16> {
        s.as_bytes()
            .chunks(4)
            .map(|c| c.iter().fold(0i16, |n, d| n * 10 + i16::from(d - b'0')))
            .collect()
    };
    let mut groups: Vec<i16> = group(&int);
    let mut weight = groups.len() as i16 - 1;
    groups.extend(group(&frac));
    // Leading zero groups lower the weight; trailing ones are implied.
    let leading = groups.iter().take_while(|g| **g == 0).count();
    groups.drain(..leading);
    weight -= leading as i16;
    while groups.last() == Some(&0) {
        groups.pop();
    }
    if groups.is_empty() {
        weight = 0;
    }
    let mut out = Vec::with_capacity(8 + 2 * groups.len());
    out.extend_from_slice(&(groups.len() as i16).to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(
        &(if negative && !groups.is_empty() {
            0x4000u16
        } else {
            0
        })
        .to_be_bytes(),
    );
    out.extend_from_slice(&(scale as u16).to_be_bytes());
    for g in groups {
        out.extend_from_slice(&g.to_be_bytes());
    }
    out
}

const NUL_IN_JSON: &str = "holds a NUL character, which PostgreSQL jsonb cannot store";

/// A nested value as JSON, struct fields under their (logical) Delta names.
fn json_value(array: &dyn Array, row: usize, delta: &DeltaType) -> Result<Value, String> {
    if array.is_null(row) || array.data_type() == &arrow_schema::DataType::Null {
        return Ok(Value::Null);
    }
    Ok(match delta {
        DeltaType::Struct(fields) => {
            let s = array
                .as_struct_opt()
                .ok_or("a struct column was not read as a struct")?;
            let mut map = Map::new();
            for field in fields {
                let value = match s.column_by_name(field.physical_name()) {
                    Some(child) => json_value(child.as_ref(), row, &field.data_type)?,
                    None => Value::Null,
                };
                map.insert(field.name.clone(), value);
            }
            Value::Object(map)
        }
        DeltaType::Array { element, .. } => {
            let items = match array.data_type() {
                arrow_schema::DataType::LargeList(_) => array.as_list::<i64>().value(row),
                _ => array
                    .as_list_opt::<i32>()
                    .ok_or("an array column was not read as a list")?
                    .value(row),
            };
            Value::Array(
                (0..items.len())
                    .map(|i| json_value(items.as_ref(), i, element))
                    .collect::<Result<_, _>>()?,
            )
        }
        DeltaType::Map { key, value, .. } => {
            let m = array
                .as_map_opt()
                .ok_or("a map column was not read as a map")?;
            let entries = m.value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            let mut map = Map::new();
            for i in 0..entries.len() {
                let k = match json_value(keys.as_ref(), i, key)? {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                if k.contains('\0') {
                    return Err(NUL_IN_JSON.into());
                }
                map.insert(k, json_value(values.as_ref(), i, value)?);
            }
            Value::Object(map)
        }
        DeltaType::Primitive(_) => primitive_json(array, row)?,
    })
}

/// A primitive inside a nested value: numbers and booleans as JSON, the rest as the text
/// Arrow displays (dates, timestamps, decimals as strings keep their exact value).
fn primitive_json(array: &dyn Array, row: usize) -> Result<Value, String> {
    use arrow_schema::DataType as D;
    let number = |v: f64| serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number);
    Ok(match array.data_type() {
        D::Boolean => Value::Bool(array.as_boolean().value(row)),
        D::Int8 => array
            .as_primitive::<arrow_array::types::Int8Type>()
            .value(row)
            .into(),
        D::Int16 => array.as_primitive::<Int16Type>().value(row).into(),
        D::Int32 => array.as_primitive::<Int32Type>().value(row).into(),
        D::Int64 => array.as_primitive::<Int64Type>().value(row).into(),
        D::Float32 => number(f64::from(array.as_primitive::<Float32Type>().value(row))),
        D::Float64 => number(array.as_primitive::<Float64Type>().value(row)),
        D::Utf8 | D::LargeUtf8 => {
            let s = match array.data_type() {
                D::Utf8 => array.as_string::<i32>().value(row),
                _ => array.as_string::<i64>().value(row),
            };
            if s.contains('\0') {
                return Err(NUL_IN_JSON.into());
            }
            Value::String(s.to_string())
        }
        _ => {
            let formatter = arrow_cast::display::ArrayFormatter::try_new(
                array,
                &arrow_cast::display::FormatOptions::default(),
            )
            .map_err(|e| e.to_string())?;
            Value::String(formatter.value(row).to_string())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Int64Array, StringArray};
    use std::sync::Arc;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn numerics_encode_as_postgres_sends_them() {
        // SELECT numeric_send(x) in psql gives these.
        assert_eq!(hex(&numeric(12345, 2)), "0002000000000002007b1194"); // 123.45
        assert_eq!(hex(&numeric(0, 3)), "0000000000000003"); // 0.000
        assert_eq!(hex(&numeric(-5, 1)), "0001ffff400000011388"); // -0.5
        assert_eq!(hex(&numeric(100_000_000, 0)), "00010002000000000001"); // 1e8
        assert_eq!(hex(&numeric(10_000, 0)), "00010001000000000001"); // 10000
        assert_eq!(hex(&numeric(1, 6)), "0001fffe000000060064"); // 0.000001
    }

    #[test]
    fn rows_carry_lengths_and_nulls() {
        let columns = [
            CopyColumn {
                name: "id".into(),
                pg: PgType::BigInt,
                delta: DeltaType::Primitive("long".into()),
            },
            CopyColumn {
                name: "s".into(),
                pg: PgType::Text,
                delta: DeltaType::Primitive("string".into()),
            },
        ];
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(vec![7])),
            Arc::new(StringArray::from(vec![None::<&str>])),
        ];
        let mut out = BytesMut::new();
        encode_rows(&columns, &arrays, &mut out).unwrap();
        assert_eq!(hex(&out), "0002000000080000000000000007ffffffff");
    }

    #[test]
    fn a_nul_byte_is_rejected_naming_row_and_column() {
        let columns = [CopyColumn {
            name: "s".into(),
            pg: PgType::Text,
            delta: DeltaType::Primitive("string".into()),
        }];
        let arrays: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["ok", "a\0b"]))];
        let err = encode_rows(&columns, &arrays, &mut BytesMut::new()).unwrap_err();
        assert_eq!((err.row, err.column.as_str()), (1, "s"));
        assert!(err.reason.contains("NUL"));
    }
}
