"""`kafkette reassign`: kafka-reassign-partitions.sh for a local cluster (generate, execute, verify, cancel)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from kafkette.broker.cli.common import CommandError

DESCRIPTION = """\
Move partitions of the cluster in DIR with a plan in the JSON format of Kafka's kafka-reassign-partitions.sh.
--generate prints the current assignment and a proposed one over --broker-list (from the placement planner:
replicas and preferred leaders balanced, racks spread, as few copies as possible), for the topics of
--topics-to-move-json-file or all. --execute starts the moves of --reassignment-json-file (and prints the current
assignment, to roll back with), held to --throttle bytes a second per side when given; --verify tells each
planned partition's state and exits 1 until all are complete, then removes the throttle as Kafka's tool does;
--cancel puts the planned partitions back on their replicas from before the move."""


def _broker_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--broker-list takes comma-separated broker ids, got {text!r}") from None


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "reassign",
        help="move partitions of a local cluster (kafka-reassign-partitions.sh's plans)",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", type=Path, required=True, metavar="DIR", help="the cluster's directory")
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("generate", "execute", "verify", "cancel"):
        action.add_argument(f"--{name}", dest="action", action="store_const", const=name)
    parser.add_argument(
        "--reassignment-json-file", type=Path, metavar="FILE", help="the plan (execute, verify, cancel)"
    )
    parser.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE", help="topics to plan for (generate)")
    parser.add_argument("--broker-list", type=_broker_list, metavar="IDS", help="brokers to place on (generate)")
    parser.add_argument(
        "--throttle", type=int, metavar="BYTES", help="bytes a second each side of a copy may use (execute)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kafkette.operator.local import reassign, runtime
    from kafkette.operator.planning.placement import Move

    try:
        if args.action == "generate":
            return _generate(args)
        if args.reassignment_json_file is None:
            raise CommandError(f"--{args.action} needs --reassignment-json-file")
        plan = reassign.read_plan(args.reassignment_json_file)
        cluster_dir = args.dir.resolve()
        state = runtime.require_state(cluster_dir)
        brokers = reassign.live(cluster_dir, state)
        current = reassign.assignment(reassign.view(state, brokers))
        if args.action == "execute":
            print("Current partition replica assignment\n")
            print(reassign.plan_to_json({tp: current[tp] for tp in plan if tp in current}))
            print("\nSave this to use as the --reassignment-json-file option during rollback")
            if args.throttle is not None:
                moves = [Move(t, p, current[t, p], replicas) for (t, p), replicas in plan.items() if (t, p) in current]
                reassign.set_throttle(state, brokers, moves, args.throttle)
                print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
            reassign.alter(state, brokers, plan)
            print("Successfully started partition reassignments for " + ",".join(f"{t}-{p}" for t, p in sorted(plan)))
            return 0
        if args.action == "cancel":
            cancelled = sorted(tp for tp in reassign.in_flight(state, brokers) if tp in plan)
            reassign.alter(state, brokers, dict.fromkeys(cancelled, None))
            print("Successfully cancelled partition reassignments for " + ",".join(f"{t}-{p}" for t, p in cancelled))
            return 0
        states = reassign.verify(plan, current, reassign.in_flight(state, brokers))
        for line in states.values():
            print(line)
        if not all(line.endswith("is completed.") for line in states.values()):
            return 1
        reassign.clear_throttle(state, brokers, {topic for topic, _ in plan})
        print("Clearing broker-level throttles and topic-level throttles")
        return 0
    except (reassign.ReassignError, runtime.LocalClusterError) as exc:
        raise CommandError(f"reassign: {exc}") from None
    except OSError as exc:
        raise CommandError(f"reassign: no broker answered ({exc})") from None


def _generate(args: argparse.Namespace) -> int:
    from kafkette.operator.local import reassign, runtime
    from kafkette.operator.planning.placement import Broker, plan_placement

    if args.broker_list is None:
        raise CommandError("--generate needs --broker-list")
    cluster_dir = args.dir.resolve()
    state = runtime.require_state(cluster_dir)
    view = reassign.view(state, reassign.live(cluster_dir, state))
    current = reassign.assignment(view)
    if args.topics_to_move_json_file is not None:
        try:
            wanted = {t["topic"] for t in json.loads(args.topics_to_move_json_file.read_text())["topics"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"reassign: not a topics-to-move file ({exc})") from None
        current = {tp: replicas for tp, replicas in current.items() if tp[0] in wanted}
    racks = {b.node_id: b.rack for b in state.brokers}
    members = [Broker(n, racks.get(n)) for n in sorted(set(args.broker_list) | set(racks))]
    drain = [n for n in racks if n not in args.broker_list]
    placement = plan_placement(members, current, drain=drain)
    if placement.refusal is not None:
        raise CommandError(f"reassign: {placement.refusal}")
    print("Current partition replica assignment")
    print(reassign.plan_to_json(current))
    print("\nProposed partition reassignment configuration")
    print(reassign.plan_to_json({(m.topic, m.partition): m.target for m in placement.moves}))
    return 0
