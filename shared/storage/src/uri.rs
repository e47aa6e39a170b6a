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

/// `uri` (`s3://bucket/key`, any case of the scheme, `s3a://`) in the one spelling S3 reads
/// it by, or why it has none: an empty, `.` or `..` segment names another key than it shows
/// (`s3://lake//warehouse/x` is read as `warehouse/x`), so a prefix check on the text would
/// not hold for the object read.
pub fn plain_location(uri: &str) -> Result<String, String> {
    let uri = uri.trim();
    let (scheme, rest) = uri
        .split_once("://")
        .ok_or_else(|| format!("{uri} is not an s3://bucket/key URI"))?;
    if !matches!(scheme.to_ascii_lowercase().as_str(), "s3" | "s3a" | "s3n") {
        return Err(format!("{uri} is not an s3://bucket/key URI"));
    }
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let location = format!("s3://{bucket}/{key}");
    if bucket.is_empty() || !plain_key(&location) {
        return Err(format!(
            "{uri} has an empty, . or .. segment, so S3 would read another key than it shows: write it as s3://bucket/folder/file"
        ));
    }
    Ok(location)
}

/// Whether `table_uri` is `prefix` or lies below it (a whole path segment: `s3://b/sales`
/// does not hold `s3://b/salesforce`).
pub fn under_prefix(table_uri: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    table_uri == prefix || table_uri.starts_with(&format!("{prefix}/"))
}

/// `TABLE_PREFIXES`: the roots whose tables a function serves.
pub const TABLE_PREFIXES: lakemirror_runtime::settings::Variable =
    lakemirror_runtime::settings::Variable {
        name: "TABLE_PREFIXES",
        default: None,
        values: &[],
        help: "Comma-separated s3://bucket/prefix roots whose tables the function serves; unset or empty: every table.",
    };

/// A comma-separated list of `s3://bucket/prefix` roots ([`TABLE_PREFIXES`]); unset or empty
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

/// What a path in a Delta log names: its kind decides where it may lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogPath {
    /// An `add` or `remove` path.
    DataFile,
    /// A deletion vector file (`u` relative to the root, `p` absolute).
    DeletionVector,
    /// A checkpoint sidecar (relative to `_delta_log/_sidecars`).
    Sidecar,
}

impl LogPath {
    fn noun(self) -> &'static str {
        match self {
            LogPath::DataFile => "data file",
            LogPath::DeletionVector => "deletion vector",
            LogPath::Sidecar => "checkpoint sidecar",
        }
    }
}

/// A table's root and the roots outside it that its log may name for data files and
/// deletion vectors (`ALLOWED_EXTERNAL_ROOTS`: a shallow clone's source). Every path a Delta
/// log names is resolved here, so one table's writer cannot make lakemirror read or list
/// another table's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableScope {
    root: String,
    external: Vec<String>,
}

impl TableScope {
    /// The scope of the table at `root` (any spelling: it is made canonical), no external
    /// roots.
    pub fn new(root: &str) -> Self {
        Self {
            root: canonical_uri(root),
            external: Vec::new(),
        }
    }

    /// The same scope, admitting data files and deletion vectors below `roots` as well.
    pub fn with_external_roots(mut self, roots: &[String]) -> Self {
        self.external = roots.iter().map(|r| canonical_uri(r)).collect();
        self
    }

    /// The table root, canonical, without trailing slash.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The external roots admitted besides the table's own.
    pub fn external_roots(&self) -> &[String] {
        &self.external
    }

    /// Whether reading `location` (a decoded location) stays within this table: the root
    /// itself, an object below it, or below an external root.
    pub fn admits(&self, location: &str) -> bool {
        location == self.root
            || self.root_holds(location)
            || (plain_key(location) && self.external.iter().any(|e| below(location, e)))
    }

    /// Whether `location` lies below the table's own root (writes go nowhere else), with no
    /// empty, `.` or `..` segment that would make it name another object.
    pub fn root_holds(&self, location: &str) -> bool {
        plain_key(location) && below(location, &self.root)
    }

