//! A Lambda event: S3 notifications, SQS batches, EventBridge events, anything else. Any
//! input may announce nothing; none may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = lakemirror_events::trigger::commit_object_key(text);
    }
    let Ok(event) = serde_json::from_slice::<lakemirror_events::trigger::LambdaInput>(data) else {
        return;
    };
    let deliveries = event.deliveries();
    let _ = lakemirror_events::trigger::table_triggers(&deliveries, &["s3://b/p".to_string()]);
});
