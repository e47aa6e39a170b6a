//! Delta partition values (strings in `add.partitionValues`) -> typed Iceberg literals.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, Offset, TimeZone};
use iceberg::spec::{Literal, PrimitiveLiteral, PrimitiveType};

/// Delta table property: the time zone in which a `timestamp` partition column's values
/// without an offset were written (older Spark wrote them in the session time zone). UTC
/// when not set, as the Delta protocol has it now.
pub const PARTITION_TIMEZONE_PROPERTY: &str = "lakemirror.partition-values.timezone";

/// Whether `name` is a valid Avro name (`[A-Za-z_][A-Za-z0-9_]*`): a partition field's
/// name is a record field name in every manifest's Avro schema, and DuckDB and the Apache
/// Avro libraries refuse a file whose schema holds another.
pub fn is_avro_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The partition field name of a partition column: the column's own name when it is a valid
/// Avro name, else Java Iceberg's `AvroSchemaUtil.sanitize` of it (a leading digit gets `_`
/// before it, any other character becomes `_x` and its UTF-16 code in upper-case hex:
/// `Company Very Short` -> `Company_x20Very_x20Short`, `1st` -> `_1st`), except that a
/// letter outside ASCII is sanitized too (`région` -> `r_xE9gion`), as Avro allows only
/// ASCII. Engines filter by the source column, never by this name.
pub fn partition_field_name(column: &str) -> String {
    if is_avro_name(column) {
        return column.to_string();
    }
    let mut name = String::with_capacity(column.len() + 8);
    for (i, c) in column.chars().enumerate() {
        let valid = c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit());
        if valid {
            name.push(c);
        } else if c.is_ascii_digit() {
            name.push('_');
            name.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                name.push_str(&format!("_x{unit:X}"));
            }
        }
    }
    if name.is_empty() {
        name.push('_');
    }
    name
}

/// The zone of `timestamp` partition values written without an offset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PartitionZone {
    Fixed(FixedOffset),
    Named(chrono_tz::Tz),
}

impl PartitionZone {
    /// An IANA zone (`Europe/Berlin`), `UTC`, or a fixed offset (`+02:00`).
    pub fn parse(value: &str) -> Result<Self, String> {
        let value = value.trim();
        if let Ok(offset) = value.parse::<FixedOffset>() {
            return Ok(Self::Fixed(offset));
        }
        value.parse::<chrono_tz::Tz>().map(Self::Named).map_err(|_| {
            format!(
                "{PARTITION_TIMEZONE_PROPERTY}={value:?} is not a time zone: use an IANA name such as Europe/Berlin, UTC, or an offset such as +02:00"
            )
        })
    }

    /// Microseconds since the epoch of a wall-clock time in this zone. A time that occurs
    /// twice (clocks set back) is the earlier; one that never occurs (clocks set forward) is
    /// read with the offset before the change, as Java's `ZonedDateTime` does.
    fn micros(&self, local: NaiveDateTime) -> i64 {
        let offset_seconds = match self {
            Self::Fixed(offset) => offset.local_minus_utc(),
            Self::Named(tz) => match tz.from_local_datetime(&local).earliest() {
                Some(t) => t.offset().fix().local_minus_utc(),
                None => tz
                    .offset_from_utc_datetime(&(local - chrono::Duration::days(1)))
                    .fix()
                    .local_minus_utc(),
            },
        };
        local.and_utc().timestamp_micros() - i64::from(offset_seconds) * 1_000_000
    }
}

