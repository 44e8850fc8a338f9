package dev.kafkette.clientcheck;

import static java.nio.charset.StandardCharsets.UTF_8;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.zip.CRC32;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Drives the Java Kafka client against a broker and checks what comes back.
 *
 * <pre>
 *   produce BOOTSTRAP TOPIC COUNT [TIMEOUT_SECONDS]
 *   consume BOOTSTRAP TOPIC COUNT [TIMEOUT_SECONDS]
 *   compacted BOOTSTRAP TOPIC [TIMEOUT_SECONDS]
 *   group BOOTSTRAP TOPIC GROUP [ASSIGNOR [INSTANCE_ID]]
 *   dynamic-default BOOTSTRAP TOPIC KEY VALUE TOPIC_KEY
 *   reassign BOOTSTRAP TOPIC REPLICAS
 * </pre>
 *
 * <p>Prints one JSON summary line on stdout and exits 0, or describes the first problem on stderr
 * and exits 1. produce and consume report, per partition, the record count, first and last offset
 * and a digest of the record indices in offset order, so a caller can compare the two runs.
 * compacted reads a compacted topic (offsets with gaps) to its end and reports key to value.
 * group runs a group member until killed, printing events as JSON lines (see GroupMember).
 * dynamic-default sets and deletes a cluster-wide dynamic broker config (see DynamicConfigs).
 * reassign moves partition 0 of TOPIC to the comma-separated REPLICAS and reports (see Reassignment).
 *
 * <p>The records follow tests/clients/client_workload.py exactly; change both together.
 */
public final class ClientCheck {
  private static final int KEY_SPACE = 1000;
  private static final String PADDING = "abcdefghij".repeat(8);
  private static final int DEFAULT_TIMEOUT_SECONDS = 60;

  private ClientCheck() {}

  public static void main(String[] args) {
    try {
      System.out.println(run(args));
    } catch (Exception e) {
      System.err.println("clientcheck: " + e);
      e.printStackTrace(System.err);
      System.exit(1);
    }
    // Client threads (and their daemon helpers) must not keep the JVM alive.
    System.exit(0);
  }

  private static String run(String[] args) throws Exception {
    if (args.length < 3 || args.length > 6) {
      throw new IllegalArgumentException(
          "usage: produce|consume BOOTSTRAP TOPIC COUNT [TIMEOUT_SECONDS]"
              + " | compacted BOOTSTRAP TOPIC [TIMEOUT_SECONDS]"
              + " | group BOOTSTRAP TOPIC GROUP [ASSIGNOR [INSTANCE_ID]]"
              + " | dynamic-default BOOTSTRAP TOPIC KEY VALUE TOPIC_KEY"
              + " | reassign BOOTSTRAP TOPIC REPLICAS"
              + " | txn BOOTSTRAP INPUT_TOPIC OUTPUT_TOPIC GROUP"
              + " | producers BOOTSTRAP TOPIC");
    }
    String bootstrap = args[1];
    String topic = args[2];
    switch (args[0]) {
      case "produce":
        return produce(bootstrap, topic, Integer.parseInt(args[3]), timeout(args, 4));
      case "consume":
        return consume(bootstrap, topic, Integer.parseInt(args[3]), timeout(args, 4));
      case "compacted":
        return CompactedRead.read(bootstrap, topic, timeout(args, 3));
      case "group":
        GroupMember.run(
            bootstrap,
            topic,
            args[3],
            args.length > 4 ? args[4] : "default",
            args.length > 5 ? args[5] : null);
        return "";
      case "dynamic-default":
        return DynamicConfigs.run(
            bootstrap, topic, args[3], args[4], args[5], Duration.ofSeconds(DEFAULT_TIMEOUT_SECONDS));
      case "reassign":
        return Reassignment.run(bootstrap, topic, args[3], Duration.ofSeconds(DEFAULT_TIMEOUT_SECONDS));
      case "txn":
        return Transactions.run(
            bootstrap, topic, args[3], args[4], Duration.ofSeconds(DEFAULT_TIMEOUT_SECONDS));
      case "producers":
        return Producers.run(bootstrap, topic, Duration.ofSeconds(DEFAULT_TIMEOUT_SECONDS));
      default:
        throw new IllegalArgumentException("unknown mode: " + args[0]);
    }
  }

