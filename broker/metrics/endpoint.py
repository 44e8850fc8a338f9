"""Serve the registry over HTTP on `metrics.port`, from the broker's event loop.

prometheus-client's own server answers on a thread, where the scrape-time gauges would read partitions
and groups while the loop changes them; here the scrape runs between two loop callbacks instead. Any
path answers with the metrics, as the JMX exporter does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

log = logging.getLogger(__name__)
# A scrape request is one GET with a few headers; anything larger or slower is dropped.
MAX_REQUEST_BYTES = 16384
READ_TIMEOUT_S = 10.0


class MetricsEndpoint:
    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on ``port`` (the broker starts no endpoint at all for metrics.port 0); returns the bound port."""
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            if len(head) > MAX_REQUEST_BYTES:
                return
            method = head.split(b" ", 1)[0]
            if method not in (b"GET", b"HEAD"):
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            try:
                body = generate_latest(self._registry)
            except Exception:  # a collector's bug must not take the broker's endpoint down with it
                log.exception("metrics scrape failed")
                writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                % (CONTENT_TYPE_LATEST.encode(), len(body))
            )
            if method == b"GET":
                writer.write(body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError) as exc:
            log.debug("metrics request dropped: %s", exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
