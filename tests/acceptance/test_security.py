"""No confused deputy: whoever may write one table's files (and so its `_lakemirror/` folder)
cannot make the functions read, expire or delete another table's files. Each test performs
the attack and shows it failing safely."""

import shutil

from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import write_manifest_list

from acceptance.mirror_check import assert_mirrors
from acceptance.test_expiry import local_keys, write_aged_commits
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
