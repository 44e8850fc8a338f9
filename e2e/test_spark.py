"""The Spark image on running pods: a PySpark driver here (client mode, in the node's network namespace)
asks Spark's Kubernetes scheduler backend for executors, which run as pods from the kafkette/spark image
and execute both JVM and Python tasks.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from kube import CommandFailed, items, kubectl
from pyspark.sql import SparkSession

NAMESPACE = "spark-e2e"
# The tag `make images` gives every image: the project's version.
IMAGE = f"kafkette/spark:{version('kafkette')}"

pytestmark = pytest.mark.timeout(600)


def api_server(scratch: Path) -> tuple[str, Path]:
    """The API server's URL and a file with its CA certificate, from the kubeconfig `kubectl` uses (the node's
    admin kubeconfig names a CA file; kind's embeds the certificate)."""
    config = json.loads(kubectl("config", "view", "--minify", "--raw", "-o", "json"))
    cluster = config["clusters"][0]["cluster"]
    if "certificate-authority" in cluster:
        return cluster["server"], Path(cluster["certificate-authority"])
    ca = scratch / "ca.crt"
    ca.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    return cluster["server"], ca


@pytest.fixture(scope="module")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    # The address pods reach this process at: the node's own, or on kind the runner's on kind's network.
    node_ip = os.environ.get("KAFKETTE_NODE_IP")
    if not node_ip:
        pytest.skip("KAFKETTE_NODE_IP is not set: run under `make e2e` (or source e2e/.node/env)")
    server, ca = api_server(tmp_path_factory.mktemp("kube"))
    try:
        kubectl("create", "namespace", NAMESPACE)
    except CommandFailed as problem:
        if "AlreadyExists" not in problem.output:
            raise
    # The driver authenticates as a service account allowed to manage pods in its namespace only (the
    # node's admin credentials use an EC key that Spark's Kubernetes client cannot read).
    kubectl("create", "serviceaccount", "spark-driver", "-n", NAMESPACE)
    kubectl("create", "rolebinding", "spark-driver", "--clusterrole=edit",
            f"--serviceaccount={NAMESPACE}:spark-driver", "-n", NAMESPACE)  # fmt: skip
    token = kubectl("create", "token", "spark-driver", "-n", NAMESPACE, "--duration=1h").strip()
    kubeconfig = os.environ.pop("KUBECONFIG", None)  # the driver JVM must not read the admin kubeconfig
    if kubeconfig is None:
        pytest.skip("KUBECONFIG is not set: source e2e/.node/env")
    try:
        session = (
            SparkSession.builder.master(f"k8s://{server}")
            .appName("kafkette-e2e-spark")
            .config("spark.kubernetes.namespace", NAMESPACE)
            .config("spark.kubernetes.authenticate.oauthToken", token)
            .config("spark.kubernetes.authenticate.caCertFile", str(ca))
            .config("spark.kubernetes.container.image", IMAGE)
            .config("spark.kubernetes.container.image.pullPolicy", "Never")
            # Executor pods reach this driver on that address.
            .config("spark.driver.host", node_ip)
            .config("spark.driver.bindAddress", "0.0.0.0")
            .config("spark.executor.instances", "1")
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "512m")
            .config("spark.kubernetes.executor.request.cores", "100m")
            .config("spark.ui.enabled", "false")
            .getOrCreate()
        )
    finally:
        os.environ["KUBECONFIG"] = kubeconfig
    try:
        yield session
    finally:
        session.stop()
        kubectl("delete", "namespace", NAMESPACE, "--wait=false")


def test_executor_pods_from_the_spark_image_run_jvm_and_python_tasks(spark: SparkSession) -> None:
    assert spark.range(0, 100_000, numPartitions=4).selectExpr("sum(id) AS total").collect()[0].total == 4_999_950_000
    # Python tasks: the executors' Python workers come from the image's own interpreter and PySpark.
    doubled = spark.sparkContext.parallelize(range(1_000), 4).map(lambda value: value * 2).sum()
    assert doubled == 999_000
    executors = items("pods", NAMESPACE, "spark-role=executor")
    assert executors and {pod["spec"]["containers"][0]["image"] for pod in executors} == {IMAGE}
    assert all(pod["status"]["phase"] == "Running" for pod in executors)
