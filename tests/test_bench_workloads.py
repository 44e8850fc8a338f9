"""bench/workloads.py: which directories belong to a deleted topic, as the comparison waits for their removal; the
malloc library the librdkafka clients are started with."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from workloads import librdkafka_environment, topic_directories


def test_a_topics_directories_are_its_partitions_and_their_doomed_renames_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    names = ["bench-0-1-0", "bench-0-1-11", "bench-0-1-2.3f9a0c1d2e4b5a6978877665544332211-delete"]
    others = ["bench-0-1-java-0", "bench-0-10-0", "bench-0-1", "bench-0-1-3.x-delete", "__consumer_offsets-0"]
    for name in names + others:
        (data / name).mkdir(parents=True)
    (data / "bench-0-1-4.log").write_text("")  # a file, not a partition directory
    assert topic_directories(tmp_path, "bench-0-1") == sorted(names)
    assert topic_directories(tmp_path, "bench-0-1-java") == ["bench-0-1-java-0"]
    assert topic_directories(tmp_path, "absent") == []


def test_glibc_means_no_library_preloaded_even_one_the_caller_had(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "libsomething.so")
    environment = librdkafka_environment("glibc")
    assert "LD_PRELOAD" not in environment
    assert environment["PATH"] == os.environ["PATH"]


def test_a_malloc_library_not_installed_is_an_error_that_says_how_to_install_it() -> None:
    with pytest.raises(RuntimeError, match=r"no-such-malloc not found.*make bench-tools"):
        librdkafka_environment("no-such-malloc")
