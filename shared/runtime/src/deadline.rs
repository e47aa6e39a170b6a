//! How every function spends its invocation's time: glue-sync, lakebase-sync and
//! unity-register run each table's work through [`run_before`], with the same margins.

use std::future::Future;
use std::time::{Duration, SystemTime};

/// No table's work starts (after the first) when less than this is left before the
/// invocation's deadline.
pub const START_MARGIN: Duration = Duration::from_secs(10);

/// A table's work is cut off this long before the invocation's deadline, which leaves the
/// time to park messages and answer.
pub const RESPONSE_MARGIN: Duration = Duration::from_secs(5);

/// The invocation's deadline, unless it is already past as the invocation starts: that is not
/// a real one (`cargo lambda watch` hands out such deadlines; Lambda never does).
pub fn of_invocation(deadline: Option<SystemTime>) -> Option<SystemTime> {
    deadline.filter(|d| *d > SystemTime::now())
}

/// What became of one table's work under the deadline.
#[derive(Debug)]
pub enum Timed<T> {
    /// It ran to its end.
    Done(T),
    /// It did not start: less than [`START_MARGIN`] was left.
    NotStarted,
    /// It was cut off (dropped) after this long, [`RESPONSE_MARGIN`] before the deadline.
    CutOff(Duration),
}

/// Runs `work` unless (not `first`) less than [`START_MARGIN`] is left before `deadline`, and
/// cuts it off [`RESPONSE_MARGIN`] before it. Without a deadline it just runs.
pub async fn run_before<F: Future>(
    deadline: Option<SystemTime>,
    first: bool,
    work: F,
) -> Timed<F::Output> {
    let left = deadline.map(|d| d.duration_since(SystemTime::now()).unwrap_or_default());
    if !first && left.is_some_and(|left| left < START_MARGIN) {
        return Timed::NotStarted;
    }
    match left.map(|left| left.saturating_sub(RESPONSE_MARGIN)) {
        None => Timed::Done(work.await),
        Some(budget) => match tokio::time::timeout(budget, work).await {
            Ok(done) => Timed::Done(done),
            Err(_) => Timed::CutOff(budget),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_starts_and_ends_inside_the_margins() {
        let now = SystemTime::now();
        let soon = Some(now + Duration::from_secs(8));
        assert!(matches!(
            run_before(soon, true, async { 1 }).await,
            Timed::Done(1)
        ));
        assert!(matches!(
            run_before(soon, false, async { 1 }).await,
            Timed::NotStarted
        ));
        let later = Some(now + Duration::from_secs(60));
        let hung = run_before(later, false, std::future::pending::<()>()).await;
        assert!(
            matches!(hung, Timed::CutOff(budget) if budget <= Duration::from_secs(55)),
            "{hung:?}"
        );
        assert!(matches!(
            run_before(None, false, async { 2 }).await,
            Timed::Done(2)
        ));
        assert_eq!(of_invocation(Some(now - Duration::from_secs(1))), None);
    }
}
