package dev.kafkette.clientcheck;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The cluster-wide dynamic default (the BROKER resource named "", as kafka-configs.sh --entity-default sends it)
 * through Kafka's own AdminClient: sets KEY=VALUE, describes TOPIC's TOPIC_KEY and the default resource with
 * synonyms, deletes the default again and describes once more. Reports each description as "value source type
 * [synonym=value source, ...]" strings in one flat JSON object.
 */
final class DynamicConfigs {
  private DynamicConfigs() {}

  static String run(String bootstrap, String topic, String key, String value, String topicKey, Duration timeout)
      throws Exception {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    ConfigResource cluster = new ConfigResource(ConfigResource.Type.BROKER, "");
    ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    Map<String, String> report = new LinkedHashMap<>();
    try (Admin admin = Admin.create(props)) {
      alter(admin, cluster, new AlterConfigOp(new ConfigEntry(key, value), AlterConfigOp.OpType.SET), timeout);
      Map<ConfigResource, Config> set = describe(admin, List.of(topicResource, cluster), timeout);
      report.put("topic", entry(set.get(topicResource).get(topicKey)));
      report.put("default", entries(set.get(cluster)));
      alter(admin, cluster, new AlterConfigOp(new ConfigEntry(key, null), AlterConfigOp.OpType.DELETE), timeout);
      Map<ConfigResource, Config> deleted = describe(admin, List.of(topicResource, cluster), timeout);
      report.put("topic_after_delete", entry(deleted.get(topicResource).get(topicKey)));
      report.put("default_after_delete", entries(deleted.get(cluster)));
    }
    return Json.object(report);
  }

  private static void alter(Admin admin, ConfigResource resource, AlterConfigOp op, Duration timeout)
      throws Exception {
    admin
        .incrementalAlterConfigs(Map.of(resource, List.of(op)))
        .all()
        .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  private static Map<ConfigResource, Config> describe(
      Admin admin, List<ConfigResource> resources, Duration timeout) throws Exception {
    return admin
        .describeConfigs(resources, new DescribeConfigsOptions().includeSynonyms(true))
        .all()
        .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
  }

  private static String entry(ConfigEntry entry) {
    String synonyms =
        entry.synonyms().stream()
            .map(s -> s.name() + "=" + s.value() + " " + s.source())
            .collect(Collectors.joining(", "));
    return entry.value() + " " + entry.source() + " " + entry.type() + " [" + synonyms + "]";
  }

  private static String entries(Config config) {
    return config.entries().stream()
        .map(e -> e.name() + "=" + e.value() + " " + e.source())
        .collect(Collectors.joining(", "));
  }
}
