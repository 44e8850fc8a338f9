"""The ``kafkette`` data source: batch and streaming reads with the options and columns of Spark's Kafka source.

The driver plans (partitions, offsets, admission control) through an admin client; each task
reads one offset range with assign + seek (records.py). Readers are pickled to executors, so
every client is created on first use and dropped when pickled.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from kafkette.pipeline import offsets, planning
from kafkette.pipeline.driver import DriverClient
from kafkette.pipeline.offsets import OptionError
from kafkette.pipeline.options import SourceOptions, parse_sink, parse_source
from kafkette.pipeline.records import DataLossError, read_range, source_schema

log = logging.getLogger(__name__)

NAME = "kafkette"


class RangePartition(InputPartition):
    def __init__(self, rng: planning.OffsetRange) -> None:
        super().__init__(rng)
        self.rng = rng


class KafketteDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return source_schema(parse_source(self.options, streaming=False).include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(parse_source(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(parse_source(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from kafkette.pipeline.sink import BatchWriter

        return BatchWriter(parse_sink(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from kafkette.pipeline.sink import StreamWriter

        return StreamWriter(parse_sink(self.options, streaming=True), schema)


class _Reading:
    """What batch and stream readers share: the driver client, data-loss checks, planning, reading."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.client = DriverClient(options)

    def plan(self, start: Mapping[offsets.TopicPartition, int], end: offsets.Offsets) -> list[RangePartition]:
        earliest = self.client.earliest(end)
        # Partitions new since the last batch start at their log start, as in Spark's source.
        checked = planning.check_start({tp: start.get(tp, earliest[tp]) for tp in end}, earliest)
        gone = [f"{t}-{p}" for t, p in start if (t, p) not in end]
        lost = checked.lost + [f"{name} is no longer read (deleted or unassigned)" for name in gone]
        if lost:
            detail = "; ".join(lost)
            if self.options.fail_on_data_loss:
                raise DataLossError(f"data loss: {detail}; set failOnDataLoss=false to go on without them")
            log.warning("skipping lost data (failOnDataLoss=false): %s", detail)
        ranges = planning.offset_ranges(checked.start, end)
        return [RangePartition(r) for r in planning.split(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        o = self.options
        rng = partition.rng  # type: ignore[attr-defined]
        return read_range(o.consumer, rng, o.include_headers, o.poll_timeout_ms, o.fail_on_data_loss)


class BatchReader(_Reading, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        partitions = self.client.partitions()
        start = offsets.resolve(self.options.starting, partitions, self.client)
        if self.options.ending is None:
            raise OptionError("a batch read needs its ending offsets (parse_source sets them for batch reads)")
        end = offsets.resolve(self.options.ending, partitions, self.client)
        return self.plan(start, end)


class StreamReader(_Reading, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"topic": {"partition": next offset}}``; the group commit makes lag visible.

    Spark calls ``commit(end)`` only while planning the batch after the one that ended at
    ``end``, so an idle query would never commit its last batch. ``latestOffset(start, ...)`` is
    that same planning step and ``start`` is always a completed batch's end, so committing
    ``start`` there (and again in ``commit``) keeps the group at most one trigger behind.
    """

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._target: offsets.Offsets | None = None  # Trigger.AvailableNow stops here
        self._latest: offsets.Offsets = {}
        self._committed: offsets.Offsets = {}

    def initialOffset(self) -> dict:
        start = offsets.resolve(self.options.starting, self.client.partitions(), self.client)
        return offsets.to_spark(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.client.latest(self.client.partitions())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets.from_spark(start)
        self._commit_group(begin)
        self._latest = self._target if self._target is not None else self.client.latest(self.client.partitions())
        end = self._latest
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in end if tp not in begin]
            end = planning.rate_limit({**begin, **self.client.earliest(new)}, end, limit.max_rows)
        return offsets.to_spark(end)

    def reportLatestOffset(self) -> dict | None:
        return offsets.to_spark(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return self.plan(offsets.from_spark(start), offsets.from_spark(end))

    def commit(self, end: dict) -> None:
        self._commit_group(offsets.from_spark(end))

    def _commit_group(self, completed: offsets.Offsets) -> None:
        if not completed or completed == self._committed:
            return
        try:
            self.client.commit(self.options.group_id, completed)
        except Exception as exc:  # lag reporting must never fail the query
            log.warning("committing offsets for group %s failed: %s", self.options.group_id, exc)
            return
        self._committed = dict(completed)

    def stop(self) -> None:
        self.client.close()
