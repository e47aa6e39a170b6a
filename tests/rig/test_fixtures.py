"""The conftest fixtures do what the end-to-end tests rely on."""

import os

import boto3
import pytest

from rig import judge

SPECIAL_NAMES = ["delta-0.8.0-special-partition", "kernel-timestamp-partition-col-ISO8601"]


@pytest.mark.parametrize("name", SPECIAL_NAMES)
def test_upload_dir_keeps_names_and_bytes(name, delta_tables_dir, bucket, upload_dir):
    local = delta_tables_dir / name
    keys = upload_dir(local, bucket, f"tables/{name}/")

    expected = {f"tables/{name}/{p.relative_to(local).as_posix()}": p for p in local.rglob("*") if p.is_file()}
    assert any("%" in k for k in expected)  # the point of the test (the timestamp one has spaces too)
    listed = [o["Key"] for page in boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket)
              for o in page.get("Contents", [])]
    assert sorted(keys) == sorted(listed) == sorted(expected)
    for key, path in expected.items():
        body = boto3.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()
        assert body == path.read_bytes(), key

    # The copy is the same table: delta-rs and DuckDB read it from S3 as delta-rs reads it locally.
    uri = f"s3://{bucket}/tables/{name}"
    local_rows = judge.delta_rows(local)
    assert local_rows
    judge.assert_same_rows(local_rows, judge.delta_rows(uri))
    judge.assert_same_rows(local_rows, judge.delta_rows_duckdb(uri))


def test_moto_env_is_exported(moto_endpoint):
    assert os.environ["AWS_ENDPOINT_URL"] == moto_endpoint
    assert os.environ["AWS_ALLOW_HTTP"] == "true"
    assert boto3.client("sts").get_caller_identity()["Account"]  # STS is served too


FAKE_BIN = """#!/bin/sh
echo "progress line"
echo "args: $*" >&2
printf '{"endpoint": "%s", "args": "%s"}\\n' "$AWS_ENDPOINT_URL" "$*"
exit "${FAKE_RC:-0}"
"""


@pytest.fixture
def lakemirror_bin(tmp_path):
    """Stands in for the Rust binary so the runner itself can be tested without cargo."""
    path = tmp_path / "lakemirror"
    path.write_text(FAKE_BIN)
    path.chmod(0o755)
    return path


def test_lakemirror_runner(lakemirror, moto_endpoint):
    result = lakemirror("sync", "--table", 7)
    assert result.returncode == 0
    assert result.json == {"endpoint": moto_endpoint, "args": "sync --table 7"}
    assert result.stdout.startswith("progress line\n")
    assert result.stderr == "args: sync --table 7\n"

    failed = lakemirror("sync", check=False, env={"FAKE_RC": "3"})
    assert failed.returncode == 3 and failed.json is not None

    with pytest.raises(AssertionError, match="exited 3"):
        lakemirror("sync", env={"FAKE_RC": "3"})
