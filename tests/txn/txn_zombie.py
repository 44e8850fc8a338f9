"""A transactional producer that writes inside a transaction, says so, and then hangs until killed.

Run as ``python txn_zombie.py BOOTSTRAP TRANSACTIONAL_ID TOPIC TIMEOUT_MS``; prints ``open`` once its records
are on the broker, with the transaction still open.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Producer


def main() -> None:
    bootstrap, transactional_id, topic, timeout_ms = sys.argv[1:5]
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": int(timeout_ms),
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce(topic, key=b"zombie", value=b"zombie-%d" % i)
    producer.flush(30)
    print("open", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
