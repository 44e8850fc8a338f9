"""The source's and sink's options, named and checked as Spark's Kafka source and sink name them (pure).

Names are case-insensitive (Spark hands data sources a case-insensitive dict). ``kafka.*``
options go to the Kafka client with the prefix removed; any other name we do not know fails
the query at once, so a typo never silently changes what is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, cast

from kafkette.pipeline.offsets import OffsetSpec, OptionError, TopicPartition, parse_partition_json

KAFKA_PREFIX = "kafka."
DEFAULT_POLL_TIMEOUT_MS = 30_000
# Spark's fetchOffset.numRetries and fetchOffset.retryIntervalMs defaults: the driver reads partitions and offsets
# this many times, so long apart, each time with a new admin client, before it fails the query.
DEFAULT_FETCH_OFFSET_ATTEMPTS = 3
DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS = 1_000
# The source reads only committed transactions unless told otherwise (librdkafka's default too; Spark's own
# source, on the Java client, defaults to read_uncommitted): exactly-once pipelines need it, and a topic
# without transactions reads the same either way.
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
DEFAULT_ISOLATION_LEVEL = "read_committed"
DeliveryGuarantee = Literal["at-least-once", "exactly-once"]
DELIVERY_GUARANTEES: tuple[DeliveryGuarantee, ...] = ("at-least-once", "exactly-once")

# Spark's own Kafka source sets these itself; a user value would break how offsets are tracked.
_RESERVED_CONSUMER = ("auto.offset.reset", "enable.auto.commit", "key.deserializer", "value.deserializer")
# transactional.id: the exactly-once sink derives one per task (transactionalIdPrefix names its start).
_RESERVED_PRODUCER = ("key.serializer", "value.serializer", "transactional.id")

_SUBSCRIPTIONS = ("subscribe", "subscribepattern", "assign")
_SOURCE_OPTIONS = {
    *_SUBSCRIPTIONS,
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger",
    "minpartitions",
    "failondataloss",
    "includeheaders",
    "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries",
    "fetchoffset.retryintervalms",
}
_SINK_OPTIONS = {"topic", "deliveryguarantee", "transactionalidprefix"}
# Spark passes these to every data source itself.
_SPARK_OPTIONS = {"path", "checkpointlocation"}


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: named topics, a topic-name pattern, or explicit partitions."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[TopicPartition, ...] = ()

    def select(self, available: Mapping[str, int]) -> list[TopicPartition]:
        """The partitions read, given each existing topic's partition count."""
        if self.kind == "assign":
            return sorted(self.partitions)
        if self.kind == "subscribe":
            names = [topic for topic in self.topics if topic in available]
        else:
            regex = re.compile(self.pattern)
            names = [topic for topic in available if regex.fullmatch(topic) and not topic.startswith("__")]
        return sorted((topic, index) for topic in names for index in range(available[topic]))

    def describe(self) -> str:
        if self.kind == "assign":
            return "assign " + ",".join(f"{topic}-{index}" for topic, index in self.partitions)
        if self.kind == "subscribePattern":
            return f"subscribePattern {self.pattern}"
        return "subscribe " + ",".join(self.topics)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap: str
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None  # None: streaming, or a batch read up to the latest offsets
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    group_id: str
    client: Mapping[str, str]  # librdkafka settings: the kafka.* options without the prefix
    fetch_offset_attempts: int = DEFAULT_FETCH_OFFSET_ATTEMPTS
    fetch_offset_retry_interval_ms: int = DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
    # kafka.isolation.level, kept out of ``client``: the driver's admin client is no consumer and warns about it.
    isolation_level: str = DEFAULT_ISOLATION_LEVEL

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"

    @property
    def consumer(self) -> dict[str, str]:
        """The settings of the consumers that read each task's range."""
        return {**self.client, "isolation.level": self.isolation_level}


@dataclass(frozen=True)
class SinkOptions:
    bootstrap: str
    topic: str | None
    client: Mapping[str, str]
    delivery_guarantee: DeliveryGuarantee = "at-least-once"
    # exactly-once: each task's transactional.id is "<prefix>-<Spark partition id>"; None: from the query id.
    transactional_id_prefix: str | None = None