    /// The location of a path as the log writes it: URI-encoded, relative to the root (to
    /// `_delta_log/_sidecars` for a sidecar) or absolute (`s3://`, `s3a://`, `file:`),
    /// decoded exactly once. Refused, with a reason that names the path: an empty path,
    /// another scheme, invalid UTF-8, an empty, `.` or `..` segment, and a location outside
    /// the root (outside the external roots too, for data files and deletion vectors).
    pub fn resolve(&self, kind: LogPath, encoded: &str) -> Result<String, String> {
        let refuse = |why: &str| format!("{} path {encoded:?} {why}", kind.noun());
        if encoded.is_empty() {
            return Err(refuse("is empty"));
        }
        let decoded = percent_encoding::percent_decode_str(encoded)
            .decode_utf8()
            .map_err(|_| refuse("is not UTF-8 once decoded"))?;
        let location = match scheme(encoded) {
            Some(scheme) => {
                let rest = &decoded[scheme.len() + 1..];
                match scheme.to_ascii_lowercase().as_str() {
                    "s3" | "s3a" | "s3n" => match rest.strip_prefix("//") {
                        Some(rest) => format!("s3://{rest}"),
                        None => return Err(refuse("is not an s3://bucket/key URI")),
                    },
                    "file" => match rest
                        .strip_prefix("//localhost/")
                        .or_else(|| rest.strip_prefix("///"))
                        .or_else(|| rest.strip_prefix('/').filter(|r| !r.starts_with('/')))
                    {
                        Some(path) => format!("file:///{path}"),
                        None => return Err(refuse("is not a file:///path URI")),
                    },
                    other => {
                        return Err(refuse(&format!(
                            "names scheme {other}:, which lakemirror does not read"
                        )));
                    }
                }
            }
            None if decoded.starts_with('/') => format!("{}{decoded}", self.authority()),
            None if kind == LogPath::Sidecar => {
                format!("{}/_delta_log/_sidecars/{decoded}", self.root)
            }
            None => format!("{}/{decoded}", self.root),
        };
        self.admit(kind, location).map_err(|why| refuse(&why))
    }

    /// The location of a path already decoded, relative to the root (a deletion vector's
    /// `u` prefix and file name), with the same refusals as [`TableScope::resolve`].
    pub fn resolve_decoded(&self, kind: LogPath, relative: &str) -> Result<String, String> {
        let location = format!("{}/{relative}", self.root);
        self.admit(kind, location)
            .map_err(|why| format!("{} path {relative:?} {why}", kind.noun()))
    }

    fn admit(&self, kind: LogPath, location: String) -> Result<String, String> {
        if !plain_key(&location) {
            return Err(
                "has an empty, . or .. segment, so it would not name the object it shows; nothing was written"
                    .into(),
            );
        }
        if location.chars().any(char::is_control) {
            return Err("holds a control character".into());
        }
        let external = matches!(kind, LogPath::DataFile | LogPath::DeletionVector)
            && self.external.iter().any(|e| below(&location, e));
        if self.root_holds(&location) || external {
            return Ok(location);
        }
        let allowed = match self.external.is_empty() {
            true => String::new(),
            false => format!(" or below {}", self.external.join(", ")),
        };
        Err(format!(
            "lies outside the table's root {}{allowed}: a table's log may name only its own files (list a shallow clone's source in ALLOWED_EXTERNAL_ROOTS); nothing was written",
            self.root
        ))
    }

    /// `s3://bucket` or `file://`: what precedes a key.
    fn authority(&self) -> &str {
        match self.root.strip_prefix("s3://") {
            Some(rest) => &self.root[..5 + rest.find('/').unwrap_or(rest.len())],
            None => "file://",
        }
    }
}

