"""template.yaml's CloudWatch dashboard and scheduled verify: the dashboard (CreateDashboard,
on by default) is valid JSON whichever optional functions and queues the stack has, names only
resources that exist with it, shows every queue of the stack, and charts only lakemirror
metrics that the Rust code emits; the verify schedule (VerifySchedule, off by default) and the
catch-up schedule (CatchUpSchedule, every 15 minutes) send the glue-sync function exactly the
input its handler recognises."""

import itertools
import json
import re
from pathlib import Path

import pytest

from acceptance.deployment.test_template_iam import as_list, statements, template

REPO = Path(__file__).resolve().parents[3]
RUST_SOURCES = REPO / "shared"
METRICS_SOURCE = RUST_SOURCES / "runtime" / "src" / "metrics.rs"

# What the dashboard charts from the lakemirror namespace; a change here is a change to the
# metrics the Rust code must emit (shared/runtime/src/metrics.rs).
EXPECTED_METRICS = {
    "Table": {"SyncLag", "SyncDuration", "SyncFailed", "SourceMissing", "MirrorDrift", "OmittedColumns",
              "PublishedOnly"},
    "Target": {"ReverseSyncRows", "ReverseSyncDuration", "ReverseSyncFailed"},
}

PLACEHOLDER = re.compile(r"\$\{([^}!][^}]*)\}")
SEARCH = re.compile(r"SEARCH\('\{lakemirror,(\w+)\} MetricName=\"(\w+)\"'")


def dashboard():
    return template()["Resources"]["Dashboard"]


def body_parts():
    """The DashboardBody's Fn::Sub template string and its variable map."""
    sub = dashboard()["Properties"]["DashboardBody"]["!Sub"]
    assert isinstance(sub, list) and len(sub) == 2, "DashboardBody is !Sub [body, {variables}]"
    return sub


def sub_text(value) -> str:
    """The template string of a !Sub (plain or with a map), or a literal string."""
    if isinstance(value, str):
        return value
    sub = value["!Sub"]
    return sub if isinstance(sub, str) else sub[0]


def conditional_variables():
    """{variable: (condition, fragment when true, fragment when false)} of the body's map."""
    _, variables = body_parts()
    out = {}
    for name, value in variables.items():
        assert "!If" in value, f"{name}: a body variable is a fragment present only with its resource"
        condition, yes, no = value["!If"]
        out[name] = (condition, sub_text(yes), sub_text(no))
    return out


def renderings():
    """The dashboard body as CloudFormation would render it, for every combination of the
    conditions of its variables; other ${...} placeholders become dummy names."""
    body, _ = body_parts()
    variables = conditional_variables()
    conditions = sorted({condition for condition, _, _ in variables.values()})
    for values in itertools.product([True, False], repeat=len(conditions)):
        state = dict(zip(conditions, values))
        text = body
        for name, (condition, yes, no) in variables.items():
            text = text.replace("${" + name + "}", yes if state[condition] else no)
        text = PLACEHOLDER.sub(lambda m: "dummy-" + re.sub(r"\W", "-", m.group(1)), text)
        yield state, text


def all_dashboard_text() -> str:
    """The body and every fragment it substitutes (unrendered)."""
    body, _ = body_parts()
    return body + "".join(yes + no for name, (_, yes, no) in conditional_variables().items()
                          if "${" + name + "}" in body)


def test_the_dashboard_is_optional_on_by_default_and_named_after_the_stack():
    t = template()
    parameter = t["Parameters"]["CreateDashboard"]
    assert parameter["Type"] == "String"
    assert parameter["AllowedValues"] == ["true", "false"] and parameter["Default"] == "true"
    assert t["Conditions"]["ShouldCreateDashboard"] == {"!Equals": [{"!Ref": "CreateDashboard"}, "true"]}
    resource = dashboard()
    assert resource["Type"] == "AWS::CloudWatch::Dashboard"
    assert resource["Condition"] == "ShouldCreateDashboard"
    assert "${AWS::StackName}" in sub_text(resource["Properties"]["DashboardName"])
    output = t["Outputs"]["DashboardUrl"]
    assert output["Condition"] == "ShouldCreateDashboard"
    assert "${Dashboard}" in sub_text(output["Value"]) and "cloudwatch" in sub_text(output["Value"])


def test_the_dashboard_body_is_json_with_and_without_the_optional_resources():
    seen = 0
    for state, text in renderings():
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as e:
            pytest.fail(f"DashboardBody is not JSON with {state}: {e}\n{text}")
        widgets = parsed["widgets"]
        assert len(widgets) >= 10, state
        for widget in widgets:
            assert widget["type"] == "metric"
            props = widget["properties"]
            assert props["title"] and props["region"] and props["metrics"], widget
            assert all(isinstance(row, list) and row for row in props["metrics"]), widget
        seen += 1
    assert seen >= 4, "the optional functions' and queues' conditions are all exercised"


