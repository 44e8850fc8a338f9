"""Test-suite wide setup.

The broker fixtures (`kafkette_broker`, `kafkette_broker_in_process`) live in the package so
that applications get them too; installed, the package registers them as a pytest11 plugin
under the same name, so pytest loads the module once whichever way it is found first.

`make test` runs the suite on two pytest-xdist workers (`-n 2`): most tests wait on broker processes more than
they use a core. What one worker runs whole and in a row is `work_units.work_unit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from work_units import work_unit

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.loadfile import LoadFileScheduling

pytest_plugins = ["kafkette.broker.testing"]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadFileScheduling:
    from xdist.scheduler.loadfile import LoadFileScheduling

    class ByWorkUnit(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)
