"""A ConsumerGroup's Spark application as Kubernetes objects: pure functions over the spec.

The driver is a pod running spark-submit in client mode (the kafkette/spark image's `driver` entrypoint, Spark's
own container contract); Spark's Kubernetes scheduler backend creates the executor pods, owned by the driver pod,
so deleting the driver removes them. The driver authenticates as its own service account, bound in its namespace
to the chart's driver role (pods, services, configmaps, volume claims: what the backend manages) and
nothing more. The query's checkpoint lives on a volume claim that outlives driver restarts; the driver and the
executors mount it (executors write the state store there).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any

from kafkette.operator.resources.consumergroup import CHECKPOINT_MOUNT, Application

# The driver agent's port (kafkette.pipeline.agent serves it when spark.kafkette.agent.port is set).
AGENT_PORT = 4050
DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
# The API server as a pod reaches it (kube-proxy and the cluster DNS).
KUBERNETES_MASTER = "k8s://https://kubernetes.default.svc:443"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The spec hash of the driver pod: a changed application replaces the pod (a pod's spec is mostly immutable).
SPEC_HASH_ANNOTATION = "kafkette.dev/spec-hash"
# The image's Spark user (images/spark/Dockerfile), so the checkpoint volume is writable by it.
SPARK_UID = 185
# Spark refuses a longer executor pod name prefix (the ConsumerGroup's name).
MAX_EXECUTOR_PREFIX = 47
# Spark's conf prefix for a volume claim mounted on every executor pod (named "checkpoint").
EXECUTOR_VOLUME = "spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoint"
# Spark settings the operator owns: a user's sparkConf cannot override them.
OPERATOR_OWNED_CONF = frozenset(
    {
        "spark.master",
        "spark.submit.deployMode",
        "spark.kubernetes.namespace",
        "spark.kubernetes.container.image",
        "spark.kubernetes.container.image.pullPolicy",
        "spark.kubernetes.driver.pod.name",
        "spark.kubernetes.executor.podNamePrefix",
        "spark.kubernetes.authenticate.oauthTokenFile",
        "spark.kubernetes.authenticate.caCertFile",
        "spark.driver.host",
        "spark.driver.port",
        "spark.driver.blockManager.port",
        "spark.executor.instances",
        "spark.dynamicAllocation.enabled",
        "spark.kafkette.agent.port",
        f"{EXECUTOR_VOLUME}.options.claimName",
        f"{EXECUTOR_VOLUME}.mount.path",
    }
)


def driver_role() -> tuple[str, str]:
    """The chart's role for Spark drivers as (kind, name): the operator's Deployment names it in
    KAFKETTE_SPARK_DRIVER_ROLE as Role/NAME (the operator watches one namespace) or ClusterRole/NAME."""
    kind, _, name = os.environ.get("KAFKETTE_SPARK_DRIVER_ROLE", "ClusterRole/kafkette-spark-driver").partition("/")
    if kind not in ("Role", "ClusterRole") or not name:
        raise ValueError(f"KAFKETTE_SPARK_DRIVER_ROLE must be Role/NAME or ClusterRole/NAME, not {kind}/{name}")
    return kind, name


@dataclass(frozen=True)
class SparkNames:
    """Child object names of the ConsumerGroup `group` (Spark refuses an executor prefix over 47 characters)."""

    group: str
    namespace: str

    @property
    def driver_pod(self) -> str:
        return f"{self.group}-spark-driver"

    @property
    def service_account(self) -> str:
        return f"{self.group}-spark"

    @property
    def role_binding(self) -> str:
        return f"{self.group}-spark-driver"

    @property
    def checkpoint_claim(self) -> str:
        return f"{self.group}-spark-checkpoint"

    @property
    def executor_prefix(self) -> str:
        """Spark names executor pods <prefix>-exec-<id>, and takes a prefix of at most 47 characters."""
        return self.group


def labels(group: str, role: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "kafkette-spark",
        "app.kubernetes.io/instance": group,
        "app.kubernetes.io/part-of": "kafkette",
        "kafkette.dev/consumergroup": group,
        "spark-role": role,
    }


def spark_conf(app: Application, names: SparkNames, executors: int) -> dict[str, str]:
    """The application's own conf, then the settings the operator owns ($(POD_IP) and $(POD_NAME) are expanded by
    the kubelet from the container's environment)."""
    conf = {key: value for key, value in app.spark_conf.items() if key not in OPERATOR_OWNED_CONF}
    conf.setdefault("spark.app.name", names.group)
    # Pending executor pods above a lowered target are trimmed only after this idle timeout (60 s by default).
    conf.setdefault("spark.dynamicAllocation.executorIdleTimeout", "5s")
    conf.update(
        {
            "spark.kubernetes.namespace": names.namespace,
            "spark.kubernetes.container.image": app.image,
            "spark.kubernetes.container.image.pullPolicy": app.image_pull_policy,
            "spark.kubernetes.driver.pod.name": "$(POD_NAME)",
            "spark.kubernetes.executor.podNamePrefix": names.executor_prefix,
            "spark.kubernetes.authenticate.oauthTokenFile": f"{SERVICE_ACCOUNT_DIR}/token",
            "spark.kubernetes.authenticate.caCertFile": f"{SERVICE_ACCOUNT_DIR}/ca.crt",
            "spark.driver.host": "$(POD_IP)",
            "spark.driver.port": str(DRIVER_PORT),
            "spark.driver.blockManager.port": str(BLOCK_MANAGER_PORT),
            "spark.executor.instances": str(executors),
            # The agent sets the executor total; dynamic allocation would refuse its kill calls.
            "spark.dynamicAllocation.enabled": "false",
            "spark.kafkette.agent.port": str(AGENT_PORT),
            # Executors write the query's state under the checkpoint: they mount the driver's volume.
            f"{EXECUTOR_VOLUME}.options.claimName": names.checkpoint_claim,
            f"{EXECUTOR_VOLUME}.mount.path": CHECKPOINT_MOUNT,
        }
    )
    return conf


