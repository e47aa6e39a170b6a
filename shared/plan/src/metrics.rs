//! Delta `add.stats` -> Iceberg column metrics (value and null counts, lower and upper bounds).
//!
//! Readers skip data files by these bounds, so a bound that is too tight silently loses rows.
//! Delta's statistics are not always exact bounds, and a value goes into the Iceberg
//! metrics only where it provably is one:
//!
//! - **Strings.** Delta truncates long min/max values (`delta.dataSkippingStringPrefixLength`,
//!   32 characters by default). A truncated min is a prefix, still a lower bound. A truncated
//!   max ends in a tie-breaker character; Delta before 3.3 used U+FFFD and compared UTF-16
//!   code units, so a truncated character above U+FFFF (an emoji) sorts *after* its max in
//!   UTF-8, Iceberg's order. A max ending in U+FFFD is therefore replaced by the smallest
//!   string above every string sharing its prefix (trailing U+FFFD and a `?` left by a split
//!   surrogate pair dropped, last character incremented). Newer tie-breakers (U+10FFFF,
//!   U+007F) already give true bounds.
//! - **Timestamps** are stored with millisecond precision, truncated: the upper bound is
//!   widened by 999 µs. Values that do not say their time zone are skipped for `timestamp`.
//! - **Floats** get one ulp of room each side (a decimal string rounds to the nearest
//!   `f32`), and a zero bound covers both zeros. **Doubles** get the room of the nearest
//!   float too: a column widened from float keeps float stats over float values in its old
//!   files. NaN and infinities are never bounds.
//! - Bounds that are not exact (timestamps, floats, doubles, strings) must not answer MIN/MAX
//!   queries: the writer sets `write.metadata.metrics.column.<name>=counts` for those columns,
//!   which stops engines (Spark) from pushing aggregates down to them; filtering still uses
//!   them.
//! - **Decimals** arrive as JSON numbers (parsed as `f64`): kept only up to 15 digits of
//!   precision, where the conversion is exact.
//! - Missing columns, unparseable values, list and map contents: no metric. Partition
//!   columns have no stats in Delta and need none (their value is in the partition).
//!
//! Keys are physical names when column mapping is on. Value counts are `numRecords` (the
//! rows of the data file, deleted or not, as Iceberg counts them).

use std::collections::HashMap;

use chrono::{DateTime, NaiveDate, NaiveDateTime};
use iceberg::spec::{Datum, NestedFieldRef, PrimitiveType, Schema, Type};
use serde_json::Value;

use crate::partition::unscaled_decimal;

/// The largest `add.stats` column metrics are taken from.
pub const MAX_STATS_BYTES: usize = 64 * 1024;

/// Column metrics of one data file, by Iceberg field ID.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnMetrics {
    pub value_counts: HashMap<i32, u64>,
    pub null_value_counts: HashMap<i32, u64>,
    pub lower_bounds: HashMap<i32, Datum>,
    pub upper_bounds: HashMap<i32, Datum>,
}

/// The metrics `stats` (the `add.stats` JSON) proves for `schema`'s columns. `physical_names`
/// maps field IDs to the names Delta keys the stats by (empty without column mapping).
/// Stats that cannot be read give no metrics, never an error: they are an optimisation.
pub fn column_metrics(
    stats: Option<&str>,
    schema: &Schema,
    physical_names: &HashMap<i32, String>,
) -> ColumnMetrics {
    let mut metrics = ColumnMetrics::default();
    // Parsed as a JSON tree, stats take several times their bytes: past this size (Delta
    // keeps stats of 32 columns by default, a few KB) they prove nothing here, and the file
    // is mirrored without bounds, only pruned less. Its record count is read apart.
    let Some(stats) = stats
        .filter(|s| s.len() <= MAX_STATS_BYTES)
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
    else {
        return metrics;
    };
    let records = stats.get("numRecords").and_then(Value::as_u64);
    let stats = Stats {
        min: stats.get("minValues"),
        max: stats.get("maxValues"),
        nulls: stats.get("nullCount"),
    };
    collect(
        schema.as_struct().fields(),
        &stats,
        records,
        physical_names,
        &mut metrics,
    );
    metrics
}

