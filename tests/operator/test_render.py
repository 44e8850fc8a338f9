"""Rendered KafkaCluster children: valid Kubernetes objects (strict schema) with the shape the design asks."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import kubernetes_validate
import pytest

from kafkette.broker.config import BrokerConfig, parse_properties
from kafkette.operator.kube.handlers.common import BOOTSTRAP_ANNOTATION, cluster_bootstrap
from kafkette.operator.kube.names import kafka_cluster_id
from kafkette.operator.kube.render import render_cluster
from kafkette.operator.kube.start import annotation, ordinal, server_properties
from kafkette.operator.resources import KafkaClusterSpec

KUBERNETES_SCHEMA_VERSION = "1.35.0"
UID = "5b7f6c1e-0d5e-4f4a-9d55-6d1f0d3c2b10"

SPECS = {
    "defaults": {},
    "one-broker": {"brokers": 1},
    "everything": {
        "brokers": 5,
        "version": "0.2.0",
        "image": "registry.example/kafkette:dev",
        "storage": {"size": "50Gi", "class": "fast", "deleteClaim": True},
        "logFormat": "json",
        "rack": {"topologyKey": "topology.kubernetes.io/zone"},
        "listeners": [{"name": "PLAINTEXT", "port": 9094, "advertise": "podIP"}],
        "config": {"min.insync.replicas": 2, "default.replication.factor": 3},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "template": {
            "labels": {"team": "data"},
            "annotations": {"note": 'quote"s: and {braces}'},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "kafka", "effect": "NoSchedule"}],
            "nodeSelector": {"pool": "kafka"},
        },
    },
    "secured": {
        "listeners": [
            {"name": "PLAIN", "port": 9092},
            {"name": "SCRAM", "port": 9094, "tls": True, "authentication": {"type": "scram-sha-512"}},
            {"name": "MTLS", "port": 9095, "tls": True, "authentication": {"type": "tls"}},
        ],
        "config": {"super.users": "User:admin"},
    },
}


def render(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    objects = render_cluster("demo", "data", UID, KafkaClusterSpec.model_validate(spec))
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj in objects}


@pytest.mark.parametrize("name", SPECS)
def test_every_object_validates_strictly(name: str) -> None:
    objects = render(SPECS[name])
    assert set(objects) == {
        "ConfigMap/demo-config",
        "Service/demo-brokers",
        "Service/demo-bootstrap",
        "PodDisruptionBudget/demo-broker",
        "StatefulSet/demo-broker",
    }
    for obj in objects.values():
        kubernetes_validate.validate(obj, KUBERNETES_SCHEMA_VERSION, strict=True)


def test_statefulset_lets_the_operator_order_restarts() -> None:
    sts = render(SPECS["everything"])["StatefulSet/demo-broker"]["spec"]
    assert sts["replicas"] == 5
    assert sts["podManagementPolicy"] == "Parallel"
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    assert sts["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    claim = sts["volumeClaimTemplates"][0]["spec"]
    assert claim["storageClassName"] == "fast" and claim["resources"]["requests"]["storage"] == "50Gi"
    pod = sts["template"]
    assert pod["metadata"]["labels"]["team"] == "data"
    assert pod["metadata"]["annotations"]["note"] == 'quote"s: and {braces}'
    assert pod["spec"]["tolerations"][0]["value"] == "kafka"
    broker = pod["spec"]["containers"][0]
    assert {"name": "KAFKETTE_LOG_FORMAT", "value": "json"} in broker["env"]
    # Prometheus finds each broker's metrics.port through the pod's annotations.
    assert {"prometheus.io/scrape": "true", "prometheus.io/port": "9308"}.items() <= pod["metadata"][
        "annotations"
    ].items()
    assert {"name": "metrics", "containerPort": 9308, "protocol": "TCP"} in broker["ports"]
    assert "kafkette.operator.kube.probe" in broker["readinessProbe"]["exec"]["command"]
    # Racks: the broker waits for the operator's annotation, read through the downward API.
    assert broker["command"][-2:] == ["--pod-info", "/etc/podinfo"]
    (pod_info,) = [volume for volume in pod["spec"]["volumes"] if volume["name"] == "pod-info"]
    assert pod_info["downwardAPI"]["items"] == [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
    ]


def test_broker_pods_run_non_root_on_their_volume_without_api_access() -> None:
    sts = render(SPECS["defaults"])["StatefulSet/demo-broker"]["spec"]
    assert sts["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    assert "storageClassName" not in sts["volumeClaimTemplates"][0]["spec"]  # the default StorageClass
    pod = sts["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False and "serviceAccountName" not in pod
    assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["fsGroup"] == 1000
    (broker,) = pod["containers"]
    assert "--pod-info" not in broker["command"]
    assert {"name": "data", "mountPath": "/var/lib/kafkette"} in broker["volumeMounts"]
    # Plain logs by default, and no variable for it: clusters from before logFormat keep their revision.
    assert not [env for env in broker["env"] if env["name"] == "KAFKETTE_LOG_FORMAT"]
    config = broker_config(render(SPECS["defaults"]), 0)
    assert config["log.dirs"] == "/var/lib/kafkette/data"
    # Started = the client port is open; a new cluster's brokers wait for each other, so the budget is minutes.
    assert broker["startupProbe"]["tcpSocket"]["port"] == 9092
    assert broker["startupProbe"]["periodSeconds"] * broker["startupProbe"]["failureThreshold"] >= 300
    assert broker["resources"] == {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}


def broker_config(objects: dict[str, dict[str, Any]], node: int) -> dict[str, str]:
    return parse_properties(objects["ConfigMap/demo-config"]["data"][f"broker-{node}.properties"])


def test_quorum_voters_are_the_first_three_brokers() -> None:
    objects = render(SPECS["everything"])
    assert set(objects["ConfigMap/demo-config"]["data"]) == {f"broker-{node}.properties" for node in range(5)}
    voters = (
        "0@demo-broker-0.demo-brokers.data.svc:9093,1@demo-broker-1.demo-brokers.data.svc:9093,"
        "2@demo-broker-2.demo-brokers.data.svc:9093"
    )
    for node in range(5):
        config = broker_config(objects, node)
        assert config["node.id"] == str(node)
        assert config["controller.quorum.voters"] == voters
        assert config["process.roles"] == ("broker,controller" if node < 3 else "broker")
        assert config["cluster.id"] == kafka_cluster_id(UID)
        assert config["min.insync.replicas"] == "2"
    assert "CONTROLLER://" not in broker_config(objects, 4)["listeners"]


def test_one_broker_votes_alone() -> None:
    config = broker_config(render(SPECS["one-broker"]), 0)
    assert config["controller.quorum.voters"] == "0@demo-broker-0.demo-brokers.data.svc:9093"


def test_advertised_listeners_use_dns_or_pod_ip() -> None:
    template = render(SPECS["everything"])["ConfigMap/demo-config"]["data"]["broker-3.properties"]
    config = parse_properties(server_properties(template, "10.1.2.3", "zone-a"))
    assert config["advertised.listeners"] == "PLAINTEXT://10.1.2.3:9094"
    assert config["listeners"] == "PLAINTEXT://0.0.0.0:9094"  # broker 3 is no voter: no controller listener
    assert config["inter.broker.listener.name"] == "PLAINTEXT"
    assert config["broker.rack"] == "zone-a"
    assert "broker.rack" not in parse_properties(server_properties(template, "10.1.2.3", None))
    dns = broker_config(render(SPECS["defaults"]), 1)
    assert dns["advertised.listeners"] == "PLAINTEXT://demo-broker-1.demo-brokers.data.svc:9092"
    assert dns["listeners"] == "PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093"


def test_rack_annotation_is_read_from_the_downward_api_file() -> None:
    annotations = 'kafkette.dev/config-hash="abc"\nkafkette.dev/rack="zone-a"\nnote="x=y"\n'
    assert annotation(annotations, "kafkette.dev/rack") == "zone-a"
    assert annotation(annotations, "note") == "x=y"
    assert annotation('kafkette.dev/rack=""\n', "kafkette.dev/rack") == ""
    assert annotation('note="x"\n', "kafkette.dev/rack") is None


def test_services_and_pdb() -> None:
    objects = render(SPECS["everything"])
    headless = objects["Service/demo-brokers"]["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert {port["port"] for port in headless["ports"]} == {9094, 9093, 9308}
    assert {port["port"] for port in objects["Service/demo-bootstrap"]["spec"]["ports"]} == {9094}
    assert objects["PodDisruptionBudget/demo-broker"]["spec"]["maxUnavailable"] == 1


def test_cluster_id_is_kafka_shaped_and_stable() -> None:
    cluster_id = kafka_cluster_id(UID)
    assert len(cluster_id) == 22 and cluster_id == kafka_cluster_id(UID)
    assert cluster_id != kafka_cluster_id(str(uuid.uuid4()))


def test_ordinal_from_pod_name() -> None:
    assert ordinal("demo-broker-12") == 12
    with pytest.raises(ValueError, match="not a StatefulSet pod"):
        ordinal("demo-broker")


def test_the_broker_pods_helpers_import_without_the_operators_dependencies() -> None:
    """start and probe run in the broker image, which leaves out jinja2, PyYAML, kubernetes and kopf."""
    blocked = ("jinja2", "yaml", "kubernetes", "kopf")
    code = (
        "import sys\n"
        f"sys.modules.update(dict.fromkeys({blocked!r}))\n"  # a None entry makes `import x` fail
        "import kafkette.operator.kube.start, kafkette.operator.kube.probe\n"
    )
    subprocess.run([sys.executable, "-P", "-c", code], check=True, timeout=60)


def test_adding_brokers_or_a_dynamic_config_restarts_none_but_a_static_config_or_voter_change_restarts_all() -> None:
    def config_hash(spec: dict[str, Any]) -> str:
        pod = render(spec)["StatefulSet/demo-broker"]["spec"]["template"]
        return pod["metadata"]["annotations"]["kafkette.dev/config-hash"]

    three = config_hash({"brokers": 3})
    assert config_hash({"brokers": 5}) == three  # same voters, same shared config: nobody restarts
    assert config_hash({"brokers": 1}) != three  # another voter set
    assert config_hash({"brokers": 3, "config": {"replica.lag.time.max.ms": 10000}}) != three
    # Dynamic keys are set live by the operator: out of the hash, yet in every broker's properties for its next start.
    dynamic = {"brokers": 3, "config": {"log.retention.ms": 1000, "min.insync.replicas": 2}}
    assert config_hash(dynamic) == three
    for broker in range(3):
        properties = parse_properties(render(dynamic)["ConfigMap/demo-config"]["data"][f"broker-{broker}.properties"])
        assert (properties["log.retention.ms"], properties["min.insync.replicas"]) == ("1000", "2")


def test_a_secured_cluster_renders_kafkas_security_settings_the_broker_accepts() -> None:
    objects = render(SPECS["secured"])
    config = broker_config(objects, 0)
    assert config["listeners"] == (
        "PLAIN://0.0.0.0:9092,SCRAM://0.0.0.0:9094,MTLS://0.0.0.0:9095,REPLICATION://0.0.0.0:9091,CONTROLLER://0.0.0.0:9093"
    )
    assert config["advertised.listeners"].endswith(",REPLICATION://demo-broker-0.demo-brokers.data.svc:9091")
    assert config["listener.security.protocol.map"] == (
        "PLAIN:PLAINTEXT,SCRAM:SASL_SSL,MTLS:SSL,REPLICATION:SSL,CONTROLLER:SSL"
    )
    assert config["inter.broker.listener.name"] == "REPLICATION"
    assert config["ssl.keystore.type"] == config["ssl.truststore.type"] == "PEM"
    assert config["ssl.keystore.location"] == "/etc/kafkette-tls/broker-0.pem"
    assert config["ssl.truststore.location"] == "/etc/kafkette-tls/ca-bundle.crt"
    # Mutual TLS between brokers (controller, REPLICATION) and on the tls-authenticated listener; SCRAM's TLS
    # asks for no certificate.
    assert config["ssl.client.auth"] == "required"
    assert config["listener.name.mtls.ssl.client.auth"] == "required"
    assert config["listener.name.scram.ssl.client.auth"] == "none"
    assert config["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert config["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert config["super.users"] == "User:CN=demo-broker,O=kafkette;User:CN=demo-operator,O=kafkette;User:admin"
    parsed = BrokerConfig.from_properties(config)  # the broker's own rules accept all of it
    assert parsed.security_protocol("MTLS") == "SSL" and parsed.ssl_client_auth_on("SCRAM") == "none"
    assert broker_config(objects, 1)["ssl.keystore.location"] == "/etc/kafkette-tls/broker-1.pem"


def test_a_secured_clusters_pods_mount_their_certificates_and_probe_over_mutual_tls() -> None:
    objects = render(SPECS["secured"])
    pod = objects["StatefulSet/demo-broker"]["spec"]["template"]["spec"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    # Only the brokers' Secret: the CA keys (demo-cluster-ca, demo-clients-ca) are never mounted.
    assert volumes["tls"]["secret"]["secretName"] == "demo-broker-certs"
    assert [v.get("secret", {}).get("secretName") for v in pod["volumes"] if "secret" in v] == ["demo-broker-certs"]
    container = pod["containers"][0]
    assert {"name": "tls", "mountPath": "/etc/kafkette-tls", "readOnly": True} in container["volumeMounts"]
    assert container["readinessProbe"]["exec"]["command"][-4:] == [
        "--bootstrap",
        "127.0.0.1:9091",
        "--tls-dir",
        "/etc/kafkette-tls",
    ]
    assert {port["port"] for port in objects["Service/demo-bootstrap"]["spec"]["ports"]} == {9091, 9092, 9094, 9095}
    plain = render(SPECS["defaults"])["StatefulSet/demo-broker"]["spec"]["template"]["spec"]
    assert "tls" not in {volume["name"] for volume in plain["volumes"]}
    assert "ssl.keystore.location" not in broker_config(render(SPECS["defaults"]), 0)


def test_the_operator_bootstraps_from_replication_on_a_secured_cluster_and_clients_from_their_listener() -> None:
    def cluster(spec: dict[str, Any], **annotations: str) -> dict[str, Any]:
        return {"metadata": {"name": "demo", "namespace": "data", "annotations": annotations}, "spec": spec}

    secured = cluster(SPECS["secured"])
    assert cluster_bootstrap(secured) == "demo-bootstrap.data.svc:9091"
    assert cluster_bootstrap(secured, clients=True) == "demo-bootstrap.data.svc:9092"
    assert cluster_bootstrap(cluster(SPECS["defaults"])) == "demo-bootstrap.data.svc:9092"
    assert cluster_bootstrap(cluster({}, **{BOOTSTRAP_ANNOTATION: "127.0.0.1:1"}), clients=True) == "127.0.0.1:1"