/// Parses one partition value of a column of Iceberg type `ty`. `None` (JSON null) is a
/// null partition; so is an empty string, for every type (as the Delta protocol says).
/// `zone` is where `timestamp` (with time zone) values without an offset were written.
pub fn partition_literal(
    column: &str,
    ty: &PrimitiveType,
    value: Option<&str>,
    zone: Option<&PartitionZone>,
) -> Result<Option<Literal>, String> {
    let Some(raw) = value else { return Ok(None) };
    // The protocol: "an empty string for any type translates to a null partition value".
    if raw.is_empty() {
        return Ok(None);
    }
    let bad =
        |what: &str| format!("partition column {column}: value {raw:?} is not a valid {what}");
    let literal = match ty {
        PrimitiveType::String => Literal::string(raw),
        PrimitiveType::Int => Literal::int(raw.parse::<i32>().map_err(|_| bad("integer"))?),
        PrimitiveType::Long => Literal::long(raw.parse::<i64>().map_err(|_| bad("long"))?),
        PrimitiveType::Float => Literal::float(raw.parse::<f32>().map_err(|_| bad("float"))?),
        PrimitiveType::Double => Literal::double(raw.parse::<f64>().map_err(|_| bad("double"))?),
        PrimitiveType::Boolean => match raw.to_ascii_lowercase().as_str() {
            "true" => Literal::bool(true),
            "false" => Literal::bool(false),
            _ => return Err(bad("boolean")),
        },
        PrimitiveType::Binary => Literal::binary(raw.as_bytes().to_vec()),
        PrimitiveType::Date => Literal::date(date_days(raw).ok_or_else(|| bad("date"))?),
        PrimitiveType::Timestamp => {
            Literal::timestamp(timestamp_micros(raw, None).ok_or_else(|| bad("timestamp"))?)
        }
        PrimitiveType::Timestamptz => {
            Literal::timestamptz(timestamp_micros(raw, zone).ok_or_else(|| bad("timestamp"))?)
        }
        PrimitiveType::Decimal { scale, .. } => {
            Literal::decimal(unscaled_decimal(raw, *scale).ok_or_else(|| bad("decimal"))?)
        }
        other => {
            return Err(format!(
                "partition column {column}: type {other} cannot be a partition"
            ));
        }
    };
    Ok(Some(literal))
}

/// Days since 1970-01-01 of a Delta partition date (`2024-01-01`, `-0001-01-01`: any year
/// Delta allows).
pub fn date_days(raw: &str) -> Option<i32> {
    let date = NaiveDate::parse_from_str(raw, "%Y-%m-%d").ok()?;
    i32::try_from(date.signed_duration_since(NaiveDate::default()).num_days()).ok()
}

/// Microseconds since the epoch of a Delta partition timestamp (see [`timestamp_micros`]),
/// written without an offset in UTC; any year Delta allows (`-0001-01-01 00:00:00`).
pub fn partition_timestamp_micros(raw: &str) -> Option<i64> {
    timestamp_micros(raw, None)
}

/// Microseconds since the epoch for Delta's partition timestamp forms:
/// `2024-01-01 10:00:00[.ffffff]` (in `zone`, UTC when None) and ISO-8601
/// `2024-01-01T10:00:00.000000Z` (its own offset).
fn timestamp_micros(raw: &str, zone: Option<&PartitionZone>) -> Option<i64> {
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Some(t.timestamp_micros());
    }
    [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%d",
    ]
    .iter()
    .find_map(|f| {
        NaiveDateTime::parse_from_str(raw, f).ok().or_else(|| {
            NaiveDate::parse_from_str(raw, f)
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
        })
    })
    .map(|t| match zone {
        Some(zone) => zone.micros(t),
        None => t.and_utc().timestamp_micros(),
    })
}

/// `"-12.5"` at scale 2 -> -1250. Refuses values with more fractional digits than the scale.
pub(crate) fn unscaled_decimal(raw: &str, scale: u32) -> Option<i128> {
    let (negative, digits) = match raw.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, raw.strip_prefix('+').unwrap_or(raw)),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    let frac_part = frac_part.trim_end_matches('0');
    if frac_part.len() > scale as usize || (int_part.is_empty() && frac_part.is_empty()) {
        return None;
    }
    let padded = format!("{int_part}{frac_part:0<width$}", width = scale as usize);
    if !padded.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i128 = if padded.is_empty() {
        0
    } else {
        padded.parse().ok()?
    };
    Some(if negative { -value } else { value })
}

