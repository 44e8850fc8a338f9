"""The pure parts of `make chaos-quorum-heal` (tests/chaos/quorum_heal.py)."""

from __future__ import annotations

from datetime import datetime

from quorum_heal import Round, elections_between, isolated_voter, settled_after, summary


def _at(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").timestamp()


LOG = """\
2026-12-05 17:18:09,515 INFO kafkette.broker.controller.quorum: quorum: Candidate at epoch 6, leader None, log end 9
2026-12-05 17:18:10,556 INFO kafkette.broker.controller.quorum: quorum: Unattached at epoch 7, leader None, log end 10
2026-12-05 17:18:11,800 INFO kafkette.broker.controller.quorum: quorum: Candidate at epoch 8, leader None, log end 10
2026-12-05 17:18:13,927 INFO kafkette.broker.controller.quorum: quorum: Candidate at epoch 9, leader None, log end 10
"""


def test_elections_are_counted_in_the_window_after_the_heal() -> None:
    healed = _at("2026-12-05 17:18:10")
    assert elections_between(LOG, healed, healed + 12) == 2  # 11.800 and 13.927; not 09.515, not the Unattached
    assert elections_between(LOG, healed, healed + 3) == 1


def test_settled_is_the_start_of_the_last_steady_stretch() -> None:
    one, zero, split, none = frozenset({1}), frozenset({0}), frozenset({0, 1}), frozenset({-1})
    samples = [(10.0, split), (10.5, one), (11.0, none), (11.5, zero), (12.0, zero), (12.5, one), (13.0, one)]
    assert settled_after(samples, healed=10.0) == 2.5  # controller 1 from 12.5 s to the end
    assert settled_after(samples[:5], healed=10.0) == 1.5
    assert settled_after([(10.0, one)], healed=10.2) == 0.0
    assert settled_after(samples[:3], healed=10.0) is None  # it ends with no controller


def test_summary() -> None:
    rounds = [Round(0, 0, 0.5), Round(1, 1, 1.0), Round(2, 4, 7.5), Round(0, 0, None)]
    line = summary(rounds, 4.3)
    assert line.startswith("quorum-heal: 4 rounds, the controller isolated 4.3 s each; elections begun after ")
    assert "median 0.5, max 4, rounds with more than 2 1; one controller from: median 1.0 s, max 7.5 s" in line
    assert line.endswith("; 1 rounds never settled within 12 s")


def test_the_isolated_voter_is_the_controller_or_its_followers_in_turn() -> None:
    assert isolated_voter("controller", 2, (0, 1, 2), 5) == 2
    assert [isolated_voter("follower", 1, (2, 0, 1), number) for number in range(3)] == [0, 2, 0]
    assert "a voter following it isolated 4.3 s" in summary([Round(0, 1, 0.5)], 4.3, "follower")
