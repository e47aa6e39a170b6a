//! lakemirror-events: what starts a function. S3 notifications (in SQS or delivered directly),
//! EventBridge events and lakemirror's own control events become the Delta tables they
//! announce ([`trigger`]); events that can never succeed are parked through the
//! [`DeadLetters`] seam ([`dead_letter`]). Depends on no catalog and no writer, so every
//! function reads its events without linking the mirror's orchestration.

pub mod dead_letter;
mod error;
#[cfg(feature = "test-events")]
pub mod test_events;
pub mod trigger;

pub use dead_letter::{DeadLetters, InMemoryDeadLetters, Parked, ParkedError, ParkedEvent};
pub use error::{Error, Result};
pub use trigger::{Control, LambdaInput};
