"""Micro-benchmarks of the hot paths: the codec for Produce/Fetch, a leader's append and the log's append and read.

    python bench/micro.py

Prints operations per second; compare runs of the same machine to spot regressions.
"""

from __future__ import annotations

import tempfile
import time
import timeit
import uuid
from collections.abc import Callable
from pathlib import Path

from kafkette.broker.clocks import monotonic_ms
from kafkette.broker.protocol.framing import decode_request, encode_request, encode_response
from kafkette.broker.protocol.messages.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from kafkette.broker.protocol.messages.produce_request import PartitionProduceData, ProduceRequest, TopicProduceData
from kafkette.broker.protocol.records import Header, Record, encode_batch
from kafkette.broker.replication.partition import Partition, PartitionHost, PartitionSettings
from kafkette.broker.storage import Log, LogConfig

PRODUCE_VERSION = 11
FETCH_VERSION = 17


def sample_batch(records: int = 100, size: int = 100) -> bytes:
    now = int(time.time() * 1000)
    return encode_batch([Record(i, now, f"key-{i}".encode(), b"x" * size, [Header("h", b"v")]) for i in range(records)])


def produce_request(partitions: int, batch: bytes) -> ProduceRequest:
    return ProduceRequest(
        acks=1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name="bench", partition_data=[PartitionProduceData(index=p, records=batch) for p in range(partitions)]
            )
        ],
    )


def fetch_response(partitions: int, batch: bytes) -> FetchResponse:
    return FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic="bench",
                partitions=[
                    PartitionData(partition_index=p, high_watermark=1000, log_start_offset=0, records=batch)
                    for p in range(partitions)
                ],
            )
        ]
    )


def rate(function: Callable[[], object], seconds: float = 1.0) -> float:
    timer = timeit.Timer(function)
    loops, elapsed = timer.autorange()
    runs = max(1, int(loops * seconds / elapsed))
    return runs / timer.timeit(runs)


def main() -> None:
    batch = sample_batch()
    for partitions in (1, 6):
        frame = encode_request(produce_request(partitions, batch), PRODUCE_VERSION, 1, "bench")[4:]
        response = fetch_response(partitions, batch)
        print(f"Produce v{PRODUCE_VERSION} request, {partitions} partition(s):")
        print(f"  decode  {rate(lambda frame=frame: decode_request(memoryview(frame))):>12,.0f} /s")
        request = produce_request(partitions, batch)
        print(f"  encode  {rate(lambda request=request: encode_request(request, PRODUCE_VERSION, 1, 'b')):>12,.0f} /s")
        print(f"Fetch v{FETCH_VERSION} response, {partitions} partition(s):")
        print(f"  encode  {rate(lambda response=response: encode_response(1, FETCH_VERSION, 1, response)):>12,.0f} /s")
    with tempfile.TemporaryDirectory() as directory:
        log = Log.open(Path(directory) / "bench-0", LogConfig(segment_bytes=64 * 1024 * 1024))
        appended = rate(lambda: log.append(bytearray(batch), leader_epoch=0))
        print(f"Log.append of a {len(batch)}-byte batch (100 records): {appended:,.0f} /s")
        end = log.log_end_offset
        read = rate(lambda: log.read((end // 2) - (end // 2) % 100, 1 << 20))
        print(f"Log.read of 1 MiB from the middle: {read:,.0f} /s")
        log.close()
        # What a produce costs the broker per batch past the codec: header and CRC checks, producer state, append.
        settings = PartitionSettings(max_message_bytes=1 << 20, log_append_time=False)
        leader_log = Log.open(Path(directory) / "bench-1", LogConfig(segment_bytes=64 * 1024 * 1024))
        partition = Partition("bench", 1, uuid.UUID(int=1), leader_log, settings, PartitionHost(0, monotonic_ms))
        partition.become_leader(leader_epoch=1, partition_epoch=1, replicas=(0,), isr=(0,))
        led = rate(lambda: partition.append_from_producer(memoryview(bytearray(batch)), required_acks=1))
        print(f"Partition.append_from_producer of the same batch (leader, acks=1): {led:,.0f} /s")
        leader_log.close()


if __name__ == "__main__":
    main()
