"""Waiting for a condition that a cluster, a client or a process reaches by itself.

One poll loop for the whole harness, so every wait has a deadline and a message that names what
was awaited, the last value seen and the last error — instead of a hand-made loop per caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

POLL_INTERVAL_S = 0.1


class ClusterWaitTimeout(TimeoutError):
    """A condition the cluster was expected to reach did not hold in time."""


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = POLL_INTERVAL_S,
    context: str = "",
    retry_on: tuple[type[Exception], ...] = (Exception,),
) -> T:
    """Poll ``predicate`` until it returns something truthy, and return that (never None, so
    the type of what it returns drops the ``None`` a "not yet" answer carries). An IntEnum's
    zero is falsy — ``ErrorCode.none`` among them — so a predicate that returns an error code
    wraps it (in a tuple) or returns a comparison.

    An exception from ``predicate`` counts as "not yet" — a broker that is restarting refuses
    connections, a znode that is being rewritten is briefly missing — but the last one is kept
    for the message, which names ``what`` was awaited so a failing test says what it expected.
    ``retry_on`` names the exceptions that mean "not yet"; with ``()`` every one ends the wait
    at once, so an assertion inside ``predicate`` (a broker's answer no rule allows) fails the
    test when it happens instead of at the deadline.
    """
    deadline = time.monotonic() + timeout
    last_value: Any = None
    last_error: Exception | None = None
    while True:
        try:
            last_value = predicate()
        except retry_on as exc:  # reported below if it never clears
            last_error = exc
        else:
            if last_value:
                return last_value
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    details = [f"last result {last_value!r}"]
    if last_error is not None:
        details.append(f"last error {type(last_error).__name__}: {last_error}")
    if context:
        details.append(context)
    raise ClusterWaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}; "
                             + "; ".join(details))
