package dev.kafkette.clientcheck;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

/**
 * Reads a compacted topic from the beginning to its end offsets, where offsets have gaps (the
 * cleaner removed superseded records), and reports the newest value per key.
 *
 * <p>Output: {"mode": "compacted", "topic": T, "records": N, "values": {key: value or null}}. Keys
 * and values are read as UTF-8; a tombstone's value is null. A key read twice is kept with its later
 * value, as a consumer rebuilding a table would, and counted in "records".
 */
final class CompactedRead {
  private CompactedRead() {}

  static String read(String bootstrap, String topic, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(ClientCheck.consumerProps(bootstrap))) {
      List<TopicPartition> partitions = ClientCheck.partitionsOf(consumer, topic, timeout);
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions, timeout);
      Map<String, String> values = new TreeMap<>();
      int records = 0;
      while (!reachedEnd(consumer, partitions, end)) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("timed out after " + records + " records");
        }
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          if (record.key() == null) {
            throw new IllegalStateException(
                record.partition() + "@" + record.offset() + ": a compacted topic's record has no key");
          }
          values.put(
              new String(record.key(), UTF_8),
              record.value() == null ? null : new String(record.value(), UTF_8));
          records++;
        }
      }
      return String.format(
          "{\"mode\": \"compacted\", \"topic\": %s, \"records\": %d, \"values\": %s}",
          Json.string(topic), records, Json.object(values));
    }
  }

  /** The position, not the last offset read, tells the end: the last offsets may be compacted away. */
  private static boolean reachedEnd(
      KafkaConsumer<byte[], byte[]> consumer,
      List<TopicPartition> partitions,
      Map<TopicPartition, Long> end) {
    for (TopicPartition partition : partitions) {
      if (consumer.position(partition) < end.get(partition)) {
        return false;
      }
    }
    return true;
  }
}
