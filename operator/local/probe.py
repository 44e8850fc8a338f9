"""Ask one particular broker for its Metadata, over the repository's own protocol code.

A client library (librdkafka) sends Metadata to whichever broker it likes once it knows several; readiness
needs the answer of each broker in turn, so this opens a socket to exactly the one asked.
"""

from __future__ import annotations

import socket
import struct

from kafkette.operator.local.plan import ClusterView, PartitionView

METADATA_VERSION = 12
_SIZE = struct.Struct(">i")


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(chunks)} of {n} bytes")
        chunks += chunk
    return bytes(chunks)


def cluster_view(host: str, port: int, timeout: float) -> ClusterView:
    """The broker's Metadata for all topics; OSError (refused, timed out, closed) when it does not answer."""
    # Imported here: the codec loads every message module, which `kafkette stop/kill` do not need.
    from kafkette.broker.protocol.framing import decode_response, encode_request
    from kafkette.broker.protocol.messages.metadata_request import MetadataRequest

    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(encode_request(request, METADATA_VERSION, 1, "kafkette-local"))
        size = _SIZE.unpack(_exactly(sock, 4))[0]
        _, response = decode_response(memoryview(_exactly(sock, size)), MetadataRequest.API_KEY, METADATA_VERSION)
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
