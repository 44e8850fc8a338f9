"""`kafkette pipeline`: the example Spark pipeline on a local standalone cluster, its executors scaled from lag."""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kafkette.broker.cli.common import CommandError

if TYPE_CHECKING:
    from kafkette.operator.local.spark_job import RunningJob

DESCRIPTION = """\
Run the example pipeline (kafkette.pipeline.jobs.orders: spend per user in event-time windows) as a Spark
application on a local standalone cluster: a master and one-executor workers on 127.0.0.1, the driver with its
agent (spark.kafkette.agent.port). With --autoscale, a loop samples the group's lag each --interval seconds,
asks the executor autoscaler for a total and sets it through the agent: the running application gains and
loses executors, its application id and query id never change. Without --bootstrap, a one-broker local cluster
is started in DIR/cluster. Produce orders with --orders/--rate, or with
`python -m kafkette.pipeline.jobs.order_events --bootstrap HOST:PORT`. Ctrl-C stops everything."""

INPUT, OUTPUT = "orders", "spend-per-user"
PARTITIONS = 6
ADMIN_TIMEOUT = 10.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "pipeline",
        help="run the example Spark pipeline on a local standalone cluster, scaled from lag",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dir", type=Path, default=Path(".run/pipeline"), metavar="DIR", help="logs and state")
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="an existing cluster (default: start one in DIR)")
    parser.add_argument("--workers", type=int, default=2, metavar="N", help="standalone workers, one executor each")
    parser.add_argument("--executor-memory", default="512m", metavar="SIZE", help="spark.executor.memory")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=5000, metavar="N")
    parser.add_argument("--autoscale", action="store_true", help="scale executors from the group's lag")
    parser.add_argument("--min-executors", type=int, default=1, metavar="N")
    parser.add_argument("--max-executors", type=int, metavar="N", help="default: --workers")
    parser.add_argument("--lag-target-per-executor", type=int, default=5000, metavar="RECORDS")
    parser.add_argument("--scale-up-window-seconds", type=float, default=0.0, metavar="S")
    parser.add_argument("--scale-down-window-seconds", type=float, default=30.0, metavar="S")
    parser.add_argument("--cooldown-seconds", type=float, default=10.0, metavar="S")
    parser.add_argument("--interval", type=float, default=2.0, metavar="S", help="seconds between lag samples")
    parser.add_argument("--orders", type=int, default=0, metavar="N", help="produce N orders at the start")
    parser.add_argument("--rate", type=float, metavar="PER_S", help="orders per second (default: at once)")
    parser.add_argument("--seconds", type=float, metavar="N", help="stop after N seconds (default: on Ctrl-C)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kafkette.operator.local import runtime

    maximum = args.max_executors or args.workers
    if not 0 < args.min_executors <= maximum <= args.workers:
        raise CommandError(
            f"need 0 < --min-executors <= --max-executors <= --workers, got {args.min_executors}, "
            f"{maximum}, {args.workers}"
        )
    directory = args.dir.resolve()
    cluster_dir = directory / "cluster"
    try:
        if args.bootstrap:
            bootstrap = args.bootstrap
        else:
            bootstrap = _start_cluster(cluster_dir)
        return _run_pipeline(args, directory, bootstrap, maximum)
    except runtime.LocalClusterError as exc:
        raise CommandError(str(exc)) from exc
    finally:
        if not args.bootstrap and runtime.load_state(cluster_dir) is not None:
            runtime.down(cluster_dir)


def _start_cluster(cluster_dir: Path) -> str:
    from kafkette.operator.local import plan, runtime

    first_port = None if runtime.load_state(cluster_dir) else runtime.first_free_port(1)
    state = runtime.up(cluster_dir, brokers=1, first_port=first_port)
    return plan.bootstrap_servers(state)


def _run_pipeline(args: argparse.Namespace, directory: Path, bootstrap: str, maximum: int) -> int:
    from kafkette.broker.cli import admin
    from kafkette.operator.admin import AdminError
    from kafkette.operator.kube.spark_agent import AgentRefused, AgentUnreachable
    from kafkette.operator.local.spark import StandaloneError
    from kafkette.operator.local.spark_job import JobError, JobSettings, standalone_job

    client = admin.connect(bootstrap)
    for topic in (INPUT, OUTPUT):
        admin.create_topic(
            client,
            topic,
            partitions=PARTITIONS,
            replication_factor=1,
            configs={},
            timeout=ADMIN_TIMEOUT,
            if_not_exists=True,
        )
    settings = JobSettings(
        bootstrap,
        INPUT,
        OUTPUT,
        executors=args.min_executors,
        executor_memory=args.executor_memory,
        max_executors=maximum,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )
    print(f"starting {args.workers} Spark workers and the driver (logs in {directory})", flush=True)
    try:
        with standalone_job(directory, settings, args.workers) as job:
            print(
                f"application {job.first.application_id}, query {job.first.queries[0].id}, agent {job.agent_url}",
                flush=True,
            )
            if args.orders:
                _produce_in_background(bootstrap, args.orders, args.rate)
            asyncio.run(_watch(args, job, bootstrap, maximum))
            last = job.state()
    except (StandaloneError, JobError, AgentRefused, AgentUnreachable, AdminError) as exc:
        raise CommandError(str(exc)) from exc
    same = (last.application_id, last.queries) == (job.first.application_id, job.first.queries)
    print(
        f"stopped: application and query {'unchanged' if same else 'CHANGED'}, {last.executors} executors", flush=True
    )
    return 0 if same else 1


def _produce_in_background(bootstrap: str, count: int, rate: float | None) -> None:
    from kafkette.pipeline.jobs import order_events

    spacing = int(1000 / rate) if rate else 1
    orders = order_events.events(
        seed=int(time.time()), count=count, start_ms=int(time.time() * 1000), spacing_ms=spacing
    )
    threading.Thread(target=order_events.produce, args=(bootstrap, INPUT, orders, rate), daemon=True).start()


async def _watch(args: argparse.Namespace, job: RunningJob, bootstrap: str, maximum: int) -> None:
    """The autoscale loop until Ctrl-C or --seconds; without --autoscale it only reports what it would do."""
    from kafkette.operator.admin import Admin
    from kafkette.operator.cli.demo_cmd import StopSignal
    from kafkette.operator.local.autoscale import AutoscaleLoop
    from kafkette.operator.planning.autoscale import AutoscaleSpec
    from kafkette.pipeline.jobs.orders import QUERY_NAME

    spec = AutoscaleSpec(
        min_executors=args.min_executors,
        max_executors=maximum,
        lag_target_per_executor=args.lag_target_per_executor,
        scale_up_window_seconds=args.scale_up_window_seconds,
        scale_down_window_seconds=args.scale_down_window_seconds,
        cooldown_seconds=args.cooldown_seconds,
    )
    loop = AutoscaleLoop(Admin(bootstrap), QUERY_NAME, frozenset({INPUT}), job.agent_url, spec, apply=args.autoscale)
    stop = asyncio.Event()
    deadline = None if args.seconds is None else time.monotonic() + args.seconds
    with StopSignal() as signalled:
        await asyncio.gather(loop.run(stop, args.interval, _report), _stop_on(signalled, deadline, stop))


def _report(line: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


async def _stop_on(signalled: threading.Event, deadline: float | None, stop: asyncio.Event) -> None:
    while not signalled.is_set() and (deadline is None or time.monotonic() < deadline):
        await asyncio.sleep(0.2)
    stop.set()
