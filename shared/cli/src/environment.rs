//! Every function's environment ([`FUNCTIONS`]), and the one place that holds each declared
//! variable to what the rest of the house says of it: `template.yaml` (the function's
//! `Environment.Variables`, the parameter's `Default` and `AllowedValues`),
//! `docs/deployment.md` (a row per parameter, naming the variable and the CLI flag) and the
//! CLI (a flag that reads a variable is spelled from its name).

use lakemirror_runtime::settings::{Environment, Variable};

/// Each function's `template.yaml` resource and environment.
pub(crate) const FUNCTIONS: [(&str, Environment); 3] = [
    ("GlueSyncFunction", glue_sync::ENVIRONMENT),
    ("LakebaseSyncFunction", lakebase_sync::ENVIRONMENT),
    ("UnityRegisterFunction", unity_register::ENVIRONMENT),
];

/// The variable called `name`, declared by any function.
pub(crate) fn declared(name: &str) -> Option<&'static Variable> {
    FUNCTIONS
        .iter()
        .flat_map(|(_, environment)| environment.iter())
        .map(|wired| wired.variable)
        .find(|variable| variable.name == name)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use clap::CommandFactory;
    use lakemirror_runtime::settings::SetBy;

    use super::*;

    /// Parameters whose template `Default` is not their variable's declared default, and why.
    const TEMPLATE_DEFAULT_OF_ITS_OWN: &[(&str, &str)] = &[
        (
            "MemorySize",
            "the function's memory; unset, the code takes the memory Lambda gives",
        ),
        (
            "LakebaseMemorySize",
            "the function's memory; unset, the code takes the memory Lambda gives",
        ),
        (
            "LakebaseAllowedSchemas",
            "unset, the code allows any schema; a deployment narrows it to public",
        ),
    ];

    /// Parameters without a default whose docs row says what unset means in other words than
    /// "empty", and why.
    const DERIVED_DEFAULT: &[(&str, &str)] = &[
        (
            "RestCatalogOAuth2ServerUri",
            "unset, it is derived from the catalog's URI",
        ),
        (
            "RestCatalogSigningRegion",
            "unset, it is the stack's region",
        ),
    ];

    /// Set by a parameter, yet no CLI flag reads it, and why.
    const NOT_IN_THE_CLI: &[(&str, &str)] = &[
        (
            "REST_CATALOG_TOKEN_SECRET_ARN",
            "the CLI takes the token itself (--rest-catalog-token)",
        ),
        (
            "REST_CATALOG_CREDENTIAL_SECRET_ARN",
            "the CLI takes the credential itself (--rest-catalog-credential)",
        ),
        ("RUST_LOG", "the CLI's log filter is LAKEMIRROR_LOG"),
    ];

    fn read(path: &str) -> String {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        std::fs::read_to_string(format!("{root}/{path}")).unwrap()
    }

    /// The lines below `header` (its own indentation) that are indented deeper.
    fn block<'a>(text: &'a str, header: &str) -> Vec<&'a str> {
        let start = text
            .find(&format!("\n{header}\n"))
            .unwrap_or_else(|| panic!("no {header:?}"));
        let indent = header.len() - header.trim_start().len();
        text[start + 1..]
            .lines()
            .skip(1)
            .take_while(|line| line.len() - line.trim_start().len() > indent)
            .collect()
    }

    /// A function's `Environment.Variables`: each name with its value's text.
    fn template_variables(template: &str, resource: &str) -> Vec<(String, String)> {
        let function = block(template, &format!("  {resource}:"));
        let start = function
            .iter()
            .position(|line| line.trim() == "Variables:")
            .unwrap_or_else(|| panic!("{resource} has no Environment.Variables"));
        let mut variables: Vec<(String, String)> = Vec::new();
        for line in function[start + 1..]
            .iter()
            .take_while(|l| l.starts_with("          "))
        {
            match line
                .strip_prefix("          ")
                .and_then(|l| l.split_once(':'))
            {
                Some((name, value)) if !name.starts_with(' ') => {
                    variables.push((name.to_string(), value.to_string()))
                }
                _ => {
                    if let Some((_, value)) = variables.last_mut() {
                        value.push_str(line);
                    }
                }
            }
        }
        variables
    }

    /// A parameter's `Default` and `AllowedValues`.
    fn template_parameter(template: &str, parameter: &str) -> (String, Vec<String>) {
        let lines = block(template, &format!("  {parameter}:"));
        let field = |name: &str| {
            lines
                .iter()
                .find_map(|line| line.trim().strip_prefix(name))
                .map(|value| value.trim().trim_matches('"').to_string())
        };
        let allowed = field("AllowedValues:")
            .map(|list| {
                list.trim_matches(['[', ']'])
                    .split(',')
                    .map(|v| v.trim().trim_matches('"').to_string())
                    .collect()
            })
            .unwrap_or_default();
        (field("Default:").unwrap_or_default(), allowed)
    }

    /// Every flag of the CLI, in every subcommand: (long, variable it reads).
    fn cli_flags() -> Vec<(String, Option<String>)> {
        fn walk(command: &clap::Command, flags: &mut Vec<(String, Option<String>)>) {
            for arg in command.get_arguments() {
                if let Some(long) = arg.get_long() {
                    let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                    flags.push((long.to_string(), env));
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, flags);
            }
        }
        let mut flags = Vec::new();
        walk(&crate::Cli::command(), &mut flags);
        flags
    }

    #[test]
    fn template_docs_and_cli_say_of_each_variable_what_its_declaration_says() {
        let template = read("template.yaml");
        let docs = read("docs/deployment.md");
        let flags = cli_flags();
        let mut wrong = Vec::new();
        for (resource, environment) in FUNCTIONS {
            let in_template = template_variables(&template, resource);
            let names: BTreeSet<&str> = in_template.iter().map(|(n, _)| n.as_str()).collect();
            let wired: BTreeSet<&str> = environment
                .iter()
                .filter(|w| matches!(w.set_by, SetBy::Parameter(_) | SetBy::Resource(_)))
                .map(|w| w.variable.name)
                .collect();
            if names != wired {
                wrong.push(format!(
                    "{resource}: template.yaml sets {names:?}, the environment declares {wired:?}"
                ));
            }
            for wired in environment.iter() {
                let variable = wired.variable;
                let flag = variable.flag();
                let read_by_cli: Vec<&String> = flags
                    .iter()
                    .filter(|(_, env)| env.as_deref() == Some(variable.name))
                    .map(|(long, _)| long)
                    .collect();
                for long in &read_by_cli {
                    if format!("--{long}") != flag {
                        wrong.push(format!(
                            "the CLI's --{long} reads {}: spell it {flag}",
                            variable.name
                        ));
                    }
                }
                let (SetBy::Parameter(reference) | SetBy::Resource(reference)) = wired.set_by
                else {
                    if !docs.contains(&format!("`{}`", variable.name)) {
                        wrong.push(format!(
                            "docs/deployment.md does not name {}",
                            variable.name
                        ));
                    }
                    continue;
                };
                let value = in_template
                    .iter()
                    .find(|(n, _)| n == variable.name)
                    .map(|(_, v)| v.as_str())
                    .unwrap_or_default();
                if !value.contains(&format!("!Ref {reference}")) {
                    wrong.push(format!(
                        "{resource}: {} is not set from {reference}",
                        variable.name
                    ));
                }
                let SetBy::Parameter(parameter) = wired.set_by else {
                    continue;
                };
                if read_by_cli.is_empty()
                    && !NOT_IN_THE_CLI.iter().any(|(n, _)| *n == variable.name)
                {
                    wrong.push(format!("no CLI flag reads {} (add {flag})", variable.name));
                }
                let (default, allowed) = template_parameter(&template, parameter);
                // An empty template Default leaves the variable unset, which is its declared
                // default; any other must be the declared default itself.
                let own = TEMPLATE_DEFAULT_OF_ITS_OWN
                    .iter()
                    .any(|(p, _)| *p == parameter);
                if !default.is_empty() && Some(default.as_str()) != variable.default && !own {
                    wrong.push(format!(
                        "{parameter}: Default {default:?}, {} says {:?}",
                        variable.name, variable.default
                    ));
                }
                if !variable.values.is_empty() && allowed != variable.values {
                    wrong.push(format!(
                        "{parameter}: AllowedValues {allowed:?}, {} says {:?}",
                        variable.name, variable.values
                    ));
                }
                let Some(row) = docs
                    .lines()
                    .find(|line| line.starts_with(&format!("| `{parameter}` |")))
                else {
                    wrong.push(format!("docs/deployment.md has no row for {parameter}"));
                    continue;
                };
                let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
                let shown = match (default.as_str(), variable.default) {
                    ("", Some(declared)) => Some(declared),
                    ("", None) => None,
                    (default, _) => Some(default),
                };
                let derived = DERIVED_DEFAULT.iter().any(|(p, _)| *p == parameter);
                let shows = match shown {
                    Some(shown) => cells[1].starts_with(&format!("`{shown}`")),
                    None => derived || cells[1].starts_with("empty") || cells[1] == "required",
                };
                if !shows {
                    let shown = shown.map_or("empty".to_string(), |s| format!("`{s}`"));
                    wrong.push(format!(
                        "docs/deployment.md: {parameter}'s default is {shown}: {row}"
                    ));
                }
                let last = cells.last().copied().unwrap_or_default();
                if !last.contains(&format!("`{}`", variable.name)) {
                    wrong.push(format!(
                        "docs/deployment.md: {parameter}'s row does not name {}",
                        variable.name
                    ));
                }
                if !read_by_cli.is_empty() && !last.contains(&flag) {
                    wrong.push(format!(
                        "docs/deployment.md: {parameter}'s row does not name {flag}"
                    ));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_functions_variables_are_read_with_their_continued_values() {
        let template = "Resources:\n  F:\n    Properties:\n      Environment:\n        Variables:\n          A: !Ref P\n          B: !Join\n            - !Ref Q\n  G:\n";
        let variables = template_variables(template, "F");
        assert_eq!(variables.len(), 2);
        assert_eq!(variables[0], ("A".to_string(), " !Ref P".to_string()));
        assert!(variables[1].1.contains("!Ref Q"));
    }
}
