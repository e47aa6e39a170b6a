"""The strict moto must reject Glue UpdateTable with a stale VersionId, like AWS does."""

import threading
from collections import Counter

import boto3
import pytest
from botocore.exceptions import ClientError


def _table_input(name: str, location: str) -> dict:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {"table_type": "ICEBERG", "metadata_location": location},
    }


def test_update_table_enforces_version_id(glue_database):
    # Two independent clients, as two lakemirror processes would have.
    writer_a, writer_b = boto3.client("glue"), boto3.client("glue")
    writer_a.create_table(DatabaseName=glue_database, TableInput=_table_input("t", "s3://b/m0.json"))

    seen_a = writer_a.get_table(DatabaseName=glue_database, Name="t")["Table"]["VersionId"]
    seen_b = writer_b.get_table(DatabaseName=glue_database, Name="t")["Table"]["VersionId"]
    assert seen_a == seen_b == "1"

    writer_a.update_table(DatabaseName=glue_database, TableInput=_table_input("t", "s3://b/m1.json"), VersionId=seen_a)

    with pytest.raises(ClientError) as err:
        writer_b.update_table(DatabaseName=glue_database, TableInput=_table_input("t", "s3://b/m2.json"), VersionId=seen_b)
    assert err.value.response["Error"]["Code"] == "ConcurrentModificationException"
    assert err.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400

    # The loser's write must not have landed.
    table = writer_b.get_table(DatabaseName=glue_database, Name="t")["Table"]
    assert table["Parameters"]["metadata_location"] == "s3://b/m1.json"
    fresh = table["VersionId"]
    assert fresh == "2"

    writer_b.update_table(DatabaseName=glue_database, TableInput=_table_input("t", "s3://b/m2.json"), VersionId=fresh)
    table = writer_a.get_table(DatabaseName=glue_database, Name="t")["Table"]
    assert table["Parameters"]["metadata_location"] == "s3://b/m2.json"
    assert table["VersionId"] == "3"


def test_update_table_without_version_id_still_increments(glue, glue_database):
    glue.create_table(DatabaseName=glue_database, TableInput=_table_input("t", "s3://b/m0.json"))
    glue.update_table(DatabaseName=glue_database, TableInput=_table_input("t", "s3://b/m1.json"))
    assert glue.get_table(DatabaseName=glue_database, Name="t")["Table"]["VersionId"] == "2"


def test_update_missing_table_is_entity_not_found(glue, glue_database):
    with pytest.raises(ClientError) as err:
        glue.update_table(DatabaseName=glue_database, TableInput=_table_input("nope", "s3://b/m.json"), VersionId="1")
    assert err.value.response["Error"]["Code"] == "EntityNotFoundException"


def test_get_tables_answers_in_pages_of_100_like_aws(glue, glue_database):
    for n in range(101):
        glue.create_table(DatabaseName=glue_database, TableInput=_table_input(f"t{n:03}", "s3://b/m.json"))
    first = glue.get_tables(DatabaseName=glue_database)
    assert len(first["TableList"]) == 100 and first["NextToken"]
    rest = glue.get_tables(DatabaseName=glue_database, NextToken=first["NextToken"])
    assert [t["Name"] for t in rest["TableList"]] == ["t100"] and "NextToken" not in rest
    paged = [t["Name"] for page in glue.get_paginator("get_tables").paginate(DatabaseName=glue_database)
             for t in page["TableList"]]
    assert paged == [f"t{n:03}" for n in range(101)]


def _race(n, attempt):
    """Run attempt(i) in n threads released together; return the error codes (None = success)."""
    barrier = threading.Barrier(n)
    codes = [None] * n

    def run(i):
        barrier.wait()
        try:
            attempt(i)
        except ClientError as e:
            codes[i] = e.response["Error"]["Code"]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def test_concurrent_updates_with_same_version_id_one_wins(glue_database):
    clients = [boto3.client("glue") for _ in range(8)]  # boto3 clients are not shared across threads
    clients[0].create_table(DatabaseName=glue_database, TableInput=_table_input("t", "s3://b/m0.json"))
    codes = _race(8, lambda i: clients[i].update_table(
        DatabaseName=glue_database, TableInput=_table_input("t", f"s3://b/w{i}.json"), VersionId="1"))
    assert Counter(codes) == {None: 1, "ConcurrentModificationException": 7}
    table = clients[0].get_table(DatabaseName=glue_database, Name="t")["Table"]
    assert table["VersionId"] == "2"
    assert table["Parameters"]["metadata_location"] == f"s3://b/w{codes.index(None)}.json"


def test_concurrent_put_if_none_match_one_wins(bucket):
    # Delta commits rely on this. moto's race window is too narrow for this test to notice a
    # missing _put_lock; it does catch a moto that stops honouring If-None-Match.
    clients = [boto3.client("s3") for _ in range(8)]
    codes = _race(8, lambda i: clients[i].put_object(
        Bucket=bucket, Key="_delta_log/00000000000000000001.json", Body=f"writer {i}".encode(), IfNoneMatch="*"))
    assert Counter(codes) == {None: 1, "PreconditionFailed": 7}
    body = clients[0].get_object(Bucket=bucket, Key="_delta_log/00000000000000000001.json")["Body"].read()
    assert body == f"writer {codes.index(None)}".encode()
