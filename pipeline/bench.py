"""Rows/s of the kafkette source against Spark's own Kafka source on the same topic (a benchmark, no pass/fail).

    python -m kafkette.pipeline.bench [--records 1000000] [--cores 2]

Starts a broker, fills a 6-partition topic with 100-byte values, then reads it whole in batch
mode with each source (``noop`` sink, so only reading is measured), best of three. Also times
the kafkette reader handing Spark tuples instead of Arrow batches. Writes
``bench/results/pipeline-source.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafkette.broker.process import BrokerProcess
from kafkette.pipeline import records
from kafkette.pipeline.session import local_session
from kafkette.pipeline.source import KafketteDataSource

PARTITIONS = 6
VALUE = b"v" * 100
TOPIC = "bench-source"


class TupleRows(KafketteDataSource):
    """The same reader, but each Arrow batch is handed to Spark as Python tuples (what Arrow saves)."""

    @classmethod
    def name(cls) -> str:
        return "kafkette_tuples"

    def reader(self, schema: StructType) -> DataSourceReader:
        inner = super().reader(schema)
        read = inner.read

        def as_tuples(partition: InputPartition) -> Iterator[tuple[Any, ...]]:
            for batch in read(partition):
                if not isinstance(batch, pa.RecordBatch):
                    raise TypeError(f"the kafkette reader yields Arrow batches, not {type(batch).__name__}")
                yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)

        # Only read() is swapped, so everything else about the reader is the measured one's.
        inner.read = as_tuples  # type: ignore[method-assign]
        return inner


def fill(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    for index in range(count):
        while True:
            try:
                producer.produce(TOPIC, VALUE, partition=index % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def rows_per_second(spark: SparkSession, sources: Sequence[str], bootstrap: str, count: int) -> dict[str, int]:
    """Best of three reads per source, the sources taking turns each round, so a busy spell on this shared
    machine slows every source alike rather than whichever ran during it."""
    best = dict.fromkeys(sources, float("inf"))
    for _ in range(3):
        for source in sources:
            frame = spark.read.format(source).option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
            began = time.perf_counter()
            frame.load().write.format("noop").mode("overwrite").save()
            best[source] = min(best[source], time.perf_counter() - began)
    return {source: round(count / seconds) for source, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results/pipeline-source.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data, BrokerProcess(data, {"num.partitions": str(PARTITIONS)}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # kept alive until the topic exists
        admin.create_topics([NewTopic(TOPIC, PARTITIONS)])[TOPIC].result()
        fill(broker.bootstrap, args.records)
        spark = local_session("kafkette-bench", cores=args.cores)
        spark.dataSource.register(TupleRows)
        result = {
            "records": args.records,
            "value_bytes": len(VALUE),
            "partitions": PARTITIONS,
            "master": f"local[{args.cores}]",
            "batch_records": records.BATCH_RECORDS,
            "rows_per_s": rows_per_second(
                spark, ("kafkette", "kafkette_tuples", "kafka"), broker.bootstrap, args.records
            ),
        }
        spark.stop()
    result["load_average_1m_at_end"] = round(os.getloadavg()[0], 1)
    result["ratio_kafkette_to_kafka"] = round(result["rows_per_s"]["kafkette"] / result["rows_per_s"]["kafka"], 3)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
