"""A local cluster driven by the runtime of `kafkette up`, and exact requests to one chosen broker.

Everything listens on 127.0.0.1 on free ports; every wait is bounded and fails with the brokers' state.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import waiting

from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kafkette.broker.protocol.messages.describe_cluster_response import DescribeClusterResponse
from kafkette.broker.protocol.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kafkette.broker.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from kafkette.broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kafkette.broker.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from kafkette.broker.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kafkette.broker.protocol.messages.incremental_alter_configs_response import IncrementalAlterConfigsResponse
from kafkette.broker.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kafkette.broker.protocol.messages.metadata_response import MetadataResponse
from kafkette.broker.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kafkette.broker.protocol.messages.produce_response import ProduceResponse
from kafkette.broker.protocol.records import Record, encode_batch
from kafkette.broker.protocol.types import Message
from kafkette.operator.local import plan, runtime
from kafkette.operator.local.plan import ClusterState, ClusterView, PartitionView
from kafkette.operator.local.probe import request_once

HOST = plan.HOST
READY_TIMEOUT_S = 60.0
T = TypeVar("T")


class Numbers:
    """Durations measured in this run, printed as they come (`pytest -s` shows them); conftest saves them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __setitem__(self, name: str, seconds: float) -> None:
        self.seconds[name] = round(seconds, 3)
        print(f"\n[cluster numbers] {name}: {seconds:.2f} s")


# --- exact requests -------------------------------------------------------------------------------------


def request(port: int, body: Message, version: int, timeout: float = 5.0) -> Any:
    """One request on a fresh connection to 127.0.0.1:`port`; OSError when the broker does not answer."""
    return request_once(HOST, port, body, version, timeout, "cluster-tests")


def metadata(port: int, topics: Iterable[str] | None = None) -> MetadataResponse:
    wanted = None if topics is None else [MetadataRequestTopic(name=t) for t in topics]
    response = request(port, MetadataRequest(topics=wanted, allow_auto_topic_creation=False), 12)
    assert isinstance(response, MetadataResponse)
    return response


def describe_cluster(port: int) -> DescribeClusterResponse:
    response = request(port, DescribeClusterRequest(), 0)
    assert isinstance(response, DescribeClusterResponse) and response.error_code == 0, response
    return response


GROUP_COORDINATOR, TRANSACTION_COORDINATOR = 0, 1  # FindCoordinator's key types


def find_coordinator(port: int, key: str, key_type: int = GROUP_COORDINATOR) -> int:
    """The coordinator of a group or a transactional id as `port`'s broker names it; -1 while it has none."""
    response = request(port, FindCoordinatorRequest(key=key, key_type=key_type), 3)
    assert isinstance(response, FindCoordinatorResponse)
    return response.node_id if response.error_code == 0 else -1


def describe_quorum(controller_port: int) -> DescribeQuorumResponse:
    body = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData()])])
    response = request(controller_port, body, 1)
    assert isinstance(response, DescribeQuorumResponse)
    return response


def alter_topic_config(port: int, topic: str, configs: Mapping[str, str]) -> int:
    """IncrementalAlterConfigs SET on a topic; the resource's error code."""
    entries = [AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()]
    body = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(resource_type=2, resource_name=topic, configs=entries)]
    )
    response = request(port, body, 1, timeout=15.0)
    assert isinstance(response, IncrementalAlterConfigsResponse)
    return response.responses[0].error_code


def produce_raw(port: int, topic: str, partition: int, values: list[bytes], acks: int, timeout_ms: int = 5000) -> int:
    """One ProduceRequest (v9) of a non-idempotent batch; the partition's error code."""
    now = int(time.time() * 1000)
    records = [Record(offset=i, timestamp=now, key=None, value=v, headers=[]) for i, v in enumerate(values)]
    body = ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topic_data=[
            TopicProduceData(
                name=topic, partition_data=[PartitionProduceData(index=partition, records=encode_batch(records))]
            )
        ],
    )
    response = request(port, body, 9, timeout=timeout_ms / 1000 + 5)
    assert isinstance(response, ProduceResponse)
    return response.responses[0].partition_responses[0].error_code


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


# --- waiting --------------------------------------------------------------------------------------------


def wait_for(check: Callable[[], T | None], what: str, timeout: float, interval: float = 0.1) -> T:
    """waiting.wait_for where a broker down or restarting (OSError) or a probe's failed assert means "not yet"."""
    return waiting.wait_for(check, what, timeout, interval, ignoring=(OSError, AssertionError))


# --- the cluster ----------------------------------------------------------------------------------------


