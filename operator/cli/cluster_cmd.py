"""`kafkette up|status|stop|kill|start|down`: a replicated cluster of local broker processes (operator/local)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kafkette.broker.cli.common import CommandError, key_value

if TYPE_CHECKING:
    from kafkette.operator.local.runtime import Status

# The runtime (and through its probe, the protocol codec) is imported by each command when it runs:
# building the `kafkette` parser must stay cheap for every other subcommand.

UP_EPILOG = """\
Layout: broker i listens on 127.0.0.1:PORT+i; the first min(N,3) brokers are controller voters listening on
127.0.0.1:PORT+100+i (a single broker runs without voters); broker i serves Prometheus metrics on
127.0.0.1:PORT+200+i (metrics.port, shown by `status`). Data and broker.log in DIR/broker-<i>, state in
DIR/cluster.json. Laptop defaults (override with --set): broker.session.timeout.ms=3000,
broker.heartbeat.interval.ms=500, controller.quorum.election.timeout.ms=1000,
controller.quorum.fetch.timeout.ms=2000, replica.lag.time.max.ms=5000, replica.fetch.backoff.ms=200,
default.replication.factor and offsets.topic.replication.factor = min(N,3).
On a DIR holding a stopped cluster, `up` starts it again with the same ids, ports and cluster id."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    def with_dir(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        parser.add_argument("--dir", type=Path, required=True, metavar="DIR", help="the cluster's directory")
        return parser

    up = with_dir(
        subparsers.add_parser(
            "up",
            help="start a local cluster of N brokers",
            description="Start N broker processes in the background and wait until all are registered.",
            epilog=UP_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
    )
    up.add_argument("--brokers", type=int, metavar="N", help="number of brokers (required the first time)")
    up.add_argument("--port", type=int, metavar="P", help="first client port (default 9092)")
    up.add_argument("--racks", metavar="A,B,..", help="broker.rack of broker i is the (i mod count)-th name")
    up.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE", help="broker config")
    up.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="wait for readiness (default 60)")
    up.set_defaults(run=_up)

    status = with_dir(subparsers.add_parser("status", help="brokers, controller and partition health"))
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(run=_status)

    stop = with_dir(subparsers.add_parser("stop", help="stop one broker cleanly (SIGTERM, controlled shutdown)"))
    stop.add_argument("broker", type=int, metavar="BROKER_ID")
    stop.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="wait for exit (default 60)")
    stop.set_defaults(run=_stop)

    kill = with_dir(subparsers.add_parser("kill", help="crash one broker (SIGKILL)"))
    kill.add_argument("broker", type=int, metavar="BROKER_ID")
    kill.set_defaults(run=_kill)

    start = with_dir(subparsers.add_parser("start", help="start one stopped broker again"))
    start.add_argument("broker", type=int, metavar="BROKER_ID")
    start.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS", help="wait for readiness (default 60)")
    start.set_defaults(run=_start)

    down = with_dir(subparsers.add_parser("down", help="stop every broker; the data stays unless --delete"))
    down.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="before SIGKILL (default 30)")
    down.add_argument("--delete", action="store_true", help="also remove DIR")
    down.set_defaults(run=_down)


@contextmanager
def _errors() -> Iterator[None]:
    from kafkette.operator.local.plan import PlanError
    from kafkette.operator.local.runtime import LocalClusterError

    try:
        yield
    except (LocalClusterError, PlanError) as exc:
        raise CommandError(str(exc)) from None


