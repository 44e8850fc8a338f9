"""bench/produce_partitions.py's requests, and the sleeps count bench/growth.py reports beside CPU."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from brokers import voluntary_switches
from produce_partitions import request_frames

from kafkette.broker.protocol.framing import decode_request
from kafkette.broker.protocol.messages.produce_request import ProduceRequest
from kafkette.broker.protocol.records import decode_batches


def partitions_in(frame: bytes) -> list[tuple[int, int]]:
    """(partition, records) of each batch a size-prefixed ProduceRequest frame carries."""
    request = decode_request(memoryview(frame)[4:]).body
    assert isinstance(request, ProduceRequest)
    batches = [(p.index, p.records) for topic in request.topic_data for p in topic.partition_data]
    return [(index, sum(len(batch.records) for batch in decode_batches(records))) for index, records in batches]


def test_per_partition_sends_one_request_per_partition_in_turn() -> None:
    frames = request_frames(3, 2, per_partition=True)
    assert [partitions_in(frame) for frame in frames] == [[(0, 2)], [(1, 2)], [(2, 2)]]


def test_one_request_to_every_partition_otherwise() -> None:
    (frame,) = request_frames(3, 2, per_partition=False)
    assert partitions_in(frame) == [(0, 2), (1, 2), (2, 2)]


def test_sleeps_count_every_thread_of_the_process() -> None:
    slept, done = threading.Event(), threading.Event()

    def sleeper() -> None:
        for _ in range(20):
            time.sleep(0.001)
        slept.set()
        done.wait()

    before = voluntary_switches(os.getpid())
    worker = threading.Thread(target=sleeper)
    worker.start()
    slept.wait()
    during = voluntary_switches(os.getpid())  # the worker is alive: its 20 sleeps are in its own /proc task
    done.set()
    worker.join()
    assert during - before >= 20
