"""No confused deputy: whoever may write one table's files (and so its `_lakemirror/` folder)
cannot make the functions read, expire or delete another table's files. Each test performs
the attack and shows it failing safely."""

import shutil

from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import write_manifest_list

from acceptance.mirror_check import assert_mirrors
from acceptance.glue_sync.test_expiry import local_keys, write_aged_commits
from rig import judge


def local_table(root, ages_days):
    def put(key, body):
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(body)

    write_aged_commits(None, None, None, ages_days, put=put)
    return str(root)


def test_an_expired_manifest_list_naming_another_tables_manifest_deletes_nothing_of_it(
        tmp_path, glue_database, lakemirror, java_iceberg):
    b = local_table(tmp_path / "b", [1])
    mirrored_b = lakemirror("glue-sync", "--table-uri", b, "--glue-database", glue_database)
    a = local_table(tmp_path / "a", [30, 20, 10, 1])
    lakemirror("glue-sync", "--table-uri", a, "--glue-database", glue_database, "--to-version", 0)

    # A's writer rewrites A's manifest list of version 0 (which the next sync expires) so that
    # it also names B's manifest: expiry would delete the manifests only expired lists name.
    catalog = judge.glue_catalog()
    table_a, table_b = catalog.load_table((glue_database, "a")), catalog.load_table((glue_database, "b"))
    old = table_a.current_snapshot()
    manifests = old.manifests(table_a.io) + table_b.current_snapshot().manifests(table_b.io)
    forged = tmp_path / "forged.avro"
    with write_manifest_list(2, PyArrowFileIO().new_output(str(forged)), old.snapshot_id, None,
                             old.sequence_number, "null") as writer:
        writer.add_manifests(manifests)
    shutil.copy(forged, old.manifest_list.removeprefix("file://"))
    b_files = local_keys(tmp_path / "b")

    result = lakemirror("glue-sync", "--table-uri", a, "--glue-database", glue_database, check=False)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "outside its metadata folder" in last and "nothing was written" in last, last
    assert local_keys(tmp_path / "b") == b_files, "nothing of B was deleted"
    assert [s["summary"]["delta.version"] for s in judge.iceberg_snapshots(glue_database, "a")] == ["0"]
    assert_mirrors(b, glue_database, "b", mirrored_b, java=java_iceberg)