def parse_source(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    lowered = _lowered(options)
    _reject_unknown(lowered, _SOURCE_OPTIONS, "source")
    client = _client_settings(lowered, _RESERVED_CONSUMER)
    subscription = _subscription(lowered)
    if streaming and any(k.startswith("ending") for k in lowered):
        raise OptionError("endingOffsets/endingTimestamp are for batch reads; a stream has no end")
    starting = _spec(lowered, "starting", fallback="earliest", default="latest" if streaming else "earliest")
    ending = None if streaming else _spec(lowered, "ending", fallback="latest", default="latest")
    if not streaming and starting.kind == "latest":
        raise OptionError("startingOffsets=latest would read nothing in a batch query")
    if ending is not None and ending.kind == "earliest":
        raise OptionError("endingOffsets=earliest would read nothing in a batch query")
    return SourceOptions(
        bootstrap=client["bootstrap.servers"],
        subscription=subscription,
        starting=starting,
        ending=ending,
        max_offsets_per_trigger=_positive(lowered, "maxoffsetspertrigger"),
        min_partitions=_positive(lowered, "minpartitions"),
        fail_on_data_loss=_boolean(lowered, "failondataloss", default=True),
        include_headers=_boolean(lowered, "includeheaders", default=False),
        poll_timeout_ms=_positive(lowered, "kafkaconsumer.polltimeoutms") or DEFAULT_POLL_TIMEOUT_MS,
        group_id=client.get("group.id") or default_group_id(subscription),
        client={k: v for k, v in client.items() if k not in ("group.id", "isolation.level")},
        fetch_offset_attempts=_positive(lowered, "fetchoffset.numretries") or DEFAULT_FETCH_OFFSET_ATTEMPTS,
        fetch_offset_retry_interval_ms=_at_least_zero(
            lowered, "fetchoffset.retryintervalms", DEFAULT_FETCH_OFFSET_RETRY_INTERVAL_MS
        ),
        isolation_level=_choice(lowered, "kafka.isolation.level", ISOLATION_LEVELS, DEFAULT_ISOLATION_LEVEL),
    )


def parse_sink(options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
    lowered = _lowered(options)
    _reject_unknown(lowered, _SINK_OPTIONS, "sink")
    client = _client_settings(lowered, _RESERVED_PRODUCER)
    guarantee = cast(DeliveryGuarantee, _choice(lowered, "deliveryguarantee", DELIVERY_GUARANTEES, "at-least-once"))
    prefix = lowered.get("transactionalidprefix", "").strip() or None
    if guarantee == "exactly-once" and not streaming:
        # A batch job has no batch id to record, so a task lost after committing would be written twice on retry.
        raise OptionError("deliveryGuarantee=exactly-once is for streaming writes (writeStream), not batch writes")
    protocol = client.get("security.protocol", "plaintext").strip().lower()
    if guarantee == "exactly-once" and protocol != "plaintext":
        # The driver ends the tasks' transactions over its own plain connection (transactions.py).
        raise OptionError(f"deliveryGuarantee=exactly-once needs kafka.security.protocol=PLAINTEXT, got {protocol!r}")
    if prefix is not None and guarantee != "exactly-once":
        raise OptionError("transactionalIdPrefix needs deliveryGuarantee=exactly-once")
    return SinkOptions(
        bootstrap=client["bootstrap.servers"],
        topic=lowered.get("topic"),
        client=client,
        delivery_guarantee=guarantee,
        transactional_id_prefix=prefix,
    )


def default_group_id(subscription: Subscription) -> str:
    """Stable across restarts, so lag stays on one group; jobs pass their query name instead."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", subscription.describe().split(" ", 1)[1])
    return f"kafkette-spark-{name}"


def _lowered(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in options.items()}


def _reject_unknown(lowered: Mapping[str, str], known: set[str], what: str) -> None:
    unknown = sorted(
        k for k in lowered if k not in known and not k.startswith(KAFKA_PREFIX) and k not in _SPARK_OPTIONS
    )
    if unknown:
        names = ", ".join(sorted(known | {"kafka.*"}))
        raise OptionError(f"unknown kafkette {what} option(s) {', '.join(unknown)}; known options: {names}")


def _client_settings(lowered: Mapping[str, str], reserved: tuple[str, ...]) -> dict[str, str]:
    client = {k.removeprefix(KAFKA_PREFIX): v for k, v in lowered.items() if k.startswith(KAFKA_PREFIX)}
    if not client.get("bootstrap.servers"):
        raise OptionError("option kafka.bootstrap.servers is required (HOST:PORT[,HOST:PORT...])")
    clashing = [f"kafka.{key}" for key in reserved if key in client]
    if clashing:
        raise OptionError(f"{', '.join(clashing)}: set by kafkette itself and cannot be overridden")
    return client


def _subscription(lowered: Mapping[str, str]) -> Subscription:
    given = [name for name in _SUBSCRIPTIONS if lowered.get(name, "").strip()]
    if len(given) != 1:
        raise OptionError(f"set exactly one of subscribe, subscribePattern, assign (got {len(given)})")
    value = lowered[given[0]].strip()
    if given[0] == "subscribe":
        return Subscription("subscribe", topics=tuple(t.strip() for t in value.split(",") if t.strip()))
    if given[0] == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"subscribePattern: not a regular expression: {exc}") from None
        return Subscription("subscribePattern", pattern=value)
    partitions = parse_partition_json("assign", _assign_as_offsets(value))
    return Subscription("assign", partitions=tuple(sorted(partitions)))


def _assign_as_offsets(value: str) -> str:
    """assign is ``{"topic": [0, 1]}``; reuse the offsets parser by turning lists into objects."""
    try:
        parsed = json.loads(value)
        return json.dumps({topic: {str(p): 0 for p in parts} for topic, parts in parsed.items()})
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f'assign: expected JSON like {{"topic": [0, 1]}}, got {value!r}') from None


def _spec(lowered: Mapping[str, str], which: str, *, fallback: str, default: str) -> OffsetSpec:
    strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(f"startingOffsetsByTimestampStrategy: expected error or latest, got {strategy!r}")
    if f"{which}offsetsbytimestamp" in lowered:
        times = parse_partition_json(f"{which}OffsetsByTimestamp", lowered[f"{which}offsetsbytimestamp"])
        return OffsetSpec("timestamps", fallback, offsets=times, timestamp_strategy=strategy)  # type: ignore[arg-type]
    if f"{which}timestamp" in lowered:
        timestamp = _integer(lowered, f"{which}timestamp")
        return OffsetSpec("timestamp", fallback, timestamp=timestamp, timestamp_strategy=strategy)  # type: ignore[arg-type]
    text = lowered.get(f"{which}offsets", default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower(), fallback)  # type: ignore[arg-type]
    return OffsetSpec("offsets", fallback, offsets=parse_partition_json(f"{which}Offsets", text))  # type: ignore[arg-type]


def _integer(lowered: Mapping[str, str], name: str) -> int:
    try:
        return int(lowered[name])
    except ValueError:
        raise OptionError(f"{name}: expected an integer, got {lowered[name]!r}") from None


def _positive(lowered: Mapping[str, str], name: str) -> int | None:
    if name not in lowered:
        return None
    number = _integer(lowered, name)
    if number <= 0:
        raise OptionError(f"{name}: expected a positive integer, got {number}")
    return number


def _at_least_zero(lowered: Mapping[str, str], name: str, default: int) -> int:
    if name not in lowered:
        return default
    number = _integer(lowered, name)
    if number < 0:
        raise OptionError(f"{name}: expected zero or a positive integer, got {number}")
    return number


def _choice(lowered: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    text = lowered.get(name, default).strip().lower()
    if text not in allowed:
        raise OptionError(f"{name}: expected {' or '.join(allowed)}, got {text!r}")
    return text


def _boolean(lowered: Mapping[str, str], name: str, *, default: bool) -> bool:
    text = lowered.get(name, str(default)).strip().lower()
    if text not in ("true", "false"):
        raise OptionError(f"{name}: expected true or false, got {text!r}")
    return text == "true"
