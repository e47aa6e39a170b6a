//! Delta column types -> PostgreSQL column types and the Arrow types rows are read as.

use arrow_schema::{DataType, TimeUnit};

use lakemirror_delta::schema::DeltaType;
use lakemirror_plan::schema::decimal_precision_scale;

/// How a Delta column is stored in PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PgType {
    Boolean,
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    Numeric {
        precision: u32,
        scale: u32,
    },
    Text,
    Bytea,
    Date,
    /// `timestamp with time zone`, from Delta `timestamp`.
    Timestamptz,
    /// `timestamp without time zone`, from Delta `timestamp_ntz`.
    Timestamp,
    /// Structs, arrays and maps.
    Jsonb,
}

impl PgType {
    /// The type as written in `CREATE TABLE`.
    pub fn sql(&self) -> String {
        match self {
            Self::Boolean => "boolean".into(),
            Self::SmallInt => "smallint".into(),
            Self::Integer => "integer".into(),
            Self::BigInt => "bigint".into(),
            Self::Real => "real".into(),
            Self::Double => "double precision".into(),
            Self::Numeric { precision, scale } => format!("numeric({precision},{scale})"),
            Self::Text => "text".into(),
            Self::Bytea => "bytea".into(),
            Self::Date => "date".into(),
            Self::Timestamptz => "timestamp with time zone".into(),
            Self::Timestamp => "timestamp without time zone".into(),
            Self::Jsonb => "jsonb".into(),
        }
    }

    /// The Arrow type values are cast to before they are encoded (None: nested, kept as
    /// read and written as JSON).
    pub fn arrow(&self) -> Option<DataType> {
        Some(match self {
            Self::Boolean => DataType::Boolean,
            Self::SmallInt => DataType::Int16,
            Self::Integer => DataType::Int32,
            Self::BigInt => DataType::Int64,
            Self::Real => DataType::Float32,
            Self::Double => DataType::Float64,
            Self::Numeric { precision, scale } => {
                DataType::Decimal128(u8::try_from(*precision).ok()?, i8::try_from(*scale).ok()?)
            }
            Self::Text => DataType::Utf8,
            Self::Bytea => DataType::Binary,
            Self::Date => DataType::Date32,
            Self::Timestamptz => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
            Self::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            Self::Jsonb => return None,
        })
    }
}

/// The PostgreSQL type of a Delta column (DESIGN.md: long->bigint, int->integer,
/// short/byte->smallint, float->real, double->double precision, decimal->numeric, string->text,
/// binary->bytea, boolean, date, timestamp->timestamptz, timestamp_ntz->timestamp, nested->jsonb).
pub fn pg_type(delta: &DeltaType, column: &str) -> Result<PgType, String> {
    let DeltaType::Primitive(name) = delta else {
        return Ok(PgType::Jsonb);
    };
    Ok(match name.as_str() {
        "boolean" => PgType::Boolean,
        "byte" | "short" => PgType::SmallInt,
        "integer" => PgType::Integer,
        "long" => PgType::BigInt,
        "float" => PgType::Real,
        "double" => PgType::Double,
        "string" => PgType::Text,
        "binary" => PgType::Bytea,
        "date" => PgType::Date,
        "timestamp" => PgType::Timestamptz,
        "timestamp_ntz" => PgType::Timestamp,
        other => match decimal_precision_scale(other) {
            Some((precision, scale)) => PgType::Numeric { precision, scale },
            None => {
                return Err(format!(
                    "column {column}: Delta type {other} has no PostgreSQL mapping"
                ));
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str) -> DeltaType {
        DeltaType::Primitive(name.into())
    }

    #[test]
    fn every_delta_type_maps() {
        let cases = [
            ("boolean", "boolean"),
            ("byte", "smallint"),
            ("short", "smallint"),
            ("integer", "integer"),
            ("long", "bigint"),
            ("float", "real"),
            ("double", "double precision"),
            ("decimal(38,18)", "numeric(38,18)"),
            ("string", "text"),
            ("binary", "bytea"),
            ("date", "date"),
            ("timestamp", "timestamp with time zone"),
            ("timestamp_ntz", "timestamp without time zone"),
        ];
        for (delta, sql) in cases {
            let ty = pg_type(&p(delta), "c").unwrap();
            assert_eq!(ty.sql(), sql, "{delta}");
            assert!(ty.arrow().is_some(), "{delta}");
        }
        let nested = DeltaType::Array {
            element: Box::new(p("long")),
            contains_null: true,
        };
        assert_eq!(pg_type(&nested, "c").unwrap(), PgType::Jsonb);
        let err = pg_type(&p("interval"), "when").unwrap_err();
        assert!(err.contains("when") && err.contains("interval"), "{err}");
    }
}
