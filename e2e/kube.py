"""kubectl and helm for the end-to-end suite: thin subprocess calls, JSON in and out, kstatus rules.

The suite drives the cluster the way a user does, with the `kubectl` and `helm` on PATH (`make node`'s
wrappers here, the runner's own on kind), so what it proves is what a user's commands would see.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from waiting import WaitTimeout, wait_for

# The API server is polled once a second: state moves at the pace of pods starting.
POLL_SECONDS = 1.0
ROOT = Path(__file__).resolve().parent.parent


API_VERSION = "kafkette.dev/v1alpha1"
# Several brokers, the operator and the control plane share two cores: small broker pods.
SMALL_BROKER_RESOURCES = {"requests": {"cpu": "50m", "memory": "192Mi"}, "limits": {"memory": "768Mi"}}
# Pod IPs are what a client in the node's namespace can reach (its resolver is not the cluster's).
POD_IP_LISTENER = {"name": "PLAINTEXT", "port": 9092, "advertise": "podIP"}


class CommandFailed(RuntimeError):
    """A kubectl or helm call exited non-zero; carries what it printed."""

    def __init__(self, args: list[str], returncode: int, output: str) -> None:
        super().__init__(f"{' '.join(args)} exited {returncode}: {output.strip()}")
        self.output = output


def run(args: list[str], *, stdin: str | None = None, timeout: float = 180) -> str:
    """Run a command; its stdout, or CommandFailed with stderr and stdout."""
    result = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise CommandFailed(args, result.returncode, result.stderr + result.stdout)
    return result.stdout


def kubectl(*args: str, stdin: str | None = None, timeout: float = 180) -> str:
    return run(["kubectl", *args], stdin=stdin, timeout=timeout)


def get(kind: str, name: str, namespace: str) -> dict[str, Any] | None:
    """The object as the API server has it, or None when it does not exist."""
    found = kubectl("get", kind, name, "-n", namespace, "-o", "json", "--ignore-not-found")
    return json.loads(found) if found.strip() else None


def items(kind: str, namespace: str, selector: str) -> list[dict[str, Any]]:
    listed = json.loads(kubectl("get", kind, "-n", namespace, "-l", selector, "-o", "json"))
    return list(listed["items"])


def custom_resource(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def broker_selector(cluster: str) -> str:
    return f"app.kubernetes.io/instance={cluster},app.kubernetes.io/component=broker"


def pod_uids(namespace: str, selector: str) -> dict[str, str]:
    """Pod name to uid: a pod that was replaced keeps its name and gets a new uid."""
    return {pod["metadata"]["name"]: pod["metadata"]["uid"] for pod in items("pods", namespace, selector)}


def pod_ip_bootstrap(cluster: str, namespace: str) -> str:
    """Every broker pod's IP and port: what a client outside the cluster configures."""
    pods = items("pods", namespace, broker_selector(cluster))
    addresses = [f"{pod['status']['podIP']}:9092" for pod in pods if pod["status"].get("podIP")]
    if not addresses:
        raise AssertionError(f"no broker pod of {cluster} has an IP")
    return ",".join(addresses)


def delete_cluster(cluster: str, namespace: str) -> None:
    """The KafkaCluster and its brokers' volumes, whether or not the test got as far as creating them."""
    kubectl("delete", "kafkacluster", cluster, "-n", namespace, "--ignore-not-found", "--timeout=120s")
    kubectl("delete", "pvc", "-n", namespace, "-l", broker_selector(cluster), "--ignore-not-found", "--timeout=120s")


def apply(manifest: dict[str, Any], namespace: str, *, dry_run: bool = False) -> str:
    args = ["apply", "-n", namespace, "-f", "-"] + (["--dry-run=server"] if dry_run else [])
    return kubectl(*args, stdin=yaml.safe_dump(manifest))


def condition(resource: dict[str, Any], type_: str) -> dict[str, Any] | None:
    conditions = resource.get("status", {}).get("conditions", [])
    return next((entry for entry in conditions if entry.get("type") == type_), None)


@dataclass(frozen=True)
class KStatus:
    """A resource's health as kstatus (sigs.k8s.io/cli-utils) computes it for custom resources."""

    status: str  # Current, InProgress or Failed
    reason: str


def kstatus(resource: dict[str, Any]) -> KStatus:
    """kstatus' generic rules: an unobserved generation or Reconciling=True is InProgress, Stalled=True is
    Failed; otherwise Current when Ready is True (Flux and Argo CD read Ready for custom resources)."""
    generation = resource["metadata"].get("generation")
    observed = resource.get("status", {}).get("observedGeneration")
    if generation is not None and observed != generation:
        return KStatus("InProgress", f"observedGeneration {observed} != generation {generation}")
    stalled = condition(resource, "Stalled")
    if stalled and stalled["status"] == "True":
        return KStatus("Failed", stalled.get("reason", ""))
    reconciling = condition(resource, "Reconciling")
    if reconciling and reconciling["status"] == "True":
        return KStatus("InProgress", reconciling.get("reason", ""))
    ready = condition(resource, "Ready")
    if ready is None or ready["status"] != "True":
        return KStatus("InProgress", "Ready is not True")
    return KStatus("Current", "Ready")