/// The stats objects at one level of nesting.
struct Stats<'a> {
    min: Option<&'a Value>,
    max: Option<&'a Value>,
    nulls: Option<&'a Value>,
}

impl<'a> Stats<'a> {
    fn get(&self, key: &str) -> Stats<'a> {
        Stats {
            min: self.min.and_then(|v| v.get(key)),
            max: self.max.and_then(|v| v.get(key)),
            nulls: self.nulls.and_then(|v| v.get(key)),
        }
    }
}

fn collect(
    fields: &[NestedFieldRef],
    stats: &Stats,
    records: Option<u64>,
    physical_names: &HashMap<i32, String>,
    metrics: &mut ColumnMetrics,
) {
    for field in fields {
        let key = physical_names
            .get(&field.id)
            .map_or(field.name.as_str(), String::as_str);
        let column = stats.get(key);
        match field.field_type.as_ref() {
            Type::Struct(inner) => {
                collect(inner.fields(), &column, records, physical_names, metrics)
            }
            Type::Primitive(ty) => {
                let id = field.id;
                // Counted only for columns Delta collected stats for: a value count without
                // a null count could tell a reader that a column added later is not null.
                if let (Some(records), Some(nulls)) =
                    (records, column.nulls.and_then(Value::as_u64))
                {
                    metrics.value_counts.insert(id, records);
                    metrics.null_value_counts.insert(id, nulls);
                }
                let lower = column.min.and_then(|v| lower_bound(ty, v));
                let upper = column.max.and_then(|v| upper_bound(ty, v));
                match (lower, upper) {
                    // Contradicting stats prove nothing.
                    (Some(l), Some(u)) if l > u => {}
                    (lower, upper) => {
                        if let Some(l) = lower {
                            metrics.lower_bounds.insert(id, l);
                        }
                        if let Some(u) = upper {
                            metrics.upper_bounds.insert(id, u);
                        }
                    }
                }
            }
            // Delta keeps no min/max inside lists and maps.
            Type::List(_) | Type::Map(_) => {}
        }
    }
}

/// Table property prefix of Iceberg's per-column metrics mode.
pub const METRICS_MODE_PREFIX: &str = "write.metadata.metrics.column.";

/// Sets `write.metadata.metrics.column.<name>=counts` for the columns whose bounds are not
/// exact values (timestamps, floats, doubles, strings), and drops such entries of columns that
/// are gone: engines that answer MIN/MAX from bounds (Spark's aggregate push-down) then read
/// the data instead, while filters still prune by the bounds.
pub fn set_metrics_modes(schema: &Schema, properties: &mut HashMap<String, String>) {
    fn walk(fields: &[NestedFieldRef], prefix: &str, out: &mut Vec<String>) {
        for field in fields {
            let name = format!("{prefix}{}", field.name);
            match field.field_type.as_ref() {
                Type::Struct(inner) => walk(inner.fields(), &format!("{name}."), out),
                Type::Primitive(
                    PrimitiveType::Timestamp
                    | PrimitiveType::Timestamptz
                    | PrimitiveType::Float
                    | PrimitiveType::Double
                    | PrimitiveType::String,
                ) => out.push(name),
                _ => {}
            }
        }
    }
    let mut inexact = Vec::new();
    walk(schema.as_struct().fields(), "", &mut inexact);
    properties.retain(|key, _| !key.starts_with(METRICS_MODE_PREFIX));
    for name in inexact {
        properties.insert(format!("{METRICS_MODE_PREFIX}{name}"), "counts".to_string());
    }
}

