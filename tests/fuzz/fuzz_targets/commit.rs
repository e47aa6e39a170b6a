//! A commit file's bytes: parsed, replayed into an active file set, its schema mapped to
//! Iceberg and Unity Catalog columns. Any input may be refused; none may panic.
#![no_main]

use lakemirror_delta::{ActiveFileSet, DeltaCommit};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(commit) = DeltaCommit::parse(1, data, 0) else {
        return;
    };
    let mut active = ActiveFileSet::default();
    active.apply(&commit);
    if let Some(metadata) = &commit.metadata {
        if let Ok(fields) = lakemirror_delta::schema::parse_schema(&metadata.schema_string) {
            let _ = lakemirror_plan::schema::iceberg_schema(&fields, None, None, 0, 0);
        }
        let _ = lakemirror_unity::columns::columns(&metadata.schema_string, &metadata.partition_columns);
    }
});
