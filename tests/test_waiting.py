"""harness.waiting.wait_for: the one poll loop, what it returns, retries and reports."""

import pytest

from harness.waiting import ClusterWaitTimeout, wait_for


def test_returns_the_first_truthy_value_after_falsy_ones() -> None:
    answers = iter([None, 0, "", {"leader": 2}])
    assert wait_for(lambda: next(answers), 5, "a leader", interval=0) == {"leader": 2}


def test_an_exception_is_not_yet_by_default_and_named_at_the_deadline() -> None:
    calls = []

    def refused() -> bool:
        calls.append(1)
        raise ConnectionRefusedError("the broker is restarting")

    with pytest.raises(ClusterWaitTimeout) as timed_out:
        wait_for(refused, 0.2, "the broker to answer", interval=0.01)
    assert len(calls) > 1
    message = str(timed_out.value)
    assert "waiting for the broker to answer" in message
    assert "ConnectionRefusedError: the broker is restarting" in message


def test_retry_on_nothing_lets_a_predicates_assertion_end_the_wait_at_once() -> None:
    calls = []

    def judged() -> bool:
        calls.append(1)
        raise AssertionError("heartbeat answered ILLEGAL_GENERATION")

    with pytest.raises(AssertionError, match="ILLEGAL_GENERATION"):
        wait_for(judged, 30, "a rebalance", retry_on=())
    assert len(calls) == 1


def test_retry_on_names_what_is_retried_and_nothing_else() -> None:
    answers = iter([ConnectionError("refused"), KeyError("znode")])

    def flaky() -> bool:
        raise next(answers)

    with pytest.raises(KeyError):
        wait_for(flaky, 30, "a znode", interval=0, retry_on=(ConnectionError,))