/// A lower bound of the column from Delta's `minValues` entry.
pub fn lower_bound(ty: &PrimitiveType, value: &Value) -> Option<Datum> {
    match ty {
        PrimitiveType::String => value.as_str().map(Datum::string),
        PrimitiveType::Float => finite_f32(value).map(|f| Datum::float(f.next_down())),
        PrimitiveType::Double => finite_f64(value).map(|f| Datum::double(double_lower(f))),
        PrimitiveType::Timestamp => timestamp_ntz_micros(value).map(Datum::timestamp_micros),
        PrimitiveType::Timestamptz => timestamp_micros(value).map(Datum::timestamptz_micros),
        _ => exact(ty, value),
    }
}

/// An upper bound of the column from Delta's `maxValues` entry.
pub fn upper_bound(ty: &PrimitiveType, value: &Value) -> Option<Datum> {
    const MS_TRUNCATION_US: i64 = 999;
    match ty {
        PrimitiveType::String => value
            .as_str()
            .and_then(string_upper_bound)
            .map(Datum::string),
        PrimitiveType::Float => finite_f32(value).map(|f| Datum::float(f.next_up())),
        PrimitiveType::Double => finite_f64(value).map(|f| Datum::double(double_upper(f))),
        PrimitiveType::Timestamp => timestamp_ntz_micros(value)
            .and_then(|t| t.checked_add(MS_TRUNCATION_US))
            .map(Datum::timestamp_micros),
        PrimitiveType::Timestamptz => timestamp_micros(value)
            .and_then(|t| t.checked_add(MS_TRUNCATION_US))
            .map(Datum::timestamptz_micros),
        _ => exact(ty, value),
    }
}

