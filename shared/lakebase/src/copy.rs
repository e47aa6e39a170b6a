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

use crate::geo::with_srid;
use crate::json::write_json;
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
            out.put_i16(primitive::<Int16Type>(array, row, wrong)?);
        }
        PgType::Integer => {
            out.put_i32(4);
            out.put_i32(primitive::<Int32Type>(array, row, wrong)?);
        }
        PgType::BigInt => {
            out.put_i32(8);
            out.put_i64(primitive::<Int64Type>(array, row, wrong)?);
        }
        PgType::Real => {
            out.put_i32(4);
            out.put_f32(primitive::<Float32Type>(array, row, wrong)?);
        }
        PgType::Double => {
            out.put_i32(8);
            out.put_f64(primitive::<Float64Type>(array, row, wrong)?);
        }
        PgType::Numeric { scale, .. } => {
            let unscaled = primitive::<Decimal128Type>(array, row, wrong)?;
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
            let days = primitive::<Date32Type>(array, row, wrong)?;
            out.put_i32(4);
            out.put_i32(days - PG_EPOCH_DAYS);
        }
        PgType::Timestamptz | PgType::Timestamp => {
            let micros = primitive::<TimestampMicrosecondType>(array, row, wrong)?;
            out.put_i32(8);
            out.put_i64(micros - PG_EPOCH_MICROS);
        }
        PgType::Geometry { srid, .. } | PgType::Geography { srid, .. } => {
            let wkb = array.as_binary_opt::<i32>().ok_or_else(wrong)?.value(row);
            match srid {
                Some(srid) => put_with_length(out, &with_srid(wkb, *srid)?),
                None => put_with_length(out, wkb),
            }
        }
        PgType::Jsonb => {
            let mut text = String::new();
            write_json(array, row, &column.delta, &mut text)?;
            out.put_i32(i32::try_from(text.len() + 1).map_err(|_| "value over 2 GiB")?);
            out.put_u8(1); // jsonb binary format version
            out.put_slice(text.as_bytes());
        }
    }
    Ok(())
}

/// Row `row` of `array` as a value of Arrow type `T`; `wrong` says why not.
fn primitive<T: arrow_array::ArrowPrimitiveType>(
    array: &dyn Array,
    row: usize,
    wrong: impl Fn() -> String,
) -> Result<T::Native, String> {
    Ok(array.as_primitive_opt::<T>().ok_or_else(wrong)?.value(row))
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
    fn postgis_values_carry_their_srid_and_variants_their_json() {
        use arrow_array::{BinaryArray, StructArray};
        use arrow_schema::{DataType, Field};
        // POINT(1 2) as little-endian WKB.
        let mut wkb = vec![1u8, 1, 0, 0, 0];
        wkb.extend_from_slice(&1f64.to_le_bytes());
        wkb.extend_from_slice(&2f64.to_le_bytes());
        let variant = StructArray::from(vec![
            (
                Arc::new(Field::new("metadata", DataType::Binary, false)),
                Arc::new(BinaryArray::from(vec![&b"\x01\x00\x00"[..]])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("value", DataType::Binary, false)),
                Arc::new(BinaryArray::from(vec![&b"\x20\x02\x96\x00\x00\x00"[..]])) as ArrayRef,
            ),
        ]);
        let columns = [
            CopyColumn {
                name: "g".into(),
                pg: PgType::Geometry {
                    schema: "public".into(),
                    srid: Some(4326),
                },
                delta: DeltaType::Primitive("geometry(OGC:CRS84)".into()),
            },
            CopyColumn {
                name: "w".into(),
                pg: PgType::Bytea,
                delta: DeltaType::Primitive("geography(OGC:CRS84, spherical)".into()),
            },
            CopyColumn {
                name: "v".into(),
                pg: PgType::Jsonb,
                delta: DeltaType::Primitive("variant".into()),
            },
        ];
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(BinaryArray::from(vec![wkb.as_slice()])),
            Arc::new(BinaryArray::from(vec![wkb.as_slice()])),
            Arc::new(variant),
        ];
        let mut out = BytesMut::new();
        encode_rows(&columns, &arrays, &mut out).unwrap();
        let ewkb = crate::geo::with_srid(&wkb, 4326).unwrap();
        let mut expected = vec![0u8, 3];
        expected.extend_from_slice(&(ewkb.len() as i32).to_be_bytes());
        expected.extend_from_slice(&ewkb);
        expected.extend_from_slice(&(wkb.len() as i32).to_be_bytes());
        expected.extend_from_slice(&wkb);
        expected.extend_from_slice(&5i32.to_be_bytes());
        expected.extend_from_slice(b"\x011.50"); // jsonb version 1, the decimal with its scale
        assert_eq!(hex(&out), hex(&expected));
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
