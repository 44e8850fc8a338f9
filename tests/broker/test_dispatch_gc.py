"""Dispatch pauses the cyclic GC for one request and always gives it back as it found it.

The process-wide collector is switched off while a request is decoded, handled and encoded (its objects die
by reference counting when it returns; bench/results/produce-partitions.md), so a request that fails, or an
application that embeds the broker with the collector off, must find it in the state it left it.
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Iterator

import pytest
from raw_client import RawClient

from kafkette.broker.protocol.messages.api_versions_request import ApiVersionsRequest
from kafkette.broker.protocol.messages.api_versions_response import ApiVersionsResponse
from kafkette.broker.testing import InProcessBroker, in_process_broker


@pytest.fixture
def broker() -> Iterator[InProcessBroker]:
    with in_process_broker() as running:
        yield running


def api_versions(bootstrap: str) -> ApiVersionsResponse:
    with RawClient(bootstrap) as client:
        client.send(ApiVersionsRequest(), 3)
        _, answer = client.receive(18, 3)
    assert isinstance(answer, ApiVersionsResponse) and answer.error_code == 0
    return answer


def test_the_collector_is_back_on_after_requests_good_and_bad(broker: InProcessBroker) -> None:
    assert gc.isenabled()
    api_versions(broker.bootstrap)
    assert gc.isenabled()
    with RawClient(broker.bootstrap) as client:
        # An unknown API key: the broker answers or drops this one connection, and serves the next.
        client.sock.sendall(struct.pack(">ihhi", 8, 9999, 0, 1))
        client.sock.recv(64)
    api_versions(broker.bootstrap)
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_application_stays_off(broker: InProcessBroker) -> None:
    gc.disable()
    try:
        api_versions(broker.bootstrap)
        assert not gc.isenabled()
    finally:
        gc.enable()
