"""The end-to-end suite's read-back check (e2e/workload.py), on its own: it runs only on the node otherwise."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from workload import Acknowledged, missing_or_reordered


def acknowledged(explicit: dict[int, list[tuple[int, bytes]]], implicit: dict[int, list[bytes]]) -> Acknowledged:
    result = Acknowledged()
    result.by_partition.update(explicit)
    result.implicit.update(implicit)
    return result


def test_records_read_back_where_acknowledged_pass() -> None:
    sent = acknowledged({0: [(0, b"a"), (2, b"c")]}, {0: [b"b"], 1: [b"d"]})
    assert sent.count == 4
    assert missing_or_reordered(sent, {0: [(0, b"a"), (1, b"b"), (2, b"c")], 1: [(0, b"d")]}) == []


def test_an_implicitly_acknowledged_record_must_be_in_its_partition() -> None:
    """librdkafka acknowledges without an offset a batch whose request had no answer once a later one succeeds."""
    sent = acknowledged({0: [(0, b"a")]}, {0: [b"b"]})
    assert missing_or_reordered(sent, {0: [(0, b"a")], 1: [(0, b"b")]}) == [
        "partition 0: 1 implicitly acknowledged lost, first b'b'"
    ]


def test_a_record_missing_at_its_offset_or_out_of_order_is_reported() -> None:
    sent = acknowledged({0: [(0, b"a"), (1, b"b")]}, {})
    assert missing_or_reordered(sent, {0: [(1, b"a"), (0, b"b")]}) == [
        "partition 0 read out of offset order",
        "partition 0: 2 acknowledged records lost, first (0, b'a')",
    ]