def test_a_lakebase_config_cannot_be_planted_by_data_writers_nor_ask_more_than_the_stack_allows(
        bucket, s3, delta_storage_options, postgres_url, function_postgres_env, lakemirror, tmp_path):
    import json

    import psycopg
    import pyarrow as pa
    from deltalake import write_deltalake

    from acceptance.lakebase.test_lakebase import pg_rows
    from acceptance.lakebase.test_lakebase_function import SCHEDULE

    uri = f"s3://{bucket}/lake/orders"
    write_deltalake(uri, pa.table({"id": pa.array([1, 2], pa.int64())}), storage_options=delta_storage_options)
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute("CREATE TABLE public.victim (secret text)")
        con.execute("INSERT INTO public.victim VALUES ('keep me')")
        con.execute("CREATE SCHEMA admin")
    event = tmp_path / "tick.json"
    event.write_text(json.dumps(SCHEDULE))

    def run(env):
        env = {**function_postgres_env, "TABLE_PREFIXES": f"s3://{bucket}/lake",
               "LAKEBASE_ALLOWED_SCHEMAS": "public", **env}
        return lakemirror("invoke", "lakebase-sync", "--event", event, env=env, check=False)

    # 1. A data writer plants a config next to the tables: refused, whatever it says.
    planted = f'[[tables]]\nsource.path = "{uri}"\ntarget.table_name = "orders"\n'
    s3.put_object(Bucket=bucket, Key="lake/lakebase.toml", Body=planted.encode())
    result = run({"LAKEBASE_CONFIG_URI": f"s3://{bucket}/lake/lakebase.toml"})
    assert result.returncode != 0 and "TABLE_PREFIXES" in result.stderr.strip().splitlines()[-1], result.stderr
    # ... nor by spellings that pass a prefix check on the text but read the planted key
    # (S3 clients drop the empty segment; `..` climbs back into the tables' prefix).
    for hidden in [f"s3://{bucket}//lake/lakebase.toml", f"s3://{bucket}/config/../lake/lakebase.toml",
                   f"S3://{bucket}/lake/lakebase.toml"]:
        result = run({"LAKEBASE_CONFIG_URI": hidden})
        last = result.stderr.strip().splitlines()[-1]
        assert result.returncode != 0 and hidden in last, result.stderr
        assert "segment" in last or "TABLE_PREFIXES" in last, last
    # 2. A config may not replace a table lakemirror did not create unless the stack allows it.
    replace = f'[[tables]]\nsource.path = "{uri}"\ntarget.table_name = "victim"\nsync.conflict_on_existing = "replace"\n'
    result = run({"LAKEBASE_CONFIG": replace})
    assert result.returncode != 0 and "LAKEBASE_ALLOW_REPLACE" in result.stderr, result.stderr
    assert pg_rows(postgres_url, '"public"."victim"', ["secret"]) == [("keep me",)]
    # 3. ... nor write outside the allowed schemas.
    elsewhere = f'[[tables]]\nsource.path = "{uri}"\ntarget.table_name = "admin.users"\n'
    result = run({"LAKEBASE_CONFIG": elsewhere})
    assert result.returncode != 0 and "LAKEBASE_ALLOWED_SCHEMAS" in result.stderr, result.stderr
    with psycopg.connect(postgres_url) as con:
        assert con.execute("SELECT to_regclass('admin.users')").fetchone() == (None,)
    # The same config kept where only the stack's owners write, and a replace the stack allows.
    s3.put_object(Bucket=bucket, Key="config/lakebase.toml", Body=replace.encode())
    allowed = run({"LAKEBASE_CONFIG_URI": f"s3://{bucket}/config/lakebase.toml", "LAKEBASE_ALLOW_REPLACE": "true"})
    assert allowed.returncode == 0, allowed.stderr
    assert sorted(pg_rows(postgres_url, '"public"."victim"', ["id"])) == [(1,), (2,)]


def test_one_hung_table_does_not_hold_up_the_others_in_its_batch(
        bucket, glue_database, delta_storage_options, moto_endpoint, lakemirror, tmp_path):
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    from acceptance.glue_sync.test_invoke import moto_style_s3_record, sqs_record
    from rig.fault_proxy import FaultProxy

    for name in ("quick", "hung"):
        write_deltalake(f"s3://{bucket}/lake/{name}", pa.table({"id": pa.array([1], pa.int64())}),
                        storage_options=delta_storage_options)
    commit = lambda name: json.dumps({"Records": [moto_style_s3_record(bucket, f"lake/{name}/_delta_log/{0:020}.json")]})
    event = tmp_path / "batch.json"
    # The hung table first: before, it ran past the function's timeout and the whole batch
    # came back, the quick table included, until every message was dead-lettered.
    event.write_text(json.dumps({"Records": [sqs_record("hung", commit("hung")), sqs_record("quick", commit("quick"))]}))
    with FaultProxy(moto_endpoint, rate=0, stall=f"/{bucket}/lake/hung/", stall_seconds=120) as proxy:
        result = lakemirror("invoke", "glue-sync", "--event", event, "--glue-database", glue_database,
                            "--timeout-seconds", "30", env={"AWS_ENDPOINT_URL": proxy.url})
    assert [f["itemIdentifier"] for f in result.json["batchItemFailures"]] == ["hung"]
    tables = [t[1] for t in judge.glue_catalog().list_tables(glue_database)]
    assert tables == ["quick"], "the quick table was mirrored, nothing of the hung one"
    judge.assert_same_rows([(1,)], judge.iceberg_rows_pyiceberg(glue_database, "quick"))


