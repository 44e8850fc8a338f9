"""The I/O shell of the local runtime: start, signal and watch broker processes; keep DIR/cluster.json.

Brokers are started detached (their own session, output to DIR/broker-<id>/broker.log) so that they outlive
the `kafkette up` that started them; later commands find them again by the pids saved in cluster.json,
checked against /proc so that a reused pid is never mistaken for a broker.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kafkette.broker.process import port_free, stable_ports
from kafkette.broker.storage.files import atomic_write
from kafkette.operator.local import plan
from kafkette.operator.local.plan import ClusterState, ClusterView
from kafkette.operator.local.probe import cluster_view, request_once
from kafkette.operator.planning.voters import voter_count

if TYPE_CHECKING:
    from kafkette.broker.protocol.types import Message

POLL_SECONDS = 0.1
PROBE_TIMEOUT = 2.0


class LocalClusterError(RuntimeError):
    """A runtime operation failed; the message says what and, for brokers, ends with their log."""


# --- state ----------------------------------------------------------------------------------------------


def load_state(cluster_dir: Path) -> ClusterState | None:
    path = cluster_dir / plan.STATE_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return plan.state_from_json(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise LocalClusterError(f"{path} is not a cluster state file: {exc}") from exc


def require_state(cluster_dir: Path) -> ClusterState:
    state = load_state(cluster_dir)
    if state is None:
        raise LocalClusterError(f"no cluster in {cluster_dir} (no {plan.STATE_FILE}); start one with `kafkette up`")
    return state


def save_state(cluster_dir: Path, state: ClusterState) -> None:
    atomic_write(cluster_dir / plan.STATE_FILE, plan.state_to_json(state))


def log_path(cluster_dir: Path, node_id: int) -> Path:
    return cluster_dir / plan.broker_dir_name(node_id) / plan.BROKER_LOG


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_bytes()[-64 * 1024 :].decode(errors="replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


# --- processes ------------------------------------------------------------------------------------------


def _our_child(pid: int) -> bool | None:
    """Whether `pid` is a child of this process that still runs (an exited one is reaped now); None when
    it is not our child."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return done != pid


def broker_alive(cluster_dir: Path, node_id: int, pid: int | None) -> bool:
    """The pid runs (or is stopped) and is this broker: our own child, or a process whose command line
    (in /proc) names its data directory."""
    if pid is None:
        return False
    child = _our_child(pid)
    if child is not None:
        # Trusted as is: just after exec, /proc may not show the new command line yet.
        return child
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        status = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state letter follows the command name in parentheses, which may itself contain spaces.
    if status[status.rfind(b")") + 2 :][:1] in (b"Z", b"X"):
        return False
    data_dir = str(cluster_dir.resolve() / plan.broker_dir_name(node_id)).encode()
    return b"kafkette.broker" in cmdline and data_dir in cmdline


def check_ports(state: ClusterState, node_ids: Iterable[int]) -> None:
    busy = [item for item in plan.required_ports(state, node_ids) if not port_free(state.host_of(item[0]), item[2])]
    if busy:
        raise LocalClusterError(plan.busy_ports_message(busy))


def launch(cluster_dir: Path, state: ClusterState, node_id: int) -> ClusterState:
    """Start one broker detached and save its pid; the caller has checked that it is not running."""
    cluster_dir = cluster_dir.resolve()
    check_ports(state, [node_id])
    broker_dir = cluster_dir / plan.broker_dir_name(node_id)
    broker_dir.mkdir(parents=True, exist_ok=True)
    argv = plan.broker_argv(state, node_id, cluster_dir, sys.executable)
    with log_path(cluster_dir, node_id).open("ab") as log:
        log.write(f"--- kafkette local runtime: starting broker {node_id} at {time.ctime()}\n".encode())
        log.flush()
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, cwd=cluster_dir
        )
    state = state.with_pid(node_id, process.pid)
    save_state(cluster_dir, state)
    return state


def signal_broker(cluster_dir: Path, state: ClusterState, node_id: int, signum: signal.Signals) -> bool:
    """Send `signum` to the broker if it runs; False when it was not running."""
    pid = state.broker(node_id).pid
    if pid is None or not broker_alive(cluster_dir, node_id, pid):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)
    return True


