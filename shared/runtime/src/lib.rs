//! lakemirror-runtime, how every function runs, the bottom floor, using nothing of ours: what
//! kind of error an error is and so what is done with it ([`ErrorKind`], [`Kind`]), the
//! CloudWatch metrics every function emits ([`metrics`]), the margins each table's work keeps
//! before the invocation's deadline ([`deadline`]), the test-only crash points ([`crash`]),
//! every environment variable a function reads, declared once ([`settings`]), and a batch's
//! failures with each table's work isolated, so that a panic is that table's failure
//! ([`Failures`], [`isolated`]).

pub mod crash;
pub mod deadline;
mod failures;
mod kind;
pub mod metrics;
pub mod settings;

pub use failures::{Failures, isolated, panic_message};
pub use kind::{ErrorKind, Kind};
