"""The mirror in an Iceberg REST catalog: a local rustberg server (tests/rig/rest_catalog.py)
instead of Glue. The judges: pyiceberg's RestCatalog reads through the catalog; Java Iceberg
and DuckDB read the metadata file the catalog names (the one the server wrote, which is what
a REST `loadTable` answers). Java does not read through Spark's `type=rest` catalog here: the
kit's PyPI runtime jar (../shared/tools/java-iceberg) lacks Iceberg's shaded Apache
HttpClient 5, so its REST client fails with NoClassDefFoundError
org/apache/iceberg/shaded/org/apache/hc/core5/http/Method, and no PyPI package carries it.
Tables live on local disk under the server's warehouse (rustberg is built here without S3, and
Java Iceberg in this rig reads file:// only)."""

import http.client
import json
import os
import shutil
import socket
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

import pytest
from deltalake import DeltaTable, write_deltalake

from acceptance.glue_sync.test_scenario import batch
from acceptance.glue_sync.test_shared_tables import (  # noqa: F401 - expected is a fixture
    REFUSED, UNREADABLE, expected, java_judge, omitted, shared_tables)
from acceptance.mirror_check import assert_mirrors
from rig import judge, rest_catalog


@pytest.fixture(scope="session")
def rest_server(tmp_path_factory):
    try:
        server = rest_catalog.start(tmp_path_factory.mktemp("rustberg"))
    except (RuntimeError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or ""
        pytest.fail(f"cannot start the REST catalog server: {e} {detail[-2000:]}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def namespace(rest_server):
    name = f"ns_{uuid.uuid4().hex[:12]}"
    rest_server.create_namespace(name)
    return name


@pytest.fixture
def rest(rest_server, namespace, lakemirror, java_iceberg):
    """Syncs and checks against the REST catalog: rest.sync(uri, *flags), rest.check(uri, result)."""

    class Rest:
        server = rest_server
        ns = namespace
        catalog = rest_server.catalog()

        def sync(self, uri, *extra, env=None, check=True, table="t"):
            return lakemirror("glue-sync", "--table-uri", uri, "--database", namespace, "--table", table,
                              *extra, env={**rest_server.env(), **(env or {})}, check=check)

        def check(self, uri, result, version=None, table="t", java=java_iceberg):
            # The report names the file the catalog points at.
            loaded = self.catalog.load_table((namespace, table))
            assert loaded.metadata_location == result.json["metadata_location"]
            return assert_mirrors(uri, namespace, table, result, version=version, java=java,
                                  catalog=self.catalog)

        def table_dir(self, name):
            path = rest_server.warehouse / namespace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            return path

    return Rest()


@pytest.mark.parametrize("name", [n for n in shared_tables() if n not in REFUSED])
def test_shared_table_mirrored_into_a_rest_catalog_matches_every_version(name, delta_tables_dir, expected, rest,
                                                                         java_iceberg):
    uri = str(rest.table_dir(name))
    shutil.copytree(delta_tables_dir / name, uri)
    readable = [v for v in range(expected[name]["version"] + 1) if v not in UNREADABLE.get(name, set())]
    for version in readable:
        result = rest.sync(uri, "--to-version", version)
        assert result.json["omitted_columns"] == omitted(name, version)
        # The server wrote the metadata, next to lakemirror's own (its staged file is gone).
        assert result.json["metadata_location"].startswith(f"file://{uri}/_lakemirror/iceberg/metadata/")
        rest.check(uri, result, version=version, java=java_judge(java_iceberg, name))
    assert len(judge.iceberg_rows_pyiceberg(rest.ns, "t", catalog=rest.catalog)) == \
        expected[name]["rows_by_version"][str(readable[-1])]


def test_every_step_of_a_tables_life_is_mirrored_into_a_rest_catalog(rest, lakemirror, java_iceberg):
    uri = str(rest.table_dir("orders"))

    def write(data, **kw):
        write_deltalake(uri, data, partition_by=["region"], **kw)

    write(batch(range(0, 12)))
    assert rest.check(uri, rest.sync(uri))[-1]["summary"]["operation"] == "append"
    write(batch(range(12, 20)), mode="append")
    rest.check(uri, rest.sync(uri))
    DeltaTable(uri).update(predicate="id < 4", updates={"amount": "amount + 100"})
    rest.check(uri, rest.sync(uri))
    DeltaTable(uri).delete("id >= 18")
    rest.check(uri, rest.sync(uri))
    DeltaTable(uri).optimize.compact()
    rest.check(uri, rest.sync(uri))
    # A new column: an add-schema update keeps lakemirror's field IDs.
    write(batch(range(20, 24), note="n"), mode="append", schema_mode="merge")
    rest.check(uri, rest.sync(uri))
    schema = rest.catalog.load_table((rest.ns, "t")).schema()
    assert schema.find_field("note").field_id > schema.find_field("region").field_id
    source = batch([1, 2, 100, 101], note="merged")
    (DeltaTable(uri).merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all().when_not_matched_insert_all().execute())
    rest.check(uri, rest.sync(uri))

    # verify and status read the mirror through the same catalog.
    verified = lakemirror("verify", "--table-uri", uri, "--glue-database", rest.ns, "--glue-table", "t",
                          env=rest.server.env())
    assert verified.json["equal"] is True, verified.json
    lines = lakemirror("status", "--glue-database", rest.ns, "--json", env=rest.server.env()).json["tables"]
    assert [(line["glue_table"].split(".", 1)[1], line["state"], line["mirrored_version"]) for line in lines] == \
        [("t", "caught-up", 6)], lines


def test_a_catch_up_is_one_commit_per_version_and_each_stays_in_the_snapshot_log(rest, java_iceberg):
    uri = str(rest.table_dir("events"))
    write_deltalake(uri, batch(range(0, 4)))
    rest.check(uri, rest.sync(uri))
    for start in (4, 8, 12):
        write_deltalake(uri, batch(range(start, start + 4)), mode="append")
    caught_up = rest.sync(uri)
    assert caught_up.json["snapshots_committed"] == 3
    snapshots = rest.check(uri, caught_up)
    table = rest.catalog.load_table((rest.ns, "t"))
    # Every version is in the server's snapshot log: time travel by timestamp reaches each.
    assert [e.snapshot_id for e in table.metadata.snapshot_log] == [s["snapshot_id"] for s in snapshots]
    for entry, version in zip(table.metadata.snapshot_log, range(4)):
        want = judge.delta_rows(uri, version=version)
        got = java_iceberg.rows(table.metadata_location, as_of_timestamp=entry.timestamp_ms)
        judge.assert_same_rows(want, got)
    again = rest.sync(uri)
    assert again.json["snapshots_committed"] == 0
    assert rest.catalog.load_table((rest.ns, "t")).metadata_location == table.metadata_location


class HoldingProxy:
    """A loopback proxy in front of the REST catalog that holds the first commit to a table
    (POST …/tables/<name>) until released, and can lose its answer (the commit is applied, the
    client gets a 502): the interleavings of two writers, made exact."""

    def __init__(self, upstream: str, lose_answer: bool = False):
        self.upstream = urlsplit(upstream)
        self.lose_answer = lose_answer
        self.arrived, self.release = threading.Event(), threading.Event()
        self.held = False
        self.answers: list[int] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                is_commit = (self.command == "POST" and "/tables/" in self.path
                             and not self.path.endswith("/register"))
                hold = is_commit and not proxy.held
                if hold:
                    proxy.held = True
                    proxy.arrived.set()
                    proxy.release.wait(120)
                conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                status = answer.status
                if hold:
                    proxy.answers.append(status)
                if hold and proxy.lose_answer:
                    status, data = 502, b'{"error": {"message": "bad gateway", "type": "BadGateway", "code": 502}}'
                rest_catalog.answer_json(self, status, data)

            do_GET = do_POST = do_DELETE = do_HEAD = forward

            def log_message(self, *args):
                pass

        self.server = rest_catalog.serve_on_loopback(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self):
        self.release.set()
        rest_catalog.stop_serving(self.server)


def background_sync(lakemirror_bin, rest, uri, url, *extra):
    env = {**os.environ, **rest.server.env(), "REST_CATALOG_URI": url}
    return subprocess.Popen([str(lakemirror_bin), "glue-sync", "--table-uri", uri, "--database", rest.ns,
                             "--table", "t", *map(str, extra)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_a_lost_race_is_a_409_and_the_sync_reads_again(rest, lakemirror_bin):
    uri = str(rest.table_dir("raced"))
    write_deltalake(uri, batch(range(0, 4)))
    rest.sync(uri)
    write_deltalake(uri, batch(range(4, 8)), mode="append")
    write_deltalake(uri, batch(range(8, 12)), mode="append")
    proxy = HoldingProxy(rest.server.url)
    try:
        # A reads the table at version 0 and is held at its commit of version 1 ...
        slow = background_sync(lakemirror_bin, rest, uri, proxy.url, "--to-version", 1)
        assert proxy.arrived.wait(120), "the first sync never committed"
        # ... while B commits versions 1 and 2 directly.
        fast = rest.sync(uri)
        assert fast.json["delta_version"] == 2
        proxy.release.set()
        out, err = slow.communicate(timeout=300)
    finally:
        proxy.stop()
    assert slow.returncode == 0, err
    assert proxy.answers == [409], "the server refused A's stale commit"
    report = json.loads(out.strip().splitlines()[-1])
    assert report["attempts"] == 2, report
    # Nothing was lost or doubled: the mirror is B's, at version 2.
    rest.check(uri, rest.sync(uri), version=2)
    versions = [s["summary"]["delta.version"] for s in judge.iceberg_snapshots(rest.ns, "t", catalog=rest.catalog)]
    assert versions == ["0", "1", "2"]


def test_a_commit_whose_answer_is_lost_is_settled_by_reading_the_table(rest, lakemirror_bin):
    uri = str(rest.table_dir("lost_answer"))
    write_deltalake(uri, batch(range(0, 4)))
    rest.sync(uri)
    write_deltalake(uri, batch(range(4, 8)), mode="append")
    proxy = HoldingProxy(rest.server.url, lose_answer=True)
    proxy.release.set()
    try:
        sync = background_sync(lakemirror_bin, rest, uri, proxy.url)
        out, err = sync.communicate(timeout=300)
    finally:
        proxy.stop()
    assert sync.returncode == 0, err
    assert proxy.answers == [200], "the server applied the commit; the client saw a 502"
    report = json.loads(out.strip().splitlines()[-1])
    assert (report["attempts"], report["delta_version"]) == (1, 1), report
    rest.check(uri, rest.sync(uri), version=1)
    assert len(judge.iceberg_snapshots(rest.ns, "t", catalog=rest.catalog)) == 2, "committed once"


def test_oauth2_client_credentials_are_exchanged_and_refreshed(rest):
    uri = str(rest.table_dir("oauth"))
    write_deltalake(uri, batch(range(0, 4)))
    endpoint = rest_catalog.TokenEndpoint(token=rest.server.key).start()
    try:
        env = {"REST_CATALOG_TOKEN": "", "REST_CATALOG_CREDENTIAL": f"{endpoint.client_id}:{endpoint.client_secret}",
               "REST_CATALOG_OAUTH2_SERVER_URI": endpoint.url}
        rest.check(uri, rest.sync(uri, env=env))
        assert endpoint.issued == 1, "one token for the whole sync"
        # A token about to expire (within a minute) is fetched anew before each request.
        endpoint.expires_in, endpoint.issued = 30, 0
        write_deltalake(uri, batch(range(4, 8)), mode="append")
        rest.check(uri, rest.sync(uri, env=env))
        assert endpoint.issued > 1
        # Credentials the endpoint refuses: one clear line naming the setting.
        bad = rest.sync(uri, env={**env, "REST_CATALOG_CREDENTIAL": "lakemirror:wrong"}, check=False)
        assert bad.returncode != 0
        assert "refused client lakemirror" in bad.stderr and "REST_CATALOG_CREDENTIAL" in bad.stderr, bad.stderr
    finally:
        endpoint.stop()


def test_bad_rest_settings_fail_with_the_flag_that_fixes_them(rest, lakemirror):
    uri = str(rest.table_dir("bad"))
    write_deltalake(uri, batch(range(0, 2)))
    plain = lakemirror("glue-sync", "--table-uri", uri, "--database", rest.ns,
                       "--rest-catalog-uri", "http://catalog.example.com", check=False)
    assert plain.returncode != 0 and "plain http" in plain.stderr and "--rest-catalog-uri" in plain.stderr
    refused = rest.sync(uri, env={"REST_CATALOG_TOKEN": "rb_not_the_key"}, check=False)
    assert refused.returncode != 0 and "401" in refused.stderr, refused.stderr
    assert "check REST_CATALOG_TOKEN" in refused.stderr, "the setting holding the refused credential"
    # A catalog that is not running: the cause, not only "error sending request", and the setting.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    down = rest.sync(uri, env={"REST_CATALOG_URI": f"http://127.0.0.1:{closed}"}, check=False)
    assert down.returncode != 0 and "refused" in down.stderr.lower() and "REST_CATALOG_URI" in down.stderr, \
        down.stderr
    missing = lakemirror("glue-sync", "--table-uri", uri, "--database", "no_such_namespace",
                         env=rest.server.env(), check=False)
    assert missing.returncode != 0 and "no_such_namespace" in missing.stderr, missing.stderr
    assert rest.catalog.list_tables(rest.ns) == [], "nothing was registered"


def test_one_tables_writer_cannot_take_over_another_tables_rest_mirror(rest):
    """The attack of tests/acceptance/deployment/test_table_isolation.py on the REST path: a
    second Delta table's sync names the first one's catalog table (as a table property or a
    flag would). It is refused, and the victim's mirror keeps its rows and metadata."""
    victim, attacker = str(rest.table_dir("victim")), str(rest.table_dir("attacker"))
    write_deltalake(victim, batch(range(0, 4)))
    write_deltalake(attacker, batch(range(100, 110)))
    before = rest.sync(victim, table="shared")
    location = rest.catalog.load_table((rest.ns, "shared")).metadata_location
    taken = rest.sync(attacker, table="shared", check=False)
    assert taken.returncode != 0 and "mirrors" in taken.stderr and victim in taken.stderr, taken.stderr
    assert rest.catalog.load_table((rest.ns, "shared")).metadata_location == location
    rest.check(victim, before, table="shared")


def test_a_catalog_that_moves_clients_to_plain_http_elsewhere_is_refused(rest, lakemirror):
    """/v1/config may name another base URL; the token would follow it, so the rule for
    REST_CATALOG_URI holds for it too. A loopback server answers only that config."""

    class Config(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            data = json.dumps({"defaults": {}, "overrides": {"uri": "http://catalog.invalid"}}).encode()
            rest_catalog.answer_json(self, 200, data)

        def log_message(self, *args):
            pass

    server = rest_catalog.serve_on_loopback(Config)
    try:
        uri = str(rest.table_dir("moved"))
        write_deltalake(uri, batch(range(0, 2)))
        moved = rest.sync(uri, env={"REST_CATALOG_URI": f"http://127.0.0.1:{server.server_address[1]}"}, check=False)
    finally:
        rest_catalog.stop_serving(server)
    assert moved.returncode != 0, moved.stdout
    assert "moves clients to http://catalog.invalid" in moved.stderr and "plain http" in moved.stderr, moved.stderr


def test_a_catalog_without_the_register_route_is_named_as_such(rest):
    """A catalog whose namespace exists but which has no `POST …/register` (lakana-server
    0.20, for one) answers 404 there: that is not a missing namespace, and the error says
    the catalog cannot hold a mirror. A loopback server answers config, the namespace and
    the table (none yet), and 404 without an error type on register."""
    registered = []

    class NoRegister(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path.startswith("/v1/config"):
                rest_catalog.answer_json(self, 200, json.dumps({"defaults": {}, "overrides": {}}).encode())
            elif "/tables/" in self.path:
                rest_catalog.answer_json(self, 404, json.dumps({"error": {
                    "type": "NoSuchTableException", "message": "no table", "code": 404}}).encode())
            else:
                rest_catalog.answer_json(self, 200, json.dumps({"namespace": [rest.ns], "properties": {}}).encode())

        def do_POST(self):  # noqa: N802
            registered.append(self.path)
            rest_catalog.answer_json(self, 404, b"Not Found")

        def log_message(self, *args):
            pass

    server = rest_catalog.serve_on_loopback(NoRegister)
    try:
        uri = str(rest.table_dir("noregister"))
        write_deltalake(uri, batch(range(0, 2)))
        answer = rest.sync(uri, env={"REST_CATALOG_URI": f"http://127.0.0.1:{server.server_address[1]}"},
                           check=False)
    finally:
        rest_catalog.stop_serving(server)
    assert registered, "the sync tried to register"
    assert answer.returncode != 0, answer.stdout
    assert "no register route" in answer.stderr and "does not exist" not in answer.stderr, answer.stderr


def test_a_catalog_that_spells_locations_file_colon_slash_keeps_its_mirror(rest):
    """A Java server on local storage names the metadata files it writes `file:/warehouse/…`
    (Hadoop's spelling), where lakemirror writes `file:///warehouse/…`. Compared as text, the
    mirror's own-folder check failed after the first commit and blamed another table; the
    locations are compared canonically. A loopback proxy in front of rustberg answers every
    location in Java's spelling."""
    import http.client

    upstream = urlsplit(rest.server.url)

    class JavaSpelling(BaseHTTPRequestHandler):
        def forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read().replace(b'"file:///', b'"file:/')
            rest_catalog.answer_json(self, answer.status, data)
            connection.close()

        do_GET = do_POST = do_DELETE = do_HEAD = forward

        def log_message(self, *args):
            pass

    proxy = rest_catalog.serve_on_loopback(JavaSpelling)
    try:
        env = {"REST_CATALOG_URI": f"http://127.0.0.1:{proxy.server_address[1]}"}
        uri = str(rest.table_dir("javaspelling"))
        write_deltalake(uri, batch(range(0, 3)))
        first = rest.sync(uri, env=env, table="spelled")
        assert first.json["metadata_location"].startswith("file:/") and \
            not first.json["metadata_location"].startswith("file:///"), first.json
        for start in (3, 6):
            write_deltalake(uri, batch(range(start, start + 3)), mode="append")
            again = rest.sync(uri, env=env, table="spelled")
            assert again.json["action"] == "synced", again.stderr[-2000:]
    finally:
        rest_catalog.stop_serving(proxy)
    # The catalog's own spelling stays the catalog's; the mirror holds every row.
    loaded = rest.catalog.load_table((rest.ns, "spelled")).metadata_location
    assert loaded.replace("file:///", "file:/") == again.json["metadata_location"]
    rows = judge.iceberg_rows_pyiceberg(rest.ns, "spelled", columns=["id"], catalog=rest.catalog)
    assert sorted(r[0] for r in rows) == list(range(9))
