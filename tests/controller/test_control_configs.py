"""IncrementalAlterConfigs and AlterConfigs on topics and brokers, and unclean election turned on by config."""

from __future__ import annotations

import pytest
from test_control_support import SETTINGS, Cluster, epoch_of

from kafkette.broker.config import BrokerConfig
from kafkette.broker.controller.control import (
    ControllerSettings,
    alter_configs,
    alter_partition,
    fence_brokers,
    heartbeat,
    incremental_alter_configs,
)
from kafkette.broker.controller.control_configs import AlterOp, apply_incremental
from kafkette.broker.protocol.errors import ErrorCode, KafkaError
from kafkette.broker.protocol.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kafkette.broker.protocol.messages.alter_configs_request import AlterConfigsRequest
from kafkette.broker.protocol.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kafkette.broker.protocol.messages.alter_partition_request import AlterPartitionRequest, PartitionData, TopicData
from kafkette.broker.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kafkette.broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)


def _incremental(
    name: str, *changes: tuple[str, int, str | None], resource_type: int = 2, validate_only: bool = False
) -> IncrementalAlterConfigsRequest:
    configs = [AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes]
    resource = AlterConfigsResource(resource_type=resource_type, resource_name=name, configs=configs)
    return IncrementalAlterConfigsRequest(resources=[resource], validate_only=validate_only)


def _overrides(cluster: Cluster, name: str = "t") -> dict[str, str]:
    return dict(cluster.image.configs.get((2, name), {}))


def test_set_delete_append_subtract() -> None:
    cluster = Cluster(1)
    cluster.create("t", configs={"retention.ms": "1000"})
    request = _incremental(
        "t",
        ("retention.ms", AlterOp.DELETE, None),
        ("segment.ms", AlterOp.SET, " 5000 "),
        ("cleanup.policy", AlterOp.APPEND, "compact"),
    )
    response = cluster.run(incremental_alter_configs(cluster.image, request, SETTINGS))
    assert response.responses[0].error_code == 0
    assert _overrides(cluster) == {"segment.ms": "5000", "cleanup.policy": "delete,compact"}
    cluster.run(
        incremental_alter_configs(
            cluster.image, _incremental("t", ("cleanup.policy", AlterOp.SUBTRACT, "delete")), SETTINGS
        )
    )
    assert _overrides(cluster)["cleanup.policy"] == "compact"


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (_incremental("t", ("retention.ms", AlterOp.SET, "soon")), ErrorCode.INVALID_CONFIG),
        (_incremental("t", ("retention.ms", AlterOp.SET, None)), ErrorCode.INVALID_CONFIG),
        (_incremental("t", ("retention.ms", AlterOp.APPEND, "1")), ErrorCode.INVALID_CONFIG),
        (_incremental("t", ("retention.ms", 9, "1")), ErrorCode.INVALID_REQUEST),
        (_incremental("nope", ("retention.ms", AlterOp.SET, "1")), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (_incremental("0", ("log.dirs", AlterOp.SET, "/elsewhere"), resource_type=4), ErrorCode.INVALID_CONFIG),
        (_incremental("", ("log.retention.hours", AlterOp.SET, "1"), resource_type=4), ErrorCode.INVALID_CONFIG),
        (_incremental("0", ("no.such.key", AlterOp.SET, "1"), resource_type=4), ErrorCode.INVALID_CONFIG),
        (_incremental("", ("log.retention.ms", AlterOp.SET, "soon"), resource_type=4), ErrorCode.INVALID_CONFIG),
        (_incremental("b0", ("log.retention.ms", AlterOp.SET, "1"), resource_type=4), ErrorCode.INVALID_REQUEST),
        (_incremental("t", ("retention.ms", AlterOp.SET, "1"), resource_type=8), ErrorCode.INVALID_REQUEST),
    ],
)
def test_refused_changes_write_nothing(request_: IncrementalAlterConfigsRequest, code: ErrorCode) -> None:
    cluster = Cluster(1)
    cluster.create("t")
    records, response = incremental_alter_configs(cluster.image, request_, SETTINGS)
    assert records == [] and response.responses[0].error_code == code


def test_validate_only_writes_nothing() -> None:
    cluster = Cluster(1)
    cluster.create("t")
    request = _incremental("t", ("retention.ms", AlterOp.SET, "1"), validate_only=True)
    records, response = incremental_alter_configs(cluster.image, request, SETTINGS)
    assert records == [] and response.responses[0].error_code == 0


