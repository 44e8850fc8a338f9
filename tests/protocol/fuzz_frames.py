"""Broken request frames for the decoder fuzz (`test_decode_fuzz.py`) and the broker fuzz (`test_frame_fuzz.py`).

A frame starts as a valid random request (`message_factory.MessageFactory`) of some request type and
version, then takes one to four mutations: a flipped bit, a cut or inserted run, an oversized length or
array count or a bad varint written over it, or a body of random bytes behind the header.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence

from hypothesis import strategies as st
from message_factory import MessageFactory, versions_of

from kafkette.broker.protocol.framing import encode_request
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.types import Message

# Lengths and counts a stranger might write: the largest int32, a negative below null (-1), and unsigned varints
# that run to five bytes or never end.
HUGE_INT32 = (struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", -2))
BAD_VARINTS = (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff", b"\x80")
PATCHES = (*HUGE_INT32, *BAD_VARINTS, b"\x00\x00\x00\x00", b"\xff\xff")
HEADER_BYTES = 8  # api key, api version, correlation id: what the server peeks before it decodes
MUTATIONS = ("flip", "cut", "insert", "overwrite", "random")


def every_request_version() -> list[tuple[type[Message], int]]:
    classes = sorted((REQUESTS[key] for key in REQUESTS), key=lambda cls: cls.NAME)
    return [(cls, version) for cls in classes for version in versions_of(cls)]


def valid_frame(cls: type[Message], version: int, seed: int) -> bytes:
    """A random valid request of ``cls`` at ``version`` (correlation id ``seed``), without its size prefix."""
    body = MessageFactory(random.Random(seed)).build(cls, version)
    return encode_request(body, version, correlation_id=seed, client_id="fuzz")[4:]


@st.composite
def broken_frames(draw: st.DrawFn, requests: Sequence[tuple[type[Message], int]]) -> bytes:
    """A request frame (without size prefix) of one of ``requests``, mutated past its header."""
    cls, version = draw(st.sampled_from(requests))
    frame = bytearray(valid_frame(cls, version, draw(st.integers(0, 2**31 - 1))))
    for _ in range(draw(st.integers(1, 4))):
        mutation = draw(st.sampled_from(MUTATIONS))
        position = draw(st.integers(HEADER_BYTES, max(HEADER_BYTES, len(frame) - 1)))
        if mutation == "flip" and position < len(frame):
            frame[position] ^= 1 << draw(st.integers(0, 7))
        elif mutation == "cut":
            del frame[position : position + draw(st.integers(1, 16))]
        elif mutation == "insert":
            frame[position:position] = draw(st.binary(min_size=1, max_size=16))
        elif mutation == "overwrite":
            patch = draw(st.sampled_from(PATCHES))
            frame[position : position + len(patch)] = patch
        else:
            frame[HEADER_BYTES:] = draw(st.binary(max_size=64))
    return bytes(frame)
