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

/// Runs `work` as the next of `turns` works that run one after another before `deadline`:
/// as [`run_before`], but cut off once it has taken its turn's share of the time left (the
/// time left before [`RESPONSE_MARGIN`], split evenly among the turns still to come). One
/// slow work cannot take the others' time; a work that finishes early leaves its time to
/// those after it, and the last one has all that is left.
pub async fn run_in_turn<F: Future>(
    deadline: Option<SystemTime>,
    first: bool,
    turns: usize,
    work: F,
) -> Timed<F::Output> {
    let left = deadline.map(|d| d.duration_since(SystemTime::now()).unwrap_or_default());
    if !first && left.is_some_and(|left| left < START_MARGIN) {
        return Timed::NotStarted;
    }
    let turns = u32::try_from(turns.max(1)).unwrap_or(u32::MAX);
    match left.map(|left| left.saturating_sub(RESPONSE_MARGIN) / turns) {
        None => Timed::Done(work.await),
        Some(share) => match tokio::time::timeout(share, work).await {
            Ok(done) => Timed::Done(done),
            Err(_) => Timed::CutOff(share),
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

    #[tokio::test(start_paused = true)]
    async fn a_work_in_turn_has_its_share_of_the_time_left_and_the_last_has_the_rest() {
        let deadline = Some(SystemTime::now() + Duration::from_secs(65));
        let hung = run_in_turn(deadline, true, 3, std::future::pending::<()>()).await;
        assert!(
            // A third of the 60 s left before the response margin (less what the test took).
            matches!(hung, Timed::CutOff(share) if share <= Duration::from_secs(20) && share > Duration::from_secs(19)),
            "{hung:?}"
        );
        assert!(matches!(
            run_in_turn(deadline, false, 2, async { 3 }).await,
            Timed::Done(3)
        ));
        let last = run_in_turn(deadline, false, 1, std::future::pending::<()>()).await;
        assert!(
            matches!(last, Timed::CutOff(share) if share > Duration::from_secs(20)),
            "the last turn has what is left: {last:?}"
        );
    }
}
