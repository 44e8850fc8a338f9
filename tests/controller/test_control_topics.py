"""CreateTopics, DeleteTopics and CreatePartitions decisions, checked by replaying their records."""

from __future__ import annotations

from collections import Counter
from uuid import UUID

import pytest
from test_control_support import SETTINGS, Cluster

from kafkette.broker.controller.control import (
    ControllerSettings,
    create_partitions,
    create_topics,
    delete_topics,
    fence_brokers,
)
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kafkette.broker.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kafkette.broker.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState


def test_created_topic_is_placed_with_balanced_leaders() -> None:
    cluster = Cluster(3)
    cluster.create("orders", partitions=6, replication_factor=2, configs={"retention.ms": "1000"})
    topic = cluster.image.topic_by_name("orders")
    assert topic is not None and topic.topic_id == UUID(int=1)
    assert sorted(topic.partitions) == list(range(6))
    for p in topic.partitions.values():
        assert len(set(p.replicas)) == 2
        assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == (p.replicas, p.replicas[0], 0, 0)
    assert Counter(p.leader for p in topic.partitions.values()) == {0: 2, 1: 2, 2: 2}
    assert dict(cluster.image.configs[(2, "orders")]) == {"retention.ms": "1000"}


def test_result_carries_id_and_sizes_and_defaults_apply() -> None:
    cluster = Cluster(3)
    request = CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=-1, replication_factor=-1)])
    settings = ControllerSettings(num_partitions=4, default_replication_factor=3)
    response = cluster.run(create_topics(cluster.image, request, settings, new_topic_id=lambda: UUID(int=7)))
    (result,) = response.topics
    assert (result.error_code, result.topic_id, result.num_partitions, result.replication_factor) == (
        0,
        UUID(int=7),
        4,
        3,
    )


def test_second_topic_leaders_go_where_leadership_is_lighter() -> None:
    cluster = Cluster(3)
    cluster.create("a", partitions=2)
    cluster.create("b", partitions=1)
    leaders = Counter(p.leader for t in cluster.image.topics.values() for p in t.partitions.values())
    assert leaders == {0: 1, 1: 1, 2: 1}


def test_fenced_brokers_get_no_replicas() -> None:
    cluster = Cluster(3)
    cluster.apply(fence_brokers(cluster.image, [1], SETTINGS))
    cluster.create("t", partitions=4, replication_factor=2)
    topic = cluster.image.topic_by_name("t")
    assert topic is not None and all(1 not in p.replicas for p in topic.partitions.values())


def test_live_brokers_argument_narrows_placement() -> None:
    cluster = Cluster(3)
    request = CreateTopicsRequest(topics=[CreatableTopic(name="t", num_partitions=3, replication_factor=1)])
    cluster.run(create_topics(cluster.image, request, SETTINGS, live_brokers=[2]))
    assert {p.leader for p in cluster.image.topics[next(iter(cluster.image.topics))].partitions.values()} == {2}


def test_explicit_assignment_leads_with_first_live_replica() -> None:
    cluster = Cluster(3)
    cluster.apply(fence_brokers(cluster.image, [1], SETTINGS))
    cluster.create("t", assignments=[[1, 2], [0, 1]])
    assert cluster.partition("t", 0).replicas == (1, 2)
    assert cluster.state("t", 0) == (2, (2,), 0, 0)
    assert cluster.state("t", 1) == (0, (0,), 0, 0)


def _topic(name: str = "t", partitions: int = 1, factor: int = 1, **kwargs: object) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=factor, **kwargs)  # type: ignore[arg-type]


