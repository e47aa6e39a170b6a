"""Throughput of lakebase-sync beside the physical limit and Python peers (a benchmark, not a
test).

On a throwaway local PostgreSQL (tests/rig/postgres.py; fsync off for every contestant) and
local Delta tables generated here — a narrow one (--rows, default 5,000,000 rows: id bigint,
amount double, day date, name text) and a wide one (--wide-rows, default 500,000 rows of 40
columns) — it measures in the same run, each load ending with the primary key built:

- lakemirror: `lakemirror lakebase-sync` full refresh (release build, its own process);
- raw COPY: the same rows as a binary COPY stream (dumped from the loaded table beforehand)
  sent by psycopg into an empty table — what the server can ingest, the physical limit here;
- Python peer, CSV: delta-rs -> pyarrow -> pyarrow.csv -> psycopg COPY (the fast way);
- Python peer, rows: delta-rs -> pyarrow -> psycopg COPY write_row (the common way);
- incremental: a 1% update clustered in a few files, and one scattered over every file,
  synced incrementally (changed rows/s).

It prints a markdown table and writes docs/lakebase-benchmark.md.

    cargo build --release --bin lakemirror
    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/lakebase_refresh.py \\
        [--rows 5000000] [--wide-rows 500000]
"""

import argparse
import io
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
from deltalake import DeltaTable, write_deltalake

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))
from rig import postgres  # noqa: E402

import common  # noqa: E402  (tests/bench, the script's own folder)

TARGETS = {"vs_raw_copy": 0.70, "vs_python": 3.0}


def narrow(rows: int, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "amount": pa.array([rng.random() * 1000 for _ in range(rows)], pa.float64()),
        "day": pa.array([18000 + rng.randrange(3650) for _ in range(rows)], pa.int32()).cast(pa.date32()),
        "name": pa.array([f"customer-{i % 100_000:06}" for i in range(rows)]),
    })


def wide(rows: int, seed: int = 2) -> pa.Table:
    rng = random.Random(seed)
    columns = {"id": pa.array(range(rows), pa.int64())}
    for i in range(13):
        columns[f"l{i}"] = pa.array([rng.getrandbits(40) for _ in range(rows)], pa.int64())
        columns[f"d{i}"] = pa.array([rng.random() for _ in range(rows)], pa.float64())
        columns[f"s{i}"] = pa.array([f"value-{i}-{j % 5000}" for j in range(rows)])
    return pa.table(columns)


