"""The records every real-client test writes, and the check of what it reads back.

tests/java/src/main/java/dev/kafkette/clientcheck/ClientCheck.java builds the same records
(key, value, headers, timestamp = base + index); change both together.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

RECORD_COUNT = 10_000
PARTITIONS = 4
# Fewer keys than records, so every key recurs and must keep landing on one partition.
KEY_SPACE = 1000
PADDING = b"abcdefghij" * 8
VALUE_PREFIX = b"value-"
Headers = tuple[tuple[str, bytes], ...]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Record:
    key: bytes
    value: bytes
    headers: Headers
    timestamp_ms: int | None  # None: stamped by the producer (kcat cannot set one per record)


@dataclass(frozen=True)
class Received:
    """A record as a consumer returned it, with the client's types normalised."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: Headers
    timestamp_ms: int


@dataclass(frozen=True)
class Delivered:
    """Where a producer's delivery report says record `index` was written."""

    index: int
    partition: int
    offset: int


def index_of(value: bytes) -> int:
    if not value.startswith(VALUE_PREFIX):
        raise ValueError(f"not a workload record value: {value[:40]!r}")
    return int(value[len(VALUE_PREFIX) :].split(b"-", 1)[0])


def normalise_headers(headers: Iterable[tuple[str, bytes | None]] | None) -> Headers:
    return tuple((name, value if value is not None else b"") for name, value in headers or ())


def received_from(record: Any) -> Received:
    """A kafka-python or aiokafka ConsumerRecord (the two share field names) as a Received."""
    return Received(
        partition=record.partition,
        offset=record.offset,
        key=record.key,
        value=record.value,
        headers=normalise_headers(record.headers),
        timestamp_ms=record.timestamp,
    )


@dataclass(frozen=True)
class Workload:
    """`count` records with recurring keys, two headers each and explicit timestamps.

    `fixed_headers` replaces the per-record headers for producers that can only attach the same
    headers to every record; `base_timestamp_ms=None` leaves timestamps to the producer.
    """

    count: int = RECORD_COUNT
    base_timestamp_ms: int | None = None
    fixed_headers: Headers | None = None

    @classmethod
    def starting_now(cls, count: int = RECORD_COUNT) -> Workload:
        # Near-now timestamps stay inside any retention and timestamp-difference limits.
        return cls(count=count, base_timestamp_ms=now_ms())

    def record(self, index: int) -> Record:
        headers = self.fixed_headers
        if headers is None:
            headers = (("seq", str(index).encode()), ("parity", b"even" if index % 2 == 0 else b"odd"))
        return Record(
            key=f"k{index % KEY_SPACE}".encode(),
            value=VALUE_PREFIX + str(index).encode() + b"-" + PADDING,
            headers=headers,
            timestamp_ms=None if self.base_timestamp_ms is None else self.base_timestamp_ms + index,
        )

    def records(self) -> Iterator[Record]:
        return (self.record(index) for index in range(self.count))


def verify(
    workload: Workload,
    received: Iterable[Received],
    *,
    delivered: Iterable[Delivered] = (),
    produced_between_ms: tuple[int, int] | None = None,
    partitions: int | None = PARTITIONS,
) -> None:
    """Fail unless `received`, in the order the consumer returned it, is exactly the workload.

    Checks every record's key, value, headers and timestamp, that offsets and record indices
    both rise within each partition, that a key never appears on two partitions, that records
    were spread over `partitions` partitions, and that each delivery report matches where the
    record was read.
    """
    problems: list[str] = []
    by_index: dict[int, Received] = {}
    last_in_partition: dict[int, tuple[int, int]] = {}
    partition_of_key: dict[bytes | None, int] = {}
    for got in received:
        where = f"{got.partition}@{got.offset}"
        try:
            index = index_of(got.value)
        except ValueError as error:
            problems.append(f"{where}: {error}")
            continue
        earlier = by_index.get(index)
        if earlier is not None:
            problems.append(f"{where}: record {index} already read at {earlier.partition}@{earlier.offset}")
            continue
        if not 0 <= index < workload.count:
            problems.append(f"{where}: record index {index} outside the workload")
            continue
        by_index[index] = got
        problems += _content_problems(where, workload.record(index), got, produced_between_ms)
        last = last_in_partition.get(got.partition)
        if last is not None and (got.offset <= last[0] or index <= last[1]):
            problems.append(f"{where}: record {index} read after record {last[1]} at offset {last[0]}")
        last_in_partition[got.partition] = (got.offset, index)
        key_partition = partition_of_key.setdefault(got.key, got.partition)
        if key_partition != got.partition:
            problems.append(f"{where}: key {got.key!r} also on partition {key_partition}")

    missing = workload.count - len(by_index)
    if missing:
        absent = [index for index in range(workload.count) if index not in by_index]
        problems.append(f"{missing} of {workload.count} records never read, e.g. {absent[:10]}")
    if partitions is not None and len(last_in_partition) != partitions:
        problems.append(f"records on partitions {sorted(last_in_partition)}, expected {partitions} partitions")
    for report in delivered:
        got = by_index.get(report.index)
        if got is not None and (got.partition, got.offset) != (report.partition, report.offset):
            problems.append(
                f"record {report.index} acknowledged at {report.partition}@{report.offset}"
                f" but read at {got.partition}@{got.offset}"
            )
    if problems:
        shown = "\n  ".join(problems[:20])
        raise AssertionError(f"{len(problems)} problem(s) with the records read back:\n  {shown}")


def _content_problems(
    where: str, expected: Record, got: Received, produced_between_ms: tuple[int, int] | None
) -> list[str]:
    problems = [
        f"{where}: {what} {actual!r} != expected {wanted!r}"
        for what, actual, wanted in (
            ("key", got.key, expected.key),
            ("value", got.value, expected.value),
            ("headers", got.headers, expected.headers),
        )
        if actual != wanted
    ]
    if expected.timestamp_ms is not None:
        if got.timestamp_ms != expected.timestamp_ms:
            problems.append(f"{where}: timestamp {got.timestamp_ms} != expected {expected.timestamp_ms}")
    elif produced_between_ms is not None:
        start, end = produced_between_ms
        if not start <= got.timestamp_ms <= end:
            problems.append(f"{where}: timestamp {got.timestamp_ms} outside the produce run [{start}, {end}]")
    return problems


class ReadBack:
    """Collects what a consumer returns until every partition is read up to its high watermark.

    Reading to the watermarks taken after producing, rather than to a record count, lets
    `verify` notice records that should not be there.
    """

    def __init__(self, watermarks: Mapping[int, tuple[int, int]], timeout_s: float = 60.0) -> None:
        self.records: list[Received] = []
        self._watermarks = dict(watermarks)
        self._pending = {partition: high for partition, (low, high) in watermarks.items() if high > low}
        self._deadline = time.monotonic() + timeout_s

    @property
    def done(self) -> bool:
        if not self._pending:
            return True
        if time.monotonic() > self._deadline:
            short = {partition: self._watermarks[partition] for partition in sorted(self._pending)}
            raise AssertionError(
                f"timed out after reading {len(self.records)} records; partitions still short of"
                f" their (log start, high watermark): {short}"
            )
        return False

    def add(self, record: Received) -> None:
        self.records.append(record)
        high = self._pending.get(record.partition)
        if high is not None and record.offset + 1 >= high:
            del self._pending[record.partition]
