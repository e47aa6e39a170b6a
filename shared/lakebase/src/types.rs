//! Delta column types -> PostgreSQL column types and the Arrow types rows are read as.

use arrow_schema::{DataType, TimeUnit};

use crate::geo::{GeoKind, parse_geo_type, srid};
use crate::json::VARIANT;
use crate::postgres::quote_ident;
use lakemirror_delta::schema::DeltaType;
use lakemirror_plan::schema::decimal_precision_scale;

/// What the target database holds beyond PostgreSQL's own types.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetTypes {
    /// The schema of the `postgis` extension, when the database has it installed.
    pub postgis_schema: Option<String>,
}

/// How a table's geospatial columns are stored (the report's `geospatial`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GeoStorage {
    /// PostGIS `geometry` / `geography`.
    Postgis,
    /// The WKB bytes in `bytea` (the database has no PostGIS).
    WkbBytea,
}

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
    /// Structs, arrays, maps and variants.
    Jsonb,
    /// PostGIS `geometry`, from Delta `geometry(crs)` (the extension's schema; the CRS's
    /// SRID, when it has one, which every value carries).
    Geometry {
        schema: String,
        srid: Option<i32>,
    },
    /// PostGIS `geography`, from Delta `geography(crs, algorithm)`.
    Geography {
        schema: String,
        srid: Option<i32>,
    },
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
            Self::Geometry { schema, .. } => postgis_sql(schema, "geometry"),
            Self::Geography { schema, .. } => postgis_sql(schema, "geography"),
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
            Self::Geometry { .. } | Self::Geography { .. } => DataType::Binary,
            Self::Jsonb => return None,
        })
    }
}

/// `"public".geometry`: qualified, as the extension may live in a schema that is not on the
/// search path. No type modifier: PostGIS's (`geometry(Geometry,4326)`) fixes the
/// dimensions (XY only) and would refuse the XYZ, XYM and XYZM values a Delta column may
/// hold beside XY ones; every value carries the SRID instead (EWKB, see `geo::with_srid`).
fn postgis_sql(schema: &str, name: &str) -> String {
    format!("{}.{name}", quote_ident(schema))
}

/// The PostgreSQL type of a Delta column (DESIGN.md: long->bigint, int->integer,
/// short/byte->smallint, float->real, double->double precision, decimal->numeric, string->text,
/// binary->bytea, boolean, date, timestamp->timestamptz, timestamp_ntz->timestamp, nested->jsonb;
/// variant->jsonb; geometry/geography->PostGIS's, or WKB in bytea where `target` has no
/// PostGIS).
pub fn pg_type(delta: &DeltaType, column: &str, target: &TargetTypes) -> Result<PgType, String> {
    let DeltaType::Primitive(name) = delta else {
        return Ok(PgType::Jsonb);
    };
    if let Some(geo) = parse_geo_type(name) {
        let srid = srid(&geo.crs);
        return Ok(match (&target.postgis_schema, geo.kind) {
            (None, _) => PgType::Bytea,
            (Some(schema), GeoKind::Geometry) => PgType::Geometry {
                schema: schema.clone(),
                srid,
            },
            (Some(schema), GeoKind::Geography) => PgType::Geography {
                schema: schema.clone(),
                srid,
            },
        });
    }
    Ok(match name.as_str() {
        VARIANT => PgType::Jsonb,
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
            let ty = pg_type(&p(delta), "c", &TargetTypes::default()).unwrap();
            assert_eq!(ty.sql(), sql, "{delta}");
            assert!(ty.arrow().is_some(), "{delta}");
        }
        let nested = DeltaType::Array {
            element: Box::new(p("long")),
            contains_null: true,
        };
        assert_eq!(
            pg_type(&nested, "c", &TargetTypes::default()).unwrap(),
            PgType::Jsonb
        );
        let err = pg_type(&p("interval"), "when", &TargetTypes::default()).unwrap_err();
        assert!(err.contains("when") && err.contains("interval"), "{err}");
    }

    #[test]
    fn variants_are_jsonb_and_geo_types_postgis_or_wkb() {
        let none = TargetTypes::default();
        let postgis = TargetTypes {
            postgis_schema: Some("gis".into()),
        };
        assert_eq!(pg_type(&p("variant"), "v", &none).unwrap(), PgType::Jsonb);
        let cases = [
            ("geometry(OGC:CRS84)", "\"gis\".geometry", Some(4326)),
            (
                "geography(OGC:CRS84, spherical)",
                "\"gis\".geography",
                Some(4326),
            ),
            ("geometry(EPSG:3857)", "\"gis\".geometry", Some(3857)),
            ("geometry(projjson:my_crs)", "\"gis\".geometry", None),
        ];
        for (delta, sql, srid) in cases {
            let ty = pg_type(&p(delta), "g", &postgis).unwrap();
            assert_eq!(ty.sql(), sql, "{delta}");
            assert!(
                matches!(ty, PgType::Geometry { srid: s, .. } | PgType::Geography { srid: s, .. } if s == srid),
                "{delta}"
            );
            assert_eq!(ty.arrow(), Some(DataType::Binary), "{delta}");
            assert_eq!(
                pg_type(&p(delta), "g", &none).unwrap(),
                PgType::Bytea,
                "{delta}"
            );
        }
    }
}
