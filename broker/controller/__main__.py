"""A standalone quorum voter: ``python -m kafkette.broker.controller --node-id 0 --voters 0@host:port,... --dir D``.

For tests and experiments until the quorum runs inside the broker. With
``--write-every-ms`` the active controller appends a ConfigRecord now and then,
so a cluster of runners has something to replicate; every runner writes what it
applied to ``<dir>/status.json`` (atomically) so a test can compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path

from kafkette.broker.config import parse_voters
from kafkette.broker.controller.image import ConfigResourceType
from kafkette.broker.controller.quorum import NotLeaderError, QuorumController
from kafkette.broker.controller.raft import Timing
from kafkette.broker.controller.records.config_record import ConfigRecord
from kafkette.broker.storage.files import atomic_write

# The runner's records configure a topic nobody creates.
STATUS_EVERY_S = 0.1


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kafkette.broker.controller")
    p.add_argument("--node-id", type=int, required=True)
    p.add_argument("--voters", required=True, help="controller.quorum.voters: 0@host:port,1@host:port,...")
    p.add_argument("--dir", type=Path, required=True)
    p.add_argument("--cluster-id", default="kafkette")
    p.add_argument("--election-timeout-ms", type=int, default=1000)
    p.add_argument("--fetch-timeout-ms", type=int, default=2000)
    p.add_argument("--snapshot-every", type=int, default=10_000, help="records between snapshots")
    p.add_argument("--write-every-ms", type=int, default=0, help="as leader, append a record this often")
    return p.parse_args(argv)


def _status(controller: QuorumController, commit_ms: list[float]) -> dict[str, object]:
    raft = controller.raft
    configs = controller.image.topic_configs("runner")
    return {
        "node_id": controller.node_id,
        "role": raft.role.value,
        "epoch": raft.epoch,
        "leader_id": raft.leader_id,
        "high_watermark": raft.high_watermark,
        "applied": controller.applied,
        "log_start_offset": controller.log.start_offset,
        "log_end_offset": controller.log.end_offset,
        "snapshot": None if (s := controller.log.latest_snapshot()) is None else s.offset,
        "records": sorted(configs, key=lambda name: int(name[1:])),
        "commit_ms": commit_ms[-200:],
        "time": time.time(),
    }


async def _writer(controller: QuorumController, every_ms: int, commit_ms: list[float]) -> None:
    sequence = 0
    while True:
        await asyncio.sleep(every_ms / 1000)
        if not controller.raft.is_leader:
            continue
        record = ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="runner",
            name=f"r{time.time_ns()}",
            value=str(sequence),
        )
        started = time.perf_counter()
        with contextlib.suppress(NotLeaderError):
            await controller.propose([record])
            commit_ms.append(round((time.perf_counter() - started) * 1000, 3))
            sequence += 1


async def _main(args: argparse.Namespace) -> None:
    timing = Timing(
        election_timeout_ms=args.election_timeout_ms, fetch_timeout_ms=args.fetch_timeout_ms, pre_vote=False
    )
    args.dir.mkdir(parents=True, exist_ok=True)
    voters = {v.node_id: v for v in parse_voters(args.voters)}
    controller = QuorumController(args.node_id, voters, args.dir, args.cluster_id, timing, args.snapshot_every)
    await controller.start()
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    commit_ms: list[float] = []
    tasks = [loop.create_task(_writer(controller, args.write_every_ms, commit_ms))] if args.write_every_ms else []
    status_path = args.dir / "status.json"
    while not stop.is_set():
        atomic_write(status_path, json.dumps(_status(controller, commit_ms)).encode())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), STATUS_EVERY_S)
    for task in tasks:
        task.cancel()
    await controller.stop()


def main(argv: list[str]) -> int:
    asyncio.run(_main(_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