def test_the_dashboard_names_only_resources_that_exist_with_it():
    """The body itself names only unconditional resources; each variable fragment names only
    resources of its own condition (cfn-lint checks this too; this says which)."""
    t = template()
    resources, parameters = t["Resources"], t["Parameters"]
    body, _ = body_parts()
    variables = conditional_variables()

    def referenced(text):
        for name in PLACEHOLDER.findall(text):
            yield name.split(".")[0]

    for name in referenced(body):
        if name in variables or name in parameters or name.startswith("AWS::"):
            continue
        assert name in resources, f"the body names {name}, which is no resource"
        assert resources[name].get("Condition") in (None, "ShouldCreateDashboard"), \
            f"the body names {name} unconditionally, but it exists only with {resources[name]['Condition']}"
    for variable, (condition, yes, no) in variables.items():
        assert "${" + variable + "}" in body, f"{variable} is never substituted into the body"
        assert no == "", f"{variable}: without {condition} the row is left out"
        names = [n for n in referenced(yes) if not n.startswith("AWS::")]
        assert names, f"{variable}: names the resource it charts"
        for name in names:
            assert resources[name].get("Condition") == condition, \
                f"{variable} is present with {condition} but names {name}"


def dashboard_lakemirror_metrics():
    """{(dimension, metric)} the dashboard charts from the lakemirror namespace, in any
    rendering: SEARCH expressions, and any explicit ["lakemirror", "<metric>", ...] row."""
    charted = set()
    for _, text in renderings():
        for widget in json.loads(text)["widgets"]:
            for row in widget["properties"]["metrics"]:
                if isinstance(row[0], dict) and "expression" in row[0]:
                    expression = row[0]["expression"]
                    found = SEARCH.findall(expression)
                    assert found or "lakemirror" not in expression, f"unrecognised expression {expression}"
                    charted.update(found)
                elif row[0] == "lakemirror":
                    charted.add((row[2] if len(row) > 2 and isinstance(row[2], str) else "?", row[1]))
    return charted


def test_the_dashboard_charts_the_lakemirror_metrics_per_table_and_target():
    charted = dashboard_lakemirror_metrics()
    expected = {(dim, m) for dim, metrics in EXPECTED_METRICS.items() for m in metrics}
    assert charted == expected


def emitted_metrics() -> set[str]:
    """The metrics the Rust code can emit: each is a `Metric` variant of
    shared/runtime/src/metrics.rs, named in CloudWatch as the variant is
    (`Metric::X => "X"`)."""
    names = set(re.findall(r'Metric::(\w+) => "\1"', METRICS_SOURCE.read_text()))
    assert names, f"no `Metric::X => \"X\"` arms in {METRICS_SOURCE.relative_to(REPO)}"
    return names


def emitting_sources_text() -> str:
    files = [f for f in sorted(RUST_SOURCES.rglob("*.rs")) if f != METRICS_SOURCE]
    assert files, f"no Rust sources under {RUST_SOURCES}"
    return "\n".join(f.read_text(errors="replace") for f in files)


@pytest.mark.parametrize("metric", sorted({m for _, m in dashboard_lakemirror_metrics()}))
def test_every_charted_lakemirror_metric_is_emitted_by_the_rust_code(metric):
    """A metric the Rust code never emits would chart nothing: each charted metric is a
    `Metric` of shared/runtime/src/metrics.rs, and some function records it
    (`.with(Metric::X, ...)`)."""
    assert metric in emitted_metrics(), f"{metric} is not a Metric in {METRICS_SOURCE.relative_to(REPO)}"
    recorded = re.search(r"\.with\(\s*Metric::" + metric + r"\b", emitting_sources_text())
    assert recorded, f"no `.with(Metric::{metric}, ...)` under {RUST_SOURCES.relative_to(REPO)}"


def test_every_queue_of_the_stack_is_on_the_dashboard():
    resources = template()["Resources"]
    queues = sorted(n for n, r in resources.items() if r["Type"] == "AWS::SQS::Queue")
    assert len(queues) >= 6
    text = all_dashboard_text()
    for queue in queues:
        dead_letters = "DeadLetter" in queue
        metric = "ApproximateNumberOfMessagesVisible" if dead_letters else "ApproximateAgeOfOldestMessage"
        rows = [row for row in re.findall(r"\[[^\[\]]*\]", text) if "${" + queue + ".QueueName}" in row]
        assert rows, f"{queue} is not on the dashboard"
        assert any(f'"AWS/SQS", "{metric}"' in row for row in rows), f"{queue}: no {metric} row"


