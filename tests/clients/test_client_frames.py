"""Every request real clients send, captured on the wire, decodes and re-encodes to the same bytes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_workload import Workload
from confluent_io import create_topic, produce, read_back
from recording_proxy import RecordingProxy
from test_client_java import client_check

from kafkette.broker.protocol.framing import API_VERSIONS_KEY, decode_request, encode_request, peek_header
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.testing import BrokerProcess

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def proxied_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, RecordingProxy]]:
    with RecordingProxy() as proxy:
        config = {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
        with BrokerProcess(tmp_path / "data", config) as broker:
            proxy.start(broker.address)
            yield broker, proxy


def assert_frames_round_trip(frames: list[bytes]) -> Counter[str]:
    """Decode and re-encode each captured request; the names and versions seen, for the report."""
    seen: Counter[str] = Counter()
    for frame in frames:
        api_key, api_version, _ = peek_header(memoryview(frame))
        if api_key == API_VERSIONS_KEY and api_version > REQUESTS[api_key].VALID_VERSIONS[1]:
            # A newer client probes with an ApiVersions version our definitions predate; the broker
            # answers it in v0 with UNSUPPORTED_VERSION and the client retries with one we know.
            seen[f"ApiVersionsRequest v{api_version} (newer than the definitions)"] += 1
            continue
        request = decode_request(memoryview(frame))
        again = encode_request(request.body, request.api_version, request.correlation_id, request.header.client_id)
        name = f"{REQUESTS[request.api_key].NAME} v{request.api_version}"
        assert again[4:] == frame, f"{name} re-encodes differently"
        seen[name] += 1
    return seen


def test_librdkafka_requests_round_trip_byte_for_byte(proxied_broker: tuple[BrokerProcess, RecordingProxy]) -> None:
    _, proxy = proxied_broker
    bootstrap = f"127.0.0.1:{proxy.port}"
    create_topic(bootstrap, "frames")
    workload = Workload.starting_now(count=2000)
    produce(bootstrap, "frames", workload, {"compression.type": "zstd", "enable.idempotence": True})
    read_back(bootstrap, "frames")
    seen = assert_frames_round_trip(proxy.frames)
    for api in ("ProduceRequest", "FetchRequest", "MetadataRequest", "ApiVersionsRequest", "CreateTopicsRequest"):
        assert any(name.startswith(api) for name in seen), f"no {api} captured: {seen}"


@pytest.mark.java
def test_java_client_requests_round_trip_byte_for_byte(
    proxied_broker: tuple[BrokerProcess, RecordingProxy], java: str
) -> None:
    _, proxy = proxied_broker
    bootstrap = f"127.0.0.1:{proxy.port}"
    create_topic(bootstrap, "frames")
    client_check(java, "produce", bootstrap, "frames")
    client_check(java, "consume", bootstrap, "frames")
    seen = assert_frames_round_trip(proxy.frames)
    for api in ("ProduceRequest", "FetchRequest", "InitProducerIdRequest", "ListOffsetsRequest"):
        assert any(name.startswith(api) for name in seen), f"no {api} captured: {seen}"
