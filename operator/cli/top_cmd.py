"""`kafkette top`: a live terminal view of brokers, partitions and group lag, read from the brokers' metrics.

The brokers come from a local cluster's directory (`--dir`, each broker's `metrics.port`) or from
`--metrics HOST:PORT,...` (pods: their 9308). `--once` prints one view and exits (scripts, tests).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kafkette.broker.cli.common import CommandError, host_port

if TYPE_CHECKING:
    from kafkette.operator.cli.top_view import Scrapes

CLEAR = "\x1b[H\x1b[2J"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    top = subparsers.add_parser(
        "top",
        help="live view of brokers, partitions and group lag (from the brokers' metrics)",
        description="Scrape every broker's metrics endpoint every INTERVAL seconds and show the cluster.",
    )
    where = top.add_mutually_exclusive_group(required=True)
    where.add_argument("--dir", type=Path, metavar="DIR", help="a local cluster's directory (kafkette up)")
    where.add_argument(
        "--metrics",
        type=lambda text: [host_port(part) for part in text.split(",")],
        metavar="HOST:PORT,..",
        help="the brokers' metrics endpoints",
    )
    top.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="between refreshes (default 2)")
    top.add_argument("--once", action="store_true", help="print one view (rates over one interval) and exit")
    top.add_argument("--internal", action="store_true", help="also list internal topics (__consumer_offsets)")
    top.set_defaults(run=_top)


def _endpoints(args: argparse.Namespace) -> dict[str, tuple[str, int]]:
    if args.metrics is not None:
        return {text: (text.rsplit(":", 1)[0], int(text.rsplit(":", 1)[1])) for text in args.metrics}
    from kafkette.operator.local import runtime

    state = runtime.load_state(args.dir)
    if state is None:
        raise CommandError(f"no cluster in {args.dir} (kafkette up --dir {args.dir} starts one)")
    return {f"broker {b.node_id}": (state.host, b.metrics_port) for b in state.brokers}


def _scrape_all(endpoints: dict[str, tuple[str, int]], timeout: float) -> Scrapes:
    from kafkette.broker.metrics.scrape import Scrape, scrape

    answers: dict[str, Scrape | str] = {}
    for name, (host, port) in endpoints.items():
        try:
            answers[name] = scrape(host, port, timeout)
        except OSError as exc:
            answers[name] = str(getattr(exc, "reason", exc))
    return answers


def _top(args: argparse.Namespace) -> int:
    if args.interval <= 0:
        raise CommandError("--interval must be positive")
    endpoints = _endpoints(args)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how the live view ends
        _show(endpoints, args.interval, args.once, args.internal)
    return 0


def _show(endpoints: dict[str, tuple[str, int]], interval: float, once: bool, internal: bool) -> None:
    from kafkette.operator.cli.top_view import render

    timeout = max(min(interval, 5.0), 1.0)
    before = _scrape_all(endpoints, timeout)
    taken = time.monotonic()
    while True:
        time.sleep(interval)
        now = _scrape_all(endpoints, timeout)
        at = time.monotonic()
        lines = render(now, before, at - taken, internal)
        if once:
            print("\n".join(lines))
            return
        sys.stdout.write(
            CLEAR + time.strftime("%H:%M:%S") + "  kafkette top (Ctrl-C quits)\n\n" + "\n".join(lines) + "\n"
        )
        sys.stdout.flush()
        before, taken = now, at
