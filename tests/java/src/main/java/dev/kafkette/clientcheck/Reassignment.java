package dev.kafkette.clientcheck;

import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;

/**
 * What kafka-reassign-partitions.sh does, through Kafka's own AdminClient: moves TOPIC-0 to REPLICAS
 * (alterPartitionReassignments), polls listPartitionReassignments until the move is no longer in flight,
 * then reports the partition's replicas and leader (describeTopics), which brokers hold it and how large
 * (describeLogDirs), and what cancelling a move that is no longer in flight answers.
 */
final class Reassignment {
  private Reassignment() {}

  static String run(String bootstrap, String topic, String replicas, Duration timeout) throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    TopicPartition partition = new TopicPartition(topic, 0);
    List<Integer> target =
        Arrays.stream(replicas.split(",")).map(Integer::valueOf).collect(Collectors.toList());
    Map<String, String> report = new LinkedHashMap<>();
    try (Admin admin = Admin.create(props)) {
      long millis = timeout.toMillis();
      admin
          .alterPartitionReassignments(
              Map.of(partition, Optional.of(new NewPartitionReassignment(target))))
          .all()
          .get(millis, TimeUnit.MILLISECONDS);
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
      while (admin
          .listPartitionReassignments()
          .reassignments()
          .get(millis, TimeUnit.MILLISECONDS)
          .containsKey(partition)) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("the reassignment of " + partition + " did not finish");
        }
        Thread.sleep(200);
      }
      TopicDescription description =
          admin.describeTopics(List.of(topic)).allTopicNames().get(millis, TimeUnit.MILLISECONDS).get(topic);
      TopicPartitionInfo info = description.partitions().get(0);
      report.put(
          "replicas", info.replicas().stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining(",")));
      report.put("leader_in_target", Boolean.toString(target.contains(info.leader().id())));
      // Each removed replica deletes its copy when its broker applies the completed move: wait for that.
      Map<Integer, Long> holders = holders(admin, partition, millis);
      while (!holders.keySet().equals(Set.copyOf(target)) && System.nanoTime() < deadline) {
        Thread.sleep(200);
        holders = holders(admin, partition, millis);
      }
      report.put(
          "holders",
          holders.entrySet().stream()
              .map(e -> e.getKey() + ":" + e.getValue())
              .collect(Collectors.joining(",")));
      report.put("cancel_idle", cancel(admin, partition, millis));
    }
    return Json.object(report);
  }

  /** Broker id to the bytes of its copy, for every broker whose log dir holds the partition. */
  private static Map<Integer, Long> holders(Admin admin, TopicPartition partition, long millis)
      throws Exception {
    List<Integer> brokers =
        admin.describeCluster().nodes().get(millis, TimeUnit.MILLISECONDS).stream()
            .map(Node::id)
            .collect(Collectors.toList());
    Map<Integer, Map<String, LogDirDescription>> dirs =
        admin.describeLogDirs(brokers).allDescriptions().get(millis, TimeUnit.MILLISECONDS);
    Map<Integer, Long> sizes = new TreeMap<>();
    dirs.forEach(
        (broker, byDir) ->
            byDir.values().forEach(
                dir -> {
                  ReplicaInfo replica = dir.replicaInfos().get(partition);
                  if (replica != null) {
                    sizes.put(broker, replica.size());
                  }
                }));
    return sizes;
  }

  private static String cancel(Admin admin, TopicPartition partition, long millis) throws Exception {
    try {
      admin
          .alterPartitionReassignments(Map.of(partition, Optional.empty()))
          .all()
          .get(millis, TimeUnit.MILLISECONDS);
      return "accepted";
    } catch (ExecutionException e) {
      return e.getCause().getClass().getSimpleName();
    }
  }
}