def test_one_hung_table_does_not_hold_lakebase_sync_past_its_deadline(
        bucket, delta_storage_options, moto_endpoint, postgres_url, function_postgres_env, lakemirror, tmp_path):
    """A table whose reads hang (issue 29): its sync is cut off before the invocation's
    deadline and rolled back, the invocation answers in time, and only its message comes back;
    before, the function ran into its timeout and the whole batch was delivered again."""
    import json

    import boto3
    import psycopg
    import pyarrow as pa
    from deltalake import write_deltalake

    from acceptance.glue_sync.test_invoke import moto_style_s3_record, sqs_record
    from acceptance.lakebase.test_lakebase import pg_rows
    from acceptance.lakebase.test_lakebase_function import config, without_password
    from rig.fault_proxy import FaultProxy
    from rig.postgres import PASSWORD

    uris = {name: f"s3://{bucket}/lake/{name}" for name in ("quick", "hung")}
    for uri in uris.values():
        write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}), storage_options=delta_storage_options)
    secret_arn = boto3.client("secretsmanager").create_secret(
        Name=f"lakebase-deadline-{bucket}", SecretString=PASSWORD)["ARN"]
    lakebase_config = config((uris["quick"], "app.quick", "1 hour"), (uris["hung"], "app.hung", "1 hour"))
    announce = lambda name: sqs_record(f"m-{name}", json.dumps(
        {"Records": [moto_style_s3_record(bucket, f"lake/{name}/_delta_log/{0:020}.json")]}))
    event = tmp_path / "batch.json"
    event.write_text(json.dumps({"Records": [announce("hung"), announce("quick")]}))
    with FaultProxy(moto_endpoint, rate=0, stall=f"/{bucket}/lake/hung/", stall_seconds=120) as proxy:
        result = lakemirror("invoke", "lakebase-sync", "--event", event, "--timeout-seconds", "30",
                            env={"LAKEBASE_CONFIG": lakebase_config, **function_postgres_env,
                                 "POSTGRES_URL": without_password(function_postgres_env["POSTGRES_URL"]),
                                 "POSTGRES_PASSWORD_SECRET_ARN": secret_arn, "AWS_ENDPOINT_URL": proxy.url})
    assert result.json == {"batchItemFailures": [{"itemIdentifier": "m-hung"}]}, result.stderr
    assert "did not finish" in result.stderr, result.stderr
    assert pg_rows(postgres_url, '"app"."quick"', ["id"]) == [(1,)]
    with psycopg.connect(postgres_url) as con:
        assert con.execute("SELECT to_regclass('app.hung')").fetchone() == (None,), "nothing of it was changed"


def test_the_function_verifies_the_database_and_refuses_plaintext_unless_allowed(
        tmp_path, postgres_server, postgres_url, function_postgres_env, lakemirror):
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    from acceptance.lakebase.test_lakebase_function import SCHEDULE
    from rig.postgres import PASSWORD

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array([1], pa.int64())}))
    event = tmp_path / "tick.json"
    event.write_text(json.dumps(SCHEDULE))
    config = f'[[tables]]\nsource.path = "{path}"\ntarget.table_name = "t"\n'
    run = lambda **env: lakemirror("invoke", "lakebase-sync", "--event", event, check=False,
                                   env={"LAKEBASE_CONFIG": config, **env})
    secure = function_postgres_env
    # No sslmode: verify-full, so a server whose CA the function was not given is refused.
    unknown_ca = run(POSTGRES_URL=secure["POSTGRES_URL"])
    assert unknown_ca.returncode != 0 and "certificate" in unknown_ca.stderr.lower(), unknown_ca.stderr
    # A downgrade to a mode that may fall back to plaintext is refused before connecting.
    downgraded = secure["POSTGRES_URL"] + "?sslmode=prefer"
    refused = run(POSTGRES_URL=downgraded, POSTGRES_CA_PEM=secure["POSTGRES_CA_PEM"])
    assert refused.returncode != 0 and "POSTGRES_ALLOW_INSECURE" in refused.stderr, refused.stderr
    for result in (unknown_ca, refused):
        assert PASSWORD not in result.stdout + result.stderr
    assert run(**secure).returncode == 0, "the CA given: verified and synced"
    assert run(POSTGRES_URL=downgraded, POSTGRES_ALLOW_INSECURE="true").returncode == 0


