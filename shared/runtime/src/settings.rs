//! The environment variables the functions read, each declared once ([`Variable`]) in the
//! room that reads it, and each function's environment ([`Environment`]): which variables it
//! reads and what sets each (a SAM parameter of `template.yaml`, Lambda itself, or a local
//! run). The CLI flag of a variable is spelled from its name.
//!
//! One test (`shared/cli/src/environment.rs`) holds every declaration to `template.yaml`,
//! `docs/deployment.md` and the CLI, and each function's test records the names its wiring
//! asks for: a variable read but not declared, or declared but never read, fails it.

use std::collections::BTreeSet;
use std::sync::Mutex;

/// One environment variable, declared once.
#[derive(Debug)]
pub struct Variable {
    /// Its name, as the function's environment has it.
    pub name: &'static str,
    /// What the code does when it is unset or blank, as it would be written; None: it is then
    /// absent (the help says what that means).
    pub default: Option<&'static str>,
    /// The values it takes, when they are a list.
    pub values: &'static [&'static str],
    /// What it does, first line first.
    pub help: &'static str,
}

impl Variable {
    /// The CLI flag that reads it: the name in lower case, `-` for `_`.
    pub fn flag(&self) -> String {
        format!("--{}", self.name.to_lowercase().replace('_', "-"))
    }

    /// Its value in `setting` (the process's environment): None when unset or blank.
    pub fn value(&self, setting: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        setting(self.name).filter(|v| !v.trim().is_empty())
    }
}

