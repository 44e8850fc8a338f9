"""How long a broker keeps its clients waiting while it creates, then deletes, a big topic: the slowest of many
tiny requests.

    python bench/topic_holds.py --tree old=/path/to/base --tree new=. [--partitions 10000] [--rounds 3]

One fresh single Kafkette broker per tree and round (PYTHONPATH=<tree>/typecheck, so that tree's code runs; the
order alternates every round), with bench/growth.py's settings and its way of creating N partitions (CreateTopics
of up to 5,000, then CreatePartitions). A process of its own sends ApiVersions on its own connection every
2 ms, one in flight, from 0.5 s before the create until 3 s after every partition is led in Metadata, and again
from 0.5 s before DeleteTopics until 3 s after the topic's last directory is gone: the slowest of those round
trips is how long the broker held every client. The broker's own watchdog lines ("the event loop was held for
... ms") are read from its log. Numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shutil
import socket
import struct
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

from brokers import start_kafkette, tree_env, work_trees
from confluent_kafka.admin import AdminClient
from growth import SETTINGS, create_topic

# ApiVersions v0 with client id "probe": the cheapest request a broker answers.
_PROBE = struct.pack(">hhih5s", 18, 0, 1, 5, b"probe")
_FRAME = struct.pack(">i", len(_PROBE)) + _PROBE
_HELD = re.compile(rb"the event loop was held for (\d+) ms")


def probe(bootstrap: str, stop: EventType, ready: EventType, results: Connection) -> None:
    """Send the tiny request every 2 ms, one in flight, until ``stop``; then send back (sent at, round trip)s."""
    round_trips: list[tuple[float, float]] = []
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as connection:
        ready.set()
        while not stop.is_set():
            sent = time.perf_counter()
            connection.sendall(_FRAME)
            (size,) = struct.unpack(">i", connection.recv(4, socket.MSG_WAITALL))
            connection.recv(size, socket.MSG_WAITALL)
            round_trips.append((sent, time.perf_counter() - sent))
            time.sleep(0.002)
    results.send(round_trips)


def probed(bootstrap: str, action: Callable[[], float]) -> dict[str, float]:
    """``action``'s seconds and the waits of the tiny requests sent while it ran.

    The prober is a process of its own: as a thread of this one it also waited for this process's own work
    (librdkafka's Metadata answers for 10,000 partitions made into Python objects, 50-100 ms each), which was as
    long as the broker's holds it measured. perf_counter is the system's monotonic clock in both."""
    context = multiprocessing.get_context("spawn")
    stop, ready = context.Event(), context.Event()
    receiver, sender = context.Pipe(duplex=False)
    prober = context.Process(target=probe, args=(bootstrap, stop, ready, sender), daemon=True)
    prober.start()
    if not ready.wait(30):
        raise RuntimeError("the prober did not connect")
    time.sleep(0.5)
    started = time.perf_counter()
    seconds = action()
    time.sleep(3)
    stop.set()
    round_trips: list[tuple[float, float]] = receiver.recv()
    prober.join(5)
    waits = sorted(wait for sent, wait in round_trips if sent >= started)
    return {
        "seconds": seconds,
        "probes": len(waits),
        "max_ms": 1e3 * waits[-1],
        "p99_ms": 1e3 * waits[int(len(waits) * 0.99)],
        "over_50_ms": sum(1 for wait in waits if wait > 0.05),
    }


def delete_topic(bootstrap: str, data_dir: Path, topic: str) -> float:
    """Seconds from DeleteTopics to the topic's last directory gone from ``data_dir``."""
    started = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a client dropped at once fails its futures
    admin.delete_topics([topic], request_timeout=300)[topic].result(300)
    while any(path.name.startswith(f"{topic}-") for path in data_dir.iterdir()):
        time.sleep(0.01)
    return time.monotonic() - started


def one_round(tree: Path, partitions: int) -> dict[str, dict[str, float]]:
    broker = start_kafkette(SETTINGS["kafkette"], env=tree_env(tree))
    try:
        log = broker.data_dir / "broker.log"
        create = probed(broker.bootstrap, lambda: create_topic(broker, "growth", partitions))
        create["watchdog_max_ms"] = max(map(int, _HELD.findall(log.read_bytes())), default=0)
        seen = len(_HELD.findall(log.read_bytes()))
        delete = probed(broker.bootstrap, lambda: delete_topic(broker.bootstrap, broker.data_dir / "data", "growth"))
        delete["watchdog_max_ms"] = max(map(int, _HELD.findall(log.read_bytes())[seen:]), default=0)
        return {"create": create, "delete": delete}
    finally:
        broker.process.kill()
        broker.process.wait()
        shutil.rmtree(broker.data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="name=path of a git work tree")
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = work_trees(args.tree)
    for round_ in range(args.rounds):
        for name, tree in trees if round_ % 2 == 0 else trees[::-1]:
            results = one_round(tree, args.partitions)
            load = os.getloadavg()[0]
            for action, result in results.items():
                print(
                    f"round {round_ + 1} {name} {action}: {result['seconds']:.2f} s; {result['probes']:.0f} probes, "
                    f"slowest {result['max_ms']:.0f} ms, p99 {result['p99_ms']:.1f} ms, {result['over_50_ms']:.0f} "
                    f"over 50 ms; watchdog's longest hold {result['watchdog_max_ms']:.0f} ms; load {load:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
