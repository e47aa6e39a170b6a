//! Values PostgreSQL stores as `jsonb`, written as JSON text: structs, arrays and maps (struct
//! fields under their logical Delta names) and variants ([`crate::variant`]), at any depth.
//!
//! Text, not a `serde_json::Value`: a variant's decimals reach `jsonb` (whose numbers are
//! `numeric`) with every digit, where a `Value` would round them through `f64`.

use std::fmt::Write as _;

use arrow_array::Array;
use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type};
use arrow_schema::DataType;

use crate::json_text::write_string;
use crate::variant;
use lakemirror_delta::schema::DeltaType;

/// The Delta type name of a variant.
pub(crate) const VARIANT: &str = "variant";

/// Appends the JSON text of row `row` of `array`, a column of Delta type `delta`.
pub(crate) fn write_json(
    array: &dyn Array,
    row: usize,
    delta: &DeltaType,
    out: &mut String,
) -> Result<(), String> {
    if array.is_null(row) || array.data_type() == &DataType::Null {
        out.push_str("null");
        return Ok(());
    }
    match delta {
        DeltaType::Primitive(name) if name == VARIANT => variant::write_variant(array, row, out),
        DeltaType::Struct(fields) => {
            let s = array
                .as_struct_opt()
                .ok_or("a struct column was not read as a struct")?;
            out.push('{');
            for (i, field) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, &field.name)?;
                out.push(':');
                match s.column_by_name(field.physical_name()) {
                    Some(child) => write_json(child.as_ref(), row, &field.data_type, out)?,
                    None => out.push_str("null"),
                }
            }
            out.push('}');
            Ok(())
        }
        DeltaType::Array { element, .. } => {
            let items = match array.data_type() {
                DataType::LargeList(_) => array.as_list::<i64>().value(row),
                _ => array
                    .as_list_opt::<i32>()
                    .ok_or("an array column was not read as a list")?
                    .value(row),
            };
            out.push('[');
            for i in 0..items.len() {
                if i > 0 {
                    out.push(',');
                }
                write_json(items.as_ref(), i, element, out)?;
            }
            out.push(']');
            Ok(())
        }
        DeltaType::Map { key, value, .. } => {
            let m = array
                .as_map_opt()
                .ok_or("a map column was not read as a map")?;
            let entries = m.value(row);
            let (keys, values) = (entries.column(0), entries.column(1));
            out.push('{');
            for i in 0..entries.len() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, &map_key(keys.as_ref(), i, key)?)?;
                out.push(':');
                write_json(values.as_ref(), i, value, out)?;
            }
            out.push('}');
            Ok(())
        }
        DeltaType::Primitive(_) => write_primitive(array, row, out),
    }
}

/// A map key as a JSON object key: a string as itself, anything else as its JSON text.
fn map_key(keys: &dyn Array, row: usize, delta: &DeltaType) -> Result<String, String> {
    let mut text = String::new();
    write_json(keys, row, delta, &mut text)?;
    if text.starts_with('"') {
        return serde_json::from_str(&text).map_err(|e| e.to_string());
    }
    Ok(text)
}