/// Values Delta stores exactly: integers, booleans, dates, decimals of up to 15 digits.
fn exact(ty: &PrimitiveType, value: &Value) -> Option<Datum> {
    match ty {
        PrimitiveType::Boolean => value.as_bool().map(Datum::bool),
        PrimitiveType::Int => value
            .as_i64()
            .and_then(|v| i32::try_from(v).ok())
            .map(Datum::int),
        PrimitiveType::Long => value.as_i64().map(Datum::long),
        PrimitiveType::Date => {
            let date = NaiveDate::parse_from_str(value.as_str()?, "%Y-%m-%d").ok()?;
            let days = date.signed_duration_since(NaiveDate::default()).num_days();
            i32::try_from(days).ok().map(Datum::date)
        }
        PrimitiveType::Decimal { precision, scale } if *precision <= 15 => {
            // Display of an f64 is the shortest text that reads back as it: for 15 digits
            // or fewer, the decimal Delta wrote.
            let text = match value {
                Value::Number(n) if n.is_f64() => format!("{}", n.as_f64()?),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            let unscaled = unscaled_decimal(&text, *scale)?;
            Datum::try_from_bytes(&decimal_bytes(unscaled), ty.clone()).ok()
        }
        _ => None,
    }
}

/// An upper bound for strings whose max is `max`, in UTF-8 byte order (see the module
/// documentation for why a trailing U+FFFD is not trusted).
pub fn string_upper_bound(max: &str) -> Option<String> {
    if !max.ends_with('\u{FFFD}') {
        return Some(max.to_string());
    }
    let prefix = max.trim_end_matches('\u{FFFD}');
    let prefix = prefix.strip_suffix('?').unwrap_or(prefix);
    let mut chars: Vec<char> = prefix.chars().collect();
    // The smallest string above every string that starts with `prefix`.
    while let Some(last) = chars.pop() {
        let next = match u32::from(last) {
            0xD7FF => Some('\u{E000}'),
            n => char::from_u32(n + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// A double bound also holds for a column widened from float: files written before the
/// widening carry float stats (`0.7`) over float values (0.699999988…), so the bound takes
/// the float neighbour too. A zero bound covers both zeros.
fn double_lower(f: f64) -> f64 {
    let as_float = f as f32;
    let widened = if as_float.is_finite() {
        f.min(f64::from(as_float.next_down()))
    } else {
        f
    };
    if widened == 0.0 { -0.0 } else { widened }
}

fn double_upper(f: f64) -> f64 {
    let as_float = f as f32;
    let widened = if as_float.is_finite() {
        f.max(f64::from(as_float.next_up()))
    } else {
        f
    };
    if widened == 0.0 { 0.0 } else { widened }
}

fn finite_f64(value: &Value) -> Option<f64> {
    value.as_f64().filter(|f| f.is_finite())
}

fn finite_f32(value: &Value) -> Option<f32> {
    finite_f64(value)
        .map(|f| f as f32)
        .filter(|f| f.is_finite())
}

/// A `timestamp` (with time zone) value; it must say its offset.
fn timestamp_micros(value: &Value) -> Option<i64> {
    DateTime::parse_from_rfc3339(value.as_str()?)
        .ok()
        .map(|t| t.timestamp_micros())
}

/// A `timestamp_ntz` value: local date-time, with or without fraction.
fn timestamp_ntz_micros(value: &Value) -> Option<i64> {
    let text = value.as_str()?;
    NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f"))
        .ok()
        .map(|t| t.and_utc().timestamp_micros())
}

/// Iceberg's decimal bound encoding: the unscaled value, big-endian two's complement,
/// minimal length.
fn decimal_bytes(unscaled: i128) -> Vec<u8> {
    let bytes = unscaled.to_be_bytes();
    let mut start = 0;
    while start < bytes.len() - 1 {
        let (b, next) = (bytes[start], bytes[start + 1]);
        let redundant = (b == 0x00 && next & 0x80 == 0) || (b == 0xFF && next & 0x80 != 0);
        if !redundant {
            break;
        }
        start += 1;
    }
    bytes[start..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{NestedField, PrimitiveLiteral, StructType};
    use proptest::prelude::*;
    use std::sync::Arc;

    fn schema() -> Schema {
        let field =
            |id, name: &str, ty| Arc::new(NestedField::optional(id, name, Type::Primitive(ty)));
        Schema::builder()
            .with_fields(vec![
                field(1, "id", PrimitiveType::Long),
                field(2, "name", PrimitiveType::String),
                field(3, "at", PrimitiveType::Timestamptz),
                Arc::new(NestedField::optional(
                    4,
                    "point",
                    Type::Struct(StructType::new(vec![
                        field(5, "x", PrimitiveType::Double),
                        field(
                            6,
                            "price",
                            PrimitiveType::Decimal {
                                precision: 10,
                                scale: 2,
                            },
                        ),
                    ])),
                )),
                field(7, "day", PrimitiveType::Date),
            ])
            .build()
            .unwrap()
    }

    const STATS: &str = r#"{"numRecords":3,
        "minValues":{"id":1,"name":"apple","at":"2024-01-01T10:00:00.123Z","point":{"x":-1.5,"price":0.5},"day":"2024-01-01"},
        "maxValues":{"id":9,"name":"pear","at":"2024-01-01T11:00:00.456+01:00","point":{"x":2.0,"price":12.25},"day":"2024-02-01"},
        "nullCount":{"id":0,"name":1,"at":0,"point":{"x":2,"price":0},"day":0}}"#;

    fn literal(d: &Datum) -> PrimitiveLiteral {
        d.literal().clone()
    }

    #[test]
    fn stats_become_bounds_and_counts() {
        let m = column_metrics(Some(STATS), &schema(), &HashMap::new());
        assert_eq!(m.value_counts.get(&1), Some(&3));
        assert_eq!(m.value_counts.get(&5), Some(&3));
        assert_eq!(m.null_value_counts.get(&2), Some(&1));
        assert_eq!(m.null_value_counts.get(&5), Some(&2));
        assert_eq!(literal(&m.lower_bounds[&1]), PrimitiveLiteral::Long(1));
        assert_eq!(literal(&m.upper_bounds[&1]), PrimitiveLiteral::Long(9));
        assert_eq!(m.lower_bounds[&2], Datum::string("apple"));
        assert_eq!(m.upper_bounds[&2], Datum::string("pear"));
        // 10:00:00.123Z, and 10:00:00.456Z widened to the end of its millisecond.
        assert_eq!(
            m.lower_bounds[&3],
            Datum::timestamptz_micros(1_704_103_200_123_000)
        );
        assert_eq!(
            m.upper_bounds[&3],
            Datum::timestamptz_micros(1_704_103_200_456_999)
        );
        assert_eq!(literal(&m.lower_bounds[&6]), PrimitiveLiteral::Int128(50));
        assert_eq!(literal(&m.upper_bounds[&6]), PrimitiveLiteral::Int128(1225));
        assert_eq!(m.lower_bounds[&7], Datum::date(19723));
    }

    #[test]
    fn column_mapped_stats_are_keyed_by_physical_name() {
        let stats = r#"{"numRecords":2,"minValues":{"col-a1":5},"maxValues":{"col-a1":7},"nullCount":{"col-a1":0}}"#;
        let physical = HashMap::from([(1, "col-a1".to_string())]);
        let m = column_metrics(Some(stats), &schema(), &physical);
        assert_eq!(literal(&m.lower_bounds[&1]), PrimitiveLiteral::Long(5));
        assert!(
            column_metrics(Some(stats), &schema(), &HashMap::new())
                .lower_bounds
                .is_empty()
        );
    }

    #[test]
    fn unreadable_missing_or_oversized_stats_give_no_metrics() {
        // Stats past MAX_STATS_BYTES are not parsed: a long array takes many times its bytes.
        let oversized = format!(
            r#"{{"numRecords":3,"minValues":{{"id":1}},"padding":[{}0]}}"#,
            "0,".repeat(MAX_STATS_BYTES)
        );
        assert!(
            !crate::metrics::column_metrics(
                Some(r#"{"numRecords":3,"minValues":{"id":1},"padding":[0]}"#),
                &schema(),
                &HashMap::new()
            )
            .lower_bounds
            .is_empty(),
            "the same stats without padding give metrics"
        );
        for stats in [
            None,
            Some("not json"),
            Some(r#"{"numRecords":"x"}"#),
            Some(oversized.as_str()),
        ] {
            let m = column_metrics(stats, &schema(), &HashMap::new());
            assert!(
                m.lower_bounds.is_empty() && m.value_counts.is_empty(),
                "{stats:?}"
            );
        }
        // A timestamp without its zone, NaN, a decimal too precise: no bound.
        let ts = serde_json::json!("2024-01-01T10:00:00.000");
        assert_eq!(lower_bound(&PrimitiveType::Timestamptz, &ts), None);
        assert_eq!(
            lower_bound(&PrimitiveType::Double, &serde_json::json!("NaN")),
            None
        );
        let wide = PrimitiveType::Decimal {
            precision: 20,
            scale: 2,
        };
        assert_eq!(lower_bound(&wide, &serde_json::json!(1.5)), None);
        let narrow = PrimitiveType::Decimal {
            precision: 10,
            scale: 1,
        };
        assert_eq!(lower_bound(&narrow, &serde_json::json!(1.25)), None);
    }

    #[test]
    fn columns_with_inexact_bounds_do_not_answer_min_max() {
        let mut properties = HashMap::from([
            (format!("{METRICS_MODE_PREFIX}gone"), "counts".to_string()),
            ("other".to_string(), "kept".to_string()),
        ]);
        set_metrics_modes(&schema(), &mut properties);
        let mut modes: Vec<_> = properties
            .keys()
            .filter_map(|k| k.strip_prefix(METRICS_MODE_PREFIX))
            .collect();
        modes.sort();
        assert_eq!(modes, vec!["at", "name", "point.x"]);
        assert_eq!(properties["other"], "kept");
    }

    #[test]
    fn contradicting_bounds_are_dropped() {
        let stats = r#"{"numRecords":1,"minValues":{"id":9},"maxValues":{"id":1}}"#;
        let m = column_metrics(Some(stats), &schema(), &HashMap::new());
        assert!(m.lower_bounds.is_empty() && m.upper_bounds.is_empty());
    }

    #[test]
    fn a_max_ending_in_the_old_tie_breaker_is_widened() {
        assert_eq!(string_upper_bound("abc").as_deref(), Some("abc"));
        assert_eq!(string_upper_bound("abc\u{FFFD}").as_deref(), Some("abd"));
        assert_eq!(
            string_upper_bound("ab?\u{FFFD}\u{FFFD}").as_deref(),
            Some("ac")
        );
        assert_eq!(
            string_upper_bound("a\u{10FFFF}\u{FFFD}").as_deref(),
            Some("b")
        );
        assert_eq!(string_upper_bound("\u{FFFD}"), None);
        assert_eq!(
            string_upper_bound("\u{D7FF}\u{FFFD}").as_deref(),
            Some("\u{E000}")
        );
    }

    #[test]
    fn decimal_bytes_are_minimal_twos_complement() {
        assert_eq!(decimal_bytes(0), vec![0]);
        assert_eq!(decimal_bytes(127), vec![0x7F]);
        assert_eq!(decimal_bytes(128), vec![0x00, 0x80]);
        assert_eq!(decimal_bytes(-1), vec![0xFF]);
        assert_eq!(decimal_bytes(-129), vec![0xFF, 0x7F]);
    }

    // ---- The property: whatever Delta wrote for a set of values, no value escapes the bounds.

    /// Delta before 3.3 (`truncateMaxStringAgg` with U+FFFD): prefix of `len` UTF-16 units,
    /// extended while the next unit is >= U+FFFD, then U+FFFD. A split surrogate pair turns
    /// into `split` when the string is written out as UTF-8.
    fn delta_old_max(max: &str, len: usize, split: &str) -> String {
        let units: Vec<u16> = max.encode_utf16().collect();
        if units.len() <= len {
            return max.to_string();
        }
        let mut end = len;
        while end < units.len() && units[end] >= 0xFFFD {
            end += 1;
        }
        let prefix: String = char::decode_utf16(units[..end].iter().copied())
            .map(|c| c.map_or_else(|_| split.to_string(), |c| c.to_string()))
            .collect();
        prefix + "\u{FFFD}"
    }

    /// Delta 3.3+: a prefix of whole characters, then the largest code point (a true bound).
    fn delta_new_max(max: &str, len: usize) -> String {
        let chars: Vec<char> = max.chars().collect();
        if chars.len() <= len {
            return max.to_string();
        }
        let mut end = len;
        while end < chars.len() && chars[end] == '\u{10FFFF}' {
            end += 1;
        }
        chars[..end].iter().collect::<String>() + "\u{10FFFF}"
    }

    /// Truncated min: a prefix of `len` UTF-16 units (a split pair written as `split`).
    fn delta_min(min: &str, len: usize, split: &str) -> String {
        let units: Vec<u16> = min.encode_utf16().take(len).collect();
        char::decode_utf16(units)
            .map(|c| c.map_or_else(|_| split.to_string(), |c| c.to_string()))
            .collect()
    }

    fn string_value() -> impl Strategy<Value = String> {
        // Characters around every boundary that matters: ASCII, '?', the surrogate gap,
        // U+FFFD..U+FFFF, supplementary planes, U+10FFFF.
        let c = prop_oneof![
            prop::char::range('a', 'c'),
            Just('?'),
            Just('\u{7F}'),
            Just('\u{D7FF}'),
            Just('\u{E000}'),
            prop::char::range('\u{FFFC}', '\u{FFFF}'),
            Just('\u{1F600}'),
            Just('\u{10FFFF}'),
        ];
        prop::collection::vec(c, 0..8).prop_map(|cs| cs.into_iter().collect())
    }

    proptest! {
        #[test]
        fn string_bounds_hold_for_every_delta_truncation(
            values in prop::collection::vec(string_value(), 1..6),
            len in 0usize..6,
            split in prop_oneof![Just("?"), Just("\u{FFFD}")],
        ) {
            // Spark compares strings as UTF-8 bytes: Rust's str order.
            let min = values.iter().min().unwrap();
            let max = values.iter().max().unwrap();
            let lower = delta_min(min, len, split);
            for written_max in [max.clone(), delta_old_max(max, len, split), delta_new_max(max, len)] {
                let upper = string_upper_bound(&written_max);
                for v in &values {
                    prop_assert!(lower.as_str() <= v.as_str(), "lower {lower:?} > {v:?}");
                    if let Some(upper) = &upper {
                        prop_assert!(v.as_str() <= upper.as_str(), "{v:?} > upper {upper:?} (Delta wrote {written_max:?})");
                    }
                }
            }
        }

        #[test]
        fn timestamp_bounds_hold_after_millisecond_truncation(
            micros in prop::collection::vec(-62_000_000_000_000_000i64..253_000_000_000_000_000, 1..6),
        ) {
            // Delta writes the millisecond the value falls in, formatted with its offset.
            let written = |us: i64| {
                let ms = us.div_euclid(1000);
                let t = DateTime::from_timestamp_millis(ms).unwrap();
                serde_json::json!(t.format("%Y-%m-%dT%H:%M:%S%.3f%:z").to_string())
            };
            let (min, max) = (*micros.iter().min().unwrap(), *micros.iter().max().unwrap());
            let lower = lower_bound(&PrimitiveType::Timestamptz, &written(min)).unwrap();
            let upper = upper_bound(&PrimitiveType::Timestamptz, &written(max)).unwrap();
            for us in micros {
                let v = Datum::timestamptz_micros(us);
                prop_assert!(lower <= v && v <= upper, "{us} outside [{lower}, {upper}]");
            }
        }

        #[test]
        fn float_bounds_hold_after_a_decimal_round_trip(values in prop::collection::vec(any::<f32>().prop_filter("finite", |f| f.is_finite()), 1..6)) {
            // Delta writes a float's shortest decimal text; it is read back as f64 first.
            let min = values.iter().copied().fold(f32::INFINITY, f32::min);
            let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let text = |f: f32| serde_json::from_str::<Value>(&format!("{f:?}")).unwrap();
            let lower = lower_bound(&PrimitiveType::Float, &text(min)).unwrap();
            let upper = upper_bound(&PrimitiveType::Float, &text(max)).unwrap();
            for f in values {
                let v = Datum::float(f);
                prop_assert!(lower <= v && v <= upper, "{f} outside [{lower}, {upper}]");
            }
        }

        #[test]
        fn double_bounds_hold_for_a_column_widened_from_float(values in prop::collection::vec(any::<f32>().prop_filter("finite", |f| f.is_finite()), 1..6)) {
            // Old files: float values, float stats as text; the column is double now.
            let min = values.iter().copied().fold(f32::INFINITY, f32::min);
            let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let text = |f: f32| serde_json::from_str::<Value>(&format!("{f:?}")).unwrap();
            let lower = lower_bound(&PrimitiveType::Double, &text(min)).unwrap();
            let upper = upper_bound(&PrimitiveType::Double, &text(max)).unwrap();
            for f in values {
                let v = Datum::double(f64::from(f));
                prop_assert!(lower <= v && v <= upper, "{f} outside [{lower}, {upper}]");
            }
        }
    }
}