def wait_current(kind: str, name: str, namespace: str, *, timeout: float) -> dict[str, Any]:
    """Wait until the resource is Current by kstatus with every condition computed from its generation."""

    def current() -> dict[str, Any] | None:
        resource = get(kind, name, namespace)
        if resource is None or kstatus(resource).status != "Current":
            return None
        generation = resource["metadata"]["generation"]
        stale = [c["type"] for c in resource["status"]["conditions"] if c.get("observedGeneration") != generation]
        return None if stale else resource

    try:
        return wait_for(current, f"{kind}/{name} to be Current (kstatus) and Ready", timeout, POLL_SECONDS)
    except WaitTimeout as timeout_error:
        # CI keeps only the end of the output: the summary line itself says where the resource got stuck.
        raise WaitTimeout(f"{timeout_error}; {describe(kind, name, namespace)}") from None


def describe(kind: str, name: str, namespace: str) -> str:
    """One line on why a resource is not Current: its kstatus and conditions, each pod of the namespace
    and the namespace's latest warning events."""
    resource = get(kind, name, namespace)
    if resource is None:
        state = f"{kind}/{name} does not exist"
    else:
        conditions = resource.get("status", {}).get("conditions", [])
        # The transition times tell a status the operator stopped writing from one that keeps changing.
        summary = ", ".join(f"{c['type']}={c['status']} since {c.get('lastTransitionTime')} ({c.get('reason', '')}: "
                            f"{c.get('message', '')})" for c in conditions)  # fmt: skip
        health = kstatus(resource)
        state = f"kstatus {health.status} ({health.reason}); conditions: {summary or 'none'}"
    pods = json.loads(kubectl("get", "pods", "-n", namespace, "-o", "json"))["items"]
    state += "; pods: " + (", ".join(_pod_line(pod) for pod in pods) or "none")
    warnings = kubectl("get", "events", "-n", namespace, "--field-selector", "type=Warning",
                       "--sort-by=.lastTimestamp", "-o", "custom-columns=OBJECT:.involvedObject.name,"
                       "REASON:.reason,MESSAGE:.message", "--no-headers")  # fmt: skip
    latest = [line.strip() for line in warnings.splitlines() if line.strip()][-5:]
    state += "; latest warnings: " + (" | ".join(latest) or "none")
    unready = [pod for pod in pods if (condition(pod, "Ready") or {}).get("status") != "True"]
    return state + "".join(_log_tail(pod["metadata"]["name"], namespace) for pod in unready)


def _log_tail(pod: str, namespace: str, lines: int = 12) -> str:
    """The end of an unready pod's log (a broker that never listens says there where it waits)."""
    try:
        tail = kubectl("logs", pod, "-n", namespace, "--all-containers", f"--tail={lines}", timeout=20)
    except (CommandFailed, subprocess.TimeoutExpired) as problem:
        tail = f"(no log: {problem})"
    return f"\n--- last {lines} log lines of {pod} ---\n{tail.rstrip()}"


def _pod_line(pod: dict[str, Any]) -> str:
    status = pod.get("status", {})
    waiting = [c["state"]["waiting"].get("reason", "") for c in status.get("containerStatuses", [])
               if "waiting" in c.get("state", {})]  # fmt: skip
    restarts = sum(c.get("restartCount", 0) for c in status.get("containerStatuses", []))
    ready = condition(pod, "Ready")
    deleting = " deleting" if pod["metadata"].get("deletionTimestamp") else ""
    detail = f" {','.join(waiting)}" if waiting else ""
    return (
        f"{pod['metadata']['name']} {status.get('phase')}{deleting} ready={ready['status'] if ready else '?'}"
        f" restarts={restarts}{detail}"
    )


def install_operator(namespace: str) -> None:
    """The CRDs and the chart, as a user installs them; skips the test when no API server answers."""
    try:
        kubectl("get", "--raw", "/readyz", timeout=20)
    except (CommandFailed, FileNotFoundError) as problem:
        pytest.skip(f"no Kubernetes API server reachable with `kubectl` (start one with `make node`): {problem}")
    kubectl("apply", "-f", str(ROOT / "crds"))
    kubectl("wait", "--for=condition=Established", "crd/kafkaclusters.kafkette.dev", "--timeout=60s")
    run(["helm", "upgrade", "--install", "kafkette", str(ROOT / "charts" / "kafkette"), "-n", namespace,
         "--create-namespace", "--wait", "--timeout", "5m"], timeout=330)  # fmt: skip