def submit_arguments(app: Application, names: SparkNames, executors: int) -> list[str]:
    """The driver container's arguments: the image entrypoint's `driver` (spark-submit in client mode, bound to
    SPARK_DRIVER_BIND_ADDRESS), the master, the conf, the Python file and its arguments."""
    conf = [
        item
        for key, value in sorted(spark_conf(app, names, executors).items())
        for item in ("--conf", f"{key}={value}")
    ]
    return ["driver", "--master", KUBERNETES_MASTER, *conf, app.python_file, *app.arguments]


def spec_hash(app: Application) -> str:
    """What makes a running driver out of date: the application spec (the executor count is not part of it)."""
    return hashlib.sha256(json.dumps(app.to_api(), sort_keys=True).encode()).hexdigest()[:16]


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def driver_pod(app: Application, names: SparkNames, executors: int) -> dict[str, Any]:
    """The driver pod, started with `executors` executors (a restarted driver starts with the current total)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": names.driver_pod,
            "namespace": names.namespace,
            "labels": labels(names.group, "driver"),
            "annotations": {SPEC_HASH_ANNOTATION: spec_hash(app)},
        },
        "spec": {
            "serviceAccountName": names.service_account,
            # The operator restarts a failed driver itself (from the checkpoint, with a cooldown, in status).
            "restartPolicy": "Never",
            "securityContext": {"fsGroup": SPARK_UID, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "driver",
                    "image": app.image,
                    "imagePullPolicy": app.image_pull_policy,
                    "args": submit_arguments(app, names, executors),
                    "env": [
                        _field_env("POD_IP", "status.podIP"),
                        _field_env("POD_NAME", "metadata.name"),
                        _field_env("SPARK_DRIVER_BIND_ADDRESS", "status.podIP"),
                    ],
                    "ports": [
                        {"name": "agent", "containerPort": AGENT_PORT, "protocol": "TCP"},
                        {"name": "driver", "containerPort": DRIVER_PORT, "protocol": "TCP"},
                        {"name": "block-manager", "containerPort": BLOCK_MANAGER_PORT, "protocol": "TCP"},
                    ],
                    "resources": app.driver_resources.to_api(),
                    "volumeMounts": [{"name": "checkpoint", "mountPath": CHECKPOINT_MOUNT}],
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
            "volumes": [{"name": "checkpoint", "persistentVolumeClaim": {"claimName": names.checkpoint_claim}}],
        },
    }


def driver_access(app: Application, names: SparkNames) -> list[dict[str, Any]]:
    """The driver's service account, its binding to the chart's driver ClusterRole in this namespace only, and
    the checkpoint claim."""
    claim_spec: dict[str, Any] = {
        "accessModes": [app.checkpoint.access_mode],
        "resources": {"requests": {"storage": app.checkpoint.size}},
    }
    if app.checkpoint.storage_class is not None:
        claim_spec["storageClassName"] = app.checkpoint.storage_class
    metadata = {"namespace": names.namespace, "labels": labels(names.group, "driver")}
    role_kind, role_name = driver_role()
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": names.service_account, **metadata}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": names.role_binding, **metadata},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": names.service_account, "namespace": names.namespace}],
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": names.checkpoint_claim, **metadata},
            "spec": claim_spec,
        },
    ]