def wait_exit(cluster_dir: Path, node_id: int, pid: int | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while broker_alive(cluster_dir, node_id, pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS / 2)
    return True


def views(state: ClusterState, node_ids: Iterable[int], timeout: float = PROBE_TIMEOUT) -> dict[int, ClusterView | str]:
    """Each broker's Metadata answer, or why there is none."""
    answers: dict[int, ClusterView | str] = {}
    for node_id in node_ids:
        try:
            answers[node_id] = cluster_view(state.host_of(node_id), state.broker(node_id).port, timeout)
        except (OSError, ValueError) as exc:
            answers[node_id] = f"no Metadata answer ({exc.__class__.__name__}: {exc})"
    return answers


def ask(state: ClusterState, node_ids: Iterable[int], request: Message, version: int, client_id: str) -> Message:
    """The first answer among the brokers `node_ids` (admin requests: any broker forwards them to the active
    controller); OSError when none answers."""
    error: OSError = OSError("no broker to ask")
    for node_id in node_ids:
        try:
            host, port = state.host_of(node_id), state.broker(node_id).port
            return request_once(host, port, request, version, PROBE_TIMEOUT, client_id)
        except OSError as exc:
            error = exc
    raise error


def wait_ready(
    cluster_dir: Path,
    state: ClusterState,
    timeout: float,
    node_ids: Sequence[int] | None = None,
    expected: Sequence[int] | None = None,
) -> None:
    """Until each of `node_ids` answers Metadata listing every broker of `expected` (registered, unfenced).

    Fails at once when one of them exits, else after `timeout`, with the end of that broker's log.
    """
    node_ids = list(state.ids if node_ids is None else node_ids)
    expected = list(state.ids if expected is None else expected)
    deadline = time.monotonic() + timeout
    while True:
        for node_id in node_ids:
            if not broker_alive(cluster_dir, node_id, state.broker(node_id).pid):
                raise LocalClusterError(
                    f"broker {node_id} exited during start-up; last lines of {log_path(cluster_dir, node_id)}:\n"
                    + log_tail(log_path(cluster_dir, node_id))
                )
        reasons = plan.unready(expected, {k: v for k, v in views(state, node_ids).items() if k in node_ids})
        reasons = {k: v for k, v in reasons.items() if k in node_ids}
        if not reasons:
            return
        if time.monotonic() >= deadline:
            first = min(reasons)
            detail = "; ".join(f"broker {k}: {v}" for k, v in sorted(reasons.items()))
            raise LocalClusterError(
                f"brokers not ready within {timeout:g} s ({detail}); they keep running (`kafkette down` stops "
                f"them); last lines of "
                f"{log_path(cluster_dir, first)}:\n{log_tail(log_path(cluster_dir, first))}"
            )
        time.sleep(POLL_SECONDS * 3)


# --- the commands ---------------------------------------------------------------------------------------


def alive_ids(cluster_dir: Path, state: ClusterState) -> list[int]:
    return [b.node_id for b in state.brokers if broker_alive(cluster_dir, b.node_id, b.pid)]


def up(
    cluster_dir: Path,
    *,
    brokers: int | None,
    first_port: int | None,
    racks: Sequence[str] = (),
    settings: Sequence[tuple[str, str]] = (),
    timeout: float = 60.0,
) -> ClusterState:
    """Start a new cluster in `cluster_dir`, or the saved one again; returns once every broker is ready."""
    cluster_dir = cluster_dir.resolve()
    state = load_state(cluster_dir)
    if state is None:
        if brokers is None:
            raise LocalClusterError(f"no cluster in {cluster_dir} yet: --brokers N is required")
        state = plan.plan_cluster(brokers, first_port or plan.DEFAULT_FIRST_PORT, racks, settings)
        check_ports(state, state.ids)
        cluster_dir.mkdir(parents=True, exist_ok=True)
        save_state(cluster_dir, state)
    else:
        if conflicts := plan.restart_conflicts(state, brokers, first_port, racks):
            raise LocalClusterError(f"{cluster_dir} holds a cluster with another layout: {conflicts}")
        if settings:
            plan.check_settings(settings)
            state = replace(state, settings=(*state.settings, *settings))
        running = alive_ids(cluster_dir, state)
        if running:
            stopped = sorted(set(state.ids) - set(running))
            hint = f"; start brokers {stopped} with `kafkette start`" if stopped else ""
            raise LocalClusterError(f"the cluster in {cluster_dir} is running (brokers {running} alive){hint}")
        check_ports(state, state.ids)
    for node_id in state.ids:
        state = launch(cluster_dir, state, node_id)
    wait_ready(cluster_dir, state, timeout)
    return state


def start(cluster_dir: Path, node_id: int, timeout: float = 60.0) -> ClusterState:
    """Start one stopped broker with its saved arguments; returns once it lists itself (registered, unfenced)."""
    cluster_dir = cluster_dir.resolve()
    state = require_state(cluster_dir)
    spec = state.broker(node_id)
    if broker_alive(cluster_dir, node_id, spec.pid):
        raise LocalClusterError(f"broker {node_id} is already running as pid {spec.pid}")
    state = launch(cluster_dir, state, node_id)
    wait_ready(cluster_dir, state, timeout, node_ids=[node_id], expected=[node_id])
    return state


def stop(cluster_dir: Path, node_id: int, timeout: float = 60.0, kill_after: bool = False) -> bool:
    """SIGTERM (controlled shutdown) and wait; SIGKILL after `timeout` if `kill_after`. False if it was down."""
    cluster_dir = cluster_dir.resolve()
    state = require_state(cluster_dir)
    pid = state.broker(node_id).pid
    if not signal_broker(cluster_dir, state, node_id, signal.SIGTERM):
        return False
    if wait_exit(cluster_dir, node_id, pid, timeout):
        return True
    if not kill_after:
        raise LocalClusterError(
            f"broker {node_id} (pid {pid}) still runs {timeout:g} s after SIGTERM; `kafkette kill {node_id}` ends it"
        )
    signal_broker(cluster_dir, state, node_id, signal.SIGKILL)
    wait_exit(cluster_dir, node_id, pid, timeout)
    return True


def kill(cluster_dir: Path, node_id: int, timeout: float = 10.0) -> bool:
    """SIGKILL: no shutdown work runs. False if it was not running."""
    cluster_dir = cluster_dir.resolve()
    state = require_state(cluster_dir)
    pid = state.broker(node_id).pid
    if not signal_broker(cluster_dir, state, node_id, signal.SIGKILL):
        return False
    if not wait_exit(cluster_dir, node_id, pid, timeout):
        raise LocalClusterError(f"broker {node_id} (pid {pid}) did not exit after SIGKILL")
    return True


def down(cluster_dir: Path, timeout: float = 30.0, delete: bool = False) -> list[int]:
    """SIGTERM every broker at once, wait bounded, SIGKILL stragglers; returns the ids that were killed."""
    cluster_dir = cluster_dir.resolve()
    state = require_state(cluster_dir)
    running = alive_ids(cluster_dir, state)
    for node_id in running:
        # A stopped (SIGSTOP) broker would hold SIGTERM pending forever.
        signal_broker(cluster_dir, state, node_id, signal.SIGCONT)
        signal_broker(cluster_dir, state, node_id, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = []
    for node_id in running:
        pid = state.broker(node_id).pid
        if not wait_exit(cluster_dir, node_id, pid, max(0.0, deadline - time.monotonic())):
            signal_broker(cluster_dir, state, node_id, signal.SIGKILL)
            wait_exit(cluster_dir, node_id, pid, 10.0)
            killed.append(node_id)
    if delete:
        shutil.rmtree(cluster_dir)
    return killed


@dataclass(frozen=True)
class BrokerStatus:
    node_id: int
    pid: int | None
    alive: bool
    rack: str | None
    port: int
    voter: bool
    metrics_port: int


@dataclass(frozen=True)
class Status:
    cluster_id: str
    brokers: tuple[BrokerStatus, ...]
    view: ClusterView | None  # None: no broker answered Metadata
    answered_by: int | None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{plan.HOST}:{b.port}" for b in self.brokers)


def status(cluster_dir: Path, probe_timeout: float = PROBE_TIMEOUT) -> Status:
    cluster_dir = cluster_dir.resolve()
    state = require_state(cluster_dir)
    brokers = tuple(
        BrokerStatus(
            b.node_id, b.pid, broker_alive(cluster_dir, b.node_id, b.pid), b.rack, b.port, b.voter, b.metrics_port
        )
        for b in state.brokers
    )
    view, answered_by = None, None
    for broker in brokers:
        if broker.alive:
            answer = views(state, [broker.node_id], probe_timeout)[broker.node_id]
            if isinstance(answer, ClusterView):
                view, answered_by = answer, broker.node_id
                break
    return Status(state.cluster_id, brokers, view, answered_by)


def first_free_port(count: int, host: str = plan.HOST, is_free: Callable[[str, int], bool] = port_free) -> int:
    """A first client port P such that P..P+count-1, the controller ports P+100.. and the metrics ports P+200..
    are free now (for tests).

    Below the ephemeral range: a broker restarted later reuses its ports, which no client socket may hold by then.
    """
    rng = random.Random()
    voters = voter_count(count) if count > 1 else 0
    ports_range = stable_ports()
    for _ in range(200):
        first = rng.randrange(ports_range.start, ports_range.stop - plan.METRICS_PORT_OFFSET - count)
        ports = [first + i for i in range(count)]
        ports += [first + plan.CONTROLLER_PORT_OFFSET + i for i in range(voters)]
        ports += [first + plan.METRICS_PORT_OFFSET + i for i in range(count)]
        if all(is_free(host, port) for port in ports):
            return first
    raise LocalClusterError("no free port range found")
