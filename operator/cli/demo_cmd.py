"""`kafkette demo` (`make run`): a local cluster, a replicated topic, traffic through it, a progress line a second."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType

from confluent_kafka import KafkaException

from kafkette.broker.cli import admin
from kafkette.broker.cli.common import CommandError
from kafkette.operator.cli.demo_traffic import ConsumerLoop, LatencyHistogram, ProducerLoop

# Returns why the cluster failed (a broker died), or None while it runs.
ClusterCheck = Callable[[], str | None]

TOPIC = "demo"
PARTITIONS = 3
READY_TIMEOUT = 60.0
ADMIN_TIMEOUT = 10.0
DRAIN_TIMEOUT = 10.0
BROKER_STOP_TIMEOUT = 15.0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="start a local cluster and stream records through it",
        description=f"Start a local cluster (`kafkette up`), create topic {TOPIC!r} ({PARTITIONS} partitions, "
        "replicated on up to 3 brokers), produce with acks=all and consume through it, and print progress each "
        "second. Ctrl-C stops everything and prints a summary.",
    )
    parser.add_argument("--data-dir", type=Path, default=Path(".run/demo"), metavar="DIR")
    parser.add_argument("--brokers", type=int, default=3, metavar="N", help="brokers in the cluster (default 3)")
    parser.add_argument("--seconds", type=float, metavar="N", help="stop after N seconds (default: on Ctrl-C)")
    parser.add_argument("--rate", type=int, default=2000, metavar="MSGS", help="records produced per second")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kafkette.operator.local import plan, runtime

    cluster_dir = args.data_dir.resolve()
    print(f"starting {args.brokers} brokers (data and logs in {args.data_dir})", flush=True)
    try:
        first_port = None if runtime.load_state(cluster_dir) else runtime.first_free_port(args.brokers)
        state = runtime.up(cluster_dir, brokers=args.brokers, first_port=first_port, timeout=READY_TIMEOUT)
        bootstrap = plan.bootstrap_servers(state)
        print(f"cluster ready on {bootstrap}", flush=True)
        _ensure_topic(bootstrap, min(args.brokers, 3))
        clean = _stream(bootstrap, args.rate, args.seconds, lambda: _dead_brokers(runtime, cluster_dir))
    except runtime.LocalClusterError as exc:
        raise CommandError(str(exc)) from exc
    except KafkaException as exc:
        raise CommandError(f"kafka client: {exc.args[0].str()}") from exc
    finally:
        stragglers = runtime.down(cluster_dir, timeout=BROKER_STOP_TIMEOUT)
    if stragglers:
        raise CommandError(f"brokers {stragglers} had to be killed; see their logs in {args.data_dir}")
    print("cluster stopped cleanly", flush=True)
    return 0 if clean else 1


def _dead_brokers(runtime: ModuleType, cluster_dir: Path) -> str | None:
    state = runtime.require_state(cluster_dir)
    dead = sorted(set(state.ids) - set(runtime.alive_ids(cluster_dir, state)))
    return f"brokers {dead} exited; see {cluster_dir}/broker-N/broker.log" if dead else None


def _ensure_topic(bootstrap: str, replication_factor: int) -> None:
    client = admin.connect(bootstrap)
    created = admin.create_topic(
        client,
        TOPIC,
        partitions=PARTITIONS,
        replication_factor=replication_factor,
        configs={"min.insync.replicas": str(min(2, replication_factor))},
        timeout=ADMIN_TIMEOUT,
        if_not_exists=True,
    )
    state = "created" if created else "exists"
    print(f"topic {TOPIC!r} {state} ({PARTITIONS} partitions, replication factor {replication_factor})", flush=True)


class StopSignal:
    """Turns SIGINT and SIGTERM into an event while installed, so that shutdown runs in order."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._previous: dict[int, object] = {}

    def __enter__(self) -> threading.Event:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self.event

    def __exit__(self, *_exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.event.set()


def _stream(bootstrap: str, rate: int, seconds: float | None, cluster_failure: ClusterCheck) -> bool:
    """Run the traffic until a signal, the deadline or a failure; True if every record made it through."""
    consumer = ConsumerLoop(bootstrap, TOPIC, PARTITIONS)
    consumer.assign_at_end(ADMIN_TIMEOUT)
    producer = ProducerLoop(bootstrap, TOPIC, rate, flush_timeout=DRAIN_TIMEOUT)
    total = LatencyHistogram()
    started = time.monotonic()
    consumer.start()
    producer.start()
    with StopSignal() as stop:
        failure = _report_progress(producer, consumer, cluster_failure, total, started, seconds, stop)
        # Stop in order: the producer flushes, the consumer reads what was acknowledged, then the cluster.
        producer.stop()
        producer.join()
        consumer.drain(producer.acked, DRAIN_TIMEOUT)
        consumer.join()
    total.merge(consumer.latency.take())
    failure = failure or _failure(producer, consumer, cluster_failure)
    return _summary(producer, consumer, total, time.monotonic() - started, failure)


def _report_progress(
    producer: ProducerLoop,
    consumer: ConsumerLoop,
    cluster_failure: ClusterCheck,
    total: LatencyHistogram,
    started: float,
    seconds: float | None,
    stop: threading.Event,
) -> str | None:
    """Print a line a second until stopped or out of time; the failure that ended it, if one did."""
    last_consumed = 0
    elapsed = 0
    while not stop.wait(max(0.0, started + elapsed + 1 - time.monotonic())):
        elapsed += 1
        interval = consumer.latency.take()
        total.merge(interval)
        consumed = consumer.consumed
        print(
            f"t={elapsed}s produced={producer.produced} acked={producer.acked} consumed={consumed} "
            f"rate={consumed - last_consumed}/s p50={_millis(interval.percentile(0.5))}",
            flush=True,
        )
        last_consumed = consumed
        failure = _failure(producer, consumer, cluster_failure)
        if failure is not None or (seconds is not None and elapsed >= seconds):
            return failure
    return None


def _failure(producer: ProducerLoop, consumer: ConsumerLoop, cluster_failure: ClusterCheck) -> str | None:
    if (dead := cluster_failure()) is not None:
        return dead
    for worker in (producer, consumer):
        if worker.error is not None:
            return f"{worker.name} failed: {worker.error}"
    return None


def _summary(
    producer: ProducerLoop,
    consumer: ConsumerLoop,
    latency: LatencyHistogram,
    elapsed: float,
    failure: str | None,
) -> bool:
    print(
        f"summary: {elapsed:.1f}s produced={producer.produced} acked={producer.acked} "
        f"failed={producer.failed} consumed={consumer.consumed} avg_rate={consumer.consumed / elapsed:.0f}/s "
        f"p50={_millis(latency.percentile(0.5))} p99={_millis(latency.percentile(0.99))}",
        flush=True,
    )
    problems = [failure] if failure else []
    if producer.failed:
        problems.append(f"{producer.failed} records were not acknowledged: {producer.last_failure}")
    if consumer.consumed != producer.acked:
        problems.append(f"consumed {consumer.consumed} records but {producer.acked} were acknowledged")
    for problem in problems:
        print(f"problem: {problem}", flush=True)
    return not problems


def _millis(value: int | None) -> str:
    return "-" if value is None else f"{value}ms"
