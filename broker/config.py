"""Broker and topic configuration, spelled with Kafka's own keys and validated like Kafka validates them.

Operators copy `server.properties` files and `--config retention.ms=...` habits from Apache Kafka, so
every key here is Kafka's, values parse the way Java's ConfigDef parses them, and a bad key or value is
reported as a `ConfigError` that names the key.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, ClassVar, Literal, NamedTuple, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from kafkette.broker.kafka_config_names import BROKER_KEYS as KAFKA_BROKER_KEYS
from kafkette.broker.kafka_config_names import TOPIC_KEYS as KAFKA_TOPIC_KEYS
from kafkette.broker.kafka_config_names import KafkaKey

# How a clean shutdown makes every log durable (kafkette.log.shutdown.sync): "syncfs" writes the logs' files without
# fsync and writes back each log directory's file system once (Linux 5.8 and later, else "fsync"); "fsync" fsyncs
# each log's files, as Kafka does (broker/storage/manager.py).
ShutdownSync = Literal["syncfs", "fsync"]

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
MS_PER_MINUTE = 60_000
MS_PER_HOUR = 3_600_000


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; the message starts with the key."""


# --- Java .properties files --------------------------------------------------------------------------

_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.DOTALL)
_ESCAPED_CHARS = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_KEY_TERMINATORS = "=: \t\f"


def _unescape(text: str) -> str:
    def replace(match: re.Match[str]) -> str:
        escaped = match[1]
        if len(escaped) == 5:
            return chr(int(escaped[1:], 16))
        return _ESCAPED_CHARS.get(escaped, escaped)

    return _ESCAPE.sub(replace, text)


