"""The topics a consumer group's members subscribe to, read from their ConsumerProtocolSubscription."""

from __future__ import annotations

import struct

from kafkette.broker.group.group import Group
from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription

CONSUMER_PROTOCOL_TYPE = "consumer"
_VERSION = struct.Struct(">h")


def subscribed_topics(group: Group) -> set[str]:
    """Every topic a member subscribes to; newer subscription versions are read as the newest known one,
    as Kafka's clients do, since fields are only ever appended."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return set()
    newest = ConsumerProtocolSubscription.VALID_VERSIONS[1]
    topics: set[str] = set()
    for member in group.members.values():
        data = member.metadata(group.protocol_name)
        try:
            (version,) = _VERSION.unpack_from(data)
            subscription = ConsumerProtocolSubscription.decode(data[2:], min(version, newest))
        except (struct.error, DecodeError):
            continue
        topics.update(subscription.topics)
    return topics
