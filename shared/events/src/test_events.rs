//! Lambda events for the functions' handler tests (feature `test-events`): what an SQS event
//! source mapping delivers when S3 announces `_delta_log` commits.

use serde_json::{Value, json};

use crate::trigger::LambdaInput;

/// An SQS batch with one S3 notification per (message ID, table folder in bucket `lake`,
/// commit version). An empty folder gives a message whose body is not an event at all.
pub fn sqs_commits(messages: &[(&str, &str, i64)]) -> serde_json::Result<LambdaInput> {
    let records: Vec<Value> = messages
        .iter()
        .map(|(id, table, version)| {
            let body = match *table {
                "" => "this is not an event".to_string(),
                table => json!({"Records": [{
                    "eventName": "ObjectCreated:Put",
                    "eventTime": "2026-12-02T10:00:00.000Z",
                    "s3": {"bucket": {"name": "lake"},
                           "object": {"key": format!("{table}/_delta_log/{version:020}.json")}}
                }]})
                .to_string(),
            };
            json!({"messageId": id, "receiptHandle": "r", "body": body, "attributes": {},
                   "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                   "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:commits",
                   "awsRegion": "us-east-1"})
        })
        .collect();
    serde_json::from_value(json!({ "Records": records }))
}

/// An SQS batch with one S3 notification per (message ID, table folder in bucket `lake`,
/// staged commit file name, receive count): a catalog-managed table's staged commits.
pub fn sqs_staged_commits(messages: &[(&str, &str, &str, u32)]) -> serde_json::Result<LambdaInput> {
    let records: Vec<Value> = messages
        .iter()
        .map(|(id, table, file_name, received)| {
            let body = json!({"Records": [{
                "eventName": "ObjectCreated:Put",
                "eventTime": "2026-12-02T10:00:00.000Z",
                "s3": {"bucket": {"name": "lake"},
                       "object": {"key": format!("{table}/_delta_log/_staged_commits/{file_name}")}}
            }]})
            .to_string();
            json!({"messageId": id, "receiptHandle": "r", "body": body,
                   "attributes": {"ApproximateReceiveCount": received.to_string()},
                   "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
                   "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:commits",
                   "awsRegion": "us-east-1"})
        })
        .collect();
    serde_json::from_value(json!({ "Records": records }))
}