@dataclass
class Cluster:
    """A running local cluster in `directory`; the state file is re-read after every start (new pids)."""

    directory: Path
    state: ClusterState

    @classmethod
    def up(cls, directory: Path, brokers: int, settings: Iterable[tuple[str, str]] = ()) -> Cluster:
        first_port = runtime.first_free_port(brokers)
        state = runtime.up(
            directory, brokers=brokers, first_port=first_port, settings=list(settings), timeout=READY_TIMEOUT_S
        )
        return cls(directory.resolve(), state)

    @property
    def bootstrap(self) -> str:
        return plan.bootstrap_servers(self.state)

    @property
    def ids(self) -> tuple[int, ...]:
        return self.state.ids

    def port(self, node_id: int) -> int:
        return self.state.broker(node_id).port

    def controller_port(self, node_id: int) -> int:
        port = self.state.broker(node_id).controller_port
        assert port is not None, f"broker {node_id} is not a voter"
        return port

    def voters(self) -> list[int]:
        return [b.node_id for b in self.state.brokers if b.voter]

    def log(self, node_id: int) -> str:
        return runtime.log_path(self.directory, node_id).read_text(errors="replace")

    def alive(self) -> list[int]:
        return runtime.alive_ids(self.directory, self.state)

    def kill(self, node_id: int) -> None:
        assert runtime.kill(self.directory, node_id), f"broker {node_id} was not running"

    def stop(self, node_id: int, timeout: float = 30.0) -> None:
        assert runtime.stop(self.directory, node_id, timeout=timeout), f"broker {node_id} was not running"

    def start(self, node_id: int) -> None:
        self.state = runtime.start(self.directory, node_id, timeout=READY_TIMEOUT_S)

    def down(self) -> None:
        runtime.down(self.directory, timeout=20)

    @contextmanager
    def paused(self, node_id: int) -> Iterator[None]:
        """The broker stopped with SIGSTOP (alive, but answering nobody) for the block, then continued."""
        assert runtime.signal_broker(self.directory, self.state, node_id, signal.SIGSTOP)
        try:
            yield
        finally:
            runtime.signal_broker(self.directory, self.state, node_id, signal.SIGCONT)

    # -- views

    def view(self, node_id: int) -> ClusterView | None:
        answer = runtime.views(self.state, [node_id], timeout=2.0)[node_id]
        return answer if isinstance(answer, ClusterView) else None

    def any_view(self, exclude: Iterable[int] = ()) -> ClusterView | None:
        for node_id in self.alive():
            if node_id not in set(exclude) and (found := self.view(node_id)) is not None:
                return found
        return None

    def partitions(self, topic: str, via: int | None = None) -> dict[int, PartitionView]:
        view = self.view(via) if via is not None else self.any_view()
        assert view is not None, "no broker answers Metadata"
        return {p.partition: p for p in view.partitions if p.topic == topic}

    def leaders(self, topic: str, via: int | None = None) -> dict[int, int]:
        return {index: p.leader for index, p in self.partitions(topic, via).items()}

    def controller(self, exclude: Iterable[int] = ()) -> int:
        """The active controller as a live broker (not in `exclude`) reports it in DescribeCluster; -1 if none."""
        for node_id in self.alive():
            if node_id in set(exclude):
                continue
            try:
                return describe_cluster(self.port(node_id)).controller_id
            except OSError:
                continue
        return -1

    def wait_seen(self, topic: str, partitions: int, timeout: float = 30.0) -> None:
        """Until every live broker's Metadata lists the topic with `partitions` partitions."""

        def seen() -> bool:
            return all(len(self.partitions(topic, via=node_id)) == partitions for node_id in self.alive())

        wait_for(seen, f"every broker lists {topic} with {partitions} partitions", timeout)

    def healthy(self, topics: Iterable[str] | None = None) -> bool:
        """Every broker alive and listed by every broker, every partition (of `topics`) led with a full ISR."""
        if self.alive() != list(self.ids):
            return False
        answers = runtime.views(self.state, self.ids, timeout=2.0)
        if plan.unready(self.ids, answers):
            return False
        wanted = None if topics is None else list(topics)
        return all(isinstance(v, ClusterView) and plan.fully_replicated(v.partitions, wanted) for v in answers.values())

    def wait_healthy(self, topics: Iterable[str] | None = None, timeout: float = 60.0) -> float:
        started = time.monotonic()
        topics = None if topics is None else list(topics)
        try:
            wait_for(lambda: self.healthy(topics), "cluster healthy", timeout, interval=0.25)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.describe()}") from None
        return time.monotonic() - started

    def restore(self, timeout: float = 60.0) -> None:
        """Start every broker that is down, then wait until all are listed and every ISR is full."""
        for node_id in self.ids:
            if node_id not in self.alive():
                self.start(node_id)
        self.wait_healthy(timeout=timeout)

    def describe(self) -> str:
        lines = [f"alive: {self.alive()}"]
        view = self.any_view()
        if view is not None:
            lines.append(f"brokers {view.brokers} controller {view.controller_id}")
            lines += [f"  {p.topic}-{p.partition} leader {p.leader} isr {p.isr}" for p in view.partitions]
        return "\n".join(lines)


MakeCluster = Callable[..., Cluster]


def next_coordinator(cluster: Cluster, group: str, old: int, timeout: float = 30.0) -> int:
    """The broker that coordinates `group` after `old` went down, as a surviving broker names it."""
    survivor = next(node for node in cluster.ids if node != old)
    # Wrapped in a tuple: broker 0 may take over, and a bare 0 would read as "not yet" to wait_for.
    (found,) = wait_for(
        lambda: (c,) if (c := find_coordinator(cluster.port(survivor), group)) not in (-1, old) else None,
        "a new coordinator",
        timeout,
        interval=0.2,
    )
    return found


def create_topic(
    cluster: Cluster,
    name: str,
    partitions: int = 1,
    replication_factor: int = 3,
    configs: Mapping[str, str] | None = None,
    assignment: list[list[int]] | None = None,
    timeout: float = 30.0,
) -> None:
    """CreateTopics through confluent-kafka's AdminClient, then wait until every partition has a full ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 2})
    if assignment is not None:
        topic = NewTopic(
            name, num_partitions=len(assignment), replica_assignment=assignment, config=dict(configs or {})
        )
    else:
        topic = NewTopic(
            name, num_partitions=partitions, replication_factor=replication_factor, config=dict(configs or {})
        )
    admin.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[name].result(timeout=timeout)
    wanted = len(assignment) if assignment is not None else partitions
    cluster.wait_seen(name, wanted, timeout)
    cluster.wait_healthy([name], timeout=timeout)
