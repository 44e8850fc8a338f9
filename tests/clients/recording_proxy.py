"""A TCP proxy on 127.0.0.1 that forwards bytes unchanged and keeps a copy of every request frame."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from types import TracebackType
from typing import Self

_SIZE = struct.Struct(">i")


class RecordingProxy:
    """Listens on a free port and forwards each connection to ``target``.

    The broker must advertise the proxy's address, so that clients come back
    through it after bootstrap; ``frames`` holds every client→broker frame
    (without its size prefix) in arrival order per connection.
    """

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.frames: list[bytes] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    def start(self, target: tuple[str, int]) -> None:
        self.target = target
        self._spawn(self._accept)

    def _spawn(self, function: object, *args: object) -> None:
        thread = threading.Thread(target=function, args=args, daemon=True)  # type: ignore[arg-type]
        thread.start()
        self._threads.append(thread)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            assert self.target is not None
            upstream = socket.create_connection(self.target, timeout=10)
            self._sockets += [client, upstream]
            self._spawn(self._pump, client, upstream, True)
            self._spawn(self._pump, upstream, client, False)

    def _pump(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        pending = bytearray()
        try:
            while data := source.recv(65536):
                sink.sendall(data)
                if record:
                    pending += data
                    self._take_frames(pending)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _take_frames(self, pending: bytearray) -> None:
        while len(pending) >= 4:
            size = _SIZE.unpack_from(pending)[0]
            if len(pending) < 4 + size:
                return
            with self._lock:
                self.frames.append(bytes(pending[4 : 4 + size]))
            del pending[: 4 + size]

    def close(self) -> None:
        self._stopping.set()
        self._listener.close()
        for sock in self._sockets:
            sock.close()
        for thread in self._threads:
            thread.join(5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
