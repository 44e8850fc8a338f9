"""How long a broker keeps its clients waiting while it creates a big topic: the slowest of many tiny requests.

    python bench/create_holds.py --tree old=/path/to/base --tree new=. [--partitions 10000] [--rounds 3]

One fresh single Kafkette broker per tree and round (PYTHONPATH=<tree>/typecheck, so that tree's code runs; the
order alternates every round), with bench/growth.py's settings and its way of creating N partitions (CreateTopics
of up to 5,000, then CreatePartitions). A thread sends ApiVersions on its own connection every 2 ms, one in
flight, from 0.5 s before the create until 3 s after every partition is led in Metadata: the slowest of those
round trips is how long the broker held every client. The broker's own watchdog lines ("the event loop was held
for ... ms") are counted from its log. Numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import struct
import threading
import time
from pathlib import Path

from brokers import start_kafkette
from growth import SETTINGS, create_topic

# ApiVersions v0 with client id "probe": the cheapest request a broker answers.
_PROBE = struct.pack(">hhih5s", 18, 0, 1, 5, b"probe")
_FRAME = struct.pack(">i", len(_PROBE)) + _PROBE
_HELD = re.compile(rb"the event loop was held for (\d+) ms")


def probe(bootstrap: str, stop: threading.Event, round_trips: list[tuple[float, float]]) -> None:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as connection:
        while not stop.is_set():
            sent = time.perf_counter()
            connection.sendall(_FRAME)
            (size,) = struct.unpack(">i", connection.recv(4, socket.MSG_WAITALL))
            connection.recv(size, socket.MSG_WAITALL)
            round_trips.append((sent, time.perf_counter() - sent))
            time.sleep(0.002)


def one_round(tree: Path, partitions: int) -> dict[str, float]:
    broker = start_kafkette(SETTINGS["kafkette"], env={**os.environ, "PYTHONPATH": str(tree / "typecheck")})
    try:
        stop = threading.Event()
        round_trips: list[tuple[float, float]] = []
        prober = threading.Thread(target=probe, args=(broker.bootstrap, stop, round_trips), daemon=True)
        prober.start()
        time.sleep(0.5)
        started = time.perf_counter()
        created_s = create_topic(broker, "growth", partitions)
        time.sleep(3)
        stop.set()
        prober.join(5)
        waits = sorted(wait for sent, wait in round_trips if sent >= started)
        holds = [int(ms) for ms in _HELD.findall((broker.data_dir / "broker.log").read_bytes())]
        return {
            "created_s": created_s,
            "probes": len(waits),
            "max_ms": 1e3 * waits[-1],
            "p99_ms": 1e3 * waits[int(len(waits) * 0.99)],
            "over_50_ms": sum(1 for wait in waits if wait > 0.05),
            "watchdog_max_ms": max(holds, default=0),
        }
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
    trees = [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in args.tree]
    for round_ in range(args.rounds):
        for name, tree in trees if round_ % 2 == 0 else trees[::-1]:
            result = one_round(tree, args.partitions)
            load = os.getloadavg()[0]
            print(
                f"round {round_ + 1} {name}: created in {result['created_s']:.2f} s; {result['probes']:.0f} probes, "
                f"slowest {result['max_ms']:.0f} ms, p99 {result['p99_ms']:.1f} ms, {result['over_50_ms']:.0f} over "
                f"50 ms; watchdog's longest hold {result['watchdog_max_ms']:.0f} ms; load {load:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