/// A primitive inside a nested value: numbers and booleans as JSON, the rest as the text
/// Arrow displays (dates, timestamps, decimals as strings keep their exact value).
fn write_primitive(array: &dyn Array, row: usize, out: &mut String) -> Result<(), String> {
    use DataType as D;
    let number = |out: &mut String, v: f64| match serde_json::Number::from_f64(v) {
        Some(n) => write!(out, "{n}").map_err(|e| e.to_string()),
        None => {
            out.push_str("null");
            Ok(())
        }
    };
    let int = |out: &mut String, v: i64| write!(out, "{v}").map_err(|e| e.to_string());
    match array.data_type() {
        D::Boolean => {
            out.push_str(if array.as_boolean().value(row) {
                "true"
            } else {
                "false"
            });
            Ok(())
        }
        D::Int8 => int(out, array.as_primitive::<Int8Type>().value(row).into()),
        D::Int16 => int(out, array.as_primitive::<Int16Type>().value(row).into()),
        D::Int32 => int(out, array.as_primitive::<Int32Type>().value(row).into()),
        D::Int64 => int(out, array.as_primitive::<Int64Type>().value(row)),
        D::Float32 => number(
            out,
            f64::from(array.as_primitive::<Float32Type>().value(row)),
        ),
        D::Float64 => number(out, array.as_primitive::<Float64Type>().value(row)),
        D::Utf8 => write_string(out, array.as_string::<i32>().value(row)),
        D::LargeUtf8 => write_string(out, array.as_string::<i64>().value(row)),
        _ => {
            let formatter = arrow_cast::display::ArrayFormatter::try_new(
                array,
                &arrow_cast::display::FormatOptions::default(),
            )
            .map_err(|e| e.to_string())?;
            write_string(out, &formatter.value(row).to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_text::NUL_IN_JSON;
    use arrow_array::builder::{MapBuilder, StringBuilder};
    use arrow_array::{ArrayRef, Int64Array, ListArray, StringArray, StructArray};
    use arrow_schema::Field;
    use lakemirror_delta::schema::parse_schema;
    use std::sync::Arc;

    fn text(array: &dyn Array, row: usize, delta: &DeltaType) -> String {
        let mut out = String::new();
        write_json(array, row, delta, &mut out).unwrap();
        out
    }

    #[test]
    fn strings_escape_as_json_and_a_nul_is_refused() {
        let mut out = String::new();
        write_string(&mut out, "a\"b\\c\nd\u{1}é😀").unwrap();
        assert_eq!(out, r#""a\"b\\c\nd\u0001é😀""#);
        assert_eq!(
            serde_json::from_str::<String>(&out).unwrap(),
            "a\"b\\c\nd\u{1}é😀"
        );
        assert_eq!(
            write_string(&mut String::new(), "a\0b"),
            Err(NUL_IN_JSON.into())
        );
    }

    #[test]
    fn structs_take_logical_names_and_lists_and_maps_nest() {
        let fields = parse_schema(
            r#"{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[
                {"name":"Label","type":"string","nullable":true,"metadata":{"delta.columnMapping.physicalName":"col-1"}},
                {"name":"n","type":"long","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}},
              {"name":"l","type":{"type":"array","elementType":"long","containsNull":true},"nullable":true,"metadata":{}},
              {"name":"m","type":{"type":"map","keyType":"string","valueType":"string","valueContainsNull":true},"nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let s = StructArray::from(vec![
            (
                Arc::new(Field::new("col-1", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec![Some("x\"y")])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("n", DataType::Int64, true)),
                Arc::new(Int64Array::from(vec![None::<i64>])) as ArrayRef,
            ),
        ]);
        assert_eq!(
            text(&s, 0, &fields[0].data_type),
            r#"{"Label":"x\"y","n":null}"#
        );
        let l = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![Some(vec![
            Some(1),
            None,
            Some(-3),
        ])]);
        assert_eq!(text(&l, 0, &fields[1].data_type), "[1,null,-3]");
        let mut m = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        m.keys().append_value("k\n");
        m.values().append_value("v");
        m.append(true).unwrap();
        assert_eq!(text(&m.finish(), 0, &fields[2].data_type), r#"{"k\n":"v"}"#);
    }

    #[test]
    fn binary_and_geometry_inside_nested_values_are_hex() {
        let fields = parse_schema(
            r#"{"type":"struct","fields":[{"name":"s","type":{"type":"struct","fields":[
                {"name":"g","type":"geometry(OGC:CRS84)","nullable":true,"metadata":{}}]},"nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let s = StructArray::from(vec![(
            Arc::new(Field::new("g", DataType::Binary, true)),
            Arc::new(arrow_array::BinaryArray::from(vec![&[0x01u8, 0xff][..]])) as ArrayRef,
        )]);
        assert_eq!(text(&s, 0, &fields[0].data_type), r#"{"g":"01ff"}"#);
    }
}
