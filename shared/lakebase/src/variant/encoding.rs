//! The Variant binary encoding (Parquet's `VariantEncoding.md`, which Delta and Iceberg v3
//! share): a `metadata` dictionary of object keys and a `value`, decoded into JSON text.
//! Every read is bounds-checked and nesting is limited: a corrupt value fails its row, never
//! the process, and an error never quotes the value.

use std::fmt::Write as _;

use super::MAX_DEPTH;
use crate::json_text::write_string;

const MALFORMED: &str = "holds a malformed variant value";
const MALFORMED_METADATA: &str = "holds a malformed variant metadata dictionary";

/// The `metadata` of a variant: version 1, its dictionary of object keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Metadata<'m> {
    bytes: &'m [u8],
    offset_size: usize,
    keys: usize,
    strings_start: usize,
}

impl<'m> Metadata<'m> {
    pub(crate) fn parse(bytes: &'m [u8]) -> Result<Self, String> {
        let header = *bytes.first().ok_or(MALFORMED_METADATA)?;
        if header & 0x0f != 1 {
            return Err(format!(
                "holds a variant of encoding version {} (lakemirror reads version 1, the only one the Variant spec defines)",
                header & 0x0f
            ));
        }
        let offset_size = usize::from(header >> 6) + 1;
        let keys = read_uint(bytes, 1, offset_size).ok_or(MALFORMED_METADATA)?;
        // header, key count, then keys + 1 offsets
        let strings_start = keys
            .checked_add(2)
            .and_then(|n| n.checked_mul(offset_size))
            .and_then(|n| n.checked_add(1))
            .filter(|start| *start <= bytes.len())
            .ok_or(MALFORMED_METADATA)?;
        Ok(Self {
            bytes,
            offset_size,
            keys,
            strings_start,
        })
    }

    /// The object key with dictionary id `id`.
    pub(crate) fn key(&self, id: usize) -> Result<&'m str, String> {
        if id >= self.keys {
            return Err(MALFORMED.into());
        }
        let at = 1 + self.offset_size * (1 + id);
        let start = read_uint(self.bytes, at, self.offset_size).ok_or(MALFORMED_METADATA)?;
        let end = read_uint(self.bytes, at + self.offset_size, self.offset_size)
            .ok_or(MALFORMED_METADATA)?;
        let key = self
            .bytes
            .get(
                self.strings_start
                    .checked_add(start)
                    .ok_or(MALFORMED_METADATA)?..,
            )
            .and_then(|rest| rest.get(..end.checked_sub(start)?))
            .ok_or(MALFORMED_METADATA)?;
        std::str::from_utf8(key).map_err(|_| MALFORMED_METADATA.into())
    }
}

/// `size` bytes at `at`, little-endian, as an unsigned number.
fn read_uint(bytes: &[u8], at: usize, size: usize) -> Option<usize> {
    let field = bytes.get(at..at.checked_add(size)?)?;
    Some(
        field
            .iter()
            .rev()
            .fold(0usize, |n, b| (n << 8) | usize::from(*b)),
    )
}

fn fixed<const N: usize>(data: &[u8]) -> Result<[u8; N], String> {
    data.get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| MALFORMED.into())
}

/// An object's or an array's layout: element count, where the field ids, the offsets and the
/// element data start.
struct Container<'v> {
    value: &'v [u8],
    count: usize,
    id_size: usize,
    ids_start: usize,
    offset_size: usize,
    offsets_start: usize,
    data_start: usize,
    data_len: usize,
}

impl<'v> Container<'v> {
    /// `object` false: an array (no field ids).
    fn parse(value: &'v [u8], object: bool) -> Result<Self, String> {
        let info = value.first().ok_or(MALFORMED)? >> 2;
        let offset_size = usize::from(info & 0x03) + 1;
        let (id_size, large) = if object {
            (usize::from((info >> 2) & 0x03) + 1, info & 0x10 != 0)
        } else {
            (0, info & 0x04 != 0)
        };
        let count_size = if large { 4 } else { 1 };
        let count = read_uint(value, 1, count_size).ok_or(MALFORMED)?;
        let ids_start = 1 + count_size;
        let offsets_start = count
            .checked_mul(id_size)
            .and_then(|n| n.checked_add(ids_start))
            .ok_or(MALFORMED)?;
        let data_start = count
            .checked_add(1)
            .and_then(|n| n.checked_mul(offset_size))
            .and_then(|n| n.checked_add(offsets_start))
            .filter(|start| *start <= value.len())
            .ok_or(MALFORMED)?;
        let data_len =
            read_uint(value, offsets_start + count * offset_size, offset_size).ok_or(MALFORMED)?;
        if data_start
            .checked_add(data_len)
            .is_none_or(|end| end > value.len())
        {
            return Err(MALFORMED.into());
        }
        Ok(Self {
            value,
            count,
            id_size,
            ids_start,
            offset_size,
            offsets_start,
            data_start,
            data_len,
        })
    }

