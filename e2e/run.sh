#!/usr/bin/env bash
# The smoke on a real cluster: kind (Docker needed) -> images from the Dockerfiles -> chart -> examples -> Ready
# -> produce and consume from a broker pod -> teardown. Run from anywhere: `bash e2e/run.sh`. KEEP_CLUSTER=1
# leaves the cluster up. The pytest suite on kind is e2e/kind/suite.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAMESPACE=kafkette
TAG=e2e
WAIT="${E2E_WAIT:-600s}"
source e2e/kind/tools.sh

step "cluster"
"$KIND" delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
"$KIND" create cluster --config e2e/kind.yaml --wait 120s
if [ -z "${KEEP_CLUSTER:-}" ]; then
    trap '"$KIND" delete cluster --name "$CLUSTER"' EXIT
fi

step "images"
for image in broker operator; do
    DOCKER_BUILDKIT=1 docker build -f "images/$image/Dockerfile" -t "kafkette/$image:$TAG" .
    "$KIND" load docker-image --name "$CLUSTER" "kafkette/$image:$TAG"
done

step "chart"
"$HELM" install kafkette charts/kafkette --namespace "$NAMESPACE" --create-namespace \
    --set image.repository=kafkette/operator --set image.tag="$TAG" --set image.pullPolicy=Never --wait

step "examples"
sed "s#^spec:#spec:\n  image: kafkette/broker:$TAG#" charts/kafkette/examples/kafkacluster.yaml \
    | "$KUBECTL" apply -n "$NAMESPACE" -f -
"$KUBECTL" apply -n "$NAMESPACE" -f charts/kafkette/examples/topic.yaml
"$KUBECTL" wait -n "$NAMESPACE" --for=condition=Ready kafkacluster/main --timeout="$WAIT"
"$KUBECTL" wait -n "$NAMESPACE" --for=condition=Ready topic/orders --timeout="$WAIT"
"$KUBECTL" get -n "$NAMESPACE" kafkaclusters,topics,statefulsets,pods -o wide

step "produce and consume"
# The brokers advertise their pod DNS names, which resolve only inside the cluster, so the client runs
# in a broker pod (its image has confluent-kafka) rather than behind a port-forward.
"$KUBECTL" exec -n "$NAMESPACE" main-broker-0 -c broker -- python - <<'PY'
from confluent_kafka import Consumer, Producer

bootstrap = "main-bootstrap:9092"
producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
for index in range(100):
    producer.produce("orders", key=str(index).encode(), value=b"e2e")
assert producer.flush(30) == 0, "unacknowledged records"
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e", "auto.offset.reset": "earliest"})
consumer.subscribe(["orders"])
seen = 0
for _ in range(300):
    message = consumer.poll(1.0)
    if message is not None and message.error() is None:
        seen += 1
    if seen == 100:
        break
consumer.close()
assert seen == 100, f"consumed {seen} of 100"
print("produced and consumed 100 records")
PY
step "e2e passed"
