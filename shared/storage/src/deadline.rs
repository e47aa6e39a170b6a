//! How every function spends its invocation's time: the same margins for glue-sync,
//! lakebase-sync and unity-register.

use std::time::Duration;

/// No table's work starts (after the first) when less than this is left before the
/// invocation's deadline.
pub const START_MARGIN: Duration = Duration::from_secs(10);

/// A table's work is cut off this long before the invocation's deadline, which leaves the
/// time to park messages and answer.
pub const RESPONSE_MARGIN: Duration = Duration::from_secs(5);
