package dev.kafkette.clientcheck;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.common.TopicPartition;

/**
 * What kafka-transactions.sh describe-producers prints, through Kafka's own AdminClient: the active
 * producers of TOPIC-0 (describeProducers, sent to the partition's leader).
 *
 * <p>Output: {"mode": "producers", "producers": {producerId: {"producerEpoch": "E", "lastSequence":
 * "S", "lastTimestamp": "T", "coordinatorEpoch": "C" or null, "currentTransactionStartOffset": "O" or
 * null}}}.
 */
final class Producers {
  private Producers() {}

  static String run(String bootstrap, String topic, Duration timeout) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    TopicPartition partition = new TopicPartition(topic, 0);
    Map<String, String> producers = new TreeMap<>();
    try (Admin admin = Admin.create(props)) {
      List<ProducerState> active =
          admin
              .describeProducers(List.of(partition))
              .partitionResult(partition)
              .get(timeout.toMillis(), TimeUnit.MILLISECONDS)
              .activeProducers();
      for (ProducerState state : active) {
        Map<String, String> fields = new LinkedHashMap<>();
        fields.put("producerEpoch", Integer.toString(state.producerEpoch()));
        fields.put("lastSequence", Integer.toString(state.lastSequence()));
        fields.put("lastTimestamp", Long.toString(state.lastTimestamp()));
        fields.put(
            "coordinatorEpoch",
            state.coordinatorEpoch().isPresent()
                ? Integer.toString(state.coordinatorEpoch().getAsInt())
                : null);
        fields.put(
            "currentTransactionStartOffset",
            state.currentTransactionStartOffset().isPresent()
                ? Long.toString(state.currentTransactionStartOffset().getAsLong())
                : null);
        producers.put(Long.toString(state.producerId()), Json.object(fields));
      }
    }
    return String.format(
        "{\"mode\": \"producers\", \"producers\": %s}", Json.objectOfJson(producers));
  }
}
