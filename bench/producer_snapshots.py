"""What producer-state snapshots cost at a roll and save at a restart, on one partition of a real disk.

    python -P bench/producer_snapshots.py [--producers 1000] [--segments 4] [--segment-mib 64] [--rounds 5]

Fills a partition with idempotent batches from ``--producers`` producers in turn (each roll writes a snapshot,
timed), then reopens it ``--rounds`` times each way, alternating which goes first: with its snapshots (the
newest one, then the batches after it) and with them moved aside (the last two segments, as before snapshots).
Each reopen times the log's open (which finds the open transactions) and the first append as leader (which
loads the producer state), and checks that both ways rebuild the same table. The page cache is warm for both:
this measures the reading of batch headers, not the disk. Numbers go to stdout; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.replication.partition import Partition, PartitionHost, PartitionSettings
from kafkette.broker.storage import Log, LogConfig
from kafkette.broker.storage.producer_snapshot import parse_snapshot_name

SETTINGS = PartitionSettings(max_message_bytes=1 << 20, log_append_time=False)
TOPIC_ID = uuid.UUID(int=1)
RECORDS_PER_BATCH = 10
VALUE = b"s" * 100
FIRST_PRODUCER_ID = 1000
# What a reload must get right: (producer id, epoch, last sequence, last offset) of each remembered batch.
ProducerTable = set[tuple[int, int, int, int]]


def idempotent_batch(producer_id: int, sequence: int) -> memoryview:
    now = int(time.time() * 1000)
    records = [Record(i, now, None, VALUE, []) for i in range(RECORDS_PER_BATCH)]
    encoded = encode_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
    return memoryview(bytearray(encoded))


def leader_on(directory: Path, config: LogConfig, recovery_point: int, leader_epoch: int) -> Partition:
    log = Log.open(directory, config, recovery_point=recovery_point)
    partition = Partition("bench", 0, TOPIC_ID, log, SETTINGS, PartitionHost(1))
    partition.become_leader(leader_epoch=leader_epoch, partition_epoch=leader_epoch, replicas=(1,), isr=(1,))
    return partition


class TimedRolls:
    """Stands between a log and its partition when it rolls (the partition then writes its snapshot), timing it."""

    def __init__(self, partition: Partition) -> None:
        self.partition = partition
        self.seconds: list[float] = []
        partition.log.listener = self

    def log_rolled(self, base_offset: int) -> None:
        started = time.perf_counter()
        self.partition.log_rolled(base_offset)
        self.seconds.append(time.perf_counter() - started)

    def log_start_moved(self) -> None:
        self.partition.log_start_moved()


def fill(directory: Path, config: LogConfig, producers: int, segments: int) -> tuple[int, list[float], int]:
    """Appends until ``segments`` rolls and half a segment more; (the log end, each snapshot's write time, the
    sequence every producer reached)."""
    partition = leader_on(directory, config, 0, leader_epoch=1)
    rolls = TimedRolls(partition)
    sequence = 0
    while len(partition.log.segments) <= segments or partition.log.segments[-1].size_bytes < config.segment_bytes // 2:
        for producer in range(producers):
            partition.append_from_producer(idempotent_batch(FIRST_PRODUCER_ID + producer, sequence), required_acks=1)
        sequence += RECORDS_PER_BATCH
    partition.log.flush()
    end = partition.log.log_end_offset
    partition.log.close()
    return end, rolls.seconds, sequence


def reopen(
    directory: Path, config: LogConfig, end: int, epoch: int, sequence: int
) -> tuple[float, float, ProducerTable]:
    """(seconds to open the log, seconds to the first append as leader, the producer table it loaded)."""
    started = time.perf_counter()
    partition = leader_on(directory, config, end, leader_epoch=epoch)
    opened = time.perf_counter()
    # The first producer's next batch: loading the state is what makes this append slow.
    partition.append_from_producer(idempotent_batch(FIRST_PRODUCER_ID, sequence), required_acks=1)
    appended = time.perf_counter()
    entries = partition.producers.snapshot({}, int(time.time() * 1000), SETTINGS.producer_id_expiration_ms)
    table = {(entry.producer_id, entry.epoch, entry.last_sequence, entry.last_offset) for entry in entries}
    partition.log.truncate_to(end)  # the next round starts from the same log
    partition.log.close()
    return opened - started, appended - opened, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--producers", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=4, help="closed segments before the active one")
    parser.add_argument("--segment-mib", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="default: a temporary directory")
    args = parser.parse_args()
    config = LogConfig(segment_bytes=args.segment_mib << 20)
    with tempfile.TemporaryDirectory(prefix="kafkette-bench-", dir=args.dir) as tmp:
        directory, aside = Path(tmp) / "bench-0", Path(tmp) / "aside"
        aside.mkdir()
        started = time.perf_counter()
        end, snapshot_seconds, sequence = fill(directory, config, args.producers, args.segments)
        print(
            f"filled {end:,} records in {time.perf_counter() - started:.1f} s: {args.segments} rolls of "
            f"{args.segment_mib} MiB segments, {args.producers:,} producers, {RECORDS_PER_BATCH} records per batch"
        )
        snapshots = sorted(path for path in directory.iterdir() if parse_snapshot_name(path.name) is not None)
        print(
            f"snapshot write at a roll: median {statistics.median(snapshot_seconds) * 1000:.2f} ms, max "
            f"{max(snapshot_seconds) * 1000:.2f} ms over {len(snapshot_seconds)} rolls; newest file "
            f"{snapshots[-1].stat().st_size:,} bytes"
        )
        times: dict[str, list[tuple[float, float]]] = {"snapshot": [], "last two segments": []}
        tables: dict[str, ProducerTable] = {}
        epoch = 1
        for round_number in range(args.rounds):
            ways = ["snapshot", "last two segments"]
            for way in ways if round_number % 2 == 0 else reversed(ways):
                epoch += 1
                if way != "snapshot":
                    for path in snapshots:
                        path.rename(aside / path.name)
                try:
                    opened, loaded, table = reopen(directory, config, end, epoch, sequence)
                finally:
                    for path in aside.iterdir():
                        path.rename(directory / path.name)
                times[way].append((opened, loaded))
                assert tables.setdefault(way, table) == table
        assert tables["snapshot"] == tables["last two segments"], (
            "the two ways loaded different producer state: do two segments hold five batches of every producer?"
        )
        print(f"the same {len(tables['snapshot']):,} producer entries either way; medians of {args.rounds} rounds:")
        for way, samples in times.items():
            opened = statistics.median(sample[0] for sample in samples)
            loaded = statistics.median(sample[1] for sample in samples)
            print(f"  {way:>17}: open {opened * 1000:8.1f} ms, first append (loads the state) {loaded * 1000:8.1f} ms")
        for name, column in (("open", 0), ("first append", 1)):
            with_snapshot = statistics.median(sample[column] for sample in times["snapshot"])
            without = statistics.median(sample[column] for sample in times["last two segments"])
            print(f"{name}, snapshot / last two segments: {with_snapshot / without:.2f}")


if __name__ == "__main__":
    main()
