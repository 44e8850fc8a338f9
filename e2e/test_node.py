"""The single-node cluster of `make node` runs pods: volumes from the default StorageClass, per-pod DNS
names behind a headless Service, and ClusterIP Services reached from pods and from the node's namespace.

`make e2e` runs this inside the node's network namespace; by hand:
`make node && . e2e/.node/env && node-exec .venv/bin/pytest e2e/test_node.py`.
On kind (e2e/kind/suite.sh sets KAFKETTE_KIND_CLUSTER) the same checks hold for kind's own parts: its default
class `standard` (local-path too) keeps volumes inside the node containers, and the runner reaches Service
addresses through the route suite.sh adds.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from waiting import wait_for

BUSYBOX = "kafkette.local/busybox:1.35.0"
WAIT = "120s"
# Where `make node` keeps its state; the local-path volumes live under it.
NODE_STATE = Path(__file__).resolve().parent / ".node"
# The kind cluster the suite runs against on a hosted runner; None on our node.
KIND_CLUSTER = os.environ.get("KAFKETTE_KIND_CLUSTER")
# kind ships local-path-provisioner as its default class `standard`, with volumes under this folder of a node.
KIND_VOLUMES = Path("/var/local-path-provisioner")


def _missing_prerequisite() -> str | None:
    check = subprocess.run(
        ["bash", Path(__file__).with_name("node") / "prerequisites.sh"], capture_output=True, text=True
    )
    return check.stdout.strip() if check.returncode != 0 else None


if KIND_CLUSTER is None and (_problem := _missing_prerequisite()) is not None:
    pytest.skip(f"this machine cannot run the node: {_problem}", allow_module_level=True)


@pytest.fixture(scope="module", autouse=True)
def inside_node() -> None:
    """Fails (not skips) when the node is not up or the tests run outside its namespace: test traffic to
    pod and Service addresses must never leave from the machine's own namespace. A hosted runner is a
    disposable machine of its own, where routes to the kind nodes are the intended path."""
    if KIND_CLUSTER is not None:
        return
    netns = os.environ.get("KAFKETTE_NODE_NETNS")
    if netns is None or not Path(f"/run/netns/{netns}").exists():
        pytest.fail("no node: run `make node` and `source e2e/.node/env` (or `make e2e`)")
    if os.stat("/proc/self/ns/net").st_ino != os.stat(f"/run/netns/{netns}").st_ino:
        pytest.fail("run the node tests inside the node's namespace: `node-exec .venv/bin/pytest e2e`")


def kubectl(*args: str, stdin: str | None = None) -> str:
    result = subprocess.run(["kubectl", *args], input=stdin, capture_output=True, text=True, timeout=180)
    if result.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def apply(namespace: str, *objects: dict[str, Any]) -> None:
    kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )


def get(namespace: str, kind_name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", "-n", namespace, kind_name, "-o", "json"))


def pod(name: str, command: list[str], **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": BUSYBOX, "imagePullPolicy": "Never", "command": command}
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": spec.pop("labels", {})},
        "spec": {"containers": [container], "terminationGracePeriodSeconds": 0, **spec},
    }


def in_pod(namespace: str, name: str, *command: str) -> str:
    return kubectl("exec", "-n", namespace, name, "--", *command)


@pytest.fixture(scope="module")
def namespace() -> Iterator[str]:
    name = f"node-test-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture(scope="module")
def client(namespace: str) -> str:
    """A pod to look names up and connect from."""
    apply(namespace, pod("client", ["sleep", "3600"]))
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/client", f"--timeout={WAIT}")
    return "client"


@pytest.fixture(scope="module")
def echo_pods(namespace: str) -> list[str]:
    """A 2-replica StatefulSet behind the headless Service `web`, each pod answering TCP 8080 with its
    own name, and a ClusterIP Service `echo` (port 80) in front of both."""
    labels = {"app": "web"}
    server = pod(
        "unused",
        ["nc", "-ll", "-p", "8080", "-e", "/bin/hostname"],
        container={"readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}},
    )
    apply(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"clusterIP": "None", "selector": labels, "ports": [{"name": "echo", "port": 8080}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "echo"},
            "spec": {"selector": labels, "ports": [{"name": "echo", "port": 80, "targetPort": 8080}]},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "web"},
            "spec": {
                "serviceName": "web",
                "replicas": 2,
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": labels},
                "template": {"metadata": {"labels": labels}, "spec": server["spec"]},
            },
        },
    )
    kubectl("rollout", "status", "-n", namespace, "statefulset/web", f"--timeout={WAIT}")
    return ["web-0", "web-1"]


def test_pod_runs_with_a_volume_bound_from_the_default_storage_class(namespace: str) -> None:
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "16Mi"}}},
    }
    writer = pod(
        "writer",
        ["sh", "-c", "echo written-by-writer > /data/proof && sleep 3600"],
        container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    )
    apply(namespace, claim, writer)
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/writer", f"--timeout={WAIT}")

    bound = get(namespace, "pvc/data")
    assert bound["status"]["phase"] == "Bound"
    volume = json.loads(kubectl("get", "pv", bound["spec"]["volumeName"], "-o", "json"))
    assert volume["spec"]["storageClassName"] == ("local-path" if KIND_CLUSTER is None else "standard")
    assert in_pod(namespace, "writer", "cat", "/data/proof") == "written-by-writer\n"
    source = volume["spec"].get("hostPath") or volume["spec"]["local"]
    folder = Path(source["path"])
    if KIND_CLUSTER is None:
        # The provisioner made a real folder on this machine's disk, under the node's state.
        assert folder.is_relative_to(NODE_STATE / "volumes")
        assert (folder / "proof").read_text() == "written-by-writer\n"
    else:
        # On kind the folder is on the disk of the node container that runs the pod (named as the node).
        assert folder.is_relative_to(KIND_VOLUMES)
        node = get(namespace, "pod/writer")["spec"]["nodeName"]
        on_node = subprocess.run(
            ["docker", "exec", node, "cat", str(folder / "proof")], capture_output=True, text=True, timeout=30
        )
        assert on_node.stdout == "written-by-writer\n", on_node.stderr


def test_per_pod_dns_names_of_a_headless_service_resolve_from_another_pod(
    namespace: str, client: str, echo_pods: list[str]
) -> None:
    for name in echo_pods:
        address = get(namespace, f"pod/{name}")["status"]["podIP"]
        fqdn = f"{name}.web.{namespace}.svc.cluster.local"

        def resolved(fqdn: str = fqdn, address: str = address) -> bool:
            # A Ready pod's record reaches CoreDNS through its EndpointSlice a moment later (seconds under load).
            return address in in_pod(namespace, client, "nslookup", fqdn).split()

        wait_for(resolved, f"{fqdn} resolving to {address}", 60, 2, ignoring=(AssertionError,))
        # The short name goes through the pod's search path, then the pod answers with its own name.
        assert in_pod(namespace, client, "nc", "-w", "5", f"{name}.web", "8080") == f"{name}\n"


def test_cluster_ip_service_is_reachable_from_a_pod_and_from_the_node(
    namespace: str, client: str, echo_pods: list[str]
) -> None:
    cluster_ip = get(namespace, "service/echo")["spec"]["clusterIP"]
    assert in_pod(namespace, client, "nc", "-w", "5", "echo", "80").strip() in echo_pods
    assert in_pod(namespace, client, "nc", "-w", "5", cluster_ip, "80").strip() in echo_pods
    # From the node's own namespace, through the node-exec wrapper, with the machine's busybox (on kind: from
    # the runner, node-exec a passthrough, through its route to the Service range via the control plane).
    answers = {
        subprocess.run(
            ["node-exec", "busybox", "nc", "-w", "5", cluster_ip, "80"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        for _ in range(8)
    }
    assert answers <= set(echo_pods) and answers
