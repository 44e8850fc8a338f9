package dev.kafkette.clientcheck;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A transactional producer's life: initTransactions, a committed transaction that also commits a
 * group's offset (sendOffsetsToTransaction), an aborted one, then a second instance with the same
 * transactional.id that fences the first. A read_committed consumer then reads the output topic to
 * its end (the last stable offset).
 *
 * <p>Output: {"mode": "txn", "read": N, "values": {offset: value}, "committed_offset": "O",
 * "fenced": "true"|"false"}.
 */
final class Transactions {
  private static final int RECORDS = 5;

  private Transactions() {}

  static String run(String bootstrap, String input, String output, String group, Duration timeout) {
    String transactionalId = "clientcheck-" + output;
    boolean fenced;
    try (KafkaProducer<byte[], byte[]> first = producer(bootstrap, transactionalId)) {
      first.initTransactions();
      first.beginTransaction();
      for (int i = 0; i < RECORDS; i++) {
        first.send(new ProducerRecord<>(output, ("committed-" + i).getBytes(UTF_8)));
      }
      first.sendOffsetsToTransaction(
          Map.of(new TopicPartition(input, 0), new OffsetAndMetadata(3)),
          new ConsumerGroupMetadata(group));
      first.commitTransaction();

      first.beginTransaction();
      for (int i = 0; i < RECORDS; i++) {
        first.send(new ProducerRecord<>(output, ("aborted-" + i).getBytes(UTF_8)));
      }
      first.flush();
      first.abortTransaction();

      first.beginTransaction();
      first.send(new ProducerRecord<>(output, "zombie".getBytes(UTF_8)));
      first.flush();
      try (KafkaProducer<byte[], byte[]> second = producer(bootstrap, transactionalId)) {
        second.initTransactions(); // aborts the first's open transaction
        try {
          first.commitTransaction();
          fenced = false;
        } catch (ProducerFencedException e) {
          fenced = true;
        }
        second.beginTransaction();
        second.send(new ProducerRecord<>(output, "successor".getBytes(UTF_8)));
        second.commitTransaction();
      }
    }
    return String.format(
        "{\"mode\": \"txn\", %s, \"committed_offset\": %s, \"fenced\": %s}",
        readCommitted(bootstrap, output, timeout),
        Json.string(committedOffset(bootstrap, input, group, timeout)),
        Json.string(Boolean.toString(fenced)));
  }

  private static KafkaProducer<byte[], byte[]> producer(String bootstrap, String transactionalId) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    return new KafkaProducer<>(props);
  }

  /** Every record a read_committed consumer reads from the start to the end it is told. */
  private static String readCommitted(String bootstrap, String topic, Duration timeout) {
    Properties props = ClientCheck.consumerProps(bootstrap);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    long deadline = System.nanoTime() + timeout.toNanos();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> partitions = ClientCheck.partitionsOf(consumer, topic, timeout);
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions, timeout);
      Map<String, String> values = new TreeMap<>();
      List<TopicPartition> pending = new ArrayList<>(partitions);
      while (!pending.isEmpty()) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("timed out after " + values.size() + " records");
        }
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          values.put(
              record.partition() + "@" + record.offset(), new String(record.value(), UTF_8));
        }
        pending.removeIf(p -> consumer.position(p) >= end.get(p));
      }
      return String.format("\"read\": %d, \"values\": %s", values.size(), Json.object(values));
    }
  }

  private static String committedOffset(
      String bootstrap, String topic, String group, Duration timeout) {
    Properties props = ClientCheck.consumerProps(bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      TopicPartition partition = new TopicPartition(topic, 0);
      OffsetAndMetadata committed = consumer.committed(java.util.Set.of(partition), timeout).get(partition);
      return committed == null ? "none" : Long.toString(committed.offset());
    }
  }
}