/// The scheme of an absolute URI as written (`s3`, `S3A`, `file`), found before decoding,
/// so an encoded `%3A` is never a scheme separator.
fn scheme(encoded: &str) -> Option<&str> {
    let (scheme, _) = encoded.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// Whether the key of `location` (after `s3://bucket/` or `file:///`) has no empty, `.` or
/// `..` segment.
fn plain_key(location: &str) -> bool {
    let key = location.split_once("://").map_or("", |(_, rest)| {
        rest.split_once('/').map_or("", |(_, key)| key)
    });
    !key.split('/')
        .any(|s| s.is_empty() || s == "." || s == "..")
}

/// Whether `location` lies strictly below `root` (whole segments).
fn below(location: &str, root: &str) -> bool {
    location
        .strip_prefix(root)
        .is_some_and(|rest| rest.len() > 1 && rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> TableScope {
        TableScope::new("s3://lake/warehouse/team_a/t")
    }

    #[test]
    fn a_log_path_resolves_inside_its_table_only() {
        let s = scope();
        let data = |p: &str| s.resolve(LogPath::DataFile, p);
        assert_eq!(
            data("x=A%252FA/p.parquet").unwrap(),
            "s3://lake/warehouse/team_a/t/x=A%2FA/p.parquet"
        );
        assert_eq!(
            data("ts=2021-01-01%2000%3A00%3A00/p.parquet").unwrap(),
            "s3://lake/warehouse/team_a/t/ts=2021-01-01 00:00:00/p.parquet"
        );
        assert_eq!(
            data("s3a://lake/warehouse/team_a/t/own.parquet").unwrap(),
            "s3://lake/warehouse/team_a/t/own.parquet"
        );
        for attack in [
            "s3://lake/warehouse/hr/people/part-0.parquet",
            "s3a://lake/warehouse/hr/people/part-0.parquet",
            "S3://lake/warehouse/hr/people/part-0.parquet",
            "../../hr/people/part-0.parquet",
            "..%2F..%2Fhr%2Fpeople%2Fpart-0.parquet",
            "%2E%2E/%2E%2E/hr/people/part-0.parquet",
            "/warehouse/hr/people/part-0.parquet",
            "x//../p.parquet",
            "a/./p.parquet",
            "s3://other/p.parquet",
            "s3://lake/warehouse/team_a/tail/p.parquet",
            "s3://lake//warehouse/team_a/t/p.parquet",
            "gs://lake/warehouse/team_a/t/p.parquet",
            "file:///etc/passwd",
            "%FF.parquet",
            "",
        ] {
            let refused = data(attack).expect_err(attack);
            assert!(refused.contains("data file path"), "{refused}");
        }
        assert!(
            data("s3://lake/warehouse/hr/people/p.parquet")
                .unwrap_err()
                .contains("outside the table's root s3://lake/warehouse/team_a/t")
        );
    }

    #[test]
    fn external_roots_admit_data_files_and_deletion_vectors_but_not_sidecars() {
        let s = scope().with_external_roots(&["s3://source/clone/".to_string()]);
        assert!(
            s.resolve(LogPath::DataFile, "s3://source/clone/p.parquet")
                .is_ok()
        );
        assert!(
            s.resolve(LogPath::DeletionVector, "s3://source/clone/d.bin")
                .is_ok()
        );
        assert!(
            s.resolve(
                LogPath::Sidecar,
                "s3://source/clone/_delta_log/_sidecars/s.parquet"
            )
            .is_err()
        );
        assert!(
            s.resolve(LogPath::DataFile, "s3://source/clonex/p.parquet")
                .is_err()
        );
        assert_eq!(
            s.resolve(LogPath::Sidecar, "s.parquet").unwrap(),
            "s3://lake/warehouse/team_a/t/_delta_log/_sidecars/s.parquet"
        );
        assert!(s.admits("s3://source/clone/p.parquet"));
        assert!(s.admits("s3://lake/warehouse/team_a/t"));
        assert!(!s.admits("s3://lake/warehouse/team_a"));
    }

    #[test]
    fn local_paths_resolve_in_their_file_system_root() {
        let s = TableScope::new("file:///d/t");
        assert_eq!(
            s.resolve(LogPath::DataFile, "file:/d/t/a.parquet").unwrap(),
            "file:///d/t/a.parquet"
        );
        assert_eq!(
            s.resolve(LogPath::DataFile, "file:///d/t/a.parquet")
                .unwrap(),
            "file:///d/t/a.parquet"
        );
        assert_eq!(
            s.resolve(LogPath::DataFile, "/d/t/a.parquet").unwrap(),
            "file:///d/t/a.parquet"
        );
        assert!(
            s.resolve(LogPath::DataFile, "file:///d/other/a.parquet")
                .is_err()
        );
        assert!(
            s.resolve(LogPath::DataFile, "file://host/d/t/a.parquet")
                .is_err()
        );
        assert!(
            s.resolve_decoded(LogPath::DeletionVector, "../../x/deletion_vector_1.bin")
                .is_err()
        );
    }

    proptest::proptest! {
        #[test]
        fn whatever_resolves_lies_below_the_root(path in "[ab/.%2EeFf:s3A\\\\ ]{0,24}") {
            let s = scope();
            if let Ok(location) = s.resolve(LogPath::DataFile, &path) {
                proptest::prop_assert!(location.starts_with("s3://lake/warehouse/team_a/t/"), "{path:?} -> {location}");
                let key = &location["s3://lake/".len()..];
                proptest::prop_assert!(!key.split('/').any(|s| s.is_empty() || s == "." || s == ".."));
            }
        }
    }

    #[test]
    fn a_location_has_one_plain_spelling() {
        assert_eq!(
            plain_location("S3://lake/config/l.toml").unwrap(),
            "s3://lake/config/l.toml"
        );
        for hidden in [
            "s3://lake//warehouse/l.toml",
            "s3://lake/config/../warehouse/l.toml",
            "s3://lake/./l.toml",
            "s3://lake/",
            "gs://lake/l.toml",
        ] {
            assert!(plain_location(hidden).is_err(), "{hidden}");
        }
    }

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
