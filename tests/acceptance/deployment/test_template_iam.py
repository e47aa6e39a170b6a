"""template.yaml grants each function what it needs and nothing wider: every action is named
(no `*`), every resource is scoped (no bare `*`, no wildcard bucket, database or account),
the functions use the stack's explicit roles (so SAM attaches no managed policies of its
own), and the only managed policy is AWS's VPC-access policy, only with a VPC."""

from pathlib import Path

import pytest
import yaml

TEMPLATE = Path(__file__).resolve().parents[3] / "template.yaml"

# What each role may do; a change here is a change to the security review in the README.
EXPECTED_ACTIONS = {
    "GlueSyncRole": {
        "s3:GetObject", "s3:ListBucket", "s3:PutObject", "s3:DeleteObject",
        "glue:GetTable", "glue:CreateTable", "glue:UpdateTable",
        "glue:GetTables",  # the scheduled verify lists the mirrors
        "glue:DeleteTable",  # only with OnMissingSource=drop
        "glue:GetCatalog", "glue:GetDatabase",  # only with RestCatalogUri (Glue's Iceberg REST endpoint)
        "secretsmanager:GetSecretValue",  # only with RestCatalog{Token,Credential}SecretArn or UcTokenSecretArn
        "sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
        "kms:Decrypt", "kms:GenerateDataKey",
        "logs:CreateLogStream", "logs:PutLogEvents",
    },
    "LakebaseSyncRole": {
        "s3:GetObject", "s3:ListBucket", "secretsmanager:GetSecretValue", "kms:Decrypt",
        "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",  # its commit queue
        "logs:CreateLogStream", "logs:PutLogEvents",
    },
    "UnityRegisterRole": {
        "s3:GetObject", "s3:ListBucket", "secretsmanager:GetSecretValue", "kms:Decrypt",
        "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",  # its commit queue
        "logs:CreateLogStream", "logs:PutLogEvents",
    },
}


class CfnLoader(yaml.SafeLoader):
    pass


