"""A setting has one name everywhere (issue 44): the SAM parameter in template.yaml, the
environment variable the function reads it from, the CLI flag with the same variable, and the
parameter table in docs/deployment.md that the README links for its settings. Each test is
one direction, so a setting missing from any one of them names itself."""

import re
import subprocess
from pathlib import Path

import pytest

from acceptance.deployment.test_template_iam import template

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs" / "deployment.md"

# The function variables whose flag is not the variable's name: the stack hands the function
# a secret's ARN, the CLI takes the secret itself (the table says so: "the CLI: --…").
SECRET_ARN_OF = {
    "REST_CATALOG_TOKEN_SECRET_ARN": "REST_CATALOG_TOKEN",
    "REST_CATALOG_CREDENTIAL_SECRET_ARN": "REST_CATALOG_CREDENTIAL",
    "UC_TOKEN_SECRET_ARN": "UC_TOKEN",
}


def documented() -> dict[str, str]:
    """docs/deployment.md's parameter rows: parameter -> its row's last cell (variable / flag)."""
    rows = {}
    for line in DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        # A row may hold a pair of parameters: "`UcCatalog`, `UcSchema`".
        if line.startswith("| `") and len(cells) >= 4 \
                and re.fullmatch(r"`[A-Z][A-Za-z0-9]+`(, `[A-Z][A-Za-z0-9]+`)*", cells[0]):
            for name in cells[0].split(", "):
                rows[name.strip("`")] = cells[-1]
    return rows


def parameter_variables() -> list[tuple[str, str, str]]:
    """(function, variable, parameter) for every function variable set straight from a parameter."""
    found = []
    for logical_id, resource in template()["Resources"].items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        variables = resource["Properties"].get("Environment", {}).get("Variables", {})
        for variable, value in variables.items():
            if isinstance(value, dict) and isinstance(value.get("!Ref"), str) \
                    and value["!Ref"] in template()["Parameters"]:
                found.append((logical_id, variable, value["!Ref"]))
    return found


@pytest.fixture(scope="module")
def cli_help(lakemirror_bin) -> str:
    """Every `--help` of the CLI: the top level, each subcommand and each nested one."""
    def help_of(*words):
        return subprocess.run([str(lakemirror_bin), *words, "--help"], capture_output=True, text=True,
                              check=True).stdout

    def subcommands(text):
        section = text.split("Commands:", 1)[1].split("\n\n", 1)[0] if "Commands:" in text else ""
        return [line.split()[0] for line in section.splitlines() if line.strip() and line.split()[0] != "help"]

    texts, todo = [], [()]
    while todo:
        words = todo.pop()
        text = help_of(*words)
        texts.append(text)
        todo.extend((*words, sub) for sub in subcommands(text))
    return "\n".join(texts)


def test_every_parameter_has_a_row_in_the_settings_table():
    missing = sorted(set(template()["Parameters"]) - set(documented()))
    assert missing == [], f"parameters without a row in {DOCS.name}: {missing}"


def test_every_row_names_a_parameter_of_the_template():
    unknown = sorted(set(documented()) - set(template()["Parameters"]))
    assert unknown == [], f"rows in {DOCS.name} for parameters template.yaml lacks: {unknown}"


def test_every_variable_a_function_reads_from_a_parameter_is_named_in_its_row():
    rows = documented()
    unnamed = [(f, v, p) for f, v, p in parameter_variables()
               if p in rows and f"`{v}`" not in rows[p] and v != "RUST_LOG"]
    assert unnamed == [], f"(function, variable, parameter) whose row does not name the variable: {unnamed}"


def test_every_such_variable_is_a_cli_flag_reading_the_same_variable(cli_help):
    """`[env: X]` in the CLI's help for each variable a function reads from a parameter, so
    a back-fill with the CLI and the deployed function read a setting by one name."""
    flagged = set(re.findall(r"\[env: ([A-Z0-9_]+)", cli_help))
    wanted = {SECRET_ARN_OF.get(v, v) for _, v, _ in parameter_variables() if v != "RUST_LOG"}
    missing = sorted(wanted - flagged)
    assert missing == [], f"variables the functions read that no CLI flag reads: {missing}"


def test_every_flag_a_row_names_exists_with_the_rows_variable(cli_help):
    """A row's `VAR` / `--flag` pair: the flag exists and reads that variable."""
    wrong = []
    for parameter, cell in documented().items():
        for variable, flag in re.findall(r"`([A-Z0-9_]+)` / `(--[a-z0-9-]+)`", cell):
            options = [line for line in cli_help.splitlines() if re.search(rf"{flag}\b", line)]
            if not options:
                wrong.append((parameter, flag, "no such flag"))
            elif not re.search(rf"{flag}\b[^\n]*(\n(?!\s*-)[^\n]*)*\[env: {variable}\b", cli_help):
                wrong.append((parameter, flag, f"does not read {variable}"))
    assert wrong == [], wrong
