"""Record batches for the broker-level tests."""

from __future__ import annotations

import time

from kafkette.broker.protocol.records import Header, Record, encode_batch


def make_batch(count: int = 3, *, key_prefix: str = "k", **batch_args: int) -> bytes:
    now = int(time.time() * 1000)
    records = [
        Record(
            offset=i,
            timestamp=now + i,
            key=f"{key_prefix}{i}".encode(),
            value=f"value-{i}".encode(),
            headers=[Header("h", b"v")],
        )
        for i in range(count)
    ]
    return encode_batch(records, **batch_args)
