"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager.

The binaries come from `make kube-bins` (built from the Go module proxy into
~/.cache/kafkette/kube-<version>/bin). There is no kubelet and no scheduler: pods are created but never
run, so tests that need running pods patch pod status themselves.

Authentication is one static token with system:masters; clients verify the serving certificate that
kube-apiserver generates for itself in --cert-dir. Requests made with a service account's token (the chart's RBAC
tests) are written to an audit log, `audit_events` reads them back.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Any, Self

import yaml
from kubernetes import client, config

from kafkette.operator.testing.tools import cache_dir

KUBE_VERSION = "v1.35.4"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager")
HOST = "127.0.0.1"
# The controllers the operator's contract depends on: owner-reference garbage collection, the
# StatefulSet controller (pods, PVC retention), namespaces, and the ReplicaSet/Deployment pair for the chart.
CONTROLLERS = (
    "garbage-collector-controller",
    "statefulset-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "deployment-controller",
    "replicaset-controller",
    "disruption-controller",
    "persistentvolumeclaim-protection-controller",
)


# Metadata (who, verb, resource, response code) of every request made as a service account; nothing else, so the
# other tests, all run as the static admin, write no audit log.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata", "userGroups": ["system:serviceaccounts"]}, {"level": "None"}],
}


def binaries_dir() -> Path:
    return cache_dir() / f"kube-{KUBE_VERSION}" / "bin"


def missing_binaries() -> list[str]:
    return [name for name in BINARIES if not os.access(binaries_dir() / name, os.X_OK)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class ControlPlaneError(RuntimeError):
    pass


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager in `workdir`; `kubeconfig` points at them."""

    def __init__(self, workdir: Path, crds: Sequence[dict[str, Any]] = ()) -> None:
        self.workdir = workdir
        self.crds = list(crds)
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.kubeconfig = workdir / "kubeconfig"
        self.audit_log = workdir / "audit.log"
        self._stack = ExitStack()

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    def start(self, timeout: float = 90.0) -> Self:
        missing = missing_binaries()
        if missing:
            raise ControlPlaneError(f"missing {', '.join(missing)} in {binaries_dir()}: run `make kube-bins`")
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._write_credentials()
            etcd_url = self._start_etcd()
            self._start_apiserver(etcd_url)
            self._wait_ready(timeout)
            # Before the controllers: the garbage collector discovers resource kinds at start and then
            # only every 30 s, and it must know our kinds to collect the children they own.
            self._install_crds(timeout)
            self._start_controller_manager()
        except BaseException:
            self.stop()
            raise
        return self

    def _write_credentials(self) -> None:
        (self.workdir / "tokens.csv").write_text(f"{self.token},admin,admin,system:masters\n")
        key, public = self.workdir / "sa.key", self.workdir / "sa.pub"
        subprocess.run(["openssl", "genrsa", "-out", key, "2048"], check=True, capture_output=True)
        subprocess.run(["openssl", "rsa", "-in", key, "-pubout", "-out", public], check=True, capture_output=True)
        kubeconfig = {
            "apiVersion": "v1",
            "kind": "Config",
            # kube-apiserver writes its self-signed certificate (and the CA that signed it) into --cert-dir.
            "clusters": [
                {
                    "name": "test",
                    "cluster": {
                        "server": self.url,
                        "certificate-authority": str(self.workdir / "certs" / "apiserver.crt"),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
            "current-context": "test",
        }
        self.kubeconfig.write_text(yaml.safe_dump(kubeconfig))
        (self.workdir / "audit-policy.yaml").write_text(yaml.safe_dump(AUDIT_POLICY))

    def audit_events(self, username: str) -> list[dict[str, Any]]:
        """The audited requests of `username` so far (the log is written before each answer is sent)."""
        if not self.audit_log.exists():
            return []
        events = (json.loads(line) for line in self.audit_log.read_text().splitlines() if line)
        return [event for event in events if event["user"]["username"] == username]

    def _spawn(self, name: str, args: list[str]) -> None:
        log: IO[bytes] = self._stack.enter_context(open(self.workdir / f"{name}.log", "wb"))  # noqa: SIM115
        process = subprocess.Popen([str(binaries_dir() / name), *args], stdout=log, stderr=subprocess.STDOUT)
        self._stack.callback(_stop_process, process)

    def _start_etcd(self) -> str:
        client, peer = _free_port(), _free_port()
        client_url = f"http://{HOST}:{client}"
        self._spawn(
            "etcd",
            [
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls=http://{HOST}:{peer}",
                f"--initial-advertise-peer-urls=http://{HOST}:{peer}",
                f"--initial-cluster=default=http://{HOST}:{peer}",
                # Tests write little and throw the data away; skipping fsync keeps them fast.
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        return client_url

    def _start_apiserver(self, etcd_url: str) -> None:
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd_url}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={self.port}",
                f"--cert-dir={self.workdir / 'certs'}",
                f"--token-auth-file={self.workdir / 'tokens.csv'}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={self.workdir / 'sa.pub'}",
                f"--service-account-signing-key-file={self.workdir / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                f"--audit-policy-file={self.workdir / 'audit-policy.yaml'}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=blocking",
                "--v=1",
            ],
        )

    def _start_controller_manager(self) -> None:
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={self.kubeconfig}",
                f"--controllers={','.join(CONTROLLERS)}",
                f"--service-account-private-key-file={self.workdir / 'sa.key'}",
                "--leader-elect=false",
                "--secure-port=0",
                # The garbage collector re-discovers resources (our CRDs among them) this often.
                "--v=1",
            ],
        )

    def _wait_ready(self, timeout: float) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(f"{self.url}/readyz", headers={"Authorization": f"Bearer {self.token}"})
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(request, context=context, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                log = (self.workdir / "kube-apiserver.log").read_text(errors="replace")[-3000:]
                raise ControlPlaneError(f"kube-apiserver not ready after {timeout:g}s:\n{log}")
            time.sleep(0.25)

    def _install_crds(self, timeout: float) -> None:
        api = config.new_client_from_config(config_file=str(self.kubeconfig))
        extensions = client.ApiextensionsV1Api(api)
        for crd in self.crds:
            # The client sends a dict body as it is; its stubs name only the model class.
            extensions.create_custom_resource_definition(crd)  # type: ignore[arg-type]
        deadline = time.monotonic() + timeout
        for crd in self.crds:
            name = crd["metadata"]["name"]
            while not _established(extensions.read_custom_resource_definition(name)):
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"CRD {name} not established after {timeout:g}s")
                time.sleep(0.1)

    def stop(self) -> None:
        self._stack.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _established(crd: Any) -> bool:
    return any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or [])


def _stop_process(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