/// What sets a function's variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// This parameter of `template.yaml`, in the function's `Environment.Variables`.
    Parameter(&'static str),
    /// This resource of `template.yaml` (`!Ref` it), in the function's `Environment.Variables`.
    Resource(&'static str),
    /// Lambda, in every function's environment (the template does not set it).
    Lambda,
    /// A local run (tests, `sam local`, LocalStack); a deployment leaves it unset.
    Local,
}

/// One variable of a function's environment.
#[derive(Debug, Clone, Copy)]
pub struct Wired {
    pub variable: &'static Variable,
    pub set_by: SetBy,
}

impl Wired {
    /// Set by the SAM parameter `parameter`.
    pub const fn parameter(variable: &'static Variable, parameter: &'static str) -> Self {
        Self {
            variable,
            set_by: SetBy::Parameter(parameter),
        }
    }

    /// Set from the template's resource `resource`.
    pub const fn resource(variable: &'static Variable, resource: &'static str) -> Self {
        Self {
            variable,
            set_by: SetBy::Resource(resource),
        }
    }

    /// Set by Lambda.
    pub const fn lambda(variable: &'static Variable) -> Self {
        Self {
            variable,
            set_by: SetBy::Lambda,
        }
    }

    /// Set only by a local run.
    pub const fn local(variable: &'static Variable) -> Self {
        Self {
            variable,
            set_by: SetBy::Local,
        }
    }
}

/// A function's environment: every variable it reads, each once.
pub type Environment = &'static [Wired];

/// `RUST_LOG`: the functions' log filter, read by `lambda_runtime`'s tracing subscriber.
pub const RUST_LOG: Variable = Variable {
    name: "RUST_LOG",
    default: Some("info"),
    values: &[],
    help: "The log filter, e.g. debug or lakemirror=debug,info.",
};

/// `AWS_LAMBDA_LOG_FORMAT`: `JSON` for structured logs, read by `lambda_runtime`.
pub const AWS_LAMBDA_LOG_FORMAT: Variable = Variable {
    name: "AWS_LAMBDA_LOG_FORMAT",
    default: None,
    values: &[],
    help: "JSON for structured logs (Lambda sets it from the function's logging configuration).",
};

/// The variables read by code that is not ours (`lambda_runtime`): no wiring of ours asks for
/// them, so the record of what a function asks for does not hold them.
pub const READ_BY_THE_RUNTIME: &[&Variable] = &[&RUST_LOG, &AWS_LAMBDA_LOG_FORMAT];

/// A lookup that answers from given values and keeps every name it is asked for: a test
/// hands it to a function's wiring to learn which variables the wiring reads.
#[derive(Debug, Default)]
pub struct Recorder {
    given: Vec<(&'static str, String)>,
    asked: Mutex<BTreeSet<String>>,
}

impl Recorder {
    /// Answers `given`, and None for every other name.
    pub fn answering(given: &[(&'static str, &str)]) -> Self {
        Self {
            given: given.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            asked: Mutex::default(),
        }
    }

    /// The lookup.
    pub fn setting(&self, name: &str) -> Option<String> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.insert(name.to_string());
        }
        self.given
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    }

    /// The names asked for so far.
    pub fn asked(&self) -> BTreeSet<String> {
        self.asked.lock().map(|a| a.clone()).unwrap_or_default()
    }
}

/// Every name `wiring` asks its lookup for, run once with each of `given` (the values the
/// lookup answers; every other name is unset): what a function's wiring reads.
pub async fn names_read(
    given: &[&[(&'static str, &str)]],
    wiring: impl AsyncFn(&dyn Fn(&str) -> Option<String>),
) -> BTreeSet<String> {
    let mut read = BTreeSet::new();
    for values in given {
        let recorder = Recorder::answering(values);
        wiring(&|name: &str| recorder.setting(name)).await;
        read.extend(recorder.asked());
    }
    read
}

/// What is wrong with `environment` against the names its wiring `asked` for: names asked
/// but not declared, names declared (and not read by the runtime) but never asked, names
/// declared twice. Empty when they agree.
pub fn disagreements(environment: Environment, asked: &BTreeSet<String>) -> Vec<String> {
    let mut wrong = Vec::new();
    let declared: BTreeSet<&str> = environment.iter().map(|w| w.variable.name).collect();
    if declared.len() != environment.len() {
        wrong.push("a variable is declared twice".to_string());
    }
    for name in asked {
        if !declared.contains(name.as_str()) {
            wrong.push(format!("{name} is read but not declared"));
        }
    }
    let by_runtime: BTreeSet<&str> = READ_BY_THE_RUNTIME.iter().map(|v| v.name).collect();
    for name in declared {
        if !asked.contains(name) && !by_runtime.contains(name) {
            wrong.push(format!("{name} is declared but never read"));
        }
    }
    wrong
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Variable = Variable {
        name: "A_SETTING",
        default: None,
        values: &[],
        help: "a",
    };
    const B: Variable = Variable {
        name: "B_SETTING",
        default: None,
        values: &[],
        help: "b",
    };

    #[test]
    fn a_flag_is_spelled_from_the_name_and_blank_is_unset() {
        assert_eq!(A.flag(), "--a-setting");
        let recorder = Recorder::answering(&[("A_SETTING", " "), ("B_SETTING", "x")]);
        assert_eq!(A.value(&|n| recorder.setting(n)), None);
        assert_eq!(B.value(&|n| recorder.setting(n)).as_deref(), Some("x"));
        assert_eq!(
            recorder.asked(),
            ["A_SETTING", "B_SETTING"].map(String::from).into()
        );
    }

    #[test]
    fn a_name_read_undeclared_or_declared_unread_disagrees() {
        const ENVIRONMENT: Environment = &[Wired::parameter(&A, "A"), Wired::lambda(&RUST_LOG)];
        let asked = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        assert!(disagreements(ENVIRONMENT, &asked(&["A_SETTING"])).is_empty());
        assert_eq!(
            disagreements(ENVIRONMENT, &asked(&["A_SETTING", "B_SETTING"])),
            ["B_SETTING is read but not declared"]
        );
        assert_eq!(
            disagreements(ENVIRONMENT, &asked(&[])),
            ["A_SETTING is declared but never read"]
        );
        const TWICE: Environment = &[Wired::parameter(&A, "A"), Wired::local(&A)];
        assert_eq!(
            disagreements(TWICE, &asked(&["A_SETTING"])),
            ["a variable is declared twice"]
        );
    }
}
