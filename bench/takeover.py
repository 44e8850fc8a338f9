"""What taking over a partition and truncating a follower cost on a long log, before and after 14f7db9.

    python bench/takeover.py                  # 55,700 batches, as a chaos-net partition after 20 minutes
    python bench/takeover.py --batches 2000 --rounds 2

A follower partition copies --batches idempotent batches of two producers (one or two records each, as
chaos-net's producers write them) from a leader, in fetch-sized chunks; then, each round on a fresh copy of
that log:

- takeover: the follower becomes leader and appends a producer's next batch. Before 14f7db9 becoming leader
  dropped the producer state and the first append rebuilt it from the log's tail; that rebuild is timed too,
  forced the way the old code did it (the partition's table dropped), side by side in the same round.
- truncation: the follower truncates its last batch; before, every truncation also rescanned the log's tail for
  transactions (`_load_transactions`), timed alongside.

The copy itself is timed once with the follower keeping producer state and once appending to the log alone: what
keeping the state adds to every follower append.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from uuid import uuid4

from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.replication.partition import Partition, PartitionHost, PartitionSettings
from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.storage.log import TXN_SCAN_SEGMENTS, _load_transactions

PRODUCERS = (1001, 1002)
CHUNK_BATCHES = 200  # batches a fetch response carries for one partition


def batches(count: int, first_offset: int = 0, first_sequence: int = 0) -> list[bytes]:
    """``count`` idempotent batches alternating between the two producers, from ``first_offset`` on."""
    out, offset, now = [], first_offset, int(time.time() * 1000)
    sequences = dict.fromkeys(PRODUCERS, first_sequence)
    for number in range(count):
        producer = PRODUCERS[number % len(PRODUCERS)]
        size = 1 + number % 2
        records = [Record(offset + i, now, None, b"x" * 40, []) for i in range(size)]
        out.append(
            encode_batch(
                records, base_offset=offset, producer_id=producer, producer_epoch=0, base_sequence=sequences[producer]
            )
        )
        sequences[producer] += size
        offset += size
    return out


def follower(directory: Path) -> Partition:
    settings = PartitionSettings(max_message_bytes=1 << 20, log_append_time=False)
    partition = Partition("t", 0, uuid4(), Log.open(directory, LogConfig()), settings, PartitionHost(1))
    partition.become_follower(leader_id=2, leader_epoch=1, partition_epoch=1, replicas=(1, 2), isr=(1, 2))
    return partition


def copy(into: Callable[[bytes], object], chunks: list[bytes]) -> float:
    started = time.perf_counter()
    for chunk in chunks:
        into(chunk)
    return time.perf_counter() - started


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def one_round(directory: Path, end: int, next_sequence: int) -> dict[str, float]:
    """The takeovers and truncation of one round on the copy of the log in ``directory``."""
    partition = follower(directory)
    assert len(partition.producers) == len(PRODUCERS)  # read from the tail once, as by a first follower append

    def take_over(leader_epoch: int, sequence: int, offset: int) -> None:
        partition.become_leader(leader_epoch, leader_epoch, (1, 2), (1,))
        next_batch = encode_batch(
            [Record(0, int(time.time() * 1000), None, b"y", [])],
            producer_id=PRODUCERS[0],
            producer_epoch=0,
            base_sequence=sequence,
        )
        assert partition.append_from_producer(memoryview(bytearray(next_batch))).base_offset == offset

    seconds = {"now": timed(lambda: take_over(2, next_sequence, end))}
    partition.become_follower(2, 3, 3, (1, 2), (1, 2))
    partition._producers = None  # what becoming leader did before 14f7db9
    seconds["rebuilt"] = timed(lambda: take_over(4, next_sequence + 1, end + 1))
    partition.become_follower(2, 5, 5, (1, 2), (1, 2))
    seconds["truncate"] = timed(lambda: partition.truncate_to(end))
    segments = partition.log._segments
    rescan = timed(lambda: _load_transactions(segments, max(0, len(segments) - TXN_SCAN_SEGMENTS)))
    seconds["truncate+rescan"] = seconds["truncate"] + rescan
    partition.log.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=55_700)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    encoded = batches(args.batches)
    chunks = [b"".join(encoded[i : i + CHUNK_BATCHES]) for i in range(0, len(encoded), CHUNK_BATCHES)]
    work = Path(tempfile.mkdtemp(prefix="kafkette-takeover-"))
    try:
        kept = follower(work / "kept")
        keeping_s = copy(kept.append_as_follower, chunks)
        # The first producer wrote every other batch, each of one record.
        end, next_sequence = kept.log_end_offset, (args.batches + 1) // 2
        kept.log.close()
        plain = Log.open(work / "plain", LogConfig())
        plain_s = copy(plain.append_as_follower, chunks)
        plain.close()
        rows: dict[str, list[float]] = {name: [] for name in ("now", "rebuilt", "truncate", "truncate+rescan")}
        for number in range(args.rounds):
            shutil.copytree(work / "kept", work / f"round-{number}")
            for name, seconds in one_round(work / f"round-{number}", end, next_sequence).items():
                rows[name].append(seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ms = {name: 1000 * statistics.median(values) for name, values in rows.items()}
    print(f"{args.batches} batches, {args.rounds} rounds (medians)\n")
    print("| | before 14f7db9 | after | after / before |\n| --- | ---: | ---: | ---: |")
    print(
        f"| take over + first append (ms) | {ms['rebuilt']:.1f} | {ms['now']:.1f} | {ms['now'] / ms['rebuilt']:.3f} |"
    )
    print(
        f"| truncate the last batch (ms) | {ms['truncate+rescan']:.1f} | {ms['truncate']:.1f} | "
        f"{ms['truncate'] / ms['truncate+rescan']:.3f} |"
    )
    print(f"| copy the batches as follower (s) | {plain_s:.2f} | {keeping_s:.2f} | {keeping_s / plain_s:.3f} |")


if __name__ == "__main__":
    main()
