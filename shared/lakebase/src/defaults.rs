//! Delta column defaults (`allowColumnDefaults`: the field metadata `CURRENT_DEFAULT`, Spark
//! SQL text) as PostgreSQL `DEFAULT` clauses. The text is read by Delta's one reader of
//! defaults ([`lakemirror_delta::defaults`]); this module only renders, and only where the
//! value means the same in PostgreSQL: numbers, booleans, strings without a NUL (which
//! PostgreSQL text cannot hold), `DATE '…'`, `TIMESTAMP '…'` (for `timestamp` columns only
//! with an explicit offset: Spark reads one without in its session's zone, which the table
//! does not record), `TIMESTAMP_NTZ '…'` and `X'…'`. Anything else (a function call, an
//! expression, a literal of another type, a string whose meaning depends on the Spark
//! version) leaves the column without a default, and the sync warns naming the column.

use std::collections::HashMap;

use chrono::{DateTime, Datelike, FixedOffset, NaiveDateTime, Timelike};
use lakemirror_delta::defaults::{self, NumberKind, SparkLiteral};

use crate::postgres::quote_literal;
use crate::types::PgType;

/// What becomes of a column's Delta default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColumnDefault {
    /// None, or `NULL`: no `DEFAULT`.
    None,
    /// A PostgreSQL expression for `DEFAULT`.
    Literal(String),
    /// A Delta default that is not a literal lakemirror carries over (its Spark SQL text).
    NotCarried(String),
}

impl ColumnDefault {
    /// ` DEFAULT <literal>`, or nothing.
    pub fn clause(&self) -> String {
        match self {
            Self::Literal(sql) => format!(" DEFAULT {sql}"),
            _ => String::new(),
        }
    }
}

/// The `CURRENT_DEFAULT` of each top-level column of a Delta `schemaString`, by name.
pub fn current_defaults(schema_string: &str) -> HashMap<String, String> {
    lakemirror_delta::schema::parse_schema(schema_string)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|field| Some((field.name, field.current_default?)))
        .collect()
}

/// The PostgreSQL default of a column of type `pg` whose Delta default is `spark_sql`.
pub fn column_default(spark_sql: Option<&str>, pg: &PgType) -> ColumnDefault {
    let Some(text) = spark_sql.map(str::trim).filter(|t| !t.is_empty()) else {
        return ColumnDefault::None;
    };
    match defaults::parse(text) {
        Some(SparkLiteral::Null) => ColumnDefault::None,
        Some(default) => match literal(&default, pg) {
            Some(sql) => ColumnDefault::Literal(sql),
            None => ColumnDefault::NotCarried(text.to_string()),
        },
        None => ColumnDefault::NotCarried(text.to_string()),
    }
}

/// `default` as a PostgreSQL literal of `pg`, when it is a value of that type.
fn literal(default: &SparkLiteral, pg: &PgType) -> Option<String> {
    use SparkLiteral as S;
    match (pg, default) {
        (PgType::Boolean, S::Boolean(b)) => Some(b.to_string()),
        (PgType::SmallInt | PgType::Integer | PgType::BigInt, S::Number(n)) => {
            let value = n.integer()?;
            let fits = match pg {
                PgType::SmallInt => i16::try_from(value).is_ok(),
                PgType::Integer => i32::try_from(value).is_ok(),
                _ => true,
            };
            fits.then(|| value.to_string())
        }
        // A number PostgreSQL reads to the same float as Spark is written as it was; a
        // double narrowed to a real, or a float widened to a double, as the value Spark's
        // cast gives.
        (PgType::Real, S::Number(n)) => {
            let value = n.float()?;
            Some(match n.kind() {
                NumberKind::Double => value.to_string(),
                _ => n.text().to_string(),
            })
        }
        (PgType::Double, S::Number(n)) => {
            let value = n.double()?;
            Some(match n.kind() {
                NumberKind::Float => value.to_string(),
                _ => n.text().to_string(),
            })
        }
        // PostgreSQL rounds to the scale half away from zero, as Spark's cast does.
        (PgType::Numeric { precision, scale }, S::Number(n)) => {
            let unscaled = n.decimal(*scale)?;
            let limit = 10u128.checked_pow(*precision)?;
            (unscaled.unsigned_abs() < limit).then(|| n.text().to_string())
        }
        (PgType::Text, S::String(s)) => (!s.contains('\0')).then(|| quote_literal(s)),
        (PgType::Bytea, S::Binary(bytes)) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            Some(format!("{}::bytea", quote_literal(&format!("\\x{hex}"))))
        }
        (PgType::Date, S::Date(date)) => (1..=9999).contains(&date.year()).then(|| {
            format!(
                "DATE {}",
                quote_literal(&date.format("%Y-%m-%d").to_string())
            )
        }),
        (PgType::Timestamp, _) => {
            let at = default.wall_clock()?;
            Some(format!(
                "TIMESTAMP {}",
                quote_literal(&wall_clock(&at, ' ')?)
            ))
        }
        (PgType::Timestamptz, _) => {
            let at = default.instant()?;
            Some(format!("TIMESTAMPTZ {}", quote_literal(&instant(&at)?)))
        }
        _ => None,
    }
}

