"""Fixtures of the protocol suite: ``wire`` (the target through the raw client, see _wire.py)
and ``new_topic`` (``make_topic`` that returns once every broker knows the topic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.targets import Target
from harness.raw_client import RawClient

from ._wire import Wire


@pytest.fixture
def wire(kafka_target: Target, kafka_raw_client: Callable[..., RawClient]) -> Wire:
    return Wire(kafka_raw_client, kafka_target.bootstrap.split(",")[0])


@pytest.fixture
def new_topic(wire: Wire, make_topic: Callable[..., str]) -> Callable[..., str]:
    """``make_topic`` (same arguments), returning only once every broker knows the topic."""

    def make(*args: Any, **kwargs: Any) -> str:
        topic = make_topic(*args, **kwargs)
        wire.wait_known_everywhere(topic)
        return topic

    return make
