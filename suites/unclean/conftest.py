"""The unclean-election suite's fixture: the outcome of its one scenario, run once per session.

The scenario (:mod:`suites.unclean.scenario`) puts every setting through the same faults at the
same moments, and each test judges one setting from its outcome. Whichever test comes first
runs it, inside that test's ``cluster`` fixture (so a target without the needed capabilities
skips before anything starts, and the plugin restores the brokers after that test); the others
judge the same outcome. A scenario that broke down is reported by every test that needs it.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.cluster.targets import Target

from .scenario import Outcome, run


@pytest.fixture(scope="session")
def _scenario_runs() -> dict[str, Outcome | BaseException]:
    return {}


@pytest.fixture
def unclean_outcome(request: pytest.FixtureRequest, kafka_target: Target, kafka_admin: Any,
                    tmp_path_factory: pytest.TempPathFactory,
                    _scenario_runs: dict[str, Outcome | BaseException]) -> Outcome:
    if "outcome" not in _scenario_runs:
        try:
            _scenario_runs["outcome"] = run(request, kafka_target, kafka_admin,
                                            tmp_path_factory.mktemp("unclean"))
        except Exception as exc:
            _scenario_runs["outcome"] = exc
            raise
    outcome = _scenario_runs["outcome"]
    if isinstance(outcome, BaseException):
        pytest.fail(f"the unclean-election scenario failed in an earlier test: {outcome!r}")
    return outcome
