"""Broker fuzz: broken frames of every served request type sent to a real broker process.

Each case opens a connection, sends one broken frame (`fuzz_frames.py`: a mutated request, or a
wrong size prefix), and then:

- a frame the broker must refuse (a size below zero or over socket.request.max.bytes, an API or
  version not served, bytes the codec cannot decode) closes that connection within
  ``REFUSAL_TIMEOUT_S`` (ApiVersions at a version not served is answered, in v0, instead);
- a frame that still decodes is a request like any other: it is answered with its own
  correlation id, or the connection is closed, or it waits (a long-polled Fetch, an acks=0
  Produce), which the test ends by closing its side;
- the broker process is still running, and a client connected before the case still gets answers.

At the end a real client (confluent-kafka) produces and consumes, and the broker's log holds no
traceback: a request may be refused, never crash a handler. ``make fuzz`` runs many more cases
through KAFKETTE_FUZZ_CASES.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import confluent_kafka
import pytest
from fuzz_frames import broken_frames, valid_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_factory import versions_of
from raw_client import RawClient

from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.errors import ErrorCode
from kafkette.broker.protocol.framing import API_VERSIONS_KEY, decode_request, peek_header
from kafkette.broker.protocol.messages import REQUESTS, ApiVersionsRequest, MetadataRequest, MetadataResponse
from kafkette.broker.protocol.messages.metadata_request import MetadataRequestTopic
from kafkette.broker.protocol.types import Message
from kafkette.broker.server.apis import APIS
from kafkette.broker.testing import BrokerProcess

CASES = int(os.environ.get("KAFKETTE_FUZZ_CASES", "60"))
MAX_REQUEST = 1 << 20
REFUSAL_TIMEOUT_S = 10.0  # generous: the machine is shared, and a refusal is immediate when it is not
ANSWER_WAIT_S = 0.2  # how long a decodable request is given before the test stops waiting for it
# Every version of every request the broker defines, served or not: a version outside the served range is refused.
REQUEST_VERSIONS = [(REQUESTS[key], version) for key in sorted(APIS) for version in versions_of(REQUESTS[key])]
SERVED = [
    (REQUESTS[key], version)
    for key, api in sorted(APIS.items())
    for version in range(api.min_version, api.max_version + 1)
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("frame-fuzz") / "data"
    with BrokerProcess(data, {"socket.request.max.bytes": str(MAX_REQUEST)}) as running:
        yield running


@pytest.fixture(scope="module")
def bystander(broker: BrokerProcess) -> Iterator[RawClient]:
    """A well-behaved client connected before any broken frame, asked after each."""
    with RawClient(broker.bootstrap) as client:
        client.request(ApiVersionsRequest(), 3)
        yield client


def must_refuse(frame: bytes) -> bool:
    """Whether the broker must close the connection on this frame (without its size prefix)."""
    try:
        api_key, version, _ = peek_header(memoryview(frame))
    except DecodeError:
        return True
    api = APIS.get(api_key)
    if api is None:
        return True
    if not api.min_version <= version <= api.max_version:
        return api_key != API_VERSIONS_KEY  # answered in v0 with UNSUPPORTED_VERSION
    try:
        decode_request(memoryview(frame))
    except DecodeError:
        return True
    return False


def outcome(sock: socket.socket, correlation_id: int | None, wait_s: float) -> str:
    """'closed', 'answered' (a whole response frame carrying ``correlation_id``) or 'waiting' after ``wait_s``."""
    received = bytearray()
    deadline = time.monotonic() + wait_s
    while (remaining := deadline - time.monotonic()) > 0:
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        if not chunk:
            return "closed"
        received += chunk
        if len(received) >= 8:
            size, answered = struct.unpack_from(">ii", received)
            assert answered == correlation_id, f"answer to correlation id {answered}, sent {correlation_id}"
            if len(received) >= 4 + size:
                return "answered"
    return "waiting"


def send_case(broker: BrokerProcess, payload: bytes, refuse: bool, correlation_id: int | None) -> None:
    with socket.create_connection(broker.address, timeout=REFUSAL_TIMEOUT_S) as sock:
        try:
            sock.sendall(payload)
        except (ConnectionResetError, BrokenPipeError):
            return  # closed while we were still writing: refused
        result = outcome(sock, correlation_id, REFUSAL_TIMEOUT_S if refuse else ANSWER_WAIT_S)
    assert result == "closed" or not refuse, f"a frame the broker must refuse left the connection {result}"


def check_alive(broker: BrokerProcess, bystander: RawClient) -> None:
    assert broker.running, f"the broker exited with {broker.returncode}: see {broker.log_path}"
    response = bystander.request(MetadataRequest(topics=None), 12)
    assert response.brokers[0].port == broker.address[1]


@settings(max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(frame=broken_frames(REQUEST_VERSIONS), size_error=st.sampled_from((0, 0, 0, -1, 1, 7)))
def test_broken_request_frames(broker: BrokerProcess, bystander: RawClient, frame: bytes, size_error: int) -> None:
    """A mutated request behind a size prefix that is right, or a few bytes off (the frame then ends elsewhere)."""
    size = len(frame) + size_error
    refuse = size <= len(frame) and must_refuse(frame[:size])  # a longer frame waits for bytes that never come
    correlation_id = struct.unpack_from(">i", frame, 4)[0]
    send_case(broker, struct.pack(">i", size) + frame, refuse, correlation_id)
    check_alive(broker, bystander)


@settings(max_examples=CASES, deadline=None, database=None)
@given(request=st.sampled_from(SERVED), seed=st.integers(0, 2**31 - 1))
def test_random_well_formed_requests(
    broker: BrokerProcess, bystander: RawClient, request: tuple[type[Message], int], seed: int
) -> None:
    """Every field random but the frame well formed: answered, or left waiting; never a crashed handler."""
    cls, version = request
    frame = valid_frame(cls, version, seed)
    send_case(broker, struct.pack(">i", len(frame)) + frame, refuse=False, correlation_id=seed)
    check_alive(broker, bystander)


@settings(max_examples=max(CASES // 4, 10), deadline=None, database=None)
@given(size=st.one_of(st.integers(-(2**31), -1), st.integers(MAX_REQUEST + 1, 2**31 - 1)), tail=st.binary(max_size=64))
def test_sizes_out_of_range_close_the_connection(
    broker: BrokerProcess, bystander: RawClient, size: int, tail: bytes
) -> None:
    send_case(broker, struct.pack(">i", size) + tail, refuse=True, correlation_id=None)
    check_alive(broker, bystander)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_topic_without_a_name_before_v12_is_an_invalid_request(broker: BrokerProcess, version: int) -> None:
    """Found by the fuzz: v10-v11 let a topic's name be null, but not their response (the encoder failed)."""
    with RawClient(broker.bootstrap) as client:
        request = MetadataRequest(topics=[MetadataRequestTopic(name=None, topic_id=uuid4())])
        response = client.request(request, version)
    assert isinstance(response, MetadataResponse)
    assert [(t.name, t.error_code) for t in response.topics] == [("", ErrorCode.INVALID_REQUEST)]


def test_clients_still_work_and_nothing_crashed(broker: BrokerProcess, bystander: RawClient) -> None:
    """Runs after the fuzz (file order): a real client's round trip, and no handler failed on the way."""
    topic = "after-fuzz"
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"still here")
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "after-fuzz", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(1)
        assert message is not None and message.error() is None and message.value() == b"still here"
    finally:
        consumer.close()
    check_alive(broker, bystander)
    tracebacks = [line for line in Path(broker.log_path).read_text().splitlines() if "Traceback" in line]
    assert not tracebacks, f"{len(tracebacks)} tracebacks in {broker.log_path}"
