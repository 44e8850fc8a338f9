"""Pydantic models of Kafkette's custom resources: the source of `crds/*.yaml`."""

from kafkette.operator.resources.base import (
    API_VERSION,
    GROUP,
    VERSION,
    Condition,
    Kind,
    Outcome,
    phase_conditions,
    set_condition,
)
from kafkette.operator.resources.consumergroup import CONSUMER_GROUP, ConsumerGroupSpec, ConsumerGroupStatus
from kafkette.operator.resources.kafkacluster import (
    KAFKA_CLUSTER,
    KafkaClusterSpec,
    KafkaClusterStatus,
    RestartedBroker,
    RollStatus,
    ScaleStatus,
)
from kafkette.operator.resources.kafkauser import KAFKA_USER, KafkaUserSpec, KafkaUserStatus
from kafkette.operator.resources.topic import TOPIC, TopicSpec, TopicStatus

KINDS: tuple[Kind, ...] = (KAFKA_CLUSTER, TOPIC, CONSUMER_GROUP, KAFKA_USER)

__all__ = [
    "API_VERSION",
    "CONSUMER_GROUP",
    "GROUP",
    "KAFKA_CLUSTER",
    "KAFKA_USER",
    "KINDS",
    "TOPIC",
    "VERSION",
    "Condition",
    "ConsumerGroupSpec",
    "ConsumerGroupStatus",
    "KafkaClusterSpec",
    "KafkaClusterStatus",
    "KafkaUserSpec",
    "KafkaUserStatus",
    "Kind",
    "Outcome",
    "RestartedBroker",
    "RollStatus",
    "ScaleStatus",
    "TopicSpec",
    "TopicStatus",
    "phase_conditions",
    "set_condition",
]
