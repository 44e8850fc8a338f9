"""A minimal blocking Kafka protocol client over our own codec, for tests that need exact requests."""

from __future__ import annotations

import socket
import struct
from itertools import count

from kafkette.broker.protocol.framing import decode_response, encode_request
from kafkette.broker.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kafkette.broker.protocol.messages.create_topics_response import CreateTopicsResponse
from kafkette.broker.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kafkette.broker.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from kafkette.broker.protocol.types import Message

_SIZE = struct.Struct(">i")


class RawClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self._correlation = count(1)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, body: Message, version: int) -> int:
        correlation_id = next(self._correlation)
        self.sock.sendall(encode_request(body, version, correlation_id, "raw-test-client"))
        return correlation_id

    def receive(self, api_key: int, version: int) -> tuple[int, Message]:
        return decode_response(memoryview(self.receive_frame()), api_key, version)

    def request(self, body: Message, version: int) -> Message:
        assert body.API_KEY is not None
        sent = self.send(body, version)
        correlation_id, response = self.receive(body.API_KEY, version)
        assert correlation_id == sent
        return response

    def create_topic(self, name: str, partitions: int) -> None:
        """Create a topic with the broker's default replication; fails the test on any error."""
        topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=-1)
        response = self.request(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7)
        assert isinstance(response, CreateTopicsResponse)
        assert [r.error_code for r in response.topics] == [0], response.topics[0].error_message

    def find_coordinator(self, group: str) -> None:
        """Look up a group's coordinator as clients do first (it creates __consumer_offsets); fails on error."""
        response = self.request(FindCoordinatorRequest(key=group, key_type=0), 3)
        assert isinstance(response, FindCoordinatorResponse)
        assert response.error_code == 0, response.error_message

    def receive_frame(self) -> bytes:
        size = _SIZE.unpack(self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(chunks)} of {n} bytes")
            chunks += chunk
        return bytes(chunks)

    def is_closed_by_peer(self) -> bool:
        """True when the broker closed this connection (reads EOF within the timeout)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
