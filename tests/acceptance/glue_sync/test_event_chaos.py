"""Event chaos in CI (issue 8, property 1): a few randomized schedules of the 50 commit events
of one Delta table against the glue-sync handler; `tests/soak/chaos.py` runs 1,000."""

import random

from acceptance import chaos
from rig.fault_proxy import FaultProxy

SCHEDULES = 12


def test_shuffled_duplicated_dropped_and_bursty_deliveries_converge(
        bucket, delta_storage_options, lakemirror_bin, tmp_path):
    source = "chaos/source"
    expected, files = chaos.source_table(bucket, source, delta_storage_options)
    counts = chaos.Counts()
    rng = random.Random(20261201)
    for _ in range(SCHEDULES):
        chaos.run_schedule(lakemirror_bin, tmp_path, bucket, source, expected, files, rng, counts)
    print(counts.line())
    assert counts.failures == [] and counts.mismatches == 0
    assert counts.schedules == SCHEDULES and counts.dropped > 0 and counts.duplicated > 0


def test_chaotic_deliveries_through_a_faulty_network_converge(
        bucket, delta_storage_options, lakemirror_bin, moto_endpoint, tmp_path):
    # Event chaos and injected faults at once: the handler's S3 and Glue requests fail at 10%
    # and a message it reports failed is redelivered, as SQS would.
    source = "chaos/faulty_source"
    expected, files = chaos.source_table(bucket, source, delta_storage_options)
    counts = chaos.Counts()
    rng = random.Random(1201)
    with FaultProxy(moto_endpoint, rate=0.1, seed=1201) as proxy:
        for _ in range(3):
            chaos.run_schedule(lakemirror_bin, tmp_path, bucket, source, expected, files, rng, counts,
                               proxy_url=proxy.url)
    print(counts.line(), f"faults injected: {dict(proxy.injected)}")
    assert counts.failures == [] and counts.mismatches == 0
    assert counts.schedules == 3 and sum(proxy.injected.values()) > 50