def _tag(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {f"!{suffix}": value}


CfnLoader.add_multi_constructor("!", _tag)


def template():
    return yaml.load(TEMPLATE.read_text(), Loader=CfnLoader)


def branches(value):
    """Every value a possibly conditional (!If) value can take; AWS::NoValue dropped."""
    if isinstance(value, dict) and "!If" in value:
        _, yes, no = value["!If"]
        return branches(yes) + branches(no)
    if value == {"!Ref": "AWS::NoValue"}:
        return []
    return [value]


def statements(role):
    for policy in role["Properties"].get("Policies", []):
        for statement in policy["PolicyDocument"]["Statement"]:
            yield from branches(statement)


def as_list(value):
    """A string-or-list field (Action, Resource) as the flat list of what it may hold."""
    out = []
    for v in branches(value):
        if isinstance(v, list):
            for item in v:
                out.extend(as_list(item))
        else:
            out.append(v)
    return out


def resource_text(resource) -> str:
    """The ARN pattern of a resource: the template string of a !Sub, the name of a !Ref or !GetAtt."""
    if isinstance(resource, str):
        return resource
    if "!Sub" in resource:
        sub = resource["!Sub"]
        return sub if isinstance(sub, str) else sub[0]
    if "!Ref" in resource:
        return "ref:" + resource["!Ref"]
    if "!GetAtt" in resource:
        return "getatt:" + str(resource["!GetAtt"])
    raise AssertionError(f"unexpected resource form {resource}")


ROLES = sorted(EXPECTED_ACTIONS)


@pytest.mark.parametrize("role_name", ROLES)
def test_roles_name_every_action_and_scope_every_resource(role_name):
    role = template()["Resources"][role_name]
    actions = set()
    for statement in statements(role):
        assert statement["Effect"] == "Allow"
        for action in as_list(statement["Action"]):
            assert "*" not in action, f"{role_name}: wildcard action {action}"
            actions.add(action)
        for resource in as_list(statement["Resource"]):
            text = resource_text(resource)
            assert text.strip() != "*", f"{role_name}: {statement.get('Sid')} grants every resource"
            scoped = "${AWS::AccountId}" in text or text.startswith(
                ("arn:${AWS::Partition}:s3:::${DataBucket}", "ref:", "getatt:")) or (
                statement.get("Sid") == "ReadLakebaseConfig" and is_the_config_object(resource))
            assert scoped, f"{role_name}: {statement.get('Sid')} resource {text} is not scoped to the stack's bucket or account"
            for wide in ("database/*", "table/*", "secret:*", "log-group:*", "queue/*"):
                assert wide not in text, f"{role_name}: {statement.get('Sid')} resource {text} spans {wide}"
            if text.startswith("arn:${AWS::Partition}:s3:::${DataBucket}/"):
                assert text.split("${DataBucket}/", 1)[1].startswith("${P}"), \
                    f"{role_name}: object access {text} is not under a table prefix"
    assert actions == EXPECTED_ACTIONS[role_name]


def is_the_config_object(resource) -> bool:
    """The one S3 object LakebaseConfigUri names (split out of "<uri>s3://")."""
    return resource == {"!Sub": ["arn:${AWS::Partition}:s3:::${O}", {"O": {"!Select": [1, {"!Split": [
        "s3://", {"!Sub": "${LakebaseConfigUri}s3://"}]}]}}]}


def test_the_lakebase_config_is_read_from_its_own_object_only():
    role = template()["Resources"]["LakebaseSyncRole"]
    raw = role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    (config,) = [s["!If"] for s in raw if isinstance(s, dict) and "!If" in s
                 and s["!If"][1].get("Sid") == "ReadLakebaseConfig"]
    assert config[0] == "HasLakebaseConfigUri" and config[2] == {"!Ref": "AWS::NoValue"}
    assert config[1]["Action"] == "s3:GetObject" and is_the_config_object(config[1]["Resource"])


def test_functions_use_the_explicit_roles_and_only_the_vpc_policy_is_managed():
    resources = template()["Resources"]
    functions = {n: r for n, r in resources.items() if r["Type"] == "AWS::Serverless::Function"}
    assert sorted(functions) == ["GlueSyncFunction", "LakebaseSyncFunction", "UnityRegisterFunction"]
    for name, function in functions.items():
        props = function["Properties"]
        assert "Policies" not in props, f"{name}: SAM Policies would attach managed policies"
        assert props["Role"]["!GetAtt"].endswith("Role.Arn")
    assert "ManagedPolicyArns" not in resources["GlueSyncRole"]["Properties"]
    assert "ManagedPolicyArns" not in resources["UnityRegisterRole"]["Properties"]
    managed = resources["LakebaseSyncRole"]["Properties"]["ManagedPolicyArns"]
    assert managed["!If"][0] == "HasLakebaseVpc" and managed["!If"][2] == {"!Ref": "AWS::NoValue"}
    assert [resource_text(a) for a in managed["!If"][1]] == [
        "arn:${AWS::Partition}:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"]


def secret_statements(role_name):
    role = template()["Resources"][role_name]
    raw = role["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    return {
        s["!If"][1]["Sid"]: (s["!If"][0], s["!If"][1]["Resource"])
        for s in raw
        if isinstance(s, dict) and "!If" in s and s["!If"][1].get("Action") == "secretsmanager:GetSecretValue"
    }


def test_secrets_are_read_only_where_configured_and_only_the_configured_ones():
    assert secret_statements("GlueSyncRole") == {
        "ReadRestCatalogToken": ("HasRestCatalogTokenSecret", {"!Ref": "RestCatalogTokenSecretArn"}),
        "ReadRestCatalogCredential": ("HasRestCatalogCredentialSecret", {"!Ref": "RestCatalogCredentialSecretArn"}),
        # Catalog-managed tables: Unity Catalog names the commits it ratified.
        "ReadUnityCatalogToken": ("HasUnitySecret", {"!Ref": "UcTokenSecretArn"}),
    }
    assert secret_statements("LakebaseSyncRole") == {
        "ReadPostgresPassword": ("HasLakebaseSecret", {"!Ref": "PostgresPasswordSecretArn"}),
        "ReadPostgresCa": ("HasLakebaseCaSecret", {"!Ref": "PostgresCaSecretArn"}),
        "ReadUnityCatalogToken": ("HasLakebaseUnitySecret", {"!Ref": "UcTokenSecretArn"}),
    }
    assert secret_statements("UnityRegisterRole") == {
        "ReadUnityCatalogToken": ("HasUnitySecret", {"!Ref": "UcTokenSecretArn"}),
    }
    statements_with_secrets = [
        s for name in ROLES for s in statements(template()["Resources"][name])
        if "secretsmanager:GetSecretValue" in as_list(s["Action"])
    ]
    assert len(statements_with_secrets) == 7


def test_kms_is_used_only_through_s3():
    for name in ROLES:
        for statement in statements(template()["Resources"][name]):
            if any(a.startswith("kms:") for a in as_list(statement["Action"])):
                assert statement["Condition"]["StringEquals"]["kms:ViaService"] == {
                    "!Sub": "s3.${AWS::Region}.amazonaws.com"}, name


def test_each_consumer_has_its_own_queue_dead_letter_queue_and_concurrency_cap():
    resources = template()["Resources"]
    targets = resources["SyncRule"]["Properties"]["Targets"]
    arns = [t["Arn"]["!GetAtt"] for target in targets for t in branches(target)]
    assert arns == ["SyncQueue.Arn", "LakebaseQueue.Arn", "UnityQueue.Arn"], "the rule invokes no function directly"
    for queue, dead_letters, mapping, cap in (
            ("LakebaseQueue", "LakebaseDeadLetterQueue", "LakebaseCommits", "LakebaseMaxConcurrency"),
            ("UnityQueue", "UnityDeadLetterQueue", "UnityCommits", "UnityMaxConcurrency")):
        redrive = resources[queue]["Properties"]["RedrivePolicy"]
        assert redrive["deadLetterTargetArn"] == {"!GetAtt": f"{dead_letters}.Arn"}
        props = resources[mapping]["Properties"]
        assert props["EventSourceArn"] == {"!GetAtt": f"{queue}.Arn"}
        assert props["ScalingConfig"]["MaximumConcurrency"] == {"!Ref": cap}
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"], "one failed table redelivers only its messages"
    glue = resources["GlueSyncFunction"]["Properties"]["Events"]["SyncQueue"]["Properties"]
    assert glue["ScalingConfig"]["MaximumConcurrency"] == {"!Ref": "MaxConcurrency"}


def test_the_event_rule_matches_only_commits_under_the_table_prefixes():
    keys = template()["Resources"]["SyncRule"]["Properties"]["EventPattern"]["detail"]["object"]["key"]
    patterns = [branch["wildcard"]["!Sub"][0] for key in keys for branch in branches(key)]
    assert len(patterns) == 8 and set(patterns) == {"${P}*_delta_log/*.json"}


FUNCTIONS = {"GlueSyncFunction": "glue-sync", "LakebaseSyncFunction": "lakebase-sync",
             "UnityRegisterFunction": "unity-register"}


def test_the_sam_local_env_files_set_every_variable_of_their_function():
    """`sam local invoke --env-vars` overrides only variables the template declares; a sample
    file that misses one leaves the unresolved template value in place."""
    import json
    resources = template()["Resources"]
    for logical_id, folder in FUNCTIONS.items():
        declared = set(resources[logical_id]["Properties"]["Environment"]["Variables"])
        sample = json.loads((TEMPLATE.parent / "functions" / folder / "events" / "env.json").read_text())
        assert list(sample) == [logical_id]
        assert set(sample[logical_id]) == declared, folder


def test_the_readme_sam_local_invoke_command_names_the_files_and_the_architecture():
    readme = (TEMPLATE.parent / "README.md").read_text()
    for logical_id, folder in FUNCTIONS.items():
        assert f"sam local invoke {logical_id} --env-vars functions/{folder}/events/env.json" in readme
    assert "--parameter-overrides Architecture=x86_64" in readme
    assert "amzn-s3-demo-bucket" in readme


def test_the_fan_out_state_machine_runs_the_glue_sync_function_steps_and_may_do_nothing_else():
    """Each step sends the glue-sync function an input its handler knows
    (`Control` in shared/events/src/trigger.rs); the machine may invoke only that function and
    run only its own Distributed Map children."""
    machine = template()["Resources"]["FanOutBootstrap"]["Properties"]
    states = machine["Definition"]["States"]
    part = states["Parts"]["ItemProcessor"]["States"]["Part"]
    steps = {name: state["Parameters"]["Payload"]
             for name, state in [("Plan", states["Plan"]), ("Part", part), ("Finish", states["Finish"])]}
    assert {name: payload["lakemirror"] for name, payload in steps.items()} == {
        "Plan": "fan-out-plan", "Part": "fan-out-part", "Finish": "fan-out-finish"}
    assert set(steps["Plan"]) == {"lakemirror", "table_uri.$", "parts.$"}
    assert set(steps["Part"]) == {"lakemirror", "plan.$", "part.$"}
    assert set(steps["Finish"]) == {"lakemirror", "plan.$"}
    trigger = (TEMPLATE.parent / "shared/events/src/trigger.rs").read_text()
    for kind in ("FanOutPlan { table_uri: String, parts: u32 }", "FanOutPart { plan: FanOutPlan, part: u32 }",
                 "FanOutFinish { plan: FanOutPlan }"):
        assert kind in trigger, f"the handler no longer takes {kind!r}"
    assert states["Parts"]["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert states["Parts"]["ItemsPath"] == "$.plan.part_numbers"
    for state in (states["Plan"], part, states["Finish"]):
        assert state["Parameters"]["FunctionName"] == "${GlueSyncFunctionArn}"
    assert machine["DefinitionSubstitutions"] == {"GlueSyncFunctionArn": {"!GetAtt": "GlueSyncFunction.Arn"}}
    policies = machine["Policies"]
    assert policies[0] == {"LambdaInvokePolicy": {"FunctionName": {"!Ref": "GlueSyncFunction"}}}
    actions = {a for s in policies[1]["Statement"] for a in as_list(s["Action"])}
    assert actions == {"states:StartExecution", "states:DescribeExecution", "states:StopExecution"}
    for statement in policies[1]["Statement"]:
        assert "fan-out-bootstrap" in resource_text(statement["Resource"])