    /// The bytes from element `i`'s start to the end of the data (its header says its size).
    fn element(&self, i: usize) -> Result<&'v [u8], String> {
        let offset = read_uint(
            self.value,
            self.offsets_start + i * self.offset_size,
            self.offset_size,
        )
        .filter(|offset| *offset < self.data_len)
        .ok_or(MALFORMED)?;
        Ok(&self.value[self.data_start + offset..self.data_start + self.data_len])
    }

    fn field_id(&self, i: usize) -> Result<usize, String> {
        read_uint(self.value, self.ids_start + i * self.id_size, self.id_size)
            .ok_or_else(|| MALFORMED.into())
    }
}

const OBJECT: u8 = 2;

/// Appends the JSON text of the variant `value` (starting at its header byte).
pub(crate) fn write_value(
    value: &[u8],
    metadata: &Metadata,
    out: &mut String,
    depth: usize,
) -> Result<(), String> {
    let header = *value.first().ok_or(MALFORMED)?;
    match header & 0x03 {
        0 => write_primitive(header >> 2, &value[1..], out),
        1 => {
            let text = value
                .get(1..1 + usize::from(header >> 2))
                .ok_or(MALFORMED)?;
            write_string(out, std::str::from_utf8(text).map_err(|_| MALFORMED)?)
        }
        OBJECT => {
            out.push('{');
            write_object_fields(value, metadata, out, &mut true, depth)?;
            out.push('}');
            Ok(())
        }
        _ => {
            if depth >= MAX_DEPTH {
                return Err(too_deep());
            }
            let array = Container::parse(value, false)?;
            out.push('[');
            for i in 0..array.count {
                if i > 0 {
                    out.push(',');
                }
                write_value(array.element(i)?, metadata, out, depth + 1)?;
            }
            out.push(']');
            Ok(())
        }
    }
}

/// Appends the fields of the object `value` as `"key":value` pairs (a comma before each but
/// the first field written, `first` telling whether one was), without the braces: a
/// partially shredded object's fields join the shredded ones.
pub(crate) fn write_object_fields(
    value: &[u8],
    metadata: &Metadata,
    out: &mut String,
    first: &mut bool,
    depth: usize,
) -> Result<(), String> {
    if value.first().map(|h| h & 0x03) != Some(OBJECT) {
        return Err("holds a malformed shredded variant: what is beside an object's shredded fields is not an object".into());
    }
    if depth >= MAX_DEPTH {
        return Err(too_deep());
    }
    let object = Container::parse(value, true)?;
    for i in 0..object.count {
        if !std::mem::take(first) {
            out.push(',');
        }
        write_string(out, metadata.key(object.field_id(i)?)?)?;
        out.push(':');
        write_value(object.element(i)?, metadata, out, depth + 1)?;
    }
    Ok(())
}

pub(crate) fn too_deep() -> String {
    format!("holds a variant nested deeper than {MAX_DEPTH} levels")
}

/// A primitive value (`type_id` from its header, `data` after it).
fn write_primitive(type_id: u8, data: &[u8], out: &mut String) -> Result<(), String> {
    let i64_at = |data: &[u8]| fixed::<8>(data).map(i64::from_le_bytes);
    match type_id {
        0 => out.push_str("null"),
        1 => out.push_str("true"),
        2 => out.push_str("false"),
        3 => write_int(out, fixed::<1>(data).map(i8::from_le_bytes)?.into()),
        4 => write_int(out, fixed::<2>(data).map(i16::from_le_bytes)?.into()),
        5 => write_int(out, fixed::<4>(data).map(i32::from_le_bytes)?.into()),
        6 => write_int(out, i64_at(data)?),
        7 => write_f64(out, fixed::<8>(data).map(f64::from_le_bytes)?),
        8..=10 => {
            let scale = *data.first().ok_or(MALFORMED)?;
            let unscaled = &data[1..];
            let unscaled: i128 = match type_id {
                8 => fixed::<4>(unscaled).map(i32::from_le_bytes)?.into(),
                9 => i64_at(unscaled)?.into(),
                _ => fixed::<16>(unscaled).map(i128::from_le_bytes)?,
            };
            write_decimal(out, unscaled, scale)?;
        }
        11 => write_date(out, fixed::<4>(data).map(i32::from_le_bytes)?.into()),
        12 => write_timestamp(out, i128::from(i64_at(data)?) * 1000, true),
        13 => write_timestamp(out, i128::from(i64_at(data)?) * 1000, false),
        14 => write_f32(out, fixed::<4>(data).map(f32::from_le_bytes)?),
        15 | 16 => {
            let len = u32::from_le_bytes(fixed::<4>(data)?) as usize;
            let bytes = data.get(4..4 + len).ok_or(MALFORMED)?;
            if type_id == 15 {
                write_base64(out, bytes);
            } else {
                write_string(out, std::str::from_utf8(bytes).map_err(|_| MALFORMED)?)?;
            }
        }
        17 => write_time(out, i128::from(i64_at(data)?) * 1000),
        18 => write_timestamp(out, i64_at(data)?.into(), true),
        19 => write_timestamp(out, i64_at(data)?.into(), false),
        20 => write_uuid(out, &fixed::<16>(data)?),
        other => {
            return Err(format!(
                "holds a variant primitive of type {other}, which the Variant spec does not define"
            ));
        }
    }
    Ok(())
}

