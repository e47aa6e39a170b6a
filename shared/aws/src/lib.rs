//! lakemirror-aws: the adapters to AWS, and the only crate that links the AWS SDK. One SDK
//! configuration per process ([`config`]) gives the S3 stores and every client; Glue is the
//! mirror's [`Catalog`](lakemirror_iceberg::Catalog) ([`glue`]); an SQS queue is where events
//! that can never succeed are parked ([`dead_letter`], the
//! [`DeadLetters`](lakemirror_events::DeadLetters) seam); Secrets Manager holds passwords and
//! tokens ([`secrets`]). What the functions do with them lives in `lakemirror-mirror`,
//! `lakemirror-lakebase` and `lakemirror-unity`.

pub mod config;
pub mod dead_letter;
mod error;
pub mod glue;
pub mod secrets;

pub use aws_config::SdkConfig;
pub use dead_letter::DeadLetterQueue;
pub use error::{Error, Result};
pub use glue::GlueCatalog;
pub use secrets::SecretsManager;
