"""Ask one particular broker (its Metadata, or any request), over the repository's own protocol code.

A client library (librdkafka) sends Metadata to whichever broker it likes once it knows several; readiness
needs the answer of each broker in turn, so this opens a socket to exactly the one asked.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import TYPE_CHECKING

from kafkette.operator.local.plan import ClusterView, PartitionView
from kafkette.operator.planning.roll import QuorumState

if TYPE_CHECKING:
    from kafkette.broker.protocol.types import Message

METADATA_VERSION = 12
QUORUM_VERSION = 1  # the first with each replica's last caught-up time
_SIZE = struct.Struct(">i")


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)


def request_once(
    host: str,
    port: int,
    body: Message,
    version: int,
    timeout: float,
    client_id: str,
    tls: ssl.SSLContext | None = None,
) -> Message:
    """One request on a fresh connection (over TLS with `tls`); OSError (refused, timed out, closed, a failed
    handshake) when the broker does not answer."""
    # Imported here: the codec loads every message module, which `kafkette stop/kill` do not need.
    from kafkette.broker.protocol.framing import decode_response, encode_request

    with socket.create_connection((host, port), timeout=timeout) as plain:
        sock = tls.wrap_socket(plain, server_hostname=host) if tls is not None else plain
        sock.settimeout(timeout)
        sock.sendall(encode_request(body, version, 1, client_id))
        size = _SIZE.unpack(_exactly(sock, 4))[0]
        return decode_response(memoryview(_exactly(sock, size)), body.API_KEY, version)[1]  # type: ignore[arg-type]


def cluster_view(host: str, port: int, timeout: float) -> ClusterView:
    """The broker's Metadata for all topics; OSError (refused, timed out, closed) when it does not answer."""
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.metadata_request import MetadataRequest
    from kafkette.broker.protocol.messages.metadata_response import MetadataResponse

    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    answer = request_once(host, port, request, METADATA_VERSION, timeout, "kafkette-local")
    response = expect(answer, MetadataResponse)
    partitions = tuple(
        PartitionView(
            topic=topic.name or "",
            partition=p.partition_index,
            leader=p.leader_id,
            replicas=tuple(p.replica_nodes or ()),
            isr=tuple(p.isr_nodes or ()),
        )
        for topic in response.topics or ()
        for p in topic.partitions or ()
    )
    brokers = tuple(sorted(b.node_id for b in response.brokers or ()))
    return ClusterView(brokers=brokers, controller_id=response.controller_id, partitions=partitions)


def describe_quorum_request() -> Message:
    """DescribeQuorum for the metadata partition: any broker forwards it to the quorum's leader."""
    from kafkette.broker.protocol.messages.describe_quorum_request import (
        DescribeQuorumRequest,
        PartitionData,
        TopicData,
    )

    return DescribeQuorumRequest(
        topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]
    )


def quorum_state(answer: Message) -> QuorumState:
    """The roll planner's view of a DescribeQuorum answer; ValueError naming the error when it is one."""
    from kafkette.broker.protocol.errors import ErrorCode
    from kafkette.broker.protocol.framing import expect
    from kafkette.broker.protocol.messages.describe_quorum_response import DescribeQuorumResponse

    response = expect(answer, DescribeQuorumResponse)
    partition = next((p for t in response.topics or () for p in t.partitions or ()), None)
    code = response.error_code or (partition.error_code if partition is not None else ErrorCode.UNKNOWN_SERVER_ERROR)
    if code or partition is None:
        raise ValueError(f"DescribeQuorum answered {ErrorCode(code).name}")
    voters = {v.replica_id: v.last_caught_up_timestamp for v in partition.current_voters or ()}
    return QuorumState(partition.leader_id, voters)
