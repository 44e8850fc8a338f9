"""Broker CPU per produced record when each ProduceRequest carries many partitions with a small batch each.

    python bench/produce_partitions.py --tree old=/path/to/base --tree new=/path/to/worktree --rounds 3
    python bench/produce_partitions.py --tree new=. --profile 10000     # one broker under py-spy (if installed)

Each tree's broker is its own process (PYTHONPATH=<tree>/typecheck, so its code is the one that runs: the
script prints the module file every broker imported) with small segments as bench/growth.py gives them. A
topic of N partitions is created on every broker; then the client (a plain socket, the project's own codec)
sends one prebuilt ProduceRequest v9 again and again, acks=1: N partitions x one uncompressed batch of
``--records`` 100 B records, one request in flight. A round measures, per tree in turn (the order alternating
every round), the broker's process CPU (user + system, /proc) over ``--records-per-round`` records; the report
gives the median per tree and the ratio new/old, with the machine's load average.

``--per-partition`` sends librdkafka's shape instead: one ProduceRequest per partition batch (librdkafka
builds a request per partition), the N requests prebuilt and sent in turn, so the broker's cost per request
is measured without librdkafka's own CPU beside it on the machine. ``--in-flight K`` sends K requests before
reading their answers: with one, the broker sleeps and wakes for every request, as it does behind a client
slower than itself; with several, it finds the next request waiting, as behind a faster one.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from brokers import RunningBroker, start_kafkette, voluntary_switches
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.protocol.framing import decode_response, encode_request
from kafkette.broker.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kafkette.broker.protocol.messages.produce_response import ProduceResponse
from kafkette.broker.protocol.records import Record, encode_batch

SETTINGS = {"log.segment.bytes": "1048576", "log.index.size.max.bytes": "65536", "num.partitions": "1"}
TOPIC = "wide"
VERSION = 9
SIZE = struct.Struct(">i")


def produce_frame(partitions: Sequence[int], records: int, correlation_id: int) -> bytes:
    """One request carrying a batch of ``records`` 100 B records for each of ``partitions``."""
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None, b"v" * 100, []) for i in range(records)])
    request = ProduceRequest(
        acks=1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name=TOPIC,
                partition_data=[PartitionProduceData(index=p, records=batch) for p in partitions],
            )
        ],
    )
    return encode_request(request, VERSION, correlation_id, "produce-partitions")


def request_frames(partitions: int, records: int, per_partition: bool) -> list[bytes]:
    """The requests a round sends in turn: one to every partition, or one per partition."""
    if per_partition:
        return [produce_frame([p], records, p + 1) for p in range(partitions)]
    return [produce_frame(range(partitions), records, 1)]


def read_frame(sock: socket.socket) -> bytes:
    # MSG_WAITALL: a blocking socket returns the whole frame, or less only when the broker closed it.
    (size,) = SIZE.unpack(sock.recv(4, socket.MSG_WAITALL))
    body = sock.recv(size, socket.MSG_WAITALL)
    if len(body) < size:
        raise ConnectionError("broker closed the connection")
    return body


def check(answer: bytes, partitions: int) -> None:
    _, body = decode_response(memoryview(answer), 0, VERSION)
    assert isinstance(body, ProduceResponse)
    answers = [p for topic in body.responses for p in topic.partition_responses]
    failed = [p for p in answers if p.error_code != 0]
    if len(answers) != partitions or failed:
        raise RuntimeError(f"{len(answers)} answers, {len(failed)} failed, e.g. {failed[:1]}")


class Target:
    def __init__(self, name: str, tree: Path, partitions: int) -> None:
        self.name = name
        # BROKER_PYTHONPATH: more entries after the tree's (a sitecustomize.py counting collections, say).
        path = os.pathsep.join(filter(None, [str(tree / "typecheck"), os.environ.get("BROKER_PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        probe = subprocess.run(
            [sys.executable, "-P", "-c", "import kafkette.broker as b; print(b.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        self.module = probe.stdout.strip()
        self.commit = subprocess.run(
            ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        self.broker: RunningBroker = start_kafkette(SETTINGS, env=env)
        admin = AdminClient({"bootstrap.servers": self.broker.bootstrap})
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(120)
        host, port = self.broker.bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.samples: list[float] = []
        self.sleeps_per_request = 0.0

    def wait_led(self, frame: bytes, partitions: int, deadline_s: float = 300.0) -> None:
        """Send the request until every partition accepts it (a new partition's leadership comes a bit later)."""
        deadline = time.monotonic() + deadline_s
        while True:
            self.sock.sendall(frame)
            try:
                check(read_frame(self.sock), partitions)
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def round(self, frames: list[bytes], requests: int, records: int, in_flight: int = 1) -> float:
        """Broker CPU s per M records over ``requests`` requests, sent ``in_flight`` at a time before their answers
        are read (more than one keeps the broker from waiting for the next request, as a fast client does)."""
        before, sleeps_before = self.broker.cpu_seconds(), voluntary_switches(self.broker.process.pid)
        last = b""
        for first in range(0, requests, in_flight):
            sent = range(first, min(first + in_flight, requests))
            self.sock.sendall(b"".join(frames[n % len(frames)] for n in sent))
            for _ in sent:
                last = read_frame(self.sock)
        spent = self.broker.cpu_seconds() - before
        self.sleeps_per_request = (voluntary_switches(self.broker.process.pid) - sleeps_before) / requests
        self.last = last
        per_million = spent / records * 1e6
        self.samples.append(per_million)
        return per_million


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="name=path of a git work tree")
    parser.add_argument("--partitions", type=int, action="append", help="1000 and 10000 unless given")
    parser.add_argument("--records", type=int, default=20, help="records per partition per request")
    parser.add_argument("--records-per-round", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=int, help="partitions: py-spy records the first tree's broker")
    parser.add_argument("--per-partition", action="store_true", help="one request per partition batch")
    parser.add_argument("--in-flight", type=int, default=1, help="requests sent before their answers are read")
    args = parser.parse_args()
    trees = [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in args.tree]
    sizes = [args.profile] if args.profile else (args.partitions or [1000, 10000])
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    for partitions in sizes:
        everywhere = produce_frame(range(partitions), args.records, 1)
        frames = request_frames(partitions, args.records, args.per_partition)
        per_request = args.records * (1 if args.per_partition else partitions)
        answers = 1 if args.per_partition else partitions
        requests = max(1, args.records_per_round // per_request)
        targets = [Target(name, tree, partitions) for name, tree in trees]
        try:
            for target in targets:
                print(f"{target.name}: {target.commit} {target.module}")
                target.wait_led(everywhere, partitions)
                target.round(frames, max(1, requests // 5), per_request * max(1, requests // 5))  # warm-up
                target.samples.clear()
            if args.profile:
                profile(targets[0], frames, requests, per_request, args.rounds, args.in_flight)
                continue
            for n in range(args.rounds):
                order = targets if n % 2 == 0 else targets[::-1]
                for target in order:
                    value = target.round(frames, requests, requests * per_request, args.in_flight)
                    check(target.last, answers)
                    print(
                        f"  {partitions} partitions round {n + 1} {target.name}: {value:.2f} CPU s/M records,"
                        f" {target.sleeps_per_request:.2f} sleeps per request"
                    )
            load = os.getloadavg()
            base = statistics.median(targets[0].samples)
            for target in targets:
                med = statistics.median(target.samples)
                samples = ", ".join(f"{s:.2f}" for s in target.samples)
                print(
                    f"{partitions} partitions, {target.name} {target.commit}: median {med:.2f} CPU s per M records"
                    f" ({samples}); x{med / base:.3f} of {targets[0].name}; load {load[0]:.2f} {load[1]:.2f}"
                )
        finally:
            for target in targets:
                target.sock.close()
                target.broker.stop()


def profile(target: Target, frames: list[bytes], requests: int, per_request: int, rounds: int, in_flight: int) -> None:
    out = Path(f"/tmp/produce-partitions-{target.name}.txt")
    extra = os.environ.get("PY_SPY_ARGS", "").split()  # --native, say
    spy = subprocess.Popen(
        ["py-spy", "record", "-p", str(target.broker.process.pid), "-f", "raw", "-o", str(out), "-r", "200", *extra]
    )
    time.sleep(1)
    for _ in range(rounds):
        print(f"  round: {target.round(frames, requests, requests * per_request, in_flight):.2f} CPU s/M records")
    spy.send_signal(2)
    spy.wait()
    print(f"py-spy raw output in {out}")


if __name__ == "__main__":
    main()
