"""moto server (S3, Glue, SQS, STS, ...) whose Glue UpdateTable enforces VersionId like AWS.

GetTables also answers in pages of at most 100 tables with a NextToken, as AWS does; plain
moto returns every table at once, so a caller that ignores NextToken would pass here and
miss tables in AWS.

Plain moto 5.2.5 stores table versions (FakeTable._current_version, starting at 1 on
CreateTable, +1 per UpdateTable) but ignores the VersionId sent with UpdateTable, so two
writers racing on the same Iceberg table both "win". Real Glue rejects the stale one with
ConcurrentModificationException; lakemirror's optimistic commit relies on that.

Usage: python moto_strict.py --port P [--host 127.0.0.1]
Prints exactly one line `ready http://HOST:PORT` once the server answers HTTP, then serves
until SIGTERM/SIGINT. `--port 0` picks a free port (the ready line tells which).
"""

import argparse
import signal
import sys
import threading
import urllib.request

from moto.core.responses import ActionResult
from moto.glue.exceptions import GlueClientError
from moto.glue.responses import GlueResponse
from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.s3.responses import S3Response


class ConcurrentModificationException(GlueClientError):
    def __init__(self, message: str) -> None:
        super().__init__("ConcurrentModificationException", message)


# The werkzeug server is threaded: the compare of VersionId and the update must be atomic,
# or two concurrent UpdateTable calls with the same VersionId could both pass the check.
_update_lock = threading.Lock()
_plain_update_table = GlueResponse.update_table


def _strict_update_table(self: GlueResponse):
    version_id = self.parameters.get("VersionId")
    database_name = self.parameters.get("DatabaseName")
    table_name = (self.parameters.get("TableInput") or {}).get("Name")
    with _update_lock:
        if version_id is not None:
            # get_table raises EntityNotFoundException itself for a missing table/database.
            table = self.glue_backend.get_table(database_name, table_name)
            current = str(table._current_version)
            if str(version_id) != current:
                raise ConcurrentModificationException(
                    f"Update table failed due to concurrent modifications: "
                    f"VersionId {version_id} is not the current version {current} "
                    f"of table {database_name}.{table_name}."
                )
        return _plain_update_table(self)


# AWS Glue's largest GetTables page.
GET_TABLES_PAGE = 100


def _paged_get_tables(self: GlueResponse):
    tables = self.glue_backend.get_tables(self.parameters.get("DatabaseName"), self.parameters.get("Expression"))
    start = int(self.parameters.get("NextToken") or 0)
    size = min(int(self.parameters.get("MaxResults") or GET_TABLES_PAGE), GET_TABLES_PAGE)
    page = {"TableList": [table.as_dict() for table in tables[start:start + size]]}
    if start + size < len(tables):
        page["NextToken"] = str(start + size)
    return ActionResult(page)


# moto checks PutObject's If-None-Match / If-Match and then stores the object as two steps,
# so two threads putting the same key with If-None-Match: * can both succeed. Real S3 is
# atomic here and Delta commits (`_delta_log/N.json`) depend on it: serialise PutObject.
_put_lock = threading.Lock()
_plain_put_object = S3Response.put_object


def _atomic_put_object(self: S3Response):
    with _put_lock:
        return _plain_put_object(self)


def install_patch() -> None:
    GlueResponse.update_table = _strict_update_table
    GlueResponse.get_tables = _paged_get_tables
    S3Response.put_object = _atomic_put_object


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()

    # Block the stop signals before any thread exists (threads inherit the mask), so that
    # sigwait below is the only place they are delivered.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)

    install_patch()
    server = ThreadedMotoServer(ip_address=args.host, port=args.port, verbose=False)
    server.start()  # returns once the socket is bound and listening
    host, port = server.get_host_and_port()
    url = f"http://{args.host}:{port}"

    # Probe: one real HTTP round trip proves the server accepts and answers connections.
    with urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=30) as resp:
        if resp.status != 200:
            print(f"moto probe failed: HTTP {resp.status}", file=sys.stderr)
            return 1

    print(f"ready {url}", flush=True)
    signal.sigwait(stop_signals)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