/// The primitive value of a literal, for tests and summaries.
pub fn primitive_of(literal: &Literal) -> Option<&PrimitiveLiteral> {
    match literal {
        Literal::Primitive(p) => Some(p),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_field_names_are_valid_avro_names_as_java_iceberg_makes_them() {
        for (column, name) in [
            ("region", "region"),
            ("Company Very Short", "Company_x20Very_x20Short"),
            ("1st", "_1st"),
            ("a.b", "a_x2Eb"),
            ("order-date", "order_x2Ddate"),
            ("région", "r_xE9gion"),
            ("_x", "_x"),
            ("", "_"),
        ] {
            assert_eq!(partition_field_name(column), name, "{column}");
            assert!(is_avro_name(&partition_field_name(column)), "{column}");
        }
        assert!(
            !is_avro_name("Company Very Short") && !is_avro_name("1st") && !is_avro_name("région")
        );
    }

    fn parse(ty: PrimitiveType, raw: Option<&str>) -> Option<PrimitiveLiteral> {
        partition_literal("c", &ty, raw, None)
            .unwrap()
            .map(|l| primitive_of(&l).unwrap().clone())
    }

    #[test]
    fn typed_values() {
        assert_eq!(
            parse(PrimitiveType::String, Some("A/A")),
            Some(PrimitiveLiteral::String("A/A".into()))
        );
        assert_eq!(parse(PrimitiveType::String, Some("")), None);
        assert_eq!(
            parse(PrimitiveType::Int, Some("-3")),
            Some(PrimitiveLiteral::Int(-3))
        );
        assert_eq!(
            parse(PrimitiveType::Long, Some("9000000000")),
            Some(PrimitiveLiteral::Long(9_000_000_000))
        );
        assert_eq!(
            parse(PrimitiveType::Boolean, Some("true")),
            Some(PrimitiveLiteral::Boolean(true))
        );
        assert_eq!(
            parse(PrimitiveType::Date, Some("2021-01-02")),
            Some(PrimitiveLiteral::Int(18629))
        );
        assert_eq!(parse(PrimitiveType::Int, Some("")), None);
        assert_eq!(parse(PrimitiveType::Date, None), None);
    }

    #[test]
    fn timestamps_in_both_delta_forms_are_utc_micros() {
        let micros = 1_704_103_200_000_000; // 2024-01-01T10:00:00Z
        for raw in [
            "2024-01-01 10:00:00",
            "2024-01-01 10:00:00.000000",
            "2024-01-01T10:00:00.000000Z",
        ] {
            assert_eq!(
                parse(PrimitiveType::Timestamptz, Some(raw)),
                Some(PrimitiveLiteral::Long(micros)),
                "{raw}"
            );
        }
        assert_eq!(
            parse(PrimitiveType::Timestamp, Some("2024-01-01 10:00:00.5")),
            Some(PrimitiveLiteral::Long(micros + 500_000))
        );
    }

    #[test]
    fn timestamps_without_an_offset_are_read_in_the_tables_partition_zone() {
        let at = |zone: &str, raw: &str| {
            let zone = PartitionZone::parse(zone).unwrap();
            match partition_literal("ts", &PrimitiveType::Timestamptz, Some(raw), Some(&zone)) {
                Ok(Some(Literal::Primitive(PrimitiveLiteral::Long(micros)))) => micros,
                other => panic!("{other:?}"),
            }
        };
        let utc_ten = 1_704_103_200_000_000; // 2024-01-01T10:00:00Z
        assert_eq!(at("UTC", "2024-01-01 10:00:00"), utc_ten);
        assert_eq!(at("+02:00", "2024-01-01 10:00:00"), utc_ten - 7_200_000_000);
        // Berlin is UTC+1 in winter, UTC+2 in summer
        assert_eq!(
            at("Europe/Berlin", "2024-01-01 10:00:00"),
            utc_ten - 3_600_000_000
        );
        let july = at("Europe/Berlin", "2024-07-01 10:00:00");
        assert_eq!(at("UTC", "2024-07-01 08:00:00"), july);
        // a value with its own offset keeps it
        assert_eq!(at("Europe/Berlin", "2024-01-01T10:00:00.000000Z"), utc_ten);
        // 02:30 on 2024-03-31 never happened in Berlin: read at the offset before (UTC+1)
        assert_eq!(
            at("Europe/Berlin", "2024-03-31 02:30:00"),
            at("UTC", "2024-03-31 01:30:00")
        );
        assert!(
            PartitionZone::parse("Mars/Olympus")
                .unwrap_err()
                .contains("IANA")
        );
    }

    #[test]
    fn decimals_scale_exactly() {
        let dec = |raw| {
            parse(
                PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2,
                },
                Some(raw),
            )
        };
        assert_eq!(dec("12.5"), Some(PrimitiveLiteral::Int128(1250)));
        assert_eq!(dec("-0.01"), Some(PrimitiveLiteral::Int128(-1)));
        assert_eq!(dec("7"), Some(PrimitiveLiteral::Int128(700)));
        assert!(
            partition_literal(
                "c",
                &PrimitiveType::Decimal {
                    precision: 10,
                    scale: 2
                },
                Some("1.234"),
                None
            )
            .is_err()
        );
    }

    #[test]
    fn bad_values_name_the_column() {
        let err = partition_literal("year", &PrimitiveType::Int, Some("abc"), None).unwrap_err();
        assert!(err.contains("year") && err.contains("abc"), "{err}");
    }
}
