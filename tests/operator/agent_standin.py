"""A stand-in for the Spark driver's agent (kafkette.pipeline.agent): a real HTTP server in the test process.

The real agent runs inside a Spark driver, which needs a kubelet to run its pod; the API-server tier has none,
so the operator reaches this one instead (the node e2e test, e2e/test_autoscale.py, uses the real agent).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from kafkette.operator.kube import spark_agent

# (method, the PUT body or None) -> (HTTP status, JSON body, or raw bytes)
Respond = Callable[[str, Any], tuple[int, Any]]


class StandInAgent:
    def __init__(self, respond: Respond) -> None:
        self.received: list[Any] = []

        def answer(handler: BaseHTTPRequestHandler, method: str) -> None:
            body = None
            if method == "PUT":
                body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
                self.received.append(body)
            status, payload = respond(method, body)
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer(self, "GET")

            def do_PUT(self) -> None:
                answer(self, "PUT")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = spark_agent.agent_url("127.0.0.1", self._server.server_address[1])
        threading.Thread(target=self._server.serve_forever, name="stand-in-agent", daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
