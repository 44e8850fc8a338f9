"""Fixtures of the operator's API-server tier: a real control plane (session), a namespace per test,
the operator as a subprocess, and real brokers for it to manage."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from kafkette.broker.process import BrokerProcess
from kafkette.operator import crds
from kafkette.operator.testing import ControlPlane, OperatorProcess, binaries_dir, missing_binaries


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    missing = missing_binaries()
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not in {binaries_dir()}: `make kube-bins` builds them from the Go module proxy"
        )
    definitions = [yaml.safe_load(text) for text in crds.rendered_files().values()]
    with ControlPlane(tmp_path_factory.mktemp("kube"), crds=definitions) as plane:
        request.session.stash[_PLANE] = plane
        yield plane


_PLANE = pytest.StashKey[ControlPlane]()
HERE = Path(__file__).parent


@pytest.hookimpl(trylast=True)  # after pytest's own teardown has finalized this test's fixtures
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the control plane once the run leaves this directory, so the rest of the suite does not share
    the machine's two cores with an idle API server (tests run directory by directory)."""
    plane = item.session.stash.get(_PLANE, None)
    if plane is not None and (nextitem is None or HERE not in Path(nextitem.path).parents):
        plane.stop()
        del item.session.stash[_PLANE]


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(control_plane.kubeconfig))


@pytest.fixture
def namespace(kube: client.ApiClient) -> Iterator[str]:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(kube)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)  # the namespace controller empties it in the background


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with BrokerProcess(tmp_path / "broker") as process:
        yield process


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def operator(
    request: pytest.FixtureRequest, control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> Iterator[OperatorProcess]:
    """The operator watching `namespace`; its log is printed when the test fails."""
    log = tmp_path / "operator.log"
    with OperatorProcess(control_plane.kubeconfig, namespace, log) as process:
        yield process
    if request.node.stash.get(_FAILED, False):
        lines = [line for line in log.read_text(errors="replace").splitlines() if not line.startswith("%")]
        print("operator log (tail):", *lines[-60:], sep="\n")