  private static Duration timeout(String[] args, int index) {
    return Duration.ofSeconds(
        args.length > index ? Integer.parseInt(args[index]) : DEFAULT_TIMEOUT_SECONDS);
  }

  static byte[] key(int index) {
    return ("k" + (index % KEY_SPACE)).getBytes(UTF_8);
  }

  static byte[] value(int index) {
    return ("value-" + index + "-" + PADDING).getBytes(UTF_8);
  }

  static List<Header> headers(int index) {
    return List.of(
        new RecordHeader("seq", Integer.toString(index).getBytes(UTF_8)),
        new RecordHeader("parity", (index % 2 == 0 ? "even" : "odd").getBytes(UTF_8)));
  }

  static int indexOf(byte[] value) {
    String text = new String(value, UTF_8);
    int end = text.indexOf('-', "value-".length());
    if (!text.startsWith("value-") || end < 0) {
      throw new IllegalStateException("unexpected record value: " + text);
    }
    return Integer.parseInt(text.substring("value-".length(), end));
  }

  /** What one partition received, in offset order. */
  private static final class PartitionLog {
    private final List<long[]> offsetAndIndex = new ArrayList<>();

    void add(long offset, int index) {
      offsetAndIndex.add(new long[] {offset, index});
    }

    String toJson() {
      offsetAndIndex.sort((a, b) -> Long.compare(a[0], b[0]));
      CRC32 digest = new CRC32();
      for (long[] entry : offsetAndIndex) {
        digest.update(Integer.toString((int) entry[1]).getBytes(UTF_8));
        digest.update('\n');
      }
      return String.format(
          "{\"count\": %d, \"first_offset\": %d, \"last_offset\": %d, \"digest\": %d}",
          offsetAndIndex.size(),
          offsetAndIndex.get(0)[0],
          offsetAndIndex.get(offsetAndIndex.size() - 1)[0],
          digest.getValue());
    }
  }

  private static String summary(
      String mode, String topic, int count, long baseTimestamp, Map<Integer, PartitionLog> logs) {
    StringBuilder partitions = new StringBuilder();
    for (Map.Entry<Integer, PartitionLog> entry : logs.entrySet()) {
      if (partitions.length() > 0) {
        partitions.append(", ");
      }
      partitions.append('"').append(entry.getKey()).append("\": ").append(entry.getValue().toJson());
    }
    return String.format(
        "{\"mode\": \"%s\", \"topic\": \"%s\", \"count\": %d, \"base_timestamp_ms\": %d,"
            + " \"partitions\": {%s}}",
        mode, topic, count, baseTimestamp, partitions);
  }

