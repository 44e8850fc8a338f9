package dev.kafkette.clientcheck;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.consumer.StickyAssignor;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;

/**
 * A KafkaConsumer in a group (subscribe, classic protocol) until the process is killed.
 *
 * <p>Prints JSON lines as tests/clients/group_members.py reads them: {"member": id} and
 * {"assigned": [partitions]} whenever they change, and {"record": [partition, offset]} for every
 * record, printed (processed) before the batch's offsets are committed synchronously, so none is
 * skipped. ASSIGNOR "default" keeps the client's own default (range, then cooperative-sticky).
 */
final class GroupMember {
  private static final Map<String, String> ASSIGNORS =
      Map.of(
          "range", RangeAssignor.class.getName(),
          "roundrobin", RoundRobinAssignor.class.getName(),
          "sticky", StickyAssignor.class.getName(),
          "cooperative-sticky", CooperativeStickyAssignor.class.getName());

  private GroupMember() {}

  static void run(String bootstrap, String topic, String group, String assignor, String instanceId) {
    Properties props = ClientCheck.consumerProps(bootstrap);
    props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 3000);
    props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 250);
    props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 10_000);
    if (!assignor.equals("default")) {
      String assignorClass = ASSIGNORS.get(assignor);
      if (assignorClass == null) {
        throw new IllegalArgumentException("unknown assignor: " + assignor);
      }
      props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignorClass);
    }
    if (instanceId != null) {
      props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, instanceId);
    }
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
      consumer.subscribe(List.of(topic));
      String assigned = null;
      String member = "";
      while (true) {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
        String now = partitionList(consumer);
        if (!now.equals(assigned)) {
          assigned = now;
          emit("{\"assigned\": " + now + "}");
        }
        String memberId = consumer.groupMetadata().memberId();
        if (!memberId.equals(member)) {
          member = memberId;
          emit("{\"member\": " + Json.string(memberId) + "}");
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> record : records) {
          emit("{\"record\": [" + record.partition() + ", " + record.offset() + "]}");
          offsets.put(
              new TopicPartition(record.topic(), record.partition()),
              new OffsetAndMetadata(record.offset() + 1));
        }
        if (offsets.isEmpty()) {
          continue;
        }
        try {
          consumer.commitSync(offsets);
        } catch (KafkaException e) {
          // As with Kafka, a commit racing a rebalance fails; the next owner gets the records again.
          System.err.println("commit failed: " + e);
        }
      }
    }
  }

  private static String partitionList(KafkaConsumer<byte[], byte[]> consumer) {
    TreeSet<Integer> partitions = new TreeSet<>();
    for (TopicPartition partition : consumer.assignment()) {
      partitions.add(partition.partition());
    }
    return partitions.toString();
  }

  private static void emit(String line) {
    System.out.println(line);
    System.out.flush();
  }
}