def _split_key(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace, then drop the separator and blanks around it."""
    index = 0
    while index < len(line) and line[index] not in _KEY_TERMINATORS:
        index += 2 if line[index] == "\\" else 1
    key, rest = line[:index], line[index:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _logical_lines(text: str) -> list[str]:
    """Join continuation lines: an odd number of trailing backslashes continues onto the next line."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip()
        if pending is None and (not line or line[0] in "#!"):
            continue  # comments never continue, even when they end in a backslash
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending = (pending or "") + line[:-1]
            continue
        lines.append((pending or "") + line)
        pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def parse_properties(text: str) -> dict[str, str]:
    """Parse the text of a Java .properties file; later keys win, as in `java.util.Properties.load`."""
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key(line)
        props[_unescape(key)] = _unescape(value)
    return props


def parse_properties_file(path: str | Path) -> dict[str, str]:
    """Read a `server.properties`-style file as UTF-8 (Java reads ISO-8859-1; both agree on ASCII)."""
    return parse_properties(Path(path).read_text(encoding="utf-8"))


# --- value parsing as Java's ConfigDef does it ----------------------------------------------------------

_INTEGER = re.compile(r"[+-]?\d+")


def _java_integer(value: object) -> object:
    # Java's parseInt/parseLong after ConfigDef's trim: no "1_000", "1.0" or "0x10" as Python would allow.
    if isinstance(value, str):
        text = value.strip()
        if not _INTEGER.fullmatch(text):
            raise ValueError("must be an integer")
        return int(text)
    return value


def _java_double(value: object) -> object:
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
        if math.isnan(number):
            raise ValueError("must be a number")
        return number
    return value


def _java_boolean(value: object) -> object:
    if isinstance(value, str):
        text = value.strip().lower()
        if text not in ("true", "false"):
            raise ValueError("must be true or false")
        return text == "true"
    return value


def _trimmed(value: object) -> object:
    return value.strip() if isinstance(value, str) else value


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        return tuple(item.strip() for item in value.split(",") if item.strip())
    return value


def _never_is_none(value: int | None) -> int | None:
    # Kafka spells "never" as Long.MAX_VALUE; None says the same without a magic number.
    return None if value == LONG_MAX else value


def _socket_buffer(value: int) -> int:
    # Kafka passes -1 on as "the OS default" (the kernel's autotuning) and any other value to SO_SNDBUF/SO_RCVBUF.
    if value == 0 or value < -1:
        raise ValueError("must be -1 (the OS default) or a positive number of bytes")
    return value


_JAVA_RANGES = {"SHORT": (SHORT_MIN, SHORT_MAX), "INT": (INT_MIN, INT_MAX), "LONG": (LONG_MIN, LONG_MAX)}


def check_kafka_value(key: KafkaKey, value: str) -> str:
    """Check a value of a Kafka key kafkette does not act on as Kafka's ConfigDef parses its type; return it
    trimmed. Kafka's own validators (ranges, enums) are not applied: the value has no effect here."""
    text = value.strip()
    try:
        if key.type in _JAVA_RANGES:
            low, high = _JAVA_RANGES[key.type]
            if not low <= int(str(_java_integer(text))) <= high:
                raise ValueError(f"must be between {low} and {high}")
        elif key.type == "DOUBLE":
            _java_double(text)
        elif key.type == "BOOLEAN":
            _java_boolean(text)
    except ValueError as exc:
        raise ConfigError(f"{key.name}: {exc} (got {value!r})") from None
    return text


class Listener(NamedTuple):
    """One entry of `listeners`: `NAME://HOST:PORT`; an empty host means every interface."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


_LISTENER = re.compile(r"(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ipv6>[^\]]*)\]|(?P<host>[^:\[\]]*)):(?P<port>\d+)")
# Kafka's security protocols; a listener named like one of them uses it unless the protocol map says otherwise.
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SECURITY_PROTOCOLS: frozenset[str] = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
# The SASL mechanisms this broker serves.
SASL_MECHANISMS: frozenset[str] = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
# `authorizer.class.name` values that turn ACLs on: Kafka's KRaft authorizer, and ours by its own name.
AUTHORIZER_CLASS_NAMES: frozenset[str] = frozenset(
    {"org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafkette.broker.security.authorizer.Authorizer"}
)
# Keys whose values DescribeConfigs never shows (Kafka's PASSWORD type).
SENSITIVE_BROKER_KEYS: frozenset[str] = frozenset(
    {"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password"}
)


def parse_listener(text: str) -> Listener:
    match = _LISTENER.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"expected NAME://HOST:PORT, got {text.strip()!r}")
    port = int(match["port"])
    if port > 65535:
        raise ValueError(f"port {port} is out of range 0..65535")
    return Listener(match["name"], match["ipv6"] if match["ipv6"] is not None else match["host"], port)


def _listeners(value: object) -> object:
    if not isinstance(value, str):
        return value
    listeners = tuple(parse_listener(item) for item in value.split(",") if item.strip())
    names = [listener.name for listener in listeners]
    if len(set(names)) != len(names):
        raise ValueError("each listener name may appear only once")
    return listeners


class Voter(NamedTuple):
    """One entry of `controller.quorum.voters`: `ID@HOST:PORT`."""

    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}"


def parse_voters(text: str) -> tuple[Voter, ...]:
    """`controller.quorum.voters`: `0@host:port,1@host:port,...` (empty: no voters)."""
    voters = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        node, _, address = item.partition("@")
        host, _, port = address.rpartition(":")
        if not node.isdigit() or not host or not port.isdigit():
            raise ValueError(f"voter {item!r} is not id@host:port")
        voters.append(Voter(int(node), host, int(port)))
    if len({v.node_id for v in voters}) != len(voters):
        raise ValueError("each voter id may appear only once")
    return tuple(voters)


def parse_protocol_map(entries: tuple[str, ...]) -> dict[str, str]:
    """`listener.security.protocol.map`: `NAME:PROTOCOL,...` as listener name -> security protocol."""
    mapping = {}
    for entry in entries:
        name, sep, protocol = (part.strip() for part in entry.partition(":"))
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f"{entry!r} is not NAME:PROTOCOL with PROTOCOL one of {', '.join(sorted(SECURITY_PROTOCOLS))}"
            )
        mapping[name] = protocol
    return mapping


def _protocol_map(entries: tuple[str, ...]) -> tuple[str, ...]:
    parse_protocol_map(entries)
    return entries


def _mechanisms(entries: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [name for name in entries if name not in SASL_MECHANISMS]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: supported mechanisms are {', '.join(sorted(SASL_MECHANISMS))}")
    return entries


LISTENER_PREFIX = "listener.name."
_SCRAM_JAAS = re.compile(r"scram-sha-(256|512)\.sasl\.jaas\.config")


def check_listener_key(key: str, value: str) -> None:
    """Kafka's `listener.name.<listener>.<key>` settings that mean something here; anything else is refused
    by name rather than ignored."""
    _, _, rest = key.partition(LISTENER_PREFIX)
    _, _, setting = rest.partition(".")
    if setting == "ssl.client.auth":
        if value not in ("required", "requested", "none"):
            raise ConfigError(f"{key}: must be 'required', 'requested' or 'none' (got {value!r})")
    elif setting == "sasl.enabled.mechanisms":
        try:
            _mechanisms(tuple(x.strip() for x in value.split(",") if x.strip()))
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    elif _SCRAM_JAAS.fullmatch(setting):
        # SCRAM credentials live in the metadata log: the JAAS line names only the login module.
        if "ScramLoginModule" not in value:
            raise ConfigError(f"{key}: only org.apache.kafka.common.security.scram.ScramLoginModule is supported")
    elif setting == "plain.sasl.jaas.config":
        raise ConfigError(
            f"{key}: PLAIN checks passwords against the users' SCRAM credentials, not JAAS user_ options "
            "(docs/security.md)"
        )
    else:
        raise ConfigError(
            f"unknown broker config {key!r}: per-listener ssl.client.auth, sasl.enabled.mechanisms and "
            "scram-sha-256/512.sasl.jaas.config are supported"
        )


def _authorizer(value: str) -> str:
    if value and value not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"supported authorizers are {', '.join(sorted(AUTHORIZER_CLASS_NAMES))} (or empty: none)")
    return value


def _principals(value: object) -> object:
    # Kafka separates super.users with semicolons: principal names may hold commas (TLS distinguished names).
    if not isinstance(value, str):
        return value
    principals = tuple(item.strip() for item in value.split(";") if item.strip())
    for principal in principals:
        if ":" not in principal:
            raise ValueError(f"{principal!r} is not TYPE:NAME (as User:alice)")
    return principals


def _voters(value: object) -> object:
    return parse_voters(value) if isinstance(value, str) else value


# --- value types shared by broker keys and their topic-level synonyms ------------------------------------

Int = Annotated[int, BeforeValidator(_java_integer), Field(ge=INT_MIN, le=INT_MAX)]
Short = Annotated[int, BeforeValidator(_java_integer), Field(ge=SHORT_MIN, le=SHORT_MAX)]
Long = Annotated[int, BeforeValidator(_java_integer), Field(ge=LONG_MIN, le=LONG_MAX)]
Double = Annotated[float, BeforeValidator(_java_double)]
Boolean = Annotated[bool, BeforeValidator(_java_boolean)]
Text = Annotated[str, BeforeValidator(_trimmed), Field(min_length=1)]

CleanupPolicy = Literal["delete", "compact"]
CompressionType = Literal["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
TimestampType = Literal["CreateTime", "LogAppendTime"]

_CleanupPolicies = Annotated[tuple[CleanupPolicy, ...], BeforeValidator(_comma_list), Field(min_length=1)]
_Compression = Annotated[CompressionType, BeforeValidator(_trimmed)]
_TimestampType = Annotated[TimestampType, BeforeValidator(_trimmed)]
# Kafka 4.0 raised the minimum segment size from 14 bytes to 1 MiB (KIP-1030).
_SegmentBytes = Annotated[Int, Field(ge=1024 * 1024)]
_IndexBytes = Annotated[Int, Field(ge=4)]
_NonNegativeInt = Annotated[Int, Field(ge=0)]
_PositiveInt = Annotated[Int, Field(ge=1)]
_NonNegativeLong = Annotated[Long, Field(ge=0)]
_PositiveLong = Annotated[Long, Field(ge=1)]
_RetentionMs = Annotated[Long, Field(ge=-1)]
_Ratio = Annotated[Double, Field(ge=0.0, le=1.0)]
_SocketBuffer = Annotated[Int, AfterValidator(_socket_buffer)]
_FlushMessages = Annotated[Annotated[Long, Field(ge=1)] | None, AfterValidator(_never_is_none)]
_FlushMs = Annotated[Annotated[Long, Field(ge=0)] | None, AfterValidator(_never_is_none)]
_Listeners = Annotated[tuple[Listener, ...], BeforeValidator(_listeners), Field(min_length=1)]
_Paths = Annotated[tuple[Path, ...], BeforeValidator(_comma_list), Field(min_length=1)]
_Roles = Annotated[tuple[Literal["broker", "controller"], ...], BeforeValidator(_comma_list), Field(min_length=1)]
_Voters = Annotated[tuple[Voter, ...], BeforeValidator(_voters)]
_Names = Annotated[tuple[str, ...], BeforeValidator(_comma_list), Field(min_length=1)]
_ProtocolMap = Annotated[tuple[str, ...], BeforeValidator(_comma_list), AfterValidator(_protocol_map)]
_Mechanisms = Annotated[tuple[str, ...], BeforeValidator(_comma_list), AfterValidator(_mechanisms)]
_Authorizer = Annotated[str, BeforeValidator(_trimmed), AfterValidator(_authorizer)]
_Principals = Annotated[tuple[str, ...], BeforeValidator(_principals)]
_StoreType = Annotated[Literal["PEM", "PKCS12"], BeforeValidator(_trimmed)]
_ClientAuth = Annotated[Literal["required", "requested", "none"], BeforeValidator(_trimmed)]


def format_value(value: object) -> str:
    """A Python config value as Kafka writes it in properties files and DescribeConfigs."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple) and not isinstance(value, Listener):
        return ",".join(format_value(item) for item in value)
    return str(value)


_REASONS = {
    "greater_than_equal": "must be >= {ge}",
    "less_than_equal": "must be <= {le}",
    "too_short": "must not be empty",
    "string_too_short": "must not be empty",
    "literal_error": "must be {expected}",
}


def _describe(error: ErrorDetails, raw: Mapping[str, str], origin: Mapping[str, str]) -> str:
    key = str(error["loc"][0]) if error["loc"] else "config"
    ctx = error.get("ctx", {})
    if error["type"] == "value_error":
        reason = str(ctx["error"])
    elif error["type"] in _REASONS:
        reason = _REASONS[error["type"]].format(**ctx)
    else:
        reason = error["msg"].lower()
    key = origin.get(key, key)
    got = f" (got {raw[key]!r})" if key in raw else ""
    return f"{key}: {reason}{got}"


class _PropertiesModel(BaseModel):
    """A frozen model whose field aliases are Kafka keys and whose input is Kafka-style strings."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_alias=True, validate_by_name=True)
    config_kind: ClassVar[str]  # "broker" or "topic", for error messages

    @classmethod
    def keys(cls) -> frozenset[str]:
        """The Kafka keys this model accepts."""
        return frozenset(field.alias for field in cls.model_fields.values() if field.alias)

    @classmethod
    def no_effect_keys(cls) -> frozenset[str]:
        """Kafka's keys that this model does not act on: accepted, checked by type, reported as having no effect."""
        return frozenset()

    @classmethod
    def _check_keys(cls, keys: set[str], extra_keys: frozenset[str] = frozenset()) -> None:
        known = cls.keys() | extra_keys | cls.no_effect_keys()
        for key in sorted(keys - known):
            hint = difflib.get_close_matches(key, known, n=1)
            suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"unknown {cls.config_kind} config {key!r}{suggestion}")

    @classmethod
    def _from_strings(cls, props: Mapping[str, str], origin: Mapping[str, str], raw: Mapping[str, str]) -> Self:
        try:
            return cls.model_validate(props)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            raise ConfigError("; ".join(_describe(error, raw, origin) for error in errors)) from exc

    def to_properties(self) -> dict[str, str]:
        """Every key that has a value, as strings that `from_properties` reads back to an equal model."""
        return {
            field.alias or name: format_value(value)
            for name, field in type(self).model_fields.items()
            if (value := getattr(self, name)) is not None
        }