/// `2020-01-01 10:00:00.5` (`separator` between the day and the time): years 1 to 9999,
/// which PostgreSQL reads without an era.
fn wall_clock(at: &NaiveDateTime, separator: char) -> Option<String> {
    if !(1..=9999).contains(&at.year()) {
        return None;
    }
    let micros = at.nanosecond() / 1000;
    let fraction = format!(".{micros:06}");
    let fraction = fraction.trim_end_matches('0').trim_end_matches('.');
    Some(format!(
        "{}{separator}{}{fraction}",
        at.format("%Y-%m-%d"),
        at.format("%H:%M:%S")
    ))
}

/// `2020-01-01T10:00:00+02:00`: the wall-clock time and the offset the default named.
fn instant(at: &DateTime<FixedOffset>) -> Option<String> {
    Some(format!(
        "{}{}",
        wall_clock(&at.naive_local(), 'T')?,
        at.format("%:z")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default(text: &str, pg: PgType) -> ColumnDefault {
        column_default(Some(text), &pg)
    }

    fn lit(sql: &str) -> ColumnDefault {
        ColumnDefault::Literal(sql.into())
    }

    #[test]
    fn spark_literals_become_postgres_literals_of_the_column_type() {
        use PgType::*;
        assert_eq!(default("16", Integer), lit("16"));
        assert_eq!(default(" -7L ", BigInt), lit("-7"));
        assert_eq!(default("3Y", SmallInt), lit("3"));
        assert_eq!(default("TRUE", Boolean), lit("true"));
        assert_eq!(default("1.5", Double), lit("1.5"));
        assert_eq!(default("-2.5e-3D", Double), lit("-2.5e-3"));
        assert_eq!(default("1.5F", Real), lit("1.5"));
        let money = Numeric {
            precision: 10,
            scale: 2,
        };
        assert_eq!(
            default("12345678.991BD", money.clone()),
            lit("12345678.991")
        );
        assert_eq!(default("'abc'", Text), lit("E'abc'"));
        assert_eq!(
            default(r"'it\'s \\ a\ttab'", Text),
            lit("E'it''s \\\\ a\ttab'")
        );
        assert_eq!(default("\"dq\"", Text), lit("E'dq'"));
        assert_eq!(default(r"'\u00e9'", Text), lit("E'é'"));
        assert_eq!(
            default("DATE '2020-01-01'", Date),
            lit("DATE E'2020-01-01'")
        );
        assert_eq!(
            default("TIMESTAMP_NTZ '2020-01-01 10:00:00.5'", Timestamp),
            lit("TIMESTAMP E'2020-01-01 10:00:00.5'")
        );
        assert_eq!(
            default("TIMESTAMP '2020-01-01 10:00:00+02:00'", Timestamptz),
            lit("TIMESTAMPTZ E'2020-01-01T10:00:00+02:00'")
        );
        assert_eq!(default("X'0aFF'", Bytea), lit(r"E'\\x0aff'::bytea"));
        // Spark pads an odd count of hex digits with a leading 0 (AstBuilder.visitTypeConstructor).
        assert_eq!(default("X'0a0'", Bytea), lit(r"E'\\x00a0'::bytea"));
        // Adjacent strings are one (SqlBaseParser.g4, `stringLit+`).
        assert_eq!(default("'it' 's'", Text), lit("E'its'"));
        assert_eq!(default("NULL", Text), ColumnDefault::None);
        assert_eq!(column_default(None, &Text), ColumnDefault::None);
    }

    #[test]
    fn anything_but_a_literal_of_the_type_is_not_carried_over() {
        use PgType::*;
        let cases = [
            ("current_timestamp()", Timestamptz),
            // Spark reads it in the session's zone, which the table does not record.
            ("TIMESTAMP '2020-01-01 10:00:00'", Timestamptz),
            ("1 + 1", Integer),
            ("70000", SmallInt),
            ("99999999999", Integer),
            ("1.5", Integer),
            ("'16'", Integer),
            ("16", Text),
            ("'it''s'", Text),
            ("'a\\0b'", Text),
            ("'unclosed", Text),
            ("DATE '2020-13-01'", Date),
            ("'2020-01-01'", Date),
            ("1e400", Double),
            ("1e39", Real),
            (
                "123456789.5",
                Numeric {
                    precision: 10,
                    scale: 2,
                },
            ),
            (
                "1e3",
                Numeric {
                    precision: 10,
                    scale: 2,
                },
            ),
            ("X'0g'", Bytea),
            ("'{}'", Jsonb),
            ("uuid()", Text),
        ];
        for (text, pg) in cases {
            assert_eq!(
                default(text, pg.clone()),
                ColumnDefault::NotCarried(text.trim().into()),
                "{text} as {pg:?}"
            );
        }
    }

    #[test]
    fn current_defaults_come_from_the_field_metadata() {
        // allow_column_defaults of delta-features: b has EXISTS_DEFAULT and CURRENT_DEFAULT 16.
        let schema = r#"{"type":"struct","fields":[{"name":"a","type":"integer","nullable":true,"metadata":{}},{"name":"b","type":"integer","nullable":true,"metadata":{"EXISTS_DEFAULT":"16","CURRENT_DEFAULT":"16"}}]}"#;
        assert_eq!(
            current_defaults(schema),
            HashMap::from([("b".to_string(), "16".to_string())])
        );
    }

    /// One test table of defaults through both targets: the Spark SQL text, the Delta
    /// column type, the mirror's Iceberg literal, and lakebase's PostgreSQL `DEFAULT`.
    #[test]
    fn one_spark_default_through_the_iceberg_and_the_postgres_renderer() {
        use iceberg::spec::{Literal, PrimitiveLiteral as P};
        use lakemirror_delta::schema::DeltaType;
        use lakemirror_plan::schema::default_literal;

        let no = ColumnDefault::NotCarried;
        let none = ColumnDefault::None;
        let s = |text: &str| P::String(text.into());
        #[rustfmt::skip]
        let rows: Vec<(&str, &str, Option<P>, ColumnDefault)> = vec![
            // Up to Spark 4.0 `its`, since SPARK-52545 `it's`: neither target guesses.
            ("'it''s'", "string", None, no("'it''s'".into())),
            (r"'it\'s'", "string", Some(s("it's")), lit("E'it''s'")),
            ("'it' 's'", "string", Some(s("its")), lit("E'its'")),
            (r#""a\"b""#, "string", Some(s("a\"b")), lit("E'a\"b'")),
            (r"'\u0041'", "string", Some(s("A")), lit("E'A'")),
            (r"'\101'", "string", Some(s("A")), lit("E'A'")),
            (r"'50\%'", "string", Some(s(r"50\%")), lit(r"E'50\\%'")),
            (r"R'a\nb'", "string", Some(s(r"a\nb")), lit(r"E'a\\nb'")),
            // Iceberg strings hold a NUL; PostgreSQL text cannot.
            (r"'a\0b'", "string", Some(s("a\0b")), no(r"'a\0b'".into())),
            ("X'0A1b'", "binary", Some(P::Binary(vec![0x0a, 0x1b])), lit(r"E'\\x0a1b'::bytea")),
            ("DATE '2024-01-02'", "date", Some(P::Int(19_724)), lit("DATE E'2024-01-02'")),
            ("DATE'2024-1-2'", "date", Some(P::Int(19_724)), lit("DATE E'2024-01-02'")),
            // The mirror states no timestamp default yet (schema.rs, `default_literal`).
            ("TIMESTAMP '2020-01-01 10:00:00+02:00'", "timestamp", None,
             lit("TIMESTAMPTZ E'2020-01-01T10:00:00+02:00'")),
            ("TIMESTAMP '2020-01-01 10:00:00'", "timestamp", None,
             no("TIMESTAMP '2020-01-01 10:00:00'".into())),
            ("TIMESTAMP_NTZ '2020-01-01 10:00:00.5'", "timestamp_ntz", None,
             lit("TIMESTAMP E'2020-01-01 10:00:00.5'")),
            ("1Y", "byte", Some(P::Int(1)), lit("1")),
            ("2S", "short", Some(P::Int(2)), lit("2")),
            ("70000", "short", None, no("70000".into())),
            ("70000S", "integer", None, no("70000S".into())),
            ("3L", "long", Some(P::Long(3)), lit("3")),
            ("5L", "integer", Some(P::Int(5)), lit("5")),
            ("'16'", "integer", None, no("'16'".into())),
            ("1.5", "integer", None, no("1.5".into())),
            ("1.5BD", "decimal(3,1)", Some(P::Int128(15)), lit("1.5")),
            ("1.555", "decimal(5,2)", Some(P::Int128(156)), lit("1.555")),
            ("999.995", "decimal(5,2)", None, no("999.995".into())),
            ("1e3BD", "decimal(6,2)", Some(P::Int128(100_000)), lit("1e3")),
            ("1e3", "decimal(6,2)", None, no("1e3".into())),
            ("1e3D", "double", Some(P::Double(1000.0.into())), lit("1e3")),
            ("0.1F", "double", Some(P::Double(f64::from(0.1f32).into())), lit("0.10000000149011612")),
            ("-0.0F", "float", Some(P::Float((-0.0).into())), lit("-0.0")),
            ("0.1D", "float", Some(P::Float(0.1.into())), lit("0.1")),
            ("1e39", "float", None, no("1e39".into())),
            ("true", "boolean", Some(P::Boolean(true)), lit("true")),
            ("NULL", "string", None, none.clone()),
            ("null", "integer", None, none.clone()),
            ("current_date()", "date", None, no("current_date()".into())),
            ("1 + 1", "integer", None, no("1 + 1".into())),
        ];
        for (text, delta, iceberg, postgres) in rows {
            let parsed = lakemirror_delta::defaults::parse(text);
            let mirrored = parsed
                .filter(|d| *d != SparkLiteral::Null)
                .and_then(|d| default_literal(&d, delta));
            assert_eq!(
                mirrored,
                iceberg.map(Literal::Primitive),
                "{text} as {delta} in Iceberg"
            );
            let pg = crate::types::pg_type(
                &DeltaType::Primitive(delta.into()),
                "c",
                &crate::types::TargetTypes::default(),
            );
            assert_eq!(
                pg.map(|pg| column_default(Some(text), &pg)),
                Ok(postgres),
                "{text} as {delta} in PostgreSQL"
            );
        }
        // -0.0 keeps its sign (Iceberg's float literals compare -0.0 equal to 0.0).
        let zero =
            lakemirror_delta::defaults::parse("-0.0F").and_then(|d| default_literal(&d, "float"));
        assert!(matches!(zero, Some(Literal::Primitive(P::Float(f))) if f.is_sign_negative()));
    }
}
