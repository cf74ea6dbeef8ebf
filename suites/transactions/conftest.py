"""Fixtures of the transactions suite: ``txn`` (raw transactional producers and the
coordinator's view, see _helpers.py) and ``txn_topic`` (``make_topic`` that returns once every
broker knows the topic and each leader serves it, so a leader or a coordinator never answers
for a topic it has not taken on yet).

Every test module of the suite is marked ``requires_transactions`` (``pytestmark``): a target
that does not claim transactions (a recipe's broker without them) skips them all with that
reason; every built-in target has them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.cluster.targets import Target
from harness.raw_client import RawClient

from ..protocol._wire import Wire
from ._helpers import Transactions


@pytest.fixture
def txn(kafka_target: Target, kafka_raw_client: Callable[..., RawClient]) -> Transactions:
    return Transactions(Wire(kafka_raw_client, kafka_target.bootstrap.split(",")[0]),
                        kafka_raw_client)


@pytest.fixture(autouse=True)
def _transaction_apis(txn: Transactions) -> None:
    """Skip, naming the API, on a target that does not advertise the transaction APIs (a
    broker the harness only reaches by address is held to what it advertises)."""
    txn.require_transaction_apis()


@pytest.fixture
def txn_topic(txn: Transactions, make_topic: Callable[..., str]) -> Callable[..., str]:
    """``make_topic`` (same arguments), returning only once every broker knows the topic."""

    def make(*args: Any, **kwargs: Any) -> str:
        topic = make_topic(*args, **kwargs)
        txn.wire.wait_known_everywhere(topic)
        txn.wait_leaders_serve(topic)
        return topic

    return make
