"""Test support for the operator: a real Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager) on 127.0.0.1, and the operator itself as a subprocess."""

from kafkette.operator.testing.apiserver import ControlPlane, binaries_dir, missing_binaries
from kafkette.operator.testing.process import OperatorProcess

__all__ = ["ControlPlane", "OperatorProcess", "binaries_dir", "missing_binaries"]
