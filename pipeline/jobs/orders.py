"""Spend per user in event-time windows: order events in, aggregates out to a topic and to Parquet.

    python -m kafkette.pipeline.jobs.orders --bootstrap HOST:PORT --checkpoint DIR [--parquet DIR]

Reads JSON orders (``order_events.py``) with the ``kafkette`` source (or Spark's ``kafka``
source with ``--source kafka``), sums ``amount_cents`` per user in tumbling windows with a
watermark, and appends each closed window once: as JSON keyed by user id to the output topic,
and as Parquet rows. Committed offsets go to the group named like the query, so the operator
sees the job's lag.
"""

from __future__ import annotations

import argparse
import json
import os

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

QUERY_NAME = "orders-spend-per-user"
ORDER_SCHEMA = "order_id string, user_id string, amount_cents long, ts long"


def spend_per_user(orders: DataFrame, window: str, watermark: str) -> DataFrame:
    """Closed windows of spend per user; ``orders`` has the Kafka source's columns."""
    parsed = orders.select(F.from_json(F.col("value").cast("string"), ORDER_SCHEMA).alias("o")).select("o.*")
    timed = parsed.withColumn("event_time", F.timestamp_millis("ts")).withWatermark("event_time", watermark)
    grouped = timed.groupBy(F.window("event_time", window).alias("w"), "user_id")
    totals = grouped.agg(F.count("*").alias("orders"), F.sum("amount_cents").alias("spend_cents"))
    return totals.select(
        "user_id",
        F.col("w.start").alias("window_start"),
        F.col("w.end").alias("window_end"),
        "orders",
        "spend_cents",
    )


def as_records(aggregates: DataFrame) -> DataFrame:
    """Sink rows: key = user id, value = the aggregate as JSON (times in epoch milliseconds)."""
    value = F.to_json(
        F.struct(
            "user_id",
            F.unix_millis("window_start").alias("window_start"),
            F.unix_millis("window_end").alias("window_end"),
            "orders",
            "spend_cents",
        )
    )
    return aggregates.select(F.col("user_id").alias("key"), value.alias("value"))


def start(spark: SparkSession, args: argparse.Namespace) -> StreamingQuery:
    reader = spark.readStream.format(args.source).option("kafka.bootstrap.servers", args.bootstrap)
    reader = reader.option("subscribe", args.input).option("startingOffsets", "earliest")
    if args.source == "kafkette":
        reader = reader.option("kafka.group.id", args.group or QUERY_NAME)
    if args.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    aggregates = spend_per_user(reader.load(), args.window, args.watermark)

    def write(batch: DataFrame, _batch_id: int) -> None:
        batch.persist()
        if args.parquet:
            batch.write.mode("append").parquet(args.parquet)
        sink = as_records(batch).write.format("kafkette").mode("append")
        sink.option("kafka.bootstrap.servers", args.bootstrap).option("topic", args.output).save()
        batch.unpersist()

    writer = aggregates.writeStream.queryName(QUERY_NAME).outputMode("append").foreachBatch(write)
    writer = writer.option("checkpointLocation", args.checkpoint)
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime=args.trigger)
    return writer.start()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="spend per user in event-time windows")
    p.add_argument("--bootstrap", required=True, metavar="HOST:PORT")
    p.add_argument("--input", default="orders")
    p.add_argument("--output", default="spend-per-user")
    p.add_argument("--checkpoint", required=True, metavar="DIR")
    p.add_argument("--parquet", metavar="DIR", help="also append closed windows here as Parquet")
    p.add_argument("--source", choices=("kafkette", "kafka"), default="kafkette")
    p.add_argument("--group", help=f"group for lag reporting (default {QUERY_NAME})")
    p.add_argument("--window", default="1 minute")
    p.add_argument("--watermark", default="30 seconds")
    p.add_argument("--trigger", default="2 seconds")
    p.add_argument("--max-offsets-per-trigger", type=int)
    p.add_argument("--available-now", action="store_true", help="process what is there, then stop")
    p.add_argument("--master", help="spark.master (default: spark-submit's, else local[2])")
    p.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit's --conf (e.g. spark.kafkette.agent.port=4050 starts the driver agent)",
    )
    return p


def spark_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key] = value
    return conf


def master(given: str | None) -> str | None:
    """The master to set: the one given, none under spark-submit (it set spark.master), else local[2]."""
    if given is not None:
        return given
    return None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[2]"


def main() -> None:
    args = parser().parse_args()
    from kafkette.pipeline.session import session

    spark = session(QUERY_NAME, master(args.master), conf=spark_conf(args.conf))
    query = start(spark, args)
    try:
        while query.isActive:
            query.awaitTermination(10)
            if query.lastProgress:
                progress = query.lastProgress
                print(json.dumps({k: progress.get(k) for k in ("batchId", "numInputRows", "inputRowsPerSecond")}))
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
