"""How long a broker takes to come back after kill -9 with a large log (default 1 GiB).

    python -P bench/recovery.py [--gib 1.0] [--dir DIR]
    python -P bench/recovery.py --tree old=/path/to/base --tree new=. [--rounds 4]

Produces through confluent-kafka into a broker process, SIGKILLs it, then measures:
  * restart: from launching the broker again to its ready line (what an operator sees);
  * worst case: opening the logs with the recovery-point checkpoint removed, so every
    batch of every segment is validated (CRC-32C) and the indexes rebuilt.
With ``--tree`` the worst case is measured for each git work tree's code in turn, a process each
(PYTHONPATH=<tree>/typecheck, the module file printed), ``--rounds`` times with the order alternating, on the
same crashed log: wall, user and system seconds per open, and the medians.
Numbers go to stdout; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kafkette.broker.storage import LogConfig, LogManager
from kafkette.broker.storage.manager import CLEAN_SHUTDOWN_MARKER, RECOVERY_POINT_CHECKPOINT
from kafkette.broker.testing import BrokerProcess

TOPIC = "recovery"
VALUE = b"r" * 1000


def fill(bootstrap: str, total_bytes: int, batch_bytes: int) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": batch_bytes,
            "queue.buffering.max.kbytes": 1 << 20,
        }
    )
    count = total_bytes // len(VALUE)
    for _ in range(count):
        while True:
            try:
                producer.produce(TOPIC, VALUE)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(120) == 0
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--batch-bytes", type=int, default=1_000_000, help="the producer's batch.size")
    parser.add_argument("--dir", type=Path, help="default: a temporary directory")
    parser.add_argument("--tree", action="append", help="name=path of a git work tree whose code opens the log")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--open-crashed", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.open_crashed is not None:
        elapsed, cpu = open_crashed(args.open_crashed)
        print(f"wall {elapsed:.3f} {cpu} {sys.modules[LogManager.__module__].__file__}")
        return
    with tempfile.TemporaryDirectory(prefix="kafkette-bench-", dir=args.dir) as tmp:
        data = Path(tmp) / "data"
        broker = BrokerProcess(data, startup_timeout=120).start()
        try:
            started = time.monotonic()
            count = fill(broker.bootstrap, int(args.gib * 2**30), args.batch_bytes)
            fill_s = time.monotonic() - started
            size = sum(path.stat().st_size for path in (data / f"{TOPIC}-0").glob("*.log"))
            print(f"wrote {count} records, {size / 2**20:.0f} MiB of segments in {fill_s:.1f}s")
            broker.kill()
            started = time.monotonic()
            broker.start()
            print(f"restart after kill -9 to ready line: {time.monotonic() - started:.3f}s")
            broker.kill()
        finally:
            if broker.running:
                broker.kill()

        if args.tree:
            trees = [(spec.split("=", 1)[0], Path(spec.split("=", 1)[1]).resolve()) for spec in args.tree]
            compare_trees(trees, data, args.rounds)
        else:
            elapsed, _ = open_crashed(data)
            print(f"full recovery of {size / 2**20:.0f} MiB (no recovery point): {elapsed:.3f}s")


def open_crashed(data: Path) -> tuple[float, str]:
    """Open the logs of ``data`` as after a crash with no recovery point: (seconds, and CPU seconds as text)."""
    (data / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
    (data / CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    logs = LogManager.open([data], LogConfig())
    elapsed = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    # Left open, as a crash leaves it: closing would write a clean-shutdown marker and the recovery point.
    del logs
    return elapsed, f"user {after.ru_utime - before.ru_utime:.3f} sys {after.ru_stime - before.ru_stime:.3f}"


def compare_trees(trees: list[tuple[str, Path]], data: Path, rounds: int) -> None:
    walls: dict[str, list[float]] = {name: [] for name, _ in trees}
    for round_ in range(rounds):
        for name, tree in trees if round_ % 2 == 0 else trees[::-1]:
            line = subprocess.run(
                [sys.executable, "-P", __file__, "--open-crashed", str(data)],
                env={**os.environ, "PYTHONPATH": str(tree / "typecheck")},
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            walls[name].append(float(line.split()[1]))
            print(f"round {round_ + 1} {name}: {line}", flush=True)
    for name, values in walls.items():
        print(f"{name}: median {statistics.median(values):.3f}s over {len(values)} opens")
    first, *others = trees
    for name, _ in others:
        ratio = statistics.median(walls[name]) / statistics.median(walls[first[0]])
        print(f"{name}/{first[0]}: {ratio:.2f}")


if __name__ == "__main__":
    main()
