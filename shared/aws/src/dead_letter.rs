//! The dead-letter queue for events that can never succeed (an unknown Delta feature, a
//! malformed log, an unreadable message). The function parks them there itself, once, so
//! they neither loop through redelivery nor block the table's later commits.

use aws_sdk_sqs::types::MessageAttributeValue;

use lakemirror_events::{DeadLetters, Parked, ParkedError};
use lakemirror_storage::canonical_uri;

use crate::error::{Error, Result};

/// An SQS queue that receives permanently failed events with the reason attached.
#[derive(Clone, Debug)]
pub struct DeadLetterQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

impl DeadLetterQueue {
    pub fn new(aws: &aws_config::SdkConfig, url: String) -> Self {
        Self {
            client: aws_sdk_sqs::Client::new(aws),
            url,
        }
    }
}

#[async_trait::async_trait]
impl DeadLetters for DeadLetterQueue {
    fn url(&self) -> &str {
        &self.url
    }

    /// Sends one event to the queue, with the reason, table and version as message
    /// attributes so an operator can see why without reading logs.
    async fn park(&self, parked: &Parked<'_>) -> lakemirror_events::Result<()> {
        let attribute = |value: &str| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
        };
        let mut request = self
            .client
            .send_message()
            .queue_url(&self.url)
            .message_body(parked.body);
        let mut attributes = vec![("lakemirror-error", attribute_text(parked.reason))];
        if let Some(table) = parked.table {
            attributes.push(("lakemirror-table", attribute_text(table)));
        }
        if let Some(version) = parked.delta_version {
            attributes.push(("lakemirror-delta-version", version.to_string()));
        }
        for (name, value) in attributes {
            let value = attribute(&value)
                .map_err(|e| lakemirror_events::Error::DeadLetter(e.to_string()))?;
            request = request.message_attributes(name, value);
        }
        request.send().await.map_err(|e| {
            lakemirror_events::Error::DeadLetter(format!(
                "{}",
                aws_sdk_sqs::error::DisplayErrorContext(&e)
            ))
        })?;
        Ok(())
    }
}

/// Messages `last_errors` reads at most (100 receive requests).
pub const PEEK_MAX_MESSAGES: usize = 1000;

impl DeadLetterQueue {
    /// The newest parked error per Delta table URI (the `lakemirror-table` attribute), from
    /// up to [`PEEK_MAX_MESSAGES`] messages. Reading is a peek, not a consume: the messages
    /// stay in the queue. They are hidden while the pass reads (so it sees each once) and
    /// made visible again when it ends. Messages the queue's redrive policy parked carry no
    /// attributes and are not attributed to a table.
    pub async fn last_errors(&self) -> Result<std::collections::HashMap<String, ParkedError>> {
        let mut newest: std::collections::HashMap<String, ParkedError> = Default::default();
        let mut seen = std::collections::HashSet::new();
        let mut receipts = Vec::new();
        while seen.len() < PEEK_MAX_MESSAGES {
            let page = self
                .client
                .receive_message()
                .queue_url(&self.url)
                .max_number_of_messages(10)
                .visibility_timeout(30)
                .wait_time_seconds(0)
                .message_attribute_names("All")
                .message_system_attribute_names(
                    aws_sdk_sqs::types::MessageSystemAttributeName::SentTimestamp,
                )
                .send()
                .await
                .map_err(|e| {
                    Error::DeadLetter(format!(
                        "cannot read {}: {}",
                        self.url,
                        aws_sdk_sqs::error::DisplayErrorContext(&e)
                    ))
                })?;
            let messages = page.messages.unwrap_or_default();
            let mut new = 0;
            for message in messages {
                if !seen.insert(message.message_id.clone().unwrap_or_default()) {
                    continue;
                }
                new += 1;
                receipts.extend(message.receipt_handle.clone());
                let attributes = message.message_attributes.unwrap_or_default();
                let text = |name: &str| attributes.get(name).and_then(|a| a.string_value.clone());
                let (Some(table), Some(error)) =
                    (text("lakemirror-table"), text("lakemirror-error"))
                else {
                    continue;
                };
                let sent_at_ms = message
                    .attributes
                    .as_ref()
                    .and_then(|a| {
                        a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::SentTimestamp)
                    })
                    .and_then(|t| t.parse().ok())
                    .unwrap_or_default();
                let parked = ParkedError {
                    error,
                    delta_version: text("lakemirror-delta-version").and_then(|v| v.parse().ok()),
                    sent_at_ms,
                };
                let table = canonical_uri(&table);
                match newest.get(&table) {
                    Some(known) if known.sent_at_ms > sent_at_ms => {}
                    _ => {
                        newest.insert(table, parked);
                    }
                }
            }
            if new == 0 {
                break;
            }
        }
        self.make_visible(&receipts).await?;
        Ok(newest)
    }

    /// Ends the hiding of messages read by `last_errors`.
    async fn make_visible(&self, receipts: &[String]) -> Result<()> {
        use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry as Entry;
        for chunk in receipts.chunks(10) {
            let entries = chunk
                .iter()
                .enumerate()
                .map(|(n, receipt)| {
                    Entry::builder()
                        .id(n.to_string())
                        .receipt_handle(receipt)
                        .visibility_timeout(0)
                        .build()
                        .map_err(|e| Error::DeadLetter(e.to_string()))
                })
                .collect::<Result<Vec<_>>>()?;
            self.client
                .change_message_visibility_batch()
                .queue_url(&self.url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| {
                    Error::DeadLetter(format!(
                        "cannot make the messages read from {} visible again (they will be after 30 s): {}",
                        self.url,
                        aws_sdk_sqs::error::DisplayErrorContext(&e)
                    ))
                })?;
        }
        Ok(())
    }
}

/// Text SQS accepts as an attribute value: XML characters only, at most about 1 KiB, so a
/// long reason never makes the message too large to park.
fn attribute_text(text: &str) -> String {
    const MAX_BYTES: usize = 1024;
    let mut out = String::new();
    for c in text.chars() {
        let allowed =
            matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && c != '\u{FFFE}' && c != '\u{FFFF}');
        let c = if allowed { c } else { '?' };
        if out.len() + c.len_utf8() > MAX_BYTES {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::attribute_text;

    #[test]
    fn attribute_text_is_xml_safe_and_bounded() {
        assert_eq!(attribute_text("a\u{0}b\tc"), "a?b\tc");
        let long = "é".repeat(5_000);
        let cut = attribute_text(&long);
        assert!(cut.len() <= 1024 + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
