"""`kafkette roll`: restart every broker of a local cluster once, never below min.insync.replicas."""

from __future__ import annotations

import argparse
from pathlib import Path

from kafkette.broker.cli.common import CommandError

DESCRIPTION = """\
Restart each broker of the cluster in DIR once (SIGTERM: a controlled shutdown, then start), one at a time: brokers
that are not Ready first, the active controller last, and a broker only when every partition whose ISR holds it keeps
min.insync.replicas in-sync replicas without it. After each restart the roll waits until the broker is back in every
ISR it left; at the end leaders go back to their preferred replicas. A broker that is down is waited for, never
started. Exits 0 when every broker restarted and rejoined, 1 with the reason when the roll cannot go on."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "roll",
        help="rolling restart of a local cluster, ISR-safe",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", type=Path, required=True, metavar="DIR", help="the cluster's directory")
    parser.add_argument("--dry-run", action="store_true", help="print the plan with its reasons, restart nothing")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="longest wait for one step: a broker to stop, start and rejoin its ISRs, or a blocked restart (120)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kafkette.operator.local import roll, runtime
    from kafkette.operator.planning.roll import Stalled

    try:
        if args.dry_run:
            actions = roll.dry_run(args.dir, args.timeout)
            for number, action in enumerate(actions, 1):
                print(f"{number}. {roll.describe(action)}")
            return 1 if isinstance(actions[-1], Stalled) else 0
        result = roll.roll(args.dir, args.timeout, lambda line: print(line, flush=True))
    except (runtime.LocalClusterError, roll.RollStalled) as exc:
        raise CommandError(f"roll stalled: {exc}") from None
    except OSError as exc:
        raise CommandError(f"roll stopped: no broker answered ({exc})") from None
    print(f"restarted brokers {', '.join(map(str, result.restarted))}")
    return 0