def test_commit_events_of_tables_lakebase_does_not_copy_open_no_database_connection(
        bucket, delta_storage_options, lakemirror, tmp_path):
    # A burst of commits elsewhere in the bucket must not cost the database anything: the
    # function decides before it connects (here the database is not even reachable).
    import json
    import socket

    import pyarrow as pa
    from deltalake import write_deltalake

    from acceptance.glue_sync.test_invoke import moto_style_s3_record, sqs_record

    copied = f"s3://{bucket}/gold/copied"
    write_deltalake(copied, pa.table({"id": pa.array([1], pa.int64())}), storage_options=delta_storage_options)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    burst = [sqs_record(f"m{n}", json.dumps({"Records": [moto_style_s3_record(
        bucket, f"raw/t{n % 7}/_delta_log/{n:020}.json")]})) for n in range(200)]
    event = tmp_path / "burst.json"
    event.write_text(json.dumps({"Records": burst}))
    result = lakemirror("invoke", "lakebase-sync", "--event", event, env={
        "LAKEBASE_CONFIG": f'[[tables]]\nsource.path = "{copied}"\ntarget.table_name = "copied"\n',
        "POSTGRES_URL": f"postgres://app@127.0.0.1:{closed_port}/db"})
    # An SQS batch is answered with the messages to redeliver: none.
    assert result.json == {"batchItemFailures": []}


def test_a_burst_of_commits_opens_no_more_connections_than_the_queue_lets_invocations_run(
        moto_endpoint, postgres_server, postgres_url, delta_storage_options, tmp_path):
    """The stack's lakebase queue runs at most LakebaseMaxConcurrency invocations at once, and
    each opens one connection. Locally: the event loop's SQS event source with that
    concurrency, and a database role that may hold no more connections than that (one more
    would fail its sync, and the messages would end up in the dead-letter queue)."""
    import sys
    import uuid
    from pathlib import Path

    import boto3
    import psycopg
    import pyarrow as pa
    from deltalake import write_deltalake

    from acceptance.lakebase.test_lakebase import pg_rows
    from conftest import REPO

    sys.path.insert(0, str(REPO / "localstack"))
    from event_loop import EventLoop, LoopSettings, wait_until

    concurrency = 2
    database = postgres_url.split("?")[0].rsplit("/", 1)[-1]
    with psycopg.connect(postgres_url, autocommit=True) as con:
        con.execute(f"CREATE ROLE burst LOGIN PASSWORD 'burst' CONNECTION LIMIT {concurrency}")
        con.execute(f'ALTER DATABASE "{database}" OWNER TO burst')
    tag = uuid.uuid4().hex[:12]
    settings = LoopSettings(
        bucket=f"lm-burst-{tag}", glue_database=f"lm_burst_{tag}", queue_name=f"lm-burst-{tag}",
        endpoint=moto_endpoint, log_dir=tmp_path / "loop", batch_size=1, batching_window_seconds=0,
        max_concurrency=concurrency, max_receive_count=3, function="lakebase-sync",
        function_env={
            "LAKEBASE_CONFIG": f'[[tables]]\nsource.path = "s3://lm-burst-{tag}/gold/orders"\n'
                               f'target.table_name = "orders"\nsync.mode = "incremental"\nsync.primary_key = "id"\n',
            "POSTGRES_URL": f"postgres://burst:burst@localhost:{postgres_server.port}/{database}",
            "POSTGRES_CA_PEM": Path(postgres_server.ca_file).read_text(),
        })
    uri = f"s3://{settings.bucket}/gold/orders"
    s3 = boto3.client("s3")
    s3.create_bucket(Bucket=settings.bucket)
    # The table exists before the loop starts: its warm-up invocation is a schedule tick.
    write_deltalake(uri, pa.table({"id": pa.array([0], pa.int64())}), storage_options=delta_storage_options)
    with EventLoop(settings) as loop:
        for n in range(1, 30):  # commits of the copied table, each an event
            write_deltalake(uri, pa.table({"id": pa.array([n], pa.int64())}), mode="append",
                            storage_options=delta_storage_options)
        for n in range(120):  # and commits of tables it does not copy
            s3.put_object(Bucket=settings.bucket, Key=f"raw/t{n % 9}/_delta_log/{n:020}.json", Body=b"{}")
        wait_until(lambda: loop.queue_depths() == (0, 0) and loop.stats.delivered >= 149, 300,
                   "every commit event handled")
        assert loop.queue_depths() == (0, 0), "nothing failed into the dead-letter queue"
        assert loop.stats.failed == 0, "no invocation failed (one connection too many would)"
    assert sorted(pg_rows(postgres_url, '"public"."orders"', ["id"])) == [(n,) for n in range(30)]
