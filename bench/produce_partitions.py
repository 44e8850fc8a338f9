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
from pathlib import Path

from brokers import RunningBroker, start_kafkette
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


def produce_frame(partitions: int, records: int, correlation_id: int) -> bytes:
    now = int(time.time() * 1000)
    batch = encode_batch([Record(i, now, None, b"v" * 100, []) for i in range(records)])
    request = ProduceRequest(
        acks=1,
        timeout_ms=30000,
        topic_data=[
            TopicProduceData(
                name=TOPIC,
                partition_data=[PartitionProduceData(index=p, records=batch) for p in range(partitions)],
            )
        ],
    )
    return encode_request(request, VERSION, correlation_id, "produce-partitions")


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

    def round(self, frame: bytes, requests: int, records: int) -> float:
        before = self.broker.cpu_seconds()
        last = b""
        for _ in range(requests):
            self.sock.sendall(frame)
            last = read_frame(self.sock)
        spent = self.broker.cpu_seconds() - before
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
    args = parser.parse_args()
    trees = [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in args.tree]
    sizes = [args.profile] if args.profile else (args.partitions or [1000, 10000])
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    for partitions in sizes:
        frame = produce_frame(partitions, args.records, 1)
        per_request = partitions * args.records
        requests = max(1, args.records_per_round // per_request)
        targets = [Target(name, tree, partitions) for name, tree in trees]
        try:
            for target in targets:
                print(f"{target.name}: {target.commit} {target.module}")
                target.wait_led(frame, partitions)
                target.round(frame, max(1, requests // 5), per_request * max(1, requests // 5))  # warm-up
                target.samples.clear()
            if args.profile:
                profile(targets[0], frame, requests, per_request, args.rounds)
                continue
            for n in range(args.rounds):
                order = targets if n % 2 == 0 else targets[::-1]
                for target in order:
                    value = target.round(frame, requests, requests * per_request)
                    check(target.last, partitions)
                    print(f"  {partitions} partitions round {n + 1} {target.name}: {value:.2f} CPU s/M records")
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


def profile(target: Target, frame: bytes, requests: int, per_request: int, rounds: int) -> None:
    out = Path(f"/tmp/produce-partitions-{target.name}.txt")
    extra = os.environ.get("PY_SPY_ARGS", "").split()  # --native, say
    spy = subprocess.Popen(
        ["py-spy", "record", "-p", str(target.broker.process.pid), "-f", "raw", "-o", str(out), "-r", "200", *extra]
    )
    time.sleep(1)
    for _ in range(rounds):
        print(f"  round: {target.round(frame, requests, requests * per_request):.2f} CPU s/M records")
    spy.send_signal(2)
    spy.wait()
    print(f"py-spy raw output in {out}")


if __name__ == "__main__":
    main()
