//! The Iceberg format version of a mirror: the deployment's (`ICEBERG_FORMAT_VERSION`), or the
//! one a Delta table asks for with its own property.

use iceberg::spec::FormatVersion;
use lakemirror_delta::actions::Metadata;

use crate::error::{Error, Result};

/// Delta table property choosing the Iceberg format version of the mirror (2 or 3).
pub const FORMAT_VERSION_PROPERTY: &str = "lakemirror.iceberg.format-version";

/// The format version the Delta table's `lakemirror.iceberg.format-version` asks for.
pub(crate) fn requested_format_version(
    table: &str,
    metadata: &Metadata,
) -> Result<Option<FormatVersion>> {
    match metadata.configuration.get(FORMAT_VERSION_PROPERTY).cloned().flatten() {
        None => Ok(None),
        Some(value) => parse_format_version(&value).map(Some).ok_or_else(|| {
            Error::TableProperty {
                table: table.to_string(),
                property: FORMAT_VERSION_PROPERTY,
                reason: format!("{value:?} is not a format version; allowed: 2 (position-delete files, read by Athena) or 3 (Puffin deletion vectors)"),
            }
        }),
    }
}

/// "2" or "3" as a format version lakemirror writes.
pub fn parse_format_version(value: &str) -> Option<FormatVersion> {
    match value.trim() {
        "2" => Some(FormatVersion::V2),
        "3" => Some(FormatVersion::V3),
        _ => None,
    }
}