  /** Sends COUNT records with the default producer config: idempotence on, acks=all. */
  private static String produce(String bootstrap, String topic, int count, Duration timeout)
      throws Exception {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.CLIENT_ID_CONFIG, "kafkette-clientcheck-producer");
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    long baseTimestamp = System.currentTimeMillis();
    List<Future<RecordMetadata>> acks = new ArrayList<>(count);
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props)) {
      for (int i = 0; i < count; i++) {
        acks.add(
            producer.send(
                new ProducerRecord<>(topic, null, baseTimestamp + i, key(i), value(i), headers(i))));
      }
      producer.flush();
    }
    Map<Integer, PartitionLog> logs = new TreeMap<>();
    long[] lastOffset = new long[0];
    for (int i = 0; i < count; i++) {
      RecordMetadata ack = acks.get(i).get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      if (ack.partition() >= lastOffset.length) {
        lastOffset = Arrays.copyOf(lastOffset, ack.partition() + 1);
      }
      // Records sent in order to one partition must be acknowledged at increasing offsets.
      if (ack.offset() < lastOffset[ack.partition()]) {
        throw new IllegalStateException(
            "record " + i + " acknowledged at " + ack.partition() + "@" + ack.offset()
                + ", below an earlier record's offset");
      }
      lastOffset[ack.partition()] = ack.offset() + 1;
      logs.computeIfAbsent(ack.partition(), p -> new PartitionLog()).add(ack.offset(), i);
    }
    return summary("produce", topic, count, baseTimestamp, logs);
  }

  /** A byte-array consumer's config without auto-commit: callers commit, if at all, themselves. */
  static Properties consumerProps(String bootstrap) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ConsumerConfig.CLIENT_ID_CONFIG, "kafkette-clientcheck-consumer");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    props.put(
        ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    return props;
  }

  /** Every partition of the topic, as the cluster's metadata lists them. */
  static List<TopicPartition> partitionsOf(
      KafkaConsumer<byte[], byte[]> consumer, String topic, Duration timeout) {
    List<TopicPartition> partitions = new ArrayList<>();
    for (PartitionInfo info : consumer.partitionsFor(topic, timeout)) {
      partitions.add(new TopicPartition(topic, info.partition()));
    }
    if (partitions.isEmpty()) {
      throw new IllegalStateException("topic " + topic + " has no partitions");
    }
    return partitions;
  }

  /** Reads every partition from the beginning without a group and checks each record. */
  private static String consume(String bootstrap, String topic, int count, Duration timeout) {
    Properties props = consumerProps(bootstrap);
    long deadline = System.nanoTime() + timeout.toNanos();
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      List<TopicPartition> partitions = partitionsOf(consumer, topic, timeout);
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      Map<TopicPartition, Long> beginning = consumer.beginningOffsets(partitions, timeout);
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions, timeout);
      long inLog = 0;
      for (TopicPartition partition : partitions) {
        inLog += end.get(partition) - beginning.get(partition);
      }
      if (inLog != count) {
        throw new IllegalStateException("topic holds " + inLog + " records, expected " + count);
      }

      RecordChecker checker = new RecordChecker(count);
      while (checker.received() < count) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException(
              "timed out after " + checker.received() + " of " + count + " records");
        }
        for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
          checker.check(record);
        }
      }
      return summary("consume", topic, count, checker.baseTimestamp, checker.logs);
    }
  }

  /** Checks records one by one: content, per-partition order, no duplicates, one timestamp base. */
  private static final class RecordChecker {
    final Map<Integer, PartitionLog> logs = new TreeMap<>();
    long baseTimestamp = Long.MIN_VALUE;
    private final boolean[] seen;
    private final Map<Integer, long[]> lastOffsetAndIndex = new TreeMap<>();
    private int received;

    RecordChecker(int count) {
      seen = new boolean[count];
    }

    int received() {
      return received;
    }

    void check(ConsumerRecord<byte[], byte[]> record) {
      String where = record.partition() + "@" + record.offset();
      int index = indexOf(record.value());
      if (index < 0 || index >= seen.length) {
        throw new IllegalStateException(where + ": record index " + index + " out of range");
      }
      if (seen[index]) {
        throw new IllegalStateException(where + ": record " + index + " received twice");
      }
      seen[index] = true;
      expect(where, "key", key(index), record.key());
      expect(where, "value", value(index), record.value());
      List<Header> headers = Arrays.asList(record.headers().toArray());
      if (!headers.equals(headers(index))) {
        throw new IllegalStateException(where + ": headers " + headers + " != " + headers(index));
      }
      if (record.timestampType() != TimestampType.CREATE_TIME) {
        throw new IllegalStateException(where + ": timestamp type " + record.timestampType());
      }
      long base = record.timestamp() - index;
      if (baseTimestamp == Long.MIN_VALUE) {
        baseTimestamp = base;
      } else if (base != baseTimestamp) {
        throw new IllegalStateException(where + ": timestamp " + record.timestamp() + " off scheme");
      }
      long[] last = lastOffsetAndIndex.get(record.partition());
      if (last != null && (record.offset() <= last[0] || index <= last[1])) {
        throw new IllegalStateException(
            where + ": record " + index + " out of order after " + last[1] + " at offset " + last[0]);
      }
      lastOffsetAndIndex.put(record.partition(), new long[] {record.offset(), index});
      logs.computeIfAbsent(record.partition(), p -> new PartitionLog()).add(record.offset(), index);
      received++;
    }

    private static void expect(String where, String what, byte[] expected, byte[] actual) {
      if (!Arrays.equals(expected, actual)) {
        throw new IllegalStateException(
            where + ": " + what + " " + render(actual) + " != " + render(expected));
      }
    }

    private static String render(byte[] bytes) {
      return bytes == null ? "null" : '"' + new String(bytes, UTF_8) + '"';
    }
  }
}