pub(crate) fn write_int(out: &mut String, v: i64) {
    let _ = write!(out, "{v}");
}

/// A double as the shortest text that reads back as the same value; NaN and the infinities,
/// which JSON cannot hold, as the strings Jackson writes for them.
pub(crate) fn write_f64(out: &mut String, v: f64) {
    match serde_json::Number::from_f64(v) {
        Some(n) => {
            let _ = write!(out, "{n}");
        }
        None => out.push_str(non_finite(v)),
    }
}

/// A float as the shortest text that reads back as the same float (Java's `Float.toString`
/// does the same: `1.1`, not the double `1.100000023841858`).
pub(crate) fn write_f32(out: &mut String, v: f32) {
    match serde_json::to_string(&v) {
        Ok(text) if v.is_finite() => out.push_str(&text),
        _ => out.push_str(non_finite(f64::from(v))),
    }
}

fn non_finite(v: f64) -> &'static str {
    if v.is_nan() {
        "\"NaN\""
    } else if v > 0.0 {
        "\"Infinity\""
    } else {
        "\"-Infinity\""
    }
}

/// A decimal with every digit of its scale (Java's `BigDecimal.toPlainString`: `1.50`).
pub(crate) fn write_decimal(out: &mut String, unscaled: i128, scale: u8) -> Result<(), String> {
    if scale > 38 {
        return Err(format!(
            "holds a variant decimal of scale {scale} (at most 38)"
        ));
    }
    let scale = usize::from(scale);
    let digits = unscaled.unsigned_abs().to_string();
    if unscaled < 0 {
        out.push('-');
    }
    if scale == 0 {
        out.push_str(&digits);
    } else if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        let _ = write!(out, "{int}.{frac}");
    } else {
        let _ = write!(out, "0.{}{digits}", "0".repeat(scale - digits.len()));
    }
    Ok(())
}

/// Days since 1970-01-01 as (year, month, day) of the proleptic Gregorian calendar, for any
/// day count (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `2024-01-31`, as Java's `LocalDate` writes it (`+10000-01-01`, `-0001-01-01`).
fn push_date(out: &mut String, days: i64) {
    let (year, month, day) = civil_from_days(days);
    let _ = match year {
        0..=9999 => write!(out, "{year:04}"),
        10000.. => write!(out, "+{year}"),
        _ => write!(out, "-{:04}", -year),
    };
    let _ = write!(out, "-{month:02}-{day:02}");
}

/// `12:34:56`, then the fraction with as many digits as it needs (ISO_LOCAL_TIME).
fn push_time(out: &mut String, nanos_of_day: i64) {
    let seconds = nanos_of_day / 1_000_000_000;
    let fraction = nanos_of_day % 1_000_000_000;
    let _ = write!(
        out,
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let digits = format!("{fraction:09}");
        let _ = write!(out, ".{}", digits.trim_end_matches('0'));
    }
}

pub(crate) fn write_date(out: &mut String, days: i64) {
    out.push('"');
    push_date(out, days);
    out.push('"');
}

/// A time of day (`nanos` since midnight) as `12:34:56.25`.
pub(crate) fn write_time(out: &mut String, nanos_of_day: i128) {
    out.push('"');
    push_time(out, nanos_of_day.rem_euclid(86_400_000_000_000) as i64);
    out.push('"');
}

