//! lakemirror-aws: everything that speaks to AWS, and the only crate that links the AWS SDK.
//! One SDK configuration per process ([`config`]) gives the S3 stores and every client;
//! Glue is the mirror's [`Catalog`](lakemirror_iceberg::Catalog) ([`glue`]); SQS parks events
//! that can never succeed ([`dead_letter`]); Secrets Manager holds passwords and tokens
//! ([`secrets`]). Lambda events are read in [`trigger`], and [`function`] is the glue-sync
//! function's handler logic: a batch of events in, one sync per announced table, a response
//! out.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod config;
pub mod dead_letter;
mod error;
pub mod function;
pub mod glue;
pub mod secrets;
#[cfg(feature = "test-events")]
pub mod test_events;
pub mod trigger;

pub use aws_config::SdkConfig;
pub use dead_letter::{DeadLetterQueue, DeadLetters, InMemoryDeadLetters};
pub use error::{Error, Result};
pub use glue::GlueCatalog;
pub use secrets::SecretsManager;
