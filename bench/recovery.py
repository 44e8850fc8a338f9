"""How long a broker takes to come back after kill -9 with a large log (default 1 GiB).

    python -P bench/recovery.py [--gib 1.0] [--dir DIR]

Produces through confluent-kafka into a broker process, SIGKILLs it, then measures:
  * restart: from launching the broker again to its ready line (what an operator sees);
  * worst case: opening the logs with the recovery-point checkpoint removed, so every
    batch of every segment is validated (CRC-32C) and the indexes rebuilt.
Numbers go to stdout; nothing here asserts on time.
"""

from __future__ import annotations

import argparse
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
    args = parser.parse_args()
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

        (data / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
        (data / CLEAN_SHUTDOWN_MARKER).unlink(missing_ok=True)
        started = time.monotonic()
        logs = LogManager.open([data], LogConfig())
        elapsed = time.monotonic() - started
        print(f"full recovery of {size / 2**20:.0f} MiB (no recovery point): {elapsed:.3f}s")
        logs.close()


if __name__ == "__main__":
    main()