def _up(args: argparse.Namespace) -> int:
    from kafkette.operator.local import plan, runtime

    with _errors():
        state = runtime.up(
            args.dir,
            brokers=args.brokers,
            first_port=args.port,
            racks=plan.parse_racks(args.racks),
            settings=args.set,
            timeout=args.timeout,
        )
        print(f"bootstrap.servers={plan.bootstrap_servers(state)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from kafkette.operator.local import runtime

    with _errors():
        status = runtime.status(args.dir)
    print(json.dumps(status_json(status), indent=2) if args.json else "\n".join(status_lines(status)))
    return 0


def _stop(args: argparse.Namespace) -> int:
    return _signal_broker(args, "stopped", lambda runtime: runtime.stop(args.dir, args.broker, args.timeout))


def _kill(args: argparse.Namespace) -> int:
    return _signal_broker(args, "killed", lambda runtime: runtime.kill(args.dir, args.broker))


def _signal_broker(args: argparse.Namespace, done: str, signal: Callable[[ModuleType], bool]) -> int:
    from kafkette.operator.local import runtime

    with _errors():
        signalled = signal(runtime)
    print(f"broker {args.broker} {done if signalled else 'was not running'}")
    return 0


def _start(args: argparse.Namespace) -> int:
    from kafkette.operator.local import runtime

    with _errors():
        state = runtime.start(args.dir, args.broker, args.timeout)
    print(f"broker {args.broker} started as pid {state.broker(args.broker).pid}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from kafkette.operator.local import runtime

    with _errors():
        killed = runtime.down(args.dir, args.timeout, args.delete)
    if killed:
        print(f"brokers {', '.join(map(str, killed))} did not stop within {args.timeout:g} s and were killed")
    print("cluster stopped" + (f"; {args.dir} deleted" if args.delete else ""))
    return 0


# --- rendering (pure) -----------------------------------------------------------------------------------


def status_json(status: Status) -> dict[str, Any]:
    from kafkette.operator.local import plan

    view = status.view
    partitions = view.partitions if view else ()
    return {
        "cluster_id": status.cluster_id,
        "bootstrap_servers": status.bootstrap,
        "brokers": [
            {
                "id": b.node_id,
                "pid": b.pid,
                "alive": b.alive,
                "rack": b.rack,
                "port": b.port,
                "voter": b.voter,
                "metrics_port": b.metrics_port,
            }
            for b in status.brokers
        ],
        "registered": list(view.brokers) if view else None,
        "controller": view.controller_id if view else None,
        "answered_by": status.answered_by,
        "under_replicated": [_partition_json(p) for p in plan.under_replicated(partitions)],
        "offline": [_partition_json(p) for p in plan.offline(partitions)],
        "partitions": len(partitions),
    }


def _partition_json(p: Any) -> dict[str, Any]:
    return {"topic": p.topic, "partition": p.partition, "leader": p.leader, "replicas": p.replicas, "isr": p.isr}


def status_lines(status: Status) -> list[str]:
    from kafkette.operator.local import plan

    view = status.view
    registered = set(view.brokers) if view else set()
    rows = [("ID", "PID", "ALIVE", "REGISTERED", "ROLE", "RACK", "PORT", "METRICS")]
    for b in status.brokers:
        rows.append(
            (
                str(b.node_id),
                str(b.pid or "-"),
                "yes" if b.alive else "no",
                ("yes" if b.node_id in registered else "no") if view else "?",
                # A lone broker is its own quorum of one, though it has no voter entry.
                "broker,controller" if b.voter or len(status.brokers) == 1 else "broker",
                b.rack or "-",
                str(b.port),
                str(b.metrics_port),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [f"cluster {status.cluster_id}  bootstrap.servers={status.bootstrap}", ""]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append("")
    if view is None:
        lines.append("no broker answered Metadata: controller and partitions unknown")
        return lines
    controller = str(view.controller_id) if view.controller_id >= 0 else "none"
    lines.append(f"active controller: {controller} (as broker {status.answered_by} sees it)")
    under, down = plan.under_replicated(view.partitions), plan.offline(view.partitions)
    lines.append(f"partitions: {len(view.partitions)}, under-replicated: {len(under)}, offline: {len(down)}")
    for title, items in (("under-replicated", under), ("offline", down)):
        for p in items:
            replicas, isr = ",".join(map(str, p.replicas)), ",".join(map(str, p.isr))
            lines.append(f"  {title}: {p.topic}-{p.partition} leader {p.leader} replicas [{replicas}] isr [{isr}]")
    return lines
