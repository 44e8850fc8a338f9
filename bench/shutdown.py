"""How long a clean shutdown of a broker leading many partitions takes once it has been up a while, and its
restart: each git work tree's code in turn.

    python bench/shutdown.py --tree old=/path/to/base --tree new=. [--kafka] [--partitions 10000] [--up-s 70]
        [--rounds 2]

One fresh single Kafkette broker per tree and round (PYTHONPATH=<tree>/typecheck), and with ``--kafka`` one Apache
Kafka broker, the order alternating every round, with bench/growth.py's settings and its way of creating N
partitions. A record is acknowledged on every
partition, the broker stays up ``--up-s`` (past its first offset checkpoint pass, every 60 s by default), and is
stopped with SIGTERM: the signal to the process's exit is the first shutdown. It is started again on its data
(every partition written again: a new leader epoch each) and, ``--up-s`` later, stopped a second time, as a broker
is in a rolling restart after the restart before. Numbers, no pass/fail.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from functools import partial

from brokers import RunningBroker, restart, start_kafka, start_kafkette, tree_env, work_trees
from growth import SETTINGS, TOPIC, create_topic, every_partition_written


def one_round(start: Callable[[], RunningBroker], partitions: int, up_s: float) -> dict[str, float]:
    broker = start()
    try:
        started = time.monotonic()
        create_topic(broker, TOPIC, partitions)
        listened: list[float] = []
        ready = every_partition_written(TOPIC, partitions, listened)
        ready(broker.bootstrap, started, broker.process)
        time.sleep(up_s)
        broker = restart(broker, kill=False, ready=ready)
        point = {"first_shutdown_s": broker.stopped_s, "listening_s": listened[-1], "written_s": broker.startup_s}
        time.sleep(up_s)
        signalled = time.monotonic()
        broker.process.terminate()
        broker.process.wait(180)
        point["second_shutdown_s"] = time.monotonic() - signalled
        return point
    finally:
        broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", default=[], help="name=path of a git work tree")
    parser.add_argument("--kafka", action="store_true", help="Apache Kafka too")
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--up-s", type=float, default=70.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    brokers: list[tuple[str, Callable[[], RunningBroker]]] = [
        (name, partial(start_kafkette, SETTINGS["kafkette"], tree_env(tree))) for name, tree in work_trees(args.tree)
    ]
    if args.kafka:
        brokers.append(("kafka", partial(start_kafka, settings=SETTINGS["kafka"])))
    points: dict[str, list[dict[str, float]]] = {name: [] for name, _ in brokers}
    for round_ in range(args.rounds):
        for name, start in brokers if round_ % 2 == 0 else brokers[::-1]:
            point = one_round(start, args.partitions, args.up_s)
            points[name].append(point)
            print(
                f"round {round_ + 1} {name}: first shutdown {point['first_shutdown_s']:.2f} s, restart listening "
                f"{point['listening_s']:.2f} s, every partition written {point['written_s']:.2f} s, second shutdown "
                f"{point['second_shutdown_s']:.2f} s; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    for name, rounds in points.items():
        medians = {key: statistics.median(point[key] for point in rounds) for key in rounds[0]}
        print(f"{name} medians: " + ", ".join(f"{key} {value:.2f}" for key, value in medians.items()))


if __name__ == "__main__":
    main()