def validate_throttled_replicas(value: str) -> str:
    """A throttled-replica list: `*`, empty, or `partition:broker` pairs, comma-separated (Kafka's wording when not)."""
    text = value.strip()
    if text in ("", "*"):
        return text
    entries = [entry.strip() for entry in text.split(",")]
    if not all(re.fullmatch(r"\d+:\d+", entry) for entry in entries):
        raise ValueError(
            "must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )
    return ",".join(entries)


_ThrottledReplicas = Annotated[str, AfterValidator(validate_throttled_replicas)]


# --- broker ----------------------------------------------------------------------------------------------

# Older spellings of a key that Kafka still accepts; the newer key wins when both are given.
_SYNONYMS = {"broker.id": "node.id", "log.dir": "log.dirs"}


class BrokerConfig(_PropertiesModel):
    """A broker's static configuration (`server.properties`), with Kafka 4.x defaults."""

    config_kind: ClassVar[str] = "broker"

    node_id: Annotated[Int, Field(ge=0)] = Field(0, alias="node.id")
    # Kafka's default is /tmp/kafka-logs; a name of our own keeps a real Kafka's data out of reach.
    log_dirs: _Paths = Field((Path("/tmp/kafkette-logs"),), alias="log.dirs")
    listeners: _Listeners = Field((Listener("PLAINTEXT", "127.0.0.1", 9092),), alias="listeners")
    advertised_listeners: _Listeners | None = Field(None, alias="advertised.listeners")
    cluster_id: Text | None = Field(None, alias="cluster.id")  # None: the server generates one on first start
    broker_rack: Text | None = Field(None, alias="broker.rack")
    kafkette_event_loop: Annotated[Literal["asyncio", "uvloop"], BeforeValidator(_trimmed)] = Field(
        "asyncio", alias="kafkette.event.loop"
    )
    # A callback holding the one event loop this long is logged with where it was (broker/server/loop_watch.py);
    # 0: not watched.
    kafkette_event_loop_stall_warn_ms: Annotated[Int, Field(ge=0)] = Field(
        200, alias="kafkette.event.loop.stall.warn.ms"
    )
    # Where Prometheus scrapes this broker (same host as the client listener); 0: no metrics endpoint.
    metrics_port: Annotated[Int, Field(ge=0, le=65535)] = Field(0, alias="metrics.port")

    # KRaft: every broker is also a voter unless process.roles says otherwise; the voter entry for node.id
    # is where this node's controller listens. Empty voters: a quorum of one, reached in-process only.
    process_roles: _Roles = Field(("broker", "controller"), alias="process.roles")
    controller_quorum_voters: _Voters = Field((), alias="controller.quorum.voters")
    # A listener named here in `listeners` is where this node's controller binds (else its voter address).
    controller_listener_names: _Names = Field(("CONTROLLER",), alias="controller.listener.names")
    # Only PLAINTEXT exists, so the map is checked for that and otherwise informational.
    listener_security_protocol_map: _ProtocolMap | None = Field(None, alias="listener.security.protocol.map")
    inter_broker_listener_name: Text | None = Field(None, alias="inter.broker.listener.name")
    # Security (docs/security.md): TLS stores, SASL mechanisms, the authorizer. Kafka's JKS stores are not read.
    ssl_keystore_type: _StoreType = Field("PKCS12", alias="ssl.keystore.type")
    ssl_keystore_location: Path | None = Field(None, alias="ssl.keystore.location")
    ssl_keystore_password: str | None = Field(None, alias="ssl.keystore.password")
    ssl_key_password: str | None = Field(None, alias="ssl.key.password")
    ssl_truststore_type: _StoreType = Field("PKCS12", alias="ssl.truststore.type")
    ssl_truststore_location: Path | None = Field(None, alias="ssl.truststore.location")
    ssl_truststore_password: str | None = Field(None, alias="ssl.truststore.password")
    ssl_client_auth: _ClientAuth = Field("none", alias="ssl.client.auth")
    ssl_endpoint_identification_algorithm: str = Field("https", alias="ssl.endpoint.identification.algorithm")
    sasl_enabled_mechanisms: _Mechanisms = Field(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), alias="sasl.enabled.mechanisms"
    )
    authorizer_class_name: _Authorizer = Field("", alias="authorizer.class.name")
    super_users: _Principals = Field((), alias="super.users")
    allow_everyone_if_no_acl_found: Boolean = Field(False, alias="allow.everyone.if.no.acl.found")
    # Kafka's per-listener settings, `listener.name.<listener>.<key>` -> value (see check_listener_key).
    listener_overrides: tuple[tuple[str, str], ...] = ()
    # Kafka keys set in server.properties that have no effect here (no_effect_keys), sorted, values trimmed.
    no_effect_settings: tuple[tuple[str, str], ...] = ()
    controller_quorum_election_timeout_ms: _PositiveInt = Field(1000, alias="controller.quorum.election.timeout.ms")
    controller_quorum_fetch_timeout_ms: _PositiveInt = Field(2000, alias="controller.quorum.fetch.timeout.ms")
    broker_session_timeout_ms: _PositiveInt = Field(9000, alias="broker.session.timeout.ms")
    broker_heartbeat_interval_ms: _PositiveInt = Field(2000, alias="broker.heartbeat.interval.ms")
    replica_lag_time_max_ms: _PositiveLong = Field(30000, alias="replica.lag.time.max.ms")
    # How long a producer that writes nothing keeps its sequences and epoch on a partition (Kafka's default: a day).
    producer_id_expiration_ms: Annotated[Int, Field(ge=1)] = Field(86400000, alias="producer.id.expiration.ms")
    replica_fetch_max_bytes: _PositiveInt = Field(1048576, alias="replica.fetch.max.bytes")
    # Bytes a second a leader sends to, or a follower fetches for, throttled replicas (dynamic; see
    # broker/replication/throttle.py). Kafka's default: no throttle.
    leader_replication_throttled_rate: _NonNegativeLong = Field(LONG_MAX, alias="leader.replication.throttled.rate")
    follower_replication_throttled_rate: _NonNegativeLong = Field(LONG_MAX, alias="follower.replication.throttled.rate")
    # Bytes a second copied into future logs by replica moves between log dirs (AlterReplicaLogDirs); dynamic.
    replica_alter_log_dirs_io_max_bytes_per_second: _NonNegativeLong = Field(
        LONG_MAX, alias="replica.alter.log.dirs.io.max.bytes.per.second"
    )
    replica_fetch_wait_max_ms: _PositiveInt = Field(500, alias="replica.fetch.wait.max.ms")
    replica_fetch_backoff_ms: _NonNegativeInt = Field(1000, alias="replica.fetch.backoff.ms")
    # Incremental fetch sessions (KIP-227) the broker keeps for followers and consumers; 0: none, every fetch lists
    # all its partitions and is answered for all of them.
    max_incremental_fetch_session_cache_slots: _NonNegativeInt = Field(
        1000, alias="max.incremental.fetch.session.cache.slots"
    )
    auto_leader_rebalance_enable: Boolean = Field(True, alias="auto.leader.rebalance.enable")
    # false: a SIGTERM'd broker exits without first asking the controller to move its leaderships away.
    controlled_shutdown_enable: Boolean = Field(True, alias="controlled.shutdown.enable")
    leader_imbalance_check_interval_seconds: _PositiveLong = Field(300, alias="leader.imbalance.check.interval.seconds")

    num_partitions: _PositiveInt = Field(1, alias="num.partitions")
    default_replication_factor: _PositiveInt = Field(1, alias="default.replication.factor")
    auto_create_topics_enable: Boolean = Field(True, alias="auto.create.topics.enable")
    delete_topic_enable: Boolean = Field(True, alias="delete.topic.enable")
    message_max_bytes: _NonNegativeInt = Field(1048588, alias="message.max.bytes")
    socket_request_max_bytes: _PositiveInt = Field(104857600, alias="socket.request.max.bytes")
    # 256 KiB where Kafka sets 100 KiB. Autotuned (-1), a socket queues megabytes more than the client's window
    # takes; the client's ACKs then send that backlog from its own core while the broker's next sendfile sends from
    # another, segments arrive out of order and TCP retransmits them (137 reorderings, 63 segments over 8 rounds of
    # the 1 KiB six-partition librdkafka consume: 0.89x Kafka; at 256 KiB none, 0.99x). At 100 KiB the event loop
    # turns for every 200 KB sent (1 KiB Java consume 0.89x Kafka at 1.7x the CPU per record). Measured side by
    # side: bench/results/send-buffer-autotuned.md; 4 MiB reorders too, send-buffer.md (make bench-send-buffer);
    # receives, socket-buffers.md.
    socket_send_buffer_bytes: _SocketBuffer = Field(262144, alias="socket.send.buffer.bytes")
    socket_receive_buffer_bytes: _SocketBuffer = Field(-1, alias="socket.receive.buffer.bytes")
    min_insync_replicas: _PositiveInt = Field(1, alias="min.insync.replicas")
    unclean_leader_election_enable: Boolean = Field(False, alias="unclean.leader.election.enable")
    compression_type: _Compression = Field("producer", alias="compression.type")

    log_segment_bytes: _SegmentBytes = Field(1073741824, alias="log.segment.bytes")
    log_roll_ms: _PositiveLong | None = Field(None, alias="log.roll.ms")
    log_roll_hours: _PositiveInt = Field(168, alias="log.roll.hours")
    log_roll_jitter_ms: _NonNegativeLong | None = Field(None, alias="log.roll.jitter.ms")
    log_roll_jitter_hours: _NonNegativeInt = Field(0, alias="log.roll.jitter.hours")
    log_index_interval_bytes: _NonNegativeInt = Field(4096, alias="log.index.interval.bytes")
    log_index_size_max_bytes: _IndexBytes = Field(10485760, alias="log.index.size.max.bytes")
    log_preallocate: Boolean = Field(False, alias="log.preallocate")
    log_flush_interval_messages: _FlushMessages = Field(None, alias="log.flush.interval.messages")
    log_flush_interval_ms: _FlushMs = Field(None, alias="log.flush.interval.ms")
    # How often a timer looks for logs whose last flush is flush.ms old; never by default, as in Kafka.
    log_flush_scheduler_interval_ms: _FlushMs = Field(None, alias="log.flush.scheduler.interval.ms")
    log_segment_delete_delay_ms: _NonNegativeLong = Field(60000, alias="log.segment.delete.delay.ms")
    # How often the recovery-point and log-start-offset checkpoints are written (with the high watermarks').
    log_flush_offset_checkpoint_interval_ms: _NonNegativeInt = Field(
        60000, alias="log.flush.offset.checkpoint.interval.ms"
    )
    log_flush_start_offset_checkpoint_interval_ms: _NonNegativeInt = Field(
        60000, alias="log.flush.start.offset.checkpoint.interval.ms"
    )

    log_retention_ms: _RetentionMs | None = Field(None, alias="log.retention.ms")
    log_retention_minutes: Int | None = Field(None, alias="log.retention.minutes")
    log_retention_hours: Int = Field(168, alias="log.retention.hours")
    log_retention_bytes: Long = Field(-1, alias="log.retention.bytes")
    log_retention_check_interval_ms: _PositiveLong = Field(300000, alias="log.retention.check.interval.ms")
    log_cleanup_policy: _CleanupPolicies = Field(("delete",), alias="log.cleanup.policy")
    log_cleaner_delete_retention_ms: _NonNegativeLong = Field(86400000, alias="log.cleaner.delete.retention.ms")
    log_cleaner_min_cleanable_ratio: _Ratio = Field(0.5, alias="log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms: _NonNegativeLong = Field(0, alias="log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: _PositiveLong = Field(LONG_MAX, alias="log.cleaner.max.compaction.lag.ms")
    # The housekeeper looks for dirty compacted logs at least this often, as Kafka's idle cleaner thread does.
    log_cleaner_backoff_ms: _NonNegativeLong = Field(15000, alias="log.cleaner.backoff.ms")
    log_cleaner_enable: Boolean = Field(True, alias="log.cleaner.enable")
    # Threads per log directory that close (flush) its logs at shutdown; Kafka's also open them at start-up.
    # Kafka's default is 2; a close here mostly waits on the kernel (fsyncs, or creating each log's new leader-epoch
    # checkpoint), and the waits overlap (8 threads shut 10,000 partitions down in about half the time of 2,
    # docs/operations.md).
    num_recovery_threads_per_data_dir: _PositiveInt = Field(8, alias="num.recovery.threads.per.data.dir")
    kafkette_log_shutdown_sync: Annotated[ShutdownSync, BeforeValidator(_trimmed)] = Field(
        "syncfs", alias="kafkette.log.shutdown.sync"
    )

    log_message_timestamp_type: _TimestampType = Field("CreateTime", alias="log.message.timestamp.type")
    log_message_timestamp_before_max_ms: _NonNegativeLong = Field(LONG_MAX, alias="log.message.timestamp.before.max.ms")
    # Kafka 4.0 lowered this from Long.MAX_VALUE to one hour (KIP-1030).
    log_message_timestamp_after_max_ms: _NonNegativeLong = Field(3600000, alias="log.message.timestamp.after.max.ms")

    offsets_topic_num_partitions: _PositiveInt = Field(50, alias="offsets.topic.num.partitions")
    # Kafka defaults to 3 and refuses to create __consumer_offsets on a smaller cluster, which would make
    # every single-node laptop broker need this line; 1 works everywhere and a cluster raises it.
    offsets_topic_replication_factor: Annotated[Short, Field(ge=1)] = Field(1, alias="offsets.topic.replication.factor")
    group_initial_rebalance_delay_ms: _NonNegativeInt = Field(3000, alias="group.initial.rebalance.delay.ms")
    group_min_session_timeout_ms: _NonNegativeInt = Field(6000, alias="group.min.session.timeout.ms")
    group_max_session_timeout_ms: _NonNegativeInt = Field(1800000, alias="group.max.session.timeout.ms")
    group_max_size: _PositiveInt = Field(INT_MAX, alias="group.max.size")
    offsets_retention_minutes: _PositiveInt = Field(10080, alias="offsets.retention.minutes")
    offsets_retention_check_interval_ms: _PositiveLong = Field(600000, alias="offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: _NonNegativeInt = Field(4096, alias="offset.metadata.max.bytes")
    offsets_commit_timeout_ms: _PositiveInt = Field(5000, alias="offsets.commit.timeout.ms")
    transaction_state_log_num_partitions: _PositiveInt = Field(50, alias="transaction.state.log.num.partitions")
    # 1 rather than Kafka's 3, for the reason offsets.topic.replication.factor is.
    transaction_state_log_replication_factor: Annotated[Short, Field(ge=1)] = Field(
        1, alias="transaction.state.log.replication.factor"
    )
    transaction_max_timeout_ms: _PositiveInt = Field(900000, alias="transaction.max.timeout.ms")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: _PositiveInt = Field(
        10000, alias="transaction.abort.timed.out.transaction.cleanup.interval.ms"
    )

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Validate Kafka-style `key -> string` properties; raise ConfigError naming the first bad key."""
        overrides = tuple(sorted((k, v.strip()) for k, v in props.items() if k.startswith(LISTENER_PREFIX)))
        for key, value in overrides:
            check_listener_key(key, value)
        props = {k: v for k, v in props.items() if not k.startswith(LISTENER_PREFIX)}
        cls._check_keys(set(props), frozenset(_SYNONYMS))
        inert = cls.no_effect_keys()
        no_effect = tuple(
            sorted((k, check_kafka_value(KAFKA_BROKER_KEYS[k], v)) for k, v in props.items() if k in inert)
        )
        props = {k: v for k, v in props.items() if k not in inert}
        if "broker.id" in props and "node.id" in props and props["broker.id"].strip() != props["node.id"].strip():
            raise ConfigError(
                f"broker.id: must equal node.id when both are set (got {props['broker.id']!r} and "
                f"node.id {props['node.id']!r})"
            )
        resolved = {key: value for key, value in props.items() if key not in _SYNONYMS}
        origin: dict[str, str] = {}
        for old, new in _SYNONYMS.items():
            if old in props and new not in props:
                resolved[new] = props[old]
                origin[new] = old
        config = cls._from_strings(resolved, origin, props)
        names = {x.name.lower() for x in config.listeners}
        for key, _ in overrides:
            if key[len(LISTENER_PREFIX) :].split(".", 1)[0] not in names:
                raise ConfigError(f"{key}: no listener of that name in listeners")
        return config.model_copy(update={"listener_overrides": overrides, "no_effect_settings": no_effect})

    @classmethod
    def no_effect_keys(cls) -> frozenset[str]:
        return _BROKER_NO_EFFECT_KEYS

    def to_properties(self) -> dict[str, str]:
        properties = super().to_properties()
        properties.pop("listener_overrides", None)
        properties.pop("no_effect_settings", None)
        return properties | dict(self.listener_overrides) | dict(self.no_effect_settings)

    def listener_setting(self, listener: str, key: str) -> str | None:
        """`listener.name.<listener>.<key>` when set (Kafka's per-listener override), else None."""
        return dict(self.listener_overrides).get(f"{LISTENER_PREFIX}{listener.lower()}.{key}")

    def ssl_client_auth_on(self, listener: str) -> str:
        return self.listener_setting(listener, "ssl.client.auth") or self.ssl_client_auth

    def sasl_mechanisms_on(self, listener: str) -> tuple[str, ...]:
        value = self.listener_setting(listener, "sasl.enabled.mechanisms")
        return tuple(x.strip() for x in value.split(",") if x.strip()) if value else self.sasl_enabled_mechanisms

    @property
    def flush_ms(self) -> int | None:
        """The topics' default flush.ms: log.flush.interval.ms, else log.flush.scheduler.interval.ms, as Kafka
        takes it (None: never)."""
        return (
            self.log_flush_interval_ms
            if self.log_flush_interval_ms is not None
            else self.log_flush_scheduler_interval_ms
        )

    @property
    def checkpoint_interval_ms(self) -> int:
        """One timer writes every checkpoint file, so each is written at least as often as its own interval asks
        (at least every millisecond: Kafka allows 0)."""
        return max(
            min(self.log_flush_offset_checkpoint_interval_ms, self.log_flush_start_offset_checkpoint_interval_ms), 1
        )

    @property
    def segment_ms(self) -> int:
        """The effective roll time: log.roll.ms, else log.roll.hours."""
        return self.log_roll_ms if self.log_roll_ms is not None else self.log_roll_hours * MS_PER_HOUR

    @property
    def segment_jitter_ms(self) -> int:
        """The effective roll jitter: log.roll.jitter.ms, else log.roll.jitter.hours."""
        if self.log_roll_jitter_ms is not None:
            return self.log_roll_jitter_ms
        return self.log_roll_jitter_hours * MS_PER_HOUR

    @property
    def retention_ms(self) -> int:
        """The effective retention: log.retention.ms, else .minutes, else .hours; -1 means unlimited."""
        if self.log_retention_ms is not None:
            millis = self.log_retention_ms
        elif self.log_retention_minutes is not None:
            millis = self.log_retention_minutes * MS_PER_MINUTE
        else:
            millis = self.log_retention_hours * MS_PER_HOUR
        return -1 if millis < 0 else millis

    @model_validator(mode="after")
    def _every_listener_has_a_protocol(self) -> Self:
        for listener in self.client_listeners:
            self.security_protocol(listener.name)
        if self.inter_broker_listener_name is not None and self.inter_broker_listener_name not in {
            x.name for x in self.client_listeners
        }:
            raise ValueError(f"inter.broker.listener.name: {self.inter_broker_listener_name!r} is not in listeners")
        if self.controller_security_protocol not in ("PLAINTEXT", "SSL"):
            raise ValueError("controller.listener.names: the controller listener must be PLAINTEXT or SSL")
        if self.security_protocol(self.inter_broker_listener).startswith("SASL_"):
            # Brokers authenticate to each other with TLS client certificates; SASL between brokers is not built.
            raise ValueError("inter.broker.listener.name: the inter-broker listener must be PLAINTEXT or SSL")
        return self

    def security_protocol(self, listener_name: str) -> SecurityProtocol:
        """The protocol of a listener: its entry in listener.security.protocol.map, else its own name's (a
        controller listener left out of the map is PLAINTEXT, as kafkette configs written before TLS say)."""
        mapping = parse_protocol_map(self.listener_security_protocol_map or ())
        protocol = mapping.get(listener_name, listener_name)
        if listener_name in self.controller_listener_names and protocol not in SECURITY_PROTOCOLS:
            protocol = "PLAINTEXT"
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: no security protocol for listener {listener_name!r}")
        return protocol  # type: ignore[return-value]  # checked against SECURITY_PROTOCOLS just above

    @property
    def controller_security_protocol(self) -> SecurityProtocol:
        """The protocol voters speak to each other and brokers to the controller: the first controller
        listener's (PLAINTEXT when none is in `listeners`)."""
        return self.security_protocol(self.controller_listener_names[0])

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers reach each other on: inter.broker.listener.name, else the first client one."""
        return self.inter_broker_listener_name or self.client_listeners[0].name

    def advertised_listener(self, name: str) -> Listener:
        """How clients are told to reach the listener `name` (advertised.listeners, else the listener itself)."""
        for listener in self.advertised_listeners or ():
            if listener.name == name:
                return listener
        return next(x for x in self.listeners if x.name == name)

    @property
    def client_listeners(self) -> tuple[Listener, ...]:
        return tuple(x for x in self.listeners if x.name not in self.controller_listener_names) or self.listeners

    @property
    def listen_address(self) -> tuple[str, int]:
        """Host and port of the first client listener (port 0: the OS picks one, the server reports it)."""
        first = self.client_listeners[0]
        return first.host, first.port

    @property
    def controller_listen_address(self) -> tuple[str, int] | None:
        """Where this node's controller binds when `listeners` names a controller listener."""
        found = [x for x in self.listeners if x.name in self.controller_listener_names]
        return (found[0].host, found[0].port) if found else None

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Host and port clients are told to connect to; the server substitutes its bound port for 0."""
        advertised = self.advertised_listeners
        if advertised is None:
            return self.listen_address
        first = next((x for x in advertised if x.name not in self.controller_listener_names), advertised[0])
        return first.host, first.port


# Kafka's broker keys that kafkette accepts without acting on them (the server logs them once at start-up).
_BROKER_NO_EFFECT_KEYS = frozenset(KAFKA_BROKER_KEYS) - BrokerConfig.keys() - frozenset(_SYNONYMS)


# --- topics ----------------------------------------------------------------------------------------------


class ConfigType(IntEnum):
    """DescribeConfigs' ConfigType codes (response v3+)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class TopicConfig(_PropertiesModel):
    """A topic's effective configuration; field names match the storage layer's LogConfig where shared."""

    config_kind: ClassVar[str] = "topic"

    cleanup_policy: _CleanupPolicies = Field(alias="cleanup.policy")
    compression_type: _Compression = Field(alias="compression.type")
    delete_retention_ms: _NonNegativeLong = Field(alias="delete.retention.ms")
    file_delete_delay_ms: _NonNegativeLong = Field(alias="file.delete.delay.ms")
    flush_messages: _FlushMessages = Field(None, alias="flush.messages")  # None: never force a flush
    flush_ms: _FlushMs = Field(None, alias="flush.ms")
    index_interval_bytes: _NonNegativeInt = Field(alias="index.interval.bytes")
    max_compaction_lag_ms: _PositiveLong = Field(alias="max.compaction.lag.ms")
    max_message_bytes: _NonNegativeInt = Field(alias="max.message.bytes")
    message_timestamp_after_max_ms: _NonNegativeLong = Field(alias="message.timestamp.after.max.ms")
    message_timestamp_before_max_ms: _NonNegativeLong = Field(alias="message.timestamp.before.max.ms")
    message_timestamp_type: _TimestampType = Field(alias="message.timestamp.type")
    min_cleanable_dirty_ratio: _Ratio = Field(alias="min.cleanable.dirty.ratio")
    min_compaction_lag_ms: _NonNegativeLong = Field(alias="min.compaction.lag.ms")
    min_insync_replicas: _PositiveInt = Field(alias="min.insync.replicas")
    preallocate: Boolean = Field(alias="preallocate")
    retention_bytes: Long = Field(alias="retention.bytes")
    retention_ms: _RetentionMs = Field(alias="retention.ms")
    segment_bytes: _SegmentBytes = Field(alias="segment.bytes")
    segment_index_bytes: _IndexBytes = Field(alias="segment.index.bytes")
    segment_jitter_ms: _NonNegativeLong = Field(alias="segment.jitter.ms")
    segment_ms: _PositiveLong = Field(alias="segment.ms")
    unclean_leader_election_enable: Boolean = Field(alias="unclean.leader.election.enable")
    # No broker default: the replicas a move throttles (`*`, or partition:broker pairs), set per topic.
    leader_replication_throttled_replicas: _ThrottledReplicas = Field("", alias="leader.replication.throttled.replicas")
    follower_replication_throttled_replicas: _ThrottledReplicas = Field(
        "", alias="follower.replication.throttled.replicas"
    )

    @classmethod
    def no_effect_keys(cls) -> frozenset[str]:
        return _TOPIC_NO_EFFECT_KEYS


# Kafka's topic keys that kafkette accepts and describes without acting on them (tiered storage, codec levels).
_TOPIC_NO_EFFECT_KEYS = frozenset(KAFKA_TOPIC_KEYS) - TopicConfig.keys()


@dataclass(frozen=True, slots=True)
class _TopicKey:
    broker_attribute: str  # the BrokerConfig attribute (or property) whose value is the topic default
    broker_keys: tuple[str, ...]  # Kafka's broker-level synonyms, highest precedence first
    config_type: ConfigType


_TOPIC_KEYS: dict[str, _TopicKey] = {
    "cleanup.policy": _TopicKey("log_cleanup_policy", ("log.cleanup.policy",), ConfigType.LIST),
    "compression.type": _TopicKey("compression_type", ("compression.type",), ConfigType.STRING),
    "delete.retention.ms": _TopicKey(
        "log_cleaner_delete_retention_ms", ("log.cleaner.delete.retention.ms",), ConfigType.LONG
    ),
    "file.delete.delay.ms": _TopicKey("log_segment_delete_delay_ms", ("log.segment.delete.delay.ms",), ConfigType.LONG),
    "flush.messages": _TopicKey("log_flush_interval_messages", ("log.flush.interval.messages",), ConfigType.LONG),
    "flush.ms": _TopicKey("flush_ms", ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), ConfigType.LONG),
    "index.interval.bytes": _TopicKey("log_index_interval_bytes", ("log.index.interval.bytes",), ConfigType.INT),
    "max.compaction.lag.ms": _TopicKey(
        "log_cleaner_max_compaction_lag_ms", ("log.cleaner.max.compaction.lag.ms",), ConfigType.LONG
    ),
    "max.message.bytes": _TopicKey("message_max_bytes", ("message.max.bytes",), ConfigType.INT),
    "message.timestamp.after.max.ms": _TopicKey(
        "log_message_timestamp_after_max_ms", ("log.message.timestamp.after.max.ms",), ConfigType.LONG
    ),
    "message.timestamp.before.max.ms": _TopicKey(
        "log_message_timestamp_before_max_ms", ("log.message.timestamp.before.max.ms",), ConfigType.LONG
    ),
    "message.timestamp.type": _TopicKey(
        "log_message_timestamp_type", ("log.message.timestamp.type",), ConfigType.STRING
    ),
    "min.cleanable.dirty.ratio": _TopicKey(
        "log_cleaner_min_cleanable_ratio", ("log.cleaner.min.cleanable.ratio",), ConfigType.DOUBLE
    ),
    "min.compaction.lag.ms": _TopicKey(
        "log_cleaner_min_compaction_lag_ms", ("log.cleaner.min.compaction.lag.ms",), ConfigType.LONG
    ),
    "min.insync.replicas": _TopicKey("min_insync_replicas", ("min.insync.replicas",), ConfigType.INT),
    "preallocate": _TopicKey("log_preallocate", ("log.preallocate",), ConfigType.BOOLEAN),
    "retention.bytes": _TopicKey("log_retention_bytes", ("log.retention.bytes",), ConfigType.LONG),
    "retention.ms": _TopicKey(
        "retention_ms", ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), ConfigType.LONG
    ),
    "segment.bytes": _TopicKey("log_segment_bytes", ("log.segment.bytes",), ConfigType.INT),
    "segment.index.bytes": _TopicKey("log_index_size_max_bytes", ("log.index.size.max.bytes",), ConfigType.INT),
    "segment.jitter.ms": _TopicKey(
        "segment_jitter_ms", ("log.roll.jitter.ms", "log.roll.jitter.hours"), ConfigType.LONG
    ),
    "segment.ms": _TopicKey("segment_ms", ("log.roll.ms", "log.roll.hours"), ConfigType.LONG),
    "unclean.leader.election.enable": _TopicKey(
        "unclean_leader_election_enable", ("unclean.leader.election.enable",), ConfigType.BOOLEAN
    ),
}


# --- where a value comes from: static, dynamic (changed at run time), default -------------------------------


class ConfigSource(IntEnum):
    """DescribeConfigs' ConfigSource codes (response v1+), Kafka's numbering."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# The broker keys that IncrementalAlterConfigs may change on a running cluster, per broker or as the cluster
# default: as in Kafka, the highest-precedence broker synonym of each topic config (log.retention.ms, not
# log.retention.hours). Each applies at once to every topic that does not override it.
DYNAMIC_BROKER_KEYS: dict[str, str] = {key.broker_keys[0]: name for name, key in _TOPIC_KEYS.items()}
# Dynamic broker keys that are settings of the broker itself, not topic defaults.
THROTTLE_RATE_KEYS = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)
# Topic keys without a broker-level default (empty unless the topic sets them).
TOPIC_ONLY_KEYS = ("follower.replication.throttled.replicas", "leader.replication.throttled.replicas")


@dataclass(frozen=True, slots=True)
class DynamicBrokerConfigs:
    """Broker configs set at run time and kept in the metadata log: this broker's own (DYNAMIC_BROKER_CONFIG),
    then the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG); both outrank server.properties."""

    broker: Mapping[str, str]
    default: Mapping[str, str]

    def lookup(self, key: str) -> list[Synonym]:
        found = [Synonym(key, self.broker[key], ConfigSource.DYNAMIC_BROKER_CONFIG)] if key in self.broker else []
        if key in self.default:
            found.append(Synonym(key, self.default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        return found


NO_DYNAMIC_CONFIGS = DynamicBrokerConfigs(MappingProxyType({}), MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


_BROKER_ATTRIBUTES = {spec.alias: name for name, spec in BrokerConfig.model_fields.items() if spec.alias}


def broker_synonyms(broker: BrokerConfig, dynamic: DynamicBrokerConfigs, keys: Iterable[str]) -> list[Synonym]:
    """Every value the broker keys have, highest precedence first: for each key in turn its dynamic values,
    its server.properties value, its built-in default (keys without a default, like log.retention.ms, have
    none)."""
    synonyms = []
    for key in keys:
        synonyms += dynamic.lookup(key)
        attribute = _BROKER_ATTRIBUTES[key]
        value = getattr(broker, attribute)
        if attribute in broker.model_fields_set:
            synonyms.append(Synonym(key, format_value(value), ConfigSource.STATIC_BROKER_CONFIG))
        elif BrokerConfig.model_fields[attribute].default is not None:
            default = BrokerConfig.model_fields[attribute].default
            synonyms.append(Synonym(key, format_value(default), ConfigSource.DEFAULT_CONFIG))
    return synonyms


def broker_key_group(key: str) -> tuple[str, ...]:
    """The broker keys that set one value together with `key`, highest precedence first (log.retention.ms,
    .minutes, .hours); just `key` for most."""
    return next((k.broker_keys for k in _TOPIC_KEYS.values() if key in k.broker_keys), (key,))


def broker_config_type(key: str) -> ConfigType:
    """The ConfigType DescribeConfigs reports for a broker key: Kafka's for Kafka's keys, else read off its field's
    bounds and Python type."""
    if key in KAFKA_BROKER_KEYS:
        return ConfigType[KAFKA_BROKER_KEYS[key].type]
    if key in DYNAMIC_BROKER_KEYS:
        return _TOPIC_KEYS[DYNAMIC_BROKER_KEYS[key]].config_type
    spec = BrokerConfig.model_fields[_BROKER_ATTRIBUTES[key]]
    # The Java integer widths appear only as the Le bound their aliases (Int, Short, Long) carry.
    text = f"{spec.annotation!r} {spec.metadata!r}"
    for marker, config_type in (
        ("bool", ConfigType.BOOLEAN),
        ("float", ConfigType.DOUBLE),
        ("tuple", ConfigType.LIST),
        (f"le={LONG_MAX})", ConfigType.LONG),
        (f"le={INT_MAX})", ConfigType.INT),
        (f"le={SHORT_MAX})", ConfigType.SHORT),
    ):
        if marker in text:
            return config_type
    return ConfigType.STRING


def validate_dynamic_broker_configs(changes: Mapping[str, str | None]) -> dict[str, str]:
    """Check broker configs set at run time (None deletes one); return the kept ones with trimmed values."""
    for key in sorted(changes):
        if key not in DYNAMIC_BROKER_KEYS and key not in THROTTLE_RATE_KEYS:
            if key in _BROKER_ATTRIBUTES:
                kind = "a static broker config: it changes only with a restart"
            elif key in _BROKER_NO_EFFECT_KEYS:
                kind = "a Kafka config that has no effect in kafkette"
            else:
                kind = "unknown"
            raise ConfigError(f"{key} cannot be changed on a running broker ({kind})")
    kept = {key: value.strip() for key, value in changes.items() if value is not None}
    for key, value in kept.items():
        if key in THROTTLE_RATE_KEYS:
            if not value.isdigit() or int(value) > LONG_MAX:
                raise ConfigError(f"{key}: must be a number of bytes a second, at least 0 (got {value!r})")
            continue
        topic_key = DYNAMIC_BROKER_KEYS[key]
        try:
            validate_topic_configs({topic_key: value})
        except ConfigError as exc:
            # Checked as the topic config it is the default of; the error names the key that was set.
            raise ConfigError(str(exc).replace(topic_key, key, 1)) from None
    return kept


@dataclass(frozen=True, slots=True)
class TopicConfigDefault:
    """What DescribeConfigs reports for a topic key that the topic does not override."""

    name: str
    value: str
    config_type: ConfigType
    broker_keys: tuple[str, ...]  # broker-level synonyms, highest precedence first
    set_by: str | None  # the broker key set in the broker's configuration (STATIC_BROKER_CONFIG), if any
    synonyms: tuple[Synonym, ...] = ()  # the broker-level values, highest precedence first
    sensitive: bool = False
    read_only: bool = False

    @property
    def is_broker_synonym(self) -> bool:
        return bool(self.broker_keys)

    @property
    def source(self) -> ConfigSource:
        """Where the value comes from: a dynamic broker config, server.properties, or the built-in default."""
        return self.synonyms[0].source if self.synonyms else ConfigSource.DEFAULT_CONFIG


def topic_config_defaults(
    broker: BrokerConfig, dynamic: DynamicBrokerConfigs = NO_DYNAMIC_CONFIGS
) -> dict[str, TopicConfigDefault]:
    """Every topic key with the default this broker gives it (its dynamic configs first), sorted by key."""
    explicit = {BrokerConfig.model_fields[name].alias for name in broker.model_fields_set}
    defaults: dict[str, TopicConfigDefault] = {}
    for name, key in sorted(_TOPIC_KEYS.items()):
        value = getattr(broker, key.broker_attribute)
        live = dynamic.lookup(key.broker_keys[0])
        defaults[name] = TopicConfigDefault(
            name=name,
            value=live[0].value
            if live and live[0].value is not None
            else format_value(LONG_MAX if value is None else value),
            config_type=key.config_type,
            broker_keys=key.broker_keys,
            set_by=next((broker_key for broker_key in key.broker_keys if broker_key in explicit), None),
            synonyms=tuple(broker_synonyms(broker, dynamic, key.broker_keys)),
        )
    for name in TOPIC_ONLY_KEYS:
        defaults[name] = TopicConfigDefault(name, "", ConfigType.LIST, broker_keys=(), set_by=None)
    for name in _TOPIC_NO_EFFECT_KEYS:
        kafka_key = KAFKA_TOPIC_KEYS[name]
        if not kafka_key.internal:
            synonyms = tuple(s for k in kafka_key.broker_synonyms for s in no_effect_synonyms(broker, k))
            defaults[name] = TopicConfigDefault(
                name=name,
                value=synonyms[0].value or "" if synonyms else kafka_key.default or "",
                config_type=ConfigType[kafka_key.type],
                broker_keys=kafka_key.broker_synonyms,
                set_by=next((s.name for s in synonyms if s.source == ConfigSource.STATIC_BROKER_CONFIG), None),
                synonyms=synonyms,
            )
    return dict(sorted(defaults.items()))


def no_effect_synonyms(broker: BrokerConfig, key: str) -> list[Synonym]:
    """A no-effect broker key's values, highest precedence first: server.properties, then Kafka's default."""
    synonyms = []
    set_value = dict(broker.no_effect_settings).get(key)
    if set_value is not None:
        synonyms.append(Synonym(key, set_value, ConfigSource.STATIC_BROKER_CONFIG))
    default = KAFKA_BROKER_KEYS[key].default
    if default is not None:
        synonyms.append(Synonym(key, default, ConfigSource.DEFAULT_CONFIG))
    return synonyms


def effective_topic_config(
    broker: BrokerConfig, overrides: Mapping[str, str], dynamic: DynamicBrokerConfigs = NO_DYNAMIC_CONFIGS
) -> TopicConfig:
    """The typed configuration of a topic: the broker's defaults (dynamic ones first), then its overrides."""
    TopicConfig._check_keys(set(overrides))
    acted_on = TopicConfig.keys()
    overrides = {name: value for name, value in overrides.items() if name in acted_on}
    defaults = {
        name: default.value for name, default in topic_config_defaults(broker, dynamic).items() if name in acted_on
    }
    return TopicConfig._from_strings({**defaults, **overrides}, {}, overrides)


def validate_topic_configs(overrides: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic overrides (CreateTopics, AlterConfigs); return the kept ones with trimmed values.

    A None value names a key without overriding it (an override being deleted): the key must be known,
    and it is left out of the result.
    """
    TopicConfig._check_keys(set(overrides))
    kept = {name: value.strip() for name, value in overrides.items() if value is not None}
    for name in kept.keys() & _TOPIC_NO_EFFECT_KEYS:
        check_kafka_value(KAFKA_TOPIC_KEYS[name], kept[name])
    if kept.get("remote.storage.enable", "false").lower() == "true":
        # Kafka's answer when the brokers' remote.log.storage.system.enable is off: no tiered storage here.
        raise ConfigError("remote.storage.enable: tiered storage is not available on this cluster")
    effective_topic_config(BrokerConfig(), kept)
    return kept
