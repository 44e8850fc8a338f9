"""The operator as a subprocess (`kopf run`), as it runs in its image, pointed at a test control plane."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Self


class OperatorProcess:
    """kopf running `kafkette.operator.kube.handlers` for one namespace; logs go to `log_path`."""

    def __init__(self, kubeconfig: Path, namespace: str, log_path: Path, resync_seconds: float = 2.0) -> None:
        self.kubeconfig = kubeconfig
        self.namespace = namespace
        self.log_path = log_path
        self.resync_seconds = resync_seconds
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "KAFKETTE_RESYNC_SECONDS": str(self.resync_seconds),
        }
        command = [sys.executable, "-P", "-m", "kopf", "run", "--standalone", "--namespace", self.namespace]
        command += ["-m", "kafkette.operator.kube.handlers"]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
