//! Crash points for tests: `LAKEMIRROR_CRASH_AT=<step>` aborts the process at that step, the
//! way a killed Lambda or a lost machine would stop it, so tests can show that a crash there
//! leaves a consistent state. Unset (always, in production) it does nothing.

/// Environment variable naming the step to crash at.
pub const CRASH_AT: &str = "LAKEMIRROR_CRASH_AT";

/// Aborts the process when `CRASH_AT` names `step`.
pub fn point(step: &str) {
    if std::env::var(CRASH_AT).is_ok_and(|wanted| wanted == step) {
        eprintln!("{CRASH_AT}={step}: aborting here, as a test asked");
        std::process::abort();
    }
}
