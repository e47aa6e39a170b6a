//! Delta's geospatial types (`geometry(<crs>)`, `geography(<crs>, <algorithm>)`, the
//! `geospatial` table feature; values are WKB in Parquet's GEOMETRY / GEOGRAPHY logical
//! types) as PostGIS `geometry` / `geography` with an SRID, or as WKB `bytea` where the
//! target database has no PostGIS.
//!
//! CRS to SRID: `OGC:CRS84` is 4326 (WGS 84, longitude first, as WKB and PostGIS order
//! coordinates), `OGC:CRS83` 4269 (NAD83) and `OGC:CRS27` 4267 (NAD27), their EPSG
//! equivalents; `EPSG:<n>` and `SRID:<n>` are `n`. Any other CRS (another authority, a
//! `projjson:` table property) has no SRID PostGIS is sure to know: the column gets none
//! (SRID 0; PostGIS's `geography` then takes WGS 84, as it does for any value without one).
//! PostGIS computes `geography` on the spheroid whatever edge algorithm Delta names: the
//! algorithm is not carried over.

/// Geometry (planar edges) or geography (edges on the earth).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeoKind {
    Geometry,
    Geography,
}

/// A Delta geospatial type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeoType {
    pub kind: GeoKind,
    pub crs: String,
    /// The edge interpolation algorithm of a geography (`spherical`, `vincenty`, ...).
    pub algorithm: Option<String>,
}

/// The CRS a geospatial type without one has (Parquet's default).
const DEFAULT_CRS: &str = "OGC:CRS84";

