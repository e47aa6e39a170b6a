//! lakemirror-runtime, how every function runs, beside storage on the bottom floor and using
//! nothing of it: the CloudWatch metrics every function emits ([`metrics`]), the margins
//! each table's work keeps before the invocation's deadline ([`deadline`]), the test-only crash
//! points ([`crash`]), and a batch's failures with each table's work isolated, so that a panic
//! is that table's failure ([`Failures`], [`isolated`]).

pub mod crash;
pub mod deadline;
mod failures;
pub mod metrics;

pub use failures::{Failures, isolated, panic_message};
