//! Crash points for tests: with `LAKEMIRROR_CRASH_AT=<step>` (read once by the binary's
//! `main`, which calls [`arm`]) the process aborts at that step, the way a killed Lambda or a
//! lost machine would stop it, so tests can show that a crash there leaves a consistent
//! state. Unarmed (always, in production) a point does nothing.

use std::sync::OnceLock;

/// Environment variable naming the step to crash at.
pub const CRASH_AT: crate::settings::Variable = crate::settings::Variable {
    name: "LAKEMIRROR_CRASH_AT",
    default: None,
    values: &[],
    help: "Tests only: the step at which the process aborts, as a killed Lambda stops.",
};

static ARMED: OnceLock<Option<String>> = OnceLock::new();

/// Arms the crash point `step` (the value of [`CRASH_AT`]) for the life of the process; the
/// first call wins.
pub fn arm(step: Option<String>) {
    let _ = ARMED.set(step.filter(|s| !s.is_empty()));
}

/// Aborts the process when the armed step is `step`.
pub fn point(step: &str) {
    if ARMED.get().and_then(Option::as_deref) == Some(step) {
        eprintln!("{}={step}: aborting here, as a test asked", CRASH_AT.name);
        std::process::abort();
    }
}
