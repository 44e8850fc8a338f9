"""The kafkette sink, and Spark's own Kafka source and sink (the Java client) against our broker."""

from __future__ import annotations

from pathlib import Path

from pipeline_topics import consume_all, create_topic, produce, source_and_target, unique_topic
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kafkette.broker.testing import BrokerProcess


def test_sink_writes_keys_values_headers_and_partitions(spark: SparkSession, broker: BrokerProcess) -> None:
    topic = unique_topic("sink")
    create_topic(broker.bootstrap, topic, 3)
    rows = [(f"k{i}", f"v{i}".encode(), i % 3, [("trace", f"t{i}".encode())]) for i in range(300)]
    frame = spark.createDataFrame(
        rows, "key string, value binary, partition int, headers array<struct<key:string,value:binary>>"
    )
    sink = frame.write.format("kafkette").mode("append")  # Python data sources refuse the default mode
    sink.option("kafka.bootstrap.servers", broker.bootstrap).option("topic", topic).save()

    received = consume_all(broker.bootstrap, topic, 3)
    got = sorted((m.key().decode(), m.value(), m.partition(), m.headers()) for m in received)
    assert got == sorted((k, v, p, [(hk, hv) for hk, hv in h]) for k, v, p, h in rows)


def test_spark_kafka_source_and_sink_batch(spark: SparkSession, broker: BrokerProcess) -> None:
    source, target = source_and_target(broker.bootstrap, "java", 6, 2)
    stored = produce(broker.bootstrap, source, [(f"k{i}".encode(), f"v{i}".encode(), i % 6) for i in range(240)])

    frame = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", source)
    rows = frame.load().select("key", "value", "partition", "offset").collect()
    assert sorted((r.key, r.value, r.partition, r.offset) for r in rows) == sorted(
        (r.key, r.value, r.partition, r.offset) for r in stored
    )
    ours = spark.read.format("kafkette").option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", source)
    ours.load().select("key", "value").write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap).option(
        "topic", target
    ).save()
    assert sorted((m.key(), m.value()) for m in consume_all(broker.bootstrap, target, 2)) == sorted(
        (r.key, r.value) for r in stored
    )


def test_spark_kafka_streaming_into_the_kafkette_sink(
    spark: SparkSession, broker: BrokerProcess, tmp_path: Path
) -> None:
    source, target = source_and_target(broker.bootstrap, "java-stream", 6, 1)
    produce(broker.bootstrap, source, [(None, str(i).encode(), i % 6) for i in range(300)])
    stream = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "100")
        .load()
    )
    doubled = stream.select((F.col("value").cast("string").cast("int") * 2).cast("string").alias("value"))
    query = (
        doubled.writeStream.format("kafkette")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(int(m.value()) for m in consume_all(broker.bootstrap, target, 1)) == [2 * i for i in range(300)]