def test_alter_configs_replaces_every_override() -> None:
    cluster = Cluster(1)
    cluster.create("t", configs={"retention.ms": "1000", "segment.ms": "2000"})
    resource = LegacyResource(
        resource_type=2, resource_name="t", configs=[LegacyConfig(name="retention.ms", value="3000")]
    )
    response = cluster.run(alter_configs(cluster.image, AlterConfigsRequest(resources=[resource]), SETTINGS))
    assert response.responses[0].error_code == 0 and _overrides(cluster) == {"retention.ms": "3000"}


def test_apply_incremental_appends_to_the_broker_default() -> None:
    assert apply_incremental({}, {"cleanup.policy": "delete"}, "cleanup.policy", AlterOp.APPEND, "compact") == {
        "cleanup.policy": "delete,compact"
    }
    with pytest.raises(KafkaError):
        apply_incremental({}, {}, "retention.ms", AlterOp.SUBTRACT, "1")


def test_dynamic_broker_configs_per_broker_and_cluster_default() -> None:
    cluster = Cluster(1)
    for name, value in (("0", "1000"), ("", "2000")):
        request = _incremental(name, ("log.retention.ms", AlterOp.SET, f" {value} "), resource_type=4)
        assert cluster.run(incremental_alter_configs(cluster.image, request, SETTINGS)).responses[0].error_code == 0
    assert cluster.image.configs[(4, "0")] == {"log.retention.ms": "1000"}
    dynamic = cluster.image.broker_configs(0)
    assert (dynamic.broker, dynamic.default) == ({"log.retention.ms": "1000"}, {"log.retention.ms": "2000"})
    assert cluster.image.broker_configs(1).broker == {}
    # APPEND on the list key starts from the static default, as it does for a topic.
    request = _incremental("", ("log.cleanup.policy", AlterOp.APPEND, "compact"), resource_type=4)
    cluster.run(incremental_alter_configs(cluster.image, request, SETTINGS))
    assert cluster.image.configs[(4, "")]["log.cleanup.policy"] == "delete,compact"
    request = _incremental("0", ("log.retention.ms", AlterOp.DELETE, None), resource_type=4)
    cluster.run(incremental_alter_configs(cluster.image, request, SETTINGS))
    assert (4, "0") not in cluster.image.configs


@pytest.mark.parametrize(("resource_type", "name"), [(2, "t"), (4, "")], ids=["topic", "cluster default"])
def test_enabling_unclean_election_elects_the_out_of_sync_live_replica(resource_type: int, name: str) -> None:
    cluster = Cluster(2)
    topic_id = cluster.create("t", assignments=[[0, 1]])
    shrink = PartitionData(partition_index=0, leader_epoch=0, partition_epoch=0, new_isr=[0])
    topics = [TopicData(topic_id=topic_id, partitions=[shrink])]
    cluster.run(
        alter_partition(
            cluster.image, AlterPartitionRequest(broker_id=0, broker_epoch=epoch_of(0), topics=topics), SETTINGS
        )
    )
    cluster.apply(fence_brokers(cluster.image, [0], SETTINGS))
    assert cluster.state("t") == (-1, (), 1, 2)  # offline: the only ISR member is gone
    beat = BrokerHeartbeatRequest(broker_id=1, broker_epoch=epoch_of(1))
    cluster.run(heartbeat(cluster.image, beat, True, SETTINGS))
    assert cluster.state("t")[0] == -1  # broker 1 is live but out of sync: unclean is off
    request = _incremental(name, ("unclean.leader.election.enable", AlterOp.SET, "true"), resource_type=resource_type)
    response = cluster.run(incremental_alter_configs(cluster.image, request, SETTINGS))
    assert response.responses[0].error_code == 0
    assert cluster.state("t") == (1, (1,), 2, 3)


def test_settings_come_from_the_broker_config() -> None:
    config = BrokerConfig.from_properties(
        {
            "num.partitions": "6",
            "default.replication.factor": "3",
            "unclean.leader.election.enable": "true",
            "delete.topic.enable": "false",
            "log.cleanup.policy": "compact",
        }
    )
    settings = ControllerSettings.from_config(config)
    assert (settings.num_partitions, settings.default_replication_factor) == (6, 3)
    assert settings.unclean_leader_election_enable and not settings.delete_topic_enable
    assert settings.topic_defaults["cleanup.policy"] == "compact"