def write_table(path: str, table: pa.Table, files: int):
    per_file = -(-table.num_rows // files)
    for n, start in enumerate(range(0, table.num_rows, per_file)):
        write_deltalake(path, table.slice(start, per_file), mode="overwrite" if n == 0 else "append")


def timed(fn):
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def lakemirror_sync(binary, path, url, target, mode="incremental"):
    done = subprocess.run([binary, "lakebase-sync", "--source-path", path, "--target-table", target,
                           "--primary-key", "id", "--mode", mode, "--postgres-url", url],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"lakemirror failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def columns_sql(con, table):
    return con.execute(
        "SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) "
        "FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped", [table]).fetchone()[0]


def load_keyed(url, name, definition, fill):
    """A new table `name` (`definition`), filled by `fill(cursor)` in the same transaction,
    with its primary key built, as lakemirror's full refresh leaves it."""
    with psycopg.connect(url) as con:
        con.execute(f"DROP TABLE IF EXISTS {name}")
        con.execute(f"CREATE TABLE {name} ({definition})")
        fill(con.cursor())
        con.execute(f"ALTER TABLE {name} ADD PRIMARY KEY (id)")


def copy_buffer(cursor, sql, data):
    """COPY `data` (bytes-like) in 4 MiB writes."""
    with cursor.copy(sql) as copy:
        view = memoryview(data)
        for start in range(0, len(view), 4 << 20):
            copy.write(view[start:start + (4 << 20)])


def raw_copy(url, source_table, name):
    """The loaded rows as one binary COPY stream, then the timed load of that stream."""
    with psycopg.connect(url) as con:
        definition = columns_sql(con, source_table)
        stream = io.BytesIO()
        with con.cursor().copy(f"COPY {source_table} TO STDOUT (FORMAT binary)") as copy:
            for chunk in copy:
                stream.write(chunk)
    data = stream.getvalue()
    return timed(lambda: load_keyed(url, name, definition, lambda cur: copy_buffer(
        cur, f"COPY {name} FROM STDIN (FORMAT binary)", data)))[0]


def python_peer_csv(url, path, source_table, name):
    with psycopg.connect(url) as con:
        definition = columns_sql(con, source_table)

    def load():
        arrow = DeltaTable(path).to_pyarrow_table()
        buffer = io.BytesIO()
        pacsv.write_csv(arrow, buffer, pacsv.WriteOptions(include_header=False))
        load_keyed(url, name, definition,
                   lambda cur: copy_buffer(cur, f"COPY {name} FROM STDIN (FORMAT csv)", buffer.getbuffer()))
    return timed(load)[0]


def python_peer_rows(url, path, source_table, name):
    with psycopg.connect(url) as con:
        definition = columns_sql(con, source_table)

    def write_rows(cursor, arrow):
        with cursor.copy(f"COPY {name} FROM STDIN") as copy:
            for batch in arrow.to_batches(max_chunksize=65536):
                for row in zip(*(c.to_pylist() for c in batch.columns)):
                    copy.write_row(row)

    def load():
        arrow = DeltaTable(path).to_pyarrow_table()
        load_keyed(url, name, definition, lambda cur: write_rows(cur, arrow))
    return timed(load)[0]


def measure_refresh(binary, url, path, rows, label, with_rows_peer):
    target = f"{label}_mirror"
    seconds, report = timed(lambda: lakemirror_sync(binary, path, url, target, mode="full_refresh"))
    assert report["rows_inserted"] == rows, report
    result = {"table": label, "rows": rows, "lakemirror_s": seconds,
              "raw_copy_s": raw_copy(url, f"public.{target}", f"{label}_raw"),
              "python_csv_s": python_peer_csv(url, path, f"public.{target}", f"{label}_csv")}
    if with_rows_peer:
        result["python_rows_s"] = python_peer_rows(url, path, f"public.{target}", f"{label}_rows")
    print(f"  {label}: {json.dumps(result)}", file=sys.stderr)
    return result


def measure_increments(binary, url, path, rows):
    out = []
    target = "narrow_incremental"
    lakemirror_sync(binary, path, url, target)  # the first run is a full refresh
    cases = [("clustered 1% update (1 file of 10 rewritten)", f"id < {rows // 100}"),
             ("scattered 1% update (every file rewritten)", "id % 100 = 50")]
    for label, predicate in cases:
        DeltaTable(path).update(predicate=predicate, updates={"amount": "amount + 1"})
        seconds, report = timed(lambda: lakemirror_sync(binary, path, url, target))
        changed = rows // 100
        if report["mode"] == "incremental":
            assert report["rows_updated"] + report["rows_inserted"] + report["rows_deleted"] == changed, report
        else:  # lakemirror judged a full refresh cheaper
            assert report["rows_inserted"] == rows, report
        out.append({"case": label, "changed": changed, "seconds": seconds, "plan": report["mode"]})
        print(f"  {label}: {changed} rows in {seconds:.2f} s ({report['mode']})", file=sys.stderr)
    return out


def report(refreshes, increments, binary) -> str:
    pg = subprocess.run([postgres._bin("postgres"), "--version"], capture_output=True, text=True).stdout.strip()
    lines = [f"lakebase-sync throughput ({common.machine()}; {pg}, local, fsync off; {common.today_and_commit()}; "
             f"`{Path(binary).name}` release build; "
             "every load ends with the primary key built)", "",
             "| table | rows | lakemirror rows/s | raw binary COPY rows/s | lakemirror / raw COPY | "
             "Python peer (CSV) rows/s | lakemirror / CSV peer | Python peer (write_row) rows/s | "
             "lakemirror / write_row peer |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for r in refreshes:
        rate = lambda s: r["rows"] / s
        rows_peer = r.get("python_rows_s")
        lines.append(
            f"| {r['table']} | {r['rows']:,} | {rate(r['lakemirror_s']):,.0f} | {rate(r['raw_copy_s']):,.0f} | "
            f"{r['raw_copy_s'] / r['lakemirror_s']:.0%} | {rate(r['python_csv_s']):,.0f} | "
            f"{r['python_csv_s'] / r['lakemirror_s']:.2f}x | "
            + (f"{rate(rows_peer):,.0f} | {rows_peer / r['lakemirror_s']:.2f}x |" if rows_peer else "not run | |"))
        share = r["raw_copy_s"] / r["lakemirror_s"]
        verdicts.append(f"{'met' if share >= TARGETS['vs_raw_copy'] else 'MISSED'}: {r['table']} full refresh at "
                        f"{share:.0%} of raw binary COPY (target >= {TARGETS['vs_raw_copy']:.0%})")
        for peer, key in (("CSV", "python_csv_s"), ("write_row", "python_rows_s")):
            if key in r:
                speedup = r[key] / r["lakemirror_s"]
                verdicts.append(f"{'met' if speedup >= TARGETS['vs_python'] else 'MISSED'}: {r['table']} "
                                f"{speedup:.2f}x the Python peer ({peer}) (target >= {TARGETS['vs_python']}x)")
    lines += ["", "| incremental sync (sync.mode = incremental) | rows changed | plan lakemirror chose | seconds | "
              "changed rows/s |", "|---|---:|---|---:|---:|"]
    for i in increments:
        lines.append(f"| {i['case']} | {i['changed']:,} | {i['plan']} | {i['seconds']:.2f} | "
                     f"{i['changed'] / i['seconds']:,.0f} |")
    return "\n".join(lines) + "\n\nTargets:\n" + "\n".join(f"- {v}" for v in verdicts) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows of the narrow table")
    parser.add_argument("--wide-rows", type=int, default=500_000, help="rows of the 40-column table")
    parser.add_argument("--out", type=Path, default=REPO / "docs", help="where lakebase-benchmark.md goes")
    common.add_binary_argument(parser)
    args = parser.parse_args()
    common.check_binary(args.binary)
    if args.rows < 100 or args.rows % 100:
        sys.exit("--rows: a multiple of 100, at least 100 (the incremental cases update 1%)")
    server = postgres.start()
    try:
        with tempfile.TemporaryDirectory(prefix="lakebase-bench-") as work:
            narrow_path, wide_path = f"{work}/narrow", f"{work}/wide"
            began = time.perf_counter()
            write_table(narrow_path, narrow(args.rows), files=10)
            write_table(wide_path, wide(args.wide_rows), files=10)
            print(f"  generated the tables in {time.perf_counter() - began:.0f} s", file=sys.stderr)
            refreshes = [measure_refresh(args.binary, server.url, narrow_path, args.rows, "narrow", True),
                         measure_refresh(args.binary, server.url, wide_path, args.wide_rows, "wide", False)]
            increments = measure_increments(args.binary, server.url, narrow_path, args.rows)
    finally:
        server.stop()
    text = report(refreshes, increments, args.binary)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "lakebase-benchmark.md").write_text(
        "# Benchmark: lakebase-sync throughput\n\nWritten by `tests/bench/lakebase_refresh.py`.\n\n" + text)
    print(f"wrote {args.out / 'lakebase-benchmark.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