/// A timestamp (`nanos` since the epoch) as Spark writes one: `2024-01-31 12:34:56.5`, with
/// `+00:00` when it is an instant (Spark writes the session's zone; lakemirror has none,
/// and writes UTC).
pub(crate) fn write_timestamp(out: &mut String, nanos: i128, instant: bool) {
    const DAY: i128 = 86_400_000_000_000;
    let days = nanos.div_euclid(DAY) as i64;
    out.push('"');
    push_date(out, days);
    out.push(' ');
    push_time(out, nanos.rem_euclid(DAY) as i64);
    if instant {
        out.push_str("+00:00");
    }
    out.push('"');
}

/// Standard base64 with padding, as Java's `Base64.getEncoder()`.
pub(crate) fn write_base64(out: &mut String, bytes: &[u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    out.push('"');
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 0x3f]));
            } else {
                out.push('=');
            }
        }
    }
    out.push('"');
}

/// A UUID (16 bytes, big-endian) as `01234567-89ab-cdef-0123-456789abcdef`.
pub(crate) fn write_uuid(out: &mut String, bytes: &[u8; 16]) {
    out.push('"');
    for (i, b) in bytes.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        let _ = write!(out, "{b:02x}");
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON of a variant.
    pub(crate) fn json(metadata: &[u8], value: &[u8]) -> Result<String, String> {
        let metadata = Metadata::parse(metadata)?;
        let mut out = String::new();
        write_value(value, &metadata, &mut out, 0)?;
        Ok(out)
    }

    /// Metadata with no keys.
    const EMPTY: &[u8] = &[0x01, 0x00, 0x00];

    fn primitive(type_id: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![type_id << 2];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn primitives_read_as_spark_writes_them() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (primitive(0, &[]), "null"),
            (primitive(1, &[]), "true"),
            (primitive(2, &[]), "false"),
            (primitive(3, &[0xff]), "-1"),
            (primitive(4, &(-300i16).to_le_bytes()), "-300"),
            (primitive(5, &70_000i32.to_le_bytes()), "70000"),
            (
                primitive(6, &i64::MIN.to_le_bytes()),
                "-9223372036854775808",
            ),
            (primitive(7, &0.1f64.to_le_bytes()), "0.1"),
            (primitive(7, &f64::NAN.to_le_bytes()), "\"NaN\""),
            (
                primitive(7, &f64::NEG_INFINITY.to_le_bytes()),
                "\"-Infinity\"",
            ),
            (primitive(14, &1.1f32.to_le_bytes()), "1.1"),
            (primitive(14, &f32::INFINITY.to_le_bytes()), "\"Infinity\""),
            // decimal4 1.50, decimal8 -0.001, decimal16 with 38 digits
            (primitive(8, &[2, 150, 0, 0, 0]), "1.50"),
            (
                primitive(9, &[[3u8].as_slice(), &(-1i64).to_le_bytes()].concat()),
                "-0.001",
            ),
            (
                primitive(
                    10,
                    &[
                        [18u8].as_slice(),
                        &12_345_678_901_234_567_890_123_456_789_012_345_678i128.to_le_bytes(),
                    ]
                    .concat(),
                ),
                "12345678901234567890.123456789012345678",
            ),
            (primitive(8, &[0, 7, 0, 0, 0]), "7"),
            // dates: 2024-02-29, 1969-12-31, year 10000, year -1
            (primitive(11, &19_782i32.to_le_bytes()), "\"2024-02-29\""),
            (primitive(11, &(-1i32).to_le_bytes()), "\"1969-12-31\""),
            (
                primitive(11, &2_932_897i32.to_le_bytes()),
                "\"+10000-01-01\"",
            ),
            (
                primitive(11, &(-719_893i32).to_le_bytes()),
                "\"-0001-01-01\"",
            ),
            // timestamps: 2000-01-01 00:00:00.5 UTC, ntz 1969-12-31 23:59:59.999999
            (
                primitive(12, &946_684_800_500_000i64.to_le_bytes()),
                "\"2000-01-01 00:00:00.5+00:00\"",
            ),
            (
                primitive(12, &0i64.to_le_bytes()),
                "\"1970-01-01 00:00:00+00:00\"",
            ),
            (
                primitive(13, &(-1i64).to_le_bytes()),
                "\"1969-12-31 23:59:59.999999\"",
            ),
            (
                primitive(18, &1_000_000_001i64.to_le_bytes()),
                "\"1970-01-01 00:00:01.000000001+00:00\"",
            ),
            (
                primitive(19, &(-1i64).to_le_bytes()),
                "\"1969-12-31 23:59:59.999999999\"",
            ),
            (
                primitive(17, &45_296_250_000i64.to_le_bytes()),
                "\"12:34:56.25\"",
            ),
            // binary, string, short string, uuid
            (primitive(15, &[3, 0, 0, 0, 0, 1, 0xff]), "\"AAH/\""),
            (primitive(15, &[1, 0, 0, 0, b'M']), "\"TQ==\""),
            (primitive(15, &[0, 0, 0, 0]), "\"\""),
            (primitive(16, &[2, 0, 0, 0, b'h', b'i']), "\"hi\""),
            (vec![1 | (3 << 2), b'a', b'"', b'c'], "\"a\\\"c\""),
            (
                primitive(20, &(0u8..16).collect::<Vec<_>>()),
                "\"00010203-0405-0607-0809-0a0b0c0d0e0f\"",
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(json(EMPTY, &value).as_deref(), Ok(expected), "{value:?}");
        }
    }

    #[test]
    fn objects_and_arrays_nest_with_keys_from_the_metadata() {
        // Databricks 15.3's parse_json('{"col":1}'): one key "col", an object with a 1-byte int.
        let metadata = b"\x01\x01\x00\x03col";
        assert_eq!(
            json(metadata, b"\x02\x01\x00\x00\x02\x0c\x01").unwrap(),
            r#"{"col":1}"#
        );
        assert_eq!(
            json(metadata, b"\x02\x01\x00\x00\x01\x00").unwrap(),
            r#"{"col":null}"#
        );
        // Keys "a", "b" (sorted dictionary); {"b":[true,"x"],"a":{}} with 2-byte offsets in
        // the array and the fields listed out of their data order.
        let metadata = b"\x11\x02\x00\x01\x02ab";
        let array = [
            &[0x03 | (1 << 2), 2][..], // array, 2-byte offsets, 2 elements
            &[0, 0, 1, 0, 3, 0],       // offsets 0, 1, end 3
            &[0x04],                   // true
            &[0x01 | (1 << 2), b'x'],  // "x"
        ]
        .concat();
        let empty_object = [0x02u8, 0, 0];
        let data = [array.as_slice(), &empty_object].concat();
        let object = [
            &[0x02, 2][..],                            // object, 1-byte ids and offsets, 2 fields
            &[0, 1],                                   // field ids: a, b
            &[array.len() as u8, 0, data.len() as u8], // a after b's data
            &data,
        ]
        .concat();
        assert_eq!(
            json(metadata, &object).unwrap(),
            r#"{"a":{},"b":[true,"x"]}"#
        );
    }

    #[test]
    fn corrupt_values_fail_without_panicking_or_quoting_them() {
        let metadata = b"\x01\x01\x00\x03col";
        let good = b"\x02\x01\x00\x00\x02\x0c\x01";
        for cut in 0..good.len() {
            assert!(json(metadata, &good[..cut]).is_err(), "cut at {cut}");
        }
        for cut in 0..metadata.len() {
            assert!(
                json(&metadata[..cut], good).is_err(),
                "metadata cut at {cut}"
            );
        }
        assert!(
            json(b"\x02\x00\x00", b"\x00")
                .unwrap_err()
                .contains("version 2")
        );
        // A key id past the dictionary, an unknown primitive, a count of 2^32 - 1.
        assert!(json(metadata, b"\x02\x01\x05\x00\x01\x00").is_err());
        assert!(json(EMPTY, &[21 << 2]).unwrap_err().contains("type 21"));
        assert!(json(EMPTY, &[0x03 | (1 << 4), 0xff, 0xff, 0xff, 0xff]).is_err());
        // Every byte string up to 3 bytes, and noise, as a value: an answer or an error.
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for n in 0..200_000u32 {
            let bytes: Vec<u8> = if n < 65_536 {
                n.to_le_bytes()[..2 + (n % 2) as usize].to_vec()
            } else {
                (0..(n % 40))
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as u8
                    })
                    .collect()
            };
            let _ = json(metadata, &bytes);
            let _ = json(&bytes, good);
        }
        let error = json(metadata, b"\x02\x01\x00\x00\x07\x0c\x01").unwrap_err();
        assert!(!error.contains("col"), "{error}");
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_refused() {
        // [[[...[null]...]]]: each level a one-element array around the next.
        let mut value = vec![0x00u8];
        for _ in 0..MAX_DEPTH + 1 {
            let len = value.len();
            let mut outer = vec![0x03 | (3 << 2) | (1 << 4), 1, 0, 0, 0];
            outer.extend_from_slice(&[0, 0, 0, 0]);
            outer.extend_from_slice(&(len as u32).to_le_bytes());
            outer.extend_from_slice(&value);
            value = outer;
        }
        assert!(json(EMPTY, &value).unwrap_err().contains("nested deeper"));
    }
}
