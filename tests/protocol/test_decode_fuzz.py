"""Decoder fuzz: every request type at every version, fed broken frames, fails only with DecodeError.

A request frame comes from a stranger, so `decode_request` must turn every byte string into either a
request or the codec's own `DecodeError` (which the server answers by closing that one connection):
any other exception, or a decode that allocates or loops without bound, is a bug. Three sweeps:
every prefix of a valid frame of every (request, version), an oversized length or array count
written at every position of one, and hypothesis mutations (flipped bytes, cut or inserted runs,
random bytes, bad varints) of random valid frames. ``make fuzz`` runs many more hypothesis cases
through KAFKETTE_FUZZ_CASES. The same frames against a real broker: `test_frame_fuzz.py`.
"""

from __future__ import annotations

import contextlib
import os
import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from message_factory import MessageFactory, versions_of

from kafkette.broker.protocol.codec import DecodeError
from kafkette.broker.protocol.framing import decode_request, encode_request
from kafkette.broker.protocol.messages import REQUESTS
from kafkette.broker.protocol.types import Message

CASES = int(os.environ.get("KAFKETTE_FUZZ_CASES", "300"))
# Lengths and counts a stranger might write: the largest int32, a negative below null (-1), and unsigned varints
# that run to five bytes or never end.
HUGE_INT32 = (struct.pack(">i", 0x7FFFFFFF), struct.pack(">i", -2))
BAD_VARINTS = (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff", b"\x80")


def every_request_version() -> list[tuple[type[Message], int]]:
    classes = sorted((REQUESTS[key] for key in REQUESTS), key=lambda cls: cls.NAME)
    return [(cls, version) for cls in classes for version in versions_of(cls)]


REQUEST_VERSIONS = every_request_version()


def valid_frame(cls: type[Message], version: int, seed: int) -> bytes:
    """A random valid request of ``cls`` at ``version``, without its size prefix."""
    body = MessageFactory(random.Random(seed)).build(cls, version)
    return encode_request(body, version, correlation_id=seed, client_id="fuzz")[4:]


def decodes_or_refuses(frame: bytes) -> None:
    """The property: a request or DecodeError, nothing else."""
    with contextlib.suppress(DecodeError):
        decode_request(memoryview(frame))


@pytest.mark.parametrize(("cls", "version"), REQUEST_VERSIONS, ids=lambda item: getattr(item, "NAME", str(item)))
def test_every_prefix_and_every_oversized_length(cls: type[Message], version: int) -> None:
    frame = valid_frame(cls, version, seed=version)
    decode_request(memoryview(frame))  # the untouched frame decodes
    for end in range(len(frame)):
        decodes_or_refuses(frame[:end])
    for position in range(8, len(frame)):  # past api key, version and correlation id, which the server peeks
        for patch in (*HUGE_INT32, *BAD_VARINTS):
            decodes_or_refuses(frame[:position] + patch + frame[position + len(patch) :])


MUTATIONS = ("flip", "cut", "insert", "overwrite", "random")


@st.composite
def broken_frames(draw: st.DrawFn) -> bytes:
    cls, version = draw(st.sampled_from(REQUEST_VERSIONS))
    frame = bytearray(valid_frame(cls, version, draw(st.integers(0, 2**31 - 1))))
    for _ in range(draw(st.integers(1, 4))):
        mutation = draw(st.sampled_from(MUTATIONS))
        position = draw(st.integers(0, max(0, len(frame) - 1)))
        if mutation == "flip" and frame:
            frame[position] ^= 1 << draw(st.integers(0, 7))
        elif mutation == "cut":
            del frame[position : position + draw(st.integers(1, 16))]
        elif mutation == "insert":
            frame[position:position] = draw(st.binary(min_size=1, max_size=16))
        elif mutation == "overwrite":
            patch = draw(st.sampled_from((*HUGE_INT32, *BAD_VARINTS, b"\x00\x00\x00\x00", b"\xff\xff")))
            frame[position : position + len(patch)] = patch
        else:
            frame[8:] = draw(st.binary(max_size=64))
    return bytes(frame)


@settings(max_examples=CASES, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
@given(broken_frames())
def test_mutated_frames_decode_or_raise_decode_error(frame: bytes) -> None:
    decodes_or_refuses(frame)


@settings(max_examples=CASES, deadline=None, database=None)
@given(st.sampled_from(sorted(REQUESTS)), st.integers(-1, 20), st.binary(max_size=128))
def test_random_bodies_decode_or_raise_decode_error(api_key: int, version: int, body: bytes) -> None:
    decodes_or_refuses(struct.pack(">hhi", api_key, version, 7) + body)
