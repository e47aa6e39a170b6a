//! The dead-letter queue for events that can never succeed (an unknown Delta feature, a
//! malformed log, an unreadable message). The function parks them there itself, once, so
//! they neither loop through redelivery nor block the table's later commits.

use aws_sdk_sqs::types::MessageAttributeValue;

use crate::error::{Error, Result};

/// An SQS queue that receives permanently failed events with the reason attached.
#[derive(Clone, Debug)]
pub struct DeadLetterQueue {
    client: aws_sdk_sqs::Client,
    url: String,
}

/// Why a message was parked.
#[derive(Debug, Clone)]
pub struct Parked<'a> {
    pub body: &'a str,
    pub reason: &'a str,
    pub table: Option<&'a str>,
    pub delta_version: Option<i64>,
}

impl DeadLetterQueue {
    pub fn new(client: aws_sdk_sqs::Client, url: String) -> Self {
        Self { client, url }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Sends one event to the queue, with the reason, table and version as message
    /// attributes so an operator can see why without reading logs.
    pub async fn park(&self, parked: &Parked<'_>) -> Result<()> {
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
            let value = attribute(&value).map_err(|e| Error::DeadLetter(e.to_string()))?;
            request = request.message_attributes(name, value);
        }
        request.send().await.map_err(|e| {
            Error::DeadLetter(format!("{}", aws_sdk_sqs::error::DisplayErrorContext(&e)))
        })?;
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
