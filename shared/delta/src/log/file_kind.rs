//! What a file in `_delta_log/` is, judged by its name: commit, checkpoint, staged commit or
//! other. The one grammar of Delta log file names: the events that announce commits and the
//! reads of the log both ask it.

/// What a file in `_delta_log/` is, judged by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFileKind {
    Commit(i64),
    /// Classic checkpoint; `parts` is `Some((part, of))` for multi-part checkpoints.
    Checkpoint {
        version: i64,
        parts: Option<(u32, u32)>,
    },
    /// UUID-named (v2) checkpoint.
    V2Checkpoint(i64),
    /// A commit staged for a catalog-managed table's catalog to ratify
    /// (`<version:020>.<uuid>.json`, in `_delta_log/_staged_commits/`).
    StagedCommit(i64),
    /// `.crc`, `_last_checkpoint`, compacted logs, temporary files, sidecars...
    Other,
}

impl LogFileKind {
    /// The version a commit or checkpoint file is of.
    pub fn version(&self) -> Option<i64> {
        match *self {
            LogFileKind::Commit(v)
            | LogFileKind::Checkpoint { version: v, .. }
            | LogFileKind::V2Checkpoint(v)
            | LogFileKind::StagedCommit(v) => Some(v),
            LogFileKind::Other => None,
        }
    }

    /// Whether the file is one of the table's published log: a commit or a checkpoint.
    pub fn is_published(&self) -> bool {
        matches!(
            self,
            LogFileKind::Commit(_) | LogFileKind::Checkpoint { .. } | LogFileKind::V2Checkpoint(_)
        )
    }
}

/// The version of a staged commit's file name (`00000000000000000007.<uuid>.json`, the last
/// segment of `_delta_log/_staged_commits/…`), or None for any other name.
pub fn staged_commit_version(file_name: &str) -> Option<i64> {
    match classify(file_name) {
        LogFileKind::StagedCommit(version) => Some(version),
        _ => None,
    }
}

/// Classifies a file name (the last path segment) in `_delta_log/`.
pub fn classify(name: &str) -> LogFileKind {
    let Some((digits, rest)) = name.split_at_checked(20) else {
        return LogFileKind::Other;
    };
    let Ok(version) = digits.parse::<i64>() else {
        return LogFileKind::Other;
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return LogFileKind::Other;
    }
    match rest {
        ".json" => LogFileKind::Commit(version),
        ".checkpoint.parquet" => LogFileKind::Checkpoint {
            version,
            parts: None,
        },
        _ => {
            let Some(tail) = rest.strip_prefix(".checkpoint.") else {
                return staged(version, rest);
            };
            let stem = tail
                .strip_suffix(".parquet")
                .or_else(|| tail.strip_suffix(".json"));
            let Some(stem) = stem else {
                return LogFileKind::Other;
            };
            let numbers: Vec<_> = stem.split('.').collect();
            match numbers.as_slice() {
                [part, of] if tail.ends_with(".parquet") => match (part.parse(), of.parse()) {
                    (Ok(part), Ok(of)) => LogFileKind::Checkpoint {
                        version,
                        parts: Some((part, of)),
                    },
                    _ => LogFileKind::Other,
                },
                [_uuid] => LogFileKind::V2Checkpoint(version),
                _ => LogFileKind::Other,
            }
        }
    }
}

/// `.<token>.json` after a version: a staged commit's name when the token is a plain UUID-like
/// word (letters, digits, `-`), which keeps compacted logs (`<v>.<v>.compacted.json`) and
/// anything with a path in it out.
fn staged(version: i64, rest: &str) -> LogFileKind {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b == b'-';
    match rest.strip_prefix('.').and_then(|r| r.strip_suffix(".json")) {
        Some(token) if !token.is_empty() && token.bytes().all(plain) => {
            LogFileKind::StagedCommit(version)
        }
        _ => LogFileKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_log_file_names() {
        assert_eq!(
            classify("00000000000000000042.json"),
            LogFileKind::Commit(42)
        );
        assert_eq!(
            classify("00000000000000000010.checkpoint.parquet"),
            LogFileKind::Checkpoint {
                version: 10,
                parts: None
            }
        );
        assert_eq!(
            classify("00000000000000000001.checkpoint.0000000002.0000000002.parquet"),
            LogFileKind::Checkpoint {
                version: 1,
                parts: Some((2, 2))
            }
        );
        assert_eq!(
            classify(
                "00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.parquet"
            ),
            LogFileKind::V2Checkpoint(2)
        );
        assert_eq!(
            classify("00000000000000000007.4cb9708e-b478-44de-b203-53f9ba9b2876.json"),
            LogFileKind::StagedCommit(7)
        );
        for other in [
            "_last_checkpoint",
            "00000000000000000042.crc",
            ".00000000000000000042.json.crc",
            "00000000000000000004.00000000000000000006.compacted.json",
            ".00000000000000000042.json.tmp",
            "0000000000000000004a.json",
        ] {
            assert_eq!(classify(other), LogFileKind::Other, "{other}");
        }
    }
}
