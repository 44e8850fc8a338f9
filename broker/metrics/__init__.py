"""Prometheus metrics of one broker, named as Kafka's JMX exporter (Strimzi's rules) names them.

`requests.py` counts on the request path (per request and per partition batch, never per record);
`collector.py` computes the gauges from live state when Prometheus scrapes; `endpoint.py` serves
them on `metrics.port` from the broker's own event loop.
"""
