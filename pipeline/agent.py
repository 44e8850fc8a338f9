"""The driver agent: an HTTP endpoint inside the Spark driver that reports and sets the executor total.

Started by ``register(spark)`` when the Spark conf ``spark.kafkette.agent.port`` is set, so the operator (or
the laptop runtime's autoscale loop) can resize a running streaming application without restarting it:

    GET /executors  -> 200 {"applicationId", "queries": [{"id", "runId", "name"}], "executors", "requested"}
    PUT /executors  {"total": N} -> 200 (the same body, after asking Spark), 409 when this Spark cannot change
                    executors live (local mode, dynamic allocation on), 400 on bad input
    500 {"error"} when a call into Spark failed (a stopping SparkContext)

Spark's calls (through py4j, on the driver's SparkContext), as proven on Kubernetes and standalone:
``requestTotalExecutors(n, 0, {})`` adds executors; it never removes running ones, so going down first
``killExecutors(ids)`` (the idlest, then newest) and then ``requestTotalExecutors(n)`` pins the target,
since ``killExecutors`` lowers it by the number killed.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PORT_CONF = "spark.kafkette.agent.port"
HOST_CONF = "spark.kafkette.agent.host"  # default: 0.0.0.0 under Kubernetes (a pod), else 127.0.0.1
PATH = "/executors"
MAX_BODY = 4096
DRIVER_ID = "driver"


class AgentInputError(ValueError):
    """A PUT body that is not {"total": non-negative int}."""


class LiveScalingUnsupported(RuntimeError):
    """This Spark cannot change its executors while it runs; the message says why."""


@dataclass(frozen=True)
class Executor:
    id: str
    active_tasks: int
    added_ms: int


def parse_total(body: bytes) -> int:
    """The executor total a PUT asks for."""
    try:
        parsed = json.loads(body)
    except ValueError as exc:
        raise AgentInputError(f'expected JSON {{"total": N}}: {exc}') from None
    total = parsed.get("total") if isinstance(parsed, dict) else None
    if isinstance(total, bool) or not isinstance(total, int) or total < 0:
        raise AgentInputError(f'expected {{"total": N}} with N a non-negative integer, got {body[:200]!r}')
    return total


def removals(executors: Sequence[Executor], total: int) -> list[str]:
    """Which executors to kill to leave ``total``: the idlest first (fewest running tasks, so the least work is
    redone), then the newest (the oldest hold the warmest caches)."""
    surplus = len(executors) - total
    if surplus <= 0:
        return []
    order = sorted(executors, key=lambda e: (e.active_tasks, -e.added_ms, e.id))
    return [e.id for e in order[:surplus]]


def refusal(master: str, dynamic_allocation: bool) -> str | None:
    """Why this application cannot be resized live, or None when it can."""
    if master.startswith("local"):
        return f"master {master} runs every task in the driver: it has no executors to add or remove"
    if dynamic_allocation:
        return "spark.dynamicAllocation.enabled is true: Spark sizes itself and refuses killExecutors"
    return None


class SparkExecutors:
    """The py4j shell: what the agent reads from and asks of the driver's SparkContext."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._sc = spark.sparkContext
        self._jvm: Any = self._sc._jvm
        self._jsc: Any = self._sc._jsc.sc()

    @property
    def application_id(self) -> str:
        return str(self._sc.applicationId)

    def refusal(self) -> str | None:
        dynamic = self._sc.getConf().get("spark.dynamicAllocation.enabled", "false").lower() == "true"
        return refusal(str(self._sc.master), dynamic)

    def queries(self) -> list[dict[str, str | None]]:
        return [{"id": q.id, "runId": q.runId, "name": q.name} for q in self._spark.streams.active]

    def executors(self) -> list[Executor]:
        """Registered executors, the driver left out (the status store lists it as one)."""
        listed = self._jvm.scala.jdk.javaapi.CollectionConverters.asJava(self._jsc.statusStore().executorList(True))
        return [
            Executor(str(e.id()), int(e.activeTasks()), int(e.addTime().getTime()))
            for e in listed
            if str(e.id()) != DRIVER_ID
        ]

    def request_total(self, total: int) -> None:
        empty = getattr(getattr(self._jvm.scala.collection.immutable, "Map$"), "MODULE$").empty()
        if not self._jsc.requestTotalExecutors(total, 0, empty):
            raise LiveScalingUnsupported(f"Spark's scheduler ({self._sc.master}) refused requestTotalExecutors")

    def kill(self, ids: Sequence[str]) -> None:
        seq = self._jvm.scala.jdk.javaapi.CollectionConverters.asScala(self._jvm.java.util.ArrayList(list(ids)))
        if not self._jsc.killExecutors(seq.toSeq()):
            raise LiveScalingUnsupported(f"Spark's scheduler ({self._sc.master}) refused killExecutors({list(ids)})")


