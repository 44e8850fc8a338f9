"""`kafkette scale` and `kafkette rebalance`: grow, shrink or rebalance a local cluster with the placement planner."""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from kafkette.broker.cli.common import CommandError

SCALE = """\
Make the cluster in DIR run N brokers. Scaling up starts the new brokers, moves partitions onto them in batches
(replicas and preferred leaders balanced within one per broker, racks spread, as few copies as possible) and
elects the preferred leaders. Scaling down first drains the highest-numbered brokers (their replicas move away
and their leadership with them) and stops them only then. A scale-down the planner refuses (a topic's replication
factor above N, or fewer than a majority of the controller voters left) changes nothing and exits 1 with the
reason. The controller voters stay as the cluster was first started: new brokers join as observers."""

REBALANCE = """\
Move partitions of the cluster in DIR until replicas and preferred leaders are balanced within one per broker
and racks are spread, copying as little as possible, then elect the preferred leaders."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scale = _parser(subparsers, "scale", "change the number of brokers of a local cluster, moving partitions", SCALE)
    scale.add_argument("brokers", type=int, metavar="N", help="the number of brokers wanted")
    _parser(subparsers, "rebalance", "balance partitions and leaders over the brokers of a local cluster", REBALANCE)


def _parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, description: str
) -> argparse.ArgumentParser:
    from kafkette.operator.local.scale import DEFAULT_MAX_IN_FLIGHT

    parser = subparsers.add_parser(
        name, help=summary, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, required=True, metavar="DIR", help="the cluster's directory")
    parser.add_argument("--dry-run", action="store_true", help="print the planned moves, change nothing")
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=DEFAULT_MAX_IN_FLIGHT,
        metavar="K",
        help=f"partitions moved at the same time ({DEFAULT_MAX_IN_FLIGHT})",
    )
    parser.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES",
        help="bytes a second each side of a copy may use while partitions move (Kafka's --throttle); none by default",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="longest wait for a broker to start or stop, or for a batch of moves to make progress (120)",
    )
    parser.set_defaults(run=run, brokers=None)
    return parser


def run(args: argparse.Namespace) -> int:
    from kafkette.operator.local import plan, reassign, runtime, scale

    verb = "scale" if args.brokers is not None else "rebalance"
    try:
        brokers = args.brokers if args.brokers is not None else len(runtime.require_state(args.dir).brokers)
        if args.dry_run:
            planned = scale.placement(args.dir, brokers)
            for move in planned.moves:
                print(scale.describe(move))
            print(f"{len(planned.moves)} partitions to move, {sum(len(m.adding) for m in planned.moves)} copies")
            return 0
        result = scale.scale(
            args.dir, brokers, args.timeout, partial(print, flush=True), args.max_in_flight, args.throttle
        )
    except scale.ScaleRefused as exc:
        raise CommandError(f"{verb} refused: {exc}") from None
    except (runtime.LocalClusterError, reassign.ReassignError, plan.PlanError) as exc:
        raise CommandError(f"{verb} stopped: {exc}") from None
    except OSError as exc:
        raise CommandError(f"{verb} stopped: no broker answered ({exc})") from None
    started = f"started {list(result.started)}, " if result.started else ""
    stopped = f"stopped {list(result.stopped)}, " if result.stopped else ""
    print(f"{started}{stopped}{result.moves} partitions moved, {result.elected} leaders elected")
    return 0
