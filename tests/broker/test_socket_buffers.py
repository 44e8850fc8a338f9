"""socket.send.buffer.bytes and socket.receive.buffer.bytes size a client connection's socket, as in Kafka."""

from __future__ import annotations

import socket
from pathlib import Path

from waiting import wait_for

from kafkette.broker.testing import in_process_broker


def buffer_sizes(broker: object) -> list[tuple[int, int]]:
    """(SO_SNDBUF, SO_RCVBUF) of each accepted client socket, as the kernel reports them."""
    sizes = []
    for connection in list(broker._connections):  # type: ignore[attr-defined]
        if connection._transport is None:  # not made yet, or lost already
            continue
        sock = connection._transport.get_extra_info("socket")
        sizes.append(
            (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
        )
    return sizes


def test_configured_sizes_reach_the_socket() -> None:
    settings = {"socket.send.buffer.bytes": "65536", "socket.receive.buffer.bytes": "32768"}
    with in_process_broker(settings) as running, socket.create_connection(running.address):
        wait_for(lambda: buffer_sizes(running.broker), "the connection accepted", 10)
        # Linux doubles the size asked for, to leave room for its bookkeeping (socket(7)).
        assert buffer_sizes(running.broker) == [(2 * 65536, 2 * 32768)]


def test_minus_one_leaves_the_kernel_default() -> None:
    settings = {"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1"}
    with in_process_broker(settings) as running, socket.create_connection(running.address) as client:
        wait_for(lambda: buffer_sizes(running.broker), "the connection accepted", 10)
        # The accepted socket starts where an untouched socket of the same kind does.
        untouched = (
            client.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
            client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
        )
        assert buffer_sizes(running.broker) == [untouched]


def test_defaults_size_sends_only() -> None:
    """256 KiB sends (not Kafka's 100 KiB, not autotuned: bench/results/send-buffer.md), autotuned receives."""
    with in_process_broker({}) as running, socket.create_connection(running.address) as client:
        wait_for(lambda: buffer_sizes(running.broker), "the connection accepted", 10)
        untouched_receive = client.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        # The kernel caps what is asked at net.core.wmem_max (208 KiB on a stock kernel) before doubling it.
        granted = min(262144, int(Path("/proc/sys/net/core/wmem_max").read_text()))
        assert buffer_sizes(running.broker) == [(2 * granted, untouched_receive)]
