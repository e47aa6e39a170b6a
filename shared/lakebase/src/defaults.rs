//! Delta column defaults (`allowColumnDefaults`: the field metadata `CURRENT_DEFAULT`, Spark
//! SQL text) as PostgreSQL `DEFAULT` clauses. Only literals are carried over, and only where
//! they mean the same value in PostgreSQL: numbers, booleans, strings, `DATE '…'`,
//! `TIMESTAMP '…'` (for `timestamp` columns only with an explicit offset: Spark reads one
//! without in its session's zone, which the table does not record), `TIMESTAMP_NTZ '…'` and
//! `X'…'`. Anything else (a function call, an expression, a literal of another type) leaves
//! the column without a default, and the sync warns naming the column.

use std::collections::HashMap;

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
    if text.eq_ignore_ascii_case("null") {
        return ColumnDefault::None;
    }
    match literal(text, pg) {
        Some(sql) => ColumnDefault::Literal(sql),
        None => ColumnDefault::NotCarried(text.to_string()),
    }
}

fn literal(text: &str, pg: &PgType) -> Option<String> {
    match pg {
        PgType::Boolean => match text.to_ascii_lowercase().as_str() {
            "true" => Some("true".into()),
            "false" => Some("false".into()),
            _ => None,
        },
        PgType::SmallInt | PgType::Integer | PgType::BigInt => {
            let digits = strip_suffix(text, &["L", "S", "Y"]);
            let n: i64 = digits.parse().ok()?;
            let (min, max) = match pg {
                PgType::SmallInt => (i64::from(i16::MIN), i64::from(i16::MAX)),
                PgType::Integer => (i64::from(i32::MIN), i64::from(i32::MAX)),
                _ => (i64::MIN, i64::MAX),
            };
            (min..=max).contains(&n).then(|| n.to_string())
        }
        PgType::Real | PgType::Double => {
            let number = strip_suffix(text, &["BD", "D", "F"]);
            let value: f64 = plain_number(number, true)?.parse().ok()?;
            let limit = if *pg == PgType::Real {
                f64::from(f32::MAX)
            } else {
                f64::MAX
            };
            (value.is_finite() && value.abs() <= limit).then(|| number.to_string())
        }
        PgType::Numeric { precision, scale } => {
            let number = plain_number(strip_suffix(text, &["BD", "L", "S", "Y"]), false)?;
            let int_digits = number
                .trim_start_matches(['-', '+'])
                .split('.')
                .next()
                .unwrap_or_default()
                .trim_start_matches('0')
                .len();
            (int_digits <= precision.saturating_sub(*scale) as usize).then(|| number.to_string())
        }
        PgType::Text => string(text).map(|s| quote_literal(&s)),
        PgType::Bytea => {
            let hex = typed(text, &["X"])?;
            (hex.len() % 2 == 0 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| format!("{}::bytea", quote_literal(&format!("\\x{hex}"))))
        }
        PgType::Date => {
            let day = typed(text, &["DATE"])?;
            chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d").ok()?;
            Some(format!("DATE {}", quote_literal(&day)))
        }
        PgType::Timestamp => {
            let at = typed(text, &["TIMESTAMP_NTZ", "TIMESTAMP"])?;
            chrono::NaiveDateTime::parse_from_str(
                &at.replacen('T', " ", 1),
                "%Y-%m-%d %H:%M:%S%.f",
            )
            .ok()?;
            Some(format!("TIMESTAMP {}", quote_literal(&at)))
        }
        PgType::Timestamptz => {
            let at = typed(text, &["TIMESTAMP_LTZ", "TIMESTAMP"])?;
            let iso = at.replacen(' ', "T", 1);
            let iso = match iso.strip_suffix(" UTC") {
                Some(utc) => format!("{utc}Z"),
                None => iso,
            };
            chrono::DateTime::parse_from_rfc3339(&iso).ok()?;
            Some(format!("TIMESTAMPTZ {}", quote_literal(&iso)))
        }
        PgType::Jsonb | PgType::Geometry { .. } | PgType::Geography { .. } => None,
    }
}

fn strip_suffix<'a>(text: &'a str, suffixes: &[&str]) -> &'a str {
    suffixes
        .iter()
        .find_map(|s| {
            let cut = text.len().checked_sub(s.len())?;
            (text.is_char_boundary(cut) && text[cut..].eq_ignore_ascii_case(s))
                .then(|| &text[..cut])
        })
        .unwrap_or(text)
}

/// `text` when it is a decimal number (`-1.5`, `.5`, `2.`; with `exponent`, `1e-3` too).
fn plain_number(text: &str, exponent: bool) -> Option<&str> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, power) = match unsigned.split_once(['e', 'E']) {
        Some((m, p)) if exponent => (m, Some(p)),
        Some(_) => return None,
        None => (unsigned, None),
    };
    let digits = mantissa.replacen('.', "", 1);
    let ok = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && power.is_none_or(|p| {
            let p = p.strip_prefix(['-', '+']).unwrap_or(p);
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
        });
    ok.then_some(text)
}

/// The string of a typed literal `<PREFIX> '<string>'` (prefix case-insensitive).
fn typed(text: &str, prefixes: &[&str]) -> Option<String> {
    prefixes.iter().find_map(|prefix| {
        let head = text.get(..prefix.len())?;
        if !head.eq_ignore_ascii_case(prefix) {
            return None;
        }
        let rest = &text[prefix.len()..];
        // X'0a' has no space; DATE '…' may have any.
        string(rest.trim_start())
    })
}

/// A Spark SQL string literal (`'…'` or `"…"`, backslash escapes) as its value; None when
/// `text` is more than one literal or holds a NUL, which PostgreSQL text cannot store.
fn string(text: &str) -> Option<String> {
    let mut chars = text.chars();
    let quote = chars.next().filter(|q| matches!(q, '\'' | '"'))?;
    let mut value = String::new();
    loop {
        match chars.next()? {
            c if c == quote => break,
            '\\' => match chars.next()? {
                'n' => value.push('\n'),
                't' => value.push('\t'),
                'r' => value.push('\r'),
                'b' => value.push('\u{8}'),
                'Z' => value.push('\u{1a}'),
                '%' => value.push_str("\\%"),
                '_' => value.push_str("\\_"),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    value.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                // \0 and octal escapes: a NUL or control characters; left to Spark.
                '0'..='7' => return None,
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    // Adjacent literals ('it' 's') concatenate in Spark: not one literal.
    chars.as_str().trim().is_empty().then_some(value)
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
        assert_eq!(default("X'0aFF'", Bytea), lit(r"E'\\x0aFF'::bytea"));
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
            ("'it' 's'", Text),
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
            ("X'0a0'", Bytea),
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
}
