//! Where events that can never succeed are parked (an unknown Delta feature, a malformed
//! log, an unreadable message): the seam [`DeadLetters`], an SQS queue in a deployment
//! (`lakemirror_aws::DeadLetterQueue`), a list in memory in tests. The function parks them
//! itself, once, so they neither loop through redelivery nor block the table's later commits.

use crate::error::{Error, Result};

/// Where events that can never succeed are parked.
#[async_trait::async_trait]
pub trait DeadLetters: Send + Sync + std::fmt::Debug {
    /// Where they go, for the log.
    fn url(&self) -> &str;

    /// Parks one event, with why.
    async fn park(&self, parked: &Parked<'_>) -> Result<()>;
}

/// Why a message was parked.
#[derive(Debug, Clone)]
pub struct Parked<'a> {
    pub body: &'a str,
    pub reason: &'a str,
    pub table: Option<&'a str>,
    pub delta_version: Option<i64>,
}

/// The newest error parked for one table, as read back from a dead-letter queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedError {
    pub error: String,
    pub delta_version: Option<i64>,
    pub sent_at_ms: i64,
}

/// A parked event as [`InMemoryDeadLetters`] keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedEvent {
    pub body: String,
    pub reason: String,
    pub table: Option<String>,
    pub delta_version: Option<i64>,
}

/// Dead letters kept in memory (tests).
#[derive(Debug, Default)]
pub struct InMemoryDeadLetters {
    parked: std::sync::Mutex<Vec<ParkedEvent>>,
}

impl InMemoryDeadLetters {
    /// The events parked so far, oldest first.
    pub fn parked(&self) -> Vec<ParkedEvent> {
        self.parked.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl DeadLetters for InMemoryDeadLetters {
    fn url(&self) -> &str {
        "memory://dead-letters"
    }

    async fn park(&self, parked: &Parked<'_>) -> Result<()> {
        let event = ParkedEvent {
            body: parked.body.to_string(),
            reason: parked.reason.to_string(),
            table: parked.table.map(str::to_string),
            delta_version: parked.delta_version,
        };
        self.parked
            .lock()
            .map_err(|_| Error::DeadLetter("the in-memory queue was poisoned".into()))?
            .push(event);
        Ok(())
    }
}
