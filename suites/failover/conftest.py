"""The failover suite's own fixture: ``steady_producer(topic, **options)``, a started
:class:`~suites.failover.placement.SteadyProducer` whose sending thread is stopped after the
test even when the test fails half-way (else it would write on into the next tests)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .placement import SteadyProducer


@pytest.fixture
def steady_producer(kafka_producer: Callable[..., Any]) -> Iterator[Callable[..., SteadyProducer]]:
    made: list[SteadyProducer] = []

    def make(topic: str, **options: Any) -> SteadyProducer:
        steady = SteadyProducer(kafka_producer, topic, **options)
        made.append(steady)
        return steady.start()

    yield make
    for steady in made:
        steady.halt()
