"""Pure planning and option decisions, exhaustively on small cases (no Spark, no broker)."""

from __future__ import annotations

import pytest

from kafkette.pipeline.offsets import OptionError, from_spark, to_spark
from kafkette.pipeline.options import parse_source
from kafkette.pipeline.planning import OffsetRange, check_start, rate_limit, split


@pytest.mark.parametrize("limit", [1, 2, 5, 7, 100, 1000])
def test_rate_limit_admits_exactly_the_limit_in_proportion(limit: int) -> None:
    start = {("t", 0): 0, ("t", 1): 10, ("t", 2): 5}
    latest = {("t", 0): 300, ("t", 1): 110, ("t", 2): 5, ("t", 3): 50}
    end = rate_limit({**start, ("t", 3): 0}, latest, limit)
    admitted = {tp: end[tp] - {**start, ("t", 3): 0}[tp] for tp in end}
    assert sum(admitted.values()) == min(limit, 450)
    assert all(end[tp] <= latest[tp] for tp in end)
    if limit >= 100:
        assert admitted[("t", 0)] > admitted[("t", 1)] > admitted[("t", 3)] > 0


def test_check_start_reports_deleted_and_vanished_partitions() -> None:
    checked = check_start({("t", 0): 3, ("t", 1): 9, ("u", 0): 1}, {("t", 0): 5, ("t", 1): 2})
    assert checked.start == {("t", 0): 5, ("t", 1): 9}
    assert checked.lost == [
        "t-0 offsets 3..4 were deleted before they were read",
        "u-0 no longer exists (it was read up to offset 1)",
    ]


@pytest.mark.parametrize("minimum", [None, 1, 3, 10, 50])
def test_split_covers_every_offset_once(minimum: int | None) -> None:
    ranges = [OffsetRange("t", 0, 0, 40), OffsetRange("t", 1, 7, 9)]
    pieces = split(ranges, minimum)
    covered = sorted((p.partition, o) for p in pieces for o in range(p.start, p.end))
    assert covered == sorted((r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert len(pieces) >= min(minimum or 0, 42)


def test_offsets_round_trip_through_spark_json() -> None:
    offsets = {("a", 0): 5, ("a", 10): 7, ("b", 1): 0}
    assert from_spark(to_spark(offsets)) == offsets


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "t", "assign": '{"t": [0]}'}, "exactly one of"),
        ({"subscribe": "t", "startingOffsets": "latest"}, "would read nothing"),
        ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, "positive integer"),
        ({"subscribe": "t", "failOnDataLoss": "yes"}, "true or false"),
        ({"subscribe": "t", "startingOffsets": "{bad"}, "startingOffsets: expected JSON"),
        ({"subscribePattern": "("}, "not a regular expression"),
        ({"subscribe": "t", "kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers is required"),
        ({"subscribe": "t", "fetchOffset.numRetries": "0"}, "fetchoffset.numretries: expected a positive integer"),
        ({"subscribe": "t", "fetchOffset.retryIntervalMs": "-1"}, "retryintervalms: expected zero or a positive"),
    ],
)
def test_bad_options_name_the_problem(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_source({"kafka.bootstrap.servers": "h:1", **options}, streaming=False)


def test_options_are_case_insensitive_and_kafka_settings_pass_through() -> None:
    parsed = parse_source(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "SubscribePattern": "ord.*",
            "kafka.group.id": "g",
            "kafka.fetch.max.bytes": "9",
        },
        streaming=True,
    )
    assert parsed.group_id == "g"
    assert parsed.client == {"bootstrap.servers": "h:1", "fetch.max.bytes": "9"}
    assert parsed.subscription.select({"orders": 2, "other": 1, "__consumer_offsets": 50}) == [
        ("orders", 0),
        ("orders", 1),
    ]
    assert parsed.starting.kind == "latest"
    # Spark's fetchOffset defaults, and its names for them.
    assert (parsed.fetch_offset_attempts, parsed.fetch_offset_retry_interval_ms) == (3, 1000)
    tuned = parse_source(
        {
            "kafka.bootstrap.servers": "h:1",
            "subscribe": "t",
            "FETCHOFFSET.NUMRETRIES": "5",
            "fetchOffset.retryIntervalMs": "0",
        },
        streaming=True,
    )
    assert (tuned.fetch_offset_attempts, tuned.fetch_offset_retry_interval_ms) == (5, 0)