class Agent:
    """State and actions behind the endpoint; one request at a time (the lock), as Spark's calls are not atomic."""

    def __init__(self, spark: SparkExecutors) -> None:
        self._spark = spark
        self._lock = threading.Lock()
        self.requested: int | None = None

    def state(self) -> dict[str, object]:
        return {
            "applicationId": self._spark.application_id,
            "queries": self._spark.queries(),
            "executors": len(self._spark.executors()),
            "requested": self.requested,
        }

    def apply(self, total: int) -> dict[str, object]:
        with self._lock:
            why = self._spark.refusal()
            if why is not None:
                raise LiveScalingUnsupported(why)
            doomed = removals(self._spark.executors(), total)
            if doomed:
                log.info("executor total %d: killing executors %s", total, doomed)
                self._spark.kill(doomed)
            self._spark.request_total(total)
            self.requested = total
        return self.state()


def _handler(agent: Agent) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != PATH:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}; the agent serves {PATH}"})
                return
            try:
                state = agent.state()
            except Exception as exc:  # a stopping SparkContext (py4j): an answer, never a dropped connection
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"asking Spark failed: {exc}"})
            else:
                self._send(HTTPStatus.OK, state)

        def do_PUT(self) -> None:
            if self.path != PATH:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"no {self.path}; the agent serves {PATH}"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 < length <= MAX_BODY:
                    raise AgentInputError(f"expected a JSON body of 1 to {MAX_BODY} bytes, got {length}")
                answer = agent.apply(parse_total(self.rfile.read(length)))
            except AgentInputError as exc:
                self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            except LiveScalingUnsupported as exc:
                self._send(HTTPStatus.CONFLICT, {"error": str(exc)})
            except Exception as exc:  # as in do_GET
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": f"asking Spark failed: {exc}"})
            else:
                self._send(HTTPStatus.OK, answer)

        def _send(self, status: HTTPStatus, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("agent: " + format, *args)

    return Handler


class AgentServer:
    """The agent's HTTP server on a daemon thread (it must never keep a finished driver alive)."""

    def __init__(self, agent: Agent, host: str, port: int) -> None:
        self.agent = agent
        self._server = HTTPServer((host, port), _handler(agent))
        self._thread = threading.Thread(target=self._server.serve_forever, name="kafkette-agent", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


_running: dict[str, AgentServer] = {}  # by application id: register() may run more than once per driver


def start_if_configured(spark: SparkSession) -> AgentServer | None:
    """Start the agent when ``spark.kafkette.agent.port`` is set (once per application)."""
    conf = spark.sparkContext.getConf()
    text = conf.get(PORT_CONF)
    if text is None:
        return None
    if not text.strip().isdigit():
        raise ValueError(f"{PORT_CONF}: expected a port number, got {text!r}")
    app = str(spark.sparkContext.applicationId)
    if app in _running:
        return _running[app]
    master = str(spark.sparkContext.master)
    host = conf.get(HOST_CONF) or ("0.0.0.0" if master.startswith("k8s://") else "127.0.0.1")
    server = AgentServer(Agent(SparkExecutors(spark)), host, int(text))
    log.warning("kafkette agent for %s serves http://%s:%d%s", app, host, server.port, PATH)
    _running[app] = server
    return server