/// A Delta type name as a geospatial type, when it is one: `geometry(OGC:CRS84)`,
/// `geography(OGC:CRS84, spherical)` (or bare `geometry` / `geography`).
pub fn parse_geo_type(name: &str) -> Option<GeoType> {
    let name = name.trim();
    let (kind, rest) = if let Some(rest) = strip_prefix_ignore_case(name, "geometry") {
        (GeoKind::Geometry, rest)
    } else {
        (
            GeoKind::Geography,
            strip_prefix_ignore_case(name, "geography")?,
        )
    };
    let rest = rest.trim();
    if rest.is_empty() {
        return Some(GeoType {
            kind,
            crs: DEFAULT_CRS.into(),
            algorithm: None,
        });
    }
    let params = rest.strip_prefix('(')?.strip_suffix(')')?;
    let (crs, algorithm) = match (kind, params.rsplit_once(',')) {
        (GeoKind::Geography, Some((crs, algorithm))) => {
            (crs.trim(), Some(algorithm.trim().to_string()))
        }
        _ => (params.trim(), None),
    };
    Some(GeoType {
        kind,
        crs: if crs.is_empty() { DEFAULT_CRS } else { crs }.to_string(),
        algorithm,
    })
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// The PostGIS SRID of a Delta CRS, when it has one (the module's doc says which).
pub fn srid(crs: &str) -> Option<i32> {
    let (authority, code) = crs.trim().split_once(':')?;
    let authority = authority.to_ascii_uppercase();
    match (authority.as_str(), code.to_ascii_uppercase().as_str()) {
        ("OGC", "CRS84") => Some(4326),
        ("OGC", "CRS83") => Some(4269),
        ("OGC", "CRS27") => Some(4267),
        ("EPSG" | "SRID", code) => code
            .parse::<i32>()
            .ok()
            // PostGIS's SRID range (SRID_MAXIMUM).
            .filter(|n| (1..=999_999).contains(n)),
        _ => None,
    }
}

/// EWKB's flag in the geometry type word: an SRID follows it.
const EWKB_SRID_FLAG: u32 = 0x2000_0000;

/// WKB with `srid` set, as PostGIS's EWKB (which `geometry_recv` and `geography_recv` read):
/// the byte order, the type word with the SRID flag, the SRID, then the rest unchanged. A
/// value that is EWKB with an SRID already gets `srid` in its place.
pub fn with_srid(wkb: &[u8], srid: i32) -> Result<Vec<u8>, String> {
    let not_wkb = || "holds a value that is not WKB (too short or no byte order)".to_string();
    let (&order, rest) = wkb.split_first().ok_or_else(not_wkb)?;
    let word: [u8; 4] = rest
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(not_wkb)?;
    let (geometry_type, srid_bytes) = match order {
        0 => (u32::from_be_bytes(word), srid.to_be_bytes()),
        1 => (u32::from_le_bytes(word), srid.to_le_bytes()),
        _ => return Err(not_wkb()),
    };
    let flagged = geometry_type | EWKB_SRID_FLAG;
    let mut out = Vec::with_capacity(wkb.len() + 4);
    out.push(order);
    out.extend_from_slice(&match order {
        0 => flagged.to_be_bytes(),
        _ => flagged.to_le_bytes(),
    });
    out.extend_from_slice(&srid_bytes);
    let body = &rest[4..];
    if geometry_type & EWKB_SRID_FLAG != 0 {
        out.extend_from_slice(body.get(4..).ok_or_else(not_wkb)?);
    } else {
        out.extend_from_slice(body);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_geo_types_parse_with_crs_and_algorithm() {
        assert_eq!(
            parse_geo_type("geometry(OGC:CRS84)"),
            Some(GeoType {
                kind: GeoKind::Geometry,
                crs: "OGC:CRS84".into(),
                algorithm: None
            })
        );
        assert_eq!(
            parse_geo_type("geography(OGC:CRS84, spherical)"),
            Some(GeoType {
                kind: GeoKind::Geography,
                crs: "OGC:CRS84".into(),
                algorithm: Some("spherical".into())
            })
        );
        assert_eq!(
            parse_geo_type("geography(EPSG:4269,karney)").unwrap().crs,
            "EPSG:4269"
        );
        assert_eq!(parse_geo_type("geometry").unwrap().crs, "OGC:CRS84");
        for other in [
            "string",
            "geometryx(1)",
            "geo",
            "decimal(10,2)",
            "geography(",
            "",
        ] {
            assert_eq!(parse_geo_type(other), None, "{other}");
        }
    }

    #[test]
    fn crs_map_to_srids_where_postgis_has_them() {
        assert_eq!(srid("OGC:CRS84"), Some(4326));
        assert_eq!(srid("ogc:crs84"), Some(4326));
        assert_eq!(srid("OGC:CRS83"), Some(4269));
        assert_eq!(srid("EPSG:3857"), Some(3857));
        assert_eq!(srid("srid:2056"), Some(2056));
        for none in [
            "projjson:crs_prop",
            "ESRI:102100",
            "EPSG:abc",
            "EPSG:0",
            "EPSG:1000000",
            "CRS84",
        ] {
            assert_eq!(srid(none), None, "{none}");
        }
    }

    #[test]
    fn wkb_gets_the_srid_as_ewkb_in_either_byte_order() {
        // POINT(1 2), little-endian: 01 | 01000000 | x | y
        let mut le = vec![1u8, 1, 0, 0, 0];
        le.extend_from_slice(&1f64.to_le_bytes());
        le.extend_from_slice(&2f64.to_le_bytes());
        let ewkb = with_srid(&le, 4326).unwrap();
        assert_eq!(&ewkb[..9], &[1, 1, 0, 0, 0x20, 0xe6, 0x10, 0, 0]);
        assert_eq!(&ewkb[9..], &le[5..]);
        // Big-endian ISO WKB POINT Z (type 1001).
        let mut be = vec![0u8];
        be.extend_from_slice(&1001u32.to_be_bytes());
        be.extend_from_slice(&[0; 24]);
        let ewkb = with_srid(&be, 3857).unwrap();
        assert_eq!(&ewkb[..9], &[0, 0x20, 0, 0x03, 0xe9, 0, 0, 0x0f, 0x11]);
        // EWKB with an SRID already: replaced, not doubled.
        assert_eq!(
            with_srid(&with_srid(&le, 1).unwrap(), 4326).unwrap(),
            with_srid(&le, 4326).unwrap()
        );
        for bad in [&[][..], &[1, 1, 0], &[7, 1, 0, 0, 0]] {
            assert!(with_srid(bad, 4326).unwrap_err().contains("not WKB"));
        }
    }
}
