//! Table URIs: one spelling per location, and which prefixes hold a table.

/// A table URI in one spelling, so two spellings of one location compare equal: no trailing
/// slash, `s3a://` as `s3://`, `file:/x` as `file:///x`.
pub fn canonical_uri(uri: &str) -> String {
    let uri = uri.trim().trim_end_matches('/');
    if let Some(rest) = uri.strip_prefix("s3a://") {
        return format!("s3://{rest}");
    }
    if let Some(rest) = uri.strip_prefix("file:") {
        return format!("file:///{}", rest.trim_start_matches('/'));
    }
    uri.to_string()
}

/// Whether `table_uri` is `prefix` or lies below it (a whole path segment: `s3://b/sales`
/// does not hold `s3://b/salesforce`).
pub fn under_prefix(table_uri: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    table_uri == prefix || table_uri.starts_with(&format!("{prefix}/"))
}

/// A comma-separated list of `s3://bucket/prefix` roots (`TABLE_PREFIXES`); unset or empty
/// means every table.
pub fn table_prefixes(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

/// Whether `table_uri` lies under one of `prefixes` (empty: every table does).
pub fn allowed_by(prefixes: &[String], table_uri: &str) -> bool {
    prefixes.is_empty() || prefixes.iter().any(|p| under_prefix(table_uri, p))
}

/// A Delta table that commit events announced (glue-sync, lakebase-sync and unity-register
/// all read the same events), with the messages that announced it, for redelivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnouncedTable {
    /// `s3://bucket/root`, canonical.
    pub table_uri: String,
    /// The newest commit version announced.
    pub newest_version: i64,
    /// The SQS messages that announced it (none for an event delivered directly).
    pub message_ids: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_location_compare_equal() {
        assert_eq!(canonical_uri("s3a://b/t/"), "s3://b/t");
        assert_eq!(canonical_uri("file:/data/t"), "file:///data/t");
        assert_eq!(canonical_uri(" s3://b/t "), "s3://b/t");
    }

    #[test]
    fn a_prefix_holds_whole_path_segments_only() {
        assert!(under_prefix("s3://b/sales/orders", "s3://b/sales/"));
        assert!(under_prefix("s3://b/sales", "s3://b/sales"));
        assert!(!under_prefix("s3://b/salesforce/x", "s3://b/sales"));
        assert!(allowed_by(&[], "s3://any/thing"));
        assert_eq!(
            table_prefixes(Some(" s3://a/x, ,s3://b ")),
            ["s3://a/x", "s3://b"]
        );
        assert!(table_prefixes(None).is_empty());
    }
}
