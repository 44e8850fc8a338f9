"""kopf handlers: `kopf run -m kafkette.operator.kube.handlers` (the operator image's command).

Importing this package registers every handler with kopf's default registry.
"""

import os

import kopf

from kafkette.operator import metrics
from kafkette.operator.kube.handlers import cluster, consumergroup, events, topic, user

FINALIZER = "kafkette.dev/finalizer"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: object) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = 20  # logging.INFO: actions, not debug chatter, become Kubernetes Events
    # One replica (the chart's Deployment uses Recreate); peering would only add an extra CRD.
    settings.peering.standalone = True
    # Scanning watches CRDs and namespaces cluster-wide, which a namespaced Role cannot allow; the chart
    # installs our CRDs before the operator starts, so there is nothing to discover.
    settings.scanning.disabled = True
    # Deleting a resource waits for its running timer (a status refresh of a few seconds) to finish;
    # kopf's default re-check after 60 s would hold every such deletion for a minute.
    settings.background.cancellation_polling = 1.0
    # Prometheus scrapes the operator here (the chart's Deployment sets it); unset or 0: no endpoint.
    port = int(os.environ.get("KAFKETTE_METRICS_PORT", "0"))
    if port:
        metrics.serve(port)


__all__ = ["cluster", "consumergroup", "events", "topic", "user"]