def _assigned(*replicas: list[int]) -> CreatableTopic:
    assignments = [CreatableReplicaAssignment(partition_index=i, broker_ids=r) for i, r in enumerate(replicas)]
    return _topic(partitions=-1, factor=-1, assignments=assignments)


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (_topic("existing"), ErrorCode.TOPIC_ALREADY_EXISTS),
        (_topic("bad/name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (_topic(partitions=0), ErrorCode.INVALID_PARTITIONS),
        (_topic(factor=0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (_topic(factor=4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (_assigned([0, 9]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (_assigned([0, 1], [2]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (_assigned([0, 0]), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (
            _topic(
                assignments=[CreatableReplicaAssignment(partition_index=1, broker_ids=[0])], partitions=-1, factor=-1
            ),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (_topic(assignments=[CreatableReplicaAssignment(broker_ids=[0])]), ErrorCode.INVALID_REQUEST),
        (_topic(configs=[CreatableTopicConfig(name="retention.ms", value="soon")]), ErrorCode.INVALID_CONFIG),
        (_topic(configs=[CreatableTopicConfig(name="no.such.key", value="1")]), ErrorCode.INVALID_CONFIG),
    ],
)
def test_refused_topics_write_nothing(topic: CreatableTopic, code: ErrorCode) -> None:
    cluster = Cluster(3)
    cluster.create("existing")
    records, response = create_topics(cluster.image, CreateTopicsRequest(topics=[topic]), SETTINGS)
    assert records == []
    assert response.topics[0].error_code == code


def test_a_name_twice_in_one_request_is_refused_for_both() -> None:
    cluster = Cluster(3)
    request = CreateTopicsRequest(topics=[_topic("x"), _topic("x"), _topic("y")])
    records, response = create_topics(cluster.image, request, SETTINGS)
    assert [r.error_code for r in response.topics] == [ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST, 0]
    cluster.apply(records)
    assert [t.name for t in cluster.image.topics.values()] == ["y"]


def test_validate_only_checks_but_writes_nothing() -> None:
    cluster = Cluster(3)
    request = CreateTopicsRequest(topics=[_topic(partitions=3, factor=2)], validate_only=True)
    records, response = create_topics(cluster.image, request, SETTINGS)
    assert records == [] and response.topics[0].error_code == 0 and response.topics[0].num_partitions == 3


def test_delete_by_name_and_id_removes_topic_and_its_configs() -> None:
    cluster = Cluster(3)
    cluster.create("a", configs={"retention.ms": "1000", "cleanup.policy": "compact"})
    b = cluster.create("b")
    request = DeleteTopicsRequest(topic_names=["a"], topics=[DeleteTopicState(name=None, topic_id=b)])
    response = cluster.run(delete_topics(cluster.image, request, SETTINGS))
    assert [(r.name, r.error_code) for r in response.responses] == [("a", 0), ("b", 0)]
    assert response.responses[1].topic_id == b
    assert dict(cluster.image.topics) == {} and dict(cluster.image.configs) == {}


@pytest.mark.parametrize(
    ("request_", "settings", "code"),
    [
        (DeleteTopicsRequest(topic_names=["nope"]), SETTINGS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (
            DeleteTopicsRequest(topics=[DeleteTopicState(name=None, topic_id=UUID(int=99))]),
            SETTINGS,
            ErrorCode.UNKNOWN_TOPIC_ID,
        ),
        (
            DeleteTopicsRequest(topic_names=["a"]),
            ControllerSettings(delete_topic_enable=False),
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ),
    ],
)
def test_refused_deletes(request_: DeleteTopicsRequest, settings: ControllerSettings, code: ErrorCode) -> None:
    cluster = Cluster(1)
    cluster.create("a")
    records, response = delete_topics(cluster.image, request_, settings)
    assert records == [] and response.responses[0].error_code == code


def test_a_topic_deleted_twice_in_one_request_is_unknown_the_second_time() -> None:
    cluster = Cluster(1)
    cluster.create("a")
    records, response = delete_topics(cluster.image, DeleteTopicsRequest(topic_names=["a", "a"]), SETTINGS)
    assert [r.error_code for r in response.responses] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert len(records) == 1


def test_create_partitions_places_new_ones_with_the_topic_replication_factor() -> None:
    cluster = Cluster(3)
    cluster.create("t", partitions=2, replication_factor=2)
    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=5, assignments=None)])
    response = cluster.run(create_partitions(cluster.image, request, SETTINGS))
    assert response.results[0].error_code == 0
    topic = cluster.image.topic_by_name("t")
    assert topic is not None and sorted(topic.partitions) == list(range(5))
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0] for p in topic.partitions.values())
    assert Counter(p.leader for p in topic.partitions.values()) in (
        {0: 2, 1: 2, 2: 1},
        {0: 2, 1: 1, 2: 2},
        {0: 1, 1: 2, 2: 2},
    )


def test_create_partitions_honours_explicit_assignments() -> None:
    cluster = Cluster(3)
    cluster.create("t", partitions=1, replication_factor=2)
    assignments = [CreatePartitionsAssignment(broker_ids=[2, 0])]
    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=2, assignments=assignments)])
    cluster.run(create_partitions(cluster.image, request, SETTINGS))
    assert cluster.partition("t", 1).replicas == (2, 0) and cluster.state("t", 1) == (2, (2, 0), 0, 0)


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (CreatePartitionsTopic(name="nope", count=3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (CreatePartitionsTopic(name="t", count=2), ErrorCode.INVALID_PARTITIONS),
        (
            CreatePartitionsTopic(name="t", count=4, assignments=[CreatePartitionsAssignment(broker_ids=[0, 1])]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatePartitionsTopic(name="t", count=3, assignments=[CreatePartitionsAssignment(broker_ids=[0])]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
        (
            CreatePartitionsTopic(name="t", count=3, assignments=[CreatePartitionsAssignment(broker_ids=[0, 7])]),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        ),
    ],
)
def test_refused_partition_additions(topic: CreatePartitionsTopic, code: ErrorCode) -> None:
    cluster = Cluster(3)
    cluster.create("t", partitions=2, replication_factor=2)
    records, response = create_partitions(cluster.image, CreatePartitionsRequest(topics=[topic]), SETTINGS)
    assert records == [] and response.results[0].error_code == code


def test_a_request_for_more_than_ten_thousand_partitions_is_refused_whole() -> None:
    # Found by the request fuzz: a random partition count built a metadata batch too large for the log (or, at
    # 2**31 - 1, never finished building it). Kafka's controller caps a request at 10,000 partitions.
    cluster = Cluster(1)
    topics = [
        CreatableTopic(name="small", num_partitions=1, replication_factor=1),
        CreatableTopic(name="huge", num_partitions=2**31 - 1, replication_factor=1),
    ]
    records, response = create_topics(cluster.image, CreateTopicsRequest(topics=topics), SETTINGS)
    assert records == []
    assert [(r.name, r.error_code) for r in response.topics] == [
        ("small", ErrorCode.POLICY_VIOLATION),
        ("huge", ErrorCode.POLICY_VIOLATION),
    ]
    at_the_cap = CreatableTopic(name="t", num_partitions=10_000, replication_factor=1)
    records, response = create_topics(cluster.image, CreateTopicsRequest(topics=[at_the_cap]), SETTINGS)
    assert response.topics[0].error_code == ErrorCode.NONE and len(records) == 1 + 10_000


def test_adding_more_than_ten_thousand_partitions_is_refused_whole() -> None:
    cluster = Cluster(1)
    cluster.create("t", partitions=1)
    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=2**31 - 1)])
    records, response = create_partitions(cluster.image, request, SETTINGS)
    assert records == [] and [r.error_code for r in response.results] == [ErrorCode.POLICY_VIOLATION]
    request = CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=10_001)])
    records, response = create_partitions(cluster.image, request, SETTINGS)
    assert response.results[0].error_code == ErrorCode.NONE and len(records) == 10_000
