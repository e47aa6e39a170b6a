"""The judges read tables written by other tools correctly (no lakemirror binary involved)."""

import datetime as dt
import decimal

import boto3
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from rig import judge

DELTA_ROWS = [
    (1, "one", "plain"),
    (2, None, "with space"),
    (3, "three", "100%"),
    (4, "four", "with space"),
    (5, "five", "a%2Fb"),  # a literal "%2F", not a slash: must survive both encodings
]


def test_delta_readers_agree(bucket, delta_storage_options):
    uri = f"s3://{bucket}/delta/t"
    data = pa.table(
        {
            "id": pa.array([r[0] for r in DELTA_ROWS], pa.int64()),
            "name": pa.array([r[1] for r in DELTA_ROWS], pa.string()),
            "part": pa.array([r[2] for r in DELTA_ROWS], pa.string()),
        }
    )
    write_deltalake(uri, data.slice(0, 3), partition_by=["part"], storage_options=delta_storage_options)
    write_deltalake(uri, data.slice(3), mode="append", storage_options=delta_storage_options)

    # The partition directories really are escaped on S3 (what lakemirror has to cope with).
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=bucket)["Contents"]]
    assert any(k.startswith("delta/t/part=with%20space/") for k in keys), keys
    assert any(k.startswith("delta/t/part=100%25/") for k in keys), keys

    columns = ["id", "name", "part"]
    judge.assert_same_rows(DELTA_ROWS, judge.delta_rows(uri, columns=columns))
    judge.assert_same_rows(DELTA_ROWS, judge.delta_rows_duckdb(uri, columns=columns))
    judge.assert_same_rows(DELTA_ROWS[:3], judge.delta_rows(uri, version=0, columns=columns))
    judge.assert_same_rows(DELTA_ROWS[:3], judge.delta_rows_duckdb(uri, version=0, columns=columns))


ICEBERG_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("raw", pa.binary()),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int32())),
        pa.field("point", pa.struct([pa.field("x", pa.float64()), pa.field("y", pa.float64())])),
    ]
)

UTC = dt.timezone.utc
ICEBERG_BATCHES = [
    [
        (1, "a", decimal.Decimal("1.50"), dt.datetime(2024, 1, 1, 10, 0, tzinfo=UTC), b"\x00\xff",
         ["x", "y"], [("k1", 1), ("k2", 2)], {"x": 1.0, "y": -2.5}),
        (2, None, None, None, None, None, None, None),
    ],
    [
        (3, "c", decimal.Decimal("-0.01"), dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), b"",
         [], [], {"x": float("nan"), "y": None}),
    ],
]


def _arrow(rows):
    return pa.Table.from_pylist([dict(zip(ICEBERG_SCHEMA.names, r)) for r in rows], schema=ICEBERG_SCHEMA)


def test_iceberg_readers_agree(bucket, glue_database, glue):
    catalog = judge.glue_catalog()
    table = catalog.create_table((glue_database, "t"), schema=ICEBERG_SCHEMA, location=f"s3://{bucket}/iceberg/t")
    for batch in ICEBERG_BATCHES:
        table.append(_arrow(batch))  # each append commits through Glue UpdateTable + VersionId

    written = [row for batch in ICEBERG_BATCHES for row in batch]
    judge.assert_same_rows(written, judge.iceberg_rows_pyiceberg(glue_database, "t"))

    metadata_location = glue.get_table(DatabaseName=glue_database, Name="t")["Table"]["Parameters"]["metadata_location"]
    assert metadata_location == catalog.load_table((glue_database, "t")).metadata_location
    judge.assert_same_rows(written, judge.iceberg_rows_duckdb(metadata_location))

    snapshots = judge.iceberg_snapshots(glue_database, "t")
    assert [s["summary"]["operation"] for s in snapshots] == ["append", "append"]
    assert snapshots[0]["parent_id"] is None
    assert snapshots[1]["parent_id"] == snapshots[0]["snapshot_id"]
    assert [s["summary"]["added-records"] for s in snapshots] == ["2", "1"]

    first = snapshots[0]["snapshot_id"]
    judge.assert_same_rows(ICEBERG_BATCHES[0], judge.iceberg_rows_pyiceberg(glue_database, "t", snapshot_id=first))


def test_assert_same_rows_normalises_across_readers():
    berlin = dt.timezone(dt.timedelta(hours=1))
    judge.assert_same_rows(
        [(decimal.Decimal("1.50"), dt.datetime(2024, 1, 1, 10, 0), [("a", 1)], bytearray(b"x"), float("nan"))],
        [(decimal.Decimal("1.5"), dt.datetime(2024, 1, 1, 11, 0, tzinfo=berlin), {"a": 1}, b"x", float("nan"))],
    )
    judge.assert_same_rows([(None,), (1,), ("a",)], [("a",), (None,), (1,)])  # order and mixed types


@pytest.mark.parametrize(
    "expected, actual",
    [
        ([(1, "a")], [(1, "b")]),
        ([(1,), (1,)], [(1,)]),  # multiset: a lost duplicate is a difference
        ([(dt.datetime(2024, 1, 1, 10),)], [(dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone(dt.timedelta(hours=1))),)]),
        ([({"a": 1},)], [({"a": 2},)]),
        ([(decimal.Decimal("1.5"),)], [(1.5,)]),  # a decimal read back as float is a type bug
        ([(1,)], [(1.0,)]),
        ([(True,)], [(1,)]),
        ([(float("nan"),)], [(None,)]),
    ],
)
def test_assert_same_rows_reports_differences(expected, actual):
    with pytest.raises(AssertionError, match=r"rows differ: expected \d+ rows, got \d+"):
        judge.assert_same_rows(expected, actual)