def test_every_function_has_errors_and_throttles_on_the_dashboard():
    resources = template()["Resources"]
    functions = sorted(n for n, r in resources.items() if r["Type"] == "AWS::Serverless::Function")
    rows = re.findall(r"\[[^\[\]]*\]", all_dashboard_text())
    for function in functions:
        for metric in ("Errors", "Throttles"):
            assert any(f'"AWS/Lambda", "{metric}", "FunctionName", "${{{function}}}"' in row for row in rows), \
                f"{function}: no {metric} row"


# Each schedule: its parameter's default, its rule and the input the handler matches.
SCHEDULES = {"VerifySchedule": ("", "VerifyRule", "verify"),
             "CatchUpSchedule": ("rate(15 minutes)", "CatchUpRule", "catch-up")}


def test_only_lakemirror_schedules_invoke_the_function():
    rules = [n for n, r in template()["Resources"].items()
             if r["Type"] == "AWS::Events::Rule" and "ScheduleExpression" in r["Properties"]]
    assert sorted(rules) == sorted(rule for _, rule, _ in SCHEDULES.values())


@pytest.mark.parametrize("parameter_name", SCHEDULES)
def test_a_schedule_sends_the_input_the_handler_recognises(parameter_name):
    """The verify schedule is off by default; the catch-up (lost events heal by themselves)
    runs every 15 minutes unless turned off."""
    default, rule_name, control = SCHEDULES[parameter_name]
    condition = f"Has{parameter_name}"
    t = template()
    parameter = t["Parameters"][parameter_name]
    assert parameter["Type"] == "String" and parameter["Default"] == default
    assert t["Conditions"][condition] == {"!Not": [{"!Equals": [{"!Ref": parameter_name}, ""]}]}
    resources = t["Resources"]
    rule = resources[rule_name]
    assert rule["Condition"] == condition
    assert rule["Properties"]["ScheduleExpression"] == {"!Ref": parameter_name}
    (target,) = rule["Properties"]["Targets"]
    assert target["Arn"] == {"!GetAtt": "GlueSyncFunction.Arn"}
    # The handler matches this JSON; keep it byte for byte.
    assert target["Input"] == json.dumps({"lakemirror": control}, separators=(",", ":"))
    # The same input as the sample event `lakemirror invoke` takes.
    sample = REPO / "functions" / "glue-sync" / "events" / f"{control}.json"
    assert json.loads(sample.read_text()) == json.loads(target["Input"])

    permissions = [r for r in resources.values() if r["Type"] == "AWS::Lambda::Permission"
                   and r["Properties"].get("SourceArn") == {"!GetAtt": f"{rule_name}.Arn"}]
    assert len(permissions) == 1
    (permission,) = permissions
    assert permission["Condition"] == condition
    assert permission["Properties"]["Principal"] == "events.amazonaws.com"
    assert permission["Properties"]["Action"] == "lambda:InvokeFunction"
    assert permission["Properties"]["FunctionName"] == {"!Ref": "GlueSyncFunction"}


def test_the_mirror_behind_alarm_watches_the_metric_the_catch_up_emits():
    alarm = template()["Resources"]["MirrorBehindAlarm"]
    assert alarm["Condition"] == "HasCatchUpSchedule"
    properties = alarm["Properties"]
    assert (properties["Namespace"], properties["MetricName"]) == ("lakemirror", "MirrorBehind")
    assert properties["Dimensions"] == [{"Name": "Database", "Value": {"!Ref": "GlueDatabase"}}]
    assert '"MirrorBehind"' in METRICS_SOURCE.read_text()
    emitter = (RUST_SOURCES / "mirror" / "src" / "function.rs").read_text()
    assert 'MetricRecord::new("Database"' in emitter and "Metric::MirrorBehind" in emitter


def test_glue_sync_may_list_only_the_mirror_database_tables():
    """verify finds the mirrors with glue:GetTables, on GlueDatabase only."""
    role = template()["Resources"]["GlueSyncRole"]
    listing = [s for s in statements(role) if "glue:GetTables" in as_list(s["Action"])]
    assert len(listing) == 1
    assert [sub_text(r) for r in as_list(listing[0]["Resource"])] == [
        "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:catalog",
        "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:database/${GlueDatabase}",
        "arn:${AWS::Partition}:glue:${AWS::Region}:${AWS::AccountId}:table/${GlueDatabase}/*",
    ]
