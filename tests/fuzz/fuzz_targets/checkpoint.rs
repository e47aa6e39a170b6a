//! A Parquet checkpoint's bytes (classic, v2 or sidecar). Any input may be refused; none may
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = lakemirror_delta::checkpoint::checkpoint_actions(bytes::Bytes::copy_from_slice(data));
    // As unity-register reads it: the footer and the metaData/protocol chunks only.
    let _ = lakemirror_delta::checkpoint::definition_actions_of(bytes::Bytes::copy_from_slice(data));
    let _ = lakemirror_delta::checkpoint::json_actions(data);
});
