"""Fixtures of the cluster acceptance tests: local clusters brought down at the end, and the measured numbers.

`make_cluster(brokers, settings)` starts a cluster with `kafkette up`'s runtime on free ports in a tmp dir;
every cluster it started is brought down (`kafkette down`) after the test or module, whatever happened.
Numbers a test measures (`numbers["name"] = seconds`) are printed and saved to tests/cluster/.last-numbers.json.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

# The chaos harness (tests/chaos/harness.py) reads topics and walks logs for these tests too; the Java client
# harness (tests/clients/java_harness.py) runs Kafka's Java client against a cluster.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "chaos"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))

from cluster_kit import Cluster, MakeCluster, Numbers

from kafkette.operator.local import runtime

NUMBERS_FILE = Path(__file__).parent / ".last-numbers.json"


@pytest.fixture(scope="session")
def numbers() -> Iterator[Numbers]:
    measured = Numbers()
    yield measured
    if measured.seconds:
        record = {
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "seconds": dict(sorted(measured.seconds.items())),
        }
        NUMBERS_FILE.write_text(json.dumps(record, indent=2) + "\n")


def _cluster_factory(root: Path) -> tuple[MakeCluster, list[Cluster]]:
    started: list[Cluster] = []

    def make(brokers: int = 3, settings: Iterable[tuple[str, str]] = (), name: str = "cluster") -> Cluster:
        directory = root / f"{name}-{len(started)}"
        try:
            cluster = Cluster.up(directory, brokers, settings)
        except BaseException:
            # A failed start-up leaves the brokers it launched running.
            if runtime.load_state(directory) is not None:
                runtime.down(directory, timeout=20)
            raise
        started.append(cluster)
        return cluster

    return make, started


def _down_all(started: list[Cluster]) -> None:
    for cluster in started:
        cluster.down()


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    make, started = _cluster_factory(tmp_path)
    yield make
    _down_all(started)


@pytest.fixture(scope="module")
def module_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One 3-broker cluster for a whole module, with the module's `CLUSTER_SETTINGS` if it has them; a test that
    takes brokers down calls `restore()` after."""
    make, started = _cluster_factory(tmp_path_factory.mktemp("cluster"))
    make(3, getattr(request.module, "CLUSTER_SETTINGS", ()))
    yield started[0]
    _down_all(started)
