"""bench/fetch_serve.py: the reader moves past whole batches only, as clients do with a cut one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from fetch_serve import next_offsets

from kafkette.broker.protocol.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from kafkette.broker.protocol.records import Record, encode_batch


def _batch(base: int, count: int) -> bytes:
    return encode_batch(
        [Record(offset=base + i, timestamp=0, key=None, value=b"v" * 10, headers=[]) for i in range(count)]
    )


def test_offsets_move_past_whole_batches_and_a_cut_last_batch_is_left() -> None:
    whole = _batch(0, 3) + _batch(3, 4)
    cut = _batch(7, 5)[:-9]  # Kafka ends a partition's bytes inside a batch at its byte budget
    response = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="t",
                partitions=[
                    PartitionData(partition_index=0, records=whole + cut),
                    PartitionData(partition_index=1, records=_batch(20, 2)),
                    PartitionData(partition_index=2, records=None),
                ],
            )
        ]
    )
    offsets = [0, 20, 5]
    assert next_offsets(response, offsets) == 9
    assert offsets == [7, 22, 5]


def test_a_partition_error_stops_the_sweep() -> None:
    response = FetchResponse(
        responses=[FetchableTopicResponse(topic="t", partitions=[PartitionData(partition_index=0, error_code=3)])]
    )
    with pytest.raises(RuntimeError, match="fetch error 3"):
        next_offsets(response, [0])
